-- mx.gluoncv.model_zoo.rcnn — GluonCV 0.11's Faster R-CNN (gluoncv/model_zoo/rcnn/rcnn.py,
-- faster_rcnn/faster_rcnn.py, predefined_models.py): a base network split into features
-- (before ROI pooling) and top_features (after), the RPN (rcnn_rpn), ROIAlign (or
-- ROIPooling) of the proposals, global average pooling, the class and box predictors
-- (class_predictor, box_predictor) and per-class box_nms. Attribute names are GluonCV's,
-- so its .params files load: features.4.0.conv1.weight, top_features.0.2.bn3.gamma,
-- class_predictor.weight, rpn.conv1.0.weight, rpn.anchor_generator.anchors.
--
--   local rcnn = require("mx.gluoncv.model_zoo.rcnn")
--   local net = rcnn.faster_rcnn_resnet50_v1b_voc()     -- 20 VOC classes, random weights
--   net:initialize(); local ids, scores, bboxes = net(x) -- x (1, 3, H, W)
-- In training mode net(x, gt_box, gt_label) gives GluonCV's twelve training outputs
-- (forward's comment); the targets are rcnn_target's, the losses rcnn_loss's.
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local autograd = require("mx.autograd")
local initializer = require("mx.initializer")
local U = require("mx.gluon.model_zoo.vision._util")
local R = require("mx.gluoncv.model_zoo.rcnn_rpn")
local T = require("mx.gluoncv.model_zoo.rcnn_target")
local check_opts = require("mx.core.class").check_opts

local HybridBlock = block.HybridBlock

local M = {}

M.VOC_CLASSES = require("mx.gluoncv.model_zoo.yolo3").VOC_CLASSES
M.COCO_CLASSES = { "person", "bicycle", "car", "motorcycle", "airplane", "bus", "train",
  "truck", "boat", "traffic light", "fire hydrant", "stop sign", "parking meter", "bench",
  "bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra", "giraffe",
  "backpack", "umbrella", "handbag", "tie", "suitcase", "frisbee", "skis", "snowboard",
  "sports ball", "kite", "baseball bat", "baseball glove", "skateboard", "surfboard",
  "tennis racket", "bottle", "wine glass", "cup", "fork", "knife", "spoon", "bowl", "banana",
  "apple", "sandwich", "orange", "broccoli", "carrot", "hot dog", "pizza", "donut", "cake",
  "chair", "couch", "potted plant", "bed", "dining table", "toilet", "tv", "laptop", "mouse",
  "remote", "keyboard", "cell phone", "microwave", "oven", "toaster", "sink", "refrigerator",
  "book", "clock", "vase", "scissors", "teddy bear", "hair drier", "toothbrush" }

local OPTS = { box_features = true, short = true, max_size = true, train_patterns = true,
  nms_thresh = true, nms_topk = true, post_nms = true, roi_mode = true, roi_size = true,
  strides = true, clip = true, rpn_channel = true, base_size = true, scales = true,
  ratios = true, alloc_size = true, rpn_nms_thresh = true, rpn_train_pre_nms = true,
  rpn_train_post_nms = true, rpn_test_pre_nms = true, rpn_test_post_nms = true,
  rpn_min_size = true, per_device_batch_size = true, num_sample = true,
  pos_iou_thresh = true, pos_ratio = true, max_num_gt = true, force_nms = true }

local function default(v, d) if v == nil then return d end return v end

-- FasterRCNN(features, top_features, classes, opts): GluonCV's constructor arguments by
-- name (short=600, max_size=1000, nms_thresh=0.3, nms_topk=400, post_nms=100,
-- roi_mode="align", roi_size={14, 14}, strides=16, clip=nil, rpn_channel=1024,
-- base_size=16, scales={8, 16, 32}, ratios={0.5, 1, 2}, alloc_size={128, 128},
-- rpn_nms_thresh=0.7, rpn_train_pre_nms=12000, rpn_train_post_nms=2000,
-- rpn_test_pre_nms=6000, rpn_test_post_nms=300, rpn_min_size=16, per_device_batch_size=1,
-- num_sample=128, pos_iou_thresh=0.5, pos_ratio=0.25, max_num_gt=300, force_nms=false);
-- box_features nil: global average pooling (the only head here)
local FasterRCNN = HybridBlock:extend("FasterRCNN")
M.FasterRCNN = FasterRCNN
function FasterRCNN:__init(features, top_features, classes, opts)
  HybridBlock.__init(self)
  local o = check_opts("FasterRCNN", opts, OPTS, 3)
  if o.box_features ~= nil then
    error("FasterRCNN: box_features (FPN's head) is not supported; nil pools globally", 3)
  end
  if type(classes) ~= "table" or #classes == 0 then
    error("FasterRCNN: classes must be a non-empty list of names", 3)
  end
  self.classes = classes
  self.num_class = #classes
  self.short, self.max_size = default(o.short, 600), default(o.max_size, 1000)
  self.train_patterns = o.train_patterns
  self.nms_thresh, self.nms_topk = default(o.nms_thresh, 0.3), default(o.nms_topk, 400)
  self.post_nms, self.force_nms = default(o.post_nms, 100), default(o.force_nms, false)
  local roi_mode = (o.roi_mode or "align"):lower()
  if roi_mode ~= "align" and roi_mode ~= "pool" then
    error("FasterRCNN: roi_mode must be 'align' or 'pool', got " .. tostring(o.roi_mode), 3)
  end
  self._roi_mode, self._roi_size = roi_mode, o.roi_size or { 14, 14 }
  self._strides = o.strides or 16
  if type(self._strides) ~= "number" then
    error("FasterRCNN: one stride (FPN's several levels are not supported)", 3)
  end
  local pre_train, post_train = default(o.rpn_train_pre_nms, 12000),
    default(o.rpn_train_post_nms, 2000)
  local pre_test, post_test = default(o.rpn_test_pre_nms, 6000), default(o.rpn_test_post_nms, 300)
  post_train, post_test = math.min(post_train, pre_train), math.min(post_test, pre_test)
  self._batch_size = default(o.per_device_batch_size, 1)
  self._num_sample = default(o.num_sample, 128)
  self._rpn_test_post_nms = post_test
  local pos_ratio = default(o.pos_ratio, 0.25)
  self._max_pos = math.floor(self._num_sample * pos_ratio)
  local L = U.nn()
  self.features = features
  self.top_features = top_features
  self.class_predictor = L.Dense(self.num_class + 1,
    { weight_initializer = initializer.Normal(0.01) })
  self.box_predictor = L.Dense(self.num_class * 4,
    { weight_initializer = initializer.Normal(0.001) })
  self._clip = o.clip or -1
  self.rpn = R.RPN({ channels = default(o.rpn_channel, 1024), strides = self._strides,
    base_size = default(o.base_size, 16), scales = o.scales or { 8, 16, 32 },
    ratios = o.ratios or { 0.5, 1, 2 }, alloc_size = o.alloc_size or { 128, 128 },
    clip = o.clip, nms_thresh = default(o.rpn_nms_thresh, 0.7), train_pre_nms = pre_train,
    train_post_nms = post_train, test_pre_nms = pre_test, test_post_nms = post_test,
    min_size = default(o.rpn_min_size, 16) })
  self.sampler = T.RCNNTargetSampler({ num_image = self._batch_size, num_proposal = post_train,
    num_sample = self._num_sample, pos_iou_thresh = default(o.pos_iou_thresh, 0.5),
    pos_ratio = pos_ratio, max_num_gt = default(o.max_num_gt, 300) })
end

-- target_generator(): the RCNNTargetGenerator the training forward uses
function FasterRCNN:target_generator()
  local g = rawget(self, "_target_gen")
  if not g then
    g = T.RCNNTargetGenerator(self.num_class, self._max_pos, self._batch_size)
    rawset(self, "_target_gen", g)
  end
  return g
end

-- set_nms(nms_thresh=0.3, nms_topk=400, force_nms=false, post_nms=100) (GluonCV's order;
-- post_nms is kept but, as in GluonCV, every class's nms_topk rows are returned)
function FasterRCNN:set_nms(nms_thresh, nms_topk, force_nms, post_nms)
  self.nms_thresh, self.nms_topk = default(nms_thresh, 0.3), default(nms_topk, 400)
  self.force_nms, self.post_nms = default(force_nms, false), default(post_nms, 100)
  if rawget(self, "_active") then self:hybridize(true) end
end

-- collect_train_params(select): the parameters matching select (collect_params' '|'
-- alternatives of Lua patterns over structural names), or train_patterns (the predefined
-- networks': what GluonCV's train_patterns select)
function FasterRCNN:collect_train_params(select)
  return self:collect_params(select or self.train_patterns)
end

local function roi_feats(self, feat, rois)
  local size, scale = self._roi_size, 1 / self._strides
  if self._roi_mode == "pool" then
    return (nd.roi_pooling(feat, rois, { pooled_size = size, spatial_scale = scale }))
  end
  return nd.roi_align(feat, rois, { pooled_size = size, spatial_scale = scale, sample_ratio = 2 })
end

local GAP = { pool_type = "avg", global_pool = true, kernel = { 1, 1 } }

-- rois with their 0-based batch ids: (B * n, 5), no gradient
local function with_batch_ids(boxes, B, n)
  local ids = nd.reshape(nd.repeat_(nd.arange({ start = 0, stop = B, dtype = boxes:dtype() }),
    { repeats = n }), { -1, 1 })
  return nd.stop_gradient(nd.concat({ ids, nd.reshape(boxes, { -1, 4 }) }, { dim = -1 }))
end

-- forward(x): inference ids, scores, bboxes (B, C * nms_topk, 1 / 1 / 4): per class the
-- nms_topk best of the RPN's test_post_nms proposals after NMS, -1 rows after them.
-- In training mode forward(x, gt_box (B, M, 4), gt_label (B, M, 1)) returns GluonCV's
-- cls_pred (B, num_sample, C + 1), box_pred (B, max_pos, C, 4), roi (B, num_sample, 4),
-- samples, matches (1-based), raw_rpn_score (B, N, 1), raw_rpn_box (B, N, 4), anchors
-- (1, N, 4), cls_targets (B, num_sample), box_targets, box_masks (B, max_pos, C, 4) and
-- indices (B, max_pos, 1-based). The samplers run on the host: a hybridized network runs
-- this level eagerly in training mode (its features, RPN and heads replay their graphs).
function FasterRCNN:forward(x, gt_box, gt_label)
  local training = autograd.is_training()
  local feat = self.features(x)
  local zeros = nd.zeros_like(x)
  local B, num_roi
  local rpn_box, samples, matches, raw_score, raw_box, anchors
  if training then
    if gt_box == nil or gt_label == nil then
      error("FasterRCNN: training mode takes x, gt_box and gt_label", 0)
    end
    local rpn_score
    rpn_score, rpn_box, raw_score, raw_box, anchors = self.rpn(zeros, feat)
    rpn_box, samples, matches = self.sampler(rpn_box, rpn_score, gt_box)
    B, num_roi = self._batch_size, self._num_sample
  else
    local _
    _, rpn_box = self.rpn(zeros, feat)
    B, num_roi = x:shape()[1], self._rpn_test_post_nms
  end
  local rois = with_batch_ids(rpn_box, B, num_roi)
  local top = self.top_features(roi_feats(self, feat, rois))
  local box_feat = nd.pooling(top, GAP)
  local C = self.num_class
  local cls_pred = nd.reshape(self.class_predictor(box_feat), { B, num_roi, C + 1 })
  if training then
    local cls_t, box_t, box_m, indices = self:target_generator()(rpn_box, samples, matches,
      gt_label, gt_box)
    local bf = nd.reshape(box_feat, { B, num_roi, -1 })
    local picked = {}
    for i = 1, B do picked[i] = nd.take(bf[i], indices[i]) end
    local box_pred = nd.reshape(self.box_predictor(nd.concat(picked, { dim = 1 })),
      { B, -1, C, 4 })
    return cls_pred, box_pred, rpn_box, samples, matches, raw_score, raw_box, anchors, cls_t,
      box_t, box_m, indices
  end
  local box_pred = nd.reshape(self.box_predictor(box_feat), { B, num_roi, C, 4 })
  -- MultiPerClassDecoder: each foreground class's softmax score, id -1 / score 0 under 0.01
  local scores = nd.slice_axis(nd.softmax(cls_pred, { axis = -1 }), { axis = -1, begin = 2,
    ["end"] = C + 1 })
  local mask = nd.greater_scalar(scores, { scalar = 0.01 })
  local ids = nd.broadcast_add(nd.zeros_like(scores),
    nd.reshape(nd.arange({ start = 0, stop = C, dtype = scores:dtype() }), { 1, 1, C }))
  ids = nd.where(mask, ids, nd.full_like(ids, { value = -1 }))
  scores = nd.where(mask, scores, nd.zeros_like(scores))
  local T3 = { axes = { 1, 3, 2 } }
  ids = nd.reshape(nd.transpose(ids, T3), { 0, 0, 0, 1 })
  scores = nd.reshape(nd.transpose(scores, T3), { 0, 0, 0, 1 })
  box_pred = nd.transpose(box_pred, { axes = { 1, 3, 2, 4 } })
  local results = {}
  for i = 1, B do
    local bbox = nd.box_decode(box_pred[i], nd.slice_axis(rpn_box, { axis = 1, begin = i,
      ["end"] = i }), { std0 = 0.1, std1 = 0.1, std2 = 0.2, std3 = 0.2, clip = self._clip,
      format = "corner" })
    local res = nd.concat({ ids[i], scores[i], bbox }, { dim = -1 })
    if self.force_nms then res = nd.reshape(res, { 1, -1, 0 }) end
    res = nd.box_nms(res, { overlap_thresh = self.nms_thresh, topk = self.nms_topk,
      valid_thresh = 0.0001, id_index = 1, score_index = 2, coord_start = 3,
      force_suppress = self.force_nms })
    results[i] = nd.reshape(res, { -3, 0 })
  end
  local result = nd.stack(results, { axis = 1 })
  return nd.slice_axis(result, { axis = -1, begin = 1, ["end"] = 1 }),
    nd.slice_axis(result, { axis = -1, begin = 2, ["end"] = 2 }),
    nd.slice_axis(result, { axis = -1, begin = 3, ["end"] = 6 })
end

-- a hybridized network's training calls run this level eagerly (the host samplers)
local hybrid_call = FasterRCNN.__call
FasterRCNN.__call = function(self, ...)
  if autograd.is_training() and rawget(self, "_active") == true then
    return self:forward(...)
  end
  return hybrid_call(self, ...)
end

-- GluonCV's train_patterns ('.*dense|.*rpn|.*down(2|3|4)_conv|.*layers(2|3|4)_conv', on its
-- MXNet 1.x names) over the structural names: the predictors, the RPN and the
-- convolutions of layer2 .. layer4 (features.5, features.6, top_features.0)
local TRAIN_PATTERNS = table.concat({ "class_predictor%.", "box_predictor%.", "rpn%.",
  "features%.[56]%.%d+%.conv", "features%.[56]%.%d+%.downsample%.0%.",
  "top_features%.0%.%d+%.conv", "top_features%.0%.%d+%.downsample%.0%." }, "|")

-- GluonCV's settings of each predefined network (predefined_models.py)
local PRESETS = {
  faster_rcnn_resnet50_v1b_voc = { classes = M.VOC_CLASSES, short = 600, max_size = 1000,
    nms_thresh = 0.3, nms_topk = 400, post_nms = 100, rpn_test_post_nms = 300,
    rpn_min_size = 16 },
  faster_rcnn_resnet50_v1b_coco = { classes = M.COCO_CLASSES, short = 800, max_size = 1333,
    nms_thresh = 0.5, nms_topk = -1, post_nms = -1, clip = 4.14, rpn_test_post_nms = 1000,
    rpn_min_size = 1 },
}
M.PRESETS = PRESETS

local GET_OPTS = { classes = true, pretrained = true, pretrained_base = true, ctx = true,
  root = true, nms_thresh = true, nms_topk = true, post_nms = true, force_nms = true,
  per_device_batch_size = true, num_sample = true, max_num_gt = true,
  rpn_train_pre_nms = true, rpn_train_post_nms = true, rpn_test_pre_nms = true,
  rpn_test_post_nms = true }

local function get(name, opts, level)
  level = level + 1
  local o = check_opts(name, opts, GET_OPTS, level)
  local P = PRESETS[name]
  local base = require("mx.gluoncv.model_zoo.resnetv1b").ResNetV1b(
    require("mx.gluoncv.model_zoo.resnetv1b").DEPTHS[50], { use_global_stats = true })
  local L = U.nn()
  local features, top_features = L.HybridSequential(), L.HybridSequential()
  for _, k in ipairs({ "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3" }) do
    features:add(base[k])
  end
  top_features:add(base.layer4)
  local function pick(k, d)
    if o[k] ~= nil then return o[k] end
    if P[k] ~= nil then return P[k] end
    return d
  end
  local net = FasterRCNN(features, top_features, o.classes or P.classes, {
    short = P.short, max_size = P.max_size, train_patterns = TRAIN_PATTERNS,
    nms_thresh = pick("nms_thresh"), nms_topk = pick("nms_topk"), post_nms = pick("post_nms"),
    force_nms = o.force_nms, roi_mode = "align", roi_size = { 14, 14 }, strides = 16,
    clip = P.clip, rpn_channel = 1024, base_size = 16, scales = { 2, 4, 8, 16, 32 },
    ratios = { 0.5, 1, 2 }, alloc_size = { 128, 128 }, rpn_nms_thresh = 0.7,
    rpn_train_pre_nms = pick("rpn_train_pre_nms", 12000),
    rpn_train_post_nms = pick("rpn_train_post_nms", 2000),
    rpn_test_pre_nms = pick("rpn_test_pre_nms", 6000),
    rpn_test_post_nms = pick("rpn_test_post_nms"), rpn_min_size = P.rpn_min_size,
    per_device_batch_size = o.per_device_batch_size, num_sample = pick("num_sample", 128),
    pos_iou_thresh = 0.5, pos_ratio = 0.25, max_num_gt = pick("max_num_gt", 100) })
  if o.pretrained then
    local path = require("mx.gluon.model_zoo.model_store").get_model_file(name,
      { root = o.root, store = "gluoncv" }, level)
    net:load_parameters(path, { ctx = o.ctx, allow_missing = true, ignore_extra = true })
  end
  return net
end

-- faster_rcnn_resnet50_v1b_voc(opts), faster_rcnn_resnet50_v1b_coco(opts): {classes=,
-- pretrained=false, root=, ctx=, nms_thresh=, nms_topk=, post_nms=, force_nms=,
-- per_device_batch_size=1, num_sample=128, max_num_gt=100, rpn_train_pre_nms=12000,
-- rpn_train_post_nms=2000, rpn_test_pre_nms=6000, rpn_test_post_nms=}; pretrained_base is
-- accepted and ignored (no ImageNet download: load the base's weights yourself)
function M.faster_rcnn_resnet50_v1b_voc(opts)
  return (get("faster_rcnn_resnet50_v1b_voc", opts, 2))
end
function M.faster_rcnn_resnet50_v1b_coco(opts)
  return (get("faster_rcnn_resnet50_v1b_coco", opts, 2))
end

return M
