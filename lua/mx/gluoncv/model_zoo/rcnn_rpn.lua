-- mx.gluoncv.model_zoo.rcnn_rpn — GluonCV 0.11's region proposal network
-- (gluoncv/model_zoo/rcnn/rpn/): RPNAnchorGenerator (py-faster-rcnn's base anchors shifted
-- over an alloc_size map, one constant cropped to the feature map), RPNProposal (box_decode
-- of the offsets, clipped to the image, boxes under min_size scored -1) and RPN (a 3x3
-- convolution + ReLU, 1x1 score and box convolutions, box_nms then the best post_nms).
-- Attribute names are GluonCV's: rpn.conv1.0.weight, rpn.score.weight, rpn.loc.weight,
-- rpn.anchor_generator.anchors.
--
--   local R = require("mx.gluoncv.model_zoo.rcnn_rpn")
--   local rpn = R.RPN({ channels = 1024, strides = 16, base_size = 16, scales = {2, 4, 8, 16, 32},
--     ratios = {0.5, 1, 2}, alloc_size = {128, 128}, nms_thresh = 0.7, ... })
--   local scores, boxes = rpn(img, feat)   -- inference: (B, post, 1), (B, post, 4)
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local parameter = require("mx.gluon.parameter")
local initializer = require("mx.initializer")
local autograd = require("mx.autograd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local floor, sqrt, max = math.floor, math.sqrt, math.max

local M = {}

-- NumPy's round: halves to even (py-faster-rcnn's ratio shapes depend on it: 11.5 -> 12)
local function round_even(v)
  local f = floor(v)
  local d = v - f
  if d > 0.5 then return f + 1 end
  if d < 0.5 then return f end
  return f % 2 == 0 and f or f + 1
end

local function mkanchors(ws, hs, xc, yc, out)
  for i = 1, #ws do
    out[#out + 1] = { xc - 0.5 * (ws[i] - 1), yc - 0.5 * (hs[i] - 1), xc + 0.5 * (ws[i] - 1),
      yc + 0.5 * (hs[i] - 1) }
  end
end

local function whctrs(a)
  local w, h = a[3] - a[1] + 1, a[4] - a[2] + 1
  return w, h, a[1] + 0.5 * (w - 1), a[2] + 0.5 * (h - 1)
end

-- generate_base_anchors(stride, sizes, ratios): py-faster-rcnn's (x1, y1, x2, y2) anchors
-- around the (0, 0, stride - 1, stride - 1) window, per ratio then per size (float64)
function M.generate_base_anchors(stride, sizes, ratios)
  local w, h, xc, yc = whctrs({ 0, 0, stride - 1, stride - 1 })
  local ws, hs = {}, {}
  for i, r in ipairs(ratios) do
    ws[i] = round_even(sqrt(w * h / r))
    hs[i] = round_even(ws[i] * r)
  end
  local by_ratio = {}
  mkanchors(ws, hs, xc, yc, by_ratio)
  local out = {}
  for _, a in ipairs(by_ratio) do
    local aw, ah, ax, ay = whctrs(a)
    local sw, sh = {}, {}
    for j, s in ipairs(sizes) do
      sw[j], sh[j] = aw * s / stride, ah * s / stride
    end
    mkanchors(sw, sh, ax, ay, out)
  end
  return out
end

local function list(v) return type(v) == "table" and v or { v } end

-- RPNAnchorGenerator(stride, base_size, ratios, scales, alloc_size {H, W}): the anchors of an
-- H x W map, constant (1, 1, H, W, 4 * depth) in pixels; forward(x) crops them to x's map
-- and returns (1, h * w * depth, 4), cell-major, ratio then scale within a cell
local Anchors = HybridBlock:extend("RPNAnchorGenerator")
M.RPNAnchorGenerator = Anchors
function Anchors:__init(stride, base_size, ratios, scales, alloc_size)
  HybridBlock.__init(self)
  if not base_size or base_size == 0 then
    error("RPNAnchorGenerator: invalid base_size " .. tostring(base_size), 3)
  end
  ratios, scales = list(ratios), list(scales)
  local sizes = {}
  for i, s in ipairs(scales) do sizes[i] = s * base_size end
  local base = M.generate_base_anchors(stride, sizes, ratios)
  self._num_depth = #base
  local H, W = alloc_size[1], alloc_size[2]
  local b = nd.array(base, { dtype = "float64" }):reshape({ 1, 1, 1, #base, 4 })
  local ox = nd.arange({ start = 0, stop = W * stride, step = stride, dtype = "float64" })
  local oy = nd.arange({ start = 0, stop = H * stride, step = stride, dtype = "float64" })
  ox = nd.broadcast_to(ox:reshape({ 1, W }), { shape = { H, W } })
  oy = nd.broadcast_to(oy:reshape({ H, 1 }), { shape = { H, W } })
  local off = nd.stack({ ox, oy, ox, oy }, { axis = 3 }):reshape({ 1, H, W, 1, 4 })
  local a = nd.broadcast_add(b, off):reshape({ 1, 1, H, W, -1 }):astype("float32")
  self.anchors = parameter.Constant(a, "anchor_")
end
function Anchors:num_depth() return self._num_depth end
local AX34 = { axes = { 3, 4 } }
function Anchors:forward(x)
  return nd.reshape(nd.slice_like(self.anchors:data(), nd.mul_scalar(x, { scalar = 0 }), AX34),
    { 1, -1, 4 })
end

-- RPNProposal(clip, min_size, stds): forward(anchor (1, N, 4), score (B, N, 1), bbox_pred
-- (B, N, 4), img (B, C, H, W)) -> (B, N, 5) rows [score, x1, y1, x2, y2]: the decoded boxes
-- clipped to [0, W] x [0, H]; a box narrower or lower than min_size (+1 widths) is all -1
local Proposal = HybridBlock:extend("RPNProposal")
M.RPNProposal = Proposal
function Proposal:__init(clip, min_size, stds)
  HybridBlock.__init(self)
  self._clip = clip or -1
  self._min_size = min_size
  self._stds = stds or { 1, 1, 1, 1 }
end
function Proposal:forward(anchor, score, bbox_pred, img)
  local s = self._stds
  local roi = nd.box_decode(bbox_pred, anchor, { std0 = s[1], std1 = s[2], std2 = s[3],
    std3 = s[4], clip = self._clip, format = "corner" })
  -- BBoxClipToImage: to [0, W] and [0, H] (GluonCV's bound is the size, not size - 1)
  local shp = img:shape()
  local win = nd.array({ shp[4], shp[3], shp[4], shp[3] }, { dtype = roi:dtype() })
  roi = nd.broadcast_minimum(nd.maximum_scalar(roi, { scalar = 0 }), win:reshape({ 1, 1, 4 }))
  local function col(k) return nd.slice_axis(roi, { axis = -1, begin = k, ["end"] = k }) end
  local w = nd.add_scalar(nd.sub(col(3), col(1)), { scalar = 1 })
  local h = nd.add_scalar(nd.sub(col(4), col(2)), { scalar = 1 })
  local invalid = nd.add(nd.lesser_scalar(w, { scalar = self._min_size }),
    nd.lesser_scalar(h, { scalar = self._min_size }))
  score = nd.where(invalid, nd.full_like(invalid, { value = -1 }), score)
  local inv4 = nd.broadcast_axis(invalid, { axis = 3, size = 4 })
  roi = nd.where(inv4, nd.full_like(inv4, { value = -1 }), roi)
  return nd.concat({ score, roi }, { dim = -1 })
end

local OPTS = { channels = true, strides = true, base_size = true, scales = true, ratios = true,
  alloc_size = true, clip = true, nms_thresh = true, train_pre_nms = true,
  train_post_nms = true, test_pre_nms = true, test_post_nms = true, min_size = true }

-- RPN({channels, strides, base_size, scales, ratios, alloc_size, clip, nms_thresh,
-- train_pre_nms, train_post_nms, test_pre_nms, test_post_nms, min_size}): one feature map
-- (GluonCV's single-level RPN; FPN's multi-level one is not here).
-- forward(img, feat): inference rpn_scores (B, post, 1), rpn_boxes (B, post, 4); in
-- training mode also raw_rpn_scores (B, N, 1), raw_rpn_boxes (B, N, 4) and anchors (1, N, 4)
local RPN = HybridBlock:extend("RPN")
M.RPN = RPN
function RPN:__init(opts)
  HybridBlock.__init(self)
  local o = require("mx.core.class").check_opts("RPN", opts, OPTS, 3)
  self._nms_thresh = o.nms_thresh
  self._train_pre_nms, self._train_post_nms = max(1, o.train_pre_nms), max(1, o.train_post_nms)
  self._test_pre_nms, self._test_post_nms = max(1, o.test_pre_nms), max(1, o.test_post_nms)
  local L = U.nn()
  self.anchor_generator = Anchors(o.strides, o.base_size, o.ratios, o.scales, o.alloc_size)
  local depth = self.anchor_generator:num_depth()
  local init = initializer.Normal(0.01)
  self.conv1 = L.HybridSequential()
  self.conv1:add(L.Conv2D(o.channels, 3, { strides = 1, padding = 1, weight_initializer = init }))
  self.conv1:add(L.Activation("relu"))
  self.score = L.Conv2D(depth, 1, { strides = 1, padding = 0, weight_initializer = init })
  self.loc = L.Conv2D(depth * 4, 1, { strides = 1, padding = 0, weight_initializer = init })
  self.region_proposer = Proposal(o.clip, o.min_size, { 1, 1, 1, 1 })
end

function RPN:get_test_post_nms() return self._test_post_nms end

local NHWC = { axes = { 1, 3, 4, 2 } }
function RPN:forward(img, x)
  local training = autograd.is_training()
  local pre_nms = training and self._train_pre_nms or self._test_pre_nms
  local post_nms = training and self._train_post_nms or self._test_post_nms
  local anchors = self.anchor_generator(x)
  x = self.conv1(x)
  local raw_scores = nd.reshape(nd.transpose(self.score(x), NHWC), { 0, -1, 1 })
  local scores = nd.sigmoid(nd.stop_gradient(raw_scores))
  local raw_boxes = nd.reshape(nd.transpose(self.loc(x), NHWC), { 0, -1, 4 })
  local boxes = nd.stop_gradient(raw_boxes)
  local pre = self.region_proposer(anchors, scores, boxes, img)
  local tmp = nd.box_nms(pre, { overlap_thresh = self._nms_thresh, topk = pre_nms,
    coord_start = 2, score_index = 1, id_index = -1, force_suppress = true })
  local n = tmp:shape()[2]
  local result = nd.slice_axis(tmp, { axis = 2, begin = 1, ["end"] = math.min(post_nms, n) })
  local rpn_scores = nd.slice_axis(result, { axis = -1, begin = 1, ["end"] = 1 })
  local rpn_boxes = nd.slice_axis(result, { axis = -1, begin = 2, ["end"] = 5 })
  if training then return rpn_scores, rpn_boxes, raw_scores, raw_boxes, anchors end
  return rpn_scores, rpn_boxes
end

return M
