-- spec/probability_spec.lua — mx.gluon.probability: log_prob, cdf, icdf, mean, variance
-- and entropy against scipy.stats (spec/fixtures/probability_scipy.lua, made by
-- tools/fixtures/make_probability_scipy.py); sample moments; gradients of log_prob, cdf and
-- the reparameterised samples in float64 central differences; errors.
local mx = require("mx")
local nd = mx.nd
local P = mx.gluon.probability
local gradcheck = require("helpers.gradcheck")
local FIX = dofile("spec/fixtures/probability_scipy.lua")

local function t64(v) return nd.array(v, { dtype = "float64" }) end
local function near(got, want, tol, what)
  if type(want) == "number" then want = { want } end
  local g = type(got) == "table" and got or got:tolist()
  assert.equal(#want, #g, what .. ": length")
  for i = 1, #want do
    assert.is_true(math.abs(g[i] - want[i]) <= tol * (1 + math.abs(want[i])),
      string.format("%s %d: %.15g vs scipy %.15g", what, i, g[i], want[i]))
  end
end

describe("mx.gluon.probability against scipy.stats", function()
  it("Normal: log_prob, cdf, icdf, mean, variance", function()
    local f = FIX.normal
    local d = P.Normal(t64(f.loc), t64(f.scale))
    near(d:log_prob(t64(f.x)), f.log_prob, 1e-13, "log_prob")
    near(d:cdf(t64(f.x)), f.cdf, 1e-13, "cdf")
    near(d:icdf(t64(f.q)), f.icdf, 1e-12, "icdf")
    near(d:mean(), f.loc, 0, "mean")
    near(d:variance(), { 1, 0.25, 9 }, 1e-15, "variance")
  end)
  it("StudentT: log_prob, cdf, mean, variance, entropy", function()
    local f = FIX.studentt
    local d = P.StudentT(t64(f.df), t64(f.loc), t64(f.scale))
    near(d:log_prob(t64(f.x)), f.log_prob, 1e-12, "log_prob")
    near(d:cdf(t64(f.x)), f.cdf, 1e-11, "cdf")
    near(d:mean(), f.mean, 1e-15, "mean")
    near(d:variance(), f.variance, 1e-13, "variance")
    near(d:entropy(), f.entropy, 1e-12, "entropy")
  end)
  it("Gamma: log_prob, cdf, mean, variance, entropy", function()
    local f = FIX.gamma
    local d = P.Gamma(t64(f.shape), t64(f.scale))
    near(d:log_prob(t64(f.x)), f.log_prob, 1e-13, "log_prob")
    near(d:cdf(t64(f.x)), f.cdf, 1e-12, "cdf")
    near(d:mean(), f.mean, 1e-15, "mean")
    near(d:variance(), f.variance, 1e-15, "variance")
    near(d:entropy(), f.entropy, 1e-12, "entropy")
  end)
  it("Beta: log_prob, cdf, mean, variance, entropy", function()
    local f = FIX.beta
    local d = P.Beta(t64(f.alpha), t64(f.beta))
    near(d:log_prob(t64(f.x)), f.log_prob, 1e-12, "log_prob")
    near(d:cdf(t64(f.x)), f.cdf, 1e-11, "cdf")
    near(d:mean(), f.mean, 1e-15, "mean")
    near(d:variance(), f.variance, 1e-15, "variance")
    near(d:entropy(), f.entropy, 1e-12, "entropy")
  end)
  it("Poisson: log_prob, cdf (also between and below the integers)", function()
    local f = FIX.poisson
    local d = P.Poisson(t64(f.rate))
    near(d:log_prob(t64(f.x)), f.log_prob, 1e-13, "log_prob")
    near(d:cdf(t64(f.x)), f.cdf, 1e-12, "cdf")
    near(d:cdf(t64(f.x) + 0.5), f.cdf, 1e-12, "cdf at k + 0.5")
    near(d:cdf(t64 { -1, -0.5, -3 }), { 0, 0, 0 }, 0, "cdf below 0")
  end)
  it("NegativeBinomial (prob and logit): log_prob, cdf, mean, variance", function()
    local f = FIX.negbin
    local p = t64(f.prob)
    for _, d in ipairs { P.NegativeBinomial(t64(f.n), p),
      P.NegativeBinomial(t64(f.n), nil, nd.log(p) - nd.log1p(-p)) } do
      near(d:log_prob(t64(f.x)), f.log_prob, 1e-12, "log_prob")
      near(d:cdf(t64(f.x)), f.cdf, 1e-11, "cdf")
      near(d:mean(), f.mean, 1e-12, "mean")
      near(d:variance(), f.variance, 1e-12, "variance")
    end
  end)
  it("Categorical: log_prob and cdf of 1-based categories", function()
    local f = FIX.categorical
    local d = P.Categorical(3, { prob = t64(f.prob) })
    assert.same({ 2 }, d.batch_shape)
    near(d:log_prob(t64(f.x)), f.log_prob, 1e-15, "log_prob")
    near(d:cdf(t64(f.x)), f.cdf, 1e-15, "cdf")
    local l = P.Categorical(3, { logit = nd.log(t64(f.prob)) + 2 })
    near(l:log_prob(t64(f.x)), f.log_prob, 1e-14, "log_prob from logit")
  end)
  it("Mixture of a Normal and a StudentT: log_prob, cdf, mean, variance, icdf", function()
    local f = FIX.mixture
    local n = #f.x
    local w = nd.broadcast_to(t64({ f.weights }), { shape = { n, 2 } })
    local function full(v) return nd.full({ n }, v, { dtype = "float64" }) end
    local m = P.Mixture(w, { P.Normal(full(0), full(1)), P.StudentT(full(3), full(2), full(0.5)) })
    near(m:log_prob(t64(f.x)), f.log_prob, 1e-12, "log_prob")
    near(m:cdf(t64(f.x)), f.cdf, 1e-11, "cdf")
    near(m:mean(), { f.mean, f.mean, f.mean, f.mean }, 1e-14, "mean")
    near(m:variance(), { f.variance, f.variance, f.variance, f.variance }, 1e-12, "variance")
    local w3 = nd.broadcast_to(t64({ f.weights }), { shape = { 3, 2 } })
    local function f3(v) return nd.full({ 3 }, v, { dtype = "float64" }) end
    local m3 = P.Mixture(w3, { P.Normal(f3(0), f3(1)), P.StudentT(f3(3), f3(2), f3(0.5)) })
    near(m3:icdf(t64(f.q)), f.icdf, 1e-9, "icdf")
  end)
end)

describe("mx.gluon.probability sampling", function()
  local N = 40000
  local function moments(s)
    local m = s:mean():item()
    local v = ((s - m) * (s - m)):mean():item()
    return m, v
  end
  local function close(got, want, rel, what)
    assert.is_true(math.abs(got - want) <= rel * math.abs(want) + 1e-3,
      string.format("%s: %g vs %g", what, got, want))
  end
  it("draws with the right mean and variance (fixed seed, 40000 draws)", function()
    mx.random.seed(11)
    local cases = {
      { P.Normal(1.5, 2), 1.5, 4 }, { P.StudentT(6, -1, 0.5), -1, 0.25 * 6 / 4 },
      { P.Gamma(2.5, 1.5), 3.75, 2.5 * 2.25 }, { P.Beta(2, 5), 2 / 7, 10 / (49 * 8) },
      { P.Poisson(4.5), 4.5, 4.5 }, { P.NegativeBinomial(3, 0.4), 2, 2 / 0.6 },
    }
    for _, c in ipairs(cases) do
      local s = c[1]:sample { N }
      assert.same({ N }, s:shape())
      local m, v = moments(s)
      close(m, c[2], 0.03, c[1].__name .. " mean")
      close(v, c[3], 0.06, c[1].__name .. " variance")
    end
    local cat = P.Categorical(3, { prob = nd.array { 0.2, 0.5, 0.3 } }):sample { N }
    local c2 = nd.equal_scalar(cat, { scalar = 2 }):mean():item()
    close(c2, 0.5, 0.03, "Categorical P(2)")
  end)
  it("sample() has the batch shape, sample_n(n) prepends n, size must hold the batch", function()
    local d = P.Normal(nd.zeros { 2, 3 }, 1)
    assert.same({ 2, 3 }, d:sample():shape())
    assert.same({ 5, 2, 3 }, d:sample_n(5):shape())
    assert.same({ 4, 2, 3 }, d:sample { 4, 2, 3 }:shape())
    assert.has_error(function() d:sample { 4, 3 } end,
      "Normal:sample: size (4, 3) cannot hold the batch shape (2, 3) (the batch dims are the trailing ones)")
  end)
  it("reparameterises Normal and StudentT: d sample / d loc = 1, d sample / d scale = eps", function()
    for _, mk in ipairs { function(l, s) return P.Normal(l, s) end,
      function(l, s) return P.StudentT(5, l, s) end } do
      local loc, scale = t64 { 0.5, -1 }, t64 { 2, 0.5 }
      loc:attach_grad()
      scale:attach_grad()
      mx.random.seed(3)
      local s = mx.autograd.record(function() return mk(loc, scale):sample() end)
      s:backward()
      local eps = ((s - loc) / scale):tolist()
      assert.same({ 1, 1 }, loc:grad():tolist())
      near(scale:grad(), eps, 1e-14, "d/dscale")
    end
  end)
end)

describe("mx.gluon.probability gradients (float64 central differences)", function()
  local function check(f, inputs)
    local ok, msg = gradcheck.check(f, inputs)
    assert(ok, msg)
  end
  it("log_prob of every distribution in its parameters", function()
    local x = t64 { 0.3, 1.7, 2.5 }
    check(function(l, s) return P.Normal(l, s):log_prob(x) end, { t64 { 0, 1, 2 }, t64 { 1, 0.5, 2 } })
    check(function(df, l, s) return P.StudentT(df, l, s):log_prob(x) end,
      { t64 { 3, 5, 2.5 }, t64 { 0, 1, 2 }, t64 { 1, 0.5, 2 } })
    check(function(k, th) return P.Gamma(k, th):log_prob(x) end, { t64 { 2, 0.7, 4 }, t64 { 1, 2, 0.5 } })
    check(function(a, b) return P.Beta(a, b):log_prob(t64 { 0.3, 0.6, 0.9 }) end,
      { t64 { 2, 0.7, 4 }, t64 { 1, 2, 0.5 } })
    local k = t64 { 0, 3, 7 }
    check(function(r) return P.Poisson(r):log_prob(k) end, { t64 { 0.5, 2, 6 } })
    check(function(n, l) return P.NegativeBinomial(n, nil, l):log_prob(k) end,
      { t64 { 1.5, 3, 8 }, t64 { -1, 0.2, 1 } })
    check(function(l) return P.Categorical(3, { logit = l }):log_prob(t64 { 1, 3 }) end,
      { t64 { { 0.1, -0.3, 0.5 }, { 1, 0, -1 } } })
    check(function(w, m) return P.Mixture(nd.softmax(w, { axis = -1 }),
      { P.Normal(m, 1), P.Normal(m + 2, 0.5) }):log_prob(x) end,
      { t64 { { 0.1, -0.3 }, { 1, 0 }, { 0, 0.5 } }, t64 { 0, 1, 2 } })
  end)
  it("cdf and icdf in the parameters and the value", function()
    check(function(l, s, v) return P.Normal(l, s):cdf(v) end,
      { t64 { 0, 1 }, t64 { 1, 0.5 }, t64 { 0.4, 0.2 } })
    check(function(l, s, q) return P.Normal(l, s):icdf(q) end,
      { t64 { 0, 1 }, t64 { 1, 0.5 }, t64 { 0.3, 0.8 } })
    local df = t64 { 3, 6 }
    check(function(l, s, v) return P.StudentT(df, l, s):cdf(v) end,
      { t64 { 0, 1 }, t64 { 1, 0.5 }, t64 { 0.4, 0.2 } })
    local k = t64 { 2, 0.7 }
    check(function(th, v) return P.Gamma(k, th):cdf(v) end, { t64 { 1, 2 }, t64 { 1.3, 0.6 } })
  end)
end)

describe("mx.gluon.probability errors", function()
  it("names the distribution and the argument", function()
    assert.has_error(function() P.Normal("a", 1) end,
      "Normal: loc must be an NDArray or a number, got string")
    assert.has_error(function() P.Normal(nd.zeros { 2 }, nd.ones { 3 }) end,
      "Normal: scale of shape (3) does not broadcast with the other parameters (shape (2))")
    assert.has_error(function() P.NegativeBinomial(3) end,
      "NegativeBinomial: give exactly one of prob and logit")
    assert.has_error(function() P.Categorical(4, { prob = nd.ones { 2, 3 } }) end,
      "Categorical: prob/logit of shape (2, 3) must have num_events (4) on its last axis")
    assert.has_error(function() P.Categorical(3, { prob = nd.ones { 3 } }):mean() end,
      "Categorical:mean is not defined for this distribution")
  end)
end)
