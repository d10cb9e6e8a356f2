-- mx.profiler: Chrome trace of op runs and the aggregate table.
local mx = require("mx")
local nd = mx.nd
local profiler = mx.profiler

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

describe("profiler", function()
  local path = os.tmpname()
  local default_max = mx.engine.get_inline_max()
  after_each(function()
    profiler.set_state("stop")
    profiler.reset()
    mx.engine.set_inline_max(default_max)
  end)
  teardown(function() os.remove(path) end)

  it("records nothing while stopped", function()
    profiler.reset()
    local a = nd.ones({ 4 })
    for _ = 1, 10 do a = a + 1 end
    assert.are.equal(0, profiler.num_events())
    assert.are.equal("stop", profiler.state())
  end)

  it("writes a Chrome trace with op names, threads, start and duration", function()
    profiler.set_config { filename = path }
    profiler.reset()
    profiler.set_state("run")
    assert.are.equal("run", profiler.state())
    local a = nd.ones({ 8 })
    for _ = 1, 5 do a = nd.add(a, a) end
    mx.engine.set_inline_max(0) -- some ops on the workers too
    local b = nd.exp(nd.ones({ 1000 }))
    profiler.set_state("stop")
    local c = a + 1 -- after stop: not recorded
    assert.are.equal(8, profiler.num_events()) -- 2 ones, 5 adds, exp
    assert.are.equal(path, profiler.dump())
    local s = read(path)
    assert.truthy(s:find('"traceEvents"', 1, true))
    assert.are.equal(5, count(s, '"name": "add"'))
    assert.are.equal(1, count(s, '"name": "exp"'))
    assert.truthy(s:find('"cat": "async"', 1, true), "an op ran on a worker")
    assert.truthy(s:find('"cat": "inline"', 1, true))
    assert.truthy(s:find('"ph": "X"', 1, true))
    assert.truthy(s:find('"name": "thread_name"', 1, true))
    assert.truthy(s:find('"engine worker', 1, true))
    for ts, dur in s:gmatch('"ts": ([%d%.%-]+), "dur": ([%d%.%-]+)') do
      assert.is_true(tonumber(ts) >= 0)
      assert.is_true(tonumber(dur) >= 0)
    end
    -- balanced JSON brackets (a cheap well-formedness check)
    assert.are.equal(count(s, "{"), count(s, "}"))
    assert.are.equal(count(s, "%["), count(s, "%]"))
    assert.is_truthy(b and c)
  end)

  it("dumps() aggregates count, total, min, max and avg per op", function()
    profiler.reset()
    profiler.set_state("run")
    local a = nd.ones({ 16 })
    for _ = 1, 12 do a = a * 1 end
    for _ = 1, 3 do a = nd.sqrt(a) end
    profiler.set_state("stop")
    local t = profiler.dumps()
    assert.truthy(t:find("count", 1, true) and t:find("avg", 1, true))
    local n = t:match("\nmul_scalar%s+(%d+)")
    assert.are.equal("12", n, t)
    assert.are.equal("3", t:match("\nsqrt%s+(%d+)"), t)
    -- reset = true empties the record
    profiler.dumps(true)
    assert.are.equal(0, profiler.num_events())
  end)

  it("scope() profiles a function and stops", function()
    profiler.reset()
    local r = profiler.scope(function() return (nd.ones({ 2 }) + 1):sum():item() end)
    assert.are.equal(4, r)
    assert.are.equal("stop", profiler.state())
    assert.is_true(profiler.num_events() >= 3)
  end)

  it("rejects bad arguments at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() profiler.set_state("go") end)
    assert.is_false(ok)
    assert.truthy(err:find("profiler_spec.lua:" .. line, 1, true), err)
    assert.has_error(function() profiler.set_config { nonsense = 1 } end)
    assert.has_error(function() profiler.set_config { filename = 3 } end)
    ok, err = pcall(profiler.dump, "/nonexistent-dir/x/trace.json")
    assert.is_false(ok)
    assert.truthy(err:find("cannot open", 1, true), err)
  end)
end)
