-- spec/box_spec.lua — the box family (core/ops/box.lua) against MXNet 1.9.1
-- (spec/fixtures/box_mxnet.params: tools/fixtures/make_box_fixtures.py), the CPU kernels
-- against the reference kernels, and the errors.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local FILE = "box_spec.lua"

local F = nd.load("spec/fixtures/box_mxnet.params")

local function close(got, want, tol, what)
  local d = H.maxdiff(got, want)
  assert(d <= (tol or 1e-5), string.format("%s: max difference %g", what or "", d))
end

-- MXNet's 0-based positions (-1: none) as luamx's 1-based ones (0: none)
local function plus1(t) return nd.add_scalar(t, { scalar = 1 }) end

local NMS = {
  a = { overlap_thresh = 0.5, valid_thresh = 0.1, id_index = 1 },
  b = { overlap_thresh = 0.3, topk = 10, force_suppress = true, id_index = 1 },
  c = { overlap_thresh = 0.4, id_index = -1 },
  d = { overlap_thresh = 0.5, id_index = 1, in_format = "center", out_format = "corner" },
  e = { overlap_thresh = 0.5, id_index = 1, background_id = 1, out_format = "center" },
}

describe("box_nms", function()
  for k, opts in pairs(NMS) do
    it("equals MXNet's _contrib_box_nms (case " .. k .. "), CPU and reference", function()
      local out, index = nd.box_nms(F.nms_data, opts)
      close(out, F["nms_" .. k], 1e-5, k)
      local rout, rindex = nd._ref.box_nms(F.nms_data, opts)
      close(rout, F["nms_" .. k], 1e-5, k .. " ref")
      assert.are.same(rindex:tolist(), index:tolist())
      -- index: each kept row's 1-based source row, 0 after the kept rows
      local o, d, ix = out:totable(), F.nms_data:totable(), index:totable()
      for b = 1, 2 do
        for r = 1, 60 do
          local j = ix[b][r]
          if j == 0 then
            assert.are.equal(-1, o[b][r][2])
          elseif opts.out_format ~= "center" and opts.in_format ~= "center" then
            assert.are.same(d[b][j], o[b][r])
          end
        end
      end
    end)
  end

  it("routes each kept row's gradient back to its row (MXNet's backward)", function()
    local x = F.nms_data:copy()
    x:attach_grad()
    mx.autograd.record(function()
      local y = nd.box_nms(x, NMS.a)
      y:backward(F.nms_head)
    end)
    close(x:grad(), F.nms_grad, 1e-6)
  end)

  it("the CPU kernel keeps the reference's boxes on 2000 random boxes, both dtypes", function()
    local r = H.rng(7)
    for _, dt in ipairs { "float32", "float64" } do
      local n, rows = 2000, {}
      for i = 1, n do
        local x, y = r() * 200 + 200, r() * 200 + 200
        rows[i] = { math.floor((r() + 1) * 2), (r() + 1) / 2, x, y, x + 5 + (r() + 1) * 20,
          y + 5 + (r() + 1) * 20 }
      end
      local d = nd.array({ rows }, { dtype = dt })
      for _, o in ipairs { { id_index = 1, valid_thresh = 0.2 }, { topk = 500 },
        { id_index = 1, force_suppress = true, overlap_thresh = 0.1 } } do
        local a, ai = nd.box_nms(d, o)
        local b, bi = nd._ref.box_nms(d, o)
        assert.are.same(bi:tolist(), ai:tolist())
        close(a, b, 0)
      end
    end
  end)

  it("checks its params against data's rows, naming them 1-based", function()
    local d = nd.zeros { 2, 4, 6 }
    H.assert_error(function(mark) mark() nd.box_nms(d, { coord_start = 4 }) end, FILE,
      "box_nms: coord_start 4 (1-based) needs 4 coordinates within rows of 6 values")
    H.assert_error(function(mark) mark() nd.box_nms(d, { score_index = 7 }) end, FILE,
      "box_nms: score_index 7 (1-based) is outside rows of 6 values")
    H.assert_error(function(mark) mark() nd.box_nms(nd.zeros { 6 }) end, FILE,
      "box_nms: data must be (..., N, K) with at least 2 dims, got (6,)")
    H.assert_error(function(mark) mark() nd.box_nms(nd.zeros({ 2, 6 }, { dtype = "int32" })) end,
      FILE, "box_nms: input 1 has dtype int32, which this op does not support")
  end)

  it("is MXNet's _contrib_box_nms by name (symbol JSON, C callers)", function()
    local C = require("mx.core.lib").C
    assert.are.equal(C.mx_op_find("box_nms"), C.mx_op_find("_contrib_box_nms"))
    assert.are.equal(C.mx_op_find("roi_align"), C.mx_op_find("_contrib_ROIAlign"))
  end)
end)

describe("box_iou", function()
  it("equals MXNet's _contrib_box_iou in both formats; CPU equals the reference", function()
    close(nd.box_iou(F.iou_lhs, F.iou_rhs), F.iou_corner, 1e-6, "corner")
    close(nd.box_iou(F.iou_lhs, F.iou_rhs, { format = "center" }), F.iou_center, 1e-6, "center")
    assert.are.same({ 5, 2, 3 }, nd.box_iou(F.iou_lhs, F.iou_rhs):shape())
    close(nd.box_iou(F.iou_lhs, F.iou_rhs), nd._ref.box_iou(F.iou_lhs, F.iou_rhs), 1e-6)
    H.assert_error(function(mark) mark() nd.box_iou(nd.zeros { 2, 3 }, nd.zeros { 2, 4 }) end,
      FILE, "box_iou: lhs (2, 3) and rhs (2, 4) must both end in 4 coordinates")
  end)

  it("CPU equals the reference on many boxes: overlapping, apart, degenerate and NaN", function()
    mx.random.seed(3)
    -- corners in [0, 1) with random sides (some negative: degenerate), a column count the
    -- vector loop does not divide
    local function boxes(n)
      local xy = nd.random.uniform(0, 1, { n, 2 })
      local wh = nd.random.uniform(-0.1, 0.6, { n, 2 })
      return nd.concat({ xy, nd.add(xy, wh) }, { dim = 2 })
    end
    local lhs, rhs = boxes(67), boxes(261)
    for _, fmt in ipairs({ "corner", "center" }) do
      local o = { format = fmt }
      close(nd.box_iou(lhs, rhs, o), nd._ref.box_iou(lhs, rhs, o), 1e-6, fmt)
      local l64, r64 = lhs:astype("float64"), rhs:astype("float64")
      close(nd.box_iou(l64, r64, o), nd._ref.box_iou(l64, r64, o), 0, fmt .. " f64")
    end
    -- a NaN corner on each side: the reference's NaN-ignoring min and max
    local t, r = lhs:tolist(), rhs:tolist() -- flat, row-major
    t[4 * 4 + 3], r[6 * 4 + 2] = 0 / 0, 0 / 0
    local ln, rn = nd.reshape(nd.array(t), { 67, 4 }), nd.reshape(nd.array(r), { 261, 4 })
    close(nd.box_iou(ln, rhs), nd._ref.box_iou(ln, rhs), 1e-6, "NaN lhs")
    close(nd.box_iou(lhs, rn), nd._ref.box_iou(lhs, rn), 1e-6, "NaN rhs")
  end)
end)

describe("bipartite_matching", function()
  it("equals MXNet's greedy matching, 1-based with 0 for none", function()
    local row, col = nd.bipartite_matching(F.bm_data, { threshold = 0.3 })
    close(row, plus1(F.bm_desc_row), 0, "row")
    close(col, plus1(F.bm_desc_col), 0, "col")
    row, col = nd.bipartite_matching(F.bm_data, { threshold = 0.6, is_ascend = true })
    close(row, plus1(F.bm_asc_row), 0, "asc row")
    close(col, plus1(F.bm_asc_col), 0, "asc col")
  end)

  it("topk limits the matches to topk (MXNet 1.9 makes topk + 1)", function()
    local x = nd.array({ { 0.5, 0.6 }, { 0.1, 0.2 }, { 0.3, 0.4 } })
    local row, col = nd.bipartite_matching(x, { threshold = 1e-12, topk = 1 })
    assert.are.same({ 2, 0, 0 }, row:tolist())
    assert.are.same({ 0, 1 }, col:tolist())
    row = nd.bipartite_matching(x, { threshold = 1e-12 })
    assert.are.same({ 2, 0, 1 }, row:tolist())
    H.assert_error(function(mark) mark() nd.bipartite_matching(x) end, FILE,
      "bipartite_matching: threshold is required")
  end)
end)

describe("box_encode and box_decode", function()
  it("box_encode equals MXNet's (matches 1-based here)", function()
    local t, m = nd.box_encode(F.enc_samples, plus1(F.enc_matches), F.enc_anchors, F.enc_refs,
      F.enc_means, F.enc_stds)
    close(t, F.enc_targets, 1e-5, "targets")
    close(m, F.enc_masks, 0, "masks")
    H.assert_error(function(mark) mark() nd.box_encode(F.enc_samples, F.enc_matches, F.enc_anchors,
      F.enc_refs, F.enc_means, F.enc_stds) end, FILE, "box_encode: matches[")
  end)

  it("box_decode equals MXNet's in both anchor formats, with clip", function()
    close(nd.box_decode(F.dec_data, F.dec_anchors, { std0 = 0.1, std1 = 0.1, std2 = 0.2,
      std3 = 0.2, format = "corner" }), F.dec_corner, 1e-4, "corner")
    close(nd.box_decode(nd.mul_scalar(F.dec_data, { scalar = 5 }), F.dec_anchors,
      { clip = 1.5, format = "center" }), F.dec_center_clip, 1e-4, "center")
    H.assert_error(function(mark) mark() nd.box_decode(nd.zeros { 2, 8, 4 }, nd.zeros { 1, 7, 4 })
    end, FILE, "box_decode: data must be (B, N, 4) and anchors (1 or B, N, 4), got (2, 8, 4) "
      .. "and (1, 7, 4)")
  end)
end)

describe("roi_align", function()
  local ROI = {
    a = { pooled_size = { 2, 2 }, spatial_scale = 0.5, sample_ratio = 2 },
    b = { pooled_size = { 3, 2 }, spatial_scale = 0.5, sample_ratio = -1 },
    c = { pooled_size = { 2, 2 }, spatial_scale = 0.5, sample_ratio = 2, aligned = true },
    d = { pooled_size = { 2, 2 }, spatial_scale = 0.5, sample_ratio = 2,
      position_sensitive = true },
  }
  for k, opts in pairs(ROI) do
    it("equals MXNet's _contrib_ROIAlign (case " .. k .. ")", function()
      close(nd.roi_align(F.roi_data, F.roi_rois, opts), F["roi_" .. k], 1e-5, k)
    end)
  end

  it("the CPU kernel (float32) equals the reference on random ROIs, every setting", function()
    local r = H.rng(11)
    local data = H.rand(mx, { 2, 8, 13, 11 }, { seed = 5, dtype = "float32" })
    local rows = {}
    for i = 1, 40 do
      local x, y = r() * 14 - 2, r() * 16 - 2
      -- batch -1: an empty ROI; some reach past the map, some are thinner than a cell
      rows[i] = { i % 7 == 0 and -1 or i % 2, x, y, x + (r() + 1) * 9,
        y + (r() + 1) * 0.6 ^ (i % 3) * 8 }
    end
    local rois = nd.array(rows)
    for _, o in ipairs({ { pooled_size = { 2, 2 }, spatial_scale = 0.9, sample_ratio = 2 },
      { pooled_size = { 3, 2 }, spatial_scale = 0.7, sample_ratio = -1 },
      { pooled_size = { 2, 3 }, spatial_scale = 1, sample_ratio = 3, aligned = true },
      { pooled_size = { 2, 2 }, spatial_scale = 0.5, sample_ratio = 2, position_sensitive = true },
      { pooled_size = { 14, 14 }, spatial_scale = 1, sample_ratio = -1 } }) do
      close(nd.roi_align(data, rois, o), nd._ref.roi_align(data, rois, o), 1e-5,
        "pooled " .. table.concat(o.pooled_size, "x"))
    end
  end)

  it("the CPU backward (float32) equals the reference and is the CPU forward's adjoint",
    function()
    local r = H.rng(23)
    -- ROIs over an H x W map of nb images: some start before the map or reach past it, some
    -- are thinner than a cell, every 9th has batch -1 (empty)
    local function random_rois(n, nb, hgt, wid)
      local rows = {}
      for i = 1, n do
        local x, y = r() * wid * 1.2 - 2, r() * hgt * 1.2 - 2
        rows[i] = { i % 9 == 0 and -1 or i % nb, x, y, x + (r() + 1) * wid * 0.8,
          y + (r() + 1) * 0.6 ^ (i % 3) * hgt * 0.6 }
      end
      return nd.array(rows)
    end
    local function sum64(t) return nd.sum(t:astype("float64")):asscalar() end
    for n, case in ipairs({
      { { 2, 8, 13, 11 }, 40, { pooled_size = { 2, 2 }, spatial_scale = 0.9, sample_ratio = 2 } },
      { { 2, 8, 13, 11 }, 40, { pooled_size = { 3, 2 }, spatial_scale = 0.7, sample_ratio = -1 } },
      { { 2, 8, 13, 11 }, 40, { pooled_size = { 2, 3 }, spatial_scale = 1, sample_ratio = 3,
        aligned = true } },
      { { 2, 8, 13, 11 }, 40, { pooled_size = { 2, 2 }, spatial_scale = 0.5, sample_ratio = 2,
        position_sensitive = true } },
      { { 3, 6, 24, 17 }, 60, { pooled_size = { 7, 7 }, spatial_scale = 0.5, sample_ratio = -1,
        aligned = true } },
      { { 3, 5, 20, 20 }, 30, { pooled_size = { 14, 14 }, spatial_scale = 1, sample_ratio = 2 } },
      { { 1, 18, 5, 7 }, 25, { pooled_size = { 3, 3 }, spatial_scale = 1, sample_ratio = -1,
        position_sensitive = true, aligned = true } },
    }) do
      local shape, o = case[1], case[3]
      local data = H.rand(mx, shape, { seed = n, dtype = "float32" })
      local rois = random_rois(case[2], shape[1], shape[3] / o.spatial_scale,
        shape[4] / o.spatial_scale)
      local y = nd.roi_align(data, rois, o)
      local og = H.rand(mx, y:shape(), { seed = 40 + n, dtype = "float32" })
      local got = nd.roi_align_backward(og, data, rois, o)
      local want = nd._ref.roi_align_backward(og, data, rois, o)
      assert.are.same(data:shape(), got:shape())
      local what = string.format("case %d (%s, pooled %s)", n, table.concat(shape, "x"),
        table.concat(o.pooled_size, "x"))
      close(got, want, 1e-5 * (1 + nd.max(nd.abs(want)):asscalar()), what)
      -- <roi_align(data), og> = <data, roi_align_backward(og)>
      local lhs, rhs = sum64(nd.multiply(y, og)), sum64(nd.multiply(data, got))
      assert(math.abs(lhs - rhs) <= 1e-5 * (1 + math.abs(lhs)), string.format(
        "%s: <y, og> %.9g, <x, dx> %.9g", what, lhs, rhs))
    end
  end)

  it("its data gradient equals MXNet's", function()
    local x = F.roi_data:copy()
    x:attach_grad()
    mx.autograd.record(function()
      nd.roi_align(x, F.roi_rois, ROI.b):backward(F.roi_head)
    end)
    close(x:grad(), F.roi_grad, 1e-5)
  end)

  it("checks pooled_size, spatial_scale, shapes and batch ids", function()
    H.assert_error(function(mark) mark() nd.roi_align(F.roi_data, F.roi_rois,
      { spatial_scale = 1 }) end, FILE, "roi_align: pooled_size must be 2 positive sizes")
    H.assert_error(function(mark) mark() nd.roi_align(F.roi_data, F.roi_rois,
      { pooled_size = { 2, 2 } }) end, FILE, "roi_align: spatial_scale is required")
    H.assert_error(function(mark) mark() nd.roi_align(F.roi_data, nd.zeros { 2, 4 },
      { pooled_size = { 2, 2 }, spatial_scale = 1 }) end, FILE,
      "roi_align: data must be (N, C, H, W) and rois (R, 5), got (2, 8, 8, 8) and (2, 4)")
    local bad, o22 = nd.array { { 2, 0, 0, 4, 4 } }, { pooled_size = { 2, 2 }, spatial_scale = 1 }
    H.assert_error(function(mark) mark() nd.roi_align(F.roi_data, F.roi_rois,
      { pooled_size = { 2, 2 }, spatial_scale = 1, sample_ratio = 2 ^ 40 }) end, FILE,
      "roi_align: sample_ratio must be at most 1024 samples per bin side")
    local huge = nd.array { { 0, 0, 0, 1e30, 4 } }
    H.assert_error(function(mark)
      mark() local y = nd.roi_align(F.roi_data, huge, o22) y:wait_to_read()
    end, FILE, "roi_align: rois[1] has coordinate 3 = 1e+30")
    H.assert_error(function(mark)
      mark() local y = nd.roi_align(F.roi_data, bad, o22) y:wait_to_read()
    end, FILE,
      "roi_align: rois[1] has batch id 2, not one of 0..1")
  end)
end)

describe("the box gradients as ops", function()
  it("nd.box_nms_backward writes each ograd row at its 1-based index row", function()
    local g = nd.array({ { { 1, 2 }, { 3, 4 }, { 5, 6 } } })
    local ix = nd.array({ { 3, 1, 0 } }, { dtype = "int64" })
    assert.are.same({ { { 3, 4 }, { 0, 0 }, { 1, 2 } } }, nd.box_nms_backward(g, ix):totable())
    local bad = nd.array({ { 4, 0, 0 } }, { dtype = "int64" })
    H.assert_error(function(mark) mark() nd.box_nms_backward(g, bad):wait_to_read() end, FILE,
      "box_nms_backward: index 4 at row 1 is not a row of 1..3")
  end)

  it("nd.roi_align_backward is MXNet's data gradient", function()
    local o = { pooled_size = { 3, 2 }, spatial_scale = 0.5, sample_ratio = -1 }
    close(nd.roi_align_backward(F.roi_head, F.roi_data, F.roi_rois, o), F.roi_grad, 1e-5)
  end)
end)

describe("roi_pooling", function()
  it("equals MXNet's ROIPooling, its argmax names each maximum's position", function()
    local out, am = nd.roi_pooling(F.roi_data, F.roi_rois, { pooled_size = { 2, 2 },
      spatial_scale = 0.5 })
    close(out, F.pool_a, 1e-6, "2x2")
    close(nd.roi_pooling(F.roi_data, F.roi_rois, { pooled_size = { 3, 3 }, spatial_scale = 1 }),
      F.pool_b, 1e-6, "3x3")
    local flat, o, a = F.roi_data:reshape({ -1 }):tolist(), out:tolist(), am:tolist()
    for i = 1, #o do
      if a[i] > 0 then assert.are.equal(flat[a[i]], o[i]) else assert.are.equal(0, o[i]) end
    end
  end)

  it("its data gradient equals MXNet's (also as nd.roi_pooling_backward)", function()
    local o = { pooled_size = { 3, 3 }, spatial_scale = 1 }
    local x = F.roi_data:copy()
    x:attach_grad()
    mx.autograd.record(function() nd.roi_pooling(x, F.roi_rois, o):backward(F.pool_head) end)
    close(x:grad(), F.pool_grad, 1e-6)
    local _, am = nd.roi_pooling(F.roi_data, F.roi_rois, o)
    close(nd.roi_pooling_backward(F.pool_head, F.roi_data, am), F.pool_grad, 1e-6)
  end)

  it("checks the rois' batch ids", function()
    local bad, o = nd.array { { -1, 0, 0, 4, 4 } }, { pooled_size = { 2, 2 }, spatial_scale = 1 }
    H.assert_error(function(mark)
      mark() local y = nd.roi_pooling(F.roi_data, bad, o) y:wait_to_read()
    end, FILE, "roi_pooling: rois[1] has batch id -1, not one of 0..1")
  end)
end)
