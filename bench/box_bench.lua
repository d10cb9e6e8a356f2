-- bench/box_bench.lua — box_nms on 10k boxes (3 classes, GluonCV's row layout
-- [id, score, x1, y1, x2, y2]) and box_iou of 1000 x 1000 boxes; bench/box_bench.py runs
-- the same data (written here to /tmp/luamx_box_bench.params) through MXNet 1.9.1.
--   LUA_PATH="bench/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/lib/?.so;;" \
--     luajit bench/box_bench.lua [--threads=1]
local H = require("harness")
local mx = H.mx_setup(arg)
local nd = mx.nd
H.env_note()

local PATH = "/tmp/luamx_box_bench.params"
local r = require("mx.random")
r.seed(3)
local n = 10000
local xy = nd.random_uniform { low = 0, high = 1000, shape = { 1, n, 2 } }
local wh = nd.random_uniform { low = 10, high = 80, shape = { 1, n, 2 } }
local id = nd.floor(nd.random_uniform { low = 0, high = 3, shape = { 1, n, 1 } })
local score = nd.random_uniform { low = 0, high = 1, shape = { 1, n, 1 } }
local data = nd.concat({ id, score, xy, nd.add(xy, wh) }, { dim = 3 })
local a = nd.reshape(nd.slice_axis(data, { axis = 2, begin = 1, ["end"] = 1000 }), { 1000, 6 })
local boxes = nd.slice_axis(a, { axis = 2, begin = 3, ["end"] = 6 })
nd.save(PATH, { data = data, boxes = boxes })

local O = { overlap_thresh = 0.5, valid_thresh = 0.01, id_index = 1 }
local t = H.time(function(k) for _ = 1, k do nd.box_nms(data, O):wait_to_read() end end,
  { n = 5, reps = 7 })
H.report("box_nms_10k", t.median / 1e6, "ms", { note = "3 classes, overlap 0.5" })
t = H.time(function(k)
  for _ = 1, k do nd.box_nms(data, { overlap_thresh = 0.5 }):wait_to_read() end
end, { n = 5, reps = 7 })
H.report("box_nms_10k_noclass", t.median / 1e6, "ms", { note = "id_index none" })
t = H.time(function(k) for _ = 1, k do nd.box_iou(boxes, boxes):wait_to_read() end end,
  { n = 10, reps = 7 })
H.report("box_iou_1k_1k", t.median / 1e6, "ms")
