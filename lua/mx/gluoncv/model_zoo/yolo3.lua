-- mx.gluoncv.model_zoo.yolo3 — GluonCV 0.10's YOLOv3 (gluoncv/model_zoo/yolo/yolo3.py):
-- Darknet-53 or MobileNet 1.0 stages, detection blocks, YOLOOutputV3 heads (anchors and grid
-- offsets as constant parameters), the upsampling path, and box_nms over every class's
-- detections; in training mode its raw outputs and, with targets
-- (mx.gluoncv.model_zoo.yolo_target), YOLOV3Loss's four losses. GluonCV's structural
-- parameter names, so its .params files load. net(x) returns ids (B, post_nms, 1), scores, bboxes (corner
-- pixels) with -1 rows after the detections, as GluonCV.
--
--   local yolo = require("mx.gluoncv.model_zoo.yolo3")
--   local net = yolo.yolo3_darknet53_voc()         -- 20 VOC classes, random weights
--   net:initialize(); local ids, scores, bboxes = net(x)   -- x (B, 3, 416, 416)
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local parameter = require("mx.gluon.parameter")
local U = require("mx.gluon.model_zoo.vision._util")
local darknet = require("mx.gluoncv.model_zoo.darknet")
local autograd = require("mx.autograd")

local HybridBlock = block.HybridBlock
local conv2d = darknet.conv2d

local M = {}

M.VOC_CLASSES = { "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
  "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
  "sheep", "sofa", "train", "tvmonitor" }

-- YOLOOutputV3(index, num_class, anchors {w1, h1, w2, h2, ...}, stride, {alloc_size={128,128}})
local Output = HybridBlock:extend("YOLOOutputV3")
M.YOLOOutputV3 = Output
function Output:__init(index, num_class, anchors, stride, alloc_size)
  HybridBlock.__init(self)
  alloc_size = alloc_size or { 128, 128 }
  self._classes, self._num_pred, self._num_anchors = num_class, 5 + num_class, #anchors / 2
  self._stride = stride
  self.prediction = U.nn().Conv2D(self._num_pred * self._num_anchors, 1)
  local a = {}
  for i = 1, self._num_anchors do a[i] = { anchors[2 * i - 1], anchors[2 * i] } end
  self.anchors = parameter.Constant(nd.array({ { a } }), "anchor_" .. (index - 1))
  local off = {}
  for y = 1, alloc_size[1] do
    local row = {}
    for x = 1, alloc_size[2] do row[x] = { x - 1, y - 1 } end
    off[y] = row
  end
  self.offsets = parameter.Constant(nd.array({ { off } }), "offset_" .. (index - 1))
end

local AX23 = { axes = { 3, 4 } }
function Output:forward(x)
  local na, np, C = self._num_anchors, self._num_pred, self._classes
  local pred = nd.reshape(self.prediction(x), { 0, na * np, -1 })
  pred = nd.reshape(nd.transpose(pred, { axes = { 1, 3, 2 } }), { 0, -1, na, np })
  local function cut(b, e) return nd.slice_axis(pred, { axis = -1, begin = b, ["end"] = e }) end
  local centers, scales, objness, class_pred = cut(1, 2), cut(3, 4), cut(5, 5), cut(6, np)
  local offsets = nd.slice_like(self.offsets:data(), nd.mul_scalar(x, { scalar = 0 }), AX23)
  offsets = nd.reshape(offsets, { 1, -1, 1, 2 })
  local box_centers = nd.mul_scalar(nd.add(nd.sigmoid(centers), offsets),
    { scalar = self._stride })
  local box_scales = nd.mul(nd.exp(scales), self.anchors:data())
  local wh = nd.div_scalar(box_scales, { scalar = 2 })
  local bbox = nd.concat({ nd.sub(box_centers, wh), nd.add(box_centers, wh) }, { dim = -1 })
  if autograd.is_training() then
    -- GluonCV's training outputs: boxes (B, h*w*A, 4), the raw predictions, the constants
    return nd.reshape(bbox, { 0, -1, 4 }), centers, scales, objness, class_pred,
      self.anchors:data(), offsets
  end
  local confidence = nd.sigmoid(objness)
  local class_score = nd.mul(nd.sigmoid(class_pred), confidence)
  local bboxes = nd.tile(bbox, { reps = { C, 1, 1, 1, 1 } })
  local scores = nd.expand_dims(nd.transpose(class_score, { axes = { 4, 1, 2, 3 } }),
    { axis = -1 })
  local ids = nd.add(nd.mul_scalar(scores, { scalar = 0 }),
    nd.reshape(nd.arange { start = 0, stop = C }, { -1, 1, 1, 1, 1 }))
  local det = nd.concat({ ids, scores, bboxes }, { dim = -1 })
  return nd.reshape(nd.transpose(det, { axes = { 2, 1, 3, 4, 5 } }), { 0, -1, 6 })
end

-- YOLODetectionBlockV3(channel): body (1x1 / 3x3 twice, then 1x1) -> route; tip (3x3)
local Detection = HybridBlock:extend("YOLODetectionBlockV3")
M.YOLODetectionBlockV3 = Detection
function Detection:__init(channel)
  HybridBlock.__init(self)
  local L = U.nn()
  self.body = L.HybridSequential()
  for _ = 1, 2 do
    self.body:add(conv2d(channel, 1, 0, 1))
    self.body:add(conv2d(channel * 2, 3, 1, 1))
  end
  self.body:add(conv2d(channel, 1, 0, 1))
  self.tip = conv2d(channel * 2, 3, 1, 1)
end
function Detection:forward(x)
  local route = self.body(x)
  return route, self.tip(route)
end

local function upsample(x)
  return nd["repeat"](nd["repeat"](x, { repeats = 2, axis = -1 }), { repeats = 2, axis = -2 })
end

-- YOLOV3(stages, channels, anchors, strides, classes, {nms_thresh=0.45, nms_topk=400,
-- post_nms=100, alloc_size={128, 128}, ignore_iou_thresh=0.7})
local YOLOV3 = HybridBlock:extend("YOLOV3")
M.YOLOV3 = YOLOV3
function YOLOV3:__init(stages, channels, anchors, strides, classes, opts)
  HybridBlock.__init(self)
  local o = opts or {}
  self._classes = classes
  self.nms_thresh, self.nms_topk, self.post_nms = o.nms_thresh or 0.45, o.nms_topk or 400,
    o.post_nms or 100
  self.ignore_iou_thresh = o.ignore_iou_thresh or 0.7
  local L = U.nn()
  self.stages = L.HybridSequential()
  self.transitions = L.HybridSequential()
  self.yolo_blocks = L.HybridSequential()
  self.yolo_outputs = L.HybridSequential()
  local n = #stages
  for i = 1, n do
    self.stages:add(stages[i])
    self.yolo_blocks:add(Detection(channels[i]))
    self.yolo_outputs:add(Output(i, #classes, anchors[n + 1 - i], strides[n + 1 - i],
      o.alloc_size))
    if i > 1 then self.transitions:add(conv2d(channels[i], 1, 0, 1)) end
  end
end

-- set_nms(nms_thresh=0.45, nms_topk=400, post_nms=100)
function YOLOV3:set_nms(nms_thresh, nms_topk, post_nms)
  self.nms_thresh, self.nms_topk, self.post_nms = nms_thresh or 0.45, nms_topk or 400,
    post_nms or 100
end

-- forward(x): inference ids, scores, bboxes. In training mode (autograd.train_mode or
-- record(…, true)): forward(x) gives GluonCV's training outputs box_preds (B, N, 4), anchors,
-- offsets and feature maps (lists per layer, for YOLOV3PrefetchTargetGenerator), raw centers
-- (B, N, 2), scales, objectness (B, N, 1) and class scores (B, N, C); while recording,
-- forward(x, gt_boxes, obj_t, centers_t, scales_t, weights_t, class_t) returns the four
-- losses (B,) of YOLOV3Loss on YOLOV3TargetMerger's targets.
function YOLOV3:forward(x, ...)
  local training = autograd.is_training()
  if select("#", ...) > 0 and not training then
    error("YOLOV3: inference takes only the input data (targets need training mode)", 0)
  end
  local stages, blocks, outputs = self.stages:children(), self.yolo_blocks:children(),
    self.yolo_outputs:children()
  local transitions = self.transitions:children()
  local routes = {}
  for i = 1, #stages do
    x = stages[i](x)
    routes[i] = x
  end
  local dets = {}
  local T = { centers = {}, scales = {}, objness = {}, class_pred = {}, anchors = {},
    offsets = {}, feat = {} }
  for i = 1, #routes do
    local tip
    x, tip = blocks[i](x)
    if training then
      local d, c, s, o, k, a, off = outputs[i](tip)
      dets[i] = d
      T.centers[i], T.scales[i] = nd.reshape(c, { 0, -1, 2 }), nd.reshape(s, { 0, -1, 2 })
      T.objness[i] = nd.reshape(o, { 0, -1, 1 })
      T.class_pred[i] = nd.reshape(k, { 0, -1, #self._classes })
      T.anchors[i], T.offsets[i] = a, off
      local first = nd.slice_axis(nd.slice_axis(tip, { axis = 1, begin = 1, ["end"] = 1 }),
        { axis = 2, begin = 1, ["end"] = 1 })
      T.feat[i] = nd.zeros_like(first)
    else
      dets[i] = outputs[i](tip)
    end
    if i == #routes then break end
    x = upsample(transitions[i](x))
    local now = routes[#routes - i]
    x = nd.concat({ nd.slice_like(x, nd.mul_scalar(now, { scalar = 0 }), AX23), now }, { dim = 2 })
  end
  if training then
    local box_preds = nd.concat(dets, { dim = 2 })
    local preds = {}
    for j, k in ipairs({ "objness", "centers", "scales", "class_pred" }) do
      preds[j] = nd.concat(T[k], { dim = 2 })
    end
    if autograd.is_recording() and select("#", ...) > 0 then
      local gt_boxes, obj_t, centers_t, scales_t, weights_t, class_t = ...
      if not self._target_generator then
        self._target_generator = require("mx.gluoncv.model_zoo.yolo_target").YOLOV3TargetMerger(
          #self._classes, self.ignore_iou_thresh)
        self._loss = require("mx.gluoncv.loss").YOLOV3Loss()
      end
      local targets = { self._target_generator(box_preds, gt_boxes, obj_t, centers_t, scales_t,
        weights_t, class_t) }
      return self._loss(preds[1], preds[2], preds[3], preds[4], targets[1], targets[2],
        targets[3], targets[4], targets[5], targets[6])
    end
    return box_preds, T.anchors, T.offsets, T.feat, preds[2], preds[3], preds[1], preds[4]
  end
  local result = nd.concat(dets, { dim = 2 })
  if self.nms_thresh > 0 and self.nms_thresh < 1 then
    result = nd.box_nms(result, { overlap_thresh = self.nms_thresh, valid_thresh = 0.01,
      topk = self.nms_topk, id_index = 1, score_index = 2, coord_start = 3,
      force_suppress = false })
    if self.post_nms > 0 then
      result = nd.slice_axis(result, { axis = 2, begin = 1, ["end"] = self.post_nms })
    end
  end
  local ids = nd.slice_axis(result, { axis = -1, begin = 1, ["end"] = 1 })
  local scores = nd.slice_axis(result, { axis = -1, begin = 2, ["end"] = 2 })
  local bboxes = nd.slice_axis(result, { axis = -1, begin = 3, ["end"] = 6 })
  return ids, scores, bboxes
end

-- a new HybridSequential holding children first..last of seq (GluonCV's features[a:b])
local function slice(seq, first, last)
  local ch = seq:children()
  if last < 0 then last = #ch + 1 + last end
  local out = U.nn().HybridSequential()
  for i = first, last do out:add(ch[i]) end
  return out
end

local ANCHORS = { { 10, 13, 16, 30, 33, 23 }, { 30, 61, 62, 45, 59, 119 },
  { 116, 90, 156, 198, 373, 326 } }
local STRIDES = { 8, 16, 32 }
local OPTS = { classes = true, pretrained = true, pretrained_base = true, ctx = true,
  root = true, nms_thresh = true, nms_topk = true, post_nms = true, ignore_iou_thresh = true }

local function get(base, dataset, opts, level)
  level = level + 1
  local o = require("mx.core.class").check_opts("yolo3_" .. base .. "_" .. dataset, opts, OPTS,
    level)
  local classes = o.classes or M.VOC_CLASSES
  local stages
  if base == "darknet53" then
    local net = darknet.darknet53()
    local f = net.features
    stages = { slice(f, 1, 15), slice(f, 16, 24), slice(f, 25, -1) }
  else
    local net = require("mx.gluon.model_zoo.vision").get_mobilenet(1)
    local f = net.features
    stages = { slice(f, 1, 33), slice(f, 34, 69), slice(f, 70, -3) }
  end
  local net = YOLOV3(stages, { 512, 256, 128 }, ANCHORS, STRIDES, classes,
    { nms_thresh = o.nms_thresh, nms_topk = o.nms_topk, post_nms = o.post_nms,
      ignore_iou_thresh = o.ignore_iou_thresh })
  if o.pretrained then
    local name = "yolo3_" .. base .. "_" .. dataset
    local path = require("mx.gluon.model_zoo.model_store").get_model_file(name,
      { root = o.root, store = "gluoncv" }, level)
    net:load_parameters(path, { ctx = o.ctx })
  end
  return net
end

-- yolo3_darknet53_voc(opts), yolo3_mobilenet1_0_voc(opts): {classes= (default VOC's 20),
-- pretrained=false, root=, ctx=, nms_thresh=, nms_topk=, post_nms=, ignore_iou_thresh=0.7};
-- pretrained_base is accepted and ignored (no ImageNet download: load the base's weights
-- yourself)
function M.yolo3_darknet53_voc(opts) return (get("darknet53", "voc", opts, 2)) end
function M.yolo3_mobilenet1_0_voc(opts) return (get("mobilenet1.0", "voc", opts, 2)) end

return M
