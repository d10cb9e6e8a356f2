-- bench/matmul_bench.lua — f32 square matmul GFLOP/s of luamx (peer:
-- bench/matmul_bench.py, torch.mm). Sizes 256, 1024, 2048; threads from --threads.
--   luajit bench/matmul_bench.lua [--threads=1] [--sizes=256,1024,2048] [--quick]
-- Reports bench "mm<n>" in GFLOP/s (2 n^3 flops per call), median over reps.
-- OPENBLAS_CORETYPE is left as the environment sets it: bench/run_all.sh runs this
-- twice (as set, and with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE`).
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local sizes = {}
for s in tostring(A.sizes or "256,1024,2048"):gmatch("%d+") do sizes[#sizes + 1] = tonumber(s) end
local sync = nd.waitall or function() end
local ct = os.getenv("OPENBLAS_CORETYPE")
local note = string.format("threads=%d coretype=%s", threads, ct or "unset")
H.env_note()

local mm = nd.matmul or nd.dot
if not mm then
  io.write("# no matmul/dot op in this build: skipped\n")
  return
end
for _, n in ipairs(sizes) do
  local a = nd.full({ n, n }, 0.5)
  local b = nd.full({ n, n }, 0.25)
  local c = nd.zeros { n, n }
  local o = { out = c }
  local iters = math.max(1, math.floor(2e9 / (2 * n ^ 3) * (threads == 1 and 1 or 2)))
  if A.quick then iters = 1 end
  local t = H.time(function(k)
    for _ = 1, k do mm(a, b, o) end
    sync()
  end, { n = iters, reps = A.quick and 2 or 5, warmup = 1 })
  H.report("mm" .. n, 2 * n ^ 3 / t.median, "GFLOP/s", { note = note })
end
