-- The dependency engine: ordering (threaded == naive), async errors that name the
-- op and the queuing line, lifetimes under the GC, modes and thread settings.
local mx = require("mx")
local nd = mx.nd
local engine = mx.engine

-- Run fn with the engine configured as given, restoring the defaults afterwards.
local function with_engine(mode, inline_max, fn, workers)
  local old_mode, old_max, old_w = engine.get(), engine.get_inline_max(), engine.get_num_workers()
  engine.set(mode)
  engine.set_inline_max(inline_max)
  engine.set_num_workers(workers or old_w)
  local ok, err = pcall(fn)
  pcall(nd.waitall)
  engine.set_nan_check(false)
  engine.set_inline_max(old_max)
  engine.set_num_workers(old_w)
  engine.set(old_mode)
  if not ok then error(err, 0) end
end

-- A seeded random program of read/write ops over a few shared tensors (whole tensors
-- and row views of them, so ops conflict through shared storage). Returns the final
-- values of every slot. Only elementwise ops: each result is independent of the
-- intra-op thread count, so any correct schedule gives bitwise the same numbers.
local function random_program(seed, nops, rows, cols)
  local rng = seed
  local function rand(n) -- LCG: the same sequence in every mode
    rng = (rng * 1103515245 + 12345) % 2147483648
    return rng % n + 1
  end
  local nslots = 6
  local slots = {}
  for i = 1, nslots do
    slots[i] = nd.full({ rows, cols }, i * 0.25)
  end
  local function pick_view(t)
    if rand(3) == 1 then return t[rand(rows)] end -- a row view: same storage
    return t
  end
  for _ = 1, nops do
    local a, b, c = slots[rand(nslots)], slots[rand(nslots)], slots[rand(nslots)]
    local k = rand(7)
    if k == 1 then -- c = a + b written in place (reads a, b; writes c)
      nd.add(a, b, { out = c })
    elseif k == 2 then -- read-modify-write of c through a row view
      local r = rand(rows)
      nd.mul_scalar(c[r], { scalar = 0.5, out = c[r] })
    elseif k == 3 then -- a new tensor replaces a slot (the old one may be collected)
      slots[rand(nslots)] = nd.sub(a, b) * 0.5
    elseif k == 4 then
      local v = pick_view(a)
      nd.add_scalar(v, { scalar = 1, out = v })
    elseif k == 5 then -- writes a row of c from a row of a
      local r = rand(rows)
      nd.add(a[r], b[r], { out = c[rand(rows)] })
    elseif k == 6 then
      slots[rand(nslots)] = nd.maximum(a, b) - 0.125
    else
      nd.mul(a, b, { out = c })
      nd.mul_scalar(c, { scalar = 0.25, out = c }) -- keep values bounded
    end
  end
  local out = {}
  for i = 1, nslots do out[i] = slots[i]:tolist() end
  return out
end

local function same(x, y)
  for i = 1, #x do
    local a, b = x[i], y[i]
    if #a ~= #b then return false, "slot " .. i .. " length" end
    for j = 1, #a do
      if a[j] ~= b[j] and not (a[j] ~= a[j] and b[j] ~= b[j]) then
        return false, string.format("slot %d element %d: %.17g vs %.17g", i, j, a[j], b[j])
      end
    end
  end
  return true
end

local function dag_check(nprog, nops)
  for p = 1, nprog do
    local ref, thr, all
    with_engine("naive", 16384, function() ref = random_program(p, nops, 4, 64) end)
    -- everything queued on 2 workers (ops overlap), then mixed inline/queued on 1
    with_engine("threaded", 0, function() all = random_program(p, nops, 4, 64) end, 2)
    with_engine("threaded", 300, function() thr = random_program(p, nops, 4, 64) end, 1)
    local ok, why = same(ref, all)
    assert(ok, "program " .. p .. " (everything queued): " .. tostring(why))
    ok, why = same(ref, thr)
    assert(ok, "program " .. p .. " (mixed inline/queued): " .. tostring(why))
  end
end

describe("engine ordering", function()
  it("random read/write DAGs give the naive engine's results bitwise", function()
    dag_check(60, 60) -- 60 programs x 60+ ops x 3 modes
  end)

  it("random read/write DAGs, long run #slow", function()
    dag_check(600, 120)
  end)

  it("actually queues ops when asked to (the DAG test is not all inline)", function()
    with_engine("threaded", 0, function()
      local before = engine.stats().ops_queued
      local a = nd.ones({ 100 })
      for _ = 1, 10 do a = a + 1 end
      assert.are.equal(11, a[1]:item())
      assert.is_true(engine.stats().ops_queued - before >= 10)
      assert.is_true(engine.stats().workers >= 1)
    end)
  end)

  it("a long chain of dependent in-place writes loses no write", function()
    with_engine("threaded", 0, function()
      local x = nd.zeros({ 1000 })
      for _ = 1, 500 do nd.add_scalar(x, { scalar = 1, out = x }) end
      local t = x:tolist()
      for i = 1, #t do assert.are.equal(500, t[i]) end
    end)
  end)

  it("readers see the write queued before them, not the one after", function()
    with_engine("threaded", 0, function()
      local x = nd.full({ 50000 }, 1)
      local ys = {}
      for i = 1, 20 do
        ys[i] = x * 1 -- a read of x
        nd.add_scalar(x, { scalar = 1, out = x }) -- then a write
      end
      for i = 1, 20 do assert.are.equal(i, ys[i][1]:item()) end
    end)
  end)

  it("two independent heavy chains both finish with the right values", function()
    with_engine("threaded", 0, function()
      engine.set_num_workers(2)
      local a, b = nd.zeros({ 200000 }), nd.ones({ 200000 })
      for _ = 1, 50 do
        nd.add_scalar(a, { scalar = 2, out = a })
        nd.mul_scalar(b, { scalar = 1, out = b })
      end
      nd.waitall()
      assert.are.equal(100, a[200000]:item())
      assert.are.equal(1, b[1]:item())
    end)
  end)
end)

describe("engine sync points", function()
  it("wait_to_read returns the tensor; waitall returns nothing", function()
    local x = nd.ones({ 3 })
    assert.are.equal(x, x:wait_to_read())
    assert.is_nil(nd.waitall())
  end)

  it("item, totable, tostring and data_ptr see queued results", function()
    with_engine("threaded", 0, function()
      local x = nd.zeros({ 4 })
      for _ = 1, 30 do nd.add_scalar(x, { scalar = 1, out = x }) end
      assert.are.equal(30, x[1]:item())
      x = x + 1
      assert.are.same({ 31, 31, 31, 31 }, x:totable())
      x = x + 1
      assert.truthy(tostring(x):find("32"))
      x = x + 1
      assert.are.equal(33, x:data_ptr()[3])
    end)
  end)

  it("writing through data_ptr waits for queued readers", function()
    with_engine("threaded", 0, function()
      local x = nd.full({ 100000 }, 2)
      local y = x * 3 -- queued read of x
      local p = x:data_ptr() -- must wait for y's kernel before we overwrite x
      for i = 0, 99999 do p[i] = 0 end
      assert.are.equal(6, y[100000]:item())
    end)
  end)
end)

describe("engine errors", function()
  local function nan_op_line() return debug.getinfo(2, "l").currentline + 1 end
  -- f is a one-line function (the op under test and nothing else): its error must be
  -- raised at f's own line
  local function assert_error_at_line_of(f)
    local line = debug.getinfo(f, "S").linedefined
    local ok, err = pcall(f)
    assert.is_false(ok)
    assert.truthy(err:find("engine_spec.lua:" .. line .. ":", 1, true), err)
  end

  it("an async kernel failure is raised at the next sync point with op, shapes, line", function()
    with_engine("threaded", 0, function()
      engine.set_nan_check(true)
      local x = nd.array({ -1, 4 })
      local line = nan_op_line()
      local y = nd.log(x)
      local z = y + 1 -- skipped: inherits the error
      local ok, err = pcall(function() local r = z:tolist() return r end)
      assert.is_false(ok)
      assert.truthy(err:find("log", 1, true), err)
      assert.truthy(err:find("NaN", 1, true), err)
      assert.truthy(err:find("(2,)", 1, true), err) -- the input shape
      assert.truthy(err:find("engine_spec.lua:" .. line, 1, true), err)
      -- the error stays on the tensors
      ok = pcall(function() local r = y:wait_to_read() return r end)
      assert.is_false(ok)
      -- already reported: waitall does not raise it again
      assert.has_no.errors(nd.waitall)
      engine.set_nan_check(false)
      -- the engine keeps working
      local w = nd.array({ 1, 2 }) + 1
      assert.are.same({ 2, 3 }, w:totable())
    end)
  end)

  it("set_debug(true) puts the queuing traceback in the message", function()
    with_engine("threaded", 0, function()
      engine.set_nan_check(true)
      engine.set_debug(true)
      local inner = debug.getinfo(1, "l").currentline + 1
      local function queue_it() local r = nd.log(nd.array({ -1 })) return r end
      local outer = debug.getinfo(1, "l").currentline + 1
      local y = queue_it()
      engine.set_debug(false)
      local ok, err = pcall(function() local r = y:item() return r end)
      assert.is_false(ok)
      assert.truthy(err:find("stack traceback", 1, true), err)
      -- both the queuing line and its caller's
      assert.truthy(err:find("engine_spec.lua:" .. inner .. ":", 1, true), err)
      assert.truthy(err:find("engine_spec.lua:" .. outer .. ":", 1, true), err)
      assert.is_false(engine.get_debug())
    end)
  end)

  it("the sync point's error position is the caller's line", function()
    with_engine("threaded", 0, function()
      engine.set_nan_check(true)
      local y = nd.log(nd.array({ -1 }))
      assert_error_at_line_of(function() local r = y:item() return r end)
    end)
  end)

  it("waitall raises the first unreported error once, then clears it", function()
    with_engine("threaded", 0, function()
      engine.set_nan_check(true)
      local line = nan_op_line()
      local a = nd.log(nd.array({ -1, -2, -3 }))
      local b = nd.sqrt(nd.array({ -4 }))
      local ok, err = pcall(nd.waitall)
      assert.is_false(ok)
      assert.truthy(err:find("log", 1, true), err)
      assert.truthy(err:find("engine_spec.lua:" .. line, 1, true), err)
      assert.has_no.errors(nd.waitall)
      assert.is_truthy(a and b)
    end)
  end)

  it("mx.nd.save of a tensor whose op failed raises and writes nothing", function()
    with_engine("threaded", 0, function()
      engine.set_nan_check(true)
      local y = nd.log(nd.array({ -1, 2 }))
      local path = os.tmpname()
      os.remove(path)
      local ok, err = pcall(nd.save, path, { y = y })
      engine.set_nan_check(false)
      assert.is_false(ok)
      assert.truthy(err:find("mx.nd.save", 1, true), err)
      assert.truthy(err:find("log", 1, true), err)
      assert.is_nil(io.open(path, "rb"))
    end)
  end)

  it("later ops reading a failed tensor are skipped, not crashed", function()
    with_engine("threaded", 0, function()
      engine.set_nan_check(true)
      local before = engine.stats().ops_skipped
      local y = nd.log(nd.array({ -1, 1 }))
      local chain = y
      for _ = 1, 20 do chain = nd.exp(chain) * 2 + chain end
      local ok = pcall(function() local r = chain:tolist() return r end)
      assert.is_false(ok)
      assert.is_true(engine.stats().ops_skipped > before)
      pcall(nd.waitall)
    end)
  end)

  it("inline failures (fast path) raise at the op's own line", function()
    with_engine("threaded", 16384, function()
      engine.set_nan_check(true)
      assert_error_at_line_of(function() local r = nd.log(nd.array({ -1 })) return r end)
    end)
  end)

  it("naive mode reports kernel failures synchronously", function()
    with_engine("naive", 0, function()
      engine.set_nan_check(true)
      assert_error_at_line_of(function() local r = nd.log(nd.array({ -1 })) return r end)
    end)
  end)

  it("shape errors stay synchronous in threaded mode", function()
    with_engine("threaded", 0, function()
      assert_error_at_line_of(function() local r = nd.add(nd.ones({ 2, 3 }), nd.ones({ 4 })) return r end)
    end)
  end)
end)

describe("engine lifetimes", function()
  it("tensors collected by the GC while their ops are in flight", function()
    with_engine("threaded", 0, function()
      local keep = {}
      for i = 1, 40 do
        local a = nd.full({ 20000 }, i)
        local b = a * 2 -- queued; then `a` becomes garbage
        for _ = 1, 3 do b = b + a end
        keep[i] = b
        a = nil -- luacheck: ignore 311
        if i % 8 == 0 then collectgarbage("collect") end
      end
      collectgarbage("collect")
      for i = 1, 40 do assert.are.equal(5 * i, keep[i][20000]:item()) end
    end)
  end)

  it("an out= target dropped before its op runs is still written safely", function()
    with_engine("threaded", 0, function()
      local src = nd.full({ 30000 }, 3)
      for _ = 1, 20 do
        local tmp = nd.zeros({ 30000 })
        nd.add(src, src, { out = tmp })
        tmp = nil -- luacheck: ignore 311
        collectgarbage("collect")
      end
      nd.waitall()
      assert.are.equal(3, src[1]:item())
    end)
  end)
end)

describe("engine and caller-owned memory", function()
  it("ops on tensors over Lua-owned memory never stay queued", function()
    with_engine("threaded", 0, function()
      local ffi = require("ffi")
      local buf = ffi.new("float[?]", 50000)
      for i = 0, 49999 do buf[i] = 1 end
      local x = nd.from_pointer(buf, { 50000 }, { owner = buf })
      local before = engine.stats().ops_queued
      local y = x * 3 -- runs before returning: the buffer may go with x's box
      assert.are.equal(before, engine.stats().ops_queued)
      x = nil -- luacheck: ignore 311
      buf = nil -- luacheck: ignore 311
      collectgarbage("collect")
      assert.are.equal(3, y[50000]:item())
    end)
  end)
end)

describe("engine modes and threads", function()
  it("switches modes and reports them", function()
    local old = engine.get()
    engine.set("naive")
    assert.are.equal("naive", engine.get())
    assert.are.same({ 2 }, (nd.ones({ 1 }) + 1):totable())
    engine.set("threaded")
    assert.are.equal("threaded", engine.get())
    engine.set(old)
  end)

  it("rejects bad settings at the caller's line", function()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(engine.set, "fast")
    assert.is_false(ok)
    assert.truthy(err:find("naive", 1, true))
    ok, err = pcall(function() engine.set_inline_max(-1) end)
    assert.is_false(ok)
    assert.truthy(err:find("engine_spec.lua:" .. (line + 3), 1, true), err)
    assert.has_error(function() engine.set_num_threads(1.5) end)
    assert.has_error(function() engine.set_nan_check(1) end)
    assert.has_error(function() engine.set_num_workers(0) end)
  end)

  it("set_num_threads changes the budget and results stay the same", function()
    local old = engine.get_num_threads()
    local x = nd.ones({ 300000 })
    engine.set_num_threads(1)
    assert.are.equal(1, engine.get_num_threads())
    local a = (x * 3 + 1):sum():item()
    engine.set_num_threads(2)
    local b = (x * 3 + 1):sum():item()
    engine.set_num_threads(old)
    assert.are.equal(a, b)
    assert.are.equal(1200000, a)
  end)

  it("workers and kernel threads block signals: handlers run on the caller's threads", function()
    -- SIGPROF (LuaJIT's profiler), SIGINT and an embedding application's timers are
    -- process-directed; the kernel may hand them to any thread that does not block
    -- them, and a Lua handler must not run on an engine or OpenMP thread
    local f = io.open("/proc/self/task")
    if not f then return end -- not Linux: nothing to read the masks from
    f:close()
    local function tids()
      -- (ls runs in a child: read this process's tasks through its pid)
      local t, st = {}, io.open("/proc/self/stat")
      local pid = st:read("*l"):match("^(%d+)")
      st:close()
      local p = io.popen("ls /proc/" .. pid .. "/task")
      for tid in p:lines() do t[tid] = pid end
      p:close()
      return t
    end
    local before = tids()
    local old_t = engine.get_num_threads()
    -- two more workers than have been started so far: at least two new threads
    local started = math.max(engine.stats().workers, engine.get_num_workers())
    with_engine("threaded", 0, function()
      engine.set_num_threads(2)
      local x = nd.ones({ 2000000 })
      local ys = {}
      for i = 1, 8 do ys[i] = (x * i):sum() end -- queued: run on the workers, 2 threads each
      for i = 1, 8 do assert.are.equal(2000000 * i, ys[i]:item()) end
    end, started + 2)
    engine.set_num_threads(old_t)
    local new = 0
    for tid, pid in pairs(tids()) do
      if not before[tid] and tid ~= pid then
        local s = io.open("/proc/" .. pid .. "/task/" .. tid .. "/status")
        if s then -- (a thread may have exited meanwhile)
          local blk = tonumber(s:read("*a"):match("SigBlk:%s*%x*(%x%x%x%x%x%x%x%x)\n"), 16)
          s:close()
          new = new + 1
          assert.are_not.equal(0, bit.band(blk, bit.lshift(1, 27 - 1)), "SIGPROF reaches thread " .. tid)
          assert.are_not.equal(0, bit.band(blk, bit.lshift(1, 2 - 1)), "SIGINT reaches thread " .. tid)
        end
      end
    end
    assert.is_true(new >= 2, "expected new worker threads, saw " .. new)
  end)
end)

describe("engine at process exit", function()
  -- A script whose last op is still queued when the Lua state closes: libmx must
  -- drain it without deadlocking (LuaJIT unloads the library on close).
  it("a queued GEMM nobody waited for does not hang the exit", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write('local mx = require("mx")\n',
      'local y = mx.nd.dot(mx.nd.ones{64, 784}, mx.nd.ones{784, 256})\n')
    f:close()
    local cmd = string.format("LUA_PATH=%q LUA_CPATH=%q timeout 60 luajit %s; echo rc=$?",
      package.path, package.cpath, script)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    os.remove(script)
    assert.truthy(out:find("rc=0", 1, true), out)
  end)
end)

describe("engine push of any function", function()
  it("tools/hosts/push_fn_test: ordering, async errors, naive mode, free_arg once", function()
    local bin = "build/push_fn_test"
    local f = io.open(bin, "rb")
    assert(f, bin .. " is missing: build with cmake (the push_fn_test target)")
    f:close()
    local p = assert(io.popen(bin .. " 2>&1"))
    local out = p:read("*a")
    local ok = p:close()
    assert.truthy(ok, out)
    for _, check in ipairs({ "ordering", "writer_waits_for_readers", "async_error", "refusal",
      "naive" }) do
      assert.truthy(out:find("ok " .. check, 1, true), out)
    end
    assert.truthy(out:find("my_failing_fn", 1, true), out)
    assert.truthy(out:find("\nPASS\n", 1, true), out)
  end)
end)
