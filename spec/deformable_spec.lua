-- spec/deformable_spec.lua — the deformable family (core/ops/deformable.lua): MXNet 1.9.1's
-- contrib DeformableConvolution (forward and gradients) and ModulatedDeformableConvolution
-- (forward: MXNet's CPU build has no backward for it) on the inputs of
-- spec/fixtures/deformable_mxnet.params (tools/fixtures/make_deformable_fixtures.py);
-- plain convolution when the offsets are 0 (and the mask 1), values and gradients; a
-- float64 finite-difference check of every gradient; the errors.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local gradcheck = require("helpers.gradcheck")
local cases = require("helpers.gradcases")
local FILE = "deformable_spec.lua"

local F = nd.load("spec/fixtures/deformable_mxnet.params")

local function close(got, want, tol, what)
  local d = H.maxdiff(got, want)
  assert(d <= (tol or 1e-10), string.format("%s: max difference %g", what or "", d))
end

local P = {
  a = { kernel = { 3, 3 }, num_filter = 6, num_group = 2, num_deformable_group = 2, pad = { 1, 1 } },
  b = { kernel = { 2, 3 }, num_filter = 4, stride = { 2, 1 }, dilate = { 2, 1 }, no_bias = true },
}
P.m, P.n = P.a, P.b

local function f64(shape, lo, hi)
  return nd.random.uniform(lo or -1, hi or 1, shape, { dtype = "float64" })
end

describe("deformable_convolution", function()
  for _, k in ipairs { "a", "b" } do
    it("equals MXNet's _contrib_DeformableConvolution, values and gradients (case " .. k .. ")",
      function()
        local p = P[k]
        local args = { F[k .. "_data"], F[k .. "_offset"], F[k .. "_weight"] }
        if not p.no_bias then args[4] = F[k .. "_bias"] end
        for _, a in ipairs(args) do a:attach_grad() end
        local y = mx.autograd.record(function()
          local y = nd.deformable_convolution(args[1], args[2], args[3], args[4], p)
          y:backward(F[k .. "_head"])
          return y
        end)
        close(y, F[k .. "_out"], 1e-10, k .. " out")
        for i, name in ipairs { "data", "offset", "weight", "bias" } do
          if args[i] then close(args[i]:grad(), F[k .. "_d" .. name], 1e-10, k .. " d" .. name) end
        end
      end)
  end

  it("is MXNet's contrib op by name (mx_op_find, nd.contrib, symbol JSON)", function()
    local C = require("mx.core.lib").C
    assert.are.equal(C.mx_op_find("deformable_convolution"),
      C.mx_op_find("_contrib_DeformableConvolution"))
    assert.are.equal(C.mx_op_find("modulated_deformable_convolution"),
      C.mx_op_find("_contrib_ModulatedDeformableConvolution"))
    local p = P.a
    close(nd.contrib.DeformableConvolution(F.a_data, F.a_offset, F.a_weight, F.a_bias, p),
      F.a_out, 1e-10, "nd.contrib")
    local s = mx.sym.deformable_convolution(mx.sym.var("data"), mx.sym.var("offset"),
      mx.sym.var("weight"), mx.sym.var("bias"), p)
    local json = s:tojson()
    assert.truthy(json:find('"_contrib_DeformableConvolution"', 1, true))
    local back = mx.sym.fromjson(json)
    local ex = back:bind(mx.cpu(), { data = F.a_data, offset = F.a_offset, weight = F.a_weight,
      bias = F.a_bias })
    close(ex:forward()[1], F.a_out, 1e-10, "from JSON")
  end)
end)

describe("modulated_deformable_convolution", function()
  for _, k in ipairs { "m", "n" } do
    it("equals MXNet's _contrib_ModulatedDeformableConvolution (case " .. k .. ")", function()
      local p = P[k]
      local b = not p.no_bias and F[k .. "_bias"] or nil
      close(nd.modulated_deformable_convolution(F[k .. "_data"], F[k .. "_offset"],
        F[k .. "_mask"], F[k .. "_weight"], b, p), F[k .. "_out"], 1e-10, k)
    end)
  end
end)

describe("the deformable convolutions with zero offsets", function()
  local CONV = {
    { kernel = { 3, 3 }, num_filter = 4, num_group = 2, pad = { 1, 1 } },
    { kernel = { 2, 3 }, num_filter = 3, stride = { 2, 1 }, dilate = { 2, 2 }, no_bias = true },
    { kernel = { 1, 1 }, num_filter = 2, num_deformable_group = 2 },
  }
  for i, p in ipairs(CONV) do
    it("equal Convolution, values and gradients (params " .. i .. ")", function()
      local x = f64({ 2, 4, 7, 6 })
      local w = f64({ p.num_filter, 4 / (p.num_group or 1), p.kernel[1], p.kernel[2] })
      local b = not p.no_bias and f64({ p.num_filter }) or nil
      local cp = {}
      for k, v in pairs(p) do if k ~= "num_deformable_group" then cp[k] = v end end
      local ref = nd.convolution(x, w, b, cp)
      local s = ref:shape()
      local dg, taps = p.num_deformable_group or 1, p.kernel[1] * p.kernel[2]
      local off = nd.zeros({ s[1], 2 * dg * taps, s[3], s[4] }, { dtype = "float64" })
      local mask = nd.ones({ s[1], dg * taps, s[3], s[4] }, { dtype = "float64" })
      local head = f64(s)
      local function grads(f)
        local xs = { x:copy(), w:copy(), b and b:copy() }
        for _, a in pairs(xs) do a:attach_grad() end
        local y = mx.autograd.record(function()
          local y = f(xs[1], xs[2], xs[3])
          y:backward(head)
          return y
        end)
        return y, xs
      end
      local y0, g0 = grads(function(a, c, d) return nd.convolution(a, c, d, cp) end)
      local y1, g1 = grads(function(a, c, d) return nd.deformable_convolution(a, off, c, d, p) end)
      local y2, g2 = grads(function(a, c, d)
        return nd.modulated_deformable_convolution(a, off, mask, c, d, p)
      end)
      close(y1, y0, 1e-12, "v1")
      close(y2, y0, 1e-12, "v2")
      for j = 1, 3 do
        if g0[j] then
          close(g1[j]:grad(), g0[j]:grad(), 1e-12, "v1 grad " .. j)
          close(g2[j]:grad(), g0[j]:grad(), 1e-12, "v2 grad " .. j)
        end
      end
    end)
  end

  it("an offset of one row down reads the next row (a shifted Convolution)", function()
    local x = f64({ 1, 2, 6, 5 })
    local w = f64({ 3, 2, 2, 2 })
    local p = { kernel = { 2, 2 }, num_filter = 3, no_bias = true }
    local ot = nd.zeros({ 1, 8, 5, 4 }, { dtype = "float64" }):totable()
    for t = 0, 3 do -- every tap's row offset (channel 2t, 0-based) is +1
      for r = 1, 5 do
        for c = 1, 4 do ot[1][2 * t + 1][r][c] = 1 end
      end
    end
    local y = nd.deformable_convolution(x, nd.array(ot, { dtype = "float64" }), w, p)
    local shifted = nd.slice_axis(x, { axis = 3, begin = 2, ["end"] = 6 })
    close(nd.slice_axis(y, { axis = 3, begin = 1, ["end"] = 4 }), nd.convolution(shifted, w, p),
      1e-12, "shifted")
  end)
end)

describe("the deformable gradients", function()
  for _, name in ipairs { "deformable_convolution", "modulated_deformable_convolution" } do
    for i, c in ipairs(cases[name]) do
      it(name .. " passes the float64 finite-difference check (" .. gradcheck.label(c, i) .. ")",
        function()
          local ok, msg = gradcheck.run_case(mx, name, c)
          assert(ok, msg)
        end)
    end
  end

  it("the backward ops give every input's gradient as ops", function()
    local dx, doff, dw = nd.deformable_convolution_backward(F.a_head, F.a_data, F.a_offset,
      F.a_weight, P.a)
    close(dx, F.a_ddata, 1e-10, "ddata")
    close(doff, F.a_doffset, 1e-10, "doffset")
    close(dw, F.a_dweight, 1e-10, "dweight")
    local r = { nd.modulated_deformable_convolution_backward(F.m_head, F.m_data, F.m_offset,
      F.m_mask, F.m_weight, P.m) }
    assert.are.equal(4, #r)
    assert.are.same(F.m_mask:shape(), r[3]:shape())
  end)
end)

describe("the deformable cpu kernels (float32)", function()
  for _, mod in ipairs { false, true } do
    local name = mod and "modulated_deformable_convolution" or "deformable_convolution"
    for i, p in ipairs { P.a, P.b } do
      it(name .. " equals the reference kernel, forward and backward (params " .. i .. ")",
        function()
          local k = i == 1 and "a" or "b"
          local function f32(t) return t:astype("float32") end
          local x, off, w = f32(F[k .. "_data"]), f32(F[k .. "_offset"]), f32(F[k .. "_weight"])
          local b = not p.no_bias and f32(F[k .. "_bias"]) or nil
          local og = f32(F[k .. "_head"])
          local s = off:shape()
          local mask = nd.random.uniform(0, 2, { s[1], s[2] / 2, s[3], s[4] })
          local fwd, bwd = nd[name], nd[name .. "_backward"]
          local rfwd, rbwd = nd._ref[name], nd._ref[name .. "_backward"]
          local got, want, gb, wb
          if mod then
            got, want = fwd(x, off, mask, w, b, p), rfwd(x, off, mask, w, b, p)
            gb, wb = { bwd(og, x, off, mask, w, p) }, { rbwd(og, x, off, mask, w, p) }
          else
            got, want = fwd(x, off, w, b, p), rfwd(x, off, w, b, p)
            gb, wb = { bwd(og, x, off, w, p) }, { rbwd(og, x, off, w, p) }
          end
          close(got, want, 1e-4, "forward")
          assert.are.equal(#wb, #gb)
          for j = 1, #wb do close(gb[j], wb[j], 1e-4, "gradient " .. j) end
        end)
    end
  end
end)

describe("the deformable convolutions' errors", function()
  local x, w = f64({ 1, 4, 5, 5 }), f64({ 2, 4, 3, 3 })
  local off = f64({ 1, 18, 3, 3 })
  local p = { kernel = { 3, 3 }, num_filter = 2, no_bias = true }
  local function with(t)
    local o = {}
    for k, v in pairs(p) do o[k] = v end
    for k, v in pairs(t) do o[k] = v end
    return o
  end

  it("name the op, the argument and the shapes", function()
    H.assert_error(function(mark) mark() nd.deformable_convolution(x, f64({ 1, 9, 3, 3 }), w, p) end,
      FILE, "deformable_convolution: offset must have shape (1, 18, 3, 3) "
      .. "(N, 2 num_deformable_group kh kw, Ho, Wo), got (1, 9, 3, 3)")
    H.assert_error(function(mark)
      mark() nd.modulated_deformable_convolution(x, off, f64({ 1, 9, 3, 2 }), w, p)
    end, FILE, "modulated_deformable_convolution: mask must have shape (1, 9, 3, 3)")
    H.assert_error(function(mark) mark() nd.deformable_convolution(x, off, f64({ 2, 4, 3, 2 }), p) end,
      FILE, "deformable_convolution: weight must have shape (2, 4, 3, 3)")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(f64({ 1, 4, 5 }), off, w, p)
    end, FILE, "deformable_convolution: data must be 4-d (N, C, H, W), got (1, 4, 5)")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, off, w, with { kernel = { 3, 3, 3 } })
    end, FILE, "deformable_convolution: kernel must be (kh, kw): MXNet's deformable "
      .. "convolutions are 2-D only, got (3, 3, 3)")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, off, w, with { layout = "NCW" })
    end, FILE, "layout NCW is not supported: NCHW only")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, off, w, { kernel = { 3, 3 }, no_bias = true })
    end, FILE, "deformable_convolution: num_filter is required")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, off, w, with { num_deformable_group = 3 })
    end, FILE, "has 4 channels, not divisible by num_deformable_group=3")
    H.assert_error(function(mark)
      mark() nd.modulated_deformable_convolution(x, f64({ 1, 36, 3, 3 }), f64({ 1, 18, 3, 3 }),
        f64({ 3, 4, 3, 3 }), with { num_filter = 3, num_deformable_group = 2 })
    end, FILE, "num_filter=3 is not divisible by num_deformable_group=2")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, off, w, with { no_bias = false })
    end, FILE, "deformable_convolution: takes 4 inputs (data, offset, weight, bias) with "
      .. "no_bias=false, got 3")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, nd.zeros { 1, 18, 3, 3 }, w, p)
    end, FILE, "deformable_convolution: offset has dtype float32 but data has dtype float64")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution(x, off, w, with { kernel = { 7, 3 } })
    end, FILE, "kernel (7, 3) (dilate 1) spans 7 x 3 but data (1, 4, 5, 5)")
    H.assert_error(function(mark)
      mark() nd.deformable_convolution_backward(f64({ 1, 2, 3, 2 }), x, off, w, p)
    end, FILE, "deformable_convolution_backward: ograd must have shape (1, 2, 3, 3)")
  end)
end)

describe("gluon.nn.DeformableConvolution and ModulatedDeformableConvolution", function()
  local nn = mx.gluon.nn
  local LAYERS = {
    g1 = { nn.DeformableConvolution, { 4, { 3, 3 }, { padding = { 1, 1 }, num_deformable_group = 2,
      activation = "relu" } } },
    g2 = { nn.ModulatedDeformableConvolution, { 4, { 3, 2 }, { strides = { 2, 1 }, groups = 2,
      num_deformable_group = 2 } } },
  }
  local NAMES = { "offset_weight", "offset_bias", "deformable_conv_weight", "deformable_conv_bias" }
  local function build(k)
    local cls, args = LAYERS[k][1], LAYERS[k][2]
    local layer = cls(args[1], args[2], args[3])
    layer:initialize()
    layer:cast("float64")
    layer(F[k .. "_x"]) -- deferred shapes from the input
    for _, n in ipairs(NAMES) do layer[n]:set_data(F[k .. "_" .. n]) end
    return layer
  end

  for _, k in ipairs { "g1", "g2" } do
    it("equal MXNet's gluon.contrib.cnn layers with MXNet's parameters (" .. k .. ")", function()
      local layer = build(k)
      local names = layer:collect_params():keys()
      table.sort(names)
      local want = { unpack(NAMES) }
      table.sort(want)
      assert.are.same(want, names)
      for _, n in ipairs(NAMES) do assert.are.same(F[k .. "_" .. n]:shape(), layer[n].shape) end
      close(layer(F[k .. "_x"]), F[k .. "_out"], 1e-10, k)
      layer:hybridize()
      close(layer(F[k .. "_x"]), F[k .. "_out"], 1e-10, k .. " hybridized")
    end)
  end

  it("train every parameter through the offsets (hybridized gradients equal eager)", function()
    local function grads(hybrid)
      local layer = build("g2")
      if hybrid then layer:hybridize() end
      local x = F.g2_x:copy()
      x:attach_grad()
      mx.autograd.record(function() layer(x):backward(F.g2_out) end)
      local g = { x:grad() }
      for _, n in ipairs(NAMES) do g[#g + 1] = layer[n]:grad() end
      return g
    end
    local e, h = grads(false), grads(true)
    for i = 1, #e do
      assert(H.maxdiff(e[i], nd.zeros_like(e[i])) > 0, "gradient " .. i .. " is zero")
      close(h[i], e[i], 1e-12, "gradient " .. i)
    end
  end)

  it("export under MXNet's operator names", function()
    local layer = build("g1")
    layer:hybridize()
    layer(F.g1_x)
    local dir = os.tmpname()
    os.remove(dir)
    layer:export(dir)
    local fh = assert(io.open(dir .. "-symbol.json"))
    local json = fh:read("*a")
    fh:close()
    os.remove(dir .. "-symbol.json")
    os.remove(dir .. "-0000.params")
    assert.truthy(json:find('"_contrib_DeformableConvolution"', 1, true))
    assert.truthy(json:find('"Convolution"', 1, true))
  end)

  it("refuse what MXNet's op refuses, at the caller's line", function()
    H.assert_error(function(mark) mark() nn.DeformableConvolution(4, 3, { layout = "NHWC" }) end,
      FILE, "DeformableConvolution: layout NHWC is not supported")
    H.assert_error(function(mark) mark() nn.DeformableConvolution(4, 3, { adj = { 1, 1 } }) end,
      FILE, "adj is not supported")
    H.assert_error(function(mark)
      mark() nn.ModulatedDeformableConvolution(3, 3, { num_deformable_group = 2 })
    end, FILE, "num_deformable_group=2 must divide channels=3")
    H.assert_error(function(mark) mark() nn.DeformableConvolution(4, 3, { activation = "x" }) end,
      FILE, "DeformableConvolution: Activation: unknown activation 'x'")
    local layer = nn.DeformableConvolution(4, 3, { num_deformable_group = 2 })
    layer:initialize()
    H.assert_error(function(mark) mark() layer(nd.zeros { 1, 3, 5, 5 }) end, FILE,
      "has 3 channels, not divisible by num_deformable_group=2")
    layer = nn.DeformableConvolution(4, 3)
    layer:initialize()
    H.assert_error(function(mark) mark() layer(nd.zeros { 1, 4, 5 }) end, FILE,
      "DeformableConvolution: expected a 4-d input (N, C, H, W), got 3-d")
  end)
end)
