-- bench/norm_bench.lua — batch_norm; peer: bench/norm_bench.py (PyTorch).
--   luajit bench/norm_bench.lua --threads=1; /opt/torchvenv/bin/python bench/norm_bench.py --threads=1
-- Results (ms per call, medians), N32 C64 56x56 float32, NCHW:
--   bn_fwd_train   forward in training (batch statistics + moving update)
--   bn_fwd_infer   forward in inference (moving statistics)
--   bn_fwd_bwd     training forward + backward of data, gamma and beta
--   bn_*_blocked   the same on data in oneDNN's nChw16c layout (as a oneDNN conv leaves
--                  it; luamx only: the oneDNN kernels, output kept blocked)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd, ag = mx.nd, mx.autograd

local A = H.args(arg)
local threads = A.threads or 1
local Q = A.quick and 0.1 or 1
require("mx.core.lib").C.mx_set_num_threads(threads)
local note = "threads=" .. threads .. " N32 C64 56x56"
H.env_note()

local x = nd.random_uniform({ 32, 64, 56, 56 }, { low = -1, high = 1 })
local g, b = nd.ones({ 64 }), nd.zeros({ 64 })
local mm, mv = nd.zeros({ 64 }), nd.ones({ 64 })
local dy = nd.random_uniform({ 32, 64, 56, 56 }, { low = -1, high = 1 })
local bn = nd.batch_norm
local o_train = { training = true, fix_gamma = false, eps = 1e-5 }
local o_infer = { training = false, fix_gamma = false, eps = 1e-5 }
local N = math.max(1, math.floor(20 * Q))

local t = H.time(function(n)
  for _ = 1, n do bn(x, g, b, mm, mv, o_train) end
  nd.waitall()
end, { n = N, reps = 5 })
H.report("bn_fwd_train", t.median / 1e6, "ms/call", { note = note })
t = H.time(function(n)
  for _ = 1, n do bn(x, g, b, mm, mv, o_infer) end
  nd.waitall()
end, { n = N, reps = 5 })
H.report("bn_fwd_infer", t.median / 1e6, "ms/call", { note = note })

x:attach_grad()
g:attach_grad()
b:attach_grad()
t = H.time(function(n)
  for _ = 1, n do
    local y = ag.record(function() return (bn(x, g, b, mm, mv, o_train)) end)
    y:backward(dy)
  end
  nd.waitall()
end, { n = N, reps = 5 })
H.report("bn_fwd_bwd", t.median / 1e6, "ms/call", { note = note })

-- the oneDNN kernels: x in nChw16c (a build without oneDNN skips these)
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
local hb = ffi.new("mx_tensor*[1]")
if C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, "nChw16c", hb) == 0 then
  local xb = nd._wrap(hb[0])
  t = H.time(function(n)
    for _ = 1, n do bn(xb, g, b, mm, mv, o_train) end
    nd.waitall()
  end, { n = N, reps = 5 })
  H.report("bn_fwd_train_blocked", t.median / 1e6, "ms/call", { note = note })
  xb:attach_grad()
  t = H.time(function(n)
    for _ = 1, n do
      local y = ag.record(function() return (bn(xb, g, b, mm, mv, o_train)) end)
      y:backward(dy)
    end
    nd.waitall()
  end, { n = N, reps = 5 })
  H.report("bn_fwd_bwd_blocked", t.median / 1e6, "ms/call", { note = note })
end
