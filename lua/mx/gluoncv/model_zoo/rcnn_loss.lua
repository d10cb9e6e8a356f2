-- mx.gluoncv.model_zoo.rcnn_loss — the losses of GluonCV 0.11's Faster R-CNN training
-- script (scripts/detection/faster_rcnn/train_faster_rcnn.py, ForwardBackwardTask): the
-- RPN's sigmoid binary cross-entropy and smooth L1 (HuberLoss, rho 1/9) and the RCNN's
-- softmax cross-entropy and smooth L1 (rho 1), each Gluon loss's per-sample mean scaled
-- by the element count over the number of non-ignored targets, summed:
-- total = mix_ratio * (sum(rpn_cls + rpn_box) + sum(rcnn_cls + rcnn_box)).
--
--   local L = require("mx.gluoncv.model_zoo.rcnn_loss").FasterRCNNLoss()
--   local cls_pred, box_pred, _, _, _, rpn_score, rpn_box, _, cls_t, box_t, box_m =
--     net(x, gt_box, gt_label)                            -- in mx.autograd.record
--   local total, rpn_cls, rpn_box_l, rcnn_cls, rcnn_box = L(rpn_score, rpn_box,
--     rpn_cls_targets, rpn_box_targets, rpn_box_masks, cls_pred, box_pred, cls_t, box_t, box_m)
local block = require("mx.gluon.block")
local gloss = require("mx.gluon.loss")
local nd = require("mx.nd")
local check_opts = require("mx.core.class").check_opts

local M = {}

local OPTS = { rpn_smoothl1_rho = true, rcnn_smoothl1_rho = true, mix_ratio = true }

local Loss = block.Block:extend("FasterRCNNLoss")
M.FasterRCNNLoss = Loss

-- FasterRCNNLoss({rpn_smoothl1_rho=1/9, rcnn_smoothl1_rho=1, mix_ratio=1}) (the script's
-- --rpn-smoothl1-rho, --rcnn-smoothl1-rho; mix_ratio 0.5 under mixup)
function Loss:__init(opts)
  block.Block.__init(self)
  local o = check_opts("FasterRCNNLoss", opts, OPTS, 3)
  self._mix = o.mix_ratio or 1
  self.rpn_cls_loss = gloss.SigmoidBinaryCrossEntropyLoss({ from_sigmoid = false })
  self.rpn_box_loss = gloss.HuberLoss({ rho = o.rpn_smoothl1_rho or 1 / 9 })
  self.rcnn_cls_loss = gloss.SoftmaxCrossEntropyLoss()
  self.rcnn_box_loss = gloss.HuberLoss({ rho = o.rcnn_smoothl1_rho or 1 })
end

local function count(t) return nd.sum(nd.greater_equal_scalar(t, { scalar = 0 })) end

-- loss(rpn_score (B, N, 1), rpn_box (B, N, 4), rpn_cls_targets (B, N), rpn_box_targets
-- (B, N, 4), rpn_box_masks, cls_pred (B, S, C + 1), box_pred (B, P, C, 4), cls_targets
-- (B, S), box_targets (B, P, C, 4), box_masks) -> total (1,), rpn_cls, rpn_box, rcnn_cls,
-- rcnn_box (B,)
function Loss:forward(rpn_score, rpn_box, rpn_cls_t, rpn_box_t, rpn_box_m, cls_pred, box_pred,
                      cls_t, box_t, box_m)
  local score = nd.reshape(rpn_score, { 0, -1 })
  local num_rpn = count(rpn_cls_t)
  local valid = nd.greater_equal_scalar(rpn_cls_t, { scalar = 0 })
  local rpn1 = nd.broadcast_div(nd.mul_scalar(self.rpn_cls_loss(score, rpn_cls_t, valid),
    { scalar = rpn_cls_t:size() }), num_rpn)
  local rpn2 = nd.broadcast_div(nd.mul_scalar(self.rpn_box_loss(rpn_box, rpn_box_t, rpn_box_m),
    { scalar = rpn_box:size() }), num_rpn)
  local num_rcnn = count(cls_t)
  local cvalid = nd.expand_dims(nd.greater_equal_scalar(cls_t, { scalar = 0 }), { axis = -1 })
  local rcnn1 = nd.broadcast_div(nd.mul_scalar(self.rcnn_cls_loss(cls_pred, cls_t, cvalid),
    { scalar = cls_t:size() }), num_rcnn)
  local rcnn2 = nd.broadcast_div(nd.mul_scalar(self.rcnn_box_loss(box_pred, box_t, box_m),
    { scalar = box_pred:size() }), num_rcnn)
  local total = nd.reshape(nd.mul_scalar(nd.add(nd.sum(nd.add(rpn1, rpn2)),
    nd.sum(nd.add(rcnn1, rcnn2))), { scalar = self._mix }), { 1 })
  return total, rpn1, rpn2, rcnn1, rcnn2
end

return M
