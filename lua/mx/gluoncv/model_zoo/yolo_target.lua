-- mx.gluoncv.model_zoo.yolo_target — GluonCV 0.10's YOLOv3 training targets
-- (gluoncv/model_zoo/yolo/yolo_target.py):
--   YOLOV3PrefetchTargetGenerator(num_class): the targets that do not depend on the network:
--     each ground truth goes to the anchor (of all layers') whose shape fits it best (IoU of
--     boxes centred together), in the cell holding its centre on that anchor's layer;
--   YOLOV3DynamicTargetGeneratorSimple(num_class, ignore_iou_thresh): objectness -1 (ignored)
--     for predictions whose best IoU with a ground truth exceeds the threshold;
--   YOLOV3TargetMerger(num_class, ignore_iou_thresh): the prefetched targets where they are
--     positive, the dynamic ones elsewhere, and the class mask.
-- Rows are the network's training outputs' (B, N, k), N = sum over layers of H * W * anchors.
--
--   local T = require("mx.gluoncv.model_zoo.yolo_target")
--   local gen = T.YOLOV3PrefetchTargetGenerator(20)
--   local obj_t, centers_t, scales_t, weights_t, class_t =
--     gen(x, feat_maps, anchors, offsets, gt_boxes, gt_ids)   -- from net:train_outputs(x)
local nd = require("mx.nd")
local class = require("mx.core.class")

local type, error, tostring, format = type, error, tostring, string.format
local floor, log, max, min = math.floor, math.log, math.max, math.min

local M = {}

local function check_tensor(who, what, v, ndim, level)
  if not nd.is_tensor(v) then
    error(format("%s: %s must be a tensor, got %s", who, what, type(v)), level + 1)
  end
  if ndim and v:ndim() ~= ndim then
    error(format("%s: %s must be %d-d, got shape (%s)", who, what, ndim,
      table.concat(v:shape(), ", ")), level + 1)
  end
end

local function check_list(who, what, v, level)
  if type(v) ~= "table" or nd.is_tensor(v) or #v < 1 then
    error(format("%s: %s must be a list of tensors (one per output layer)", who, what), level + 1)
  end
  for i, t in ipairs(v) do check_tensor(who, format("%s[%d]", what, i), t, nil, level + 1) end
end

local function check_class(who, n, level)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 then
    error(format("%s: num_class must be a positive integer, got %s", who, tostring(n)), level + 1)
  end
end

---------------------------------------------------------------- prefetch
local Prefetch = class.base("YOLOV3PrefetchTargetGenerator")
M.YOLOV3PrefetchTargetGenerator = setmetatable(Prefetch, { __call = function(cls, num_class)
  check_class(cls.__name, num_class, 2)
  return setmetatable({ _num_class = num_class }, cls)
end })

-- gen(img, xs, anchors, offsets, gt_boxes, gt_ids[, gt_mixratio]): img (B, 3, H, W) read for
-- its size; xs, anchors ((1, 1, A, 2) each), offsets ((1, h*w, 1, 2) each) per layer as the
-- network's training outputs give them; gt_boxes (B, M, 4) corners in pixels (rows after the
-- first with a negative coordinate are padding), gt_ids (B, M, 1). Returns objectness (B, N,
-- 1), center targets (B, N, 2), scale targets, weights (2 - relative area) and one-hot class
-- targets (B, N, num_class), -1 where no ground truth is assigned.
function Prefetch:__call(img, xs, anchors, offsets, gt_boxes, gt_ids, gt_mixratio)
  local who = "YOLOV3PrefetchTargetGenerator"
  check_tensor(who, "img", img, 4, 2)
  check_list(who, "xs", xs, 2)
  check_list(who, "anchors", anchors, 2)
  check_list(who, "offsets", offsets, 2)
  if #xs ~= #anchors or #xs ~= #offsets then
    error(format("%s: xs, anchors and offsets must hold one tensor per layer (%d, %d, %d)", who,
      #xs, #anchors, #offsets), 2)
  end
  check_tensor(who, "gt_boxes", gt_boxes, 3, 2)
  check_tensor(who, "gt_ids", gt_ids, 3, 2)
  local B, Mn = gt_boxes:shape()[1], gt_boxes:shape()[2]
  if gt_boxes:shape()[3] ~= 4 then error(who .. ": gt_boxes must be (B, M, 4)", 2) end
  local ids_shape = gt_ids:shape()
  if ids_shape[1] ~= B or ids_shape[2] ~= Mn then
    error(format("%s: gt_ids (%s) must be (%d, %d, 1)", who, table.concat(ids_shape, ", "), B,
      Mn), 2)
  end
  local C = self._num_class
  local ih, iw = img:shape()[3], img:shape()[4]
  -- every layer's anchors in order, their layer, and each layer's cells
  local all, layer_of, first_anchor, na, cells, first_cell, shapes = {}, {}, {}, {}, {}, {}, {}
  local ncell = 0
  for l = 1, #anchors do
    local a = anchors[l]:reshape({ -1, 2 }):totable()
    first_anchor[l], na[l] = #all + 1, #a
    for _, wh in ipairs(a) do
      all[#all + 1] = wh
      layer_of[#all] = l
    end
    local s = xs[l]:shape()
    shapes[l] = { s[3], s[4] }
    cells[l] = floor(offsets[l]:size() / 2)
    first_cell[l] = ncell
    ncell = ncell + cells[l]
  end
  local A = #all
  -- GluonCV's buffers: (B, all cells, all anchors, k), sliced per layer at the end
  local obj, ctr, scl, wgt, cls = {}, {}, {}, {}, {}
  local boxes, gids = gt_boxes:totable(), gt_ids:totable()
  local mix = gt_mixratio and gt_mixratio:totable()
  for b = 1, B do
    local ob, cb, sb, wb, kb = {}, {}, {}, {}, {}
    obj[b], ctr[b], scl[b], wgt[b], cls[b] = ob, cb, sb, wb, kb
    for m = 1, Mn do
      local g = boxes[b][m]
      if g[1] < 0 or g[2] < 0 or g[3] < 0 or g[4] < 0 then break end
      local gx, gy = (g[1] + g[3]) / 2, (g[2] + g[4]) / 2
      local gw, gh = g[3] - g[1], g[4] - g[2]
      -- the best anchor by the IoU of the two boxes centred together (the first of ties)
      local best, match = -1, 1
      for k = 1, A do
        local aw, ah = all[k][1], all[k][2]
        local inter = max(0, min(aw, gw)) * max(0, min(ah, gh))
        local u = aw * ah + gw * gh - inter
        local v = u > 0 and inter / u or 0
        if v > best then best, match = v, k end
      end
      local l = layer_of[match]
      local h, w = shapes[l][1], shapes[l][2]
      local fx, fy = gx / iw * w, gy / ih * h
      local lx, ly = floor(fx), floor(fy)
      local key = (first_cell[l] + ly * w + lx) * A + match
      cb[key] = { fx - lx, fy - ly }
      sb[key] = { log(max(gw, 1) / all[match][1]), log(max(gh, 1) / all[match][2]) }
      local wt = 2.0 - gw * gh / iw / ih
      wb[key] = { wt, wt }
      ob[key] = mix and mix[b][m][1] or 1
      kb[key] = floor(gids[b][m][1])
    end
  end
  -- sliced per layer: that layer's cells x its anchors
  local rows = {}
  for l = 1, #anchors do
    for c = first_cell[l], first_cell[l] + cells[l] - 1 do
      for k = first_anchor[l], first_anchor[l] + na[l] - 1 do rows[#rows + 1] = c * A + k end
    end
  end
  local N = #rows
  local to, tc, ts, tw, tk = {}, {}, {}, {}, {}
  for b = 1, B do
    local o, c, s, w, k = {}, {}, {}, {}, {}
    for i, key in ipairs(rows) do
      o[i] = { obj[b][key] or 0 }
      c[i] = ctr[b][key] or { 0, 0 }
      s[i] = scl[b][key] or { 0, 0 }
      w[i] = wgt[b][key] or { 0, 0 }
      local id, row = cls[b][key], {}
      for j = 1, C do row[j] = id and (j - 1 == id and 1 or 0) or -1 end
      k[i] = row
    end
    to[b], tc[b], ts[b], tw[b], tk[b] = o, c, s, w, k
  end
  local function T(t, k) return nd.array(t, { shape = { B, N, k } }) end
  return T(to, 1), T(tc, 2), T(ts, 2), T(tw, 2), T(tk, C)
end

---------------------------------------------------------------- dynamic and merger
-- (B, N, 1): the best IoU of each prediction (corners) with the image's ground truths
-- (GluonCV's BBoxBatchIOU: no +1, widths clipped at 0 and 65504, eps 1e-15)
local function best_iou(box_preds, gt_boxes)
  local p, g = box_preds:totable(), gt_boxes:totable()
  local out = {}
  for b = 1, #p do
    local rows, gb = {}, g[b]
    for i, a in ipairs(p[b]) do
      local area_a = (a[3] - a[1]) * (a[4] - a[2])
      local best = -math.huge
      for _, q in ipairs(gb) do
        local iw = min(max(min(a[3], q[3]) - max(a[1], q[1]), 0), 65504)
        local ih = min(max(min(a[4], q[4]) - max(a[2], q[2]), 0), 65504)
        local inter = iw * ih
        local v = inter / (area_a + (q[3] - q[1]) * (q[4] - q[2]) - inter + 1e-15)
        if v > best then best = v end
      end
      rows[i] = { best }
    end
    out[b] = rows
  end
  return out
end

local Dynamic = class.base("YOLOV3DynamicTargetGeneratorSimple")
M.YOLOV3DynamicTargetGeneratorSimple = setmetatable(Dynamic, {
  __call = function(cls, num_class, ignore_iou_thresh)
    check_class(cls.__name, num_class, 2)
    if type(ignore_iou_thresh) ~= "number" then
      error(cls.__name .. ": ignore_iou_thresh must be a number, got "
        .. type(ignore_iou_thresh), 2)
    end
    return setmetatable({ _num_class = num_class, _thresh = ignore_iou_thresh }, cls)
  end })

-- gen(box_preds (B, N, 4), gt_boxes (B, M, 4)) -> objectness (-1 ignored, else 0), zero
-- center, scale and weight targets, class targets -1
function Dynamic:__call(box_preds, gt_boxes)
  local who = self.__name
  check_tensor(who, "box_preds", box_preds, 3, 2)
  check_tensor(who, "gt_boxes", gt_boxes, 3, 2)
  box_preds = box_preds:reshape({ 0, -1, 4 })
  local B, N = box_preds:shape()[1], box_preds:shape()[2]
  if gt_boxes:shape()[1] ~= B then
    error(format("%s: gt_boxes has %d images, box_preds %d", who, gt_boxes:shape()[1], B), 2)
  end
  local ious = best_iou(box_preds, gt_boxes)
  for b = 1, B do
    for i = 1, N do ious[b][i][1] = ious[b][i][1] > self._thresh and -1 or 0 end
  end
  local dt = box_preds:dtype()
  return nd.array(ious, { shape = { B, N, 1 }, dtype = dt }), nd.zeros({ B, N, 2 }, { dtype = dt }),
    nd.zeros({ B, N, 2 }, { dtype = dt }), nd.zeros({ B, N, 2 }, { dtype = dt }),
    nd.full({ B, N, self._num_class }, -1, { dtype = dt })
end

local Merger = class.base("YOLOV3TargetMerger")
M.YOLOV3TargetMerger = setmetatable(Merger, {
  __call = function(cls, num_class, ignore_iou_thresh)
    local ok, dyn = pcall(M.YOLOV3DynamicTargetGeneratorSimple, num_class, ignore_iou_thresh)
    if not ok then error((tostring(dyn):gsub("^[^\n]-:%d+: ", "")), 2) end
    return setmetatable({ _num_class = num_class, _dynamic = dyn }, cls)
  end })

-- merge(box_preds, gt_boxes, obj_t, centers_t, scales_t, weights_t, class_t) -> objectness,
-- center, scale, weight and class targets and the class mask (positives' valid classes),
-- all without gradient
function Merger:__call(box_preds, gt_boxes, obj_t, centers_t, scales_t, weights_t, class_t)
  local ok, d = pcall(function() return { self._dynamic(box_preds, gt_boxes) } end)
  if not ok then error((tostring(d):gsub("^[^\n]-:%d+: ", "")), 2) end
  for i, t in ipairs({ obj_t, centers_t, scales_t, weights_t, class_t }) do
    check_tensor(self.__name, "target " .. i, t, 3, 2)
  end
  local C = self._num_class
  local pos = nd.greater_scalar(obj_t, { scalar = 0 })
  local pos2 = nd.tile(pos, { reps = { 2 } })
  local posc = nd.tile(pos, { reps = { C } })
  local objectness = nd.where(pos, obj_t, d[1])
  local centers = nd.where(pos2, centers_t, d[2])
  local scales = nd.where(pos2, scales_t, d[3])
  local weights = nd.where(pos2, weights_t, d[4])
  local classes = nd.where(posc, class_t, d[5])
  local mask = nd.mul(posc, nd.greater_equal_scalar(classes, { scalar = 0 }))
  local out = { objectness, centers, scales, weights, classes, mask }
  for i = 1, 6 do out[i] = nd.stop_gradient(out[i]) end
  return out[1], out[2], out[3], out[4], out[5], out[6]
end

return M
