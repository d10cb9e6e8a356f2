-- bench/roi_align_bench.lua — roi_align forward and backward on Faster R-CNN's ROI head
-- input (faster_rcnn_resnet50_v1b at 320x320: 300 ROIs on 1x1024x20x20 features, stride 16,
-- 14x14 bins, sample_ratio 2), the CPU kernels (float32) against the reference kernels
-- (nd._ref), alternating; bench/roi_align_bench.py runs the same data (written here to
-- /tmp/luamx_roi_align_bench.params) through MXNet 1.9.1's _contrib_ROIAlign (forward, and
-- forward + backward under autograd: roi_align_fwd_bwd here too).
--   LUA_PATH="bench/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/lib/?.so;;" \
--     luajit bench/roi_align_bench.lua [--threads=1] [--rounds=2] [--noref]
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
H.env_note()

local PATH = "/tmp/luamx_roi_align_bench.params"
require("mx.random").seed(5)
local R = 300
local data = nd.random_uniform { low = -1, high = 1, shape = { 1, 1024, 20, 20 } }
-- proposals as an RPN gives them: corners in the 320x320 image, 16 to 240 px a side
local xy = nd.random_uniform { low = 0, high = 300, shape = { R, 2 } }
local wh = nd.random_uniform { low = 16, high = 240, shape = { R, 2 } }
local rois = nd.concat({ nd.zeros { R, 1 }, xy, nd.minimum(nd.add(xy, wh), nd.full({ R, 2 },
  319)) }, { dim = 2 })
local O = { pooled_size = { 14, 14 }, spatial_scale = 1 / 16, sample_ratio = 2 }
local og = nd.random_uniform { low = -1, high = 1, shape = { R, 1024, 14, 14 } }
nd.save(PATH, { data = data, rois = rois, ograd = og })

local function fwd(f) return function(k) for _ = 1, k do f(data, rois, O):wait_to_read() end end end
local function bwd(f)
  return function(k) for _ = 1, k do f(og, data, rois, O):wait_to_read() end end
end
local xg = data:copy()
xg:attach_grad()
local function fwd_bwd(k)
  for _ = 1, k do
    mx.autograd.record(function() nd.roi_align(xg, rois, O):backward(og) end)
    xg:grad():wait_to_read()
  end
end
local note = string.format("300 ROIs, 1x1024x20x20, 14x14, %d thread(s)", threads)
for round = 1, A.rounds or 2 do
  local t = H.time(fwd(nd.roi_align), { n = 1, reps = 5, warmup = 1 })
  H.report("roi_align_fwd", t.median / 1e6, "ms", { note = note .. ", round " .. round })
  t = H.time(bwd(nd.roi_align_backward), { n = 1, reps = 5, warmup = 1 })
  H.report("roi_align_bwd", t.median / 1e6, "ms", { note = note .. ", round " .. round })
  t = H.time(fwd_bwd, { n = 1, reps = 5, warmup = 1 })
  H.report("roi_align_fwd_bwd", t.median / 1e6, "ms", { note = note .. ", round " .. round })
  if not A.noref then
    t = H.time(fwd(nd._ref.roi_align), { n = 1, reps = 3, warmup = 0 })
    H.report("roi_align_fwd", t.median / 1e6, "ms", { impl = "luamx-ref",
      note = note .. ", round " .. round })
    t = H.time(bwd(nd._ref.roi_align_backward), { n = 1, reps = 3, warmup = 0 })
    H.report("roi_align_bwd", t.median / 1e6, "ms", { impl = "luamx-ref",
      note = note .. ", round " .. round })
  end
end
