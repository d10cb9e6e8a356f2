-- The conv family: convolution and deconvolution, 1-D to 3-D, on oneDNN
-- (float32) against the reference loops (every shape, stride, dilation, group and
-- padding case), against PyTorch (values and gradients, spec/fixtures/conv_torch.lua by
-- tools/fixtures/make_conv_torch.py), through oneDNN's blocked layout, partial
-- inference, and the errors users see.
local mx = require("mx")
local H = require("helpers.la")
local nd, ag = mx.nd, mx.autograd
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

local FILE = "conv_spec.lua"

local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(a, b))):item() end
local function rand(shape, seed, dtype)
  return H.rand(mx, shape, { seed = seed }):astype(dtype or "float32")
end
local function relmax(a, b) return maxdiff(a, b) / math.max(nd.max(nd.abs(b)):item(), 1e-30) end

-- forward and both gradients, oneDNN (mx.nd) against ref (mx.nd._ref), float32
local CONV = {
  { x = { 2, 3, 7, 9 }, w = { 4, 3, 3, 3 }, o = { kernel = { 3, 3 }, pad = { 1, 1 } } },
  { x = { 2, 4, 7, 9 }, w = { 6, 2, 3, 2 },
    o = { kernel = { 3, 2 }, stride = { 2, 1 }, dilate = { 1, 2 }, num_group = 2 } },
  { x = { 2, 4, 8 }, w = { 4, 1, 3 }, o = { kernel = { 3 }, num_group = 4, pad = { 2 } } },
  { x = { 1, 2, 5, 6, 4 }, w = { 3, 2, 2, 3, 2 }, o = { kernel = { 2, 3, 2 }, stride = { 2, 1, 2 } } },
  { x = { 2, 7, 9, 3 }, w = { 4, 3, 3, 3 },
    o = { kernel = { 3, 3 }, pad = { 1, 1 }, layout = "NHWC", act_type = "relu" } },
  { x = { 2, 7, 9, 4 }, w = { 6, 3, 2, 2 },
    o = { kernel = { 3, 2 }, stride = { 2, 2 }, num_group = 2, layout = "NHWC" } },
  { x = { 2, 6, 6, 6 }, w = { 6, 6, 3, 3 }, o = { kernel = { 3, 3 }, stride = { 2, 2 } } },
  { x = { 3, 16, 13, 11 }, w = { 32, 16, 3, 3 },
    o = { kernel = { 3, 3 }, pad = { 1, 1 }, act_type = "relu", no_bias = true } },
  { x = { 2, 5, 9, 10, 7 }, w = { 5, 1, 3, 3, 3 },
    o = { kernel = { 3, 3, 3 }, num_group = 5, pad = { 1, 1, 1 }, dilate = { 2, 1, 1 } } },
}

local DECONV = {
  { x = { 2, 3, 4, 5 }, w = { 3, 4, 3, 3 }, o = { kernel = { 3, 3 }, num_filter = 4, no_bias = false } },
  { x = { 2, 4, 4, 5 }, w = { 4, 3, 3, 2 }, o = { kernel = { 3, 2 }, stride = { 2, 2 }, pad = { 1, 0 },
    adj = { 1, 1 }, num_filter = 6, num_group = 2, no_bias = false } },
  { x = { 2, 4, 5 }, w = { 4, 2, 3 }, o = { kernel = { 3 }, stride = { 2 }, target_shape = { 12 },
    num_filter = 2 } },
  { x = { 1, 2, 3, 3, 2 }, w = { 2, 2, 2, 2, 2 }, o = { kernel = { 2, 2, 2 }, stride = { 2, 1, 2 },
    dilate = { 1, 2, 1 }, num_filter = 2 } },
  { x = { 2, 4, 5, 3 }, w = { 3, 3, 3, 4 }, o = { kernel = { 3, 3 }, stride = { 2, 1 },
    layout = "NHWC", num_filter = 4, no_bias = false } },
}

local function label(c)
  return table.concat(c.x, "x") .. " * " .. table.concat(c.w, "x")
end

describe("convolution", function()
  for i, c in ipairs(CONV) do
    it("oneDNN matches ref, forward and gradients: " .. label(c), function()
      local x, w = rand(c.x, i), rand(c.w, 100 + i)
      local b = not c.o.no_bias and rand({ c.w[1] }, 200 + i) or nil
      local y = b and nd.convolution(x, w, b, c.o) or nd.convolution(x, w, c.o)
      local r = b and nd._ref.convolution(x, w, b, c.o) or nd._ref.convolution(x, w, c.o)
      assert.are.same(r:shape(), y:shape())
      assert.is_true(relmax(y, r) < 1e-5)
      local g = rand(y:shape(), 300 + i)
      assert.is_true(relmax(nd.convolution_backward_data(g, w, x, c.o),
        nd._ref.convolution_backward_data(g, w, x, c.o)) < 1e-5)
      assert.is_true(relmax(nd.convolution_backward_weight(g, x, c.o),
        nd._ref.convolution_backward_weight(g, x, c.o)) < 1e-5)
    end)
  end

  it("float64 runs the reference loops (bit-equal to nd._ref)", function()
    local c = CONV[2]
    local x, w = rand(c.x, 1, "float64"), rand(c.w, 2, "float64")
    local b = rand({ c.w[1] }, 3, "float64")
    assert.equal(0, maxdiff(nd.convolution(x, w, b, c.o), nd._ref.convolution(x, w, b, c.o)))
  end)

  it("act_type='relu' equals relu of the plain convolution", function()
    local x, w, b = rand({ 2, 3, 6, 6 }, 1), rand({ 4, 3, 3, 3 }, 2), rand({ 4 }, 3)
    local o = { kernel = { 3, 3 }, pad = { 1, 1 } }
    local y = nd.relu(nd.convolution(x, w, b, o))
    o.act_type = "relu"
    assert.is_true(maxdiff(nd.convolution(x, w, b, o), y) < 1e-6)
    assert.is_true(nd.min(nd.convolution(x, w, b, o)):item() >= 0)
  end)

  it("act_type='relu6' equals clip(convolution, 0, 6), on oneDNN and the reference loops", function()
    local x, w, b = rand({ 2, 3, 6, 6 }, 4), rand({ 4, 3, 3, 3 }, 5), rand({ 4 }, 6)
    x = x * 4
    local o = { kernel = { 3, 3 }, pad = { 1, 1 } }
    local y = nd.clip(nd.convolution(x, w, b, o), { a_min = 0, a_max = 6 })
    o.act_type = "relu6"
    assert.is_true(maxdiff(nd.convolution(x, w, b, o), y) < 1e-5)
    assert.is_true(maxdiff(nd._ref.convolution(x, w, b, o), y) < 1e-5)
    local r = rand({ 2, 4, 6, 6 }, 7)
    local ys = nd.clip(nd.convolution(x, w, b, { kernel = { 3, 3 }, pad = { 1, 1 } }) + r,
      { a_min = 0, a_max = 6 })
    assert.is_true(maxdiff(nd.convolution_sum(x, w, r, b, o), ys) < 1e-5)
  end)

  it("takes MXNet's name and attributes (Convolution; cudnn_* and workspace ignored)", function()
    local x, w = rand({ 1, 2, 5, 5 }, 1), rand({ 3, 2, 3, 3 }, 2)
    local o = { kernel = { 3, 3 }, num_filter = 3, no_bias = true }
    local y = nd.convolution(x, w, o)
    o.cudnn_off, o.cudnn_tune, o.workspace = true, "fastest", 512
    assert.equal(0, maxdiff(nd.convolution(x, w, o), y))
    assert.is_true(C.mx_op_find("Convolution") == C.mx_op_find("convolution"))
    assert.is_true(C.mx_op_find("Deconvolution") == C.mx_op_find("deconvolution"))
  end)

  it("infers the weight and bias shapes from data (partial inference)", function()
    local infer = require("mx.nd.infer").infer
    local op = lib.ops_by_name.convolution
    local r = infer(op, { kernel = { 3, 2 }, num_filter = 6, num_group = 2 },
      { { shape = { 2, 4, 7, 9 }, dtype = "float32" }, { shape = { 0, 0, 0, 0 }, dtype = "float32" },
        { shape = { 0 }, dtype = "float32" } }, 1)
    assert.are.same({ 6, 2, 3, 2 }, r.inputs[2].shape)
    assert.are.same({ 6 }, r.inputs[3].shape)
    r = infer(op, { kernel = { 3 }, num_filter = 5, layout = "NWC", no_bias = true },
      { { shape = { 2, 8, 3 }, dtype = "float32" }, { shape = { 0, 0, 0 }, dtype = "float32" } }, 1)
    assert.are.same({ 5, 3, 3 }, r.inputs[2].shape)
  end)

  it("gradients through autograd (f32, oneDNN) match the float64 reference", function()
    local x64, w64, b64 = rand({ 2, 3, 6, 5 }, 1, "float64"), rand({ 4, 3, 3, 3 }, 2, "float64"),
      rand({ 4 }, 3, "float64")
    local o = { kernel = { 3, 3 }, stride = { 2, 1 }, pad = { 1, 1 }, act_type = "relu" }
    local grads = {}
    for _, dt in ipairs { "float32", "float64" } do
      local x, w, b = x64:astype(dt), w64:astype(dt), b64:astype(dt)
      x:attach_grad(); w:attach_grad(); b:attach_grad()
      ag.record(function()
        local y = nd.convolution(x, w, b, o)
        return nd.sum(nd.mul(y, y))
      end):backward()
      grads[dt] = { x:grad():astype("float64"), w:grad():astype("float64"), b:grad():astype("float64") }
    end
    for j = 1, 3 do assert.is_true(relmax(grads.float32[j], grads.float64[j]) < 1e-4) end
  end)
end)

describe("deconvolution", function()
  for i, c in ipairs(DECONV) do
    it("oneDNN matches ref: " .. label(c), function()
      local x, w = rand(c.x, i), rand(c.w, 100 + i)
      local b = c.o.no_bias == false and rand({ c.o.num_filter }, 200 + i) or nil
      local y = b and nd.deconvolution(x, w, b, c.o) or nd.deconvolution(x, w, c.o)
      local r = b and nd._ref.deconvolution(x, w, b, c.o) or nd._ref.deconvolution(x, w, c.o)
      assert.are.same(r:shape(), y:shape())
      assert.is_true(relmax(y, r) < 1e-5)
    end)
  end

  it("target_shape gives that output size (pad and adj derived)", function()
    for _, t in ipairs { 9, 10, 11 } do
      local y = nd.deconvolution(rand({ 1, 2, 5 }, 1), rand({ 2, 3, 3 }, 2),
        { kernel = { 3 }, stride = { 2 }, target_shape = { t }, num_filter = 3 })
      assert.are.same({ 1, 3, t }, y:shape())
    end
  end)

  it("is the data gradient of the convolution with the same params", function()
    local g, w = rand({ 2, 4, 4, 4 }, 1), rand({ 4, 3, 3, 3 }, 2)
    local o = { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 } }
    local x = nd.zeros({ 2, 3, 8, 8 })
    local d = nd.deconvolution(g, w, { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 },
      adj = { 1, 1 }, num_filter = 3 })
    assert.is_true(relmax(d, nd.convolution_backward_data(g, w, x, o)) < 1e-6)
  end)
end)

describe("conv against PyTorch (spec/fixtures/conv_torch.lua)", function()
  local fx = dofile("spec/fixtures/conv_torch.lua")
  local function t(v, dt) return nd.array(v.data, { dtype = "float64" }):reshape(v.shape):astype(dt) end
  local function flat(v) return nd.array(v, { dtype = "float64" }) end
  for _, c in ipairs(fx) do
    for _, dt in ipairs { "float64", "float32" } do
      it(c.name .. " (" .. dt .. "): values and gradients", function()
        local tol = dt == "float64" and 1e-10 or 1e-4
        local x, w, b, g = t(c.x, dt), t(c.w, dt), t(c.b, dt), t(c.g, dt)
        x:attach_grad(); w:attach_grad(); b:attach_grad()
        local y = ag.record(function() return nd[c.op](x, w, b, c.opts) end)
        y:backward(g)
        assert.is_true(relmax(y:astype("float64"), t(c.y, "float64")) < tol)
        assert.is_true(relmax(x:grad():astype("float64"):reshape({ -1 }), flat(c.dx)) < tol)
        assert.is_true(relmax(w:grad():astype("float64"):reshape({ -1 }), flat(c.dw)) < tol)
        assert.is_true(relmax(b:grad():astype("float64"), flat(c.db)) < tol)
      end)
    end
  end
end)

describe("conv on oneDNN's blocked layout", function()
  local HAVE = false
  local out = ffi.new("mx_tensor*[1]")
  if C.mx_tensor_to_layout(nd.ones({ 1, 1, 1, 1 }).h, C.MX_LAYOUT_ONEDNN, "nChw16c", out) == 0 then
    HAVE = true
    nd._wrap(out[0])
  end
  local function blocked(x, fmt)
    assert(C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, fmt, out) == 0)
    return nd._wrap(out[0])
  end
  local function reorders() return tonumber(C.mx_layout_reorders()) end

  it("a blocked input gives a blocked output; conv -> relu -> conv reorders only weights", function()
    if not HAVE then return pending("built without oneDNN") end
    local x = rand({ 2, 16, 9, 9 }, 1)
    local w1, w2 = rand({ 32, 16, 3, 3 }, 2), rand({ 16, 32, 3, 3 }, 3)
    local b1 = rand({ 32 }, 4)
    local o = { kernel = { 3, 3 }, pad = { 1, 1 } }
    local want = nd.convolution(nd.relu(nd.convolution(x, w1, b1, o)), w2, { kernel = { 3, 3 },
      no_bias = true })
    local xb = blocked(x, "nChw16c")
    nd.waitall()
    local r0 = reorders()
    -- the first conv may reorder its input once (to the layout its primitive chose) and
    -- its weights; after it the chain stays in that layout: relu none, the next conv
    -- only its weights
    local y1 = nd.convolution(xb, w1, b1, o)
    assert.equal(1, C.mx_tensor_layout(y1.h))
    nd.waitall()
    local r1 = reorders()
    assert.is_true(r1 - r0 <= 2, "first conv reorders: " .. (r1 - r0))
    local y2 = nd.relu(y1)
    assert.equal(1, C.mx_tensor_layout(y2.h))
    local y3 = nd.convolution(y2, w2, { kernel = { 3, 3 }, no_bias = true })
    assert.equal(1, C.mx_tensor_layout(y3.h))
    nd.waitall()
    assert.equal(1, reorders() - r1) -- w2
    assert.is_true(relmax(y3, want) < 1e-5)
  end)

  -- Whether oneDNN has blocked backward-data convolutions here: its jit kernels for them
  -- start at AVX2 (below that, and under ONEDNN_MAX_CPU_ISA=sse41, it picks row-major
  -- gemm-based ones). nil when the CPU's flags cannot be read.
  local function blocked_bwd_data()
    local cap = (os.getenv("ONEDNN_MAX_CPU_ISA") or os.getenv("DNNL_MAX_CPU_ISA") or ""):lower()
    if cap == "sse41" or cap == "avx" then return false end
    local f = io.open("/proc/cpuinfo")
    if not f then return nil end
    local info = f:read("*a")
    f:close()
    return info:find("%savx2%s") ~= nil
  end

  it("takes blocked inputs in a layout other than the primitive's, and in the backward ops", function()
    if not HAVE then return pending("built without oneDNN") end
    -- 16 channels a group: whole blocks on AVX2 (8 channels) and AVX-512 (16), so the
    -- primitives are blocked on both; nChw4c is none of the primitives' layouts on any ISA
    local x, w = rand({ 2, 32, 7, 7 }, 1), rand({ 32, 16, 3, 3 }, 2)
    local o = { kernel = { 3, 3 }, num_group = 2, no_bias = true }
    local y = nd.convolution(x, w, o)
    assert.is_true(relmax(nd.convolution(blocked(x, "nChw4c"), w, o), y) < 1e-6)
    local g = rand(y:shape(), 3)
    assert.is_true(relmax(nd.convolution_backward_weight(blocked(g, "nChw4c"), blocked(x, "nChw4c"), o),
      nd._ref.convolution_backward_weight(g, x, o)) < 1e-5)
    -- the data gradient of a blocked ograd stays blocked (the backward chain keeps it)
    -- where oneDNN's primitive is blocked; a row-major primitive writes row-major
    local dx = nd.convolution_backward_data(blocked(g, "nChw4c"), w, x, o)
    local want = blocked_bwd_data()
    if want ~= nil then assert.equal(want and 1 or 0, C.mx_tensor_layout(dx.h)) end
    assert.is_true(relmax(dx, nd._ref.convolution_backward_data(g, w, x, o)) < 1e-5)
  end)
end)

-- Conv -> BatchNorm -> Conv -> BatchNorm, the chain of every ResNet stem, on oneDNN's
-- blocked layout: channel counts that fill their 8- or 16-channel blocks (16) and counts
-- that leave padded channels in them (3, 4, 12, 20: AVX2 blocks by 8, AVX-512 by 16). The
-- padding must stay zero: batch_norm's primitive wrote NaN there, which the next
-- convolution's backward data summed into every gradient below it.
describe("conv -> batch_norm chains on padded blocked layouts", function()
  local o = { kernel = { 3, 3 }, pad = { 1, 1 }, no_bias = true }
  local bo = { fix_gamma = false }
  local function close(a, b, what)
    local r = relmax(a, b)
    assert.is_true(r < 1e-4, what .. ": relative error " .. tostring(r))
  end
  -- the forward and every gradient of the chain, op by op in namespace F (nd or nd._ref)
  local function chain(F, x, w1, w2, p, head)
    local function bn(v, gam, bet, eps)
      local c = v:shape()[2]
      return F.batch_norm(v, gam, bet, nd.zeros({ c }), nd.ones({ c }),
        { training = true, fix_gamma = false, eps = eps })
    end
    local a1 = F.convolution(x, w1, o)
    local b1, m1, i1 = bn(a1, p.g1, p.be1, p.eps)
    local a2 = F.convolution(b1, w2, o)
    local b2, m2, i2 = bn(a2, p.g2, p.be2, p.eps)
    local d_a2, dg2, db2 = F.batch_norm_backward(head, a2, p.g2, m2, i2, bo)
    local d_b1 = F.convolution_backward_data(d_a2, w2, b1, o)
    local d_a1, dg1, db1 = F.batch_norm_backward(d_b1, a1, p.g1, m1, i1, bo)
    return { y = b2, dx = F.convolution_backward_data(d_a1, w1, x, o),
      dw1 = F.convolution_backward_weight(d_a1, x, o), dw2 = F.convolution_backward_weight(d_a2, b1, o),
      dg1 = dg1, db1 = db1, dg2 = dg2, db2 = db2 }
  end
  local KEYS = { "y", "dx", "dw1", "dw2", "dg1", "db1", "dg2", "db2" }
  local function inputs(c)
    return rand({ 2, 3, 6, 6 }, 1), rand({ c, 3, 3, 3 }, 2), rand({ c, c, 3, 3 }, 3),
      { g1 = rand({ c }, 4), be1 = rand({ c }, 5), g2 = rand({ c }, 6), be2 = rand({ c }, 7) },
      rand({ 2, c, 6, 6 }, 8)
  end

  for _, c in ipairs({ 3, 4, 12, 16, 20 }) do
    it(c .. " channels: the ops' gradients are finite and equal the reference kernels'", function()
      local x, w1, w2, p, head = inputs(c)
      for _, eps in ipairs({ 1e-3, 0 }) do -- eps 0: the padded channels' variance is 0 too
        p.eps = eps
        local got, want = chain(nd, x, w1, w2, p, head), chain(nd._ref, x, w1, w2, p, head)
        for _, k in ipairs(KEYS) do close(got[k], want[k], k .. " (eps " .. eps .. ")") end
      end
    end)

    for _, hybrid in ipairs({ false, true }) do
      it(c .. " channels: gluon Conv2D -> BatchNorm x2 gradients equal the reference kernels'"
        .. (hybrid and ", hybridized" or ", eager"), function()
        local nn = mx.gluon.nn
        local x, w1, w2, p, head = inputs(c)
        local net = nn.HybridSequential()
        local c1 = nn.Conv2D(c, 3, { padding = 1, use_bias = false, in_channels = 3 })
        local n1 = nn.BatchNorm({ in_channels = c, epsilon = 1e-3 })
        local c2 = nn.Conv2D(c, 3, { padding = 1, use_bias = false, in_channels = c })
        local n2 = nn.BatchNorm({ in_channels = c, epsilon = 1e-3 })
        net:add(c1, n1, c2, n2)
        net:initialize()
        c1.weight:set_data(w1)
        c2.weight:set_data(w2)
        n1.gamma:set_data(p.g1)
        n1.beta:set_data(p.be1)
        n2.gamma:set_data(p.g2)
        n2.beta:set_data(p.be2)
        if hybrid then net:hybridize() end
        p.eps = 1e-3
        local want = chain(nd._ref, x, w1, w2, p, head)
        for _ = 1, hybrid and 2 or 1 do -- hybridized: the first call builds the graph
          x:attach_grad()
          local y = ag.record(function() return net(x) end)
          y:backward(head)
          close(y, want.y, "y")
          close(x:grad(), want.dx, "dx")
          close(c1.weight:grad(), want.dw1, "dw1")
          close(c2.weight:grad(), want.dw2, "dw2")
          close(n1.gamma:grad(), want.dg1, "dg1")
          close(n1.beta:grad(), want.db1, "db1")
          close(n2.gamma:grad(), want.dg2, "dg2")
          close(n2.beta:grad(), want.db2, "db2")
        end
      end)
    end
  end
end)

describe("conv errors", function()
  local x, w = nd.ones({ 1, 2, 5, 5 }), nd.ones({ 3, 2, 3, 3 })
  -- op(ins..., opts) must fail at this helper's call line (the op's caller) with every part
  local function fails(op, ins, opts, ...)
    local args = { unpack(ins) }
    args[#args + 1] = opts
    H.assert_error(function(at) at() nd[op](unpack(args)) end, FILE, op, ...)
  end
  local K3 = { 3, 3 }
  it("name the op, the argument and the shapes, at the caller's line", function()
    fails("convolution", { x, w }, { kernel = { 3, 3, 3 }, no_bias = true }, "data must be 5-d",
      "(1, 2, 5, 5)")
    fails("convolution", { x, w }, { no_bias = true }, "kernel is required")
    fails("convolution", { x, nd.ones({ 3, 1, 3, 3 }) }, { kernel = K3, no_bias = true },
      "weight must have shape (3, 2, 3, 3)", "(3, 1, 3, 3)")
    fails("convolution", { x, w, nd.ones({ 2 }) }, { kernel = K3 }, "bias must have shape (3)",
      "(2,)")
    fails("convolution", { x, w }, { kernel = { 7, 7 }, no_bias = true }, "kernel (7, 7)",
      "(1, 2, 5, 5)")
    fails("convolution", { x, w }, { kernel = K3, stride = { 1 }, no_bias = true }, "stride (1,)",
      "2 value(s)")
    fails("convolution", { x, w }, { kernel = K3, stride = { 0, 1 }, no_bias = true },
      "stride (0, 1) must be positive")
    fails("convolution", { x, w }, { kernel = K3, num_group = 2, no_bias = true },
      "3 filters are not divisible by num_group=2")
    fails("convolution", { x, w }, { kernel = K3, num_filter = 4, no_bias = true }, "num_filter=4",
      "3 filters")
    fails("convolution", { x, w }, { kernel = K3, layout = "NCW", no_bias = true }, "layout NCW")
    fails("convolution", { x, w:astype("float64") }, { kernel = K3, no_bias = true },
      "weight has dtype float64")
    fails("convolution", { x, w }, { kernel = K3 }, "takes 3 inputs")
    fails("deconvolution", { x, nd.ones({ 2, 1, 2, 2 }) }, { kernel = { 2, 2 }, stride = { 2, 2 },
      adj = { 2, 2 }, num_filter = 1 }, "adj (2, 2) must be smaller than stride")
    fails("deconvolution", { x, nd.ones({ 2, 2, 2, 2 }) }, { kernel = { 2, 2 }, num_filter = 1 },
      "num_filter=1", "2 filters")
    fails("deconvolution", { x, nd.ones({ 2, 1, 3, 3 }) }, { kernel = K3, target_shape = { 20, 20 },
      num_filter = 1 }, "target_shape (20, 20)")
    fails("convolution_backward_weight", { nd.ones({ 1, 3, 2, 2 }), x }, { kernel = K3 },
      "ograd must have the forward output's shape (1, 3, 3, 3)")
  end)
end)

describe("conv in bfloat16", function()
  it("oneDNN's bf16 primitives (or the reference) agree with float64 to bf16 precision", function()
    local x, w, b = rand({ 2, 16, 9, 9 }, 1), rand({ 32, 16, 3, 3 }, 2), rand({ 32 }, 3)
    local o = { kernel = { 3, 3 }, pad = { 1, 1 }, stride = { 2, 1 } }
    local function as(t, dt) return t:astype(dt) end
    local r = nd.convolution(as(x, "float64"), as(w, "float64"), as(b, "float64"), o)
    local y = nd.convolution(as(x, "bfloat16"), as(w, "bfloat16"), as(b, "bfloat16"), o)
    assert.equal("bfloat16", y:dtype())
    -- the inputs are rounded to bf16 too: compare with the f64 result on rounded inputs
    local xr, wr, br = as(as(x, "bfloat16"), "float64"), as(as(w, "bfloat16"), "float64"),
      as(as(b, "bfloat16"), "float64")
    local rr = nd.convolution(xr, wr, br, o)
    assert.is_true(relmax(as(y, "float64"), rr) < 8e-3) -- the output's rounding (2^-8)
    assert.is_true(relmax(as(y, "float64"), r) < 3e-2)
    local g = rand(y:shape(), 4)
    local gb = as(g, "bfloat16")
    local dx = nd.convolution_backward_data(gb, as(w, "bfloat16"), as(x, "bfloat16"), o)
    local dw = nd.convolution_backward_weight(gb, as(x, "bfloat16"), o)
    local gr = as(gb, "float64")
    assert.is_true(relmax(as(dx, "float64"), nd.convolution_backward_data(gr, wr, xr, o)) < 8e-3)
    assert.is_true(relmax(as(dw, "float64"), nd.convolution_backward_weight(gr, xr, o)) < 8e-3)
  end)
end)

describe("convolution_sum (conv + bias + residual, relu: one oneDNN primitive)", function()
  local SUM = {
    { x = { 2, 3, 7, 9 }, w = { 4, 3, 3, 3 }, o = { kernel = { 3, 3 }, pad = { 1, 1 } } },
    { x = { 2, 4, 7, 9 }, w = { 6, 2, 3, 2 }, o = { kernel = { 3, 2 }, stride = { 2, 1 },
      num_group = 2, act_type = "relu" } },
    { x = { 3, 16, 13, 11 }, w = { 32, 16, 3, 3 }, o = { kernel = { 3, 3 }, pad = { 1, 1 },
      act_type = "relu", no_bias = true } },
    { x = { 2, 8, 6, 6 }, w = { 8, 1, 3, 3 }, o = { kernel = { 3, 3 }, num_group = 8,
      pad = { 1, 1 }, stride = { 2, 2 }, act_type = "relu" } },
    { x = { 2, 7, 9, 3 }, w = { 4, 3, 3, 3 }, o = { kernel = { 3, 3 }, pad = { 1, 1 },
      layout = "NHWC", act_type = "relu" } },
    { x = { 2, 4, 8 }, w = { 4, 2, 3 }, o = { kernel = { 3 }, num_group = 2, pad = { 2 } } },
  }
  -- the unfused convolution, + residual, relu
  local function unfused(x, w, r, b, o)
    local q = {}
    for k, v in pairs(o) do q[k] = v end
    q.act_type = nil
    local y = nd.add(b and nd.convolution(x, w, b, q) or nd.convolution(x, w, q), r)
    return o.act_type == "relu" and nd.relu(y) or y
  end
  local function call(f, x, w, r, b, o)
    if b then return f(x, w, r, b, o) end
    return f(x, w, r, o)
  end
  for i, c in ipairs(SUM) do
    it("oneDNN matches ref and the unfused conv + add (+ relu): " .. label(c), function()
      local x, w = rand(c.x, i), rand(c.w, 100 + i)
      local b = not c.o.no_bias and rand({ c.w[1] }, 200 + i) or nil
      local shape = nd.convolution(x, w, { kernel = c.o.kernel, stride = c.o.stride,
        pad = c.o.pad, num_group = c.o.num_group, layout = c.o.layout, no_bias = true }):shape()
      local r = rand(shape, 300 + i)
      local y = call(nd.convolution_sum, x, w, r, b, c.o)
      local ref = call(nd._ref.convolution_sum, x, w, r, b, c.o)
      assert.are.same(shape, y:shape())
      assert.is_true(relmax(y, ref) < 1e-5)
      assert.is_true(relmax(y, unfused(x, w, r, b, c.o)) < 1e-5)
    end)
  end

  it("gradients (autograd, f32 on oneDNN) equal the unfused conv + add + relu's", function()
    local o = { kernel = { 3, 3 }, stride = { 2, 1 }, pad = { 1, 1 }, act_type = "relu" }
    local x, w, b = rand({ 2, 3, 6, 5 }, 1), rand({ 4, 3, 3, 3 }, 2), rand({ 4 }, 3)
    local r = rand({ 2, 4, 3, 5 }, 4)
    local grads = {}
    for k, f in ipairs { nd.convolution_sum, unfused } do
      x:attach_grad(); w:attach_grad(); r:attach_grad(); b:attach_grad()
      ag.record(function()
        local y = f(x, w, r, b, o)
        return nd.sum(nd.mul(y, y))
      end):backward()
      grads[k] = { x:grad():copy(), w:grad():copy(), r:grad():copy(), b:grad():copy() }
    end
    for j = 1, 4 do assert.is_true(relmax(grads[1][j], grads[2][j]) < 1e-5, "input " .. j) end
  end)

  local HAVE = false
  local out = ffi.new("mx_tensor*[1]")
  if C.mx_tensor_to_layout(nd.ones({ 1, 1, 1, 1 }).h, C.MX_LAYOUT_ONEDNN, "nChw16c", out) == 0 then
    HAVE = true
    nd._wrap(out[0])
  end
  local function reorders() return tonumber(C.mx_layout_reorders()) end

  it("keeps oneDNN's blocked layout: a residual block reorders only its weights", function()
    if not HAVE then return pending("built without oneDNN") end
    local x = rand({ 2, 16, 9, 9 }, 1)
    local w1, w2, w3 = rand({ 32, 16, 3, 3 }, 2), rand({ 32, 32, 3, 3 }, 3), rand({ 32, 32, 1, 1 }, 7)
    local b1, b2 = rand({ 32 }, 4), rand({ 32 }, 5)
    local o = { kernel = { 3, 3 }, pad = { 1, 1 } }
    local os = { kernel = { 3, 3 }, pad = { 1, 1 }, act_type = "relu" }
    local h = nd.convolution(x, w1, b1, o)   -- blocked: the block's input and shortcut
    local h2 = nd.convolution(h, w3, { kernel = { 1, 1 }, no_bias = true })
    assert.equal(1, C.mx_tensor_layout(h.h))
    assert.equal(1, C.mx_tensor_layout(h2.h))
    -- warm the primitive cache, then count
    nd.convolution_sum(h2, w2, h, b2, os):wait_to_read()
    nd.waitall()
    local r0 = reorders()
    local y = nd.convolution_sum(h2, w2, h, b2, os)
    nd.waitall()
    assert.equal(1, C.mx_tensor_layout(y.h))
    assert.equal(1, reorders() - r0) -- w2 only: data and residual bound (copied) as they are
    local want = nd.relu(nd.add(nd._ref.convolution(h2, w2, b2, o), h))
    assert.is_true(relmax(y, want) < 1e-5)
    assert.is_true(relmax(nd._ref.convolution_sum(h2, w2, h, b2, os), want) < 1e-5)
    -- a plain residual with a blocked data input: reordered into the primitive's dst layout
    local y2 = nd.convolution_sum(h2, w2, h:copy(), b2, os)
    assert.is_true(relmax(y2, want) < 1e-5)
  end)

  local FILE_ = FILE
  it("errors name the op, the residual's shape and dtype, at the caller's line", function()
    local x, w = nd.ones({ 1, 2, 5, 5 }), nd.ones({ 3, 2, 3, 3 })
    local function fails(ins, opts, ...)
      local args = { unpack(ins) }
      args[#args + 1] = opts
      H.assert_error(function(at) at() nd.convolution_sum(unpack(args)) end, FILE_,
        "convolution_sum", ...)
    end
    local K3 = { kernel = { 3, 3 }, no_bias = true }
    fails({ x, w, nd.ones({ 1, 3, 3, 4 }) }, K3, "residual must have the convolution output's shape",
      "(1, 3, 3, 3)", "(1, 3, 3, 4)")
    fails({ x, w, nd.ones({ 1, 3, 3, 3 }, { dtype = "float64" }) }, K3, "dtype float32", "float64")
    fails({ x, w, nd.ones({ 1, 3, 3, 3 }) }, { kernel = { 3, 3 } }, "takes 4 inputs",
      "data, weight, residual, bias")
    fails({ x, w, nd.ones({ 1, 3, 3, 3 }), nd.ones({ 2 }) }, { kernel = { 3, 3 } },
      "bias must have shape (3)")
    fails({ x, nd.ones({ 3, 1, 3, 3 }), nd.ones({ 1, 3, 3, 3 }) }, K3,
      "weight must have shape (3, 2, 3, 3)")
  end)
end)

describe("convolution_sum in bfloat16", function()
  it("agrees with float64 on the bf16-rounded inputs to bf16 precision", function()
    local function as(t, dt) return t:astype(dt) end
    local function rd(t) return as(as(t, "bfloat16"), "float64") end
    local x, w, b, r = rand({ 2, 16, 9, 9 }, 1), rand({ 32, 16, 3, 3 }, 2), rand({ 32 }, 3),
      rand({ 2, 32, 9, 9 }, 4)
    local o = { kernel = { 3, 3 }, pad = { 1, 1 }, act_type = "relu" }
    local y = nd.convolution_sum(as(x, "bfloat16"), as(w, "bfloat16"), as(r, "bfloat16"),
      as(b, "bfloat16"), o)
    assert.equal("bfloat16", y:dtype())
    local want = nd.relu(nd.add(nd.convolution(rd(x), rd(w), rd(b), { kernel = { 3, 3 },
      pad = { 1, 1 } }), rd(r)))
    assert.is_true(relmax(as(y, "float64"), want) < 8e-3) -- the output's rounding (2^-8)
  end)
end)
