-- dist_async: parameter servers over libzmq, run as real jobs through tools/launch.lua on
-- loopback (scheduler + servers + workers as processes).
local J = require("mx.kvstore.ps_job")

local function run(o, timeout)
  local job = J.start(o)
  local rc = job:wait(timeout or 60)
  local out = job:output()
  job:stop()
  return rc, out, job
end

local function values(out, tag)
  local t = {}
  for r, v in out:gmatch("%[worker (%d+)%] " .. tag .. " ([^\n]*)") do t[tonumber(r)] = v end
  return t
end

describe("dist_async", function()
  it("applies every worker's pushes through the server-side optimizer (2 workers, 1 server)", function()
    local rc, out = run { workers = 2, servers = 1, script = [[
      local mx = require("mx")
      local kv = mx.kv.create("dist_async")
      kv:init(7, mx.nd.zeros({3, 4}))
      kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 1 }))
      for _ = 1, 5 do kv:push(7, mx.nd.ones({3, 4}) * (kv.rank + 1)) end
      kv:barrier()
      local w = mx.nd.zeros({3, 4})
      kv:pull(7, w)
      print("W " .. w:min():item() .. " " .. w:max():item() .. " " .. kv.num_workers)
      kv:close()
    ]] }
    assert.are.equal(0, rc, out)
    local w = values(out, "W")
    -- w = -lr * sum of all pushes = -(5*1 + 5*2)
    assert.are.equal("-15 -15 2", w[0], out)
    assert.are.equal("-15 -15 2", w[1], out)
  end)

  it("cuts a big key across servers and reassembles it in order (2 servers)", function()
    local rc, out = run { workers = 2, servers = 2, env = { MXNET_KVSTORE_BIGARRAY_BOUND = "10" },
      script = [[
      local mx = require("mx")
      local kv = mx.kv.create("dist_async")
      local n = 37
      kv:init("big", mx.nd.arange(0, n):reshape({n}))
      kv:init("small", mx.nd.ones({2}))
      local layout = kv.layouts["big"]
      assert(#layout == 2 and layout[1].srv ~= layout[2].srv, "big key not split")
      kv:push("big", mx.nd.arange(0, n):reshape({n}) * 2)   -- no optimizer: assignment
      kv:barrier()
      local w = mx.nd.zeros({n})
      kv:pull("big", w)
      local ok = true
      local t = w:tolist()
      for i = 1, n do if t[i] ~= 2 * (i - 1) then ok = false end end
      -- several keys in one pull: all requests out before the first answer
      local w2, s2 = mx.nd.zeros({n}), mx.nd.zeros({2})
      kv:pull({ "big", "small" }, { w2, s2 })
      if (w2 - w):abs():max():item() ~= 0 or s2:sum():item() ~= 2 then ok = false end
      print("BIG " .. tostring(ok))
      kv:close()
    ]] }
    assert.are.equal(0, rc, out)
    local b = values(out, "BIG")
    assert.are.equal("true", b[0], out)
    assert.are.equal("true", b[1], out)
  end)

  it("pushes and pulls without a barrier (async) and bounds staleness when asked", function()
    -- worker 1 pushes 10 per step after a delay; worker 0 pushes 1 per step at once:
    -- w after worker 0's i-th step = -(i + 10 j), j = worker 1's pushes seen by then
    local script = [[
      local mx = require("mx")
      local st = tonumber(os.getenv("STALE"))
      local kv = mx.kv.create("dist_async", st and { staleness = st } or nil)
      kv:init(1, mx.nd.zeros({2}))
      kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 1 }))
      local w = mx.nd.zeros({2})
      for i = 1, 4 do
        if kv.rank == 1 then os.execute(i == 1 and "sleep 1" or "sleep 0.3") end
        kv:push(1, mx.nd.ones({2}) * (kv.rank == 0 and 1 or 10))
        kv:pull(1, w)
        if kv.rank == 0 then
          local v = -w:max():item()
          print("SEEN " .. i .. " " .. math.floor((v - i) / 10 + 0.5))
        end
      end
      kv:close()
    ]]
    local rc, out = run { workers = 2, servers = 1, script = script }
    assert.are.equal(0, rc, out)
    local async_seen = out:match("%[worker 0%] SEEN 4 (%d+)")
    assert.are.equal("0", async_seen, out) -- worker 0 never waited for worker 1
    rc, out = run { workers = 2, servers = 1, script = script, env = { STALE = "1" } }
    assert.are.equal(0, rc, out)
    for i, j in out:gmatch("%[worker 0%] SEEN (%d+) (%d+)") do
      -- SSP with bound 1: worker 0 at step i has seen at least i - 1 of worker 1's pushes
      assert.is_true(tonumber(j) >= tonumber(i) - 1, "step " .. i .. " saw " .. j .. "\n" .. out)
    end
    assert.truthy(out:find("SEEN 4"), out)
  end)

  it("saves and restores the servers' optimizer states (same result after a restart)", function()
    local dir = os.tmpname()
    os.remove(dir)
    local script = [[
      local mx = require("mx")
      local dir, phase = os.getenv("DIR"), os.getenv("PHASE")
      local kv = mx.kv.create("dist_async")
      local g1 = mx.nd.array({ 0.5, -1, 2, 0.25 })
      local g2 = mx.nd.array({ -0.3, 0.7, 1.5, -2 })
      if phase == "1" then
        kv:init(0, mx.nd.array({ 1, 2, 3, 4 }))
        kv:set_optimizer(mx.optimizer.create("adam", { learning_rate = 0.1 }))
        kv:push(0, g1)
        local w = mx.nd.zeros({4})
        kv:pull(0, w)
        mx.nd.save(dir .. ".w", { w = w })
        kv:save_optimizer_states(dir .. ".st")
        kv:push(0, g2)
        kv:pull(0, w)
        mx.nd.save(dir .. ".r1", { w = w })
      else
        kv:init(0, mx.nd.load(dir .. ".w").w)
        kv:set_optimizer(mx.optimizer.create("adam", { learning_rate = 0.1 }))
        kv:load_optimizer_states(dir .. ".st")
        kv:push(0, g2)
        local w = mx.nd.zeros({4})
        kv:pull(0, w)
        local r1 = mx.nd.load(dir .. ".r1").w
        print("SAME " .. tostring((w - r1):abs():max():item() == 0))
      end
      kv:close()
    ]]
    local rc, out = run { workers = 1, servers = 1, script = script, env = { DIR = dir, PHASE = "1" } }
    assert.are.equal(0, rc, out)
    rc, out = run { workers = 1, servers = 1, script = script, env = { DIR = dir, PHASE = "2" } }
    assert.are.equal(0, rc, out)
    assert.truthy(out:find("%[worker 0%] SAME true"), out)
    for _, e in ipairs { ".w", ".st", ".r1" } do os.remove(dir .. e) end
  end)

  it("row_sparse pushes and row_sparse_pull over 2 sharded servers: only the touched rows "
    .. "travel, the rows equal the dense path's", function()
    local rc, out = run { workers = 2, servers = 2, env = { MXNET_KVSTORE_BIGARRAY_BOUND = "100" },
      script = [[
      local mx = require("mx")
      local nd = mx.nd
      local kv = mx.kv.create("dist_async")
      local R, D = 1000, 4
      kv:init(100, nd.ones({ R, D }))
      kv:init(101, nd.ones({ R, D }))
      assert(#kv.layouts["100"] == 2 and kv.layouts["100"][2].row0 == 500, "not cut by rows")
      kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 1 }))
      local r = kv.rank
      local ids = { r, 600 + r, 999 }
      local rows = {}
      for i = 1, 3 do rows[i] = { r + 1, r + 1, 2 * (r + 1), i } end
      local g = nd.sparse.row_sparse_array({ rows, ids }, { shape = { R, D } })
      local b0 = kv.bytes_sent
      kv:push(100, g)
      print("SENT " .. (kv.bytes_sent - b0) .. " " .. kv.rows_sent)
      kv:push(101, g:tostype("default"))
      kv:barrier()
      local o = nd.sparse.zeros("row_sparse", { R, D })
      local r0 = kv.bytes_received
      kv:row_sparse_pull(100, o, { row_ids = nd.array({ 601, 0, 999, 5, 600, 1 }) })
      print("RECV " .. (kv.bytes_received - r0) .. " " .. table.concat(o:indices():tolist(), ","))
      local w = nd.zeros({ R, D })
      kv:pull(101, w)
      local all = nd.sparse.zeros("row_sparse", { R, D })
      kv:row_sparse_pull(100, all, { row_ids = nd.arange(0, R) })
      local vals = {}
      for i, v in ipairs(o:data():reshape({ -1 }):tolist()) do vals[i] = string.format("%g", v) end
      print("DIFF " .. (all:tostype("default") - w):abs():max():item() .. " "
        .. table.concat(vals, ","))
      -- a Trainer over an Embedding with sparse gradients: the rows no worker looked up
      -- stay as they were on the servers
      mx.random.seed(3)
      local net = mx.gluon.nn.Embedding(50, 2, { sparse_grad = true })
      net:initialize(mx.init.Normal(1))
      local w0 = net.weight:data():copy()
      local tr = mx.gluon.Trainer(net:collect_params(), "adam", { learning_rate = 0.1 },
        { kvstore = kv })
      for step = 1, 3 do
        local x = nd.array({ { 2 * r, 10 + step } })
        local loss
        mx.autograd.record(function() loss = (net(x) * net(x)):sum() end)
        loss:backward()
        tr:step(1)
      end
      kv:barrier()
      local wt = nd.zeros({ 50, 2 })
      kv:pull(1, wt)
      local moved = {}
      for i = 1, 50 do
        if (wt[i] - w0[i]):abs():max():item() > 0 then moved[#moved + 1] = i - 1 end
      end
      print("MOVED " .. tostring(tr._uok) .. " " .. table.concat(moved, ","))
      kv:close()
    ]] }
    assert.are.equal(0, rc, out)
    for r = 0, 1 do
      -- 3 rows of 4 float32 and their int64 ids: 72 bytes against 16000 for the dense key
      assert.are.equal("72 3", values(out, "SENT")[r], out)
      -- 6 ids asked (48 bytes) and 6 rows (96 bytes) received
      assert.are.equal("96 0,1,5,600,601,999", values(out, "RECV")[r], out)
      -- lr 1 on ones: row 0 got rank 0's (1, 1, 2, 1), row 999 both ranks' sums, row 5
      -- nothing; every row equals the dense key's
      assert.are.equal("0 0,0,-1,0,-1,-1,-3,0,1,1,1,1,0,0,-1,-1,-1,-1,-3,-1,-2,-2,-5,-5",
        values(out, "DIFF")[r], out)
      -- rows 0, 2 (the ranks' 2r) and 11..13 (10 + step) moved, nothing else
      assert.are.equal("true 0,2,11,12,13", values(out, "MOVED")[r], out)
    end
  end)

  it("gives clear errors: no DMLC_ROLE, bad options, no scheduler within the deadline", function()
    local mx = require("mx")
    local ok, err = pcall(mx.kv.create, "dist_async")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("DMLC_ROLE"), err)
    assert.truthy(tostring(err):find("launch.lua"), err)
    local p = io.popen("cd " .. J.sh_quote(J.root) .. " && DMLC_ROLE=worker DMLC_PS_ROOT_URI=127.0.0.1 "
      .. "DMLC_PS_ROOT_PORT=1 DMLC_NUM_WORKER=1 DMLC_NUM_SERVER=1 bin/mx -e "
      .. "'local ok, e = pcall(require(\"mx\").kv.create, \"dist_async\", {stalenes = 1}) print(e) "
      .. "ok, e = pcall(require(\"mx\").kv.create, \"dist_async\", {timeout = 0.5}) print(e)' 2>&1")
    local out = p:read("*a")
    p:close()
    assert.truthy(out:find("unknown option stalenes"), out)
    assert.truthy(out:find("the scheduler %(tcp://127.0.0.1:1%) did not answer registration"), out)
  end)

  it("trains a small MLP with gluon.Trainer over 2 workers + 1 server (loss falls)", function()
    local rc, out = run { workers = 2, servers = 1, script = [[
      local mx = require("mx")
      local gluon = mx.gluon
      local nn = gluon.nn
      mx.random.seed(7)
      -- y = sin(x1) + x2 / 2, each worker its own half of the data
      local kv = mx.kv.create("dist_async")
      local N = 256
      local X = mx.nd.random.uniform(-2, 2, { N, 2 })
      local xs = X:tolist()
      local ys = {}
      for i = 1, N do ys[i] = math.sin(xs[(i - 1) * 2 + 1]) + xs[(i - 1) * 2 + 2] / 2 end
      local Y = mx.nd.array(ys):reshape({ N, 1 })
      local net = nn.Sequential()
      net:add(nn.Dense(32, { activation = "tanh" }))
      net:add(nn.Dense(1))
      net:initialize(mx.init.Xavier())
      local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = 0.02 },
        { kvstore = kv })
      local loss_fn = gluon.loss.L2Loss()
      local first, last
      local B = 32
      for epoch = 1, 30 do
        local total = 0
        for b = kv.rank, N / B - 1, kv.num_workers do
          local x = X[{ { b * B + 1, (b + 1) * B } }]
          local y = Y[{ { b * B + 1, (b + 1) * B } }]
          local L
          mx.autograd.record(function() L = loss_fn(net(x), y) end)
          L:backward()
          trainer:step(B)
          total = total + L:mean():item()
        end
        first = first or total
        last = total
      end
      print(string.format("LOSS %.5f %.5f", first, last))
      kv:close()
    ]] }
    assert.are.equal(0, rc, out)
    local n = 0
    for a, b in out:gmatch("LOSS ([%d.]+) ([%d.]+)") do
      n = n + 1
      -- async updates interleave differently every run: the bound leaves room for that
      -- (seen: last/first 0.05-0.26; an untrained net stays near 1)
      assert.is_true(tonumber(b) < 0.5 * tonumber(a), out)
      assert.is_true(tonumber(b) < 0.1, out)
    end
    assert.are.equal(2, n, out)
  end)

  describe("failures end cleanly", function()
    -- a worker loop that runs for a long while unless something fails
    local LOOP = [[
      io.stdout:setvbuf("line") -- the spec watches the output as it comes
      local mx = require("mx")
      local st = tonumber(os.getenv("STALE"))
      local kv = mx.kv.create("dist_async", st and { staleness = st } or nil)
      kv:init(1, mx.nd.zeros({16}))
      kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 0.01 }))
      local w = mx.nd.zeros({16})
      local clock = require("mx.kvstore.ps_zmq").now
      for i = 1, tonumber(os.getenv("STEPS") or "400") do
        local ok, err = pcall(function()
          kv:push(1, mx.nd.ones({16}))
          kv:pull(1, w)
          if os.getenv("BARRIER") then kv:barrier() end
        end)
        if not ok then
          print(string.format("FAILED %.3f %s", clock(), tostring(err)))
          os.exit(3)
        end
        if i == 5 then print("PID " .. require("mx.kvstore.ps_common").getpid()) end
        os.execute("sleep 0.02")
      end
      print("DONE")
      kv:close()
    ]]

    local function ports(out)
      local t = {}
      for p in out:gmatch("on port (%d+)") do t[#t + 1] = tonumber(p) end
      return t
    end
    local function pids(out)
      local t = {}
      for p in out:gmatch("pid (%d+)") do t[#t + 1] = tonumber(p) end
      for p in out:gmatch("PID (%d+)") do t[#t + 1] = tonumber(p) end
      return t
    end
    local function nothing_left(out)
      for _, p in ipairs(pids(out)) do assert.is_false(J.alive(p), "pid " .. p .. " still alive\n" .. out) end
      local ps = ports(out)
      assert.is_true(#ps >= 2, out)
      for _, p in ipairs(ps) do assert.is_false(J.listening(p), "port " .. p .. " still bound") end
    end
    local function clock()
      return require("mx.kvstore.ps_zmq").now()
    end

    it("kill -9 of the server: every worker errors within 10 s naming it", function()
      local job = J.start { workers = 2, servers = 1, script = LOOP, env = { MX_KV_TIMEOUT = "30" },
        args = "--keep-going" }
      local spid = job:wait_for("%[server 0%][^\n]-pid (%d+)", 30)
      assert.truthy(job:wait_for("%[worker 1%] PID %d+", 30), job:output())
      assert.truthy(job:wait_for("%[worker 0%] PID %d+", 30), job:output())
      local t_kill = clock()
      os.execute("kill -9 " .. spid)
      local rc = job:wait(30)
      local out = job:output()
      job:stop()
      assert.is_not_nil(rc, out)
      assert.are_not.equal(0, rc)
      local n = 0
      for t, msg in out:gmatch("FAILED ([%d.]+) ([^\n]*)") do
        n = n + 1
        assert.is_true(tonumber(t) - t_kill < 10, out)
        assert.truthy(msg:find("server 0 %(tcp://"), msg)
        assert.truthy(msg:find("^[^:]+%.lua:%d+: dist_async worker %d"), msg) -- the user's line
      end
      assert.is_true(n >= 1, out)
      nothing_left(out)
    end)

    it("a hung server (SIGSTOP): requests fail at their deadline naming it", function()
      local job = J.start { workers = 1, servers = 1, script = LOOP, env = { MX_KV_TIMEOUT = "2" } }
      local spid = job:wait_for("%[server 0%][^\n]-pid (%d+)", 30)
      assert.truthy(job:wait_for("%[worker 0%] PID %d+", 30), job:output())
      local t_stop = clock()
      os.execute("kill -STOP " .. spid)
      local rc = job:wait(30)
      local out = job:output()
      os.execute("kill -9 " .. spid .. " 2>/dev/null")
      job:stop()
      assert.are_not.equal(0, rc, out)
      local t, msg = out:match("FAILED ([%d.]+) ([^\n]*)")
      assert.truthy(msg, out)
      assert.truthy(msg:find("server 0 %(tcp://127%.0%.0%.1:%d+%) did not answer P[UL][SL][HL] of key 1 "
        .. "within 2 s %(MX_KV_TIMEOUT / opts%.timeout%)"), msg)
      assert.is_true(tonumber(t) - t_stop < 5, out)
    end)

    it("kill -9 of one of 4 workers (async): the others finish", function()
      local job = J.start { workers = 4, servers = 1, script = LOOP, env = { STEPS = "150" },
        args = "--keep-going" }
      local wpid = job:wait_for("%[worker 2%] PID (%d+)", 30)
      os.execute("kill -9 " .. wpid)
      local rc = job:wait(60)
      local out = job:output()
      job:stop()
      assert.are.equal(137, rc, out) -- the first failure: the killed worker (128 + 9)
      for _, r in ipairs { 0, 1, 3 } do
        assert.truthy(out:find("%[worker " .. r .. "%] DONE"), out)
      end
      assert.truthy(out:find("worker 2 disconnected without a goodbye"), out)
      nothing_left(out)
    end)

    for _, mode in ipairs { "staleness", "barrier" } do
      it("kill -9 of one of 4 workers (" .. mode .. "): the others error within 10 s naming it", function()
        local env = mode == "staleness" and { STALE = "2" } or { BARRIER = "1" }
        local job = J.start { workers = 4, servers = 1, script = LOOP, env = env,
          args = "--keep-going" }
        local wpid = job:wait_for("%[worker 2%] PID (%d+)", 30)
        for _, r in ipairs { 0, 1, 3 } do
          assert.truthy(job:wait_for("%[worker " .. r .. "%] PID %d+", 30), job:output())
        end
        local t_kill = clock()
        os.execute("kill -9 " .. wpid)
        local rc = job:wait(30)
        local out = job:output()
        job:stop()
        assert.is_not_nil(rc, out)
        assert.are_not.equal(0, rc)
        local n = 0
        for r, t, msg in out:gmatch("%[worker (%d)%] FAILED ([%d.]+) ([^\n]*)") do
          n = n + 1
          assert.are_not.equal("2", r)
          assert.is_true(tonumber(t) - t_kill < 10, out)
          assert.truthy(msg:find("worker 2"), msg)
          assert.truthy(msg:find("^/tmp/[^:]+%.lua:%d+: dist_async worker %d"), msg) -- the user's line
        end
        assert.is_true(n >= 1, out)
        nothing_left(out)
      end)
    end
  end)
end)
