-- bench/act_bench.lua — the nn activations on 1M float32 elements: forward,
-- forward into a preallocated out= (luamx only: the kernel without the result's allocation),
-- and forward + backward through autograd (head gradient given), per call, for
-- leaky_relu (slope 0.1), gelu (erf) and silu. Peer: bench/act_bench.py (PyTorch).
--   for p in 1 2 3; do luajit bench/act_bench.lua --threads=1; \
--     /opt/torchvenv/bin/python bench/act_bench.py --threads=1; done > bench/out/act_raw.txt
--   python3 bench/compare.py bench/out/act_raw.txt
-- (MX_BUILD=build dir, default build; --quick for a smoke run.)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd, ag = mx.nd, mx.autograd

local A = H.args(arg)
local threads = A.threads or 1
local Q = A.quick and 0.1 or 1
require("mx.core.lib").C.mx_set_num_threads(threads)
local note = "threads=" .. threads .. " n=1M f32"
H.env_note()

local N = 1000000
local x = nd.mul_scalar(nd.sin(nd.arange(0, N)), { scalar = 4 })
local g = nd.cos(nd.arange(0, N))
x:attach_grad()
local out, mask = nd.zeros({ N }), nd.zeros({ 1 })
local CASES = {
  { "leaky_relu", function(t) local y = nd.leaky_relu(t, { slope = 0.1 }) return y end,
    function(t) nd.leaky_relu(t, { slope = 0.1, out = { out, mask } }) return out end },
  { "gelu", function(t) return nd.gelu(t) end,
    function(t) return nd.gelu(t, { out = out }) end },
  { "silu", function(t) return nd.silu(t) end,
    function(t) return nd.silu(t, { out = out }) end },
}
for _, c in ipairs(CASES) do
  local name, f, fo = c[1], c[2], c[3]
  local fw = H.time(function(n)
    for _ = 1, n do f(x):wait_to_read() end
  end, { n = math.max(1, math.floor(50 * Q)), reps = 7 })
  H.report("act_" .. name .. "_fwd", fw.median / 1e3, "us/call", { note = note })
  -- into a preallocated result: the kernel without the 4 MB allocation (luamx only)
  local fwo = H.time(function(n)
    for _ = 1, n do fo(x):wait_to_read() end
  end, { n = math.max(1, math.floor(50 * Q)), reps = 7 })
  H.report("act_" .. name .. "_fwd_out", fwo.median / 1e3, "us/call", { note = note })
  local fb = H.time(function(n)
    for _ = 1, n do
      local y
      ag.record(function() y = f(x) end)
      y:backward(g)
      x:grad():wait_to_read()
    end
  end, { n = math.max(1, math.floor(30 * Q)), reps = 7 })
  H.report("act_" .. name .. "_fwd_bwd", fb.median / 1e3, "us/call", { note = note })
end
