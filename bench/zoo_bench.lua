-- bench/zoo_bench.lua — inference of the MXNet vision zoo's networks, hybridized, random
-- weights, at batch 1 and 8 (milliseconds per forward, median of the reps: wall time, and
-- the process's CPU time, which a shared machine's load inflates less); peers:
-- bench/zoo_bench.py (MXNet 1.9.1 hybridized with static_alloc, PyTorch eager under
-- inference_mode). bench/zoo_run.sh alternates the three and writes the table.
--   LUA_PATH="bench/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/lib/?.so;;" \
--     luajit bench/zoo_bench.lua [--threads=2] [--nets=resnet50_v1,mobilenet1.0] \
--       [--batches=1,8] [--reps=5]
local H = require("harness")
local ffi = require("ffi")
local mx, A, threads = H.mx_setup(arg)
pcall(ffi.cdef, "typedef struct { long tv_sec; long tv_nsec; } mx_bench_timespec;"
  .. "int clock_gettime(int clk, mx_bench_timespec *ts);")
local cts = ffi.new("mx_bench_timespec")
local function cpu_now() -- the process's CPU time (CLOCK_PROCESS_CPUTIME_ID)
  ffi.C.clock_gettime(2, cts)
  return tonumber(cts.tv_sec) + tonumber(cts.tv_nsec) * 1e-9
end
local vision = mx.gluon.model_zoo.vision
H.env_note()

local NETS = { "resnet18_v1", "resnet50_v1", "resnet18_v2", "resnet50_v2", "vgg11_bn",
  "alexnet", "densenet121", "squeezenet1.0", "squeezenet1.1", "inceptionv3", "mobilenet1.0",
  "mobilenet0.25", "mobilenetv2_1.0", "mobilenetv2_0.25" }
local function list(s, conv)
  local r = {}
  for v in tostring(s):gmatch("[^,]+") do r[#r + 1] = conv and conv(v) or v end
  return r
end
if A.nets then NETS = list(A.nets) end
local BATCHES = A.batches and list(A.batches, tonumber) or { 1, 8 }
local reps = A.reps or 5

for _, name in ipairs(NETS) do
  mx.random.seed(7)
  local net = vision.get_model(name)
  net:initialize(mx.init.Xavier({ magnitude = 2 }))
  net:hybridize({ static_alloc = true, static_shape = true })
  local sz = name == "inceptionv3" and 299 or 224
  for _, b in ipairs(BATCHES) do
    local x = mx.nd.random.uniform(0, 1, { b, 3, sz, sz })
    local k = b == 1 and 2 or 1
    for _ = 1, 2 do net(x):wait_to_read() end
    local wall, cpu = {}, {}
    for r = 1, reps do
      collectgarbage()
      local w0, c0 = H.now(), cpu_now()
      for _ = 1, k do net(x):wait_to_read() end
      wall[r], cpu[r] = (H.now() - w0) * 1e3 / k, (cpu_now() - c0) * 1e3 / k
    end
    H.report(string.format("%s_b%d", name, b), H.median(wall), "ms", { note = "threads=" .. threads })
    H.report(string.format("%s_b%d", name, b), H.median(cpu), "cpu_ms",
      { note = "threads=" .. threads })
  end
  net = nil -- luacheck: ignore
  collectgarbage()
end
