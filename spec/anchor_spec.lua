-- spec/anchor_spec.lua — the anchor family (core/ops/anchor.lua) against MXNet 1.9.1
-- (spec/fixtures/anchor_mxnet.params and anchor_graph-symbol.json:
-- tools/fixtures/make_anchor_fixtures.py), float64 against float32, and the errors.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local FILE = "anchor_spec.lua"

local F = nd.load("spec/fixtures/anchor_mxnet.params")

-- two lists of numbers within tol
local function near(want, got, tol)
  assert.are.equal(#want, #got)
  for i = 1, #want do
    assert(math.abs(want[i] - got[i]) <= tol, string.format("[%d]: %g, want %g", i, got[i], want[i]))
  end
end

local function close(got, want, tol, what)
  local d = H.maxdiff(got, want)
  assert(d <= (tol or 1e-5), string.format("%s: max difference %g", what or "", d))
end

local PRIOR = {
  a = { sizes = { 0.5, 0.25, 0.1 }, ratios = { 1, 2, 0.5 } },
  b = { sizes = 0.9, ratios = { 1, 3, 1 / 3 }, clip = true },
  c = { sizes = { 0.3, 0.6 }, ratios = 2, steps = { 0.1, 0.2 }, offsets = { 0.25, 0.75 } },
}

describe("multibox_prior", function()
  for k, opts in pairs(PRIOR) do
    it("equals MXNet's _contrib_MultiBoxPrior (case " .. k .. ")", function()
      local y = nd.multibox_prior(F.prior_data, opts)
      assert.are.same(F["prior_" .. k]:shape(), y:shape())
      close(y, F["prior_" .. k], 1e-6, k)
    end)
  end

  it("lays out anchors per cell: every size at the first ratio, then the other ratios", function()
    local y = nd.multibox_prior(nd.zeros { 1, 1, 2, 4 }, { sizes = { 0.5, 0.2 }, ratios = { 1, 4 } })
    assert.are.same({ 1, 2 * 4 * 3, 4 }, y:shape())
    local t = y:totable()[1]
    -- cell (row 1, column 1): centre (0.125, 0.25); H / W = 0.5 scales the widths
    near({ 0.125 - 0.125, 0.25 - 0.25, 0.125 + 0.125, 0.25 + 0.25 }, t[1], 1e-6)
    near({ 0.125 - 0.05, 0.25 - 0.1, 0.125 + 0.05, 0.25 + 0.1 }, t[2], 1e-6)
    -- size 0.5 at ratio 4: 0.5 * 0.5 * 2 = 0.5 wide, 0.5 / 2 = 0.25 high
    near({ 0.125 - 0.25, 0.25 - 0.125, 0.125 + 0.25, 0.25 + 0.125 }, t[3], 1e-6)
  end)

  it("float64 gives float32's anchors", function()
    local y = nd.multibox_prior(F.prior_data:astype("float64"), PRIOR.a)
    assert.are.equal("float64", y:dtype())
    close(y, F.prior_a, 1e-6)
  end)

  it("refuses bad maps and lists, naming them", function()
    H.assert_error(function(mark) mark() nd.multibox_prior(nd.zeros { 2, 3, 4 }) end, FILE,
      "multibox_prior: data must be a feature map (B, C, H, W), got (2, 3, 4)")
    H.assert_error(function(mark) mark() nd.multibox_prior(F.prior_data, { sizes = { 0.5, -1 } })
    end, FILE, "multibox_prior: sizes[2] must be a positive number, got -1")
    H.assert_error(function(mark) mark() nd.multibox_prior(F.prior_data, { steps = { 0.1 } }) end,
      FILE, "multibox_prior: steps must hold 2 numbers, got 1")
    H.assert_error(function(mark) mark() nd.multibox_prior(F.prior_data, { sizes = "big" }) end,
      FILE, "sizes")
    H.assert_error(function(mark) mark() nd.multibox_prior(F.prior_data, { ratios = {} }) end,
      FILE, "multibox_prior: ratios must hold 1 to 16 numbers, got 0")
  end)
end)

local TARGET = {
  a = {},
  b = { overlap_threshold = 0.4, negative_mining_ratio = 3, negative_mining_thresh = 0.5,
    ignore_label = -1, variances = { 0.1, 0.1, 0.2, 0.2 } },
  c = { overlap_threshold = 0.6, negative_mining_ratio = 2, negative_mining_thresh = 0.3,
    ignore_label = -2, variances = { 0.2, 0.3, 0.5, 0.4 } },
  d = { negative_mining_ratio = 1, minimum_negative_samples = 200 },
}

describe("multibox_target", function()
  for k, opts in pairs(TARGET) do
    it("equals MXNet's _contrib_MultiBoxTarget (case " .. k .. ")", function()
      local lt, lm, ct = nd.multibox_target(F.target_anchor, F.target_label, F.target_cls_pred,
        opts)
      close(lt, F["target_" .. k .. "_loc"], 1e-5, k .. " loc_target")
      assert.are.same(F["target_" .. k .. "_mask"]:tolist(), lm:tolist())
      assert.are.same(F["target_" .. k .. "_cls"]:tolist(), ct:tolist())
    end)
  end

  it("marks positives, mined negatives and ignored anchors as MXNet does", function()
    local _, lm, ct = nd.multibox_target(F.target_anchor, F.target_label, F.target_cls_pred,
      TARGET.b)
    local c, m = ct:totable(), lm:totable()
    local pos, neg, ign = 0, 0, 0
    for i = 1, #c[2] do
      if c[2][i] > 0 then pos = pos + 1 assert.are.equal(1, m[2][4 * i])
      elseif c[2][i] == 0 then neg = neg + 1
      else ign = ign + 1 end
    end
    assert.is_true(pos >= 5) -- every ground truth has an anchor
    assert.are.equal(3 * pos, neg) -- negative_mining_ratio = 3
    assert.is_true(ign > 0)
    -- the image without objects: all ignore_label, no mask
    for i = 1, #c[3] do assert.are.equal(-1, c[3][i]) end
    assert.are.equal(0, nd.sum(lm:slice_axis { axis = 1, begin = 3, ["end"] = 3 }):item())
  end)

  it("float64 gives float32's targets", function()
    local lt, _, ct = nd.multibox_target(F.target_anchor:astype("float64"),
      F.target_label:astype("float64"), F.target_cls_pred:astype("float64"), TARGET.b)
    close(lt, F.target_b_loc, 1e-5)
    assert.are.same(F.target_b_cls:tolist(), ct:tolist())
  end)

  it("refuses bad shapes and params, naming them", function()
    H.assert_error(function(mark) mark() nd.multibox_target(F.target_anchor, nd.zeros { 3, 5, 4 },
      F.target_cls_pred) end, FILE, "multibox_target: anchor must be (1, N, 4), label (B, M, W "
      .. ">= 5) and cls_pred (B, C, N), got (1, 256, 4), (3, 5, 4) and (3, 5, 256)")
    H.assert_error(function(mark) mark() nd.multibox_target(F.target_anchor, F.target_label,
      F.target_cls_pred, { variances = { 0.1, 0.2 } }) end, FILE,
      "multibox_target: variances must hold 4 numbers, got 2")
    H.assert_error(function(mark) mark() nd.multibox_target(F.target_anchor, F.target_label,
      F.target_cls_pred, { negative_mining_ratio = 3, negative_mining_thresh = 0 }) end, FILE,
      "multibox_target: negative mining needs negative_mining_thresh > 0, got 0")
    H.assert_error(function(mark) mark() nd.multibox_target(F.target_anchor,
      F.target_label:astype("float64"), F.target_cls_pred) end, FILE,
      "multibox_target: label is float64, anchor float32")
  end)
end)

local DET = {
  a = {},
  b = { threshold = 0.3, nms_threshold = 0.45, force_suppress = true, clip = false },
  c = { threshold = 0.2, nms_threshold = 0.5, nms_topk = 40, variances = { 0.1, 0.1, 0.2, 0.2 } },
  d = { threshold = 0.25, nms_threshold = 0, variances = { 0.2, 0.2, 0.3, 0.3 } },
}

describe("multibox_detection", function()
  for k, opts in pairs(DET) do
    it("equals MXNet's _contrib_MultiBoxDetection (case " .. k .. ")", function()
      local y = nd.multibox_detection(F.det_cls_prob, F.det_loc_pred, F.target_anchor, opts)
      assert.are.same(F["det_" .. k]:shape(), y:shape())
      close(y, F["det_" .. k], 1e-5, k)
    end)
  end

  it("keeps detections in score order, suppressed rows with id -1, then -1 rows", function()
    local t = nd.multibox_detection(F.det_cls_prob, F.det_loc_pred, F.target_anchor, DET.a)
      :totable()[1]
    local last, n = math.huge, 0
    for _, row in ipairs(t) do
      if row[2] ~= -1 then
        n = n + 1
        assert.is_true(row[2] <= last)
        last = row[2]
        assert.is_true(row[1] >= -1 and row[1] <= 2)
        for j = 3, 6 do assert.is_true(row[j] >= 0 and row[j] <= 1) end -- clip
      else
        assert.are.same({ -1, -1, -1, -1, -1, -1 }, row)
      end
    end
    assert.is_true(n > 10)
  end)

  it("float64 gives float32's detections", function()
    local y = nd.multibox_detection(F.det_cls_prob:astype("float64"),
      F.det_loc_pred:astype("float64"), F.target_anchor:astype("float64"), DET.b)
    close(y, F.det_b, 1e-5)
  end)

  it("runs MXNet's MultiBoxPrior -> MultiBoxDetection symbol JSON (list attributes)", function()
    local s = mx.sym.load("spec/fixtures/anchor_graph-symbol.json")
    local cp = F.det_cls_prob:slice_axis { axis = 1, begin = 1, ["end"] = 1 }
    local lp = F.det_loc_pred:slice_axis { axis = 1, begin = 1, ["end"] = 1 }
    local r = s:eval(mx.cpu(), { data = nd.zeros { 1, 1, 8, 8 }, cls_prob = cp, loc_pred = lp })
    close(r[1] or r, F.graph_out, 1e-5)
    -- and writes the lists back as MXNet's attribute strings
    local js = s:tojson()
    assert.is_truthy(js:find('"sizes": "(0.3, 0.15)"', 1, true) or
      js:find('"sizes":"(0.3, 0.15)"', 1, true), js)
  end)

  it("refuses bad shapes and params, naming them", function()
    H.assert_error(function(mark) mark() nd.multibox_detection(F.det_cls_prob,
      nd.zeros { 2, 100 }, F.target_anchor) end, FILE, "multibox_detection: cls_prob must be "
      .. "(B, C >= 2, N), loc_pred (B, N * 4) and anchor (1, N, 4), got (2, 4, 256), (2, 100) "
      .. "and (1, 256, 4)")
    H.assert_error(function(mark) mark() nd.multibox_detection(F.det_cls_prob, F.det_loc_pred,
      F.target_anchor, { background_id = 4 }) end, FILE,
      "multibox_detection: background_id 4 is not a class of cls_prob's 4")
    H.assert_error(function(mark) mark() nd.multibox_detection(F.det_cls_prob, F.det_loc_pred,
      F.target_anchor, { variances = { 0.1, 0.1, 0.2, 0 / 0 } }) end, FILE,
      "multibox_detection: variances[4] must be a positive number")
    H.assert_error(function(mark) mark() nd.multibox_detection(
      F.det_cls_prob:astype("int32"), F.det_loc_pred, F.target_anchor) end, FILE,
      "multibox_detection: input 1 has dtype int32")
  end)
end)

local PROP = {
  a = { rpn_pre_nms_top_n = 100, rpn_post_nms_top_n = 30, threshold = 0.7, rpn_min_size = 16 },
  b = { rpn_pre_nms_top_n = -1, rpn_post_nms_top_n = 60, threshold = 0.5, rpn_min_size = 8,
    scales = { 2, 4 }, ratios = { 0.5, 1, 2, 1.5, 3, 1 / 3 }, output_score = true },
  c = { rpn_pre_nms_top_n = 20, rpn_post_nms_top_n = 40, threshold = 0.6, iou_loss = true,
    output_score = true },
}

describe("proposal / multi_proposal", function()
  local first = { axis = 1, begin = 1, ["end"] = 1 }
  for k, opts in pairs(PROP) do
    it("equal MXNet's _contrib_MultiProposal and _contrib_Proposal (case " .. k .. ")", function()
      local rois, score = nd.multi_proposal(F.prop_cls, F.prop_bbox, F.prop_im, opts)
      assert.are.same(F["mprop_" .. k]:shape(), rois:shape())
      close(rois, F["mprop_" .. k], 1e-4, k)
      if opts.output_score then close(score, F["mprop_" .. k .. "_score"], 1e-6, k .. " score")
      else assert.is_nil(score) end
      local r1 = nd.proposal(F.prop_cls:slice_axis(first), F.prop_bbox:slice_axis(first),
        F.prop_im:slice_axis(first), opts)
      close(r1, F["prop_" .. k], 1e-4, k .. " single")
    end)
  end

  it("refuses bad shapes, a batch for proposal and an image larger than the map", function()
    H.assert_error(function(mark) mark() nd.proposal(F.prop_cls, F.prop_bbox, F.prop_im) end,
      FILE, "proposal: takes one image (cls_prob (1, 2A, H, W)), got a batch of 2: use "
      .. "multi_proposal")
    H.assert_error(function(mark) mark() nd.multi_proposal(F.prop_cls, F.prop_bbox, F.prop_im,
      { scales = { 8 } }) end, FILE, "multi_proposal: cls_prob has 12 anchors per cell (2A = 24 "
      .. "channels), #ratios * #scales = 3")
    H.assert_error(function(mark) mark() nd.multi_proposal(F.prop_cls, F.prop_bbox,
      nd.array { { 200, 80, 1 }, { 96, 70, 1 } }) end, FILE, "multi_proposal: im_info[1] says 200 x "
      .. "80 pixels, more than the 6 x 6 map covers at feature_stride 16")
    H.assert_error(function(mark) mark() nd.multi_proposal(F.prop_cls, nd.zeros { 2, 12, 6, 6 },
      F.prop_im) end, FILE, "multi_proposal: cls_prob must be (B, 2A, H, W), bbox_pred (B, 4A, "
      .. "H, W) and im_info (B, 3)")
  end)
end)
