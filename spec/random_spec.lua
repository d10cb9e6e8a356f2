-- spec/random_spec.lua — random_uniform/normal/randint/bernoulli (+ _like) and
-- mx.random: reproducible under a seed, same values from the cpu and the reference
-- kernels for the same counters, thread-count independent, and plausible moments.
local mx = require("mx")
local H = require("helpers.la")
local nd = mx.nd

local FILE = "random_spec.lua"

local function moments(t)
  local v = t:tolist()
  local s, s2 = 0, 0
  for i = 1, #v do s = s + v[i] s2 = s2 + v[i] * v[i] end
  local m = s / #v
  return m, s2 / #v - m * m, v
end

describe("mx.random", function()
  it("reproduces a stream after seed and differs between seeds", function()
    mx.random.seed(7)
    local a = mx.random.uniform(0, 1, { 50 })
    local b = mx.random.normal(0, 1, { 51 })
    mx.random.seed(7)
    assert.same(a:tolist(), mx.random.uniform(0, 1, { 50 }):tolist())
    assert.same(b:tolist(), mx.random.normal(0, 1, { 51 }):tolist())
    mx.random.seed(8)
    assert.is_true(H.maxdiff(a, mx.random.uniform(0, 1, { 50 })) > 0)
    local c = mx.random.uniform(0, 1, { 50 })
    assert.is_true(H.maxdiff(a, c) > 0) -- the stream moves on
  end)

  it("gives the same values from the cpu and the reference kernels", function()
    for _, f in ipairs { { "random_uniform", { low = -2, high = 3 } },
      { "random_normal", { loc = 1, scale = 2 } }, { "random_randint", { low = -3, high = 9 } },
      { "random_bernoulli", { prob = 0.3 } } } do
      mx.random.seed(99)
      local a = nd[f[1]]({ 4097 }, f[2])
      mx.random.seed(99)
      local b = nd._ref[f[1]]({ 4097 }, f[2])
      assert.equal(0, H.maxdiff(a, b), f[1])
    end
  end)

  it("does not depend on the thread count", function()
    local C = require("mx.core.lib").C
    local nt = C.mx_get_num_threads()
    mx.random.seed(3)
    C.mx_set_num_threads(1)
    local a = nd.random_normal({ 100001 })
    mx.random.seed(3)
    C.mx_set_num_threads(2)
    local b = nd.random_normal({ 100001 })
    C.mx_set_num_threads(nt)
    assert.equal(0, H.maxdiff(a, b))
  end)

  it("follows program order when the engine queues the draws", function()
    local engine = mx.engine
    local mode, inline = engine.get(), engine.get_inline_max()
    engine.set("threaded")
    engine.set_inline_max(0) -- queue every op: the kernels run later, on workers
    local function draws()
      mx.random.seed(21)
      local a = nd.random_normal({ 30001 })
      local b = nd.random_uniform({ 30001 })
      local c = mx.random.randint(0, 100, { 777 })
      return a:tolist(), b:tolist(), c:tolist()
    end
    local a1, b1, c1 = draws()
    local a2, b2, c2 = draws()
    engine.set_inline_max(inline)
    engine.set(mode)
    assert.same(a1, a2)
    assert.same(b1, b2)
    assert.same(c1, c2)
    mx.random.seed(21) -- and the same values as when run at once, one after another
    assert.same(a1, nd._ref.random_normal({ 30001 }):tolist())
  end)

  it("has plausible moments and ranges", function()
    mx.random.seed(11)
    local m, v, u = moments(mx.random.uniform(-1, 3, { 20000 }, { dtype = "float64" }))
    assert.is_true(math.abs(m - 1) < 0.05 and math.abs(v - 16 / 12) < 0.05)
    for i = 1, #u do assert(u[i] >= -1 and u[i] < 3) end
    m, v = moments(mx.random.normal { loc = 2, scale = 0.5, shape = { 20000 } })
    assert.is_true(math.abs(m - 2) < 0.02 and math.abs(v - 0.25) < 0.02)
    local r = mx.random.randint(-2, 3, { 5000 })
    assert.equal("int32", r:dtype())
    local seen = {}
    for _, x in ipairs(r:tolist()) do
      assert(x >= -2 and x <= 2 and x % 1 == 0)
      seen[x] = true
    end
    for x = -2, 2 do assert.is_true(seen[x]) end
    m = moments(mx.random.bernoulli(0.25, 20000))
    assert.is_true(math.abs(m - 0.25) < 0.02)
  end)

  it("draws x-shaped tensors with *_like", function()
    local x = nd.zeros({ 3, 4 }, { dtype = "float64" })
    local u = mx.random.uniform_like(x, { low = 5, high = 6 })
    assert.same({ 3, 4 }, u:shape())
    assert.equal("float64", u:dtype())
    for _, v in ipairs(u:tolist()) do assert(v >= 5 and v < 6) end
    assert.same({ 3, 4 }, x:random_normal_like():shape())
    mx.random.seed(5)
    local a = x:random_uniform_like()
    mx.random.seed(5)
    assert.equal(0, H.maxdiff(a, nd._ref.random_uniform_like(x)))
    mx.random.seed(5)
    local b = nd.random_normal_like(x, { loc = 1 })
    mx.random.seed(5)
    assert.equal(0, H.maxdiff(b, nd._ref.random_normal_like(x, { loc = 1 })))
  end)

  it("reports bad parameters at the caller's line", function()
    H.assert_error(function(mark) mark() mx.random.uniform(1, 0, { 2 }) end, FILE, "high", "low")
    H.assert_error(function(mark) mark() mx.random.normal(0, -1, 3) end, FILE, "scale")
    H.assert_error(function(mark) mark() mx.random.bernoulli(2, 3) end, FILE, "prob")
    H.assert_error(function(mark) mark() mx.random.uniform(0, 1, "x") end, FILE, "shape")
    H.assert_error(function(mark) mark() mx.random.uniform(0, 1, { 2 }, { dtyp = "x" }) end, FILE,
      "unknown option 'dtyp'")
    H.assert_error(function(mark) mark() mx.random.seed(1.5) end, FILE, "seed")
  end)

  -- exponential, gamma, poisson, negative binomial, shuffle, randn
  local C = require("mx.core.lib").C
  -- {op, params, mean, variance, 4th central moment}, from the distribution
  local function nb_case(k, p)
    local var = k * (1 - p) / p ^ 2
    return { "random_negative_binomial", { k = k, p = p }, k * (1 - p) / p, var,
      (3 + 6 / k + p * p / (k * (1 - p))) * var * var }
  end
  local DISTS = {
    { "random_exponential", { lam = 2.5 }, 1 / 2.5, 1 / 2.5 ^ 2, 9 / 2.5 ^ 4 },
    { "random_gamma", { alpha = 0.3, beta = 2 }, 0.6, 1.2, (3 + 6 / 0.3) * 1.2 ^ 2 },
    { "random_gamma", { alpha = 1 }, 1, 1, 9 },
    { "random_gamma", { alpha = 7.5, beta = 0.5 }, 3.75, 1.875, (3 + 6 / 7.5) * 1.875 ^ 2 },
    { "random_poisson", { lam = 0.7 }, 0.7, 0.7, 0.7 * (1 + 3 * 0.7) },
    { "random_poisson", { lam = 4 }, 4, 4, 4 * 13 },
    { "random_poisson", { lam = 37 }, 37, 37, 37 * 112 },
    { "random_poisson", { lam = 2e4 }, 2e4, 2e4, 2e4 * (1 + 6e4) },
    nb_case(1, 0.5), nb_case(4, 0.3), nb_case(20, 0.9),
  }

  it("the distributions' draws have their mean and variance (within 5 standard errors)",
    function()
    mx.random.seed(1234)
    local n = 100000
    for _, d in ipairs(DISTS) do
      local opts, name = { dtype = "float64" }, d[1]
      for k, x in pairs(d[2]) do opts[k] = x name = name .. " " .. k .. "=" .. x end
      local m, v = moments(nd[d[1]]({ n }, opts))
      local se_m, se_v = math.sqrt(d[4] / n), math.sqrt((d[5] - d[4] ^ 2) / n)
      assert(math.abs(m - d[3]) < 5 * se_m, name .. ": mean " .. m .. " vs " .. d[3])
      assert(math.abs(v - d[4]) < 5 * se_v, name .. ": variance " .. v .. " vs " .. d[4])
    end
  end)

  it("the distributions' draws give values in their support; poisson(0) is 0", function()
    mx.random.seed(5)
    for _, x in ipairs(mx.random.poisson(25, { 3000 }):tolist()) do assert(x >= 0 and x % 1 == 0) end
    for _, x in ipairs(mx.random.negative_binomial(2, 0.2, 3000):tolist()) do
      assert(x >= 0 and x % 1 == 0)
    end
    for _, x in ipairs(mx.random.gamma(0.05, 1, 3000):tolist()) do assert(x >= 0) end
    for _, x in ipairs(mx.random.exponential(1, 3000):tolist()) do assert(x >= 0 and x < math.huge) end
    assert.same({ 0, 0, 0 }, mx.random.poisson(0, 3):tolist())
    assert.same({ 0, 0 }, mx.random.negative_binomial(3, 1, 2):tolist())
    local p = mx.random.poisson(3, { 4 }, { dtype = "int32" })
    assert.equal("int32", p:dtype())
  end)

  it("the distributions' draws give the cpu kernel's values from the reference kernels", function()
    for _, d in ipairs(DISTS) do
      for _, dt in ipairs { "float32", "float64" } do
        local opts = { dtype = dt }
        for k, x in pairs(d[2]) do opts[k] = x end
        mx.random.seed(77)
        local a = nd[d[1]]({ 5003 }, opts)
        mx.random.seed(77)
        local b = nd._ref[d[1]]({ 5003 }, opts)
        assert.equal(0, H.maxdiff(a, b), d[1] .. " " .. dt)
      end
    end
    mx.random.seed(77)
    local x = nd.arange(0, 3000):reshape({ 1000, 3 })
    local a = nd.shuffle(x)
    mx.random.seed(77)
    assert.equal(0, H.maxdiff(a, nd._ref.shuffle(x)))
  end)

  it("the distributions' draws reserve elements x counters-per-element from the stream", function()
    -- the next draw starts after the block of counters each element owns (dispatch
    -- rounds a reservation up to even: 12 elements keep it exact)
    for _, c in ipairs { { "random_exponential", 1 }, { "random_gamma", 32 },
      { "random_poisson", 16 }, { "random_negative_binomial", 48 } } do
      mx.random.seed(9)
      nd[c[1]]({ 3, 4 })
      local after = nd.random_uniform({ 7 })
      mx.random.seed(9)
      local all = nd.random_uniform({ 12 * c[2] + 7 }):tolist()
      assert.same({ unpack(all, 12 * c[2] + 1) }, after:tolist(), c[1])
    end
    mx.random.seed(9)
    nd.shuffle(nd.zeros({ 6, 2 })) -- one counter per row
    local after = nd.random_uniform({ 3 })
    mx.random.seed(9)
    assert.same({ unpack(nd.random_uniform({ 9 }):tolist(), 7) }, after:tolist())
  end)

  it("the distributions' draws do not depend on the thread count or the engine mode", function()
    local nt = C.mx_get_num_threads()
    local engine = mx.engine
    local mode, inline = engine.get(), engine.get_inline_max()
    local x = nd.arange(0, 40000):reshape({ 20000, 2 })
    local function draws()
      mx.random.seed(31)
      local r = { nd.random_exponential({ 50001 }, { lam = 3 }), mx.random.gamma(0.5, 1, { 40001 }),
        mx.random.gamma(3, 1, { 40001 }), mx.random.poisson(60, { 40001 }),
        mx.random.negative_binomial(2, 0.3, { 30001 }), mx.random.shuffle(x) }
      for i = 1, #r do r[i] = r[i]:tolist() end
      return r
    end
    C.mx_set_num_threads(1)
    local base = draws()
    C.mx_set_num_threads(math.max(nt, 2))
    local multi = draws()
    engine.set("threaded")
    engine.set_inline_max(0) -- queued: the kernels run later, on workers
    local queued = draws()
    engine.set("naive")
    local naive = draws()
    engine.set_inline_max(inline)
    engine.set(mode)
    C.mx_set_num_threads(nt)
    for i = 1, #base do
      assert.same(base[i], multi[i], "threads " .. i)
      assert.same(base[i], queued[i], "threaded engine " .. i)
      assert.same(base[i], naive[i], "naive engine " .. i)
    end
    mx.random.seed(32)
    assert.is_true(H.maxdiff(nd.array(base[2]), mx.random.gamma(0.5, 1, { 40001 })) > 0)
  end)

  it("shuffle permutes the rows, keeps each row whole and works in place", function()
    mx.random.seed(4)
    local n = 2000
    local x = nd.arange(0, 3 * n, { dtype = "float64" }):reshape({ n, 3 })
    local y = mx.random.shuffle(x)
    assert.same({ n, 3 }, y:shape())
    local v, seen, moved = y:tolist(), {}, 0
    for i = 0, n - 1 do
      local r = v[3 * i + 1] / 3
      assert(r % 1 == 0 and not seen[r], "row " .. i)
      seen[r] = true
      assert(v[3 * i + 2] == 3 * r + 1 and v[3 * i + 3] == 3 * r + 2, "row " .. i .. " whole")
      if r ~= i then moved = moved + 1 end
    end
    assert.is_true(moved > n / 2)
    mx.random.seed(4)
    local z = x:copy()
    mx.random.shuffle(z, { out = z })
    assert.same(v, z:tolist())
    local one = nd.array({ 5, 6, 7 }, { dtype = "int32" })
    local s = mx.random.shuffle(one):tolist()
    table.sort(s)
    assert.same({ 5, 6, 7 }, s)
    assert.equal(7, mx.random.shuffle(nd.array(7)):item())
    assert.same({ 0, 4 }, mx.random.shuffle(nd.zeros({ 0, 4 })):shape())
  end)

  it("randn draws standard normals of the given dims", function()
    mx.random.seed(12)
    local a = mx.random.randn(200, 300)
    assert.same({ 200, 300 }, a:shape())
    local m, v = moments(a)
    assert.is_true(math.abs(m) < 5 * math.sqrt(1 / 60000) and math.abs(v - 1) < 5 * math.sqrt(2 / 60000))
    mx.random.seed(12)
    assert.equal(0, H.maxdiff(a, nd.random_normal({ 200, 300 })))
    local b = mx.random.randn(4, { loc = 10, scale = 0, dtype = "float64" })
    assert.same({ 10, 10, 10, 10 }, b:tolist())
    assert.same({}, mx.random.randn():shape())
  end)

  it("reports bad distribution parameters at the caller's line", function()
    H.assert_error(function(mark) mark() mx.random.exponential(0, 3) end, FILE, "scale")
    H.assert_error(function(mark) mark() nd.random_exponential({ 2 }, { lam = -1 }) end, FILE, "lam")
    H.assert_error(function(mark) mark() mx.random.gamma(0, 1, 3) end, FILE, "alpha")
    H.assert_error(function(mark) mark() mx.random.gamma(1, -2, 3) end, FILE, "beta")
    H.assert_error(function(mark) mark() mx.random.poisson(-1, 3) end, FILE, "lam")
    H.assert_error(function(mark) mark() mx.random.negative_binomial(0, 0.5, 3) end, FILE, "k")
    H.assert_error(function(mark) mark() mx.random.negative_binomial(1, 0, 3) end, FILE, "p")
    H.assert_error(function(mark) mark() mx.random.randn(2, -1) end, FILE, "dimension 2")
    H.assert_error(function(mark) mark() mx.random.randn(2, { dtype = "bogus" }) end, FILE,
      "random.randn", "dtype")
    H.assert_error(function(mark) mark() mx.random.randn(2, { shape = { 3 } }) end, FILE,
      "random.randn", "dims as arguments")
    H.assert_error(function(mark) mark() mx.random.shuffle({ 1, 2 }) end, FILE, "tensor")
  end)
end)

describe("random: generalized negative binomial, sample_*, _like, multinomial", function()
  local C = require("mx.core.lib").C
  local function near_moments(t, mean, var, what, from, to)
    local v0 = type(t) == "table" and t or t:tolist()
    from, to = from or 1, to or #v0
    local n, s, s2 = to - from + 1, 0, 0
    for i = from, to do s = s + v0[i] s2 = s2 + v0[i] * v0[i] end
    local m = s / n
    local v = s2 / n - m * m
    -- 6 sigma bounds for the mean; the variance's spread taken as var*sqrt(8/n) (heavy tails)
    assert(math.abs(m - mean) < 6 * math.sqrt(var / n), what .. " mean " .. m .. " vs " .. mean)
    assert(math.abs(v - var) < 6 * var * math.sqrt(8 / n), what .. " var " .. v .. " vs " .. var)
  end

  it("generalized_negative_binomial and the _like forms have the right moments", function()
    mx.random.seed(5)
    near_moments(mx.random.generalized_negative_binomial(4, 0.5, { 100000 }), 4, 4 + 0.5 * 16, "gnb")
    near_moments(mx.random.generalized_negative_binomial(3, 0, { 100000 }), 3, 3, "gnb alpha=0")
    local x = nd.zeros({ 100000 }, { dtype = "float64" })
    near_moments(mx.random.gamma_like(x, { alpha = 2, beta = 3 }), 6, 18, "gamma_like")
    near_moments(mx.random.exponential_like(x, { lam = 4 }), 0.25, 1 / 16, "exponential_like")
    near_moments(mx.random.poisson_like(x, { lam = 7 }), 7, 7, "poisson_like")
    near_moments(mx.random.negative_binomial_like(x, { k = 3, p = 0.4 }), 4.5, 4.5 / 0.4, "negbin_like")
    near_moments(mx.random.generalized_negative_binomial_like(x, { mu = 2, alpha = 1 }), 2, 6, "gnb_like")
    assert.equal("float64", mx.random.poisson_like(x, { lam = 1 }):dtype())
    assert.equal(0, mx.random.generalized_negative_binomial(0, 2, { 50 }):max():item())
  end)

  it("sample_* draw param shape + shape, each row from its own parameters", function()
    mx.random.seed(6)
    local n = 100000
    local cases = {
      { "uniform", { { -1, 10 }, { 1, 14 } }, function(a, b) return (a + b) / 2, (b - a) ^ 2 / 12 end },
      { "normal", { { 0, 5 }, { 1, 0.5 } }, function(a, b) return a, b * b end },
      { "gamma", { { 0.5, 4 }, { 2, 1 } }, function(a, b) return a * b, a * b * b end },
      { "poisson", { { 0.5, 40 } }, function(a) return a, a end },
      { "negative_binomial", { { 2, 5 }, { 0.5, 0.8 } },
        function(k, p) return k * (1 - p) / p, k * (1 - p) / p / p end },
      { "generalized_negative_binomial", { { 1, 6 }, { 0.25, 2 } },
        function(m, a) return m, m + a * m * m end },
    }
    for _, c in ipairs(cases) do
      local ins = {}
      for i, v in ipairs(c[2]) do ins[i] = nd.array(v) end
      ins[#ins + 1] = { n }
      local y = mx.random[c[1]](unpack(ins))
      assert.same({ 2, n }, y:shape(), c[1])
      local all = y:tolist()
      for r = 1, 2 do
        local mean, var = c[3](c[2][1][r], c[2][2] and c[2][2][r])
        near_moments(all, mean, var, c[1] .. " row " .. r, (r - 1) * n + 1, r * n)
      end
    end
    -- exponential takes scale like the number form: rates 1 and 1/10
    local e = mx.random.exponential(nd.array({ 1, 10 }), { n })
    near_moments(e:tolist(), 10, 100, "sample_exponential scale", n + 1, 2 * n)
    -- a (2, 2) parameter and a 2-d shape give (2, 2, 3, 4); dtype from the parameters
    local lam = nd.array({ { 1, 2 }, { 3, 4 } }, { dtype = "float64" })
    local p = nd.sample_poisson(lam, { shape = { 3, 4 } })
    assert.same({ 2, 2, 3, 4 }, p:shape())
    assert.equal("float64", p:dtype())
    assert.equal("float16", nd.sample_poisson(lam, { shape = { 2 }, dtype = "float16" }):dtype())
    assert.same({ 2, 2 }, nd.sample_poisson(lam):shape())
  end)

  it("multinomial draws categories with the given frequencies and their log-probabilities", function()
    mx.random.seed(8)
    local probs = { { 0.2, 0.5, 0.3 }, { 0, 0, 1 } }
    local n = 100000
    local s, lp = mx.random.multinomial(nd.array(probs), { n }, { get_prob = true })
    assert.same({ 2, n }, s:shape())
    assert.equal("int32", s:dtype())
    local v, l = s:tolist(), lp:tolist()
    local cnt = { 0, 0, 0 }
    for i = 1, n do
      cnt[v[i]] = cnt[v[i]] + 1 -- 1-based categories
      assert(math.abs(l[i] - math.log(probs[1][v[i]])) < 1e-6)
    end
    for k = 1, 3 do
      local q = probs[1][k]
      assert(math.abs(cnt[k] / n - q) < 6 * math.sqrt(q * (1 - q) / n), "category " .. k)
    end
    for i = n + 1, 2 * n do assert.equal(3, v[i]) end
    local one = mx.random.multinomial(nd.array({ 0.5, 0.5 }))
    assert.same({}, one:shape())
    assert.is_nil(select(2, mx.random.multinomial(nd.array({ 1 }), 3)))
    assert.equal("int64", mx.random.multinomial(nd.array({ 1 }), 3, { dtype = "int64" }):dtype())
  end)

  it("multinomial's log-probabilities carry 1/p back to the drawn categories", function()
    mx.random.seed(13)
    local p = nd.array({ { 0.2, 0.5, 0.3 }, { 0.6, 0.1, 0.3 } }, { dtype = "float64" })
    p:attach_grad()
    local s
    mx.autograd.record(function()
      local lp
      s, lp = mx.random.multinomial(p, { 50 }, { get_prob = true })
      local loss = (lp * 2):sum()
      loss:backward()
    end)
    local pv, sv, want = p:totable(), s:tolist(), { { 0, 0, 0 }, { 0, 0, 0 } }
    for i = 1, #sv do
      local r = i <= 50 and 1 or 2
      want[r][sv[i]] = want[r][sv[i]] + 2 / pv[r][sv[i]]
    end
    local got = p:grad():totable()
    for r = 1, 2 do
      for k = 1, 3 do assert(math.abs(got[r][k] - want[r][k]) < 1e-9, r .. "," .. k) end
    end
    -- the backward op alone; a category outside [1, K] is an error
    local d = nd.sample_multinomial_backward(nd.array({ 0.5, 0.25 }), nd.array({ 2, 2, 1 },
      { dtype = "int32" }), nd.array({ 1, 1, 1 }))
    assert.same({ 2, 8 }, d:tolist())
    H.assert_error(function(mark)
      mark() nd.sample_multinomial_backward(nd.array({ 0.5, 0.5 }), nd.array({ 3 }),
        nd.array({ 1 })):tolist()
    end, FILE, "category 3")
  end)

  it("new draws match the reference kernels and do not depend on the thread count", function()
    local nt = C.mx_get_num_threads()
    local function draws(ns)
      mx.random.seed(41)
      local x = nd.zeros({ 30001 })
      local r = { ns.random_generalized_negative_binomial({ 30001 }, { mu = 3, alpha = 0.7 }),
        ns.random_gamma_like(x, { alpha = 0.7 }), ns.random_poisson_like(x, { lam = 30 }),
        ns.random_negative_binomial_like(x, { k = 2, p = 0.3 }),
        ns.random_generalized_negative_binomial_like(x, { mu = 5, alpha = 0.1 }),
        ns.random_exponential_like(x, { lam = 2 }),
        ns.sample_normal(nd.array({ 0, 3 }), nd.array({ 1, 2 }), { shape = { 10001 } }),
        ns.sample_uniform(nd.array({ 0, 3 }), nd.array({ 1, 4 }), { shape = { 10001 } }),
        ns.sample_gamma(nd.array({ 0.3, 3 }), nd.array({ 1, 2 }), { shape = { 10001 } }),
        ns.sample_generalized_negative_binomial(nd.array({ 0.3, 3 }), nd.array({ 1, 0 }),
          { shape = { 10001 } }),
        ns.sample_multinomial(nd.array({ { 0.1, 0.9 }, { 0.6, 0.4 } }), { shape = { 10001 } }),
        ns.sample_exponential(nd.array({ 0.5, 4 }), { shape = { 10001 } }),
        ns.sample_negative_binomial(nd.array({ 1, 4 }), nd.array({ 0.2, 0.9 }), { shape = { 10001 } }),
        ns.sample_poisson(nd.array({ 3, 40 }), { shape = { 10001 } }) }
      for i = 1, #r do r[i] = r[i]:tolist() end
      return r
    end
    C.mx_set_num_threads(1)
    local one = draws(nd)
    C.mx_set_num_threads(2)
    local two = draws(nd)
    C.mx_set_num_threads(nt)
    local ref = draws(nd._ref)
    for i = 1, #one do
      assert.same(one[i], two[i], "threads " .. i)
      assert.same(one[i], ref[i], "ref " .. i)
    end
  end)

  it("reserve their counters: the next draw starts after the block", function()
    for _, c in ipairs { { function() nd.random_generalized_negative_binomial({ 12 }) end, 12 * 48 },
      { function() nd.random_gamma_like(nd.zeros({ 12 })) end, 12 * 32 },
      { function() nd.sample_poisson(nd.ones({ 3 }), { shape = { 4 } }) end, 12 * 16 },
      { function() nd.sample_multinomial(nd.ones({ 3, 1 }), { shape = { 4 } }) end, 12 } } do
      mx.random.seed(9)
      c[1]()
      local after = nd.random_uniform({ 7 })
      mx.random.seed(9)
      assert.same({ unpack(nd.random_uniform({ c[2] + 7 }):tolist(), c[2] + 1) }, after:tolist())
    end
  end)

  it("reports bad parameters at the caller's line", function()
    H.assert_error(function(mark) mark() mx.random.generalized_negative_binomial(-1, 1, 3) end,
      FILE, "mu")
    H.assert_error(function(mark) mark() mx.random.gamma_like(nd.zeros({ 2 }), { alpha = 0 }) end,
      FILE, "alpha")
    H.assert_error(function(mark) mark() mx.random.normal(nd.array({ 0, 1 }), nd.array({ 1, -1 }), 2) end,
      FILE, "sample_normal", "element 1")
    H.assert_error(function(mark) mark() mx.random.gamma(nd.ones({ 2 }), nd.ones({ 3 }), 2) end,
      FILE, "one shape")
    H.assert_error(function(mark) mark() mx.random.uniform(nd.ones({ 2 }), 3, 2) end,
      FILE, "all tensors or all numbers")
    H.assert_error(function(mark)
      mark() mx.random.negative_binomial(nd.array({ 1.5 }), nd.array({ 0.5 }))
    end,
      FILE, "integer k")
    H.assert_error(function(mark) mark() mx.random.multinomial(nd.array({ 0.5, -0.5 })) end,
      FILE, "probabilities", ">= 0")
    H.assert_error(function(mark) mark() mx.random.multinomial(nd.zeros({ 2, 0 })) end,
      FILE, "last axis")
    H.assert_error(function(mark) mark() mx.random.multinomial({ 0.5 }) end, FILE, "tensor")
    H.assert_error(function(mark) mark() mx.random.multinomial(nd.array({ 1 }), 2, { dtype = "float16" }) end,
      FILE, "dtype")
  end)
end)
