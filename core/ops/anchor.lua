-- core/ops/anchor.lua — the anchor ops of MXNet's contrib namespace (SSD's MultiBox
-- priors, training targets and detection; Faster R-CNN's region proposals): the op
-- table's anchor family (kernels/ref/anchor.c and spec/anchor_spec.lua share the base
-- name; the box family holds the other box ops). core/ops/optable.lua joins the families
-- in op order and documents every field.
--
-- Data layouts are MXNet's: MultiBox anchors (1, N, 4) corner boxes in [0, 1]; labels (B, M,
-- W >= 5) rows [class id, x1, y1, x2, y2, ...] with class ids as data (0-based, -1 for
-- padding rows); detections [id, score, x1, y1, x2, y2] with -1 rows after the kept ones;
-- proposals [batch id (0-based data), x1, y1, x2, y2] in pixels.
-- None of these ops has a gradient: MXNet's backward writes zeros to every input.
local ops = {}
local function op(t) ops[#ops + 1] = t end

local VARIANCES = { 0.1, 0.1, 0.2, 0.2 }

op { name = "multibox_prior", family = "anchor", inputs = { "data" }, infer = "multibox_prior",
  dtypes = "float", nondiff = true, shape_only = { 1 },
  params = {
    { "sizes", "floats", { 1 }, doc = "anchor sizes, a fraction of the image's height" },
    { "ratios", "floats", { 1 }, doc = "anchor width/height ratios" },
    { "clip", "bool", false, doc = "clip the anchors to [0, 1]" },
    { "steps", "floats", { -1, -1 }, doc = "(y, x) distance between anchor centres, a "
      .. "fraction of the image; -1: 1 / the feature map's height (width)" },
    { "offsets", "floats", { 0.5, 0.5 }, doc = "(y, x) offset of the first centre, in steps" },
  },
  doc = "MXNet's MultiBoxPrior: the SSD anchors of a feature map data (B, C, H, W) (read for "
    .. "its shape only): (1, H * W * (#sizes + #ratios - 1), 4) corner boxes in [0, 1], per "
    .. "cell centre ((r + offsets[1]) * steps[1], (c + offsets[2]) * steps[2]) first every "
    .. "size at ratios[1], then sizes[1] at each later ratio; a box of size s and ratio q is "
    .. "s * H / W * sqrt(q) wide and s / sqrt(q) high." }

op { name = "multibox_target", family = "anchor", inputs = { "anchor", "label", "cls_pred" },
  outputs = { "loc_target", "loc_mask", "cls_target" }, infer = "multibox_target",
  dtypes = "float", nondiff = true,
  params = {
    { "overlap_threshold", "float", 0.5, doc = "an anchor whose best IoU with a ground truth "
      .. "exceeds this is positive" },
    { "ignore_label", "float", -1, doc = "cls_target of the anchors neither positive nor "
      .. "chosen as negatives" },
    { "negative_mining_ratio", "float", -1, doc = "at most this many negatives per positive, "
      .. "the hardest first (-1: every non-positive anchor is negative)" },
    { "negative_mining_thresh", "float", 0.5, doc = "only anchors whose best IoU is below "
      .. "this are mined as negatives" },
    { "minimum_negative_samples", "int", 0, doc = "accepted for MXNet's attribute; its CPU "
      .. "operator does not use it" },
    { "variances", "floats", VARIANCES, doc = "the (x, y, w, h) scales of the encoded offsets" },
  },
  doc = "MXNet's MultiBoxTarget: SSD's training targets for anchors (1, N, 4), labels (B, M, "
    .. "W >= 5) and class predictions cls_pred (B, C, N) (read for negative mining only). "
    .. "Per batch: each ground truth (up to the first padding row) takes its best free "
    .. "anchor greedily by IoU, then every other anchor whose best IoU exceeds "
    .. "overlap_threshold is positive. Positives get cls_target = class id + 1 and the "
    .. "variance-scaled centre offsets of their ground truth in loc_target (B, N * 4) with "
    .. "loc_mask 1; negatives (all others, or with negative_mining_ratio the hardest by "
    .. "background probability) get class 0; the rest ignore_label. A batch without ground "
    .. "truths is all ignore_label." }

op { name = "multibox_detection", family = "anchor", inputs = { "cls_prob", "loc_pred", "anchor" },
  infer = "multibox_detection", dtypes = "float", nondiff = true,
  params = {
    { "clip", "bool", true, doc = "clip the boxes to [0, 1]" },
    { "threshold", "float", 0.01, doc = "a detection's class probability must reach this" },
    { "background_id", "int", 0, doc = "the background class of cls_prob (0-based; MXNet "
      .. "1.9's CPU operator always takes class 0)" },
    { "nms_threshold", "float", 0.5, doc = "suppress a detection whose IoU with a better one "
      .. "of its class reaches this (outside (0, 1]: no suppression, no sorting)" },
    { "force_suppress", "bool", false, doc = "suppress across classes too" },
    { "variances", "floats", VARIANCES, doc = "the (x, y, w, h) scales of the offsets" },
    { "nms_topk", "int", -1, doc = "only the nms_topk best take part in suppression; the "
      .. "later detections keep their rows, unsorted, with id -1 (-1: all)" },
  },
  doc = "MXNet's MultiBoxDetection: cls_prob (B, C, N), loc_pred (B, N * 4) and anchors (1, "
    .. "N, 4) to detections (B, N, 6) [id, score, x1, y1, x2, y2]: per anchor its best "
    .. "non-background class (ids count the classes without the background) when its "
    .. "probability reaches threshold, the box decoded from the anchor, sorted by score "
    .. "(stable) and suppressed per class by IoU (a suppressed row keeps its values with id "
    .. "-1); rows after the detections are -1." }

local PROPOSAL = {
  { "rpn_pre_nms_top_n", "int", 6000, doc = "the best proposals kept before NMS (<= 0: all)" },
  { "rpn_post_nms_top_n", "int", 300, doc = "proposals returned per image (repeated in order "
    .. "when NMS keeps fewer)" },
  { "threshold", "float", 0.7, doc = "NMS overlap threshold" },
  { "rpn_min_size", "int", 16, doc = "proposals smaller than this (times im_info's scale) "
    .. "score -1" },
  { "scales", "floats", { 4, 8, 16, 32 }, doc = "anchor scales of the base anchor" },
  { "ratios", "floats", { 0.5, 1, 2 }, doc = "anchor height/width ratios" },
  { "feature_stride", "int", 16, doc = "pixels between feature-map cells" },
  { "output_score", "bool", false, doc = "also return the scores (a second output)" },
  { "iou_loss", "bool", false, doc = "bbox_pred holds corner offsets, not centre/log-size "
    .. "deltas" },
}
local PROPOSAL_DOC = " from cls_prob (B, 2A, H, W) (background then foreground "
  .. "probabilities of A = #ratios * #scales anchors per cell), bbox_pred (B, 4A, H, W) and "
  .. "im_info (B, 3) [height, width, scale]: py-faster-rcnn's anchors shifted over the map, "
  .. "decoded and clipped to the image (cells beyond im_info's size and boxes under "
  .. "rpn_min_size score -1), the rpn_pre_nms_top_n best by foreground score, NMS, the "
  .. "first rpn_post_nms_top_n (cycled when fewer survive) as [batch id, x1, y1, x2, y2]; "
  .. "output_score adds their scores."

op { name = "proposal", family = "anchor", inputs = { "cls_prob", "bbox_pred", "im_info" },
  outputs = { "output", "score" }, nout = "proposal", nout_by = "output_score",
  infer = "proposal", dtypes = "float", nondiff = true, params = PROPOSAL,
  doc = "MXNet's Proposal (one image): rois (rpn_post_nms_top_n, 5)" .. PROPOSAL_DOC }

op { name = "multi_proposal", family = "anchor", inputs = { "cls_prob", "bbox_pred", "im_info" },
  outputs = { "output", "score" }, nout = "proposal", nout_by = "output_score",
  infer = "proposal", dtypes = "float", nondiff = true, params = PROPOSAL,
  doc = "MXNet's MultiProposal: Proposal per image of the batch, rois (B * "
    .. "rpn_post_nms_top_n, 5)" .. PROPOSAL_DOC }

local MXNET = {
  multibox_prior = { "_contrib_MultiBoxPrior" },
  multibox_target = { "_contrib_MultiBoxTarget" },
  multibox_detection = { "_contrib_MultiBoxDetection" },
  proposal = { "_contrib_Proposal" },
  multi_proposal = { "_contrib_MultiProposal" },
}

return ops, MXNET
