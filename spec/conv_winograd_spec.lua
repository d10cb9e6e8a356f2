-- Winograd's F(2x2, 3x3) forward convolution (kernels/dnnl/conv_winograd.c), which
-- inference graphs with constant weights (hybridized blocks called outside recording)
-- run for 3x3 stride-1 convolutions: forced on with MX_WINOGRAD=1 (read when a graph is
-- built), checked against the reference loops (mx.nd._ref) on odd sizes and paddings,
-- bias, fused relu / relu6, the fused residual (convolution_sum), chains whose inputs are
-- in oneDNN's blocked layout, batches, tiles in several cache-sized blocks, NaN, new
-- weights, and the cases it leaves to the direct kernel.
local mx = require("mx")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
local nd, nn = mx.nd, mx.gluon.nn
local HB = mx.gluon.HybridBlock

pcall(ffi.cdef, "int setenv(const char *, const char *, int); int unsetenv(const char *);")

local function runs() return tonumber(C.mx_conv_winograd_runs()) end
local function relmax(a, b)
  local d = nd.max(nd.abs(nd.sub(a, b))):item()
  return d / math.max(nd.max(nd.abs(b)):item(), 1e-30)
end

-- the block's output from its graph built under MX_WINOGRAD=mode (the first call after
-- hybridize traces the block eagerly, the second builds and runs the graph)
local function frozen_run(net, x, mode)
  ffi.C.setenv("MX_WINOGRAD", mode, 1)
  local ok, y = pcall(function()
    net:hybridize { active = false }
    net:hybridize()
    net(x):wait_to_read()
    return net(x)
  end)
  ffi.C.unsetenv("MX_WINOGRAD")
  assert(ok, y)
  y:wait_to_read()
  return y
end

local function conv_ref(x, w, b, pad, act)
  local o = { kernel = { 3, 3 }, pad = { pad, pad }, num_filter = w:shape()[1], act_type = act,
    no_bias = b == nil }
  return b and nd._ref.convolution(x, w, b, o) or nd._ref.convolution(x, w, o)
end

local function conv_net(C_in, F, pad, opts)
  opts = opts or {}
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(F, 3, { padding = pad, in_channels = C_in, use_bias = opts.bias ~= false,
    activation = opts.activation }))
  net:initialize(mx.init.Uniform(0.5))
  return net, net[1]
end

describe("convolution on Winograd F(2x2, 3x3)", function()
  local CASES = {
    { x = { 1, 8, 9, 11 }, F = 16, pad = 1 },
    { x = { 2, 16, 7, 7 }, F = 8, pad = 1 },
    { x = { 1, 8, 10, 6 }, F = 24, pad = 0 },
    { x = { 3, 24, 5, 8 }, F = 16, pad = 2, bias = false },
    { x = { 1, 32, 14, 14 }, F = 32, pad = 1, activation = "relu" },
    { x = { 2, 8, 4, 5 }, F = 8, pad = 0 },
    -- more tiles than one block holds (2 MB of V and M: 2048 tiles at 8 + 8 channels),
    -- so blocks that end inside an image and a last, shorter block
    { x = { 3, 8, 61, 67 }, F = 8, pad = 1 },
    { x = { 2, 16, 45, 47 }, F = 24, pad = 0, activation = "relu" },
  }
  for i, c in ipairs(CASES) do
    local label = table.concat(c.x, "x") .. " -> " .. c.F .. " filters, pad " .. c.pad ..
      (c.bias == false and ", no bias" or "") .. (c.activation and ", " .. c.activation or "")
    it("equals the reference loops: " .. label, function()
      mx.random.seed(i)
      local net, conv = conv_net(c.x[2], c.F, c.pad, c)
      local x = nd.random.uniform(-1, 1, c.x)
      local r0 = runs()
      local y = frozen_run(net, x, "1")
      assert.equal(1, runs() - r0)
      local b = c.bias ~= false and conv.bias:data() or nil
      local want = conv_ref(x, conv.weight:data(), b, c.pad, c.activation)
      assert.same(want:shape(), y:shape())
      assert.is_true(relmax(y, want) < 1e-5, "relative error " .. relmax(y, want))
    end)
  end

  it("act_type relu6 (the fused clip) equals the reference's", function()
    mx.random.seed(7)
    local x = nd.random.uniform(-4, 4, { 1, 8, 6, 6 })
    local w = nd.random.uniform(-1, 1, { 8, 8, 3, 3 })
    local B = HB:extend("Relu6Conv")
    function B:__init() HB.__init(self); self.w = mx.gluon.Parameter("w", { shape = { 8, 8, 3, 3 } }) end
    function B:forward(a)
      return nd.convolution(a, self.w:data(), { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 8,
        act_type = "relu6", no_bias = true })
    end
    local net = B()
    net:initialize()
    net.w:set_data(w)
    local r0 = runs()
    local y = frozen_run(net, x, "1")
    assert.equal(1, runs() - r0)
    local want = conv_ref(x, w, nil, 1, "relu6")
    assert.is_true(relmax(y, want) < 1e-5)
    assert.is_true(nd.max(y):item() <= 6)
  end)

  it("a residual block (conv -> relu -> conv + x -> relu: convolution_sum) on blocked inputs", function()
    mx.random.seed(8)
    local R = HB:extend("Residual")
    function R:__init()
      HB.__init(self)
      self.c1 = nn.Conv2D(16, 3, { padding = 1, in_channels = 16, activation = "relu" })
      self.c2 = nn.Conv2D(16, 3, { padding = 1, in_channels = 16 })
    end
    function R:forward(a) return nd.relu(nd.add(self.c2(self.c1(a)), a)) end
    local net = R()
    net:initialize(mx.init.Uniform(0.3))
    local x = nd.random.uniform(-1, 1, { 2, 16, 9, 9 })
    local r0 = runs()
    local y = frozen_run(net, x, "1")
    assert.equal(2, runs() - r0)
    local h = conv_ref(x, net.c1.weight:data(), net.c1.bias:data(), 1, "relu")
    local want = nd._ref.relu(nd.add(conv_ref(h, net.c2.weight:data(), net.c2.bias:data(), 1), x))
    assert.is_true(relmax(y, want) < 1e-5, "relative error " .. relmax(y, want))
    -- the same graph with Winograd off: the direct kernels agree
    local direct = frozen_run(net, x, "0")
    assert.is_true(relmax(direct, y) < 1e-5)
  end)

  it("a chain with channel counts that are not whole 16-channel blocks (AVX-512's)", function()
    mx.random.seed(10)
    local net = nn.HybridSequential()
    net:add(nn.Conv2D(24, 3, { padding = 1, in_channels = 8, activation = "relu" }),
      nn.Conv2D(16, 3, { padding = 1, in_channels = 24 }), nn.Conv2D(8, 1, { in_channels = 16 }))
    net:initialize(mx.init.Uniform(0.5))
    local x = nd.random.uniform(-1, 1, { 2, 8, 7, 9 })
    local r0 = runs()
    local y = frozen_run(net, x, "1")
    assert.equal(2, runs() - r0)
    local h = conv_ref(x, net[1].weight:data(), net[1].bias:data(), 1, "relu")
    h = conv_ref(h, net[2].weight:data(), net[2].bias:data(), 1)
    local want = nd._ref.convolution(h, net[3].weight:data(), net[3].bias:data(),
      { kernel = { 1, 1 }, num_filter = 8 })
    assert.is_true(relmax(y, want) < 1e-5, "relative error " .. relmax(y, want))
  end)

  it("keeps NaN where the direct convolution has it", function()
    local net = conv_net(8, 8, 1)
    local x = nd.random.uniform(-1, 1, { 1, 8, 6, 6 })
    local v = x:totable()
    v[1][3][2][4] = 0 / 0
    x = nd.array(v)
    local y = frozen_run(net, x, "1"):totable()[1]
    local nan = 0
    for f = 1, 8 do
      for h = 1, 6 do for w = 1, 6 do if y[f][h][w] ~= y[f][h][w] then nan = nan + 1 end end end
    end
    -- every output whose 3x3 window holds the NaN: 3 x 3 positions per filter
    assert.equal(8 * 9, nan)
  end)

  it("new weights (set_data) rebuild the transformed filter", function()
    mx.random.seed(9)
    local net, conv = conv_net(8, 8, 1)
    local x = nd.random.uniform(-1, 1, { 1, 8, 5, 5 })
    ffi.C.setenv("MX_WINOGRAD", "1", 1)
    local ok, err = pcall(function()
      net:hybridize()
      net(x):wait_to_read()
      net(x):wait_to_read()
      conv.weight:set_data(nd.random.uniform(-1, 1, { 8, 8, 3, 3 }))
      local y = net(x)
      local want = conv_ref(x, conv.weight:data(), conv.bias:data(), 1)
      assert.is_true(relmax(y, want) < 1e-5)
    end)
    ffi.C.unsetenv("MX_WINOGRAD")
    assert(ok, err)
  end)

  it("leaves other convolutions to the direct kernel (channels not divisible by 8, strides)", function()
    for _, c in ipairs({ { C = 3, F = 8, s = 1 }, { C = 8, F = 12, s = 1 }, { C = 8, F = 8, s = 2 } }) do
      local net = nn.HybridSequential()
      net:add(nn.Conv2D(c.F, 3, { padding = 1, strides = c.s, in_channels = c.C }))
      net:initialize()
      local x = nd.random.uniform(-1, 1, { 1, c.C, 8, 8 })
      local r0 = runs()
      local y = frozen_run(net, x, "1")
      assert.equal(0, runs() - r0)
      local o = { kernel = { 3, 3 }, pad = { 1, 1 }, stride = { c.s, c.s }, num_filter = c.F }
      assert.is_true(relmax(y, nd._ref.convolution(x, net[1].weight:data(), net[1].bias:data(), o))
        < 1e-5)
    end
  end)

  it("is off with MX_WINOGRAD=0, and eager calls never take it", function()
    local net = conv_net(8, 8, 1)
    local x = nd.random.uniform(-1, 1, { 1, 8, 6, 6 })
    local r0 = runs()
    frozen_run(net, x, "0")
    nd.convolution(x, net[1].weight:data(), net[1].bias:data(),
      { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 8 }):wait_to_read()
    assert.equal(0, runs() - r0)
  end)
end)
