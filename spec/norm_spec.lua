-- spec/norm_spec.lua — the norm family: batch_norm's cpu kernel against the reference
-- kernel over shapes, axes and modes; its values (batch statistics, moving statistics
-- updated in place, inference) against sums computed here in Lua; the backward op; the
-- engine's write dependency on the auxiliary inputs; errors at the caller's line.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("norm_spec.lua")
local nd = mx.nd
local rand = oracle.rand

local function close(a, b, tol)
  local ok, msg = oracle.close(a, b, tol, tol)
  assert(ok, msg)
end

-- the Lua oracle: per-channel mean and biased variance of x (a flat list over shape)
local function stats(x, shape, ax)
  local v = x:reshape({ -1 }):tolist()
  local outer, inner, c = 1, 1, shape[ax]
  for d = 1, ax - 1 do outer = outer * shape[d] end
  for d = ax + 1, #shape do inner = inner * shape[d] end
  local mean, var = {}, {}
  for k = 0, c - 1 do
    local s, n = 0, outer * inner
    for o = 0, outer - 1 do for i = 0, inner - 1 do s = s + v[(o * c + k) * inner + i + 1] end end
    local m = s / n
    local q = 0
    for o = 0, outer - 1 do
      for i = 0, inner - 1 do q = q + (v[(o * c + k) * inner + i + 1] - m) ^ 2 end
    end
    mean[k + 1], var[k + 1] = m, q / n
  end
  return mean, var
end

local function bn_both(x, c, opts, dt)
  local g, b = rand(mx, { c }, dt, { 0.5, 2 }), rand(mx, { c }, dt)
  local mm1, mv1 = rand(mx, { c }, dt), rand(mx, { c }, dt, { 0.5, 2 })
  local mm2, mv2 = mm1:copy(), mv1:copy()
  local y1, m1, s1 = nd.batch_norm(x, g, b, mm1, mv1, opts)
  local y2, m2, s2 = nd._ref.batch_norm(x, g, b, mm2, mv2, opts)
  return { y1, m1, s1, mm1, mv1 }, { y2, m2, s2, mm2, mv2 }, g, b
end

describe("batch_norm", function()
  it("act_type='relu' is relu of the plain output, on every backend and layout", function()
    local lib = require("mx.core.lib")
    local ffi, C = lib.ffi, lib.C
    for _, o in ipairs({ { training = false, fix_gamma = false }, { training = true } }) do
      local x = rand(mx, { 2, 16, 5, 3 }, "float32", { -3, 3 })
      local g, b = rand(mx, { 16 }, "float32", { 0.5, 2 }), rand(mx, { 16 })
      local mm, mv = rand(mx, { 16 }), rand(mx, { 16 }, "float32", { 0.5, 2 })
      local want = nd.relu((nd.batch_norm(x, g, b, mm:copy(), mv:copy(), o)))
      o.act_type = "relu"
      close((nd.batch_norm(x, g, b, mm:copy(), mv:copy(), o)), want, 2e-5)
      close((nd._ref.batch_norm(x, g, b, mm:copy(), mv:copy(), o)), want, 2e-5)
      local out = ffi.new("mx_tensor*[1]")
      if C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, "nChw16c", out) == 0 then
        close((nd.batch_norm(nd._wrap(out[0]), g, b, mm:copy(), mv:copy(), o)), want, 2e-5)
      end
      o.act_type = nil
    end
  end)

  it("cpu kernel matches the reference over shapes, axes, modes and dtypes", function()
    local cases = { { { 4, 3 }, 2 }, { { 2, 3, 5 }, 2 }, { { 2, 5, 7, 3 }, 2 }, { { 3, 4, 5 }, -1 },
      { { 2, 3, 4, 6 }, 4 }, { { 1, 1, 1 }, 2 }, { { 5, 2, 3, 3 }, 3 }, { { 2, 7, 33, 17 }, 2 },
      { { 8, 13 }, 1 }, { { 6 }, 1 },
      { { 4, 16, 64, 64 }, 2 } } -- the last: rows split over threads (mx_parallel_for)
    for _, cs in ipairs(cases) do
      local shape, ax = cs[1], cs[2]
      local c = shape[ax == -1 and #shape or ax]
      for _, dt in ipairs({ "float32", "float64" }) do
        local tol = dt == "float32" and 2e-5 or 1e-11
        for _, o in ipairs({ { training = true, fix_gamma = false }, { training = true },
          { training = false, fix_gamma = false }, { training = true, use_global_stats = true } }) do
          o.axis, o.eps = ax, 1e-3
          local x = rand(mx, shape, dt, { -3, 5 })
          local got, want = bn_both(x, c, o, dt)
          for i = 1, 5 do close(got[i], want[i], tol) end
        end
      end
    end
  end)

  it("training: batch statistics, invstd output and the moving statistics updated in place", function()
    local shape = { 3, 4, 5 }
    local x = rand(mx, shape, "float64", { -2, 3 })
    local g = nd.array({ 1, 2, 0.5, 3 }, { dtype = "float64" })
    local b = nd.array({ 0, 1, -1, 2 }, { dtype = "float64" })
    local mm = nd.array({ 0.1, 0.2, 0.3, 0.4 }, { dtype = "float64" })
    local mv = nd.array({ 1, 2, 3, 4 }, { dtype = "float64" })
    local y, mean, istd = nd.batch_norm(x, g, b, mm, mv,
      { training = true, fix_gamma = false, momentum = 0.8, eps = 1e-4 })
    local m, v = stats(x, shape, 2)
    local gm, bm = g:tolist(), b:tolist()
    local xl, yl = x:reshape({ -1 }):tolist(), y:reshape({ -1 }):tolist()
    for k = 1, 4 do
      assert.is_near(m[k], mean:tolist()[k], 1e-12)
      assert.is_near(1 / math.sqrt(v[k] + 1e-4), istd:tolist()[k], 1e-10)
      assert.is_near(({ 0.1, 0.2, 0.3, 0.4 })[k] * 0.8 + m[k] * 0.2, mm:tolist()[k], 1e-12)
      assert.is_near(k * 0.8 + v[k] * 0.2, mv:tolist()[k], 1e-12)
      for n = 1, 3 do
        for w = 1, 5 do
          local j = ((n - 1) * 4 + k - 1) * 5 + w
          local want = (xl[j] - m[k]) / math.sqrt(v[k] + 1e-4) * gm[k] + bm[k]
          assert.is_near(want, yl[j], 1e-10)
        end
      end
    end
  end)

  it("inference and use_global_stats normalise with the moving statistics, unchanged", function()
    local x = rand(mx, { 2, 3, 4 }, "float64")
    local g, b = nd.array({ 2, 3, 4 }, { dtype = "float64" }), nd.zeros({ 3 }, { dtype = "float64" })
    for _, o in ipairs({ { training = false }, { training = true, use_global_stats = true } }) do
      local mm = nd.array({ 0.5, -1, 2 }, { dtype = "float64" })
      local mv = nd.array({ 4, 1, 0.25 }, { dtype = "float64" })
      o.eps, o.fix_gamma = 0, false
      local y = nd.batch_norm(x, g, b, mm, mv, o)
      assert.are.same({ 0.5, -1, 2 }, mm:tolist())
      assert.are.same({ 4, 1, 0.25 }, mv:tolist())
      local xl, yl = x:reshape({ -1 }):tolist(), y:reshape({ -1 }):tolist()
      local sd, mu, gg = { 2, 1, 0.5 }, { 0.5, -1, 2 }, { 2, 3, 4 }
      for n = 1, 2 do for k = 1, 3 do for w = 1, 4 do
        local j = ((n - 1) * 3 + k - 1) * 4 + w
        assert.is_near((xl[j] - mu[k]) / sd[k] * gg[k], yl[j], 1e-12)
      end end end
    end
  end)

  it("fix_gamma (the default) takes gamma as 1; the train mode comes from autograd", function()
    local x = rand(mx, { 4, 2, 3 })
    local g, b = nd.array({ 5, 7 }), nd.zeros({ 2 })
    local mm, mv = nd.zeros({ 2 }), nd.ones({ 2 })
    local y = nd.batch_norm(x, g, b, mm, mv, { training = true })
    local y1 = nd.batch_norm(x, nd.ones({ 2 }), b, nd.zeros({ 2 }), nd.ones({ 2 }),
      { training = true, fix_gamma = false })
    close(y, y1, 1e-6)
    -- outside record: inference (moving stats untouched); under record + train: updated
    local mm0 = mm:tolist()
    nd.batch_norm(x, g, b, mm, mv)
    assert.are.same(mm0, mm:tolist())
    mx.autograd.record(function() nd.batch_norm(x, g, b, mm, mv) end)
    assert.are_not.same(mm0, mm:tolist())
  end)

  it("channels last (axis=-1) equals NCHW on the transposed data", function()
    local x = rand(mx, { 2, 3, 4, 5 }, "float64")
    local g, b = rand(mx, { 3 }, "float64"), rand(mx, { 3 }, "float64")
    local o = { training = true, fix_gamma = false }
    local mm1, mv1 = nd.zeros({ 3 }, { dtype = "float64" }), nd.ones({ 3 }, { dtype = "float64" })
    local mm2, mv2 = mm1:copy(), mv1:copy()
    local y1 = nd.batch_norm(x, g, b, mm1, mv1, o)
    o.axis = -1
    local xt = nd.transpose(x, { axes = { 1, 3, 4, 2 } })
    local y2 = nd.batch_norm(xt, g, b, mm2, mv2, o)
    close(nd.transpose(y2, { axes = { 1, 4, 2, 3 } }), y1, 1e-12)
    close(mm1, mm2, 1e-12)
    close(mv1, mv2, 1e-12)
  end)

  it("backward: cpu matches the reference, training and global statistics", function()
    for _, shape in ipairs({ { 4, 3, 5 }, { 2, 5, 7, 9 }, { 6, 4 } }) do
      for _, dt in ipairs({ "float32", "float64" }) do
        for _, o in ipairs({ { fix_gamma = false }, { fix_gamma = true },
          { fix_gamma = false, global_stats = true }, { axis = -1, fix_gamma = false } }) do
          local c = shape[o.axis == -1 and #shape or 2]
          local ins = { rand(mx, shape, dt), rand(mx, shape, dt), rand(mx, { c }, dt),
            rand(mx, { c }, dt), rand(mx, { c }, dt, { 0.5, 2 }) }
          local a = { nd.batch_norm_backward(ins[1], ins[2], ins[3], ins[4], ins[5], o) }
          local r = { nd._ref.batch_norm_backward(ins[1], ins[2], ins[3], ins[4], ins[5], o) }
          for i = 1, 3 do close(a[i], r[i], dt == "float32" and 3e-5 or 1e-11) end
        end
      end
    end
  end)

  it("queued: later reads of the moving statistics wait for the in-place update", function()
    local mode, imax = mx.engine.get(), mx.engine.get_inline_max()
    mx.engine.set("threaded")
    mx.engine.set_inline_max(0)
    local ok, err = pcall(function()
      local x = rand(mx, { 16, 8, 32, 32 })
      local g, b = nd.ones({ 8 }), nd.zeros({ 8 })
      local mm, mv = nd.zeros({ 8 }), nd.ones({ 8 })
      for _ = 1, 3 do nd.batch_norm(x, g, b, mm, mv, { training = true }) end
      local s = nd.add_scalar(mm, { scalar = 0 })
      local want = nd.zeros({ 8 })
      for _ = 1, 3 do
        local _, m = nd._ref.batch_norm(x, g, b, nd.zeros({ 8 }), nd.ones({ 8 }), { training = true })
        want = nd.add(nd.mul_scalar(want, { scalar = 0.9 }), nd.mul_scalar(m, { scalar = 0.1 }))
      end
      close(s, want, 1e-5)
    end)
    mx.engine.set_inline_max(imax)
    mx.engine.set(mode)
    assert(ok, err)
  end)

  it("errors name the op and the argument at the caller's line", function()
    local x = nd.ones({ 2, 3, 4 })
    local g, b, mm, mv = nd.ones({ 3 }), nd.zeros({ 3 }), nd.zeros({ 3 }), nd.ones({ 3 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.batch_norm(x, nd.ones({ 4 }), b, mm, mv) return r end, line)
    assert.is_truthy(msg:find("gamma must have shape (3)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.batch_norm(x, g, b, mm:astype("float64"), mv) return r end, line)
    assert.is_truthy(msg:find("moving_mean has dtype float64", 1, true), msg)
    local big = nd.ones({ 3, 3 })
    line = debug.getinfo(1, "l").currentline + 2
    msg = err_at(function()
      local r = nd.batch_norm(big, g, b, big[1], big[2], { training = true }) return r end,
      line)
    assert.is_truthy(msg:find("shares memory with another input", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.batch_norm(x, g, b, mm, mv, { axis = 4 }) return r end, line)
    assert.is_truthy(msg:find("batch_norm", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.batch_norm(x, g, b, mm, mv, { momentum = 2 }) return r end, line)
    assert.is_truthy(msg:find("momentum", 1, true), msg)
  end)
end)

-- PyTorch (tools/fixtures/make_norm_torch.py): values and gradients of sum(out * w).
describe("the norm ops against PyTorch", function()
  local T = dofile("spec/fixtures/norm_torch.lua")
  local function t(v) return nd.array(v.values, { dtype = "float64" }):reshape(v.shape):copy() end
  local function same(got, want, tol)
    local ok, msg = oracle.close(got, t(want), tol or 1e-9, tol or 1e-9)
    assert(ok, msg)
  end
  -- f(x, gamma, beta) -> out under record; checks out and the gradients the case has
  local function check(c, f, names)
    local ins = {}
    for i, k in ipairs(names) do
      ins[i] = t(c[k])
      ins[i]:attach_grad()
    end
    local y
    mx.autograd.record(function() y = f(unpack(ins)) end)
    y:backward(t(c.w))
    same(y, c.out)
    for i, k in ipairs(names) do same(ins[i]:grad(), c["d_" .. (k == "x" and "x" or k)]) end
  end

  it("batch_norm in training: values, gradients and the running statistics", function()
    local c = T.batch_norm_train
    local mm, mv = t(c.rm0), t(c.rv0)
    check(c, function(x, g, b)
      local y = nd.batch_norm(x, g, b, mm, mv, { eps = 1e-3, fix_gamma = false })
      return y
    end, { "x", "gamma", "beta" })
    same(mm, c.rm)
    -- PyTorch's running_var takes the unbiased variance, luamx's (MXNet's) the biased:
    -- rv = 0.9 rv0 + 0.1 var_biased, var_biased = var_unbiased (n - 1) / n
    local n = 4 * 3 * 2
    local rv0, rvt, got = c.rv0.values, c.rv.values, mv:tolist()
    for k = 1, 3 do
      local unb = (rvt[k] - 0.9 * rv0[k]) / 0.1
      assert.is_near(0.9 * rv0[k] + 0.1 * unb * (n - 1) / n, got[k], 1e-9)
    end
  end)

  it("batch_norm in inference: values and gradients with the running statistics", function()
    local c = T.batch_norm_eval
    local mm, mv = t(c.rm), t(c.rv)
    local ins = { t(c.x), t(c.gamma), t(c.beta) }
    for i = 1, 3 do ins[i]:attach_grad() end
    local y
    mx.autograd.record(function()
      y = nd.batch_norm(ins[1], ins[2], ins[3], mm, mv, { eps = 1e-3, fix_gamma = false,
        training = false })
    end)
    y:backward(t(c.w))
    same(y, c.out)
    same(ins[1]:grad(), c.d_x)
    same(ins[2]:grad(), c.d_gamma)
    same(ins[3]:grad(), c.d_beta)
    same(mm, c.rm)
  end)

  it("instance_norm, group_norm, lrn, l2_normalization", function()
    check(T.instance_norm, function(x, g, b)
      local y = nd.instance_norm(x, g, b, { eps = 1e-3 })
      return y
    end, { "x", "gamma", "beta" })
    check(T.group_norm, function(x, g, b)
      local y = nd.group_norm(x, g, b, { num_groups = 2, eps = 1e-5 })
      return y
    end, { "x", "gamma", "beta" })
    check(T.lrn, function(x)
      return nd.lrn(x, { nsize = 3, alpha = 0.3, beta = 0.75, knorm = 1.5 })
    end, { "x" })
    check(T.l2_instance, function(x)
      local y = nd.l2_normalization(x, { eps = 0 })
      return y
    end, { "x" })
    check(T.l2_channel, function(x)
      local y = nd.l2_normalization(x, { eps = 0, mode = "channel" })
      return y
    end, { "x" })
  end)
end)

-- The oneDNN kernel: blocked data (as a oneDNN conv leaves it) stays blocked through
-- batch_norm and relu with no reorder; values equal the row-major path's.
describe("batch_norm on oneDNN's blocked layout", function()
  local lib = require("mx.core.lib")
  local ffi, C = lib.ffi, lib.C
  local function blocked(x, fmt)
    local out = ffi.new("mx_tensor*[1]")
    if C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, fmt, out) ~= 0 then return nil end
    return nd._wrap(out[0])
  end
  local function layout(x) return C.mx_tensor_layout(x.h) end
  local function reorders() return tonumber(C.mx_layout_reorders()) end

  it("keeps the layout, updates the moving statistics, matches the row-major kernel", function()
    local probe = blocked(nd.ones({ 1, 8, 1, 1 }), "nChw8c")
    if not probe then return end -- a build without oneDNN: nothing to check
    for _, cs in ipairs({ { { 2, 16, 5, 7 }, "nChw16c" }, { { 3, 8, 4, 4 }, "nChw8c" },
      { { 2, 13, 3, 5 }, "nChw8c" }, { { 2, 8, 3, 4, 2 }, "nCdhw8c" } }) do
      local shape, fmt = cs[1], cs[2]
      local c = shape[2]
      for _, o in ipairs({ { training = true, fix_gamma = false }, { training = true },
        { training = false, fix_gamma = false }, { training = true, use_global_stats = true } }) do
        o.eps = 1e-3
        local x = rand(mx, shape, "float32", { -2, 3 })
        local xb = blocked(x, fmt)
        local g, b = rand(mx, { c }, "float32", { 0.5, 2 }), rand(mx, { c })
        local mm1, mv1 = rand(mx, { c }), rand(mx, { c }, "float32", { 0.5, 2 })
        local mm2, mv2 = mm1:copy(), mv1:copy()
        local r0 = reorders()
        local y1, m1, s1 = nd.batch_norm(xb, g, b, mm1, mv1, o)
        local z = nd.relu(y1)
        assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(y1))
        assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(z))
        assert.are.equal(r0, reorders())
        local y2, m2, s2 = nd.batch_norm(x, g, b, mm2, mv2, o)
        close(y1, y2, 2e-5)
        close(z, nd.relu(y2), 2e-5)
        close(m1, m2, 2e-5)
        close(s1, s2, 2e-5)
        close(mm1, mm2, 2e-5)
        close(mv1, mv2, 2e-5)
      end
    end
    -- the backward on blocked data: ograd row-major, blocked alike, or blocked otherwise
    for _, cs in ipairs({ { { 2, 16, 5, 3 }, "nChw16c", "nChw8c" }, { { 3, 8, 4, 4 }, "nChw8c" },
      { { 2, 13, 3, 2 }, "nChw8c", "nChw16c" } }) do
      local shape, fmt, gfmt = cs[1], cs[2], cs[3]
      local c = shape[2]
      for _, o in ipairs({ { fix_gamma = false }, { fix_gamma = true },
        { fix_gamma = false, global_stats = true } }) do
        local dy, x = rand(mx, shape), rand(mx, shape)
        local ga, mean, istd = rand(mx, { c }), rand(mx, { c }), rand(mx, { c }, "float32", { 0.5, 2 })
        local want = { nd.batch_norm_backward(dy, x, ga, mean, istd, o) }
        for _, gb in ipairs({ dy, blocked(dy, fmt), gfmt and blocked(dy, gfmt) or dy }) do
          local got = { nd.batch_norm_backward(gb, blocked(x, fmt), ga, mean, istd, o) }
          assert.are.equal(C.MX_LAYOUT_ONEDNN, layout(got[1]))
          for i = 1, 3 do close(got[i], want[i], 5e-5) end
        end
      end
    end
    -- a row-major out= slot for blocked data: computed blocked, then reordered into it
    local x = rand(mx, { 2, 16, 3, 3 })
    local g, b = nd.ones({ 16 }), nd.zeros({ 16 })
    local y, m, s = nd.zeros({ 2, 16, 3, 3 }), nd.zeros({ 16 }), nd.zeros({ 16 })
    nd.batch_norm(blocked(x, "nChw16c"), g, b, nd.zeros({ 16 }), nd.ones({ 16 }),
      { training = true, out = { y, m, s } })
    assert.are.equal(0, layout(y))
    close(y, (nd.batch_norm(x, g, b, nd.zeros({ 16 }), nd.ones({ 16 }), { training = true })), 2e-5)
  end)
end)

describe("group_norm, instance_norm, lrn, l2_normalization", function()
  it("values against sums computed here, every mode", function()
    local x = rand(mx, { 2, 3, 4 }, "float64", { -1, 2 })
    local xs = x:reshape({ -1 }):tolist()
    -- l2_normalization: instance (per sample), channel (per sample and position), spatial
    local modes = {
      instance = function(n, _, _) return n end,
      channel = function(n, _, s) return n * 4 + s end,
      spatial = function(n, c, _) return n * 3 + c end }
    for mode, cell in pairs(modes) do
      local y, nr = nd.l2_normalization(x, { mode = mode, eps = 1e-6 })
      local sums = {}
      for n = 0, 1 do for c = 0, 2 do for s = 0, 3 do
        local k = cell(n, c, s)
        sums[k] = (sums[k] or 0) + xs[(n * 3 + c) * 4 + s + 1] ^ 2
      end end end
      local ys = y:reshape({ -1 }):tolist()
      for n = 0, 1 do for c = 0, 2 do for s = 0, 3 do
        local j = (n * 3 + c) * 4 + s + 1
        assert.is_near(xs[j] / math.sqrt(sums[cell(n, c, s)] + 1e-6), ys[j], 1e-12)
      end end end
      assert.are.equal(3, nr:ndim())
    end
    -- lrn with nsize 3: the window clipped at the first and last channel
    local y = nd.lrn(x, { nsize = 3, alpha = 0.6, beta = 0.5, knorm = 1 }):reshape({ -1 }):tolist()
    for n = 0, 1 do for c = 0, 2 do for s = 0, 3 do
      local q = 0
      for k = math.max(0, c - 1), math.min(2, c + 1) do q = q + xs[(n * 3 + k) * 4 + s + 1] ^ 2 end
      local j = (n * 3 + c) * 4 + s + 1
      assert.is_near(xs[j] / math.sqrt(1 + 0.6 / 3 * q), y[j], 1e-12)
    end end end
    -- instance_norm = group_norm with one channel per group and per-channel gamma/beta
    local g, b = rand(mx, { 3 }, "float64"), rand(mx, { 3 }, "float64")
    local a1, m1, s1 = nd.instance_norm(x, g, b, { eps = 1e-3 })
    local a2, m2, s2 = nd.group_norm(x, g, b, { num_groups = 3, eps = 1e-3 })
    close(a1, a2, 1e-12)
    close(m1, m2, 1e-12)
    close(s1, s2, 1e-12)
    assert.are.same({ 2, 3 }, m1:shape())
  end)

  it("the backward ops: group_norm_backward's sums, lrn_backward with a flat window", function()
    local x, dy = rand(mx, { 2, 4, 3 }, "float64"), rand(mx, { 2, 4, 3 }, "float64")
    local g, b = rand(mx, { 2 }, "float64"), rand(mx, { 2 }, "float64")
    local _, m, s = nd.group_norm(x, g, b, { num_groups = 2 })
    local dx, dg, db = nd.group_norm_backward(dy, x, g, m, s, { num_groups = 2 })
    local dys = dy:reshape({ -1 }):tolist()
    for grp = 0, 1 do -- dbeta: the sum of dy over each group's 2 channels x 3 positions
      local sum = 0
      for n = 0, 1 do for i = 1, 6 do sum = sum + dys[(n * 2 + grp) * 6 + i] end end
      assert.is_near(sum, db:tolist()[grp + 1], 1e-12)
    end
    assert.are.same({ 2 }, dg:shape())
    -- the data gradient sums to 0 over each (sample, group): the mean is subtracted
    local dxs = dx:reshape({ -1 }):tolist()
    for sg = 0, 3 do
      local sum = 0
      for i = 1, 6 do sum = sum + dxs[sg * 6 + i] end
      assert.is_near(0, sum, 1e-12)
    end
    -- alpha 0: lrn is x * knorm^-beta, so the gradient is dy * knorm^-beta
    local d = nd.lrn_backward(dy, x, { nsize = 3, alpha = 0, beta = 0.5, knorm = 4 })
    close(d, nd.mul_scalar(dy, { scalar = 0.5 }), 1e-15)
  end)

  it("errors name the op and the argument at the caller's line", function()
    local x = nd.ones({ 2, 4, 3 })
    local line = debug.getinfo(1, "l").currentline + 2
    local msg = err_at(function()
      local r = nd.group_norm(x, nd.ones({ 3 }), nd.ones({ 3 }), { num_groups = 3 }) return r end, line)
    assert.is_truthy(msg:find("num_groups=3 must be >= 1 and divide the 4 channels", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.instance_norm(x, nd.ones({ 3 }), nd.ones({ 4 })) return r end,
      line)
    assert.is_truthy(msg:find("gamma must have shape (4)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.lrn(x) return r end, line)
    assert.is_truthy(msg:find("nsize is required", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.lrn(x, { nsize = 2 }) return r end, line)
    assert.is_truthy(msg:find("positive odd", 1, true), msg)
    local m34 = nd.ones({ 3, 4 })
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.l2_normalization(m34, { mode = "spatial" }) return r end, line)
    assert.is_truthy(msg:find("mode spatial needs data of at least 3 dims", 1, true), msg)
  end)
end)

describe("group_norm / instance_norm cpu kernels", function()
  it("match the reference (forward and backward) over shapes, groups and dtypes", function()
    for _, cs in ipairs({ { { 2, 4, 3 }, 2 }, { { 3, 6, 5, 7 }, 3 }, { { 1, 8, 33, 17 }, 4 },
      { { 2, 3, 1 }, 0 }, { { 4, 5, 2, 2, 3 }, 0 }, { { 2, 4, 0 }, 1 },
      { { 2, 8, 64, 64 }, 2 } }) do -- the last: rows split over threads
      local shape, groups = cs[1], cs[2]
      local nv = groups > 0 and groups or shape[2]
      for _, dt in ipairs({ "float32", "float64" }) do
        local tol = dt == "float32" and 3e-5 or 1e-11
        local x, dy = rand(mx, shape, dt, { -2, 3 }), rand(mx, shape, dt)
        local g, b = rand(mx, { nv }, dt, { 0.5, 2 }), rand(mx, { nv }, dt)
        local op = groups > 0 and "group_norm" or "instance_norm"
        local o = groups > 0 and { num_groups = groups, eps = 1e-4 } or { eps = 1e-4 }
        local got = { nd[op](x, g, b, o) }
        local want = { nd._ref[op](x, g, b, o) }
        for i = 1, 3 do close(got[i], want[i], tol) end
        local bo = { num_groups = groups }
        local gb = { nd.group_norm_backward(dy, x, g, want[2], want[3], bo) }
        local rb = { nd._ref.group_norm_backward(dy, x, g, want[2], want[3], bo) }
        for i = 1, 3 do close(gb[i], rb[i], tol * 4) end
      end
    end
  end)
end)

---------------------------------------------------------------- layer_norm
describe("layer_norm", function()
  local function t(v) return nd.array(v.values, { dtype = "float64" }):reshape(v.shape):copy() end

  it("cpu kernel matches the reference (forward and fused backward) over shapes, axes, dtypes", function()
    for _, cs in ipairs({ { { 4, 6 }, -1 }, { { 3, 5, 17 }, -1 }, { { 2, 3, 256 }, 3 },
      { { 2, 5, 3 }, 2 }, { { 7, 4 }, 1 }, { { 1, 1 }, -1 }, { { 600, 40 }, -1 } }) do
      local shape, axis = cs[1], cs[2]
      local c = shape[axis < 0 and #shape + 1 + axis or axis]
      for _, dt in ipairs({ "float32", "float64" }) do
        local tol = dt == "float32" and 3e-5 or 1e-11
        local x, dy = rand(mx, shape, dt, { -2, 3 }), rand(mx, shape, dt)
        local g, b = rand(mx, { c }, dt, { 0.5, 2 }), rand(mx, { c }, dt)
        local o = { axis = axis, eps = 1e-4 }
        local got, want = { nd.layer_norm(x, g, b, o) }, { nd._ref.layer_norm(x, g, b, o) }
        for i = 1, 3 do close(got[i], want[i], tol) end
        local gb = { nd.layer_norm_backward(dy, x, g, want[2], want[3], { axis = axis }) }
        local rb = { nd._ref.layer_norm_backward(dy, x, g, want[2], want[3], { axis = axis }) }
        for i = 1, 3 do close(gb[i], rb[i], tol * 10) end
      end
    end
  end)

  it("normalises each vector: mean 0, std as output 3 (shape with axis cut to 1)", function()
    local x = nd.array({ { 1, 2, 3, 4 }, { 2, 2, 2, 10 } })
    local y, m, s = nd.layer_norm(x, nd.ones({ 4 }), nd.zeros({ 4 }), { eps = 0 })
    assert.same({ 2, 1 }, m:shape())
    close(m, nd.array({ { 2.5 }, { 4 } }), 1e-6)
    close(s, nd.array({ { math.sqrt(1.25) }, { math.sqrt(12) } }), 1e-6)
    close(y:sum({ axis = 2 }), nd.zeros({ 2 }), 1e-5)
  end)

  it("matches PyTorch's F.layer_norm (values and gradients; last and middle axis)", function()
    local T = dofile("spec/fixtures/attn_torch.lua")
    for name, axis in pairs({ layer_norm = -1, layer_norm_mid = 2 }) do
      local c = T[name]
      local ins = { t(c.x), t(c.gamma), t(c.beta) }
      for i = 1, 3 do ins[i]:attach_grad() end
      local y
      mx.autograd.record(function() y = nd.layer_norm(ins[1], ins[2], ins[3], { axis = axis }) end)
      y:backward(t(c.w))
      close(y, t(c.out), 1e-9)
      close(ins[1]:grad(), t(c.d_x), 1e-9)
      close(ins[2]:grad(), t(c.d_gamma), 1e-9)
      close(ins[3]:grad(), t(c.d_beta), 1e-9)
    end
  end)

  it("errors name the argument, at the caller's line", function()
    local x, o2, o3, o4 = nd.ones({ 2, 4 }), nd.ones({ 2 }), nd.ones({ 3 }), nd.ones({ 4 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.layer_norm(x, o3, o4) return r end, line)
    assert.is_truthy(msg:find("layer_norm: gamma must have shape (4)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.layer_norm(x, o2, o2, { axis = 3 }) return r end, line)
    assert.is_truthy(msg:find("layer_norm", 1, true) and msg:find("axis", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.layer_norm(x, o4, o4, { eps = -1 }) return r end, line)
    assert.is_truthy(msg:find("eps must be >= 0", 1, true), msg)
  end)
end)

describe("float16 data in the norm ops (MXNet's: computed in float32)", function()
  local function near(got, want, tol)
    local g, w = got:astype("float64"):reshape(-1):tolist(), want:astype("float64"):reshape(-1):tolist()
    assert.equal(#w, #g)
    for k = 1, #w do
      assert.is_true(math.abs(g[k] - w[k]) <= tol * (1 + math.abs(w[k])), string.format(
        "element %d: %.7g, want %.7g", k, g[k], w[k]))
    end
  end
  it("gives float16 results close to float32's, the statistics float32", function()
    mx.random.seed(5)
    local x = nd.random.uniform(-2, 2, { 2, 3, 4 })
    local h = x:astype("float16")
    local g, b = nd.random.uniform(0.5, 1.5, { 3 }), nd.random.uniform(-1, 1, { 3 })
    local mm, mv = nd.zeros { 3 }, nd.ones { 3 }
    local mm16, mv16 = nd.zeros { 3 }, nd.ones { 3 }
    local y = nd.batch_norm(x, g, b, mm, mv, { training = true })
    local y16, mean, var = nd.batch_norm(h, g, b, mm16, mv16, { training = true })
    assert.equal("float16", y16:dtype())
    assert.equal("float32", mean:dtype())
    assert.equal("float32", var:dtype())
    near(y16, y, 4e-3)
    near(mm16, mm, 2e-3) -- the moving statistics updated in place, as float32's
    near(mv16, mv, 2e-3)
    local g4, b4 = nd.random.uniform(0.5, 1.5, { 4 }), nd.random.uniform(-1, 1, { 4 })
    local l16 = nd.layer_norm(h, g4:astype("float16"), b4:astype("float16"))
    assert.equal("float16", l16:dtype())
    near(l16, nd.layer_norm(x, g4, b4), 4e-3)
    local i16 = nd.instance_norm(h, g, b)
    assert.equal("float16", i16:dtype())
    near(i16, nd.instance_norm(x, g, b), 4e-3)
    local n16 = nd.group_norm(h, g, b, { num_groups = 3 })
    assert.equal("float16", n16:dtype())
    near(n16, nd.group_norm(x, g, b, { num_groups = 3 }), 4e-3)
  end)
  it("differentiates through, the gradient float16", function()
    local h = nd.random.uniform(-1, 1, { 2, 3, 4 }):astype("float16")
    h:attach_grad()
    local y = mx.autograd.record(function() return nd.layer_norm(h, nd.ones { 4 }, nd.zeros { 4 }) end)
    y:backward()
    assert.equal("float16", h:grad():dtype())
  end)
  it("refuses float16 statistics for batch_norm, and out=, at the caller's line", function()
    local h, o = nd.ones { 2, 3 }:astype("float16"), nd.ones { 3 }
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = nd.batch_norm(h, o:astype("float16"), o, o, o) return r end, line)
    assert.is_truthy(msg:find("float16 data takes float32 gamma", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = nd.layer_norm(h, o, o, { out = nd.ones { 2, 3 } }) return r end, line)
    assert.is_truthy(msg:find("out= is not offered with float16 data", 1, true), msg)
  end)
  it("in symbols: inferred as mx.nd computes them, bound and hybridized to the eager values", function()
    local S = mx.sym
    local x = S.var("x")
    local g_, b_ = S.var("g"), S.var("b")
    local net = S.Group { S.BatchNorm(x, g_, b_, S.var("mm"), S.var("mv")),
      S.LayerNorm(x, S.var("g4"), S.var("b4")), S.InstanceNorm(x, g_, b_),
      S.GroupNorm(x, g_, b_, { num_groups = 3 }) }
    local a, o, aux = net:infer_type { x = "float16", g = "float32", b = "float32", mm = "float32",
      mv = "float32", g4 = "float16", b4 = "float32" }
    -- (LayerNorm's mean and std: float16 too)
    assert.same({ "float16", "float16", "float16", "float16", "float16", "float16" }, o)
    assert.same({ "float32", "float32" }, aux)
    assert.equal("float16", a[1])
    local bn = S.BatchNorm(x, S.var("g"), S.var("b"), S.var("mm"), S.var("mv"),
      { output_mean_var = true })
    local _, bo = bn:infer_type { x = "float16", g = "float32", b = "float32", mm = "float32",
      mv = "float32" }
    assert.same({ "float16", "float32", "float32" }, bo)
    local ok, err = pcall(function()
      return S.LayerNorm(x, S.var("g4"), S.var("b4")):infer_type { x = "float16" } end)
    assert.is_true(ok, err)
    ok, err = pcall(function() return bn:infer_type { x = "float16", g = "float16" } end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("float16 data takes float32 gamma", 1, true), tostring(err))
    -- bound: the eager values
    mx.random.seed(3)
    local X = nd.random.uniform(-2, 2, { 2, 3, 4 }):astype("float16")
    local g, b = nd.random.uniform(0.5, 1.5, { 3 }), nd.random.uniform(-1, 1, { 3 })
    local g4, b4 = nd.random.uniform(0.5, 1.5, { 4 }):astype("float16"), nd.zeros { 4 }
    local ex = net:bind(mx.cpu(), { x = X, g = g, b = b, g4 = g4, b4 = b4 },
      { aux_states = { mm = nd.zeros { 3 }, mv = nd.ones { 3 } } })
    ex:forward()
    local want = { nd.batch_norm(X, g, b, nd.zeros { 3 }, nd.ones { 3 }), nd.layer_norm(X, g4, b4),
      nd.instance_norm(X, g, b), nd.group_norm(X, g, b, { num_groups = 3 }) }
    for k, j in ipairs { 1, 2, 5, 6 } do
      assert.equal("float16", ex.outputs[j]:dtype())
      near(ex.outputs[j], want[k], 0)
    end
    -- a hybridized block: the same
    local L = mx.gluon.nn.LayerNorm()
    L:initialize()
    local e = L(X:astype("float32"))
    L:hybridize()
    local h1 = L(X)
    assert.equal("float16", h1:dtype())
    near(h1, e, 4e-3)
    near(L(X), h1, 0)
  end)
end)
