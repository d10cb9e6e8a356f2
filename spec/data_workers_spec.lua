-- DataLoader worker threads (num_workers > 0; docs/design/data.md "Worker threads"):
-- same batches as num_workers = 0, errors, timeouts, no threads or memory left behind.
local mx = require("mx")
local data = require("mx.gluon.data")
local dataset = require("mx.gluon.data.dataset")
local nd = mx.nd
local DL = data.DataLoader

local function threads()
  for l in io.lines("/proc/self/status") do
    local n = l:match("^Threads:%s+(%d+)")
    if n then return tonumber(n) end
  end
end

-- bytes held by live CPU storages of every session (main and worker states)
local stats = require("mx.core.lib").ffi.new("mx_memory_stats")
local function cpu_bytes()
  collectgarbage()
  collectgarbage()
  nd._sweep() -- the handles of collected NDArrays go back now, not at the next wrap
  mx.engine.waitall()
  require("mx.core.lib").C.mx_memory_get_stats(1, stats)
  return tonumber(stats.bytes_in_use)
end

local function rss_mb()
  local f = assert(io.open("/proc/self/statm"))
  local _, res = f:read("*n", "*n")
  f:close()
  return res * 4096 / 2 ^ 20
end

-- every batch of a pass as lists: { {field1 values, field2 values, ...}, ... }
local function batches(loader)
  local out = {}
  for a, b in loader:iter() do
    out[#out + 1] = { a:tolist(), b and b:tolist() or false }
  end
  return out
end

local function fashion()
  local ok, vision = pcall(require, "mx.gluon.data.vision")
  if not ok then return nil end
  local ok2, ds = pcall(vision.FashionMNIST, { train = false })
  return ok2 and ds or nil
end

describe("DataLoader workers: same batches as num_workers = 0", function()
  local x = nd.arange(0, 70):reshape { 35, 2 }
  local y = nd.arange(0, 35, 1, { dtype = "int32" })
  local ds = data.ArrayDataset(x, y)

  it("ArrayDataset with 0, 1, 2, 3 workers (values and order, a short last batch)", function()
    local ref = batches(DL(ds, { batch_size = 4 }))
    assert.equal(9, #ref)
    for nw = 1, 3 do
      local l = DL(ds, { batch_size = 4, num_workers = nw })
      assert.same(ref, batches(l))
      assert.same(ref, batches(l)) -- a second pass on the same threads
      l:close()
    end
  end)

  it("shuffle with a seed gives the same order whatever the workers", function()
    local ref = batches(DL(ds, { batch_size = 5, shuffle = true, seed = 11 }))
    for nw = 1, 3 do
      assert.same(ref, batches(DL(ds, { batch_size = 5, shuffle = true, seed = 11, num_workers = nw,
        prefetch = 1 })))
    end
  end)

  it("transform_first with a recipe transform and with a closure (per-sample path)", function()
    local T = require("mx.gluon.data.vision.transforms")
    local img = nd.arange(0, 12 * 2 * 2 * 1):reshape { 12, 2, 2, 1 }:to(nil, "uint8")
    local lab = nd.arange(0, 12)
    local base = data.ArrayDataset(img, lab)
    local norm = dataset.recipe("mx.gluon.data.vision.transforms", "Normalize", 0.5, 0.25)
    local tt = T.ToTensor()
    local per_sample = base:transform_first(function(v) return norm(tt(v)) end)
    local recipe_only = base:transform_first(T.Compose { T.ToTensor(), norm })
    local ref = batches(DL(per_sample, { batch_size = 5 }))
    assert.same(ref, batches(DL(recipe_only, { batch_size = 5 })))
    for nw = 1, 3 do
      assert.same(ref, batches(DL(per_sample, { batch_size = 5, num_workers = nw })))
      assert.same(ref, batches(DL(recipe_only, { batch_size = 5, num_workers = nw })))
    end
  end)

  it("Fashion-MNIST (if installed) with ToTensor + Normalize, shuffled", function()
    local fm = fashion()
    if not fm then return pending("dataset-fashion-mnist is not installed") end
    local T = require("mx.gluon.data.vision.transforms")
    local tf = T.Compose { T.ToTensor(), T.Normalize(0.286, 0.353) }
    local ds2 = fm:take(700):transform_first(function(v) return tf(v) end)
    local function sums(l)
      local s = {}
      for a, b in l:iter() do s[#s + 1] = { a:sum():item(), b:tolist() } end
      return s
    end
    local ref = sums(DL(ds2, { batch_size = 64, shuffle = true, seed = 3 }))
    assert.equal(11, #ref)
    for nw = 1, 3 do
      assert.same(ref, sums(DL(ds2, { batch_size = 64, shuffle = true, seed = 3, num_workers = nw })))
    end
  end)

  it("random transforms are reproducible for the same seed and worker count", function()
    local noisy = data.SimpleDataset({ 1, 2, 3, 4, 5, 6, 7, 8 }):transform(function(v)
      return nd.random.uniform(0, 1, { 2 }) + v
    end)
    local function run(seed)
      mx.random.seed(seed)
      local l = DL(noisy, { batch_size = 2, num_workers = 2 })
      local r = batches(l)
      l:close()
      return r
    end
    local a, b, c = run(5), run(5), run(6)
    assert.same(a, b)
    assert.are_not.same(a, c)
  end)

  it("an iterator keeps its loader alive (collections during the pass stop nothing)", function()
    local got = 0
    for v in DL(nd.arange(0, 40), { batch_size = 4, num_workers = 2 }):iter() do
      collectgarbage()
      collectgarbage()
      got = got + v:sum():item()
    end
    assert.equal(780, got)
  end)

  it("Lua lists and NDArrays as datasets", function()
    local l = DL({ 1, 2, 3, 4, 5 }, { batch_size = 2, num_workers = 2 })
    local got = {}
    for v in l:iter() do got[#got + 1] = v:tolist() end
    assert.same({ { 1, 2 }, { 3, 4 }, { 5 } }, got)
    local rows = {}
    for v in DL(nd.arange(0, 6):reshape { 3, 2 }, { batch_size = 2, num_workers = 1 }):iter() do
      rows[#rows + 1] = v:tolist()
    end
    assert.same({ { 0, 1, 2, 3 }, { 4, 5 } }, rows)
  end)
end)

describe("DataLoader workers: errors", function()
  it("a worker's error is raised in batch order with its traceback and the sample indices", function()
    local bad = data.SimpleDataset({ 1, 2, 3, 4, 5, 6 }):transform(function(v)
      if v == 5 then error("boom at " .. v) end
      return v
    end)
    local l = DL(bad, { batch_size = 2, num_workers = 2 })
    local seen = {}
    local ok, err = pcall(function()
      for v in l:iter() do seen[#seen + 1] = v:tolist() end
    end)
    assert.is_false(ok)
    assert.same({ { 1, 2 }, { 3, 4 } }, seen)
    assert.truthy(err:find("worker 1 failed on batch 3 (sample indices 5, 6)", 1, true), err)
    assert.truthy(err:find("boom at 5", 1, true), err)
    assert.truthy(err:find("stack traceback", 1, true), err)
    -- the loader stays usable: the next pass starts over
    local ok2 = pcall(function() for _ in l:iter() do end end)
    assert.is_false(ok2)
    l:close()
  end)

  it("a closure over something that cannot cross states is an error naming it", function()
    local co = coroutine.create(function() end)
    local ds = data.SimpleDataset({ 1, 2 }):transform(function(v) return co and v end)
    local ok, err = pcall(function() return DL(ds, { batch_size = 1, num_workers = 1 }):iter() end)
    assert.is_false(ok)
    assert.truthy(err:find("the dataset (_LazyTransformDataset argument 2) (upvalue 'co') is a thread",
      1, true), err)
    assert.truthy(err:find("recipe", 1, true), err)
    collectgarbage()
    collectgarbage() -- the loaders of the cases above go, and their workers with them
    assert.equal(0, DL._live_workers())
  end)

  it("a recursive closure is an error, not a stack overflow", function()
    local function fact(n) return n <= 1 and 1 or n * fact(n - 1) end
    local ds = data.SimpleDataset({ 1, 2 }):transform(fact)
    local ok, err = pcall(function() return DL(ds, { batch_size = 1, num_workers = 1 }):iter() end)
    assert.is_false(ok)
    assert.truthy(err:find("(upvalue 'fact') is a function that refers to itself", 1, true), err)
  end)

  it("a dataset the worker cannot rebuild is an error", function()
    local ds = dataset.recipe("mx.gluon.data.dataset", "SimpleDataset", { 1, 2 })
    rawset(ds, "_recipe_value", { module = "no.such.module", ctor = "X", args = { n = 0 } })
    local ok, err = pcall(function() for _ in DL(ds, { batch_size = 1, num_workers = 1 }):iter() do end end)
    assert.is_false(ok)
    assert.truthy(err:find("rebuilding the dataset in the worker failed", 1, true), err)
    assert.truthy(err:find("no.such.module", 1, true), err)
  end)

  it("a worker stuck past timeout is an error, and its thread goes", function()
    collectgarbage()
    collectgarbage()
    local base = threads()
    local slow = data.SimpleDataset({ 1, 2, 3 }):transform(function(v)
      local t = os.clock()
      while os.clock() - t < 0.6 do end
      return v
    end)
    local l = DL(slow, { batch_size = 1, num_workers = 1, timeout = 0.2 })
    local t0 = os.time()
    local ok, err = pcall(function() for _ in l:iter() do end end)
    assert.is_false(ok)
    assert.truthy(err:find("worker 1 gave no batch within timeout=0.2 s (batch 1, sample indices 1)",
      1, true), err)
    assert.truthy(os.time() - t0 < 5)
    assert.equal(0, DL._live_workers())
    assert.equal(base, threads())
  end)
end)

describe("DataLoader workers: a get stuck in C", function()
  it("times out; the sleeping worker is detached and goes when its call returns", function()
    collectgarbage()
    collectgarbage()
    local base = threads()
    local ffi = require("ffi") -- a module: the worker's closure gets its own ffi
    local ds = data.SimpleDataset({ 1, 2, 3, 4 }):transform(function(v)
      pcall(ffi.cdef, "int poll(void *fds, unsigned long nfds, int timeout);")
      ffi.C.poll(nil, 0, 800) -- in C: no hook can stop it
      return v
    end)
    local l = DL(ds, { batch_size = 1, num_workers = 1, timeout = 0.2 })
    local ok, err = pcall(function() for _ in l:iter() do end end)
    assert.is_false(ok)
    assert.truthy(err:find("gave no batch within timeout=0.2 s", 1, true), err)
    -- joined within the grace (min(timeout, 10 s)) or detached: either way gone soon
    local t0 = os.time()
    while DL._live_workers() > 0 and os.time() - t0 < 5 do end
    assert.equal(0, DL._live_workers())
    while threads() > base and os.time() - t0 < 5 do end
    assert.equal(base, threads())
  end)
end)

describe("DataLoader workers: nothing left behind", function()
  local x = nd.arange(0, 400):reshape { 200, 2 }
  local ds = data.ArrayDataset(x, nd.arange(0, 200))

  it("an early break, then collecting the loader, joins every worker", function()
    for _ in DL(ds, { batch_size = 8 }):iter() do end -- engine threads started first
    collectgarbage()
    collectgarbage()
    local base = threads()
    local l = DL(ds, { batch_size = 8, num_workers = 3 })
    for _ in l:iter() do break end -- luacheck: ignore 512
    assert.equal(3, DL._live_workers())
    assert.equal(base + 3, threads())
    -- a new pass after the break still gives every batch in order
    assert.same(batches(DL(ds, { batch_size = 8 })), batches(l))
    l = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    assert.equal(0, DL._live_workers())
    assert.equal(base, threads())
  end)

  it("batches in flight when a pass is abandoned go back with the workers", function()
    local big = data.ArrayDataset(nd.zeros { 64, 2048 }, nd.arange(0, 64)) -- 64 KB a batch of 8
    for _ in DL(big, { batch_size = 8 }):iter() do end
    collectgarbage()
    collectgarbage()
    local bytes = cpu_bytes()
    local l = DL(big, { batch_size = 8, num_workers = 3, prefetch = 6 })
    -- 6 more batches (384 KB) are on their way after the break
    for _ in l:iter() do break end -- luacheck: ignore 512
    -- wait until all 6 are back: in the result queue, or already taken (their job's
    -- indices forgotten)
    local C, t0, pool = require("mx.core.lib").C, os.time(), l._pool
    local function back()
      local n = C.mx_queue_count(pool.resq)
      for id = 2, 7 do if pool.idx[id] == nil then n = n + 1 end end
      return n
    end
    while back() < 6 and os.time() - t0 < 10 do end
    assert.equal(6, back())
    assert.equal(7, pool.next_id) -- prefetch bounds what is in flight: no 8th job was sent
    l = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    assert.equal(0, DL._live_workers())
    assert.equal(bytes, cpu_bytes())
  end)

  it("memory stays flat over 2 x 10 epochs with workers", function()
    local fm = fashion()
    local src = fm and fm:take(2000) or ds
    local l = DL(src:transform_first(function(v) return v:to(nil, "float32") end),
      { batch_size = 50, num_workers = 2, shuffle = true })
    for _ = 1, 5 do -- the worker states' heaps settle first
      for _ in l:iter() do end
    end
    collectgarbage()
    -- two windows of 10 epochs: a leak grows both; malloc's arenas under a loaded machine
    -- (worker threads scheduled late hold more batches at once) can bump one
    local function ten()
      local r0 = rss_mb()
      for _ = 1, 10 do
        for _ in l:iter() do end
        collectgarbage()
      end
      return rss_mb() - r0
    end
    local g1, g2 = ten(), ten()
    assert.truthy(math.min(g1, g2) < 8,
      string.format("RSS grew %.1f MB and then %.1f MB over 10 epochs each", g1, g2))
    l:close()
  end)

  it("the end of the program with workers mid-pass, never closed: no hang, no crash", function()
    local code = "local mx = require('mx') "
      .. "local l = mx.gluon.data.DataLoader(mx.nd.arange(0, 400):reshape{200, 2}, "
      .. "{batch_size = 4, num_workers = 3}) "
      .. "for _ in l:iter() do break end KEEP = l print('started ' .. l._live_workers()) "
    for _, ending in ipairs { "", "os.exit(0)", "error('bye')" } do
      local f = io.popen("LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='build/lib/?.so;;' "
        .. "timeout 20 luajit -e \"" .. code .. ending .. "\" 2>/dev/null; echo rc=$?")
      local out = f:read("*a")
      f:close()
      assert.truthy(out:find("started 3", 1, true), out)
      local want = ending == "error('bye')" and "rc=1" or "rc=0"
      assert.truthy(out:find(want, 1, true), ending .. ": " .. out)
    end
  end)
end)

describe("mx_queue (the C queue under the workers)", function()
  local lib = require("mx.core.lib")
  local ffi, C = lib.ffi, lib.C
  it("FIFO, bounded, timeouts, close, and the last release gives back held tensors", function()
    local q = C.mx_queue_new(2)
    local it = ffi.new("mx_queue_item")
    local x = nd.arange(0, 3)
    for id = 1, 2 do
      C.mx_tensor_retain(x.h) -- the queue takes this reference
      it.id, it.kind, it.n, it.t[0], it.msg = id, 0, 1, x.h, ffi.cast("char *", "m" .. id)
      assert.equal(0, C.mx_queue_push(q, it, 0))
    end
    assert.equal(2, C.mx_queue_count(q))
    it.n = 0
    assert.equal(C.MX_QUEUE_TIMEOUT, C.mx_queue_push(q, it, 0.01)) -- full
    local out = ffi.new("mx_queue_item")
    assert.equal(0, C.mx_queue_pop(q, out, 0))
    assert.equal(1, tonumber(out.id))
    assert.equal("m1", ffi.string(out.msg))
    assert.equal(x.h, out.t[0])
    C.mx_queue_item_clear(out)
    C.mx_queue_close(q)
    it.n = 0
    assert.equal(C.MX_QUEUE_CLOSED, C.mx_queue_push(q, it, 0))
    assert.equal(0, C.mx_queue_pop(q, out, 0)) -- what it holds still comes out
    assert.equal(2, tonumber(out.id))
    C.mx_queue_item_clear(out)
    assert.equal(C.MX_QUEUE_CLOSED, C.mx_queue_pop(q, out, 1))
    C.mx_queue_release(q)
    local q2 = C.mx_queue_new(1)
    assert.equal(C.MX_QUEUE_TIMEOUT, C.mx_queue_pop(q2, out, 0.01))
    it.n = 9
    assert.equal(C.MX_EINVAL, C.mx_queue_push(q2, it, 0))
    assert.truthy(ffi.string(C.mx_last_error()):find("at most 8", 1, true))
    C.mx_tensor_retain(x.h)
    it.n, it.t[0], it.msg = 1, x.h, nil
    assert.equal(0, C.mx_queue_push(q2, it, 0))
    C.mx_queue_release(q2) -- releases the held reference: x is intact, its own one remains
    assert.same({ 0, 1, 2 }, x:tolist())
  end)
end)
