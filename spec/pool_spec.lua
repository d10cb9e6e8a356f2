-- The pool family: pooling and pooling_backward (ref and oneDNN kernels, MXNet's
-- conventions), adaptive_avg_pooling2d, upsampling and bilinear_resize2d; values and
-- gradients against PyTorch (spec/fixtures/pool_torch.lua, tools/fixtures/make_pool_torch.py),
-- oneDNN against the reference kernels, the blocked layout kept through a oneDNN chain, and
-- the errors. Gradients against finite differences: spec/helpers/gradcases.lua.
local mx = require("mx")
local nd = mx.nd
local ag = mx.autograd
local H = require("helpers.la")
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

local FILE = "pool_spec.lua"

-- deterministic values of both signs, no two equal (max pooling has no ties)
local function values(shape, seed, dtype)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local t = {}
  for i = 1, n do t[i] = math.sin(i * 0.731 + (seed or 0)) * 2 + i * 1e-4 end
  return nd.array(t, { dtype = dtype or "float32" }):reshape(shape)
end

local function flat(a)
  local out = {}
  local function walk(v)
    if type(v) == "table" then for i = 1, #v do walk(v[i]) end else out[#out + 1] = v end
  end
  walk(a:tolist())
  return out
end

local function close(a, b, tol, what)
  local fa = type(a) == "table" and a or flat(a)
  local fb = type(b) == "table" and b or flat(b)
  assert(#fa == #fb, (what or "") .. ": " .. #fa .. " vs " .. #fb .. " elements")
  for i = 1, #fa do
    local d = math.abs(fa[i] - fb[i])
    assert(d <= tol * (1 + math.abs(fb[i])), ("%s: element %d: %.9g vs %.9g"):format(
      what or "", i, fa[i], fb[i]))
  end
end

-- fixture tensor: { shape = {...}, v1, v2, ... }
local function fx(t, dtype)
  local v = {}
  for i = 1, #t do v[i] = t[i] end
  return nd.array(v, { dtype = dtype }):reshape(t.shape)
end
local function fxflat(t)
  local v = {}
  for i = 1, #t do v[i] = t[i] end
  return v
end

-- runs fixture case c's op on inputs xs (a list), recording; returns out and the grads
local function run_case(c, dtype)
  local xs = {}
  for i, t in ipairs(c.inputs) do
    xs[i] = fx(t, dtype)
    xs[i]:attach_grad()
  end
  local y = ag.record(function()
    if c.op == "upsampling" then return nd.upsampling(xs, c.opts) end
    if c.op == "bilinear_resize2d" then return nd.bilinear_resize2d(xs[1], c.opts) end
    return nd[c.op](xs[1], c.opts)
  end)
  y:backward(fx(c.ograd, dtype))
  local grads = {}
  for i = 1, #xs do grads[i] = xs[i]:grad() end
  return y, grads
end

describe("pool ops against PyTorch", function()
  local cases = dofile("spec/fixtures/pool_torch.lua")
  it("the fixture has every kind of case", function()
    local ops = {}
    for _, c in ipairs(cases) do ops[c.op] = (ops[c.op] or 0) + 1 end
    assert.is_true(ops.pooling >= 9 and ops.adaptive_avg_pooling2d >= 2 and
      ops.upsampling >= 3 and ops.bilinear_resize2d >= 3)
  end)
  for _, c in ipairs(cases) do
    for _, dt in ipairs({ "float64", "float32" }) do
      it(c.name .. " (" .. c.op .. ", " .. dt .. "): values and gradients", function()
        local tol = dt == "float64" and 1e-10 or 2e-5
        local y, grads = run_case(c, dt)
        assert.are.same(c.out.shape, y:shape())
        close(y, fxflat(c.out), tol, c.name .. " out")
        for i = 1, #grads do close(grads[i], fxflat(c.grads[i]), tol, c.name .. " grad " .. i) end
      end)
    end
  end
end)

-- oneDNN (float32, the default path) against the reference kernels (nd._ref), forward and
-- backward, on odd sizes, strides, padding, both conventions, 1-D to 3-D
local SWEEP = {
  { { 2, 3, 7, 9 }, { kernel = { 2, 2 }, stride = { 2, 2 } } },
  { { 2, 3, 7, 9 }, { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 } } },
  { { 1, 5, 11, 6 }, { kernel = { 3, 2 }, stride = { 2, 3 }, pad = { 1, 1 },
    pooling_convention = "full" } },
  { { 2, 4, 8, 8 }, { kernel = { 3, 3 }, stride = { 2, 2 }, pooling_convention = "full" } },
  { { 1, 2, 9, 9 }, { kernel = { 4, 4 }, stride = { 3, 3 }, pad = { 2, 1 } } },
  { { 2, 3, 13 }, { kernel = { 3 }, stride = { 2 }, pad = { 1 } } },
  { { 1, 2, 5, 6, 7 }, { kernel = { 2, 3, 2 }, stride = { 2, 2, 1 }, pad = { 1, 1, 0 } } },
  { { 2, 16, 5, 5 }, { global_pool = true } },
}

describe("pooling: oneDNN against the reference kernels", function()
  for _, c in ipairs(SWEEP) do
    for _, pt in ipairs({ "max", "avg" }) do
      for _, incl in ipairs({ true, false }) do
        if pt == "max" and not incl then goto skip end
        local o = {}
        for k, v in pairs(c[2]) do o[k] = v end
        o.pool_type, o.count_include_pad = pt, incl
        it(("%s %s incl=%s %s"):format(pt, table.concat(c[1], "x"), tostring(incl),
          o.pooling_convention or "valid"), function()
          local x = values(c[1], 1)
          local y, yr = nd.pooling(x, o), nd._ref.pooling(x, o)
          assert.are.same(yr:shape(), y:shape())
          close(y, yr, 1e-6, "forward")
          local g = values(y:shape(), 2)
          close(nd.pooling_backward(g, x, y, o), nd._ref.pooling_backward(g, x, yr, o), 1e-6,
            "backward")
          -- bfloat16 (oneDNN's bf16 primitives; mx.amp pools bf16 activations): max picks
          -- the same element, avg sums in f32 and rounds once
          local xh, gh = x:astype("bfloat16"), g:astype("bfloat16")
          local yh, yhr = nd.pooling(xh, o), nd._ref.pooling(xh, o)
          assert.are.equal("bfloat16", yh:dtype())
          close(yh, yhr, pt == "max" and 0 or 2 ^ -7, "bf16 forward")
          -- (overlapping windows sum gradients: in f32 once there, per add in the reference)
          close(nd.pooling_backward(gh, xh, yh, o), nd._ref.pooling_backward(gh, xh, yhr, o),
            2 ^ -7, "bf16 backward")
        end)
        ::skip::
      end
    end
  end
end)

describe("pooling: MXNet's conventions", function()
  it("output sizes: valid floors, full ceils, same is ceil(x/stride); global gives 1", function()
    local x = values({ 1, 1, 8, 8 })
    assert.are.same({ 1, 1, 3, 3 }, nd.pooling(x, { kernel = { 3, 3 }, stride = { 2, 2 } }):shape())
    assert.are.same({ 1, 1, 4, 4 }, nd.pooling(x, { kernel = { 3, 3 }, stride = { 2, 2 },
      pooling_convention = "full" }):shape())
    local x1 = values({ 2, 3, 10 })
    assert.are.same({ 2, 3, 4 }, nd.pooling(x1, { kernel = { 3 }, stride = { 3 },
      pooling_convention = "same" }):shape())
    assert.are.same({ 2, 3, 1 }, nd.pooling(x1, { global_pool = true, kernel = { 2 } }):shape())
    assert.are.same({ 1, 1, 1, 1 }, nd.pooling(x, { global_pool = true }):shape())
  end)

  it("avg in full mode divides by the window clipped at the padded extent (MXNet)", function()
    -- 1x1x1x5, kernel 2 stride 2 full: windows [0,2) [2,4) [4,5): the last divides by 1
    local x = nd.array({ 1, 2, 3, 4, 10 }):reshape({ 1, 1, 1, 5 })
    local y = nd.pooling(x, { kernel = { 1, 2 }, stride = { 1, 2 }, pool_type = "avg",
      pooling_convention = "full" })
    close(y, { 1.5, 3.5, 10 }, 1e-7, "avg full")
    -- with pad 1: windows [-1,1) [1,3) [3,5) [5,6]->[5,6) past the data: counts 2,2,2,1
    local yp = nd.pooling(x, { kernel = { 1, 2 }, stride = { 1, 2 }, pad = { 0, 1 },
      pool_type = "avg", pooling_convention = "full" })
    close(yp, { 0.5, 2.5, 7, 0 }, 1e-7, "avg full pad")
    local ye = nd.pooling(x, { kernel = { 1, 2 }, stride = { 1, 2 }, pad = { 0, 1 },
      pool_type = "avg", pooling_convention = "full", count_include_pad = false })
    local fe = flat(ye) -- the 4th window holds no data: NaN, as MXNet
    close({ fe[1], fe[2], fe[3] }, { 1, 2.5, 7 }, 1e-7, "excl")
    assert.is_true(fe[4] ~= fe[4])
  end)

  it("sum and lp (p 1, 2, 3) pool as MXNet's pool_utils", function()
    local x = nd.array({ 1, -2, 3, 4 }):reshape({ 1, 1, 4 })
    local o = { kernel = { 2 }, stride = { 2 } }
    o.pool_type = "sum"
    close(nd.pooling(x, o), { -1, 7 }, 1e-7, "sum")
    o.pool_type, o.p_value = "lp", 1
    close(nd.pooling(x, o), { -1, 7 }, 1e-7, "lp1")
    o.p_value = 2
    close(nd.pooling(x, o), { math.sqrt(5), 5 }, 1e-6, "lp2")
    o.p_value = 3
    close(nd.pooling(x, o), { -(7 ^ (1 / 3)), 91 ^ (1 / 3) }, 1e-6, "lp3")
  end)

  it("max backward sends the gradient to the first of tied maxima (ref and oneDNN)", function()
    local x = nd.array({ 5, 5, 1, 5 }):reshape({ 1, 1, 2, 2 })
    local o = { kernel = { 2, 2 } }
    for _, F in ipairs({ nd, nd._ref }) do
      local y = F.pooling(x, o)
      close(F.pooling_backward(nd.ones({ 1, 1, 1, 1 }), x, y, o), { 1, 0, 0, 0 }, 0, "ties")
    end
  end)

  it("channel-last layouts pool the same cells as channel-first", function()
    local x = values({ 2, 3, 6, 7 })
    local o = { kernel = { 3, 2 }, stride = { 2, 2 }, pad = { 1, 0 }, pool_type = "avg" }
    local want = nd.transpose(nd.pooling(x, o), { axes = { 1, 3, 4, 2 } })
    o.layout = "NHWC"
    close(nd.pooling(nd.transpose(x, { axes = { 1, 3, 4, 2 } }), o), want, 1e-6, "NHWC")
    local x3 = values({ 1, 2, 3, 4, 5 })
    local o3 = { kernel = { 2, 2, 2 }, pool_type = "max" }
    local w3 = nd.transpose(nd.pooling(x3, o3), { axes = { 1, 3, 4, 5, 2 } })
    o3.layout = "NDHWC"
    close(nd.pooling(nd.transpose(x3, { axes = { 1, 3, 4, 5, 2 } }), o3), w3, 0, "NDHWC")
  end)

  it("empty batches and channels give empty results, forward and backward", function()
    for _, sh in ipairs({ { 0, 3, 4, 4 }, { 2, 0, 4, 4 } }) do
      local x = nd.ones(sh)
      local o = { kernel = { 2, 2 }, stride = { 2, 2 } }
      local y = nd.pooling(x, o)
      assert.are.same({ sh[1], sh[2], 2, 2 }, y:shape())
      assert.are.same(sh, nd.pooling_backward(y, x, y, o):shape())
    end
  end)

  it("cudnn_off is accepted; the MXNet names Pooling and UpSampling find the ops", function()
    local x = values({ 1, 1, 4, 4 })
    close(nd.pooling(x, { kernel = { 2, 2 }, cudnn_off = true }), nd.pooling(x, { kernel = { 2, 2 } }),
      0, "cudnn_off")
    for _, n in ipairs({ "Pooling", "UpSampling", "_contrib_AdaptiveAvgPooling2D",
      "_contrib_BilinearResize2D" }) do
      assert.is_true(C.mx_op_find(n) >= 0, n)
    end
  end)
end)

describe("pooling keeps oneDNN's blocked layout in a chain", function()
  local HAVE = false
  do
    local out = ffi.new("mx_tensor*[1]")
    if C.mx_tensor_to_layout(nd.array({ { { { 1 } } } }).h, C.MX_LAYOUT_ONEDNN, "nChw8c", out) == 0 then
      HAVE = true
      nd._wrap(out[0])
    end
  end
  if not HAVE then
    pending("this build has no oneDNN")
    return
  end
  local function blocked(x, fmt)
    local out = ffi.new("mx_tensor*[1]")
    assert(C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, fmt, out) == 0)
    return nd._wrap(out[0])
  end
  local function reorders() return tonumber(C.mx_layout_reorders()) end

  it("relu -> pooling -> relu -> pooling_backward: no reorder, outputs stay blocked", function()
    for _, o in ipairs({ { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 } },
      { kernel = { 2, 2 }, stride = { 2, 2 }, pool_type = "avg" },
      { kernel = { 3, 3 }, stride = { 2, 2 }, pooling_convention = "full" } }) do
      local x = values({ 2, 16, 9, 11 })
      local xb = blocked(x, "nChw8c")
      local g = values(nd._ref.pooling(x, o):shape(), 3)
      local gb = blocked(g, "nChw8c")
      local r0 = reorders()
      local hb = nd.relu(xb)
      local yb = nd.pooling(hb, o)
      local zb = nd.relu(yb)
      local db = nd.pooling_backward(gb, hb, yb, o)
      assert.are.equal(0, reorders() - r0)
      for _, t in ipairs({ hb, yb, zb, db }) do
        assert.are.equal(C.MX_LAYOUT_ONEDNN, C.mx_tensor_layout(t.h))
      end
      -- values: the same ops on row-major inputs through the reference kernels
      local h = nd.relu(x)
      local y = nd._ref.pooling(h, o)
      close(yb, y, 1e-6, "pool")
      close(zb, nd.relu(y), 1e-6, "relu")
      close(db, nd._ref.pooling_backward(g, h, y, o), 1e-6, "backward")
    end
  end)

  it("bf16: a blocked input pools to a blocked bf16 output, forward and backward", function()
    -- a bf16 convolution's output is blocked (what mx.amp's training pools)
    local x = values({ 2, 16, 9, 11 }):astype("bfloat16")
    local w = values({ 32, 16, 3, 3 }, 5):astype("bfloat16")
    for _, o in ipairs({ { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 } },
      { kernel = { 2, 2 }, stride = { 2, 2 }, pool_type = "avg" } }) do
      local xb = nd.convolution(x, w, { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = 32,
        no_bias = true })
      -- (a CPU without oneDNN bf16 convolution, AVX2 or an ISA cap, writes it row-major and
      -- pools it on the reference kernel: the values are checked all the same)
      local xb_blocked = C.mx_tensor_layout(xb.h) == C.MX_LAYOUT_ONEDNN
      local yb = nd.pooling(xb, o)
      if xb_blocked then assert.are.equal(C.MX_LAYOUT_ONEDNN, C.mx_tensor_layout(yb.h)) end
      assert.are.equal("bfloat16", yb:dtype())
      local g = values(yb:shape(), 3):astype("bfloat16")
      local db = nd.pooling_backward(g, xb, yb, o)
      assert.are.equal("bfloat16", db:dtype())
      local xr = nd.reshape(xb, { -1 }):reshape(xb:shape()) -- row-major values (last: this
      -- reads xb out of the blocked layout)
      local tol = o.pool_type == "avg" and 2 ^ -7 or 0
      local y = nd._ref.pooling(xr, o)
      close(yb, y, tol, "pool")
      -- overlapping windows sum gradients (in f32 once there, per add in the reference)
      close(db, nd._ref.pooling_backward(g, xr, y, o), 2 ^ -7, "backward")
    end
  end)

  it("a row-major out= slot gets the blocked result converted", function()
    local x = values({ 1, 8, 6, 6 })
    local o = { kernel = { 2, 2 }, stride = { 2, 2 } }
    local out = nd.zeros({ 1, 8, 3, 3 })
    o.out = out
    nd.pooling(blocked(x, "nChw8c"), o)
    o.out = nil
    close(out, nd._ref.pooling(x, o), 0, "out=")
  end)
end)

describe("adaptive pooling, upsampling, bilinear resize", function()
  it("adaptive_avg_pooling2d: output_size one or two sizes, default 1", function()
    local x = values({ 2, 3, 5, 7 })
    assert.are.same({ 2, 3, 1, 1 }, nd.adaptive_avg_pooling2d(x):shape())
    assert.are.same({ 2, 3, 4, 4 }, nd.adaptive_avg_pooling2d(x, { output_size = { 4 } }):shape())
    close(nd.adaptive_avg_pooling2d(x), nd.pooling(x, { global_pool = true, pool_type = "avg" }),
      1e-6, "global")
  end)

  it("upsampling nearest: several inputs concatenated or summed", function()
    local a = nd.array({ 1, 2, 3, 4 }):reshape({ 1, 1, 2, 2 })
    local b = nd.array({ 7 }):reshape({ 1, 1, 1, 1 })
    local cat = nd.upsampling({ a, b }, { scale = 2, num_args = 2 })
    assert.are.same({ 1, 2, 4, 4 }, cat:shape())
    close(cat, { 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4,
      7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7 }, 0, "concat")
    local sum = nd.upsampling({ a, b }, { scale = 1, num_args = 2, multi_input_mode = "sum" })
    close(sum, { 8, 9, 10, 11 }, 0, "sum")
  end)

  it("upsampling bilinear with MXNet's bilinear weight interpolates linearly inside", function()
    -- the weight MXNet's Bilinear initializer makes for scale 2 (kernel 4)
    local f, cc, w = 2, 0.75, {}
    for i = 0, 15 do
      local xx, yy = i % 4, math.floor(i / 4)
      w[i + 1] = (1 - math.abs(xx / f - cc)) * (1 - math.abs(yy / f - cc))
    end
    local wt = nd.array(w):reshape({ 1, 1, 4, 4 })
    local x = nd.tile(nd.array({ 0, 1, 2, 3 }):reshape({ 1, 1, 1, 4 }), { reps = { 1, 1, 4, 1 } })
    local y = nd.upsampling({ x, wt }, { scale = 2, num_args = 2, sample_type = "bilinear" })
    assert.are.same({ 1, 1, 8, 8 }, y:shape())
    local r = flat(y)
    close({ r[19], r[20], r[21], r[22] }, { 0.75, 1.25, 1.75, 2.25 }, 1e-6, "inner row")
  end)

  it("bilinear_resize2d modes give MXNet's sizes", function()
    local x = values({ 1, 2, 5, 6 })
    local function sz(o, like)
      local y = like and nd.bilinear_resize2d(x, like, o) or nd.bilinear_resize2d(x, o)
      return { y:shape()[3], y:shape()[4] }
    end
    assert.are.same({ 3, 9 }, sz({ height = 3, width = 9 }))
    assert.are.same({ 10, 3 }, sz({ scale_height = 2, scale_width = 0.5 }))
    assert.are.same({ 9, 12 }, sz({ mode = "odd_scale", scale_height = 2, scale_width = 2 }))
    assert.are.same({ 4, 6 }, sz({ mode = "to_even_down" }))
    assert.are.same({ 6, 6 }, sz({ mode = "to_even_up" }))
    assert.are.same({ 5, 5 }, sz({ mode = "to_odd_down" }))
    assert.are.same({ 5, 7 }, sz({ mode = "to_odd_up" }))
    assert.are.same({ 2, 8 }, sz({ mode = "like" }, values({ 1, 1, 2, 8 })))
    -- same size: a copy
    close(nd.bilinear_resize2d(x, { height = 5, width = 6 }), x, 0, "copy")
  end)
end)

describe("pool errors", function()
  local x = values({ 1, 2, 5, 5 })
  it("pooling names the bad argument and shape", function()
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 6, 6 } }) end, FILE, "pooling",
      "kernel size 6 exceeds the input 5", "(1, 2, 5, 5)")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2 } }) end, FILE,
      "kernel must give 2 sizes")
    H.assert_error(function(m) m() nd.pooling(x) end, FILE, "kernel must give 2 sizes",
      "global_pool")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2, 2 }, stride = { 0, 1 } }) end,
      FILE, "strides must be >= 1")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2, 2 }, pad = { 1 } }) end, FILE,
      "pad has 1 values")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2, 2 }, pool_type = "lp" }) end,
      FILE, "p_value")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2, 2 }, pooling_convention = "same" })
    end, FILE, "same supports 1-d")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2, 2 }, layout = "NCW" }) end, FILE,
      "layout NCW does not fit")
    H.assert_error(function(m) m() nd.pooling(values({ 2, 3 }), { kernel = { 2 } }) end, FILE,
      "data must be 3-d")
    H.assert_error(function(m) m() nd.pooling(x, { kernel = { 2, 2 }, pool_type = "mean" }) end,
      FILE, "pool_type")
    H.assert_error(function(m) m() nd.pooling(nd.array({ { { 1, 2 } } }, { dtype = "int32" }),
      { kernel = { 1 } }) end, FILE, "pooling")
    local g3 = values({ 1, 2, 3, 3 })
    H.assert_error(function(m) m() nd.pooling_backward(g3, x, g3, { kernel = { 2, 2 } }) end,
      FILE, "ograd has shape (1, 2, 3, 3), expected (1, 2, 4, 4)")
  end)
  it("the other ops name theirs", function()
    H.assert_error(function(m) m() nd.adaptive_avg_pooling2d(values({ 2, 5, 5 })) end, FILE,
      "must be 4-d")
    H.assert_error(function(m) m() nd.adaptive_avg_pooling2d(x, { output_size = { 0 } }) end,
      FILE, "output_size must be >= 1")
    H.assert_error(function(m) m() nd.upsampling({ x }, { num_args = 1 }) end, FILE,
      "scale must be given")
    H.assert_error(function(m) m() nd.upsampling({ x }, { scale = 2, num_args = 2 }) end, FILE,
      "num_args=2 but 1 input")
    local x3, w3 = values({ 1, 2, 3, 3 }), values({ 2, 1, 3, 3 })
    local bil = { scale = 2, num_args = 2, sample_type = "bilinear" }
    H.assert_error(function(m) m() nd.upsampling({ x, x3 }, { scale = 1, num_args = 2 }) end, FILE,
      "cannot be upsampled to (5, 5)")
    H.assert_error(function(m) m() nd.upsampling({ x, w3 }, bil) end, FILE,
      "weight has shape (2, 1, 3, 3), expected (2, 1, 4, 4)")
    H.assert_error(function(m) m() nd.bilinear_resize2d(x, { mode = "like" }) end, FILE,
      "mode like needs a second input")
    H.assert_error(function(m) m() nd.bilinear_resize2d(x, x) end, FILE, "only with mode like")
    H.assert_error(function(m) m() nd.bilinear_resize2d(x, { height = 0 }) end, FILE,
      "cannot resize data (1, 2, 5, 5) to (0, 1)")
    H.assert_error(function(m) m() nd.bilinear_resize2d(x, { mode = "odd_scale" }) end, FILE,
      "odd_scale needs scale_height")
  end)
end)

describe("the backward ops called directly", function()
  it("adaptive_avg_pooling2d_backward, upsampling_backward and bilinear_resize2d_backward "
    .. "give autograd's gradients", function()
    local x = values({ 1, 2, 5, 7 }, 1, "float64")
    local function grad_of(f, inputs, g)
      for _, t in ipairs(inputs) do t:attach_grad() end
      ag.record(function() return f() end):backward(g)
      local r = {}
      for i, t in ipairs(inputs) do r[i] = t:grad() end
      return r
    end
    local o = { output_size = { 3, 2 } }
    local g = values({ 1, 2, 3, 2 }, 2, "float64")
    local want = grad_of(function() return nd.adaptive_avg_pooling2d(x, o) end, { x }, g)
    close(nd.adaptive_avg_pooling2d_backward(g, x, o), want[1], 1e-12, "adaptive")
    -- each output cell's gradient is spread over its window: the totals agree
    close({ nd.sum(want[1]):asscalar() }, { nd.sum(g):asscalar() }, 1e-12, "total")

    local r = { height = 4, width = 11, align_corners = false }
    local gr = values({ 1, 2, 4, 11 }, 3, "float64")
    want = grad_of(function() return nd.bilinear_resize2d(x, r) end, { x }, gr)
    close(nd.bilinear_resize2d_backward(gr, x, r), want[1], 1e-12, "resize")

    local w = values({ 2, 1, 4, 4 }, 4, "float64")
    local gu = values({ 1, 2, 10, 14 }, 5, "float64")
    want = grad_of(function()
      return nd.upsampling({ x, w }, { scale = 2, num_args = 2, sample_type = "bilinear" })
    end, { x, w }, gu)
    local dx, dw = nd.upsampling_backward(gu, x, w, { scale = 2 })
    close(dx, want[1], 1e-12, "upsampling dx")
    close(dw, want[2], 1e-12, "upsampling dw")
  end)
end)
