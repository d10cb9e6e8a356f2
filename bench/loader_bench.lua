-- bench/loader_bench.lua — DataLoader throughput with worker threads.
--   luajit bench/loader_bench.lua [--batches=300] [--batch=64] [--workers=0,1,2] [--quick]
-- Fashion-MNIST's training split (Debian's dataset-fashion-mnist) with ToTensor +
-- Normalize applied per sample (a closure, so the loader takes the per-sample path:
-- ds:get(i) then batchify, not the batched gather), shuffled, batch 64. Reports
--   loader_fmnist_w<N>      batches/s over --batches batches (after a warm-up pass of
--                           20 batches on the same loader: the worker threads are up)
--   loader_start_w<N>       ms from iter() of a fresh loader to its first batch (worker
--                           states starting, rebuilding the dataset)
--   loader_main_cpu_w<N>    the main thread's CPU time per batch (us): with workers it
--                           only hands out index lists and takes batches back
-- The main thread only waits on the result queue; each worker runs get + transform +
-- stack. Intra-op threads are set to 1 (--threads) so workers are the parallelism.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A = H.mx_setup(arg)
local data = mx.gluon.data
local T = data.vision.transforms
local ffi = require("ffi")
local cts = ffi.new("mx_bench_timespec") -- declared by the harness
local function thread_cpu() -- CLOCK_THREAD_CPUTIME_ID
  ffi.C.clock_gettime(3, cts)
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end

H.env_note()
local nb = A.quick and 30 or (A.batches or 300)
local bs = A.batch or 64
local workers = {}
for w in tostring(A.workers or "0,1,2"):gmatch("%d+") do workers[#workers + 1] = tonumber(w) end

local ok, fm = pcall(data.vision.FashionMNIST, { train = true })
if not ok then
  io.write("# skipped: ", tostring(fm), "\n")
  return
end
local tf = T.Compose { T.ToTensor(), T.Normalize(0.286, 0.353) }
local ds = fm:transform_first(function(x) return tf(x) end) -- per sample

for _, nw in ipairs(workers) do
  local loader = data.DataLoader(ds, { batch_size = bs, shuffle = true, num_workers = nw,
    last_batch = "discard" })
  local t0 = H.now()
  local k = 0
  for _ in loader:iter() do
    if k == 0 then
      H.report("loader_start_w" .. nw, (H.now() - t0) * 1e3, "ms", { note = "first batch" })
    end
    k = k + 1
    if k == 20 then break end
  end
  local rates, cpus = {}, {}
  for rep = 1, A.quick and 1 or 3 do
    collectgarbage()
    k = 0
    local t, c = H.now(), thread_cpu()
    for x, y in loader:iter() do
      k = k + 1
      if k == 1 then assert(x:shape()[1] == bs and y:shape()[1] == bs) end
      if k == nb then break end
    end
    rates[rep] = k / (H.now() - t)
    cpus[rep] = (thread_cpu() - c) / k * 1e6
  end
  table.sort(rates)
  table.sort(cpus)
  H.report("loader_fmnist_w" .. nw, rates[math.floor((#rates + 1) / 2)], "batches/s",
    { note = string.format("batch %d, ToTensor+Normalize per sample, %d batches", bs, nb) })
  H.report("loader_main_cpu_w" .. nw, cpus[math.floor((#cpus + 1) / 2)], "us/batch",
    { note = "main thread CPU per batch" })
  loader:close()
end
