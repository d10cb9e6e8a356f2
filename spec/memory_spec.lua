-- The pooled allocator as the engine and the GC use it: stats, reuse, empty_cache,
-- storages held by queued ops, and a steady state for loops of temporaries.
local mx = require("mx")
local nd = mx.nd
local engine = mx.engine

local function settle()
  nd.waitall()
  collectgarbage("collect")
  collectgarbage("collect")
  return mx.memory_stats()
end

describe("memory stats", function()
  it("reports in use, pooled, peak, allocations and pool hits", function()
    local s = mx.memory_stats()
    for _, k in ipairs { "bytes_in_use", "bytes_pooled", "peak_bytes", "num_allocs", "pool_hits" } do
      assert.are.equal("number", type(s[k]), k)
      assert.is_true(s[k] >= 0, k)
    end
    assert.is_true(s.peak_bytes >= s.bytes_in_use)
  end)

  it("counts a new tensor while it lives and not after the GC frees it", function()
    local before = settle().bytes_in_use
    local x = nd.zeros({ 1024, 1024 }) -- luacheck: ignore 231
    local during = settle().bytes_in_use -- x is alive: settling frees only garbage
    assert.is_true(during - before >= 4 * 2 ^ 20, ("before %d during %d"):format(before, during))
    assert.are.equal(0, x[1][1]:item())
    x = nil -- luacheck: ignore 311 231 241
    local after = settle().bytes_in_use
    assert.is_true(after - before < 2 ^ 20, ("before %d after %d"):format(before, after))
  end)

  it("reuses freed blocks of a fitting size (pool hits)", function()
    settle()
    local x = nd.zeros({ 300, 1000 }) -- luacheck: ignore 231 241
    x = nil -- luacheck: ignore 311 231 241
    settle()
    local s0 = mx.memory_stats()
    assert.is_true(s0.bytes_pooled >= 1.2e6)
    local y = nd.zeros({ 300, 1000 })
    local s1 = mx.memory_stats()
    assert.is_true(s1.pool_hits > s0.pool_hits)
    assert.is_true(s1.bytes_pooled < s0.bytes_pooled)
    assert.are.equal(0, y:sum():item())
  end)

  it("small tensors (cells) are counted and pooled too", function()
    local s0 = settle()
    local t = {} -- luacheck: ignore 231 241
    for i = 1, 1000 do t[i] = nd.array({ i }) end
    local s1 = mx.memory_stats()
    assert.is_true(s1.bytes_in_use - s0.bytes_in_use >= 1000 * 4)
    t = nil -- luacheck: ignore 311 231 241
    local s2 = settle()
    assert.is_true(s2.bytes_in_use <= s0.bytes_in_use + 1024)
    assert.is_true(s2.bytes_pooled >= s0.bytes_pooled)
  end)

  it("live tensors survive the handle registry's compaction after a burst", function()
    local keep = {}
    for i = 1, 100 do keep[i] = nd.full({ 3 }, i) end
    for i = 1, 30000 do
      local t = nd.full({ 2 }, i) -- a burst of garbage grows the registry
      if i % 1000 == 0 then keep[#keep + 1] = t end
    end
    settle() -- collects the burst; the sweep compacts the mostly-free registry
    for i = 1, 100 do assert.are.same({ i, i, i }, keep[i]:totable()) end
    for j = 1, 30 do assert.are.equal(1000 * j, keep[100 + j][1]:item()) end
    local more = {}
    for i = 1, 5000 do more[i] = nd.full({ 1 }, -i) end -- slots reused after compaction
    settle()
    for i = 1, 5000, 499 do assert.are.equal(-i, more[i]:item()) end
    assert.are.equal(50, keep[50][2]:item())
  end)

  it("empty_cache gives pooled blocks back", function()
    local x = nd.zeros({ 1000, 100 }) -- luacheck: ignore 231 241
    x = nil -- luacheck: ignore 311 231 241
    settle()
    assert.is_true(mx.memory_stats().bytes_pooled > 0)
    mx.memory.empty_cache()
    assert.are.equal(0, mx.memory_stats().bytes_pooled)
    assert.are.equal(7, (nd.ones({ 100 }) * 7)[100]:item()) -- still allocates fine
  end)

  it("trim gives back the pooled sizes nothing asked for since the last trim", function()
    local function pooled() return mx.memory_stats().bytes_pooled end
    mx.memory.empty_cache()
    local x = nd.zeros({ 1234, 77 }) -- luacheck: ignore 231 241 (a size no other tensor here has)
    local y = nd.zeros({ 4321, 7 }) -- luacheck: ignore 231 241
    x, y = nil, nil -- luacheck: ignore 311 231 241
    settle()
    local both = 1234 * 77 * 4 + 4321 * 7 * 4
    assert.is_true(pooled() >= both)
    mx.memory.trim() -- both sizes were allocated since the last trim: kept
    assert.is_true(pooled() >= both)
    local z = nd.zeros({ 4321, 7 }) -- luacheck: ignore 231 241 (y's size in demand again)
    mx.memory.trim() -- x's size went unused: given back; y's block is z's now
    assert.is_true(pooled() < 4321 * 7 * 4, "pooled " .. pooled())
    z = nil -- luacheck: ignore 311 231 241
    settle()
    assert.is_true(pooled() >= 4321 * 7 * 4)
    assert.are.equal(0, nd.zeros({ 1234, 77 })[1234][77]:item()) -- allocates afresh
  end)

  it("a loop of large temporaries stays within the GC's headroom", function()
    -- an evaluation loop at batch 1000 (MB-sized temporaries): the byte count is
    -- polled at every new tensor, so the garbage never runs far past the threshold
    local w = nd.ones({ 784, 256 })
    settle()
    mx.memory.reset_peak()
    local base = mx.memory_stats().bytes_in_use
    for _ = 1, 40 do
      local x = nd.ones({ 1000, 784 })
      local h = nd.relu(nd.dot(x, w))
      local _ = (h * 2):sum()
    end
    nd.waitall()
    local grew = mx.memory_stats().peak_bytes - base
    -- 40 iterations make ~250 MB of temporaries; the GC keeps at most its headroom
    -- (16 MB here) plus one iteration's tensors
    assert.is_true(grew < 28 * 2 ^ 20, "peak grew by " .. grew / 2 ^ 20 .. " MB")
  end)

  it("reset_peak brings the peak down to what is in use", function()
    local x = nd.zeros({ 2000, 1000 }) -- luacheck: ignore 231 241
    x = nil -- luacheck: ignore 311 231 241
    settle()
    mx.memory.reset_peak()
    local s = mx.memory_stats()
    assert.are.equal(s.bytes_in_use, s.peak_bytes)
  end)
end)

describe("memory and the engine", function()
  it("a storage read by a queued op is returned to the pool only after the op", function()
    local old = engine.get_inline_max()
    engine.set_inline_max(0)
    local outs = {}
    for i = 1, 20 do
      local src = nd.full({ 100000 }, i)
      outs[i] = src * 2 + 1 -- queued reads of src
      src = nil -- luacheck: ignore 311 231 241
      collectgarbage("collect") -- src's box is gone; the engine still holds the tensor
      mx.memory_stats() -- sweeps: releases the Lua reference now
    end
    for i = 1, 20 do assert.are.equal(2 * i + 1, outs[i][100000]:item()) end
    engine.set_inline_max(old)
  end)

  local function steady(iters, shape)
    local a, b = nd.ones(shape), nd.ones(shape)
    local function body()
      local c = a + b
      local d = c * 2
      local e = nd.exp(d - c)
      return e
    end
    for _ = 1, math.floor(iters / 10) do body() end -- warm up: pool and GC threshold settle
    nd.waitall()
    mx.memory.reset_peak()
    local s0 = mx.memory_stats()
    for _ = 1, iters do body() end
    nd.waitall()
    local s1 = mx.memory_stats()
    return s0, s1
  end

  it("a loop of temporaries reaches a steady state (20k iterations, small tensors)", function()
    local s0, s1 = steady(20000, { 8 })
    -- peak stays within the GC's bound, far below what 60k live tensors would take
    local grew = s1.peak_bytes - s0.bytes_in_use
    assert.is_true(grew < 96 * 2 ^ 20, "peak grew by " .. grew)
    -- (whether blocks were reused yet depends on when Lua's GC cycles: with a big
    -- Lua heap none may end within the loop, and 60k small cells fit the bound)
    assert.is_true(s1.num_allocs - s0.num_allocs >= 60000)
  end)

  it("a loop of temporaries reaches a steady state (large tensors, queued ops)", function()
    local s0, s1 = steady(2000, { 64, 1024 })
    -- 256 KiB tensors: the GC threshold (64 MiB plus what lives) bounds the peak
    local grew = s1.peak_bytes - s0.bytes_in_use
    -- the binding collects once C memory passes max(64 MiB, 2 x what the last
    -- collection left); the engine's back-pressure caps queued outputs at 256 MiB
    local bound = math.max(64 * 2 ^ 20, 2 * s0.bytes_in_use) + 256 * 2 ^ 20
    assert.is_true(grew < bound, "peak grew by " .. grew)
    assert.is_true(s1.pool_hits - s0.pool_hits > 5000)
  end)

  it("100k iterations of temporaries do not grow memory #slow", function()
    local a, b = nd.ones({ 64 }), nd.ones({ 64 })
    local function run(iters)
      mx.memory.reset_peak()
      for _ = 1, iters do
        local c = a + b
        local d = c * 2
        nd.exp(d - c)
      end
      return mx.memory_stats().peak_bytes
    end
    local s0 = settle()
    -- warm up to the steady state: the binding's GC step (C memory past 64 MiB or
    -- twice what the last collection left) caps what dead temporaries hold
    local warm = math.max(run(100000), run(100000))
    local measured = run(100000)
    local s1 = settle()
    local detail = ("baseline %d, peak %d warm, %d measured, %d after"):format(
      s0.bytes_in_use, warm, measured, s1.bytes_in_use)
    assert.is_true(measured <= 1.25 * warm + 4 * 2 ^ 20, detail) -- no growth
    assert.is_true(s1.bytes_in_use - s0.bytes_in_use < 2 ^ 20, detail) -- nothing leaks
    -- and far below keeping the 300k temporaries of a run alive (~140 MB)
    assert.is_true(measured - s0.bytes_in_use < 96 * 2 ^ 20, detail)
  end)
end)
