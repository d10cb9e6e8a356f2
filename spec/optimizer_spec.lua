-- Fused optimizer update ops and mx.optimizer: steps checked against the update rules
-- computed by hand (in Lua doubles), cpu kernels against the ref kernels.
local mx = require("mx")
local nd = mx.nd

local W = { 1.0, -2.0, 3.0, 0.5 }
local G = { 0.5, 1.0, -4.0, 2.0 }

local function t(v) return nd.array(v, { dtype = "float64" }) end
local close = require("helpers.close").within(1e-12)
local function clip(x, c) if c and c >= 0 then return math.max(-c, math.min(c, x)) end return x end

describe("fused update ops", function()
  it("sgd_update with wd, rescale_grad and clip_gradient", function()
    local w = t(W)
    nd.sgd_update(w, t(G), { lr = 0.1, wd = 0.01, rescale_grad = 0.5, clip_gradient = 0.6, out = w })
    local e = {}
    for i = 1, 4 do e[i] = W[i] - 0.1 * (clip(0.5 * G[i], 0.6) + 0.01 * W[i]) end
    close(w, e)
  end)

  it("sgd_mom_update writes weight and momentum in place", function()
    local w, m = t(W), t { 0.1, 0.2, -0.3, 0 }
    nd.sgd_mom_update(w, t(G), m, { lr = 0.1, momentum = 0.9, wd = 0.001, out = { w, m } })
    local ew, em = {}, {}
    local M0 = { 0.1, 0.2, -0.3, 0 }
    for i = 1, 4 do
      em[i] = 0.9 * M0[i] - 0.1 * (G[i] + 0.001 * W[i])
      ew[i] = W[i] + em[i]
    end
    close(w, ew)
    close(m, em)
  end)

  it("sgd_mom_update without out= returns new tensors and leaves inputs alone", function()
    local w, m = t(W), t { 0, 0, 0, 0 }
    local w2, m2 = nd.sgd_mom_update(w, t(G), m, { lr = 1, momentum = 0.5 })
    close(w, W)
    close(m, { 0, 0, 0, 0 })
    close(m2, { -0.5, -1, 4, -2 })
    close(w2, { 0.5, -3, 7, -1.5 })
  end)

  it("nag_mom_update", function()
    local w, m = t(W), t { 0.1, 0.2, -0.3, 0 }
    nd.nag_mom_update(w, t(G), m, { lr = 0.1, momentum = 0.9, wd = 0.01, out = { w, m } })
    local M0 = { 0.1, 0.2, -0.3, 0 }
    local ew, em = {}, {}
    for i = 1, 4 do
      local g = G[i] + 0.01 * W[i]
      em[i] = 0.9 * M0[i] - 0.1 * g
      ew[i] = W[i] + 0.9 * em[i] - 0.1 * g
    end
    close(w, ew)
    close(m, em)
  end)

  it("adam_update (wd inside the clip, as MXNet's kernel)", function()
    local w, m, v = t(W), t { 0.1, 0, 0, -0.1 }, t { 0.01, 0, 0.5, 0 }
    nd.adam_update(w, t(G), m, v, { lr = 0.01, wd = 0.1, clip_gradient = 3, out = { w, m, v } })
    local M0, V0 = { 0.1, 0, 0, -0.1 }, { 0.01, 0, 0.5, 0 }
    local ew, em, ev = {}, {}, {}
    for i = 1, 4 do
      local g = clip(G[i] + 0.1 * W[i], 3)
      em[i] = 0.9 * M0[i] + 0.1 * g
      ev[i] = 0.999 * V0[i] + 0.001 * g * g
      ew[i] = W[i] - 0.01 * em[i] / (math.sqrt(ev[i]) + 1e-8)
    end
    close(w, ew)
    close(m, em)
    close(v, ev)
  end)

  it("adamw_update decouples weight decay", function()
    local w, m, v = t(W), t { 0, 0, 0, 0 }, t { 0, 0, 0, 0 }
    nd.adamw_update(w, t(G), m, v, { lr = 1, eta = 0.01, wd = 0.1, epsilon = 1e-6, out = { w, m, v } })
    local ew = {}
    for i = 1, 4 do
      local mm, vv = 0.1 * G[i], 0.001 * G[i] * G[i]
      ew[i] = W[i] - 0.01 * (mm / (math.sqrt(vv) + 1e-6) + 0.1 * W[i])
    end
    close(w, ew)
  end)

  it("rmsprop_update and rmspropalex_update", function()
    local w, n = t(W), t { 0.1, 0.1, 0.1, 0.1 }
    nd.rmsprop_update(w, t(G), n, { lr = 0.01, rho = 0.9, epsilon = 1e-8, clip_weights = 2.5,
      out = { w, n } })
    local ew, en = {}, {}
    for i = 1, 4 do
      en[i] = 0.9 * 0.1 + 0.1 * G[i] * G[i]
      ew[i] = clip(W[i] - 0.01 * G[i] / math.sqrt(en[i] + 1e-8), 2.5)
    end
    close(w, ew)
    close(n, en)
    local w2, n2, g2, d2 = t(W), t { 1, 1, 1, 1 }, t { 0, 0, 0, 0 }, t { 0, 0.1, 0, 0 }
    nd.rmspropalex_update(w2, t(G), n2, g2, d2, { lr = 0.01, rho = 0.9, momentum = 0.8,
      out = { w2, n2, g2, d2 } })
    local D0 = { 0, 0.1, 0, 0 }
    for i = 1, 4 do
      local nn = 0.9 + 0.1 * G[i] ^ 2
      local gg = 0.1 * G[i]
      local dd = 0.8 * D0[i] - 0.01 * G[i] / math.sqrt(nn - gg * gg + 1e-8)
      ew[i] = W[i] + dd
    end
    close(w2, ew)
  end)

  it("adagrad_update", function()
    local w, h = t(W), t { 1, 0, 0, 1 }
    nd.adagrad_update(w, t(G), h, { lr = 0.1, epsilon = 1e-7, wd = 0.01, out = { w, h } })
    local H0, ew, eh = { 1, 0, 0, 1 }, {}, {}
    for i = 1, 4 do
      local g = G[i] + 0.01 * W[i]
      eh[i] = H0[i] + g * g
      ew[i] = W[i] - 0.1 * g / (math.sqrt(eh[i]) + 1e-7)
    end
    close(w, ew)
    close(h, eh)
  end)

  it("reject mismatched shapes and dtypes naming the argument", function()
    assert.has_error(function() nd.sgd_update(t(W), t { 1, 2 }, { lr = 0.1 }) end,
      "sgd_update: grad has shape (2,) but weight has shape (4,)")
    assert.has_error(function()
      nd.adam_update(t(W), t(G), nd.zeros { 4 }, t(G), { lr = 0.1 })
    end, "adam_update: state 1 has dtype float32 but weight has dtype float64")
  end)

  it("cpu kernels match the ref kernels (f32, parallel sizes)", function()
    math.randomseed(7)
    local n = 70003 -- odd: exercises the vector loops' scalar tails
    local function rnd(pos)
      local v = {}
      for i = 1, n do v[i] = pos and math.random() or (math.random() - 0.5) * 4 end
      return nd.array(v)
    end
    local w, g, a, b = rnd(), rnd(), rnd(), rnd(true)
    local cases = {
      { "sgd_update", { w, g }, { lr = 0.1, wd = 0.01, clip_gradient = 1 } },
      { "sgd_mom_update", { w, g, a }, { lr = 0.1, momentum = 0.9, wd = 0.01 } },
      { "nag_mom_update", { w, g, a }, { lr = 0.1, momentum = 0.9, rescale_grad = 0.5 } },
      { "adam_update", { w, g, a, b }, { lr = 0.01, wd = 0.1, clip_gradient = 1.5 } },
      { "adamw_update", { w, g, a, b }, { lr = 0.01, eta = 0.5, wd = 0.1 } },
      { "rmsprop_update", { w, g, b }, { lr = 0.01, clip_weights = 1 } },
      { "rmspropalex_update", { w, g, b, nd.zeros { n }, a }, { lr = 0.01, epsilon = 1e-2 } },
      { "adagrad_update", { w, g, b }, { lr = 0.1, wd = 0.01 } },
    }
    for _, cs in ipairs(cases) do
      local args = {}
      for i, x in ipairs(cs[2]) do args[i] = x end
      args[#args + 1] = cs[3]
      local r1 = { nd[cs[1]](unpack(args)) }
      local r2 = { nd._ref[cs[1]](unpack(args)) }
      assert.are.equal(#cs[2] - 1, #r1)
      for k = 1, #r1 do
        local d = (r1[k] - r2[k]):abs():max():item()
        assert.is_true(d < 1e-5, cs[1] .. " output " .. k .. " differs by " .. d)
      end
    end
  end)
end)

describe("mx.optimizer", function()
  local function step(opt, w, g, st, idx) opt:update(idx or 1, w, g, st) end

  it("SGD with momentum over two steps, lr_mult/wd_mult from param_dict", function()
    local p = { lr_mult = 2, wd_mult = 0 }
    local opt = mx.optimizer.create("sgd", { learning_rate = 0.1, momentum = 0.9, wd = 0.5,
      rescale_grad = 0.5, param_dict = { [1] = p } })
    local w = t(W)
    local st = opt:create_state(1, w)
    assert.are.equal(1, #st)
    step(opt, w, t(G), st)
    step(opt, w, t(G), st)
    local ew, m = {}, {}
    for i = 1, 4 do
      local wi, mi = W[i], 0
      for _ = 1, 2 do
        mi = 0.9 * mi - 0.2 * (0.5 * G[i])
        wi = wi + mi
      end
      ew[i], m[i] = wi, mi
    end
    close(w, ew)
    close(st[1], m)
    assert.are.equal(2, opt.num_update)
  end)

  it("SGD without momentum keeps no state; nesterov uses nag_mom_update", function()
    local opt = mx.optimizer.SGD { learning_rate = 0.5 }
    local w = t(W)
    local st = opt:create_state(1, w)
    assert.are.equal(0, #st)
    step(opt, w, t(G), st)
    close(w, { 0.75, -2.5, 5, -0.5 })
    local nag = mx.optimizer.SGD { learning_rate = 0.1, momentum = 0.9, nesterov = true }
    local w2 = t(W)
    local s2 = nag:create_state(1, w2)
    step(nag, w2, t(G), s2)
    local e = {}
    for i = 1, 4 do e[i] = W[i] + 0.9 * (-0.1 * G[i]) - 0.1 * G[i] end
    close(w2, e)
  end)

  it("Adam applies the bias correction per index update count", function()
    local opt = mx.optimizer.Adam { learning_rate = 0.01 }
    local w = t(W)
    local st = opt:create_state(1, w)
    step(opt, w, t(G), st)
    step(opt, w, t(G), st)
    local e = {}
    for i = 1, 4 do
      local wi, m, v = W[i], 0, 0
      for k = 1, 2 do
        m = 0.9 * m + 0.1 * G[i]
        v = 0.999 * v + 0.001 * G[i] ^ 2
        local lr = 0.01 * math.sqrt(1 - 0.999 ^ k) / (1 - 0.9 ^ k)
        wi = wi - lr * m / (math.sqrt(v) + 1e-8)
      end
      e[i] = wi
    end
    close(w, e)
  end)

  it("AdamW, RMSProp, AdaGrad take MXNet's defaults", function()
    local aw = mx.optimizer.create("adamw", { wd = 0.1 })
    assert.are.equal(0.001, aw.lr)
    assert.are.equal(1e-6, aw.epsilon)
    local w = t(W)
    local st = aw:create_state(1, w)
    step(aw, w, t(G), st)
    local e = {}
    for i = 1, 4 do
      local lr = 0.001 * math.sqrt(1 - 0.999) / (1 - 0.9)
      local m, v = 0.1 * G[i], 0.001 * G[i] ^ 2
      e[i] = W[i] - lr * (m / (math.sqrt(v) + 1e-6) + 0.1 * W[i])
    end
    close(w, e)
    local rms = mx.optimizer.create("RMSProp")
    assert.are.equal(0.9, rms.rho)
    w = t(W)
    st = rms:create_state(1, w)
    step(rms, w, t(G), st)
    for i = 1, 4 do
      local n = 0.1 * G[i] ^ 2
      e[i] = W[i] - 0.001 * G[i] / math.sqrt(n + 1e-8)
    end
    close(w, e)
    local crms = mx.optimizer.create("rmsprop", { centered = true })
    assert.are.equal(3, #crms:create_state(1, w))
    local ada = mx.optimizer.create("adagrad")
    w = t(W)
    st = ada:create_state(1, w)
    step(ada, w, t(G), st)
    for i = 1, 4 do e[i] = W[i] - 0.01 * G[i] / (math.abs(G[i]) + 1e-6) end
    close(w, e)
  end)

  it("uses the lr_scheduler with the update count; set_learning_rate refuses then", function()
    local sched = mx.lr_scheduler.FactorScheduler(1, { factor = 0.5 })
    local opt = mx.optimizer.SGD { learning_rate = 1, lr_scheduler = sched }
    assert.are.equal(1, sched.base_lr)
    local w = t { 0 }
    for _ = 1, 3 do opt:update(1, w, t { 1 }, {}) end
    -- lrs 1 (count 1), 0.5 (count 2), 0.25 (count 3)
    close(w, { -1.75 })
    assert.has_error(function() opt:set_learning_rate(0.1) end)
    local plain = mx.optimizer.SGD()
    plain:set_learning_rate(0.3)
    assert.are.equal(0.3, plain:learning_rate())
  end)

  it("rejects unknown names and options", function()
    assert.has_error(function() mx.optimizer.create("nope") end)
    assert.has_error(function() mx.optimizer.Adam { beta3 = 1 } end)
  end)

  it("takes its update ops' params as options: defaults, MXNet's overrides, types", function()
    local lib = require("mx.core.lib")
    -- the op's default unless MXNet's optimizer default differs (AdamW, AdaGrad, RMSProp)
    assert.equal(lib.ops_by_name.adam_update.pindex.epsilon.default, mx.optimizer.Adam().epsilon)
    assert.equal(1e-6, mx.optimizer.AdamW().epsilon)
    assert.equal(1e-6, mx.optimizer.AdaGrad().epsilon)
    assert.equal(0.9, mx.optimizer.RMSProp().rho)
    assert.equal(2.5, mx.optimizer.RMSProp({ clip_weights = 2.5 }).clip_weights)
    -- every hyper-parameter of every op of a class is an option of that class
    for _, name in ipairs { "sgd", "nag", "adam", "adamw", "rmsprop", "adagrad", "signum",
        "ftrl", "adamax", "nadam", "adadelta", "lamb", "lars" } do
      local o = mx.optimizer.create(name)
      for k in pairs(getmetatable(o)._hyper) do
        assert.is_not_nil(o[k], name .. "." .. k)
      end
    end
    local ok, err = pcall(function()
      local o = mx.optimizer.Adam { beta1 = "0.9" }
      return o
    end)
    assert.is_false(ok)
    assert.matches("optimizer_spec.lua:%d+: Adam: beta1 must be a number, got string", err)
    ok, err = pcall(mx.optimizer.create, "lamb", { bias_correction = 1 })
    assert.is_false(ok)
    assert.matches("LAMB: bias_correction must be a boolean, got number", err, 1, true)
  end)
end)

-- hyper-parameters outside what the float kernels can represent (or outside the
-- op's documented range) are errors naming the op and the param, at the caller's line.
describe("update ops validate their hyper-parameters", function()
  local err_at = require("helpers.err_at")("optimizer_spec.lua")
  local function args(n)
    local a = {}
    for i = 1, n do a[i] = nd.array({ 1, 2, 3 }) end
    return a
  end
  local BAD = {
    { "sgd_update", 2, "lr", 1e308 }, { "sgd_update", 2, "wd", 0 / 0 },
    { "sgd_mom_update", 3, "momentum", 1 / 0 }, { "nag_mom_update", 3, "rescale_grad", -1e39 },
    { "adam_update", 4, "beta1", 2 ^ 40 }, { "adam_update", 4, "beta2", 1 },
    { "adam_update", 4, "epsilon", 0 }, { "adamw_update", 4, "beta1", -0.5 },
    { "rmsprop_update", 3, "rho", 1e308 }, { "rmspropalex_update", 5, "rho", 1.5 },
    { "adagrad_update", 3, "clip_gradient", -1 / 0 }, { "adamw_update", 4, "eta", 1e39 },
  }
  for _, c in ipairs(BAD) do
    it(c[1] .. " " .. c[3] .. "=" .. c[4] .. " is an error", function()
      local a = args(c[2])
      a[c[2] + 1] = { [c[3]] = c[4] }
      local f = nd[c[1]]
      local line = debug.getinfo(1, "l").currentline + 1
      local msg = err_at(function() local r = f(unpack(a, 1, c[2] + 1)) return r end, line)
      assert.is_truthy(msg:find(c[1], 1, true) and msg:find(c[3], 1, true), msg)
    end)
  end
  it("accepts the defaults, beta 0, rho 0 and 1, and large finite lr in float64", function()
    for _, o in ipairs({ {}, { beta1 = 0, beta2 = 0 }, { lr = 1e300, epsilon = 1e300 } }) do
      local a = { t({ 1, 2 }), t({ 1, 1 }), t({ 0, 0 }), t({ 0, 0 }) }
      assert.are.same(nd._ref.adam_update(a[1], a[2], a[3], a[4], o):tolist(),
        nd.adam_update(a[1], a[2], a[3], a[4], o):tolist())
    end
    for _, rho in ipairs({ 0, 1 }) do
      local a = { t({ 1, 2 }), t({ 1, 1 }), t({ 1, 1 }) }
      assert.are.same(nd._ref.rmsprop_update(a[1], a[2], a[3], { rho = rho }):tolist(),
        nd.rmsprop_update(a[1], a[2], a[3], { rho = rho }):tolist())
    end
  end)
end)

-- signSGD/Signum, FTRL, Adamax, Nadam, AdaDelta. Each optimizer runs several
-- steps against its MXNet 1.9 update rule computed here in Lua doubles.
describe("signSGD/Signum, FTRL, Adamax, Nadam, AdaDelta", function()
  local function sign(x) return x > 0 and 1 or x < 0 and -1 or 0 end
  local GS = { { 0.5, 1.0, -4.0, 2.0 }, { -0.25, 0.5, 1.0, 0 }, { 1.5, -2.0, 0.125, 3.0 } }

  -- The reference rules: step(o, w, g, st, t) updates the Lua arrays w and st in place
  -- (o: the options with MXNet's defaults filled in).
  local function pre(o, g, w, wd_in)
    local x = (o.rescale_grad or 1) * g
    if wd_in == "inside" then x = clip(x + (o.wd or 0) * w, o.clip_gradient) end
    if wd_in == "after" then x = clip(x, o.clip_gradient) + (o.wd or 0) * w end
    if wd_in == nil then x = clip(x, o.clip_gradient) end
    return x
  end
  local RULES = {
    signum = { nst = 1, step = function(o, w, gr, st)
      local mu, wd = o.momentum or 0.9, o.wd or 0
      for i = 1, #w do
        if mu == 0 then
          w[i] = (1 - o.learning_rate * wd) * w[i] - o.learning_rate * sign(gr[i])
        else
          local m = mu * st[1][i] - (1 - mu) * (wd * w[i] + pre(o, gr[i], w[i]))
          st[1][i] = m
          w[i] = (1 - o.learning_rate * (o.wd_lh or 0)) * w[i] + o.learning_rate * sign(m)
        end
      end
    end },
    ftrl = { nst = 2, step = function(o, w, gr, st)
      local lr, l1, beta, wd = o.learning_rate or 0.1, o.lamda1 or 0.01, o.beta or 1, o.wd or 0
      for i = 1, #w do
        local g = pre(o, gr[i], w[i])
        local z, n = st[1][i], st[2][i]
        z = z + g - (math.sqrt(n + g * g) - math.sqrt(n)) * w[i] / lr
        n = n + g * g
        st[1][i], st[2][i] = z, n
        w[i] = math.abs(z) > l1 and (sign(z) * l1 - z) / ((beta + math.sqrt(n)) / lr + wd) or 0
      end
    end },
    adamax = { nst = 2, step = function(o, w, gr, st, n)
      local b1, b2 = o.beta1 or 0.9, o.beta2 or 0.999
      local lr = (o.learning_rate or 0.002) / (1 - b1 ^ n)
      for i = 1, #w do
        local g = pre(o, gr[i], w[i], "inside")
        st[1][i] = b1 * st[1][i] + (1 - b1) * g
        st[2][i] = math.max(b2 * st[2][i], math.abs(g))
        w[i] = w[i] - lr * st[1][i] / st[2][i]
      end
    end },
    nadam = { nst = 2, step = function(o, w, gr, st, n, aux)
      local b1, b2, eps, sd = o.beta1 or 0.9, o.beta2 or 0.999, o.epsilon or 1e-8, 0.004
      local lr = o.learning_rate or 0.001
      local mt = b1 * (1 - 0.5 * 0.96 ^ (n * sd))
      local mt1 = b1 * (1 - 0.5 * 0.96 ^ ((n + 1) * sd))
      aux.ms = (aux.ms or 1) * mt
      local msn = aux.ms * mt1
      for i = 1, #w do
        local g = pre(o, gr[i], w[i], "inside")
        st[1][i] = b1 * st[1][i] + (1 - b1) * g
        st[2][i] = b2 * st[2][i] + (1 - b2) * g * g
        local gp = g / (1 - aux.ms)
        local mp = st[1][i] / (1 - msn)
        local vp = st[2][i] / (1 - b2 ^ n)
        local mbar = (1 - mt) * gp + mt1 * mp
        w[i] = w[i] - lr * mbar / (math.sqrt(vp) + eps)
      end
    end },
    lamb = { nst = 2, step = function(o, w, gr, st, n)
      local b1, b2, eps, wd = o.beta1 or 0.9, o.beta2 or 0.999, o.epsilon or 1e-6, o.wd or 0
      local gd, r1, r2 = {}, 0, 0
      for i = 1, #w do
        local g = pre(o, gr[i], w[i])
        st[1][i] = b1 * st[1][i] + (1 - b1) * g
        st[2][i] = b2 * st[2][i] + (1 - b2) * g * g
        local m, v = st[1][i], st[2][i]
        if o.bias_correction ~= false then m, v = m / (1 - b1 ^ n), v / (1 - b2 ^ n) end
        gd[i] = m / (math.sqrt(v) + eps) + wd * w[i]
        r1, r2 = r1 + w[i] * w[i], r2 + gd[i] * gd[i]
      end
      r1, r2 = math.sqrt(r1), math.sqrt(r2)
      if o.lower_bound then r1 = math.max(r1, o.lower_bound) end
      if o.upper_bound then r1 = math.min(r1, o.upper_bound) end
      local lr = o.learning_rate or 0.001
      if r1 ~= 0 and r2 ~= 0 then lr = lr * r1 / r2 end
      for i = 1, #w do w[i] = w[i] - lr * gd[i] end
    end },
    adadelta = { nst = 2, step = function(o, w, gr, st)
      local rho, eps, wd, lr = o.rho or 0.9, o.epsilon or 1e-5, o.wd or 0, o.learning_rate or 1
      for i = 1, #w do
        local g = pre(o, gr[i], w[i])
        st[1][i] = rho * st[1][i] + (1 - rho) * g * g
        local d = math.sqrt(st[2][i] + eps) / math.sqrt(st[1][i] + eps) * g
        st[2][i] = rho * st[2][i] + (1 - rho) * d * d
        w[i] = w[i] - lr * (d + wd * w[i]) -- lr = 1: MXNet 1.9's step
      end
    end },
  }

  local function run_case(name, o, steps)
    local rule = RULES[name]
    local opt = mx.optimizer.create(name, o)
    local w = t(W)
    local st = opt:create_state(1, w)
    local nst = (name == "signum" and o.momentum == 0) and 0 or rule.nst
    assert.are.equal(nst, #st)
    local ew, est, aux = {}, {}, {}
    for i = 1, 4 do ew[i] = W[i] end
    for k = 1, nst do est[k] = { 0, 0, 0, 0 } end
    for s = 1, steps do
      local gr = GS[(s - 1) % #GS + 1]
      opt:update(1, w, t(gr), st)
      rule.step(o, ew, gr, est, s, aux)
      close(w, ew)
      for k = 1, nst do close(st[k], est[k]) end
    end
  end

  it("Signum: momentum, wd and wd_lh over several steps (signum_update)", function()
    run_case("signum", { learning_rate = 0.01, momentum = 0.9, wd = 0.05, wd_lh = 0.1 }, 5)
    run_case("signum", { learning_rate = 0.03, momentum = 0.5, clip_gradient = 0.7,
      rescale_grad = 2 }, 4)
  end)

  it("Signum with momentum 0 is signSGD (signsgd_update, no state)", function()
    local opt = mx.optimizer.create("signum", { momentum = 0 })
    assert.are.same({}, opt:create_state(1, t(W)))
    run_case("signum", { learning_rate = 0.01, momentum = 0, wd = 0.2 }, 4)
    -- MXNet's signsgd_update: rescale_grad and clip_gradient do not change a sign step
    local w = t(W)
    nd.signsgd_update(w, t(G), { lr = 0.5, rescale_grad = 3, clip_gradient = 0.1, out = w })
    local e = {}
    for i = 1, 4 do e[i] = W[i] - 0.5 * sign(G[i]) end
    close(w, e)
  end)

  it("FTRL: z and n states, L1 thresholding, wd", function()
    run_case("ftrl", { learning_rate = 0.1 }, 5)
    -- a zero gradient on zero state: no change to z, n (not 0/0)
    local w, z, n = t(W), t { 0, 0, 0, 0 }, t { 0, 0, 0, 0 }
    nd.ftrl_update(w, t { 0, 0, 0, 0 }, z, n, { lr = 0.1, out = { w, z, n } })
    close(z, { 0, 0, 0, 0 })
    close(w, { 0, 0, 0, 0 })
    run_case("ftrl", { learning_rate = 0.5, lamda1 = 0.6, beta = 2, wd = 0.1,
      clip_gradient = 1.5 }, 5)
  end)

  it("Adamax: bias-corrected lr, infinity-norm state", function()
    run_case("adamax", { learning_rate = 0.002 }, 6)
    run_case("adamax", { learning_rate = 0.01, beta1 = 0.8, beta2 = 0.9, wd = 0.1,
      rescale_grad = 0.5, clip_gradient = 0.9 }, 6)
  end)

  it("Nadam: the momentum schedule over several steps", function()
    run_case("nadam", { learning_rate = 0.001 }, 6)
    run_case("nadam", { learning_rate = 0.01, beta1 = 0.8, wd = 0.01, clip_gradient = 1 }, 6)
  end)

  it("Nadam keeps the momentum schedule per parameter index", function()
    local opt = mx.optimizer.create("nadam", { learning_rate = 0.01 })
    local w1, w2 = t(W), t(W)
    local s1, s2 = opt:create_state(1, w1), opt:create_state(2, w2)
    for _ = 1, 3 do
      opt:update(1, w1, t(G), s1)
      opt:update(2, w2, t(G), s2)
    end
    close(w2, w1:tolist())
  end)

  it("AdaDelta: MXNet 1.9's step at the default learning_rate 1; lr scales the step", function()
    run_case("adadelta", {}, 5)
    run_case("adadelta", { rho = 0.5, epsilon = 1e-3, wd = 0.1, clip_gradient = 2 }, 5)
    local a = mx.optimizer.create("adadelta", { learning_rate = 0.5 })
    local b = mx.optimizer.create("adadelta")
    local wa, wb = t(W), t(W)
    a:update(1, wa, t(G), a:create_state(1, wa))
    b:update(1, wb, t(G), b:create_state(1, wb))
    local e = {}
    local da, db = wa:tolist(), wb:tolist()
    for i = 1, 4 do e[i] = W[i] - 0.5 * (W[i] - db[i]) end
    close(da, e)
  end)

  it("LAMB: phase 1 fused, trust ratio r1/r2, bounds, bias_correction off", function()
    run_case("lamb", { learning_rate = 0.01 }, 5)
    run_case("lamb", { learning_rate = 0.02, wd = 0.1, lower_bound = 4, upper_bound = 10,
      clip_gradient = 2 }, 4)
    run_case("lamb", { learning_rate = 0.02, upper_bound = 1, bias_correction = false }, 4)
    -- phase 1 alone, as MXNet's lamb_update_phase1 (no lr; states in place)
    local w, m, v = t(W), t { 0, 0, 0, 0 }, t { 0, 0, 0, 0 }
    local gd = t { 0, 0, 0, 0 }
    nd.lamb_update_phase1(w, t(G), m, v, { wd = 0.5, t = 1, out = { gd, m, v } })
    local e = {}
    for i = 1, 4 do e[i] = G[i] / (math.abs(G[i]) + 1e-6) + 0.5 * W[i] end
    close(gd, e)
    close(w, W)
  end)

  it("LARS: trust-ratio lr per layer, plain lr for bias/gamma/beta, momentum correction", function()
    local function norm(v)
      local s = 0
      for i = 1, #v do s = s + v[i] * v[i] end
      return math.sqrt(s)
    end
    for _, case in ipairs { { "dense0_weight", true }, { "dense0_bias", false } } do
      local sched = mx.lr_scheduler.FactorScheduler(2, { factor = 0.5 })
      local opt = mx.optimizer.create("lars", { learning_rate = 0.2, momentum = 0.9, eta = 0.01, eps = 1e-3,
        wd = 0.1, rescale_grad = 0.5, lr_scheduler = sched,
        param_idx2name = { [1] = case[1] } })
      local w = t(W)
      local st = opt:create_state(1, w)
      local ew, em, last = { W[1], W[2], W[3], W[4] }, { 0, 0, 0, 0 }, nil
      for s = 1, 5 do
        local gr = GS[(s - 1) % #GS + 1]
        opt:update(1, w, t(gr), st)
        local base = sched(s)
        local lr = base
        if case[2] then
          local gs = {}
          for i = 1, 4 do gs[i] = 0.5 * gr[i] end
          lr = lr * 0.01 * norm(ew) / (norm(gs) + 0.1 * norm(ew) + 1e-3)
        end
        local mu = 0.9 * base / (last or base)
        last = base
        for i = 1, 4 do
          em[i] = mu * em[i] - lr * (0.5 * gr[i] + 0.1 * ew[i])
          ew[i] = ew[i] + em[i]
        end
        close(w, ew)
        close(st[1], em)
      end
    end
  end)

  it("create() by every name, case-insensitive; unknown options are errors", function()
    for _, n in ipairs { "Signum", "FTRL", "Adamax", "Nadam", "AdaDelta", "adadelta", "LAMB", "LARS" } do
      assert.truthy(mx.optimizer.create(n))
    end
    assert.has_error(function() mx.optimizer.create("nadam", { beta3 = 1 }) end)
    assert.has_error(function() mx.optimizer.create("ftrl", { lamda2 = 1 }) end)
  end)

  it("cpu kernels match the ref kernels (f32, parallel sizes)", function()
    math.randomseed(11)
    local n = 70003
    local function rnd(pos)
      local v = {}
      for i = 1, n do v[i] = pos and math.random() + 0.1 or (math.random() - 0.5) * 4 end
      return nd.array(v)
    end
    local w, g, a, b = rnd(), rnd(), rnd(), rnd(true)
    local cases = {
      { "signsgd_update", { w, g }, { lr = 0.1, wd = 0.01 } },
      { "signum_update", { w, g, a }, { lr = 0.1, momentum = 0.9, wd = 0.01, wd_lh = 0.1,
        clip_gradient = 1 } },
      { "ftrl_update", { w, g, a, b }, { lr = 0.1, lamda1 = 0.3, beta = 1, wd = 0.01 } },
      { "adamax_update", { w, g, a, b }, { lr = 0.01, wd = 0.1, clip_gradient = 1.5 } },
      { "nadam_update", { w, g, a, b }, { lr = 0.01, g_coef = 0.9, m_coef = 0.8, v_coef = 1.5 } },
      { "adadelta_update", { w, g, b, b }, { lr = 1, rho = 0.9, epsilon = 1e-3, wd = 0.01 } },
      { "lamb_update_phase1", { w, g, a, b }, { t = 3, wd = 0.01, clip_gradient = 1.5 } },
    }
    for _, cs in ipairs(cases) do
      local args = {}
      for i, x in ipairs(cs[2]) do args[i] = x end
      args[#args + 1] = cs[3]
      local r1 = { nd[cs[1]](unpack(args)) }
      local r2 = { nd._ref[cs[1]](unpack(args)) }
      assert.are.equal(#cs[2] - 1, #r1)
      for k = 1, #r1 do
        local d = ((r1[k] - r2[k]):abs() / (r2[k]:abs() + 1)):max():item()
        assert.is_true(d < 1e-5, cs[1] .. " output " .. k .. " differs by " .. d)
      end
    end
  end)

  it("the new update ops reject bad hyper-parameters naming the op and the param", function()
    local a = { t { 1, 2 }, t { 1, 1 }, t { 0, 0 }, t { 1, 1 } }
    for _, c in ipairs { { "adamax_update", "beta1", 1 }, { "nadam_update", "epsilon", 0 },
      { "adadelta_update", "rho", 2 }, { "ftrl_update", "lamda1", 0 / 0 },
      { "signum_update", "momentum", 1 / 0 } } do
      local ok, err = pcall(nd[c[1]], a[1], a[2], a[3], a[4], { [c[2]] = c[3] })
      if c[1] == "signum_update" then
        ok, err = pcall(nd[c[1]], a[1], a[2], a[3], { [c[2]] = c[3] })
      end
      assert.is_false(ok)
      assert.truthy(tostring(err):find(c[1], 1, true) and tostring(err):find(c[2], 1, true),
        tostring(err))
    end
  end)

  it("gluon.Trainer steps with each new optimizer as its rule says", function()
    local gluon = mx.gluon
    for _, name in ipairs { "signum", "ftrl", "adamax", "nadam", "adadelta", "lamb" } do
      local d = gluon.nn.Dense(1, { in_units = 4, use_bias = false, dtype = "float64" })
      d:initialize()
      d.weight:set_data(nd.array({ W }, { dtype = "float64" }))
      local tr = gluon.Trainer(d:collect_params(), name, { learning_rate = 0.05 })
      local rule, ew, est, aux = RULES[name], {}, {}, {}
      for i = 1, 4 do ew[i] = W[i] end
      for k = 1, rule.nst do est[k] = { 0, 0, 0, 0 } end
      local x = nd.array({ { 1, -2, 0.5, 3 }, { 0.5, 1, -1, 2 } }, { dtype = "float64" })
      for s = 1, 3 do
        local loss
        mx.autograd.record(function() loss = (d(x) * d(x)):sum() end)
        loss:backward()
        local gr = d.weight:grad():reshape { 4 }:tolist()
        for i = 1, 4 do gr[i] = gr[i] / 2 end -- Trainer's rescale_grad = 1/batch_size
        tr:step(2)
        rule.step({ learning_rate = 0.05 }, ew, gr, est, s, aux)
        local got = d.weight:data():reshape { 4 }:tolist()
        for i = 1, 4 do
          assert.is_true(math.abs(got[i] - ew[i]) <= 1e-12 * (1 + math.abs(ew[i])),
            name .. " step " .. s .. " element " .. i .. ": " .. got[i] .. " vs " .. ew[i])
        end
      end
    end
  end)
end)

describe("multi_precision", function()
  -- 2000 steps of lr*grad = 1e-4 on w = 1: below half of float16's spacing at 1
  -- (2^-11 = 4.9e-4), so a plain float16 weight never moves
  local function train(name, opts, dtype, steps)
    local o = mx.optimizer.create(name, opts)
    local w = nd.array({ 1, 1, 1, 1 }, { dtype = dtype })
    local g = nd.array({ 1, 0.5, -1, 0.25 }, { dtype = dtype })
    local st = o:create_state_multi_precision(1, w)
    for _ = 1, steps do o:update_multi_precision(1, w, g, st) end
    return w:astype("float64"):tolist(), st
  end
  local CASES = { { "sgd", { learning_rate = 1e-4 } },
    { "sgd", { learning_rate = 1e-4, momentum = 0.5 } },
    { "nag", { learning_rate = 1e-4, momentum = 0.5 } },
    { "adam", { learning_rate = 1e-4 } }, { "rmsprop", { learning_rate = 1e-5 } } }

  it("moves a float16 weight where plain float16 stalls, matching float32", function()
    for _, c in ipairs(CASES) do
      local plain = train(c[1], c[2], "float16", 2000)
      local mp_opts = { multi_precision = true }
      for k, v in pairs(c[2]) do mp_opts[k] = v end
      local mp, st = train(c[1], mp_opts, "float16", 2000)
      local f32 = train(c[1], c[2], "float32", 2000)
      assert.equal("float32", st[#st]:dtype(), c[1])
      local master = st[#st]:tolist()
      for i = 1, 4 do
        assert(math.abs(f32[i] - 1) > 0.01, c[1] .. " float32 moves")
        assert(math.abs(plain[i] - 1) < math.abs(f32[i] - 1) / 4, c[1] .. " plain float16 stalls " .. i)
        assert(math.abs(mp[i] - f32[i]) < 1e-3, c[1] .. " mp " .. mp[i] .. " vs f32 " .. f32[i])
        assert(math.abs(master[i] - f32[i]) < 1e-4 * math.abs(f32[i] - 1) + 1e-6, c[1] .. " master")
      end
    end
  end)

  it("the fused mp ops are MXNet's mp_sgd_update / mp_sgd_mom_update", function()
    local w = nd.array({ 1, 2 }, { dtype = "float16" })
    local g = nd.array({ 0.5, -1 }, { dtype = "float16" })
    local w32, m = nd.array({ 1, 2 }), nd.array({ 0.1, 0 })
    local nw, nm, nw32 = nd.mp_sgd_mom_update(w, g, m, w32, { lr = 0.1, momentum = 0.9, wd = 0.01 })
    local em = { 0.9 * 0.1 - 0.1 * (0.5 + 0.01), -0.1 * (-1 + 0.02) }
    assert.equal("float16", nw:dtype())
    assert.equal("float32", nw32:dtype())
    for i = 1, 2 do
      assert(math.abs(nm:tolist()[i] - em[i]) < 1e-6)
      assert(math.abs(nw32:tolist()[i] - (i + em[i])) < 1e-6)
      assert(math.abs(nw:astype("float64"):tolist()[i] - (i + em[i])) < 2e-3)
    end
    local a = nd.mp_sgd_update(w, g, w32, { lr = 0.1 })
    assert(math.abs(a:astype("float64"):tolist()[1] - 0.95) < 1e-3)
    assert.has_error(function() nd.mp_sgd_update(w, g, w32:astype("float16")) end,
      "mp_sgd_update: weight32 has dtype float16 but must be float32")
    assert.has_error(function() nd.mp_sgd_update(w, g:astype("float32"), w32) end,
      "mp_sgd_update: grad has dtype float32 but must be float16")
  end)

  it("the cpu mp kernels give the reference's bits (float16, bfloat16)", function()
    mx.random.seed(2)
    for _, dt in ipairs { "float16", "bfloat16" } do
      local n = 300001
      local w32 = nd.random_normal({ n })
      local w, g = w32:astype(dt), nd.random_normal({ n }):astype(dt)
      local m = nd.random_normal({ n })
      local o = { lr = 0.01, wd = 0.001, momentum = 0.9, rescale_grad = 0.5, clip_gradient = 0.7 }
      local a = { nd.mp_sgd_mom_update(w, g, m, w32, o) }
      local b = { nd._ref.mp_sgd_mom_update(w, g, m, w32, o) }
      for k = 1, 3 do assert.same(b[k]:astype("float64"):tolist(), a[k]:astype("float64"):tolist(), dt) end
      local o1 = { lr = 0.01, wd = 0.001 }
      local c, d = { nd.mp_sgd_update(w, g, w32, o1) }, { nd._ref.mp_sgd_update(w, g, w32, o1) }
      for k = 1, 2 do assert.same(d[k]:astype("float64"):tolist(), c[k]:astype("float64"):tolist(), dt) end
    end
  end)

  it("float32 weights and multi_precision=false keep the plain state", function()
    local o = mx.optimizer.create("sgd", { momentum = 0.9, multi_precision = true })
    assert.equal(1, #o:create_state_multi_precision(1, nd.zeros({ 2 })))
    local p = mx.optimizer.create("sgd", { momentum = 0.9 })
    assert.equal(1, #p:create_state_multi_precision(1, nd.zeros({ 2 }, { dtype = "float16" })))
  end)

  it("gluon.Trainer passes multi_precision through", function()
    local gluon = mx.gluon
    local function fit(mp, dtype)
      local d = gluon.nn.Dense(1, { in_units = 2, use_bias = false, weight_initializer = mx.init.One() })
      d:initialize()
      d:cast(dtype)
      local tr = gluon.Trainer(d:collect_params(), "sgd", { learning_rate = 1e-4, multi_precision = mp })
      local x = nd.array({ { 1, 1 } }, { dtype = dtype })
      for _ = 1, 500 do
        mx.autograd.record(function() d(x):sum():backward() end)
        tr:step(1)
      end
      return d.weight:data():astype("float64"):tolist()
    end
    local mp, plain, f32 = fit(true, "float16"), fit(false, "float16"), fit(false, "float32")
    assert.same({ 1, 1 }, plain)
    assert(math.abs(mp[1] - f32[1]) < 1e-3 and math.abs(f32[1] - 0.95) < 1e-4)
  end)
end)
