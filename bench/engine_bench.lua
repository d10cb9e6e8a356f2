-- bench/engine_bench.lua — the dependency engine's costs, peer:
-- bench/engine_bench.py (PyTorch eager). Run both in one command, alternating:
--   for p in 1 2 3; do luajit bench/engine_bench.lua; /usr/bin/python3 bench/engine_bench.py; done
-- (MX_BUILD=build dir, default build; --quick for a smoke run; --sweep for the
-- inline-threshold sweep.) Each result is printed once per engine mode: note
-- "threaded" is the default engine (fast path on, 1 CPU worker), "threaded_2workers"
-- the same with MX_CPU_WORKER_NTHREADS=2, "naive" the synchronous engine.
--   add1_new / add1_out     1-element add, new result / out= (ns per call)
--   chain1000               1000 dependent 1-element adds then a sync (ns per op)
--   indep1000_64k           1000 independent 64k-element ops then a sync (ns per op)
--   two_chains_ratio_*      time(two independent chains of in-place ops) / time(one):
--                           1.0 = perfectly parallel on 2 cores, 2.0 = serial
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd = mx.nd
local engine = mx.engine

local A = H.args(arg)
local Q = A.quick and 0.1 or 1
H.env_note()

local function run_mode(mode, workers)
  engine.set(mode)
  engine.set_num_workers(workers or 1)
  local note = mode .. (workers and workers > 1 and ("_" .. workers .. "workers") or "")
  local add = nd.add

  do -- 1-element add: new result and out=
    local a, b, c = nd.array({ 1 }), nd.array({ 2 }), nd.array({ 0 })
    local t = H.time(function(n)
      local r
      for _ = 1, n do r = add(a, b) end
      return r
    end, { n = math.floor(1e6 * Q), reps = 5 })
    H.report("add1_new", t.median, "ns/call", { note = note })
    local o = { out = c }
    t = H.time(function(n)
      for _ = 1, n do add(a, b, o) end
    end, { n = math.floor(1e6 * Q), reps = 5 })
    H.report("add1_out", t.median, "ns/call", { note = note })
  end

  do -- a chain of 1000 dependent 1-element ops
    local t = H.time(function(n)
      for _ = 1, n do
        local x = nd.array({ 0 })
        for _ = 1, 1000 do x = x + 1 end
        x:wait_to_read()
      end
    end, { n = math.max(1, math.floor(200 * Q)), reps = 5 })
    H.report("chain1000", t.median / 1000, "ns/op", { note = note })
  end

  do -- 1000 independent 64k-element ops (8 inputs, results dropped)
    local ins = {}
    for i = 1, 8 do ins[i] = nd.full({ 65536 }, i) end
    local t = H.time(function(n)
      for _ = 1, n do
        for i = 1, 1000 do
          nd.mul_scalar(ins[i % 8 + 1], { scalar = 2 }) -- the result is dropped
        end
        nd.waitall()
      end
    end, { n = math.max(1, math.floor(5 * Q)), reps = 5 })
    H.report("indep1000_64k", t.median / 1000, "ns/op", { note = note })
  end

  -- two independent chains vs one: 64k-element ops run single-threaded (below the
  -- kernels' parallel grain), so the engine's workers are the only parallelism;
  -- 1M-element ops already use both cores inside each op (memory-bound), so a
  -- second chain cannot overlap much in any mode
  for _, M in ipairs { 65536, 1000000 } do
    local L = math.max(10, math.floor((M == 65536 and 1000 or 100) * Q))
    local a, b = nd.ones({ M }), nd.ones({ M })
    local function chain(x) nd.mul_scalar(x, { scalar = 1.0000001, out = x }) end
    local t1 = H.time(function(n)
      for _ = 1, n do
        for _ = 1, L do chain(a) end
        nd.waitall()
      end
    end, { n = 1, reps = 5 })
    local t2 = H.time(function(n)
      for _ = 1, n do
        for _ = 1, L do chain(a) chain(b) end
        nd.waitall()
      end
    end, { n = 1, reps = 5 })
    local tag = M == 65536 and "64k" or "1M"
    H.report("two_chains_ratio_" .. tag, t2.median / t1.median, "ns/ns (2 chains / 1)",
      { note = note })
    H.report("one_chain_op_" .. tag, t1.median / L, "ns/op", { note = note })
  end
end

-- Inline threshold sweep: independent ops of n elements (in + out = 2n), all inline
-- vs all queued; where queuing starts to win is where inline_max should sit.
local function sweep()
  engine.set("threaded")
  local old = engine.get_inline_max()
  for _, n in ipairs { 1024, 4096, 8192, 16384, 32768, 65536 } do
    local ins = {}
    for i = 1, 8 do ins[i] = nd.full({ n }, i) end
    local outs = {}
    for i = 1, 64 do outs[i] = nd.zeros({ n }) end
    for _, mode in ipairs { "inline", "queued" } do
      engine.set_inline_max(mode == "inline" and 1e15 or 0)
      local t = H.time(function(k)
        for j = 1, k do
          nd.mul_scalar(ins[j % 8 + 1], { scalar = 2, out = outs[j % 64 + 1] })
        end
        nd.waitall()
      end, { n = math.floor(2000 * Q), reps = 5 })
      H.report("sweep_" .. n, t.median, "ns/op", { note = mode })
    end
  end
  engine.set_inline_max(old)
end

if A.sweep then
  sweep()
else
  run_mode("threaded")
  run_mode("threaded", 2)
  run_mode("naive")
  engine.set("threaded")
  engine.set_num_workers(1)
end
