-- bench/gluoncv_det_bench.lua — batch-1 inference images/s of GluonCV's detectors
-- (ssd_512_resnet50_v1_voc at 512x512, yolo3_darknet53_voc at 416x416 by default; random
-- weights, nothing downloaded; hybridized); the peer is bench/gluoncv_det_bench.py (GluonCV
-- 0.11 on MXNet 1.9.1). Prints each timed run and the median.
--   LUA_PATH="bench/?.lua;;" bin/mx bench/gluoncv_det_bench.lua MODEL [--size=S] [--runs=5]
--     [--threads=1]
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local MODELS = {
  ssd_512_resnet50_v1_voc = { "mx.gluoncv.model_zoo.ssd", 512 },
  yolo3_darknet53_voc = { "mx.gluoncv.model_zoo.yolo3", 416 },
}
local name = A[1] or "ssd_512_resnet50_v1_voc"
local m = assert(MODELS[name], "gluoncv_det_bench: MODEL is ssd_512_resnet50_v1_voc or "
  .. "yolo3_darknet53_voc")
local size, runs = A.size or m[2], A.runs or 5
H.env_note()
require("mx.random").seed(7)
local net = require(m[1])[name]()
net:initialize()
net:hybridize()
local x = nd.random_uniform { low = 0, high = 1, shape = { 1, 3, size, size } }
local function run()
  local ids, scores, bboxes = net(x)
  ids:wait_to_read(); scores:wait_to_read(); bboxes:wait_to_read()
end
for _ = 1, 2 do run() end
local t = {}
for i = 1, runs do
  local t0 = H.now()
  run()
  t[i] = H.now() - t0
  io.write(string.format("luamx %s run %d: %.3f s\n", name, i, t[i]))
end
local med = H.median(t)
H.report(name, 1 / med, "images/s", { note = string.format("batch 1, %dx%d, %d thread(s), "
  .. "median of %d: %.3f s", size, size, threads, runs, med) })
