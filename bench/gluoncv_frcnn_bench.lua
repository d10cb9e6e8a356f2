-- bench/gluoncv_frcnn_bench.lua — batch-1 inference of faster_rcnn_resnet50_v1b_voc
-- (random weights, hybridized) on a 1x3xHxW input; the peer is bench/gluoncv_frcnn_bench.py
-- (GluonCV 0.11 on MXNet 1.9.1). Prints each timed run and the median, in seconds.
--   LUA_PATH="bench/?.lua;;" bin/mx bench/gluoncv_frcnn_bench.lua [H W runs]
local mx = require("mx")
local nd = mx.nd
local H, W, runs = tonumber(arg[1]) or 320, tonumber(arg[2]) or 320, tonumber(arg[3]) or 5
local net = require("mx.gluoncv.model_zoo.rcnn").faster_rcnn_resnet50_v1b_voc()
net:initialize()
local x = nd.random.uniform({ low = 0, high = 1, shape = { 1, 3, H, W } })
net:hybridize()
local now = require("harness").now
local function run()
  local ids, scores, bboxes = net(x)
  ids:wait_to_read(); scores:wait_to_read(); bboxes:wait_to_read()
end
for _ = 1, 2 do run() end
local t = {}
for i = 1, runs do
  local t0 = now()
  run()
  t[i] = now() - t0
  io.write(string.format("luamx run %d: %.3f s\n", i, t[i]))
end
table.sort(t)
io.write(string.format("luamx median %.3f s (%dx%d)\n", t[math.floor((runs + 1) / 2)], H, W))
