-- bench/gpu_bench.lua — luamx on gpu(0): 1-element add latency and elementwise
-- add bandwidth at 1 M and 100 M float32 elements (peer: bench/gpu_bench.py).
--   luajit bench/gpu_bench.lua [--quick]      (MX_BUILD=build dir with libmx_cuda)
-- Kernels run on CUDA's legacy default stream; a 1-element device->host copy at
-- the end of each timed loop waits for all of them.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd = mx.nd

local A = H.args(arg)
if mx.num_gpus() == 0 then
  io.write("# no GPU: ", require("ffi").string(require("mx.core.lib").C.mx_gpu_status()), "\n")
  return
end
local gpu, cpu = mx.gpu(0), mx.cpu()
local waitall = nd.waitall or function() end
local z = nd.zeros({ 1 }, { ctx = gpu })
local function sync()
  waitall()
  return z:to(cpu) -- a blocking copy on the same stream: everything before it is done
end
H.env_note()

do
  local a, b = nd.ones({ 1 }, { ctx = gpu }), nd.ones({ 1 }, { ctx = gpu })
  local c = nd.zeros({ 1 }, { ctx = gpu })
  local add = nd.add
  local t = H.time(function(n)
    local r
    for _ = 1, n do r = add(a, b) end
    sync()
    return r
  end, { n = A.quick and 1000 or 20000 })
  H.report("gpu_add1_new", t.median, "ns/call", { note = "gpu(0)" })
  local o = { out = c }
  t = H.time(function(n)
    for _ = 1, n do add(a, b, o) end
    sync()
  end, { n = A.quick and 1000 or 20000 })
  H.report("gpu_add1_out", t.median, "ns/call", { note = "gpu(0)" })
end

for _, M in ipairs { 1000000, 100000000 } do
  local a, b = nd.ones({ M }, { ctx = gpu }), nd.ones({ M }, { ctx = gpu })
  local c = nd.zeros({ M }, { ctx = gpu })
  local o = { out = c }
  local iters = M >= 1e8 and 20 or 2000
  if A.quick then iters = math.ceil(iters / 10) end
  local t = H.time(function(n)
    for _ = 1, n do nd.add(a, b, o) end
    sync()
  end, { n = iters, reps = 5 })
  local label = M >= 1e8 and "100M" or "1M"
  H.report("gpu_add" .. label .. "_out", 12 * M / t.median, "GB/s", { note = "gpu(0) f32" })
  -- correctness spot check of the result
  local v = c:to(cpu):tolist()
  assert(v[1] == 2 and v[M] == 2, "gpu add gave wrong values")
end
