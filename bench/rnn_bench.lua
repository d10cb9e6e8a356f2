-- bench/rnn_bench.lua — the fused rnn op; peer: bench/rnn_bench.py (PyTorch).
--   luajit bench/rnn_bench.lua --threads=1; /opt/torchvenv/bin/python bench/rnn_bench.py --threads=1
-- Results (ms per call, medians), 2-layer LSTM, hidden 256, seq 35, batch 32, input 256,
-- float32, initial states given:
--   lstm_fwd       inference forward (out, hy, cy)
--   lstm_fwd_bwd   training forward + backward of data, parameters and both states
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd, ag = mx.nd, mx.autograd
local R = dofile("spec/fixtures/rnn_call.lua")

local A = H.args(arg)
local threads = A.threads or 1
local Q = A.quick and 0.2 or 1
require("mx.core.lib").C.mx_set_num_threads(threads)
local T, N, I, Hd, L = 35, 32, 256, 256, 2
local note = string.format("threads=%d lstm L%d H%d T%d N%d I%d", threads, L, Hd, T, N, I)
H.env_note()

local np = 0
for l = 1, L do np = np + 4 * Hd * ((l == 1 and I or Hd) + Hd + 2) end
local x = nd.random_uniform({ T, N, I }, { low = -1, high = 1 })
local w = nd.random_uniform({ np }, { low = -0.06, high = 0.06 })
local h0, c0 = nd.zeros({ L, N, Hd }), nd.zeros({ L, N, Hd })
local dy = nd.random_uniform({ T, N, Hd }, { low = -1, high = 1 })
local o = { state_size = Hd, num_layers = L, mode = "lstm", state_outputs = true }
local n = math.max(1, math.floor(10 * Q))

-- also the process's CPU time per call (os.clock): on a machine shared with other work
-- it moves far less than the wall time
local function cpu_ms(f)
  local clk = os.clock()
  f(n)
  return (os.clock() - clk) * 1000 / n
end
local function fwd(k)
  for _ = 1, k do R.call(x, w, h0, c0, nil, o) end
  nd.waitall()
end
local t = H.time(fwd, { n = n, reps = 7 })
H.report("lstm_fwd", t.median / 1e6, "ms/call", { note = note })
H.report("lstm_fwd_cpu", cpu_ms(fwd), "cpu-ms/call", { note = note })

for _, v in ipairs({ x, w, h0, c0 }) do v:attach_grad() end
local function fb(k)
  for _ = 1, k do
    local y = ag.record(function() return (R.call(x, w, h0, c0, nil, o)) end)
    y:backward(dy)
  end
  nd.waitall()
end
t = H.time(fb, { n = n, reps = 7 })
H.report("lstm_fwd_bwd", t.median / 1e6, "ms/call", { note = note })
H.report("lstm_fwd_bwd_cpu", cpu_ms(fb), "cpu-ms/call", { note = note })
