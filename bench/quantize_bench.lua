-- bench/quantize_bench.lua — INT8 inference (mx.contrib.quantization.quantize_net, naive
-- calibration, oneDNN int8 kernels) against float32 of the same hybridized network:
-- ResNet-50 v1 and MobileNet v2 1.0 (gluon.model_zoo.vision, random weights: speed does
-- not depend on them), batch 1 and 16, 3x224x224 random input. The MXNet 1.9.1 peer
-- (its oneDNN quantized model, same networks and flow) is bench/quantize_bench.py.
--
--   luajit bench/quantize_bench.lua --threads=2 [--reps=5]
--
-- RESULT lines: <net>_<f32|int8>_b<batch>_t<threads>, ms per batch (median).
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local vision = mx.gluon.model_zoo.vision
local Q = mx.contrib.quantization
H.env_note()
mx.random.seed(1)

local function ms(fn)
  local r = H.time(function(n) for _ = 1, n do fn():wait_to_read() end end,
    { n = 1, reps = A.reps or 5, warmup = 2 })
  return r.median / 1e6
end

for _, name in ipairs({ "resnet50_v1", "mobilenetv2_1.0" }) do
  local net = vision.get_model(name)
  net:initialize(mx.init.Xavier())
  net:hybridize()
  local calib = nd.random.uniform(-1, 1, { 16, 3, 224, 224 })
  mx.autograd.predict_mode(function() return net(calib) end)
  local qn = Q.quantize_net(net, { calib_data = { calib }, calib_mode = "naive" })
  qn:hybridize()
  for _, b in ipairs({ 1, 16 }) do
    local x = nd.random.uniform(-1, 1, { b, 3, 224, 224 })
    local tf = ms(function() return net(x) end)
    local tq = ms(function() return qn(x) end)
    H.report(name .. "_f32_b" .. b .. "_t" .. threads, tf, "ms")
    H.report(name .. "_int8_b" .. b .. "_t" .. threads, tq, "ms",
      { note = string.format("%.2fx f32", tf / tq) })
  end
end
