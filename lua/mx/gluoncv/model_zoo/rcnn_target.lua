-- mx.gluoncv.model_zoo.rcnn_target — GluonCV 0.11's Faster R-CNN training targets
-- (gluoncv/model_zoo/rcnn/rpn/rpn_target.py, faster_rcnn/rcnn_target.py, nn/coder.py):
--   RPNTargetGenerator: anchors to ground truths (IoU >= pos or each ground truth's best
--     anchors positive, < neg negative, anchors beyond the image ignored), at most
--     pos_ratio * num_sample positives and num_sample in all; sigmoid class targets and
--     box offsets (the data transform's step, per image).
--   RCNNTargetSampler: the RPN's proposals and the ground truths, shuffled, the first
--     pos_ratio * num_sample of the positives (IoU >= pos_iou_thresh) then negatives, sorted
--     by area, as GluonCV's argsorts order them (rcnn_sort: MXNet's CPU argsort).
--   RCNNTargetGenerator: class targets (id + 1, 0 background, -1 ignored) and per-class
--     box targets and masks of the first max_pos samples by positivity.
-- Matches are 1-based here (GluonCV's are 0-based): the position of the ground truth.
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local ffi = require("ffi")
local argsort = require("mx.gluoncv.model_zoo.rcnn_sort").argsort
local check_opts = require("mx.core.class").check_opts

local floor = math.floor

local M = {}

local f32 = ffi.new("float[1]")
local function round32(v)
  f32[0] = v
  return f32[0]
end
local EPS32 = 2 ^ -23 -- np.spacing(np.float32(1))

local function rows_of(t) return type(t) == "table" and t or t:totable() end

-- uniform(n): n uniforms in [0, 1) from mx.random (a Lua list)
local function uniform(n)
  return nd.random.uniform({ low = 0, high = 1, shape = { n } }):totable()
end

---------------------------------------------------------------- RPN targets
local RPN_OPTS = { num_sample = true, pos_iou_thresh = true, neg_iou_thresh = true,
  pos_ratio = true, stds = true, allowed_border = true }

-- RPNTargetGenerator({num_sample=256, pos_iou_thresh=0.7, neg_iou_thresh=0.3, pos_ratio=0.5,
-- stds={1, 1, 1, 1}}): gen(bbox (M, 4), anchor (N, 4), width, height) -> cls_target (N,)
-- (1 positive, 0 negative, -1 ignored), box_target (N, 4), box_mask (N, 4). Past the quotas
-- the surplus samples are dropped at random (GluonCV: np.random.choice; here mx.random,
-- or gen.choice(candidates, k) when set: the k 1-based anchor positions to drop).
local RPNTarget = block.Block:extend("RPNTargetGenerator")
M.RPNTargetGenerator = RPNTarget
function RPNTarget:__init(opts)
  block.Block.__init(self)
  local o = check_opts("RPNTargetGenerator", opts, RPN_OPTS, 3)
  self._num_sample = o.num_sample or 256
  self._pos_iou_thresh = o.pos_iou_thresh or 0.7
  self._neg_iou_thresh = o.neg_iou_thresh or 0.3
  self._max_pos = floor((self._num_sample * (o.pos_ratio or 0.5)) + 0.5)
  self._stds = o.stds or { 1, 1, 1, 1 }
end

-- k of the candidates (1-based positions) to drop, drawn by mx.random
local function random_drop(cand, k)
  local u = uniform(#cand)
  local order = {}
  for i = 1, #cand do order[i] = i end
  table.sort(order, function(a, b) return u[a] < u[b] end)
  local out = {}
  for i = 1, k do out[i] = cand[order[i]] end
  return out
end

-- sample(ious): samples (1 / -1 / 0) and 1-based matches, Lua lists (RPNTargetSampler)
function RPNTarget:sample(ious)
  local n, m = #ious, #ious[1]
  local matches, best = {}, {}
  local col = {}
  for j = 1, m do col[j] = -math.huge end
  for i = 1, n do
    local r, bj, bv = ious[i], 1, ious[i][1]
    for j = 2, m do
      if r[j] > bv then bj, bv = j, r[j] end
    end
    matches[i], best[i] = bj, bv
    for j = 1, m do
      if r[j] > col[j] then col[j] = r[j] end
    end
  end
  local samples = {}
  local pos, neg = self._pos_iou_thresh, self._neg_iou_thresh
  for i = 1, n do
    local s, r = 0, ious[i]
    for j = 1, m do
      -- float32 arithmetic, as NumPy's on float32 IoUs
      if round32(r[j] + EPS32) > col[j] then
        s = 1
        break
      end
    end
    if best[i] >= pos then s = 1 end
    if best[i] < neg and best[i] >= 0 then s = -1 end
    samples[i] = s
  end
  local drop = self.choice or random_drop
  local function subsample(sign, quota)
    local cand = {}
    for i = 1, n do
      if samples[i] == sign then cand[#cand + 1] = i end
    end
    if #cand > quota then
      for _, i in ipairs(drop(cand, #cand - quota)) do samples[i] = 0 end
    end
    return #cand
  end
  local num_pos = subsample(1, self._max_pos)
  subsample(-1, self._num_sample - math.min(num_pos, self._max_pos))
  return samples, matches
end

function RPNTarget:forward(bbox, anchor, width, height)
  local ious = rows_of(nd.box_iou(anchor, bbox))
  local a = rows_of(anchor)
  for i, r in ipairs(a) do
    if r[1] < 0 or r[2] < 0 or r[3] >= width or r[4] >= height then
      local row = ious[i]
      for j = 1, #row do row[j] = -1 end
    end
  end
  local samples, matches = self:sample(ious)
  local cls = {}
  for i, s in ipairs(samples) do cls[i] = s == 0 and -1 or (s + 1) / 2 end
  local dt = anchor:dtype()
  local s = nd.array({ samples }, { dtype = dt })
  local t, mask = nd.box_encode(s, nd.array({ matches }, { dtype = dt }),
    nd.expand_dims(anchor, { axis = 1 }), nd.expand_dims(bbox, { axis = 1 }),
    nd.zeros({ 4 }, { dtype = dt }), nd.array(self._stds, { dtype = dt }))
  return nd.array(cls, { dtype = dt }), t[1], mask[1]
end

---------------------------------------------------------------- RCNN sampler
local SAMPLER_OPTS = { num_image = true, num_proposal = true, num_sample = true,
  pos_iou_thresh = true, pos_ratio = true, max_num_gt = true }

-- RCNNTargetSampler({num_image, num_proposal, num_sample, pos_iou_thresh, pos_ratio,
-- max_num_gt}): sampler(rois (B, P, 4), scores (B, P, 1), gt_boxes (B, M, 4)) -> rois
-- (B, num_sample, 4), samples (B, num_sample) (1 positive, -1 negative, 0 ignored) and
-- matches (B, num_sample), 1-based. The shuffle draws num_proposal + max_num_gt uniforms per
-- image from mx.random, or takes them from sampler.rand(i, n) when set (image i).
local Sampler = block.Block:extend("RCNNTargetSampler")
M.RCNNTargetSampler = Sampler
function Sampler:__init(opts)
  block.Block.__init(self)
  local o = check_opts("RCNNTargetSampler", opts, SAMPLER_OPTS, 3)
  self._num_image, self._num_proposal = o.num_image, o.num_proposal
  self._num_sample = o.num_sample
  self._max_pos = floor(o.num_sample * o.pos_ratio + 0.5)
  self._pos_iou_thresh = o.pos_iou_thresh
  self._max_num_gt = o.max_num_gt
end

local function take(list, idx)
  local out = {}
  for i, k in ipairs(idx) do out[i] = list[k] end
  return out
end

-- one image: the sampled positions into [rois; gt_boxes], samples and matches
function Sampler:_one(all_roi, score, gt, rand)
  local ious = nd.box_iou(all_roi, gt)
  local imax = nd.max(ious, { axis = -1 }):totable()
  local iarg = nd.argmax(ious, { axis = -1 }):totable()
  local n = #imax
  local mask = {}
  for i = 1, n do
    local v = 2
    if score[i] < 0 then v = 0 end
    if imax[i] >= self._pos_iou_thresh then v = 3 end
    mask[i] = v
  end
  local r = {}
  for i = 1, n do r[i] = rand[i] end
  local index = argsort(r, false)
  mask, iarg = take(mask, index), take(iarg, index)
  local max_pos = self._max_pos
  local order = argsort(mask, true)
  local indices, samples, matches = {}, {}, {}
  for k = 1, math.min(max_pos, n) do
    local p = order[k]
    local v = mask[p]
    indices[k], matches[k] = index[p], iarg[p]
    samples[k] = v == 3 and 1 or (v == 2 and -1 or v)
  end
  local rest_i, rest_m, rest_a = {}, {}, {}
  for k = max_pos + 1, n do
    local v = mask[k]
    rest_i[#rest_i + 1], rest_a[#rest_a + 1] = index[k], iarg[k]
    rest_m[#rest_m + 1] = v == 2 and 4 or v
  end
  order = argsort(rest_m, true)
  for k = 1, math.min(self._num_sample - max_pos, #order) do
    local p = order[k]
    local v = rest_m[p]
    local j = #indices + 1
    indices[j], matches[j] = rest_i[p], rest_a[p]
    samples[j] = v == 3 and 1 or (v == 4 and -1 or v)
  end
  return indices, samples, matches
end

function Sampler:forward(rois, scores, gt_boxes)
  local outs_r, outs_s, outs_m = {}, {}, {}
  local dt = rois:dtype()
  for i = 1, self._num_image do
    local roi, score, gt = rois[i], scores[i], gt_boxes[i]
    local gt_score = nd.sign(nd.add_scalar(nd.sum(gt, { axis = -1, keepdims = true }),
      { scalar = 1 }))
    local all_roi = nd.concat({ roi, gt }, { dim = 1 })
    local all_score = nd.reshape(nd.concat({ score, gt_score }, { dim = 1 }), { -1 }):totable()
    local n = #all_score
    local rand = self.rand and rows_of(self.rand(i, self._num_proposal + self._max_num_gt))
      or uniform(self._num_proposal + self._max_num_gt)
    if #rand < n then
      error("RCNNTargetSampler: " .. n .. " proposals and ground truths, more than "
        .. "num_proposal + max_num_gt = " .. #rand, 0)
    end
    local indices, samples, matches = self:_one(all_roi, all_score, gt, rand)
    local sampled = nd.take(all_roi, nd.array(indices, { dtype = "int64" }))
    local function c(k) return nd.slice_axis(sampled, { axis = 2, begin = k, ["end"] = k }) end
    local area = nd.reshape(nd.mul(nd.sub(c(3), c(1)), nd.sub(c(4), c(2))), { -1 }):totable()
    local ind = argsort(area, false)
    outs_r[i] = nd.take(sampled, nd.array(ind, { dtype = "int64" }))
    outs_s[i] = take(samples, ind)
    outs_m[i] = take(matches, ind)
  end
  return nd.stack(outs_r, { axis = 1 }), nd.array(outs_s, { dtype = dt }),
    nd.array(outs_m, { dtype = dt })
end

---------------------------------------------------------------- RCNN targets
-- RCNNTargetGenerator(num_class, max_pos=128, per_device_batch_size=1, means={0,0,0,0},
-- stds={0.1, 0.1, 0.2, 0.2}): gen(roi (B, N, 4), samples (B, N), matches (B, N), gt_label
-- (B, M, 1), gt_box (B, M, 4)) -> cls_target (B, N), box_target (B, max_pos, C, 4),
-- box_mask (same; 1 at the matched class of a positive) and indices (B, max_pos): the
-- 1-based samples they belong to (the positives first, as MXNet's argsort orders them).
local Generator = block.Block:extend("RCNNTargetGenerator")
M.RCNNTargetGenerator = Generator
function Generator:__init(num_class, max_pos, per_device_batch_size, means, stds)
  block.Block.__init(self)
  self._num_class = num_class
  self._max_pos = max_pos or 128
  self._batch_size = per_device_batch_size or 1
  self._means = means or { 0, 0, 0, 0 }
  self._stds = stds or { 0.1, 0.1, 0.2, 0.2 }
end

function Generator:forward(roi, samples, matches, gt_label, gt_box)
  local dt = roi:dtype()
  local B, N = samples:shape()[1], samples:shape()[2]
  local labels = nd.reshape(gt_label, { 0, -1 })
  local M_ = labels:shape()[2]
  -- MultiClassEncoder
  local picked = nd.pick(nd.broadcast_to(nd.reshape(labels, { 0, 1, -1 }),
    { shape = { B, N, M_ } }), matches, { axis = 3 })
  local ids = nd.add_scalar(picked, { scalar = 1 })
  local cls = nd.where(nd.greater_scalar(samples, { scalar = 0.5 }), ids,
    nd.full_like(ids, { value = -1 }))
  cls = nd.where(nd.lesser_scalar(samples, { scalar = -0.5 }), nd.zeros_like(cls), cls)
  -- NormalizedPerClassBoxCenterEncoder
  local targets, masks = nd.box_encode(samples, matches, roi, gt_box,
    nd.array(self._means, { dtype = dt }), nd.array(self._stds, { dtype = dt }))
  local C = self._num_class
  local same = nd.broadcast_equal(nd.expand_dims(picked, { axis = 3 }),
    nd.reshape(nd.arange({ start = 0, stop = C, dtype = dt }), { 1, 1, C }))
  local first = nd.reshape(nd.slice_axis(masks, { axis = -1, begin = 1, ["end"] = 1 }),
    { B, N }):totable()
  local idx, t, m, s = {}, {}, {}, {}
  for i = 1, self._batch_size do
    local order = argsort(first[i], true)
    local ind = {}
    for k = 1, math.min(self._max_pos, N) do ind[k] = order[k] end
    idx[i] = ind
    local it = nd.array(ind, { dtype = "int64" })
    t[i] = nd.take(targets[i], it)
    m[i] = nd.take(masks[i], it)
    s[i] = nd.take(same[i], it)
  end
  local tg, mk = nd.stack(t, { axis = 1 }), nd.stack(m, { axis = 1 })
  local sc = nd.expand_dims(nd.stack(s, { axis = 1 }), { axis = 4 })
  local P = tg:shape()[2]
  local all_t = nd.broadcast_to(nd.expand_dims(tg, { axis = 3 }), { shape = { B, P, C, 4 } })
  local all_m = nd.broadcast_mul(nd.expand_dims(mk, { axis = 3 }),
    nd.broadcast_to(sc, { shape = { B, P, C, 4 } }))
  return cls, all_t, all_m, nd.array(idx, { dtype = dt })
end

return M
