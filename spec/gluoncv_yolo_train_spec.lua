-- YOLOv3 training against GluonCV 0.10 (spec/fixtures/gluoncv_yolo_train.params:
-- tools/fixtures/make_yolo_train_fixture.py): yolo3_mobilenet1.0_voc with the deterministic
-- weights of spec/helpers/zoo_fill.lua in training mode gives GluonCV's raw outputs;
-- YOLOV3PrefetchTargetGenerator its targets for fixed ground truths, YOLOV3TargetMerger its
-- merged objectness and class masks, YOLOV3Loss its four losses, and the network under
-- autograd.record its losses; and the errors.
local mx = require("mx")
local nd = mx.nd
local yolo = require("mx.gluoncv.model_zoo.yolo3")
local T = require("mx.gluoncv.model_zoo.yolo_target")
local gloss = require("mx.gluoncv.loss")
local fill = require("helpers.zoo_fill")

local function flat(t) return t:reshape({ -1 }):totable() end

-- within tol of the larger of 1 and the largest magnitude
local function close(got, want, tol, what)
  assert.are.same(want:shape(), got:shape(), what .. " shape")
  local g, w = flat(got), flat(want)
  local m = 1
  for i = 1, #w do m = math.max(m, math.abs(w[i])) end
  for i = 1, #w do
    assert(math.abs(g[i] - w[i]) <= tol * m, string.format("%s[%d]: %.9g vs %.9g", what, i,
      g[i], w[i]))
  end
end

describe("gluoncv YOLOv3 training vs GluonCV 0.10", function()
  local F = nd.load("spec/fixtures/gluoncv_yolo_train.params")
  local net = yolo.yolo3_mobilenet1_0_voc()
  net:initialize()
  local x = fill.data({ 2, 3, 96, 96 })
  net(x)
  local function constant(name) return name:match("anchors$") or name:match("offsets$") end
  fill.params(net, constant)
  local out
  mx.autograd.train_mode(function() out = { net(x) } end)

  it("training outputs: boxes, anchors, offsets, feature maps, raw predictions", function()
    -- 1e-3 of the largest value: training-mode BatchNorm over 2 x 3 x 3 cells amplifies
    -- rounding, so the ISA moves these outputs by ~3e-4 of their largest (MXNet 1.9.1 itself:
    -- 1.6e-3 of 4.78 between its AVX2 and AVX-512 runs of the fixture script; luamx likewise)
    local tol = 1e-3
    close(out[1], F.box_preds, tol, "box_preds")
    for i = 1, 3 do
      close(out[2][i], F["anchors" .. (i - 1)], 0, "anchors")
      close(out[3][i], F["offsets" .. (i - 1)], 0, "offsets")
      assert.are.same(F["feat" .. (i - 1)]:shape(), out[4][i]:shape())
    end
    close(out[5], F.centers, tol, "centers")
    close(out[6], F.scales, tol, "scales")
    close(out[7], F.objness, tol, "objness")
    close(out[8], F.class_pred, tol, "class_pred")
  end)

  it("prefetch targets, merged targets, YOLOV3Loss, the network's losses", function()
    local gen = T.YOLOV3PrefetchTargetGenerator(20)
    -- GluonCV's own anchors, offsets and feature maps, so that the targets are checked alone
    local anchors, offsets, feats = {}, {}, {}
    for i = 1, 3 do
      anchors[i], offsets[i], feats[i] = F["anchors" .. (i - 1)], F["offsets" .. (i - 1)],
        F["feat" .. (i - 1)]
    end
    local t = { gen(x, feats, anchors, offsets, F.gt_boxes, F.gt_ids) }
    for i, k in ipairs({ "obj_t", "centers_t", "scales_t", "weights_t", "class_t" }) do
      close(t[i], F["prefetch:" .. k], 1e-6, k)
    end
    local L = gloss.YOLOV3Loss()
    for _, thr in ipairs({ "0.7", "0.05" }) do
      local m = { T.YOLOV3TargetMerger(20, tonumber(thr))(F.box_preds, F.gt_boxes, t[1], t[2],
        t[3], t[4], t[5]) }
      close(m[1], F["merged" .. thr .. ":obj_t"], 0, "merged objectness " .. thr)
      close(nd.sum(m[6], { axis = -1 }), F["merged" .. thr .. ":class_mask_sum"], 0, "mask")
      local l = { L(F.objness, F.centers, F.scales, F.class_pred, m[1], m[2], m[3], m[4], m[5],
        m[6]) }
      close(nd.stack(l, { axis = 1 }), F["loss" .. thr], 1e-5, "YOLOV3Loss " .. thr)
    end
    local losses
    mx.autograd.record(function() losses = { net(x, F.gt_boxes, t[1], t[2], t[3], t[4], t[5]) } end)
    close(nd.stack(losses, { axis = 1 }), F.net_loss, 1e-4, "network losses")
    -- the losses have gradients to the weights
    mx.autograd.backward(losses)
  end)
end)

describe("gluoncv YOLOv3 training: targets by hand, errors", function()
  it("one box: its anchor, cell and targets", function()
    local gen = T.YOLOV3PrefetchTargetGenerator(3)
    -- two layers: 2x2 cells with anchor 10x10, 4x4 cells with anchors 20x40 and 40x20
    local feats = { nd.zeros({ 1, 1, 2, 2 }), nd.zeros({ 1, 1, 4, 4 }) }
    local anchors = { nd.array({ { { { 10, 10 } } } }), nd.array({ { { { 20, 40 }, { 40, 20 } } } }) }
    local offsets = { nd.zeros({ 1, 4, 1, 2 }), nd.zeros({ 1, 16, 1, 2 }) }
    local img = nd.zeros({ 1, 3, 64, 64 })
    -- a 36x18 box centred at (40, 25): anchor 40x20 (layer 2), cell x 2, y 1 of 4x4
    local boxes = nd.array({ { { 22, 16, 58, 34 }, { -1, -1, -1, -1 } } })
    local ids = nd.array({ { { 2 }, { -1 } } })
    local obj, ctr, scl, wgt, cls = gen(img, feats, anchors, offsets, boxes, ids)
    assert.are.same({ 1, 4 + 32, 1 }, obj:shape())
    local o = flat(obj)
    local row = 4 + (1 * 4 + 2) * 2 + 2 -- layer 1's 4 rows, then cell (y 1, x 2), anchor 2
    for i = 1, #o do assert.are.equal(i == row and 1 or 0, o[i]) end
    local c = ctr:totable()[1][row]
    assert.is_true(math.abs(c[1] - (40 / 64 * 4 - 2)) < 1e-6 and math.abs(c[2] - (25 / 64 * 4 - 1)) < 1e-6)
    local s = scl:totable()[1][row]
    assert.is_true(math.abs(s[1] - math.log(36 / 40)) < 1e-6 and math.abs(s[2] - math.log(18 / 20)) < 1e-6)
    assert.is_true(math.abs(wgt:totable()[1][row][1] - (2 - 36 * 18 / 64 / 64)) < 1e-6)
    assert.are.same({ 0, 0, 1 }, cls:totable()[1][row])
    assert.are.same({ -1, -1, -1 }, cls:totable()[1][1])
    -- a mixup ratio (MixupDetection's last column) is the box's objectness target
    obj = gen(img, feats, anchors, offsets, boxes, ids, nd.array({ { { 0.3 }, { -1 } } }))
    o = flat(obj)
    for i = 1, #o do assert.is_true(math.abs(o[i] - (i == row and 0.3 or 0)) < 1e-7) end
  end)

  it("errors", function()
    assert.has_error(function() T.YOLOV3PrefetchTargetGenerator(0) end,
      "YOLOV3PrefetchTargetGenerator: num_class must be a positive integer, got 0")
    local gen = T.YOLOV3PrefetchTargetGenerator(3)
    assert.has_error(function()
      gen(nd.zeros({ 1, 3, 8, 8 }), { nd.zeros({ 1, 1, 2, 2 }) }, {}, {}, nd.zeros({ 1, 1, 4 }),
        nd.zeros({ 1, 1, 1 }))
    end, "YOLOV3PrefetchTargetGenerator: anchors must be a list of tensors (one per output layer)")
    assert.has_error(function() T.YOLOV3TargetMerger(3, "a") end,
      "YOLOV3DynamicTargetGeneratorSimple: ignore_iou_thresh must be a number, got string")
    local net = yolo.yolo3_mobilenet1_0_voc({ classes = { "a" } })
    net:initialize()
    assert.has_error(function() net(nd.zeros({ 1, 3, 32, 32 }), nd.zeros({ 1, 1, 4 })) end)
    assert.has_error(function() gloss.YOLOV3Loss()(nd.zeros({ 1 })) end,
      "YOLOV3Loss: argument 2 must be a tensor, got nil")
  end)
end)
