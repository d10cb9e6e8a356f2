-- gluon.nn convolution layers: Conv1D/2D/3D and Conv1DTranspose/2D/3D with
-- MXNet's arguments and defaults, deferred in_channels, fused relu, repr, gradients and
-- save/load under MXNet's parameter names.
local mx = require("mx")
local H = require("helpers.la")
local nd, nn, ag = mx.nd, mx.gluon.nn, mx.autograd

local FILE = "gluon_conv_layers_spec.lua"
local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(a, b))):item() end
local function rand(shape, seed) return H.rand(mx, shape, { seed = seed }):astype("float32") end

describe("nn.Conv1D/2D/3D", function()
  it("Conv2D equals the convolution op with its weight and bias (deferred in_channels)", function()
    local c = nn.Conv2D(6, 3, { padding = 1, strides = 2 })
    c:initialize(mx.init.Xavier())
    local x = rand({ 2, 4, 7, 7 }, 1)
    local y = c(x)
    assert.are.same({ 6, 4, 3, 3 }, c.weight:data():shape())
    assert.are.same({ 6 }, c.bias:data():shape())
    local want = nd.convolution(x, c.weight:data(), c.bias:data(), { kernel = { 3, 3 }, pad = { 1, 1 },
      stride = { 2, 2 }, num_filter = 6 })
    assert.equal(0, maxdiff(y, want))
    assert.are.same({ 2, 6, 4, 4 }, y:shape())
  end)

  it("activation='relu' is fused (relu of the plain layer); others apply after", function()
    local x = rand({ 1, 3, 5, 5 }, 2)
    local a = nn.Conv2D(4, { 3, 3 }, { activation = "relu", in_channels = 3 })
    local b = nn.Conv2D(4, { 3, 3 }, { in_channels = 3 })
    local t = nn.Conv2D(4, { 3, 3 }, { in_channels = 3, activation = "tanh" })
    for _, l in ipairs { a, b, t } do l:initialize() end
    b.weight:set_data(a.weight:data()); t.weight:set_data(a.weight:data())
    b.bias:set_data(rand({ 4 }, 3)); a.bias:set_data(b.bias:data()); t.bias:set_data(b.bias:data())
    assert.is_true(maxdiff(a(x), nd.relu(b(x))) < 1e-6)
    assert.is_true(maxdiff(t(x), nd.tanh(b(x))) < 1e-6)
  end)

  it("Conv1D and Conv3D: MXNet's defaults, groups, dilation and channel-last layouts", function()
    local c1 = nn.Conv1D(4, 3, { groups = 2, dilation = 2 })
    c1:initialize()
    assert.are.same({ 2, 4, 5 }, c1(rand({ 2, 6, 9 }, 1)):shape())
    assert.are.same({ 4, 3, 3 }, c1.weight:data():shape())
    local l = nn.Conv1D(4, 3, { layout = "NWC" })
    l:initialize()
    assert.are.same({ 2, 7, 4 }, l(rand({ 2, 9, 6 }, 1)):shape())
    assert.are.same({ 4, 3, 6 }, l.weight:data():shape())
    local c3 = nn.Conv3D(2, { 2, 3, 2 }, { strides = { 1, 2, 1 }, use_bias = false })
    c3:initialize()
    assert.are.same({ 1, 2, 3, 2, 3 }, c3(rand({ 1, 3, 4, 5, 4 }, 1)):shape())
    assert.is_nil(c3.bias)
    local h = nn.Conv2D(5, 3, { layout = "NHWC", padding = 1 })
    h:initialize()
    assert.are.same({ 2, 6, 6, 5 }, h(rand({ 2, 6, 6, 3 }, 4)):shape())
  end)

  it("gradients reach weight and bias (the op's backward)", function()
    local c = nn.Conv2D(3, 2, { in_channels = 2 })
    c:initialize()
    local x = rand({ 2, 2, 4, 4 }, 5)
    local y = ag.record(function() return nd.sum(c(x)) end)
    y:backward()
    local g = nd.ones({ 2, 3, 3, 3 })
    local dw = nd.convolution_backward_weight(g, x, { kernel = { 2, 2 } })
    assert.is_true(maxdiff(c.weight:grad(), dw) < 1e-5)
    assert.is_true(maxdiff(c.bias:grad(), nd.full({ 3 }, 18)) < 1e-5)
  end)

  it("repr like MXNet's", function()
    local c = nn.Conv2D(16, 3, { padding = 1, activation = "relu" })
    assert.equal("Conv2D(None -> 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), "
      .. "Activation(relu))", tostring(c))
    c:initialize()
    c(rand({ 1, 3, 4, 4 }, 1))
    assert.equal("Conv2D(3 -> 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), "
      .. "Activation(relu))", tostring(c))
    assert.equal("Conv1D(2 -> 4, kernel_size=(3,), stride=(2,), dilation=(2,), groups=2, "
      .. "bias=False)", tostring(nn.Conv1D(4, 3, { strides = 2, dilation = 2, groups = 2,
        use_bias = false, in_channels = 4 })))
    assert.equal("Conv2DTranspose(4 -> 8, kernel_size=(3, 2), stride=(2, 2), output_padding=(1, 1))",
      tostring(nn.Conv2DTranspose(4, { 3, 2 }, { strides = 2, output_padding = 1, in_channels = 8 })))
  end)

  it("saves and loads its parameters under MXNet's names (weight, bias)", function()
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(4, 3, { in_channels = 2 }), nn.Conv2DTranspose(2, 2, { strides = 2 }))
    net:initialize(mx.init.Xavier())
    local x = rand({ 1, 2, 6, 6 }, 7)
    local y = net(x)
    local tmp = os.tmpname()
    net:save_parameters(tmp)
    local saved = nd.load(tmp)
    for _, k in ipairs { "0.weight", "0.bias", "1.weight", "1.bias" } do assert.truthy(saved[k], k) end
    assert.are.same({ 4, 2, 2, 2 }, saved["1.weight"]:shape())
    local net2 = nn.HybridSequential()
    net2:add(nn.Conv2D(4, 3), nn.Conv2DTranspose(2, 2, { strides = 2 }))
    net2:load_parameters(tmp)
    os.remove(tmp)
    assert.equal(0, maxdiff(net2(x), y))
  end)

  it("rejects bad arguments at the user's line", function()
    local function fails(f, ...)
      local e = H.assert_error(f, FILE, ...)
      return e
    end
    fails(function(at) at() nn.Conv2D(8, 3, { strid = 1 }) end, "Conv2D", "unknown option 'strid'")
    fails(function(at) at() nn.Conv2D(8, { 3 }) end, "Conv2D", "kernel_size", "list of 2")
    fails(function(at) at() nn.Conv2D(0, 3) end, "Conv2D", "channels must be a positive integer")
    fails(function(at) at() nn.Conv2D(6, 3, { groups = 4 }) end, "Conv2D", "groups", "channels=6")
    fails(function(at) at() nn.Conv3D(6, 3, { layout = "NCHW" }) end, "Conv3D", "layout", "NCDHW")
    fails(function(at) at() nn.Conv2D(6, 3, { padding = -1 }) end, "Conv2D", "padding",
      "non-negative")
    fails(function(at) at() nn.Conv2D(6, 3, { activation = "swishy" }) end, "Conv2D", "swishy")
    local c = nn.Conv2D(4, 3)
    c:initialize()
    fails(function(at) at() c(nd.ones({ 2, 3, 5 })) end, "convolution", "data must be 4-d")
  end)
end)

describe("nn.Conv1DTranspose/2D/3D", function()
  it("equal the deconvolution op (output_padding = adj), deferred in_channels", function()
    local t = nn.Conv2DTranspose(4, 3, { strides = 2, padding = 1, output_padding = 1, groups = 2 })
    t:initialize(mx.init.Xavier())
    local x = rand({ 2, 6, 4, 5 }, 1)
    local y = t(x)
    assert.are.same({ 6, 2, 3, 3 }, t.weight:data():shape())
    assert.are.same({ 2, 4, 8, 10 }, y:shape())
    local want = nd.deconvolution(x, t.weight:data(), t.bias:data(), { kernel = { 3, 3 },
      stride = { 2, 2 }, pad = { 1, 1 }, adj = { 1, 1 }, num_filter = 4, num_group = 2, no_bias = false })
    assert.equal(0, maxdiff(y, want))
  end)

  it("1-D and 3-D shapes", function()
    local a = nn.Conv1DTranspose(3, 4, { strides = 2 })
    a:initialize()
    assert.are.same({ 1, 3, 12 }, a(rand({ 1, 2, 5 }, 1)):shape())
    local b = nn.Conv3DTranspose(2, 2, { use_bias = false })
    b:initialize()
    assert.are.same({ 1, 2, 3, 4, 3 }, b(rand({ 1, 3, 2, 3, 2 }, 1)):shape())
  end)
end)
