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
    local C = require("mx._lib").C
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
end)
