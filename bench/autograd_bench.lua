-- bench/autograd_bench.lua — autograd costs; peer: bench/autograd_bench.py
-- (PyTorch eager autograd). Run both in one command, alternating:
--   for p in 1 2 3; do luajit bench/autograd_bench.lua --threads=1; \
--     /usr/bin/python3 bench/autograd_bench.py --threads=1; done > bench/out/ag_raw.txt
--   python3 bench/compare.py bench/out/ag_raw.txt
-- (MX_BUILD=build dir, default build; --quick for a smoke run; --only=mlp|add.) The add
-- part runs first: after the MLP part the binding's handle sweep walks more slots and
-- 1-element timings rise. Results:
--   mlp_fwd_bwd        (ms) 2-layer MLP 784-256-10 (ReLU, sum of squares loss): forward +
--                      backward of W1, b1, W2, b2, per iteration, at batch 1 and 64
--   add1_plain         1-element f32 add, a requires grad, not recording (ns/call)
--   add1_record        the same add under record, result dropped (ns/call)
--   add1_record_chain  100 chained adds under record then backward, recording part
--                      only (ns per add)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd, ag = mx.nd, mx.autograd

local A = H.args(arg)
local threads = A.threads or 1
local Q = A.quick and 0.05 or 1
require("mx.core.lib").C.mx_set_num_threads(threads)
local note = "threads=" .. threads
H.env_note()

local function randn(shape, scale)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  local t = {}
  for i = 1, n do t[i] = (math.random() * 2 - 1) * scale end
  return nd.array(t):reshape(shape)
end

if not A.only or A.only == "add" then -- recording overhead on a 1-element add
  local a, b = nd.array { 1 }, nd.array { 2 }
  a:attach_grad()
  local add = nd.add
  local N = math.floor(3e5 * Q)
  local t = H.time(function(n)
    for _ = 1, n do add(a, b) end
  end, { n = N, reps = 5 })
  H.report("add1_plain", t.median, "ns/call", { note = note })
  t = H.time(function(n)
    local prev = ag.set_recording(true)
    for _ = 1, n do add(a, b) end
    ag.set_recording(prev)
  end, { n = N, reps = 5 })
  H.report("add1_record", t.median, "ns/call", { note = note })
  -- chains of 100 recorded adds, each freed by a backward; only recording is timed
  local K, R = 100, math.max(1, math.floor(2000 * Q))
  local samples = {}
  for rep = 1, 5 do
    local tr = 0
    for _ = 1, R do
      local t0 = H.now()
      local prev = ag.set_recording(true)
      local c = a
      for _ = 1, K do c = add(c, b) end
      ag.set_recording(prev)
      tr = tr + H.now() - t0
      c:backward()
    end
    samples[rep] = tr * 1e9 / (R * K)
  end
  H.report("add1_record_chain", H.median(samples), "ns/add", { note = note })
end

if not A.only or A.only == "mlp" then -- MLP forward + backward
  math.randomseed(1)
  local W1, b1 = randn({ 256, 784 }, 0.05), nd.zeros { 256 }
  local W2, b2 = randn({ 10, 256 }, 0.05), nd.zeros { 10 }
  for _, p in ipairs { W1, b1, W2, b2 } do p:attach_grad() end
  local fc, relu, sum, square = nd.fully_connected, nd.relu, nd.sum, nd.square
  local o1, o2 = { num_hidden = 256 }, { num_hidden = 10 }
  for _, bs in ipairs { 1, 64 } do
    local x = randn({ bs, 784 }, 1)
    local function fwd()
      local h = relu(fc(x, W1, b1, o1))
      return sum(square(fc(h, W2, b2, o2)))
    end
    local t = H.time(function(n)
      for _ = 1, n do
        ag.record(fwd):backward()
      end
      W1:grad():wait_to_read()
    end, { n = math.max(1, math.floor((bs == 1 and 2000 or 300) * Q)), reps = 5 })
    H.report("mlp_fwd_bwd", t.median / 1e6, "ms/iter", { note = note .. " batch=" .. bs })
  end
end
