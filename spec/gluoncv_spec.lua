-- mx.gluoncv: GluonCV's module names (model_zoo, nn) over the vision zoo.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local FILE = "gluoncv_spec.lua"

describe("mx.gluoncv", function()
  local gcv = require("mx.gluoncv")

  it("model_zoo.get_model builds GluonCV's classification networks by name", function()
    local names = gcv.model_zoo.get_model_list()
    assert.are.equal(75, #names) -- 62 classification and detection, 13 segmentation
    local yolo = gcv.model_zoo.get_model("yolo3_mobilenet1.0_voc", { classes = { "a", "b" } })
    yolo:initialize()
    local ids, scores, boxes = yolo(nd.ones { 1, 3, 64, 64 })
    assert.are.same({ 1, 100, 1 }, ids:shape())
    assert.are.same({ 1, 100, 4 }, boxes:shape())
    assert.are.same({ 1, 100, 1 }, scores:shape())
    local det = gcv.model_zoo.get_model("ssd_512_mobilenet1.0_voc", { classes = { "a", "b" },
      post_nms = 10 })
    det:initialize()
    ids, scores, boxes = det(nd.ones { 1, 3, 64, 64 })
    assert.are.same({ 1, 10, 1 }, ids:shape())
    assert.are.same({ 1, 10, 4 }, boxes:shape())
    assert.are.same({ 1, 10, 1 }, scores:shape())
    local net = gcv.model_zoo.get_model("MobileNetV3_Small", { classes = 7 })
    net:initialize()
    assert.are.same({ 2, 7 }, net(nd.ones { 2, 3, 64, 64 }):shape())
    assert.truthy(net:collect_params()["features.3.se.conv1.weight"])
  end)

  it("pretrained weights come from GluonCV's store; errors name the file", function()
    local d = os.tmpname()
    os.remove(d)
    H.assert_error(function(mark) mark() gcv.model_zoo.get_model("resnet50_v1",
      { pretrained = true, root = d }) end, FILE, "put GluonCV's model-store file "
      .. "resnet50_v1-cc729d95.params (sha1 cc729d95031ca98cf2ff362eb57dee4d9994e4b2) in " .. d)
    H.assert_error(function(mark) mark() gcv.model_zoo.get_model("resnet50_v9") end, FILE,
      "get_model: unknown model 'resnet50_v9'")
    H.assert_error(function(mark) mark() gcv.model_zoo.get_model("vgg11", { nope = 1 }) end, FILE,
      "get_model: unknown option 'nope'")
  end)

  it("nn's hard activations are GluonCV's: relu6(x + 3) / 6 and x times it", function()
    local x = nd.array { -4, -3, -1.5, 0, 1.5, 3, 4 }
    local hs = gcv.nn.HardSigmoid()
    local sw = gcv.nn.HardSwish()
    local want = {}
    for i, v in ipairs(x:tolist()) do want[i] = math.min(math.max(v + 3, 0), 6) / 6 end
    assert(H.maxdiff(hs(x), want) < 1e-7)
    for i, v in ipairs(x:tolist()) do want[i] = v * want[i] end
    assert(H.maxdiff(sw(x), want) < 1e-7)
    assert.are.same({ 0, 0, 6 }, gcv.nn.ReLU6()(nd.array { -1, 0, 7 }):tolist())
  end)
end)

describe("mx.gluoncv.utils.metrics equal GluonCV 0.10's", function()
  local gcv = require("mx.gluoncv")
  local M = gcv.utils.metrics
  local F = nd.load("spec/fixtures/gluoncv_metrics.params")

  local function near(got, want, what)
    assert.are.equal(#want, #got, what)
    for i = 1, #want do
      assert(math.abs(got[i] - want[i]) < 1e-9, string.format("%s[%d]: %.17g vs %.17g", what, i,
        got[i], want[i]))
    end
  end

  for _, v in ipairs { { "VOCMApMetric", "voc" }, { "VOC07MApMetric", "voc07" } } do
    it(v[1] .. ": per-class AP and mAP, difficult boxes, padding rows", function()
      local m = M[v[1]] { class_names = { "a", "b", "c" } }
      m:update(F.pred, F.pred_ids, F.scores, F.gt, F.gt_ids, F.gt_diff)
      local names, values = m:get()
      assert.are.same({ "a", "b", "c", "mAP" }, names)
      near(values, F[v[2]]:tolist(), v[2])
      m = M[v[1]] { iou_thresh = 0.7 }
      -- the same images given batch by batch
      m:update({ F.pred[{ { 1, 3 } }], F.pred[{ { 4, 6 } }] },
        { F.pred_ids[{ { 1, 3 } }], F.pred_ids[{ { 4, 6 } }] },
        { F.scores[{ { 1, 3 } }], F.scores[{ { 4, 6 } }] },
        { F.gt[{ { 1, 3 } }], F.gt[{ { 4, 6 } }] }, { F.gt_ids[{ { 1, 3 } }], F.gt_ids[{ { 4, 6 } }] })
      local name, map = m:get()
      assert.are.equal("VOCMeanAP", name)
      near({ map }, F[v[2] .. "_nodiff"]:tolist(), v[2] .. "_nodiff")
      m:reset()
      assert.is_true((select(2, m:get())) ~= (select(2, m:get()))) -- nothing seen: NaN
    end)
  end

  it("SegmentationMetric: pixel accuracy and mIoU, ignored labels", function()
    local m = M.SegmentationMetric(4)
    m:update(F.seg_lab, F.seg_pred)
    near({ m:get() }, F.seg:tolist(), "seg")
    H.assert_error(function(mark) mark() M.SegmentationMetric(1) end, FILE,
      "SegmentationMetric: nclass must be an integer >= 2, got 1")
    H.assert_error(function(mark) mark() m:update(nd.zeros { 2, 9, 7 }, nd.zeros { 2, 4, 9, 6 })
    end, FILE, "SegmentationMetric:update: preds (N, C, H, W) and labels (N, H, W) differ")
  end)
end)

describe("mx.gluoncv.data.transforms", function()
  local gcv = require("mx.gluoncv")
  it("presets.ssd / presets.yolo load_test give GluonCV's tensors", function()
    local T = gcv.data.transforms
    local W = dofile("spec/fixtures/gluoncv_presets.lua")
    local img = "spec/fixtures/images/grace_hopper.jpg"
    local cases = { ssd_300 = { T.presets.ssd.load_test(img, 300) },
      ssd_512 = { T.presets.ssd.load_test(img, 512, { max_size = 560 }) },
      yolo_416 = { T.presets.yolo.load_test(img, 416, { stride = 32 }) } }
    for k, c in pairs(cases) do
      local w, x, orig = W[k], c[1], c[2]
      assert.are.same(w.shape, x:shape(), k)
      assert.are.same(w.orig, orig:shape(), k)
      assert.are.equal("uint8", orig:dtype())
      local s = nd.sum(x:astype("float64")):item()
      assert(math.abs(s - w.sum) < 1e-3 * math.abs(w.sum), k .. ": sum " .. s .. " vs " .. w.sum)
      local v = x:totable()[1]
      local sh = x:shape()
      local got = { v[1][11][21], v[2][101][51], v[3][sh[3]][sh[4]] }
      for i = 1, 3 do assert(math.abs(got[i] - w.at[i]) < 1e-5, k .. " value " .. i) end
    end
    for _, c in ipairs(W.sizes) do -- NumPy's half-to-even rounding included
      local r = T.image.resize_short_within(nd.zeros({ c[1], c[2], 3 }, { dtype = "uint8" }), c[3],
        c[4], c[5])
      assert.are.same({ c[6], c[7], 3 }, r:shape())
    end
    local two = T.presets.ssd.transform_test({ mx.image.imread(img), mx.image.imread(img) }, 300)
    assert.are.equal(2, #two)
    H.assert_error(function(mark) mark() T.presets.ssd.transform_test("x", 300) end, FILE,
      "presets.ssd.transform_test: imgs must be an image (H, W, 3) or a list of them, got string")
  end)
end)
