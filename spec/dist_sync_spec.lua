-- dist_sync kvstore over Open MPI (lua/mx/kvstore/dist_sync.lua, core/dist/mpi.c):
-- 1-4 rank jobs on loopback through tools/dist/mxrun, every run under timeout(1).
local mx = require("mx")

local ROOT = "."
local function sh(cmd)
  -- LuaJIT's popen:close() gives no exit status: the command echoes it
  local p = assert(io.popen(cmd .. '; echo "EXIT=$?"'))
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("EXIT=(%d+)%s*$"))
  return out, rc
end

local function have_mpi()
  local f = io.open(ROOT .. "/build/lib/mx/libmx_mpi.so", "rb")
  if f then f:close() end
  local _, rc = sh("command -v mpirun >/dev/null 2>&1")
  return f ~= nil and rc == 0
end
local it_mpi = have_mpi() and it or pending

local function now()
  local f = io.popen("date +%s.%N")
  local t = tonumber(f:read("*a"))
  f:close()
  return t
end

-- runs N ranks of tools/dist/worker.lua; returns {rank -> {lines}}, rc, output, seconds
local function job(n, args, env, limit)
  local tag = "mxtag" .. math.random(1e9)
  local t0 = now()
  local out, rc = sh(string.format("%s timeout -k 5 %d tools/dist/mxrun %d tools/dist/worker.lua %s %s 2>&1",
    env or "", limit or 60, n, args, tag))
  local dt = now() - t0
  local res = {}
  for r, text in out:gmatch("RESULT (%d+) ([^\n]*)") do
    r = tonumber(r)
    res[r] = res[r] or {}
    table.insert(res[r], text)
  end
  return res, rc, out, dt, tag
end

local function find(lines, pat)
  for _, l in ipairs(lines or {}) do
    local a, b, c = l:match(pat)
    if a then return a, b, c end
  end
end

local function gone(pid)
  local f = io.open("/proc/" .. pid .. "/stat", "rb")
  if f then f:close() return false end
  return true
end

describe("dist_sync", function()
  it("rejects bad options before touching MPI", function()
    assert.has_error(function() mx.kv.create("dist_sync", { bogus = 1 }) end)
    local ok, err = pcall(mx.kv.create, "dist_sync", { timeout = -1 })
    assert.is_false(ok)
    assert.matches("timeout must be a number of seconds", err)
    ok, err = pcall(mx.kv.create, "dist_sync", { bucket_mb = 0 })
    assert.is_false(ok)
    assert.matches("bucket_mb must be a positive number", err)
    -- leave no loaded backend behind (kvstore_spec stubs it through package.preload)
    package.loaded["mx.kvstore.dist_sync"] = nil
  end)

  for _, n in ipairs({ 1, 2, 3 }) do
    it_mpi("init, push, pull, pushpull, broadcast, allreduce, set_optimizer and 2-bit compression on "
      .. n .. " rank(s)", function()
      local res, rc, out = job(n, "basic")
      assert.are.equal(0, rc, out)
      -- each rank's contribution is a known function of its rank: the sums, computed here
      local s1, sr = 0, 0
      for r = 0, n - 1 do s1 = s1 + (r + 1); sr = sr + r end
      for r = 0, n - 1 do
        local lines = res[r]
        assert.is_not_nil(lines, out)
        assert.are.equal(tostring(n), find(lines, "^size (%d+)"))
        assert.are.equal("1,2,3", find(lines, "^init (.*)$"))         -- rank 0's value
        assert.are.equal(string.format("%d,%d,%d", sr, 2 * sr, n), find(lines, "^push (.*)$"))
        local pp = {}
        for k = 1, 5 do pp[k] = tostring(s1 * k) end
        assert.are.equal(table.concat(pp, ","), find(lines, "^pushpull (.*)$"))
        assert.are.equal(0.5 * s1, tonumber(find(lines, "^f16 (.*)$")))
        assert.are.equal("10,20", find(lines, "^broadcast (.*)$"))
        assert.are.equal(string.format("%.6f", 1 - 0.1 * s1), find(lines, "^sgd (.*)$"))
        -- 0.7 -> 0.5, -0.7 -> -0.5, 0.2 -> 0, 1.2 -> 0.5 per worker, then summed
        local q = { 0.5 * n, -0.5 * n, 0, 0.5 * n }
        local got = {}
        for v in find(lines, "^2bit (.*)$"):gmatch("[^,]+") do got[#got + 1] = tonumber(v) end
        assert.are.same(q, got)
        local d3 = string.format("%d,%d,%d", 3 * n, 3 * n, 3 * n)
        assert.are.equal(d3 .. " " .. d3, find(lines, "^device (.*)$"))
        assert.is_not_nil(find(lines, "^(done)"))
      end
    end)
  end

  for _, uok in ipairs({ true, false }) do
    it_mpi("gluon.Trainer with kvstore='dist_sync', update_on_kvstore=" .. tostring(uok)
      .. ": the update of the summed gradients of every rank, on every rank", function()
      local res, rc, out = job(3, "trainer " .. tostring(uok))
      assert.are.equal(0, rc, out)
      local w0 = find(res[0], "^weights (.*)$")
      assert.is_not_nil(w0, out)
      for r = 0, 2 do
        assert.are.equal(find(res[r], "^expected (.*)$"), find(res[r], "^weights (.*)$"))
        assert.are.equal(w0, find(res[r], "^weights (.*)$"))
      end
    end)
  end

  for _, n in ipairs({ 2, 3 }) do
    it_mpi("row_sparse pushes on " .. n .. " ranks: only the stored rows move, the sum and the "
      .. "lazy update equal the dense path, row_sparse_pull, a Trainer with sparse gradients",
      function()
      local res, rc, out = job(n, "sparse")
      assert.are.equal(0, rc, out)
      for r = 0, n - 1 do
        local lines = res[r]
        assert.are.equal("0", find(lines, "^rsp_sum_mismatches (%d+)"), out)
        -- one int64 row count per rank, then each rank's 3 row ids (int64) and 3 rows of
        -- 4 float32: 8n + n (24 + 48) bytes, against 16000 for the dense key
        local moved, dense = find(lines, "^rsp_bytes (%d+) dense_bytes (%d+)")
        assert.are.equal(8 * n + n * 72, tonumber(moved), out)
        assert.are.equal(16000, tonumber(dense))
        assert.are.equal("0", find(lines, "^rsp_vs_dense (.*)$"))
        -- lazy SGD (lr 0.1) on ones: row 0 got rank 0's 1, row 500 every rank's r + 1
        local ids, vals = find(lines, "^rsp_pull ([^|]*) | (.*)$")
        assert.are.equal("0,500,999", ids)
        local v = {}
        for x in vals:gmatch("[^,]+") do v[#v + 1] = tonumber(x) end
        local s = n * (n + 1) / 2
        assert.are.equal(12, #v)
        assert.is_true(math.abs(v[1] - 0.9) < 1e-6 and math.abs(v[5] - (1 - 0.1 * s)) < 1e-6
          and v[9] == 1, vals)
        assert.are.equal("true", find(lines, "^trainer_uok (.*)$"))
        assert.are.equal(find(lines, "^expected (.*)$"), find(lines, "^weights (.*)$"))
        assert.are.equal(find(res[0], "^weights (.*)$"), find(lines, "^weights (.*)$"))
        assert.is_not_nil(find(lines, "^(done)$"), out)
      end
    end)
  end

  it_mpi("a SIGKILLed rank of 4: every survivor fails naming it within 10 s, nothing is left behind",
    function()
      local res, rc, out, dt, tag = job(4, "kill 2", nil, 60)
      assert.is_true(dt < 10, "the job took " .. dt .. " s:\n" .. out)
      assert.are.equal(137, rc, out) -- mxrun: the worst rank status (SIGKILL)
      assert.is_not_nil(find(res[2], "^(dying)"), out)
      for _, r in ipairs({ 0, 1, 3 }) do
        local msg = find(res[r], "^error (.*)$")
        assert.is_not_nil(msg, "rank " .. r .. " reported no error:\n" .. out)
        assert.matches("lost rank 2", msg)
        assert.is_nil(find(res[r], "^(finished)"))
      end
      -- no process of the job remains (the ranks, their shims, mpirun) ...
      for r = 0, 3 do
        local pid = find(res[r], "^pid (%d+)")
        assert.is_not_nil(pid, out)
        assert.is_true(gone(pid), "rank " .. r .. " (pid " .. pid .. ") is still running")
      end
      local left = sh("pgrep -f " .. tag .. " | grep -v $$")
      assert.are.equal("", (left:gsub("EXIT=%d+%s*$", "")), "processes left: " .. left)
      -- ... and no socket of theirs is bound: the mesh's listening sockets closed at init,
      -- its connections with the processes
      local pids = {}
      for r = 0, 3 do pids[#pids + 1] = "pid=" .. find(res[r], "^pid (%d+)") .. "," end
      local ss = sh("ss -tanp 2>/dev/null")
      for _, p in ipairs(pids) do assert.is_nil(ss:find(p, 1, true), "a socket of " .. p .. " remains") end
    end)

  it_mpi("a deadline: a rank that stalls makes the others fail with a timeout, not a hang",
    function()
      local res, rc, out, dt = job(3, "stall", "MX_KV_TIMEOUT=1", 60)
      assert.is_true(dt < 10, out)
      assert.are_not.equal(0, rc, out)
      local timed_out = 0
      for r = 0, 2 do
        local msg = find(res[r], "^error (.*)$")
        assert.is_not_nil(msg, "rank " .. r .. ":\n" .. out)
        if msg:find("timed out after 1.0 s", 1, true) then timed_out = timed_out + 1 end
      end
      assert.is_true(timed_out >= 1, out)
    end)

  for _, what in ipairs({ "init", "push", "pushpull" }) do
    it_mpi("ranks that disagree on a key's shape (" .. what .. "): the same clear error on every "
      .. "rank, no MPI abort, the communicator still works", function()
      local res, rc, out = job(2, "mismatch " .. what, nil, 60)
      assert.are.equal(0, rc, out)
      assert.is_nil(out:find("MPI_ERR", 1, true), out)
      local core = {}
      for r = 0, 1 do
        local msg = find(res[r], "^error (.*)$")
        assert.is_not_nil(msg, "rank " .. r .. ":\n" .. out)
        -- the position is the worker's own line
        assert.matches("^[^ ]*worker%.lua:%d+: KVStore:%a+: ", msg)
        if what == "init" then
          assert.matches("broadcast of key 'w': the ranks disagree on its shape: rank 0 %(3,%) "
            .. "float32, rank 1 %(4,%) float32; no rank ran it", msg)
        else
          assert.matches("rank 1 stopped before this collective: KVStore:%a+: key 'w' has shape "
            .. "%(3,%) but value 1 has shape %(4,%); no rank ran it", msg)
        end
        core[r] = msg:match("(dist_sync:? %a.-no rank ran it)")
        assert.is_not_nil(core[r], msg)
        assert.are.equal("3,3", find(res[r], "^after (.*)$"))
        assert.is_not_nil(find(res[r], "^(done)$"), out)
      end
      assert.are.equal(core[0], core[1])
    end)
  end

  it_mpi("training: same weights on every rank, bitwise the same on a second run", function()
    local tmp = os.tmpname()
    local args = "--data synthetic --epochs 1 --hidden 16 --kvstore dist_sync --quiet --noise 0.1"
    local function run(tagn)
      local out, rc = sh(string.format("timeout -k 5 60 tools/dist/mxrun 2 examples/dist_train.lua %s "
        .. "--out %s.%s.%%d.params 2>&1", args, tmp, tagn))
      assert.are.equal(0, rc, out)
    end
    run("a")
    run("b")
    local function bytes(p)
      local f = assert(io.open(p, "rb"))
      local s = f:read("*a")
      f:close()
      os.remove(p)
      return s
    end
    local a0, a1 = bytes(tmp .. ".a.0.params"), bytes(tmp .. ".a.1.params")
    local b0 = bytes(tmp .. ".b.0.params")
    bytes(tmp .. ".b.1.params")
    os.remove(tmp)
    assert.is_true(#a0 > 1000)
    assert.is_true(a0 == a1, "rank 0 and rank 1 hold different weights")
    assert.is_true(a0 == b0, "two runs gave different weights")
  end)

  it_mpi("data parallel on 2 ranks scores like 1 process with the same global batch", function()
    local args = "--data synthetic --epochs 3 --hidden 32 --batch-size 64 --quiet"
    local o1, rc1 = sh("timeout -k 5 60 bin/mx examples/dist_train.lua " .. args .. " 2>&1")
    assert.are.equal(0, rc1, o1)
    local o2, rc2 = sh("timeout -k 5 60 tools/dist/mxrun 2 examples/dist_train.lua " .. args
      .. " --kvstore dist_sync 2>&1")
    assert.are.equal(0, rc2, o2)
    local a1 = tonumber(o1:match("RESULT 0 acc ([%d.]+)"))
    local a2 = tonumber(o2:match("RESULT 0 acc ([%d.]+)"))
    assert.is_true(a1 > 0.6, o1)
    assert.is_true(math.abs(a1 - a2) < 0.01, string.format("1 process %.4f, 2 ranks %.4f", a1, a2))
  end)

  it_mpi("data parallel on 2 ranks: after 10 steps the weights of 1 process up to rounding", function()
    local tmp = os.tmpname()
    local args = "--data synthetic --epochs 1 --train-size 640 --hidden 32 --batch-size 64 --quiet"
    local o1, rc1 = sh("timeout -k 5 60 bin/mx examples/dist_train.lua " .. args .. " --out " .. tmp
      .. ".one 2>&1")
    assert.are.equal(0, rc1, o1)
    local o2, rc2 = sh("timeout -k 5 60 tools/dist/mxrun 2 examples/dist_train.lua " .. args
      .. " --kvstore dist_sync --out " .. tmp .. ".two 2>&1")
    assert.are.equal(0, rc2, o2)
    local a, b = mx.nd.load(tmp .. ".one"), mx.nd.load(tmp .. ".two")
    os.remove(tmp .. ".one")
    os.remove(tmp .. ".two")
    os.remove(tmp)
    local n, worst = 0, 0
    for name, t in pairs(a) do
      n = n + 1
      local x, y = t:reshape({ -1 }):tolist(), b[name]:reshape({ -1 }):tolist()
      for i = 1, #x do
        worst = math.max(worst, math.abs(x[i] - y[i]))
      end
    end
    assert.are.equal(6, n)
    assert.is_true(worst < 1e-4, "max difference " .. worst)
  end)
end)
