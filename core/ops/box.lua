-- core/ops/box.lua — bounding-box ops of MXNet's contrib namespace (non-maximum
-- suppression, IoU, matching, box coding, ROI pooling): the op table's box family
-- (kernels/*/box.c and spec/box_spec.lua share the base name). core/ops/optable.lua joins
-- the families in op order and documents every field.
--
-- Box rows keep MXNet's data layouts: a detection row is [..., score, ..., x1, y1, x2,
-- y2, ...] with its class id a label (0-based, as GluonCV's) and ROI rows are [batch id
-- (0-based, data like a class id), x1, y1, x2, y2]. Positions within a row (coord_start,
-- score_index, id_index) are 1-based params as every Lua index; match results and
-- inputs (bipartite_matching, box_encode's matches) are 1-based positions with 0 for
-- none, as argmax (docs/ops-notes.md).
local ops = {}
local function op(t) ops[#ops + 1] = t end

local FORMAT = { "corner", "center" }

op { name = "box_nms", family = "box", inputs = { "data" }, outputs = { "out", "index" },
  infer = "box_nms", dtypes = "float", cpu = true,
  params = {
    { "overlap_thresh", "float", 0.5, doc = "suppress a box whose IoU with a kept, higher "
      .. "scoring box exceeds this" },
    { "valid_thresh", "float", 0, doc = "only boxes scoring above this take part" },
    { "topk", "int", -1, doc = "keep the topk best valid boxes before suppression (-1: all)" },
    { "coord_start", "axis", 3, doc = "1-based position of the 4 coordinates in a row "
      .. "(MXNet's 2)" },
    { "score_index", "axis", 2, doc = "1-based position of the score (MXNet's 1)" },
    { "id_index", "axis", -1, doc = "1-based position of the class id; negative: no ids, "
      .. "every box suppresses every other (MXNet's -1)" },
    { "background_id", "int", -1, doc = "boxes of this class id are dropped (with id_index; "
      .. "the default -1 drops GluonCV's padding rows)" },
    { "force_suppress", "bool", false, doc = "suppress across classes too" },
    { "in_format", "enum", "corner", values = FORMAT, doc = "corner (x1, y1, x2, y2) or "
      .. "center (x, y, w, h)" },
    { "out_format", "enum", "corner", values = FORMAT, doc = "the coordinates' format in out" },
  },
  grad = function(F, _, y, g) return { F.box_nms_backward(g[1], y[2]) } end,
  doc = "MXNet's box_nms over data (..., N, K): per batch, boxes scoring above valid_thresh "
    .. "(with a class id other than background_id when id_index is given), sorted by "
    .. "score (stable), the topk best kept, then each box suppresses the later ones of its "
    .. "class (any class with force_suppress) whose IoU exceeds overlap_thresh. out: the kept "
    .. "rows first in score order, the rest -1; index: each out row's 1-based position in "
    .. "its batch (0 for the -1 rows). The gradient flows to the kept rows." }
op { name = "box_nms_backward", family = "box", inputs = { "ograd", "index" },
  infer = "box_nms_backward", dtypes = "numeric", nondiff = true,
  doc = "box_nms's gradient: zeros of ograd's shape with each ograd row written back at "
    .. "the position index gives." }

op { name = "box_iou", family = "box", inputs = { "lhs", "rhs" }, infer = "box_iou",
  dtypes = "float", cpu = true, nondiff = true,
  params = { { "format", "enum", "corner", values = FORMAT, doc = "corner (x1, y1, x2, y2) "
    .. "or center (x, y, w, h)" } },
  doc = "MXNet's box_iou: intersection over union of every box of lhs (..., 4) with every "
    .. "box of rhs (..., 4): shape lhs's leading dims then rhs's (0 where the union is empty)." }

op { name = "bipartite_matching", family = "box", inputs = { "data" },
  outputs = { "row_marker", "col_marker" }, infer = "bipartite_matching", dtypes = "float",
  nondiff = true,
  params = {
    { "threshold", "float", nil, doc = "required: a pair matches only when its score is "
      .. "above it (below it with is_ascend)" },
    { "is_ascend", "bool", false, doc = "match the lowest scores first" },
    { "topk", "int", -1, doc = "at most topk matches (-1: no limit)" },
  },
  doc = "MXNet's bipartite_matching, greedy: per batch of data (..., N, M), the pairs in "
    .. "score order (stable), each taken when its row and column are both free and its score "
    .. "passes threshold. row_marker (..., N): each row's 1-based matched column, 0 for none; "
    .. "col_marker (..., M): each column's row. MXNet gives 0-based positions with -1 for "
    .. "none, and topk + 1 matches." }

op { name = "box_encode", family = "box",
  inputs = { "samples", "matches", "anchors", "refs", "means", "stds" },
  outputs = { "targets", "masks" }, infer = "box_encode", dtypes = "float", nondiff = true,
  doc = "MXNet's box_encode: for samples (B, N) > 0.5 (positive anchors), the centre offsets "
    .. "of refs[matches] (refs (B, M, 4), matches (B, N) 1-based here) from anchors (B, N, 4), "
    .. "all corner boxes: ((gx - ax) / aw - means[1]) / stds[1], ..., (log(gw / aw) - "
    .. "means[3]) / stds[3], ...; targets (B, N, 4) and masks (1 where positive, else 0)." }

op { name = "box_decode", family = "box", inputs = { "data", "anchors" }, infer = "box_decode",
  dtypes = "float", nondiff = true,
  params = {
    { "std0", "float", 1 }, { "std1", "float", 1 }, { "std2", "float", 1 },
    { "std3", "float", 1 },
    { "clip", "float", -1, doc = "bound of the width/height log-scale offsets (negative: none)" },
    { "format", "enum", "center", values = FORMAT, doc = "the anchors' format" },
  },
  doc = "MXNet's box_decode: data (B, N, 4) offsets (dx, dy, dw, dh) from anchors (1 or B, "
    .. "N, 4) to corner boxes: x = dx * std0 * aw + ax, w = exp(min(dw * std2, clip)) * aw, ..." }

op { name = "roi_align", family = "box", inputs = { "data", "rois" }, infer = "roi_align",
  dtypes = "float", cpu = { supports = true },
  params = {
    { "pooled_size", "shape", nil, doc = "required: (height, width) of each output" },
    { "spatial_scale", "float", nil, doc = "required: the scale from ROI to feature coordinates" },
    { "sample_ratio", "int", -1, doc = "samples per bin side (-1: ceil(roi size / bins))" },
    { "position_sensitive", "bool", false, doc = "R-FCN's position-sensitive pooling: "
      .. "output channel c of bin (i, j) reads input channel (c * ph + i) * pw + j" },
    { "aligned", "bool", false, doc = "shift the ROI by half a pixel (Detectron2's ROIAlignV2)" },
  },
  grad = function(F, x, _, g, p)
    return { F.roi_align_backward(g[1], x[1], x[2], p) }
  end,
  doc = "MXNet's ROIAlign: data (N, C, H, W), rois (R, 5) [batch id, x1, y1, x2, y2] -> "
    .. "(R, C, ph, pw), each bin the mean of bilinear samples (zero outside the map). The "
    .. "gradient flows to data (rois take none, as in MXNet)." }
op { name = "roi_align_backward", family = "box", inputs = { "ograd", "data", "rois" },
  infer = "roi_align_backward", dtypes = "float", nondiff = true, cpu = { supports = true },
  shape_only = { 2 },
  params = {
    { "pooled_size", "shape", nil }, { "spatial_scale", "float", nil },
    { "sample_ratio", "int", -1 }, { "position_sensitive", "bool", false },
    { "aligned", "bool", false },
  },
  doc = "roi_align's data gradient: each bin's ograd spread over its samples' bilinear "
    .. "neighbours (data's shape; data is read for its shape only)." }

op { name = "roi_pooling", family = "box", inputs = { "data", "rois" },
  outputs = { "out", "argmax" }, infer = "roi_pooling", dtypes = "float",
  params = {
    { "pooled_size", "shape", nil, doc = "required: (height, width) of each output" },
    { "spatial_scale", "float", nil, doc = "required: the scale from ROI to feature coordinates" },
  },
  grad = function(F, x, y, g) return { F.roi_pooling_backward(g[1], x[1], y[2]) } end,
  doc = "MXNet's ROIPooling: data (N, C, H, W), rois (R, 5) [batch id, x1, y1, x2, y2] "
    .. "(corners rounded to feature cells) -> out (R, C, ph, pw), each bin's maximum (0 for "
    .. "an empty bin), and argmax: each maximum's 1-based flat position in data (0: empty). "
    .. "The gradient flows to data at those positions." }
op { name = "roi_pooling_backward", family = "box", inputs = { "ograd", "data", "argmax" },
  infer = "roi_pooling_backward", dtypes = "numeric", nondiff = true, shape_only = { 2 },
  doc = "roi_pooling's data gradient: zeros of data's shape with each ograd element added at "
    .. "the 1-based flat position argmax gives." }

-- MXNet 1.9's operator names whose semantics match (bipartite_matching and box_encode take
-- or give 1-based positions here, so they keep luamx names only).
local MXNET = {
  box_nms = { "_contrib_box_nms", "_contrib_box_non_maximum_suppression" },
  box_iou = { "_contrib_box_iou" },
  box_decode = { "_contrib_box_decode" },
  roi_align = { "_contrib_ROIAlign" },
  roi_pooling = { "ROIPooling" },
}

return ops, MXNET
