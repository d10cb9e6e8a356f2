-- mx.gluoncv.utils.cocoeval — pycocotools' COCOeval for boxes (pycocotools/cocoeval.py,
-- iouType "bbox"), in Lua: per image and category the detections (best 100 by score) are
-- matched greedily to the ground truths at IoU thresholds .50:.05:.95 (crowd ground truths
-- matched by intersection over the detection's area, any number of times, and ignored, as
-- are ground truths outside the area range), then per category, area range and maxDets
-- (1, 10, 100) precision at 101 recall points from the precision envelope. summarize() gives
-- pycocotools' 12 numbers (AP, AP50, AP75, AP small/medium/large, AR@1/10/100, AR
-- small/medium/large); -1 where no ground truth counts.
--
--   local C = require("mx.gluoncv.utils.cocoeval")
--   local E = C.COCOeval(gt, dets)  -- gt: COCO's {images=, annotations=, categories=};
--   E:evaluate(); E:accumulate()    -- dets: {{image_id=, category_id=, bbox={x,y,w,h}, score=}}
--   local stats = E:summarize()     -- E.precision[t][r][k][a][m], E.recall[t][k][a][m]
local type, error, tostring, format = type, error, tostring, string.format
local min, max, floor = math.min, math.max, math.floor

local M = {}

-- numpy.linspace(start, stop, num): start + i * step, the last exactly stop
local function linspace(a, b, n)
  local step, t = (b - a) / (n - 1), {}
  for i = 0, n - 1 do t[i + 1] = i * step + a end
  t[n] = b
  return t
end
M.IOU_THRS = linspace(0.5, 0.95, floor((0.95 - 0.5) / 0.05 + 0.5) + 1)
M.REC_THRS = linspace(0.0, 1.0, floor((1.0 - 0.0) / 0.01 + 0.5) + 1)
M.MAX_DETS = { 1, 10, 100 }
M.AREA_RNG = { { 0, 1e10 }, { 0, 32 * 32 }, { 32 * 32, 96 * 96 }, { 96 * 96, 1e10 } }
M.AREA_LBL = { "all", "small", "medium", "large" }

-- a stable sort of list by key (numpy's mergesort: ties keep their order)
local function stable_sort(list, key)
  local idx = {}
  for i = 1, #list do idx[i] = i end
  table.sort(idx, function(a, b)
    local ka, kb = key(list[a]), key(list[b])
    if ka ~= kb then return ka < kb end
    return a < b
  end)
  local out = {}
  for i, j in ipairs(idx) do out[i] = list[j] end
  return out
end

-- maskUtils.iou for xywh boxes: intersection over union, over the detection's area for crowds
local function iou(d, g, crowd)
  local w = min(d[1] + d[3], g[1] + g[3]) - max(d[1], g[1])
  if w <= 0 then return 0 end
  local h = min(d[2] + d[4], g[2] + g[4]) - max(d[2], g[2])
  if h <= 0 then return 0 end
  local i = w * h
  local u = crowd and d[3] * d[4] or d[3] * d[4] + g[3] * g[4] - i
  return i / u
end

local function check_box(who, what, i, b, level)
  if type(b) ~= "table" or #b ~= 4 then
    error(format("%s: %s %d: bbox must be {x, y, w, h}, got %s", who, what, i, tostring(b)),
      level + 1)
  end
  for k = 1, 4 do
    if type(b[k]) ~= "number" then
      error(format("%s: %s %d: bbox[%d] must be a number", who, what, i, k), level + 1)
    end
  end
end

local E = {}
E.__index = E

-- COCOeval(gt, dets): gt COCO's dataset table (images {id=}, annotations {id=, image_id=,
-- category_id=, bbox=, area=(w*h), iscrowd=0}, categories {id=}); dets pycocotools'
-- loadRes list ({image_id=, category_id=, bbox=, score=}; area = w * h, ids from 1)
function M.COCOeval(gt, dets, level)
  level = (level or 1) + 1
  local who = "COCOeval"
  if type(gt) ~= "table" or type(gt.images) ~= "table" or type(gt.annotations) ~= "table"
    or type(gt.categories) ~= "table" then
    error(who .. ": gt must be a COCO dataset table with images, annotations and categories",
      level)
  end
  if type(dets) ~= "table" then
    error(who .. ": dets must be a list of detections, got " .. type(dets), level)
  end
  local self = setmetatable({}, E)
  local imgs, cats, known = {}, {}, {}
  for _, im in ipairs(gt.images) do
    imgs[#imgs + 1] = im.id
    known[im.id] = true
  end
  for _, c in ipairs(gt.categories) do cats[#cats + 1] = c.id end
  table.sort(imgs)
  table.sort(cats)
  self.img_ids, self.cat_ids = imgs, cats
  local gts, dts = {}, {}
  local function bucket(t, a) -- t[image][category]
    local bi = t[a.image_id]
    if not bi then bi = {}; t[a.image_id] = bi end
    local bc = bi[a.category_id]
    if not bc then bc = {}; bi[a.category_id] = bc end
    return bc
  end
  for i, a in ipairs(gt.annotations) do
    check_box(who, "annotation", i, a.bbox, level)
    local crowd = a.iscrowd ~= nil and a.iscrowd ~= 0 and a.iscrowd ~= false
    local g = { id = a.id or i, bbox = a.bbox, area = a.area or a.bbox[3] * a.bbox[4],
      crowd = crowd }
    local b = bucket(gts, a)
    b[#b + 1] = g
  end
  for i, d in ipairs(dets) do
    check_box(who, "detection", i, d.bbox, level)
    if type(d.score) ~= "number" then
      error(format("%s: detection %d: score must be a number", who, i), level)
    end
    if not known[d.image_id] then
      error(format("%s: detection %d: image_id %s is not in gt's images", who, i,
        tostring(d.image_id)), level)
    end
    local b = bucket(dts, d)
    b[#b + 1] = { id = i, bbox = d.bbox, area = d.bbox[3] * d.bbox[4], score = d.score }
  end
  self._gts, self._dts = gts, dts
  return self
end

local EMPTY = {}
local function get(t, img, cat) return (t[img] or EMPTY)[cat] or EMPTY end

-- evaluateImg: the matches of one image, category and area range (maxDet 100)
local function evaluate_img(gt, dt, ious, arng, max_det)
  local T = #M.IOU_THRS
  local g = {}
  for i, x in ipairs(gt) do
    g[i] = { x = x, j = i, ig = (x.crowd or x.area < arng[1] or x.area > arng[2]) and 1 or 0 }
  end
  g = stable_sort(g, function(v) return v.ig end)
  local D = min(#dt, max_det)
  local dtm, dtig = {}, {}
  for t = 1, T do
    local gm, dm, di = {}, {}, {}
    for i = 1, #g do gm[i] = 0 end
    for d = 1, D do dm[d], di[d] = 0, 0 end
    local thr = min(M.IOU_THRS[t], 1 - 1e-10)
    for d = 1, D do
      local best, m = thr, 0
      local row = ious[d]
      for gi = 1, #g do
        local gg = g[gi]
        if not (gm[gi] > 0 and not gg.x.crowd) then
          if m > 0 and g[m].ig == 0 and gg.ig == 1 then break end
          local v = row[gg.j]
          if v >= best then best, m = v, gi end
        end
      end
      if m > 0 then
        di[d] = g[m].ig
        dm[d] = g[m].x.id
        gm[m] = dt[d].id
      end
    end
    for d = 1, D do -- unmatched detections outside the area range are ignored
      local a = dt[d].area
      if dm[d] == 0 and (a < arng[1] or a > arng[2]) then di[d] = 1 end
    end
    dtm[t], dtig[t] = dm, di
  end
  local scores, gig = {}, {}
  for d = 1, D do scores[d] = dt[d].score end
  for i = 1, #g do gig[i] = g[i].ig end
  return { scores = scores, dtm = dtm, dtig = dtig, gtig = gig }
end

-- evaluate(): every image's matches per category and area range
function E:evaluate()
  local max_det = M.MAX_DETS[#M.MAX_DETS]
  local ev = {}
  for k, cat in ipairs(self.cat_ids) do
    ev[k] = {}
    for a, arng in ipairs(M.AREA_RNG) do
      local list = {}
      for _, img in ipairs(self.img_ids) do
        local gt, dt = get(self._gts, img, cat), get(self._dts, img, cat)
        if #gt > 0 or #dt > 0 then
          dt = stable_sort(dt, function(v) return -v.score end)
          local n = min(#dt, max_det)
          local ious = {}
          for d = 1, n do
            local row = {}
            for gi, gg in ipairs(gt) do row[gi] = iou(dt[d].bbox, gg.bbox, gg.crowd) end
            ious[d] = row
          end
          local trimmed = {}
          for d = 1, n do trimmed[d] = dt[d] end
          list[#list + 1] = evaluate_img(gt, trimmed, ious, arng, max_det)
        end
      end
      ev[k][a] = list
    end
  end
  self._eval = ev
  return self
end

-- accumulate(): precision[t][r][k][a][m] and recall[t][k][a][m] (-1: no ground truth)
function E:accumulate()
  if not self._eval then error("COCOeval: accumulate() needs evaluate() first", 2) end
  local T, R, K, A, Mn = #M.IOU_THRS, #M.REC_THRS, #self.cat_ids, #M.AREA_RNG, #M.MAX_DETS
  local precision, recall, scores = {}, {}, {}
  for t = 1, T do
    precision[t], recall[t] = {}, {}
    for r = 1, R do
      precision[t][r] = {}
      for k = 1, K do
        precision[t][r][k] = {}
        for a = 1, A do
          precision[t][r][k][a] = {}
          for m = 1, Mn do precision[t][r][k][a][m] = -1 end
        end
      end
    end
    for k = 1, K do
      recall[t][k] = {}
      for a = 1, A do
        recall[t][k][a] = {}
        for m = 1, Mn do recall[t][k][a][m] = -1 end
      end
    end
  end
  for k = 1, K do
    for a = 1, A do
      local list = self._eval[k][a]
      for m, max_det in ipairs(M.MAX_DETS) do
        -- every image's best max_det detections, sorted by score (stable over images)
        local all = {}
        for _, e in ipairs(list) do
          for d = 1, min(#e.scores, max_det) do all[#all + 1] = { e, d } end
        end
        all = stable_sort(all, function(v) return -v[1].scores[v[2]] end)
        local npig = 0
        for _, e in ipairs(list) do
          for _, ig in ipairs(e.gtig) do if ig == 0 then npig = npig + 1 end end
        end
        if npig > 0 then
          for t = 1, T do
            local tp, fp, rc, pr = 0, 0, {}, {}
            for i, v in ipairs(all) do
              local e, d = v[1], v[2]
              if e.dtig[t][d] == 0 then
                if e.dtm[t][d] ~= 0 then tp = tp + 1 else fp = fp + 1 end
              end
              rc[i] = tp / npig
              pr[i] = tp / (fp + tp + 2.220446049250313e-16)
            end
            local nd = #all
            recall[t][k][a][m] = nd > 0 and rc[nd] or 0
            for i = nd, 2, -1 do
              if pr[i] > pr[i - 1] then pr[i - 1] = pr[i] end
            end
            -- numpy.searchsorted(rc, thr, "left"): the first recall >= thr
            local i = 1
            for r = 1, R do
              local thr = M.REC_THRS[r]
              while i <= nd and rc[i] < thr do i = i + 1 end
              precision[t][r][k][a][m] = i <= nd and pr[i] or 0
            end
          end
        end
      end
    end
  end
  self.precision, self.recall, self.scores = precision, recall, scores
  return self
end

-- the mean of the entries > -1 over IoU thresholds (all, or the one equal to iou_thr),
-- recall points and categories at area index a and maxDets index m; -1 when none
local function summarize_one(self, ap, iou_thr, a, m, cat)
  local s, n = 0, 0
  for t, thr in ipairs(M.IOU_THRS) do
    if iou_thr == nil or iou_thr == thr then
      for k = cat or 1, cat or #self.cat_ids do
        if ap then
          for r = 1, #M.REC_THRS do
            local v = self.precision[t][r][k][a][m]
            if v > -1 then s, n = s + v, n + 1 end
          end
        else
          local v = self.recall[t][k][a][m]
          if v > -1 then s, n = s + v, n + 1 end
        end
      end
    end
  end
  return n > 0 and s / n or -1
end

M.STAT_NAMES = { "AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge", "AR1", "AR10",
  "AR100", "ARsmall", "ARmedium", "ARlarge" }

-- summarize(): pycocotools' 12 stats (its summarize() for bbox), as a list
function E:summarize()
  if not self.precision then error("COCOeval: summarize() needs accumulate() first", 2) end
  local t50, t75 = M.IOU_THRS[1], M.IOU_THRS[6]
  self.stats = {
    summarize_one(self, true, nil, 1, 3), summarize_one(self, true, t50, 1, 3),
    summarize_one(self, true, t75, 1, 3), summarize_one(self, true, nil, 2, 3),
    summarize_one(self, true, nil, 3, 3), summarize_one(self, true, nil, 4, 3),
    summarize_one(self, false, nil, 1, 1), summarize_one(self, false, nil, 1, 2),
    summarize_one(self, false, nil, 1, 3), summarize_one(self, false, nil, 2, 3),
    summarize_one(self, false, nil, 3, 3), summarize_one(self, false, nil, 4, 3),
  }
  return self.stats
end

-- category_ap(k): AP@[.5:.95] (area all, maxDets 100) of the k-th category (sorted ids)
function E:category_ap(k) return summarize_one(self, true, nil, 1, 3, k) end

return M
