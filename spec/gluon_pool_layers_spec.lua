-- gluon.nn pooling layers: MaxPool/AvgPool/GlobalMaxPool/GlobalAvgPool 1-3D with
-- MXNet's constructor arguments, defaults and repr, against the pooling op they call.
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local H = require("helpers.la")

local FILE = "gluon_pool_layers_spec.lua"

local function values(shape)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local t = {}
  for i = 1, n do t[i] = math.sin(i * 0.91) * 3 end
  return nd.array(t):reshape(shape)
end

local function same(a, b)
  local fa, fb = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  assert.are.equal(#fb, #fa)
  for i = 1, #fa do assert(math.abs(fa[i] - fb[i]) <= 1e-6, "element " .. i) end
end

describe("gluon pooling layers", function()
  it("every class exists for 1, 2 and 3 dims", function()
    for _, k in ipairs({ "MaxPool", "AvgPool", "GlobalMaxPool", "GlobalAvgPool" }) do
      for n = 1, 3 do assert.is_not_nil(nn[k .. n .. "D"], k .. n .. "D") end
    end
  end)

  it("defaults: pool size 2, strides = pool size, no padding, valid convention", function()
    local x = values({ 2, 3, 7, 9 })
    same(nn.MaxPool2D():forward(x), nd.pooling(x, { kernel = { 2, 2 }, stride = { 2, 2 } }))
    same(nn.AvgPool1D():forward(values({ 2, 3, 7 })),
      nd.pooling(values({ 2, 3, 7 }), { kernel = { 2 }, stride = { 2 }, pool_type = "avg" }))
    local x3 = values({ 1, 2, 4, 5, 6 })
    same(nn.MaxPool3D():forward(x3), nd.pooling(x3, { kernel = { 2, 2, 2 }, stride = { 2, 2, 2 } }))
  end)

  it("pool_size as number, list or option; strides, padding, ceil_mode, count_include_pad", function()
    local x = values({ 1, 2, 8, 7 })
    local want = nd.pooling(x, { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 },
      pooling_convention = "full", pool_type = "avg", count_include_pad = false })
    local opts = { strides = 2, padding = 1, ceil_mode = true, count_include_pad = false }
    same(nn.AvgPool2D(3, opts):forward(x), want)
    same(nn.AvgPool2D({ 3, 3 }, opts):forward(x), want)
    opts.pool_size = 3
    same(nn.AvgPool2D(opts):forward(x), want)
    local y = nn.MaxPool2D({ 3, 2 }, { strides = { 1, 2 } }):forward(x)
    assert.are.same({ 1, 2, 6, 3 }, y:shape())
    assert.are.same({ 1, 2, 4, 4 }, nn.MaxPool2D(3, { strides = 2, ceil_mode = true })
      :forward(values({ 1, 2, 9, 8 })):shape())
  end)

  it("global pools reduce every spatial dim; layouts NHWC etc. pool the right axes", function()
    local x = values({ 2, 3, 5, 4 })
    same(nn.GlobalAvgPool2D():forward(x), nd.mean(x, { axis = { 3, 4 }, keepdims = true }))
    same(nn.GlobalMaxPool1D():forward(values({ 2, 3, 5 })),
      nd.max(values({ 2, 3, 5 }), { axis = 3, keepdims = true }))
    assert.are.same({ 2, 1, 1, 1, 3 },
      nn.GlobalMaxPool3D({ layout = "NDHWC" }):forward(values({ 2, 4, 5, 2, 3 })):shape())
    local xl = nd.transpose(x, { axes = { 1, 3, 4, 2 } })
    same(nn.MaxPool2D(2, { layout = "NHWC" }):forward(xl),
      nd.transpose(nn.MaxPool2D(2):forward(x), { axes = { 1, 3, 4, 2 } }))
  end)

  it("prints like MXNet", function()
    assert.are.equal("MaxPool2D(size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False, "
      .. "global_pool=False, pool_type=max, layout=NCHW)", tostring(nn.MaxPool2D()))
    assert.are.equal("AvgPool1D(size=(3,), stride=(2,), padding=(1,), ceil_mode=True, "
      .. "global_pool=False, pool_type=avg, layout=NCW)",
      tostring(nn.AvgPool1D(3, { strides = 2, padding = 1, ceil_mode = true })))
    assert.are.equal("GlobalAvgPool2D(size=(1, 1), stride=(1, 1), padding=(0, 0), "
      .. "ceil_mode=False, global_pool=True, pool_type=avg, layout=NCHW)",
      tostring(nn.GlobalAvgPool2D()))
  end)

  it("gradients flow through a layer", function()
    local x = values({ 1, 1, 4, 4 })
    x:attach_grad()
    mx.autograd.record(function() return nn.AvgPool2D(2):forward(x) end):backward()
    same(x:grad(), nd.ones({ 1, 1, 4, 4 }) * 0.25)
  end)

  it("bad arguments are errors at the caller's line", function()
    H.assert_error(function(m) m() nn.MaxPool2D(2, { stride = 2 }) end, FILE, "MaxPool2D",
      "unknown option 'stride'")
    H.assert_error(function(m) m() nn.MaxPool2D({ 2, 2, 2 }) end, FILE, "MaxPool2D",
      "pool_size must be a number or a list of 2")
    H.assert_error(function(m) m() nn.MaxPool1D(0) end, FILE, "integers >= 1")
    H.assert_error(function(m) m() nn.AvgPool2D(2, { padding = -1 }) end, FILE, "padding",
      ">= 0")
    H.assert_error(function(m) m() nn.MaxPool2D(2, { layout = "NCW" }) end, FILE,
      "layout must be NCHW or NHWC")
    H.assert_error(function(m) m() nn.MaxPool2D(2, { count_include_pad = false }) end, FILE,
      "unknown option 'count_include_pad'")
    H.assert_error(function(m) m() nn.GlobalAvgPool2D({ pool_size = 2 }) end, FILE,
      "unknown option 'pool_size'")
    H.assert_error(function(m) m() nn.MaxPool2D(2, { pool_size = 2 }) end, FILE, "given twice")
    local p = nn.MaxPool2D()
    H.assert_error(function(m) m() p:forward(values({ 1, 2, 3 })) end, FILE, "MaxPool2D",
      "expected a 4-d input (NCHW), got shape (1, 2, 3)")
    H.assert_error(function(m) m() p:forward(values({ 1, 2, 3, 3 }):astype("int32")) end, FILE,
      "MaxPool2D: input must be a floating-point tensor, got int32")
    H.assert_error(function(m) m() p:forward(values({ 1, 2, 1, 1 })) end, FILE, "pooling",
      "kernel size 2 exceeds the input 1")
    H.assert_error(function(m) m() p:forward(3) end, FILE, "MaxPool2D: input must be a tensor")
  end)
end)
