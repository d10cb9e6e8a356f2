-- mx.gluoncv.model_zoo.ssd_target — GluonCV 0.10's SSDTargetGenerator
-- (gluoncv/model_zoo/ssd/target.py): anchors matched to ground truths by bipartite matching
-- (plus each ground truth's best anchors, ties shared) then by IoU >= iou_thresh; negatives
-- all the others (negative_mining_ratio <= 0) or the hardest by background loss below
-- neg_thresh IoU (OHEM, ratio x positives); class targets (id + 1, 0 background, -1 ignored)
-- and normalised centre offsets with their masks, as SSDMultiBoxLoss takes them.
--
--   local T = require("mx.gluoncv.model_zoo.ssd_target").SSDTargetGenerator()
--   local cls_t, box_t, box_m = T(anchors, cls_preds, gt_boxes, gt_ids)
--   -- anchors (1, N, 4) centre format (SSD's anchor generators), cls_preds (B, N, C+1),
--   -- gt_boxes (B, M, 4) corners, gt_ids (B, M, 1) 0-based ids
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local check_opts = require("mx.core.class").check_opts

local M = {}

local OPTS = { iou_thresh = true, neg_thresh = true, negative_mining_ratio = true, stds = true }

local Target = block.Block:extend("SSDTargetGenerator")
M.SSDTargetGenerator = Target

-- SSDTargetGenerator({iou_thresh=0.5, neg_thresh=0.5, negative_mining_ratio=3,
-- stds={0.1, 0.1, 0.2, 0.2}})
function Target:__init(opts)
  block.Block.__init(self)
  local o = check_opts("SSDTargetGenerator", opts, OPTS, 3)
  self._iou, self._neg = o.iou_thresh or 0.5, o.neg_thresh or 0.5
  self._ratio = o.negative_mining_ratio or 3
  self._stds = o.stds or { 0.1, 0.1, 0.2, 0.2 }
end

local EPS = 1e-12

-- matches (B, N): each anchor's 1-based ground truth, 0 for none (CompositeMatcher of
-- BipartiteMatcher(share_max=false) and MaximumMatcher(iou_thresh))
local function match(ious, thresh)
  local bip = nd.bipartite_matching(ious, { threshold = EPS })
  local best = nd.argmax(ious, { axis = -1, keepdims = true })
  local bestf = best:astype(ious:dtype())
  local pmax = nd.pick(ious, bestf, { axis = -1, keepdims = true })
  local maxs = nd.max(ious, { axis = -2, keepdims = true })
  local mask = nd.pick(nd.greater_equal(nd.add_scalar(pmax, { scalar = EPS }), maxs), bestf,
    { axis = -1, keepdims = true })
  local own = nd.reshape(nd.where(nd.greater_scalar(mask, { scalar = 0 }), bestf,
    nd.zeros_like(bestf)), { 0, -1 })
  local m = nd.where(nd.greater_scalar(bip, { scalar = 0 }), bip, own)
  local flat = nd.reshape(bestf, { 0, -1 })
  local maxm = nd.where(nd.greater_equal_scalar(nd.reshape(pmax, { 0, -1 }), { scalar = thresh }),
    flat, nd.zeros_like(flat))
  return nd.where(nd.greater_scalar(m, { scalar = 0 }), m, maxm)
end

-- OHEMSampler: 1 for matched anchors, -1 for the hardest unmatched ones (background loss,
-- IoU below thresh; ratio x positives, at most the unmatched count), 0 for the rest
local function ohem(matches, logits, ious, ratio, thresh)
  local m = matches:totable()
  local l = logits:totable()
  local best = nd.max(ious, { axis = 3 }):totable()
  local out = {}
  for b = 1, #m do
    local row, npos, cand = {}, 0, {}
    for i = 1, #m[b] do
      if m[b][i] > 0 then row[i] = 1 npos = npos + 1 else row[i] = 0 end
    end
    local nneg = math.min(math.max(0, ratio * npos), #m[b] - npos)
    nneg = nneg >= 0 and math.floor(nneg) or 0
    for i = 1, #m[b] do
      local s = -1
      if m[b][i] == 0 and best[b][i] < thresh then
        local lg = l[b][i]
        local mx = -math.huge
        for c = 2, #lg do mx = math.max(mx, lg[c]) end
        local sum = 0
        for c = 1, #lg do sum = sum + math.exp(lg[c] - mx) end
        s = -math.log(math.exp(lg[1] - mx) / sum)
      end
      cand[i] = { s, i }
    end
    table.sort(cand, function(x, y)
      if x[1] ~= y[1] then return x[1] > y[1] end
      return x[2] < y[2]
    end)
    for k = 1, nneg do row[cand[k][2]] = -1 end
    out[b] = row
  end
  return nd.array(out, { dtype = logits:dtype() })
end

function Target:forward(anchors, cls_preds, gt_boxes, gt_ids)
  local a = nd.reshape(anchors, { -1, 4 })
  local cut = function(k) return nd.slice_axis(a, { axis = 2, begin = k, ["end"] = k }) end
  local cx, cy, w, h = cut(1), cut(2), cut(3), cut(4)
  local hw, hh = nd.div_scalar(w, { scalar = 2 }), nd.div_scalar(h, { scalar = 2 })
  a = nd.concat({ nd.sub(cx, hw), nd.sub(cy, hh), nd.add(cx, hw), nd.add(cy, hh) }, { dim = 2 })
  local ious = nd.transpose(nd.box_iou(a, gt_boxes), { axes = { 2, 1, 3 } })
  local matches = match(ious, self._iou)
  local samples
  if self._ratio > 0 then
    samples = ohem(matches, cls_preds, ious, self._ratio, self._neg)
  else
    samples = nd.where(nd.greater_scalar(matches, { scalar = 0 }), nd.ones_like(matches),
      nd.full_like(matches, { value = -1 }))
  end
  -- MultiClassEncoder: the matched ground truth's id + 1, 0 for negatives, -1 otherwise
  local B, N = matches:shape()[1], matches:shape()[2]
  local ids = nd.broadcast_to(nd.reshape(gt_ids, { 0, 1, -1 }),
    { shape = { B, N, gt_ids:shape()[2] } })
  local safe = nd.maximum_scalar(matches, { scalar = 1 })
  local tid = nd.add_scalar(nd.pick(ids, safe, { axis = 3 }), { scalar = 1 })
  local cls = nd.where(nd.greater_scalar(samples, { scalar = 0.5 }), tid,
    nd.full_like(tid, { value = -1 }))
  cls = nd.where(nd.lesser_scalar(samples, { scalar = -0.5 }), nd.zeros_like(cls), cls)
  local s = self._stds
  local targets, masks = nd.box_encode(samples, matches,
    nd.broadcast_to(nd.expand_dims(a, { axis = 1 }), { shape = { B, N, 4 } }), gt_boxes,
    nd.array({ 0, 0, 0, 0 }, { dtype = a:dtype() }), nd.array(s, { dtype = a:dtype() }))
  return cls, targets, masks
end

return M
