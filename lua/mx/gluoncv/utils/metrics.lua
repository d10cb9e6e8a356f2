-- mx.gluoncv.utils.metrics — GluonCV 0.10's evaluation metrics
-- (gluoncv/utils/metrics/voc_detection.py, segmentation.py), with the same arithmetic:
--   VOCMApMetric{iou_thresh=0.5, class_names=}: Pascal VOC average precision per class
--     (area under the monotone precision/recall curve) and mAP; VOC07MApMetric: the
--     11-point variant of VOC 2007. Boxes are corners in pixels, compared with GluonCV's
--     +1 (inclusive) widths; difficult ground truths neither count nor penalise.
--   SegmentationMetric(nclass): pixel accuracy and mean IoU over all nclass classes
--     (a class absent from labels and predictions counts IoU 0, as GluonCV).
--   COCODetectionMetric{class_names=, score_thresh=0.05}: COCO's AP@[.5:.95], AP50, AP75,
--     AP / AR by area, as pycocotools computes them (mx.gluoncv.utils.cocoeval), for boxes
--     and ground truths given as corners (GluonCV's +1 widths to COCO's x, y, w, h).
-- Class ids are 0-based labels; rows with a negative label are padding and skipped.
--
--   local m = gcv.utils.metrics.VOC07MApMetric { class_names = { "dog", "cat" } }
--   m:update(det_boxes, det_ids, det_scores, gt_boxes, gt_ids)   -- (B, N, 4), (B, N[, 1])...
--   local names, values = m:get()                                 -- {"dog", "cat", "mAP"}
local nd = require("mx.nd")
local class = require("mx.core.class")
local check_opts = require("mx.core.class").check_opts

local type, error, tostring, format, floor = type, error, tostring, string.format, math.floor
local huge, max, min = math.huge, math.max, math.min

local M = {}
local EPS = 2.220446049250313e-16 -- np.spacing(1)

-- a batch input as a Lua list of per-image lists: tensors (B, N, k) / (B, N) or a list of
-- per-batch tensors; width 4 keeps rows, else each row's first value
local function images(who, what, v, width, level)
  local batches = {}
  if nd.is_tensor(v) then batches[1] = v
  elseif type(v) == "table" then batches = v
  else error(format("%s: %s must be a tensor or a list of tensors, got %s", who, what, type(v)),
    level + 1) end
  local out = {}
  for _, b in ipairs(batches) do
    local t = nd.is_tensor(b) and b:totable() or b
    for _, img in ipairs(t) do
      local rows = {}
      for j, r in ipairs(img) do
        if width then rows[j] = r
        else rows[j] = type(r) == "table" and r[1] or r end
      end
      out[#out + 1] = rows
    end
  end
  return out
end

-- IoU of corner boxes with GluonCV's +1 on the far corner
local function iou1(a, b)
  local tl_x, tl_y = max(a[1], b[1]), max(a[2], b[2])
  local br_x, br_y = min(a[3] + 1, b[3] + 1), min(a[4] + 1, b[4] + 1)
  local inter = (tl_x < br_x and tl_y < br_y) and (br_x - tl_x) * (br_y - tl_y) or 0
  local aa = (a[3] + 1 - a[1]) * (a[4] + 1 - a[2])
  local ab = (b[3] + 1 - b[1]) * (b[4] + 1 - b[2])
  return inter / (aa + ab - inter)
end

-- positions 1..#s sorted by descending score (ties: the later first, as argsort()[::-1])
local function order_desc(s)
  local o = {}
  for i = 1, #s do o[i] = i end
  table.sort(o, function(a, b)
    if s[a] ~= s[b] then return s[a] > s[b] end
    return a > b
  end)
  return o
end

local VOC = class.base("VOCMApMetric")
M.VOCMApMetric = setmetatable(VOC, { __call = function(cls, opts)
  local o = check_opts(cls.__name, opts, { iou_thresh = true, class_names = true }, 2)
  local names = o.class_names
  if names ~= nil then
    if type(names) ~= "table" then
      error(cls.__name .. ": class_names must be a list of strings", 2)
    end
    for i, n in ipairs(names) do
      if type(n) ~= "string" then
        error(format("%s: class_names[%d] must be a string, got %s", cls.__name, i, type(n)), 2)
      end
    end
  end
  local self = setmetatable({ iou_thresh = o.iou_thresh or 0.5, class_names = names }, cls)
  self:reset()
  return self
end })

function VOC:reset()
  self._n_pos, self._score, self._match = {}, {}, {}
end

local function push(t, l, v)
  local list = t[l]
  if not list then list = {} t[l] = list end
  list[#list + 1] = v
end

-- update(pred_bboxes, pred_labels, pred_scores, gt_bboxes, gt_labels, gt_difficults=nil)
function VOC:update(pb, pl, ps, gb, gl, gd)
  local who = self.__name .. ":update"
  pb, pl, ps = images(who, "pred_bboxes", pb, 4, 2), images(who, "pred_labels", pl, nil, 2),
    images(who, "pred_scores", ps, nil, 2)
  gb, gl = images(who, "gt_bboxes", gb, 4, 2), images(who, "gt_labels", gl, nil, 2)
  gd = gd and images(who, "gt_difficults", gd, nil, 2)
  if #pl ~= #pb or #ps ~= #pb or #gb ~= #pb or #gl ~= #pb or (gd and #gd ~= #pb) then
    error(who .. ": the inputs hold different numbers of images", 2)
  end
  for i = 1, #pb do
    local classes, seen = {}, {}
    local function note(l) if not seen[l] then seen[l] = true classes[#classes + 1] = l end end
    for j, l in ipairs(pl[i]) do if l >= 0 and pb[i][j] then note(floor(l)) end end
    for j, l in ipairs(gl[i]) do if l >= 0 and gb[i][j] then note(floor(l)) end end
    for _, l in ipairs(classes) do
      local boxes, scores = {}, {}
      for j, v in ipairs(pl[i]) do
        if v >= 0 and floor(v) == l then
          boxes[#boxes + 1], scores[#scores + 1] = pb[i][j], ps[i][j]
        end
      end
      local gts, diff = {}, {}
      for j, v in ipairs(gl[i]) do
        if v >= 0 and floor(v) == l then
          gts[#gts + 1] = gb[i][j]
          diff[#gts] = gd and gd[i][j] ~= nil and gd[i][j] ~= 0 or false
        end
      end
      local npos = 0
      for k = 1, #gts do if not diff[k] then npos = npos + 1 end end
      self._n_pos[l] = (self._n_pos[l] or 0) + npos
      self._score[l] = self._score[l] or {}
      self._match[l] = self._match[l] or {}
      local order = order_desc(scores)
      local selec = {}
      for _, k in ipairs(order) do
        push(self._score, l, scores[k])
        local best, at = -huge, nil
        for g = 1, #gts do
          local v = iou1(boxes[k], gts[g])
          if v > best then best, at = v, g end
        end
        if at == nil or best < self.iou_thresh then
          push(self._match, l, 0)
        elseif diff[at] then
          push(self._match, l, -1)
          selec[at] = true
        else
          push(self._match, l, selec[at] and 0 or 1)
          selec[at] = true
        end
      end
    end
  end
end

-- recall and precision lists of class l (nil recall when it has no positive)
function VOC:_recall_prec(l)
  local s, m = self._score[l] or {}, self._match[l] or {}
  local rec, prec, tp, fp = {}, {}, 0, 0
  for k, i in ipairs(order_desc(s)) do
    if m[i] == 1 then tp = tp + 1 elseif m[i] == 0 then fp = fp + 1 end
    prec[k] = tp / (fp + tp) -- 0/0 = nan, as numpy
    rec[k] = tp / self._n_pos[l]
  end
  if self._n_pos[l] == 0 then rec = nil end
  return rec, prec
end

local function nan0(v) return v ~= v and 0 or v end

-- VOC 2010+: the area under the precision envelope
function VOC._average_precision(_, rec, prec)
  if not rec then return 0 / 0 end
  local mrec, mpre = { 0 }, { 0 }
  for i = 1, #rec do mrec[i + 1], mpre[i + 1] = rec[i], nan0(prec[i]) end
  mrec[#mrec + 1], mpre[#mpre + 1] = 1, 0
  for i = #mpre, 2, -1 do mpre[i - 1] = max(mpre[i - 1], mpre[i]) end
  local ap = 0
  for i = 1, #mrec - 1 do
    if mrec[i + 1] ~= mrec[i] then ap = ap + (mrec[i + 1] - mrec[i]) * mpre[i + 1] end
  end
  return ap
end

-- get(): names, values: per class (with class_names) and then mAP, the nan-mean of the
-- classes' APs (classes 0 .. the largest seen); without class_names the name "VOCMeanAP"
-- and mAP alone
function VOC:get()
  local top = -1
  for l in pairs(self._n_pos) do if l > top then top = l end end
  local aps, sum, n = {}, 0, 0
  for l = 0, top do
    local ap = 0 / 0
    if self._n_pos[l] ~= nil then ap = self:_average_precision(self:_recall_prec(l)) end
    aps[l + 1] = ap
    if ap == ap then sum, n = sum + ap, n + 1 end
  end
  local map = n > 0 and sum / n or 0 / 0
  local names = self.class_names
  if not names then return "VOCMeanAP", map end
  local ns, vs = {}, {}
  for i, nm in ipairs(names) do
    ns[i] = nm
    local v = aps[i]
    vs[i] = v == nil and 0 / 0 or v
  end
  ns[#ns + 1], vs[#vs + 1] = "mAP", map
  return ns, vs
end

local VOC07 = class.extend(VOC, "VOC07MApMetric")
M.VOC07MApMetric = setmetatable(VOC07, { __index = VOC, __call = getmetatable(VOC).__call })

-- VOC 2007: precision at 11 recall levels 0, 0.1, ..., 1
function VOC07._average_precision(_, rec, prec)
  if not rec then return 0 / 0 end
  local ap = 0
  for k = 0, 10 do
    local t, p = k * 0.1, 0 -- np.arange(0., 1.1, 0.1)[k + 1], bit for bit
    for i = 1, #rec do
      if rec[i] >= t then p = max(p, nan0(prec[i])) end
    end
    ap = ap + p / 11
  end
  return ap
end

local SEG = class.base("SegmentationMetric")
M.SegmentationMetric = setmetatable(SEG, { __call = function(cls, nclass)
  if type(nclass) ~= "number" or nclass < 2 or nclass % 1 ~= 0 then
    error("SegmentationMetric: nclass must be an integer >= 2, got " .. tostring(nclass), 2)
  end
  local self = setmetatable({ nclass = nclass }, cls)
  self:reset()
  return self
end })

function SEG:reset()
  self.total_correct, self.total_label = 0, 0
  self.total_inter, self.total_union = {}, {}
  for c = 1, self.nclass do self.total_inter[c], self.total_union[c] = 0, 0 end
end

-- update(labels, preds): labels (N, H, W) class ids (negative or >= nclass: ignored pixels,
-- still counted as labelled when >= 0), preds (N, C, H, W) scores; or lists of both
function SEG:update(labels, preds)
  if nd.is_tensor(preds) then labels, preds = { labels }, { preds } end
  if type(preds) ~= "table" or type(labels) ~= "table" or #preds ~= #labels then
    error("SegmentationMetric:update: labels and preds must be tensors or lists of equal "
      .. "length", 2)
  end
  local C = self.nclass
  for b = 1, #preds do
    local p, l = preds[b], labels[b]
    local ps, ls = p:shape(), l:shape()
    if #ps ~= 4 or #ls ~= 3 or ls[1] ~= ps[1] or ls[2] ~= ps[3] or ls[3] ~= ps[4] then
      error(format("SegmentationMetric:update: preds (N, C, H, W) and labels (N, H, W) "
        .. "differ: (%s) and (%s)", table.concat(ps, ", "), table.concat(ls, ", ")), 2)
    end
    local pred = nd.argmax(p, { axis = 2 }):reshape({ -1 }):tolist() -- 1-based classes
    local lab = l:reshape({ -1 }):tolist()
    local area_p, area_l, inter = {}, {}, {}
    for c = 1, C do area_p[c], area_l[c], inter[c] = 0, 0, 0 end
    local correct, labeled = 0, 0
    for i = 1, #lab do
      local t = floor(lab[i]) + 1 -- GluonCV's target + 1: 0 for ignored (-1)
      if t > 0 then
        labeled = labeled + 1
        local q = pred[i]
        if q == t then correct = correct + 1 end
        if q >= 1 and q <= C then area_p[q] = area_p[q] + 1 end
        if t <= C then
          area_l[t] = area_l[t] + 1
          if q == t then inter[t] = inter[t] + 1 end
        end
      end
    end
    self.total_correct, self.total_label = self.total_correct + correct, self.total_label + labeled
    for c = 1, C do
      self.total_inter[c] = self.total_inter[c] + inter[c]
      self.total_union[c] = self.total_union[c] + area_p[c] + area_l[c] - inter[c]
    end
  end
end

-- get(): pixAcc, mIoU
function SEG:get()
  local miou = 0
  for c = 1, self.nclass do
    miou = miou + self.total_inter[c] / (EPS + self.total_union[c])
  end
  return self.total_correct / (EPS + self.total_label), miou / self.nclass
end

---------------------------------------------------------------- COCO
local COCO = class.base("COCODetectionMetric")
M.COCODetectionMetric = setmetatable(COCO, { __call = function(cls, opts)
  local o = check_opts(cls.__name, opts, { class_names = true, score_thresh = true }, 2)
  local names = o.class_names
  if type(names) ~= "table" or #names < 1 then
    error(cls.__name .. ": class_names must be a non-empty list of strings", 2)
  end
  for i, n in ipairs(names) do
    if type(n) ~= "string" then
      error(format("%s: class_names[%d] must be a string, got %s", cls.__name, i, type(n)), 2)
    end
  end
  local st = o.score_thresh or 0.05
  if type(st) ~= "number" then
    error(cls.__name .. ": score_thresh must be a number, got " .. type(st), 2)
  end
  local self = setmetatable({ class_names = names, score_thresh = st }, cls)
  self:reset()
  return self
end })

function COCO:reset()
  local cats = {}
  for i, n in ipairs(self.class_names) do cats[i] = { id = i, name = n } end
  self._gt = { images = {}, annotations = {}, categories = cats }
  self._dets = {}
end

-- corners -> COCO's x, y, w, h with GluonCV's +1 widths
local function xywh(b) return { b[1], b[2], b[3] - b[1] + 1, b[4] - b[2] + 1 } end

-- update(pred_bboxes, pred_labels, pred_scores, gt_bboxes, gt_labels, gt_crowds=nil): per
-- image, detections with labels 0 .. #class_names - 1 and score >= score_thresh; ground
-- truths with such labels (crowd regions where gt_crowds is non-zero)
function COCO:update(pb, pl, ps, gb, gl, gc)
  local who = "COCODetectionMetric:update"
  pb, pl, ps = images(who, "pred_bboxes", pb, 4, 2), images(who, "pred_labels", pl, nil, 2),
    images(who, "pred_scores", ps, nil, 2)
  gb, gl = images(who, "gt_bboxes", gb, 4, 2), images(who, "gt_labels", gl, nil, 2)
  gc = gc and images(who, "gt_crowds", gc, nil, 2)
  if #pl ~= #pb or #ps ~= #pb or #gb ~= #pb or #gl ~= #pb or (gc and #gc ~= #pb) then
    error(who .. ": the inputs hold different numbers of images", 2)
  end
  local n = #self.class_names
  local gt, dets = self._gt, self._dets
  for i = 1, #pb do
    local id = #gt.images + 1
    gt.images[id] = { id = id }
    for j, l in ipairs(gl[i]) do
      if l >= 0 and l < n and gb[i][j] then
        local a = #gt.annotations + 1
        local box = xywh(gb[i][j])
        gt.annotations[a] = { id = a, image_id = id, category_id = floor(l) + 1, bbox = box,
          area = box[3] * box[4], iscrowd = gc and gc[i][j] ~= 0 and 1 or 0 }
      end
    end
    for j, l in ipairs(pl[i]) do
      if l >= 0 and l < n and pb[i][j] and ps[i][j] >= self.score_thresh then
        dets[#dets + 1] = { image_id = id, category_id = floor(l) + 1, bbox = xywh(pb[i][j]),
          score = ps[i][j] }
      end
    end
  end
end

-- get(): names {class names..., "AP", "AP50", "AP75", "APsmall", ..., "ARlarge"} and their
-- values (per class AP@[.5:.95]; -1 where no ground truth counts)
function COCO:get()
  local C = require("mx.gluoncv.utils.cocoeval")
  local E = C.COCOeval(self._gt, self._dets, 2)
  E:evaluate()
  E:accumulate()
  local stats = E:summarize()
  local names, values = {}, {}
  for k, n in ipairs(self.class_names) do names[k], values[k] = n, E:category_ap(k) end
  for i, n in ipairs(C.STAT_NAMES) do
    names[#names + 1], values[#values + 1] = n, stats[i]
  end
  return names, values
end

return M
