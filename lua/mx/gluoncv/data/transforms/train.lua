-- mx.gluoncv.data.transforms.train — GluonCV 0.11's training presets
-- (presets.ssd.SSDDefaultTrainTransform, presets.yolo.YOLO3DefaultTrainTransform): colour
-- distortion, a random expansion (probability 1/2, filled with the mean colour), an
-- IoU-constrained random crop, a resize to (width, height) with a random interpolation, a
-- random horizontal flip, to_tensor and normalisation, then (given anchors / a network) the
-- training targets. The draws are GluonCV's, in its order, from the transform's rng.
--
--   local P = require("mx.gluoncv").data.transforms.presets
--   local t = P.ssd.SSDDefaultTrainTransform(300, 300, anchors)   -- anchors (1, N, 4)
--   local x, cls_t, box_t = t(img, label)   -- img (H, W, 3) uint8, label {{x1, y1, x2, y2, id}}
local nd = require("mx.nd")
local R = require("mx.gluoncv.data.transforms.rng")
local B = require("mx.gluoncv.data.transforms.bbox")
local I = require("mx.gluoncv.data.transforms.image")
local X = require("mx.gluoncv.data.transforms.experimental")
local check_opts = require("mx.core.class").check_opts

local M = {}

local MEAN, STD = { 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }

local function size_arg(who, name, v, level)
  if type(v) ~= "number" or v % 1 ~= 0 or v < 1 then
    error(string.format("%s: %s must be a positive integer, got %s", who, name, tostring(v)),
      level + 1)
  end
end

local function triple(who, name, v, level)
  if type(v) ~= "table" or #v ~= 3 then
    error(string.format("%s: %s must be 3 numbers", who, name), level + 1)
  end
end

-- the augmentation both presets share: image (3, height, width) float32 and the boxes (rows)
local function augment(self, src, label)
  local rng = self.rng or R.default()
  local img = X.image.random_color_distort(src, { rng = rng })
  local bbox = label
  if rng:uniform(0, 1) > 0.5 then
    local fill = {}
    for i, m in ipairs(self._mean) do fill[i] = m * 255 end
    local expand
    img, expand = I.random_expand(img, 4, fill, true, rng)
    bbox = B.translate(label, expand[1], expand[2])
  end
  local s = img:shape()
  local crop
  bbox, crop = X.bbox.random_crop_with_constraints(bbox, { s[2], s[1] }, { rng = rng })
  img = require("mx.image").fixed_crop(img, crop[1], crop[2], crop[3], crop[4])
  local h, w = crop[4], crop[3]
  local interp = rng:randint(0, 4)
  img = I.imresize(img, self._width, self._height, interp)
  bbox = B.resize(bbox, { w, h }, { self._width, self._height })
  local flips
  img, flips = I.random_flip(img, 0.5, 0, false, rng)
  bbox = B.flip(bbox, { self._width, self._height }, flips[1])
  local x = nd.to_tensor(img)
  x = nd.div(nd.sub(x, nd.reshape(nd.array(self._mean), { 3, 1, 1 })),
    nd.reshape(nd.array(self._std), { 3, 1, 1 }))
  return x, bbox
end

local function label_rows(who, label, level)
  local rows = B._rows_of(who, label, level + 1)
  for i, r in ipairs(rows) do
    if #r < 5 then
      error(string.format("%s: label[%d] must be {x1, y1, x2, y2, class id, ...}", who, i), level + 1)
    end
  end
  return rows
end

local function as_tensor(rows, k)
  if #rows == 0 then return nd.zeros({ 0, k }) end
  return nd.array(rows, { dtype = "float32" })
end

local function columns(rows, a, b)
  local out = {}
  for i, r in ipairs(rows) do
    local c = {}
    for j = a, b do c[#c + 1] = r[j] end
    out[i] = c
  end
  return nd.expand_dims(nd.array(out, { dtype = "float32" }), { axis = 1 })
end

local function check_src(who, src, level)
  if not nd.is_tensor(src) or src:ndim() ~= 3 or src:shape()[3] ~= 3 then
    error(who .. ": src must be an (H, W, 3) image NDArray", level + 1)
  end
end

---------------------------------------------------------------- SSD
local SSD = {}
SSD.__index = SSD
local SSD_OPTS = { rng = true, neg_thresh = true }

-- SSDDefaultTrainTransform(width, height, anchors=nil, mean=ImageNet's, std=ImageNet's,
-- iou_thresh=0.5, box_norm={0.1, 0.1, 0.2, 0.2}, {rng=, neg_thresh=}): t(src, label) ->
-- image (3, height, width) and boxes (N, K) float32 without anchors; with anchors (1, N, 4)
-- image, class targets (N,) and box targets (N, 4) of SSDTargetGenerator (no negative
-- mining: every unmatched anchor a negative)
function M.SSDDefaultTrainTransform(width, height, anchors, mean, std, iou_thresh, box_norm, opts)
  local who = "SSDDefaultTrainTransform"
  size_arg(who, "width", width, 2)
  size_arg(who, "height", height, 2)
  if anchors ~= nil and not (nd.is_tensor(anchors) and anchors:ndim() == 3
      and anchors:shape()[1] == 1 and anchors:shape()[3] == 4) then
    error(who .. ": anchors must be a (1, N, 4) NDArray", 2)
  end
  if mean ~= nil then triple(who, "mean", mean, 2) end
  if std ~= nil then triple(who, "std", std, 2) end
  local o = check_opts(who, opts, SSD_OPTS, 2)
  local self = setmetatable({ _width = width, _height = height, _anchors = anchors,
    _mean = mean or MEAN, _std = std or STD, rng = o.rng }, SSD)
  if anchors then
    self._target = require("mx.gluoncv.model_zoo.ssd_target").SSDTargetGenerator({
      iou_thresh = iou_thresh or 0.5, stds = box_norm or { 0.1, 0.1, 0.2, 0.2 },
      negative_mining_ratio = -1, neg_thresh = o.neg_thresh })
  end
  return self
end

-- both presets' first half: the checked inputs through the augmentation; the label's
-- column count (5 by default)
local function augmented(self, who, src, label)
  check_src(who, src, 3)
  local rows = label_rows(who, label, 3)
  local x, bbox = augment(self, src, rows)
  return x, bbox, #rows > 0 and #rows[1] or 5
end

function SSD:__call(src, label)
  local x, bbox, k = augmented(self, "SSDDefaultTrainTransform", src, label)
  if not self._anchors then return x, as_tensor(bbox, k) end
  local gt_boxes, gt_ids = columns(bbox, 1, 4), columns(bbox, 5, 5)
  local cls_t, box_t = self._target(self._anchors, nil, gt_boxes, gt_ids)
  return x, nd.reshape(cls_t, { -1 }), nd.reshape(box_t, { -1, 4 })
end

---------------------------------------------------------------- YOLOv3
local YOLO = {}
YOLO.__index = YOLO
local YOLO_OPTS = { rng = true }

-- YOLO3DefaultTrainTransform(width, height, net=nil, mean=, std=, mixup=false, {rng=}):
-- t(src, label) -> image (3, height, width) and boxes (N, K) float32 without a network; with
-- one (a YOLOV3, run once in training mode on zeros for its anchors, offsets and feature
-- maps) image, objectness (N, 1), centre targets (N, 2), scale targets (N, 2), weights
-- (N, 2), class targets (N, C) of YOLOV3PrefetchTargetGenerator and the boxes (M, 4); with
-- mixup the label's last column is the mix ratio
function M.YOLO3DefaultTrainTransform(width, height, net, mean, std, mixup, opts)
  local who = "YOLO3DefaultTrainTransform"
  size_arg(who, "width", width, 2)
  size_arg(who, "height", height, 2)
  if mean ~= nil then triple(who, "mean", mean, 2) end
  if std ~= nil then triple(who, "std", std, 2) end
  local o = check_opts(who, opts, YOLO_OPTS, 2)
  local self = setmetatable({ _width = width, _height = height, _mean = mean or MEAN,
    _std = std or STD, _mixup = mixup and true or false, rng = o.rng }, YOLO)
  if net ~= nil then
    local classes = type(net) == "table" and (net.classes or net._classes)
    if type(classes) ~= "table" then
      error(who .. ": net must be a YOLOV3 network (with classes)", 2)
    end
    self._fake_x = nd.zeros({ 1, 3, height, width })
    local autograd = require("mx.autograd")
    local outs
    autograd.train_mode(function() outs = { net(self._fake_x) } end)
    self._anchors, self._offsets, self._feat_maps = outs[2], outs[3], outs[4]
    self._target = require("mx.gluoncv.model_zoo.yolo_target")
      .YOLOV3PrefetchTargetGenerator(#classes)
  end
  return self
end

function YOLO:__call(src, label)
  local x, bbox, k = augmented(self, "YOLO3DefaultTrainTransform", src, label)
  if not self._target then return x, as_tensor(bbox, k) end
  local gt_boxes, gt_ids = columns(bbox, 1, 4), columns(bbox, 5, 5)
  local mix = self._mixup and columns(bbox, k, k) or nil
  local obj, ctr, scl, wts, cls = self._target(self._fake_x, self._feat_maps, self._anchors,
    self._offsets, gt_boxes, gt_ids, mix)
  local first = function(t) return nd.reshape(t, { -1, t:shape()[3] }) end
  return x, first(obj), first(ctr), first(scl), first(wts), first(cls),
    nd.reshape(gt_boxes, { -1, 4 })
end

return M
