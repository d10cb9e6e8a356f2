-- mx.gluoncv.model_zoo.ssd_target against GluonCV 0.10 (spec/fixtures/ssd_target.params:
-- tools/fixtures/make_ssd_target_fixture.py): SSDTargetGenerator's class targets, box
-- targets and masks, with naive sampling and with OHEM, on a padded ground-truth batch.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local SSDTargetGenerator = require("mx.gluoncv.model_zoo.ssd_target").SSDTargetGenerator
local FILE = "gluoncv_ssd_target_spec.lua"

local F = nd.load("spec/fixtures/ssd_target.params")

describe("gluoncv SSDTargetGenerator", function()
  for k, ratio in pairs { naive = -1, ohem = 3 } do
    it("equals GluonCV's targets (" .. k .. ")", function()
      local t = SSDTargetGenerator { negative_mining_ratio = ratio }
      local cls, box, mask = t(F.anchors, F.cls_preds, F.gt_boxes, F.gt_ids)
      assert.are.same(F[k .. "_cls"]:tolist(), cls:tolist())
      assert.are.same(F[k .. "_mask"]:tolist(), mask:tolist())
      local d = H.maxdiff(box, F[k .. "_box"])
      assert(d < 1e-5, "box targets: max difference " .. d)
    end)
  end

  it("feeds SSDMultiBoxLoss", function()
    local cls = SSDTargetGenerator()(F.anchors, F.cls_preds, F.gt_boxes, F.gt_ids)
    local loss = require("mx.gluoncv.loss").SSDMultiBoxLoss()
    local s = loss(F.cls_preds, nd.zeros { 2, 320, 4 }, cls, nd.zeros { 2, 320, 4 })
    assert.is_true(s[1]:totable()[1] > 0)
    H.assert_error(function(mark) mark() SSDTargetGenerator { ratio = 1 } end, FILE,
      "SSDTargetGenerator", "ratio")
  end)
end)
