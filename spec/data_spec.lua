-- mx.gluon.data: datasets, samplers, batchify, DataLoader.
local mx = require("mx")
local data = require("mx.gluon.data")
local nd = mx.nd

local function seq_tensor(shape, dtype)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local vals = {}
  for i = 1, n do vals[i] = i - 1 end
  return nd.array(vals, { dtype = dtype or "float32" }):reshape(shape)
end

local function collect(it)
  local out = {}
  for v in it do out[#out + 1] = v end
  return out
end

local function is_perm(list, n)
  if #list ~= n then return false end
  local seen = {}
  for _, v in ipairs(list) do
    if seen[v] or v < 1 or v > n or v % 1 ~= 0 then return false end
    seen[v] = true
  end
  return true
end

describe("gluon.data datasets", function()
  it("SimpleDataset indexes a Lua list from 1, negatives from the end", function()
    local ds = data.SimpleDataset { "a", "b", "c" }
    assert.equal(3, ds:len())
    assert.equal("a", ds:get(1))
    assert.equal("c", ds:get(-1))
    assert.has_error(function() ds:get(4) end,
      "SimpleDataset:get: index 4 out of range for a dataset of 3 samples")
    assert.has_error(function() ds:get(0) end)
  end)

  it("errors blame the caller's line", function()
    local ds = data.SimpleDataset { 1 }
    local ok, err = pcall(function() ds:get(9) end)
    assert.is_false(ok)
    assert.truthy(err:find("data_spec.lua:%d+:"), err)
  end)

  it("ArrayDataset returns one value per field: tensor rows and numbers", function()
    local x = seq_tensor { 5, 2, 3 }
    local y = nd.array({ 10, 11, 12, 13, 14 }, { dtype = "int32" })
    local names = { "a", "b", "c", "d", "e" }
    local ds = data.ArrayDataset(x, y, names)
    assert.equal(5, ds:len())
    local xi, yi, ni = ds:get(2)
    assert.same({ 2, 3 }, xi:shape())
    assert.same({ 6, 7, 8, 9, 10, 11 }, xi:tolist())
    assert.equal(11, yi)
    assert.equal("number", type(yi))
    assert.equal("b", ni)
    local _, ylast = ds:get(-1)
    assert.equal(14, ylast)
    -- 1-d fields of any dtype give numbers
    local h = data.ArrayDataset(nd.array({ 1.5, -2 }, { dtype = "float16" }),
      nd.array({ 7, 8 }, { dtype = "int64" }))
    local a, b = h:get(2)
    assert.same({ -2, 8 }, { a, b })
    assert.equal("number", type(b))
  end)

  it("ArrayDataset rejects fields of different lengths", function()
    assert.has_error(function() data.ArrayDataset(seq_tensor { 3, 2 }, { 1, 2 }) end,
      "ArrayDataset: all arguments must have the same length; argument 1 has 3, argument 2 has 2")
  end)

  it("transform (lazy and eager) and transform_first", function()
    local ds = data.ArrayDataset({ 1, 2, 3 }, { 10, 20, 30 })
    local t = ds:transform(function(a, b) return a + b, a * b end)
    local s, p = t:get(3)
    assert.equal(33, s)
    assert.equal(90, p)
    local f = ds:transform_first(function(a) return -a end)
    local a, b = f:get(2)
    assert.equal(-2, a)
    assert.equal(20, b)
    -- eager: the function runs once per sample, now
    local calls = 0
    local e = ds:transform_first(function(v) calls = calls + 1 return v * 2 end, false)
    assert.equal(3, calls)
    local v1, v2 = e:get(1)
    assert.equal(2, v1)
    assert.equal(10, v2)
    e:get(1)
    assert.equal(3, calls)
    -- eager results that cannot be stacked are kept as they are
    local names = ds:transform(function(u, v) return "s" .. u, { v } end, false)
    local n1, t1 = names:get(2)
    assert.equal("s2", n1)
    assert.same({ 20 }, t1)
  end)

  it("Dataset:extend makes your own dataset, usable everywhere", function()
    local Squares = data.Dataset:extend("Squares")
    function Squares:__init(n) self.n = n end
    function Squares:len() return self.n end
    function Squares.get(_, i) return i * i, i end
    local ds = Squares(5)
    assert.equal("<Squares: 5 samples>", tostring(ds))
    assert.same({ 16, 4 }, { ds:get(4) })
    local doubled = ds:transform_first(function(v) return 2 * v end)
    assert.equal(50, (doubled:get(5)))
    local x, i = data.DataLoader(ds, { batch_size = 5 }):iter()()
    assert.same({ 1, 4, 9, 16, 25 }, x:tolist())
    assert.same({ 1, 2, 3, 4, 5 }, i:tolist())
    assert.equal("<ArrayDataset: 3 samples>", tostring(data.ArrayDataset({ 1, 2, 3 })))
    local Empty = data.Dataset:extend("Empty")
    assert.has_error(function() Empty():len() end, "Empty: len() not implemented")
  end)

  it("filter, shard and take", function()
    local ds = data.SimpleDataset { 1, 2, 3, 4, 5, 6, 7 }
    local ev = ds:filter(function(v) return v % 2 == 0 end)
    assert.equal(3, ev:len())
    assert.equal(6, ev:get(3))
    -- 7 into 3 shards: 3, 2, 2 (the first len % n shards get one more)
    local s1, s2, s3 = ds:shard(3, 1), ds:shard(3, 2), ds:shard(3, 3)
    assert.same({ 3, 2, 2 }, { s1:len(), s2:len(), s3:len() })
    assert.same({ 1, 4, 6 }, { s1:get(1), s2:get(1), s3:get(1) })
    assert.equal(7, s3:get(-1))
    assert.equal(2, ds:take(2):len())
    assert.equal(7, ds:take(100):len())
    assert.has_error(function() ds:shard(3, 0) end)
  end)
end)

describe("gluon.data samplers", function()
  it("SequentialSampler counts from 1 (or start)", function()
    local s = data.SequentialSampler(4)
    assert.equal(4, s:len())
    assert.same({ 1, 2, 3, 4 }, collect(s:iter()))
    assert.same({ 3, 4 }, collect(data.SequentialSampler(2, 3):iter()))
  end)

  it("RandomSampler gives a permutation per pass; a seed fixes the order", function()
    local a = data.RandomSampler(100, { seed = 7 })
    local p1, p2 = collect(a:iter()), collect(a:iter())
    assert.is_true(is_perm(p1, 100))
    assert.is_true(is_perm(p2, 100))
    assert.are_not.same(p1, p2) -- a new order each pass
    local b = data.RandomSampler(100, { seed = 7 })
    assert.same(p1, collect(b:iter()))
    local c = data.RandomSampler(100, { seed = 8 })
    assert.are_not.same(p1, collect(c:iter()))
    -- unseeded samplers still shuffle (not the identity)
    local u = collect(data.RandomSampler(100):iter())
    assert.is_true(is_perm(u, 100))
    local ident = true
    for i = 1, 100 do if u[i] ~= i then ident = false end end
    assert.is_false(ident)
  end)

  it("an unseeded RandomSampler follows mx.random.seed", function()
    mx.random.seed(11)
    local a = collect(data.RandomSampler(50):iter())
    mx.random.seed(11)
    local b = collect(data.RandomSampler(50):iter())
    mx.random.seed(12)
    local c = collect(data.RandomSampler(50):iter())
    assert.same(a, b)
    assert.are_not.same(a, c)
  end)

  it("RandomSampler is roughly uniform", function()
    -- position of element 1 after shuffling 4 items, over many passes
    local s = data.RandomSampler(4, { seed = 1 })
    local counts = { 0, 0, 0, 0 }
    for _ = 1, 4000 do
      local p = collect(s:iter())
      for i = 1, 4 do if p[i] == 1 then counts[i] = counts[i] + 1 end end
    end
    for i = 1, 4 do assert.is_true(counts[i] > 850 and counts[i] < 1150, tostring(counts[i])) end
  end)

  it("BatchSampler keep / discard / rollover", function()
    local keep = data.BatchSampler(data.SequentialSampler(10), 4, "keep")
    assert.equal(3, keep:len())
    assert.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10 } }, collect(keep:iter()))
    local disc = data.BatchSampler(data.SequentialSampler(10), 4, "discard")
    assert.equal(2, disc:len())
    assert.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }, collect(disc:iter()))
    local roll = data.BatchSampler(data.SequentialSampler(10), 4, "rollover")
    assert.equal(2, roll:len())
    assert.same({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 } }, collect(roll:iter()))
    -- the 2 left over start the next pass
    assert.equal(3, roll:len())
    assert.same({ { 9, 10, 1, 2 }, { 3, 4, 5, 6 }, { 7, 8, 9, 10 } }, collect(roll:iter()))
    assert.has_error(function() data.BatchSampler(data.SequentialSampler(3), 2, "drop") end,
      'BatchSampler: last_batch must be "keep", "discard" or "rollover", got drop')
  end)

  it("FilterSampler keeps the matching indices", function()
    local ds = data.SimpleDataset { 5, 6, 7, 8 }
    local s = data.FilterSampler(function(v) return v > 6 end, ds)
    assert.equal(2, s:len())
    assert.same({ 3, 4 }, collect(s:iter()))
  end)
end)

describe("gluon.data.DataLoader", function()
  local X = seq_tensor({ 10, 3 }, "float32")
  local Y = nd.array({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, { dtype = "int32" })

  it("batches tensor fields in order with len() batches", function()
    local loader = data.DataLoader(data.ArrayDataset(X, Y), { batch_size = 4 })
    assert.equal(3, loader:len())
    local shapes, labels = {}, {}
    for x, y in loader:iter() do
      shapes[#shapes + 1] = table.concat(x:shape(), "x")
      assert.equal("float32", x:dtype())
      assert.equal("int32", y:dtype())
      for _, v in ipairs(y:tolist()) do labels[#labels + 1] = v end
    end
    assert.same({ "4x3", "4x3", "2x3" }, shapes)
    assert.same({ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, labels)
  end)

  it("batch values equal the dataset's rows", function()
    local loader = data.DataLoader(data.ArrayDataset(X, Y), { batch_size = 4, last_batch = "discard" })
    local b = 0
    for x, y in loader:iter() do
      b = b + 1
      for r = 1, 4 do
        local i = (b - 1) * 4 + r
        assert.same(X[i]:tolist(), x[r]:tolist())
        assert.equal(i - 1, y[r]:item())
      end
    end
    assert.equal(2, b)
  end)

  it("shuffle visits every sample once per pass, in a new order", function()
    local loader = data.DataLoader(data.ArrayDataset(X, Y), { batch_size = 3, shuffle = true, seed = 3 })
    local orders = {}
    for pass = 1, 2 do
      local seen = {}
      for x, y in loader:iter() do
        for r = 1, y:shape()[1] do
          local lab = y[r]:item()
          seen[#seen + 1] = lab + 1
          assert.same(X[lab + 1]:tolist(), x[r]:tolist()) -- rows stay paired
        end
      end
      assert.is_true(is_perm(seen, 10))
      orders[pass] = seen
    end
    assert.are_not.same(orders[1], orders[2])
  end)

  it("the per-sample path (batchify_fn) and the gather path agree", function()
    local ds = data.ArrayDataset(X, Y)
    local fast = data.DataLoader(ds, { batch_size = 4 })
    -- a plain-function transform cannot run per batch: samples are stacked one by one
    local slow = data.DataLoader(ds:transform(function(a, b) return a, b end), { batch_size = 4 })
    local fb, sb = {}, {}
    for x, y in fast:iter() do fb[#fb + 1] = { x:tolist(), y:tolist(), y:dtype() } end
    for x, y in slow:iter() do sb[#sb + 1] = { x:tolist(), y:tolist(), y:dtype() } end
    assert.same(fb, sb)
  end)

  it("default batchify: numbers -> int32 or float32, lists -> float32 rows", function()
    local ds = data.ArrayDataset({ 1, 2, 3 }, { 0.5, 1.5, 2.5 }, { { 1, 2 }, { 3, 4 }, { 5, 6 } })
    local loader = data.DataLoader(ds, { batch_size = 3 })
    local a, b, c = loader:iter()()
    assert.equal("int32", a:dtype())
    assert.same({ 1, 2, 3 }, a:tolist())
    assert.equal("float32", b:dtype())
    assert.same({ 0.5, 1.5, 2.5 }, b:tolist())
    assert.same({ 3, 2 }, c:shape())
    assert.same({ 1, 2, 3, 4, 5, 6 }, c:tolist())
  end)

  it("stacking samples of different shapes names both shapes", function()
    local ds = data.SimpleDataset { nd.zeros { 2 }, nd.zeros { 3 } }
    local loader = data.DataLoader(ds, { batch_size = 2 })
    local ok, err = pcall(function() return loader:iter()() end)
    assert.is_false(ok)
    assert.truthy(err:find("sample 1 is (2,), sample 2 is (3,)", 1, true), err)
  end)

  it("a custom batchify_fn receives the samples", function()
    local ds = data.ArrayDataset({ 1, 2, 3, 4 }, { 5, 6, 7, 8 })
    local loader = data.DataLoader(ds, {
      batch_size = 2,
      batchify_fn = function(samples)
        local s = 0
        for _, smp in ipairs(samples) do s = s + smp[1] * smp[2] end
        return s
      end,
    })
    assert.same({ 1 * 5 + 2 * 6, 3 * 7 + 4 * 8 }, collect(loader:iter()))
  end)

  it("a batch_sampler replaces batch_size/shuffle/sampler/last_batch", function()
    local ds = data.ArrayDataset(X, Y)
    local bs = data.BatchSampler(data.SequentialSampler(10), 5, "keep")
    local loader = data.DataLoader(ds, { batch_sampler = bs })
    assert.equal(2, loader:len())
    assert.has_error(function() data.DataLoader(ds, { batch_sampler = bs, batch_size = 2 }) end,
      "DataLoader: batch_size must not be set when batch_sampler is given")
    assert.has_error(function()
      data.DataLoader(ds, { batch_size = 2, shuffle = true, sampler = data.SequentialSampler(10) })
    end, "DataLoader: shuffle must not be set when a sampler is given")
  end)

  it("rejects bad options clearly", function()
    local ds = data.ArrayDataset(X, Y)
    assert.has_error(function() data.DataLoader(ds, { batch_size = 2, num_workers = -1 }) end,
      "DataLoader: num_workers must be a non-negative integer, got -1")
    assert.has_error(function() data.DataLoader(ds, { batch_size = 2, timeout = 0 }) end,
      "DataLoader: timeout must be a positive number of seconds, got 0")
    assert.has_error(function() data.DataLoader(ds, {}) end,
      "DataLoader: batch_size must be given when batch_sampler is not")
    local ok, err = pcall(data.DataLoader, ds, { batch_size = 2, bacth = 1 })
    assert.is_false(ok)
    assert.truthy(err:find("unknown option 'bacth'", 1, true))
    ok, err = pcall(data.DataLoader, ds, { batch_size = 2, last_batch = "nope" })
    assert.is_false(ok)
    assert.truthy(err:find('last_batch must be "keep"', 1, true), err)
  end)
end)

describe("gluon.data.batchify", function()
  it("Stack, Group and Pad", function()
    local b = data.batchify
    local st = b.Stack()({ nd.array { 1, 2 }, nd.array { 3, 4 } })
    assert.same({ 2, 2 }, st:shape())
    local g = b.Group(b.Stack(), b.Stack())({ { nd.array { 1 }, 5 }, { nd.array { 2 }, 6 } })
    assert.same({ 1, 2 }, g[1]:tolist())
    assert.same({ 5, 6 }, g[2]:tolist())
    local p = b.Pad { val = -1 } ({ nd.array { 1, 2, 3 }, nd.array { 4 } })
    assert.same({ 2, 3 }, p:shape())
    assert.same({ 1, 2, 3, 4, -1, -1 }, p:tolist())
    local p2 = b.Pad()({ nd.array { { 1, 2 } }, nd.array { { 3 }, { 4 } } })
    assert.same({ 2, 2, 2 }, p2:shape())
    assert.same({ 1, 2, 0, 0, 3, 0, 4, 0 }, p2:tolist())
  end)
end)

describe("DataLoader over plain values (MXNet accepts lists and NDArrays)", function()
  it("a Lua list is a SimpleDataset, an NDArray an ArrayDataset of its rows", function()
    local l = data.DataLoader({ 1, 2, 3, 4, 5 }, { batch_size = 2 })
    local got = {}
    for b in l:iter() do got[#got + 1] = b:tolist() end
    assert.same({ { 1, 2 }, { 3, 4 }, { 5 } }, got)
    local x = seq_tensor({ 5, 2 })
    local a = data.DataLoader(x, { batch_size = 3 })
    local rows = {}
    for b in a:iter() do rows[#rows + 1] = b:shape() end
    assert.same({ { 3, 2 }, { 2, 2 } }, rows)
  end)
  it("prefetch must be a non-negative integer", function()
    assert.has_error(function() data.DataLoader({ 1 }, { batch_size = 1, prefetch = 1.5 }) end,
      "DataLoader: prefetch must be a non-negative integer, got 1.5")
  end)
end)
