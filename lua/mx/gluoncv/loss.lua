-- mx.gluoncv.loss — GluonCV 0.10's detection losses (gluoncv/loss.py): SSDMultiBoxLoss, the
-- softmax cross-entropy of positives and hard negatives plus the smooth-L1 box loss of the
-- positives, both over the positives of the whole batch (all devices' parts together); and
-- its segmentation losses SoftmaxCrossEntropyLoss and MixSoftmaxCrossEntropyLoss (main +
-- aux_weight x auxiliary output).
--
--   local loss = require("mx.gluoncv.loss").SSDMultiBoxLoss()
--   local sum, cls, box = loss(cls_pred, box_pred, cls_target, box_target)
--   -- cls_pred (B, N, C+1), box_pred (B, N, 4), cls_target (B, N) (0 background, -1 ignored:
--   -- 0-based class ids + 1 as multibox_target gives), box_target (B, N, 4)
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local check_opts = require("mx.core.class").check_opts

local M = {}

local OPTS = { negative_mining_ratio = true, rho = true, lambd = true, min_hard_negatives = true }

local SSDMultiBoxLoss = block.Block:extend("SSDMultiBoxLoss")
M.SSDMultiBoxLoss = SSDMultiBoxLoss

-- SSDMultiBoxLoss({negative_mining_ratio=3, rho=1, lambd=1, min_hard_negatives=0})
function SSDMultiBoxLoss:__init(opts)
  block.Block.__init(self)
  local o = check_opts("SSDMultiBoxLoss", opts, OPTS, 3)
  self._ratio = math.max(0, o.negative_mining_ratio or 3)
  self._rho, self._lambd = o.rho or 1, o.lambd or 1
  self._min_hard = math.max(0, o.min_hard_negatives or 0)
end

local function as_list(x) return nd.is_tensor(x) and { x } or x end

-- forward(cls_pred, box_pred, cls_target, box_target): tensors or lists of them (one per
-- device) -> lists of per-sample losses sum, cls, box (B,) each
function SSDMultiBoxLoss:forward(cls_pred, box_pred, cls_target, box_target)
  cls_pred, box_pred = as_list(cls_pred), as_list(box_pred)
  cls_target, box_target = as_list(cls_target), as_list(box_target)
  local num_pos = 0
  for _, ct in ipairs(cls_target) do
    num_pos = num_pos + nd.sum(nd.greater_scalar(ct, { scalar = 0 })):item()
  end
  local sums, clss, boxes = {}, {}, {}
  if num_pos < 1 and self._min_hard < 1 then
    -- no positives and no hard negatives: zero losses that keep the graph
    for i, cp in ipairs(cls_pred) do
      clss[i] = nd.sum(nd.mul_scalar(cp, { scalar = 0 }))
      boxes[i] = nd.sum(nd.mul_scalar(box_pred[i], { scalar = 0 }))
      sums[i] = nd.add(clss[i], boxes[i])
    end
    return sums, clss, boxes
  end
  local denom = math.max(1, num_pos)
  local rho = self._rho
  for i, cp in ipairs(cls_pred) do
    local ct, bt = cls_target[i], box_target[i]
    local pred = nd.log_softmax(cp, { axis = -1 })
    local pos = nd.greater_scalar(ct, { scalar = 0 })
    -- pick takes 1-based positions: the class id + 1 (ignored -1 rows pick the background
    -- and are masked out below)
    local idx = nd.maximum_scalar(nd.add_scalar(ct, { scalar = 1 }), { scalar = 1 })
    local cls_loss = nd.mul_scalar(nd.pick(pred, idx, { axis = -1 }), { scalar = -1 })
    -- hard negatives: the highest losses among non-positives, 0-based rank < max(min, npos *
    -- ratio)
    local key = nd.mul(cls_loss, nd.sub_scalar(pos, { scalar = 1 }))
    local rank = nd.argsort(nd.argsort(key, { axis = 2 }), { axis = 2 }):astype(cp:dtype())
    local limit = nd.maximum_scalar(nd.mul_scalar(nd.sum(pos, { axis = 2 }),
      { scalar = self._ratio }), { scalar = self._min_hard })
    local hard = nd.lesser(nd.sub_scalar(rank, { scalar = 1 }),
      nd.expand_dims(limit, { axis = -1 }))
    local keep = nd.greater_scalar(nd.add(pos, hard), { scalar = 0 })
    cls_loss = nd.where(keep, cls_loss, nd.zeros_like(cls_loss))
    clss[i] = nd.div_scalar(nd.sum(cls_loss, { axis = 2 }), { scalar = denom })
    local bp = nd.reshape_like(box_pred[i], bt)
    local d = nd.abs(nd.sub(bp, bt))
    local l = nd.where(nd.greater_scalar(d, { scalar = rho }),
      nd.sub_scalar(d, { scalar = 0.5 * rho }), nd.mul_scalar(nd.square(d), { scalar = 0.5 / rho }))
    l = nd.mul(l, nd.expand_dims(pos, { axis = -1 }))
    boxes[i] = nd.div_scalar(nd.sum(l, { axis = { 2, 3 } }), { scalar = denom })
    sums[i] = nd.add(clss[i], nd.mul_scalar(boxes[i], { scalar = self._lambd }))
  end
  return sums, clss, boxes
end

---------------------------------------------------------------- YOLOv3
-- YOLOV3Loss(): GluonCV's: loss(objness, box_centers, box_scales, cls_preds, objness_t,
-- center_t, scale_t, weight_t, class_t, class_mask) on the network's raw training outputs
-- (B, N, 1 / 2 / 2 / C) and YOLOV3TargetMerger's targets returns per-sample sums (B,) of:
-- the objectness logistic loss (positives 1, negatives 0, ignored -1 rows masked; a positive
-- weighs its mix ratio), the logistic loss of the centres and the L1 loss of the scales
-- (weighted by weight_t on positives), and the per-class logistic loss of positives' classes.
local YOLOV3Loss = block.Block:extend("YOLOV3Loss")
M.YOLOV3Loss = YOLOV3Loss
function YOLOV3Loss:__init(opts)
  block.Block.__init(self)
  check_opts("YOLOV3Loss", opts, {}, 3)
  local gloss = require("mx.gluon.loss")
  self._sigmoid_ce = gloss.SigmoidBCELoss({ from_sigmoid = false })
  self._l1_loss = gloss.L1Loss()
end

local ZERO = { scalar = 0 }
local function yolo_loss(self, objness, box_centers, box_scales, cls_preds, objness_t,
                         center_t, scale_t, weight_t, class_t, class_mask)
  local args = { objness, box_centers, box_scales, cls_preds, objness_t, center_t, scale_t,
    weight_t, class_t, class_mask }
  for i = 1, 10 do
    if not nd.is_tensor(args[i]) then
      error(string.format("YOLOV3Loss: argument %d must be a tensor, got %s", i,
        type(args[i])), 0)
    end
  end
  local os_ = objness_t:shape()
  local denorm = 1
  for i = 2, #os_ do denorm = denorm * os_[i] end
  weight_t = nd.broadcast_mul(weight_t, objness_t)
  local pos = nd.greater_scalar(objness_t, ZERO)
  local hard = nd.where(pos, nd.ones_like(objness_t), objness_t)
  local mask = nd.where(pos, objness_t, nd.greater_equal_scalar(objness_t, ZERO))
  local obj_loss = nd.mul_scalar(self._sigmoid_ce(objness, hard, mask), { scalar = denorm })
  local center_loss = nd.mul_scalar(self._sigmoid_ce(box_centers, center_t, weight_t),
    { scalar = denorm * 2 })
  local scale_loss = nd.mul_scalar(self._l1_loss(box_scales, scale_t, weight_t),
    { scalar = denorm * 2 })
  local cs = class_t:shape()
  local denorm_class = 1
  for i = 2, #cs do denorm_class = denorm_class * cs[i] end
  class_mask = nd.broadcast_mul(class_mask, objness_t)
  local cls_loss = nd.mul_scalar(self._sigmoid_ce(cls_preds, class_t, class_mask),
    { scalar = denorm_class })
  return obj_loss, center_loss, scale_loss, cls_loss
end

-- loss(...) -> obj_loss, center_loss, scale_loss, cls_loss (B,) each
function YOLOV3Loss:__call(...)
  local r = { pcall(yolo_loss, self, ...) }
  if not r[1] then error((tostring(r[2]):gsub("^[^\n]-:%d+: ", "")), 2) end
  return r[2], r[3], r[4], r[5]
end
function YOLOV3Loss:forward(...) return yolo_loss(self, ...) end

---------------------------------------------------------------- segmentation
-- SoftmaxCrossEntropyLoss({ignore_label=-1, size_average=true}): GluonCV's segmentation loss
-- (not Gluon's SoftmaxCELoss): MXNet's SoftmaxOutput over the class axis (2) of (B, C, H, W)
-- scores, labels (B, H, W) 0-based class ids; per sample the mean over all pixels of
-- -log p[label], ignore_label pixels counting 0. Its gradient is SoftmaxOutput's, as in
-- GluonCV: (softmax - onehot) divided by the batch's valid pixels (size_average) or not,
-- whatever head gradient arrives.
local SEG_OPTS = { ignore_label = true, size_average = true }
local SCE = block.Block:extend("SoftmaxCrossEntropyLoss")
M.SoftmaxCrossEntropyLoss = SCE
local function sce_init(self, who, o, level)
  local ig = o.ignore_label == nil and -1 or o.ignore_label
  if type(ig) ~= "number" or ig % 1 ~= 0 then
    error(who .. ": ignore_label must be an integer, got " .. tostring(ig), level + 1)
  end
  self._ignore = ig
  self._so = { ignore_label = ig, multi_output = true, use_ignore = true,
    normalization = o.size_average == false and "null" or "valid" }
  self._ig = { scalar = ig }
end
function SCE:__init(opts)
  block.Block.__init(self)
  sce_init(self, "SoftmaxCrossEntropyLoss", check_opts("SoftmaxCrossEntropyLoss", opts,
    SEG_OPTS, 3), 3)
end

local ONE, AX2K = { scalar = 1 }, { axis = 2, keepdims = true }
local function sce(self, pred, label)
  local ps, ls = pred:shape(), label:shape()
  if #ps < 2 or #ls ~= #ps - 1 or ls[1] ~= ps[1] then
    error(string.format("%s: label (%s) must be pred's shape (%s) without the class axis",
      getmetatable(self).__name, table.concat(ls, ", "), table.concat(ps, ", ")), 0)
  end
  label = label:astype(pred:dtype())
  local out = nd.softmax_output(pred, label, self._so)
  -- pick takes 1-based positions: class id + 1 (ignored pixels are zeroed below)
  local l = nd.neg(nd.pick(nd.log(out), nd.add_scalar(label, ONE), AX2K))
  local ignored = nd.expand_dims(nd.equal_scalar(label, self._ig), { axis = 2 })
  l = nd.where(ignored, nd.zeros_like(l), l)
  local axes = {}
  for i = 2, #ps do axes[#axes + 1] = i end
  return nd.mean(l, { axis = axes })
end

-- loss(...) runs forward; an error blames the caller's line
local function call(self, ...)
  local ok, r = pcall(self.forward, self, ...)
  if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", "")), 2) end
  return r
end
SCE.__call = call

-- loss(pred, label) -> (B,)
function SCE:forward(pred, label) return sce(self, pred, label) end

-- MixSoftmaxCrossEntropyLoss({aux=true, aux_weight=0.2, ignore_label=-1, size_average=true}):
-- loss(pred1, pred2, label) = loss of the main output + aux_weight * loss of the auxiliary
-- one (FCN / DeepLabV3's two outputs); loss(pred, label) without aux
local MIX_OPTS = { aux = true, aux_weight = true, ignore_label = true, size_average = true }
local Mix = SCE:extend("MixSoftmaxCrossEntropyLoss")
M.MixSoftmaxCrossEntropyLoss = Mix
function Mix:__init(opts)
  block.Block.__init(self)
  local o = check_opts("MixSoftmaxCrossEntropyLoss", opts, MIX_OPTS, 3)
  sce_init(self, "MixSoftmaxCrossEntropyLoss", o, 3)
  self.aux = o.aux == nil and true or o.aux
  self.aux_weight = o.aux_weight or 0.2
  if type(self.aux_weight) ~= "number" then
    error("MixSoftmaxCrossEntropyLoss: aux_weight must be a number, got "
      .. type(self.aux_weight), 3)
  end
end
local function mix(self, pred1, pred2, label)
  if not self.aux then return sce(self, pred1, pred2) end
  if label == nil then
    error("MixSoftmaxCrossEntropyLoss: with aux it takes (pred1, pred2, label)", 0)
  end
  return nd.add(sce(self, pred1, label),
    nd.mul_scalar(sce(self, pred2, label), { scalar = self.aux_weight }))
end
function Mix:forward(pred1, pred2, label) return mix(self, pred1, pred2, label) end
Mix.__call = call

return M
