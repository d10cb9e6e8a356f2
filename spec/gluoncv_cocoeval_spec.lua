-- mx.gluoncv.utils.cocoeval and metrics.COCODetectionMetric against pycocotools 2.0
-- (spec/fixtures/cocoeval.json: tools/fixtures/make_cocoeval_fixture.py): synthetic ground
-- truths and detections with crowds, every area range, more than 100 detections in an image,
-- tied scores, a category without ground truths; its 12 stats and per-category AP to 1e-12.
local cjson = require("cjson")
local C = require("mx.gluoncv.utils.cocoeval")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return cjson.decode(s)
end

describe("gluoncv COCOeval vs pycocotools", function()
  local F = read("spec/fixtures/cocoeval.json")

  it("pycocotools' thresholds", function()
    assert.are.equal(10, #C.IOU_THRS)
    assert.are.equal(101, #C.REC_THRS)
    assert.are.equal(0.75, C.IOU_THRS[6])
  end)

  it("the 12 stats and every category's AP", function()
    local E = C.COCOeval(F.gt, F.dets)
    E:evaluate()
    E:accumulate()
    local stats = E:summarize()
    for i, want in ipairs(F.stats) do
      assert(math.abs(stats[i] - want) < 1e-12, string.format("%s: %.15g vs pycocotools %.15g",
        C.STAT_NAMES[i], stats[i], want))
    end
    for k, want in ipairs(F.category_ap) do
      assert(math.abs(E:category_ap(k) - want) < 1e-12, string.format(
        "category %d: %.15g vs %.15g", k, E:category_ap(k), want))
    end
  end)

  it("errors", function()
    assert.has_error(function() C.COCOeval({}, {}) end,
      "COCOeval: gt must be a COCO dataset table with images, annotations and categories")
    local gt = { images = { { id = 1 } }, annotations = {}, categories = { { id = 1 } } }
    assert.has_error(function()
      C.COCOeval(gt, { { image_id = 2, category_id = 1, bbox = { 0, 0, 1, 1 }, score = 1 } })
    end, "COCOeval: detection 1: image_id 2 is not in gt's images")
    assert.has_error(function()
      C.COCOeval(gt, { { image_id = 1, category_id = 1, bbox = { 0, 0, 1 }, score = 1 } })
    end)
    assert.has_error(function() C.COCOeval(gt, {}):accumulate() end,
      "COCOeval: accumulate() needs evaluate() first")
  end)
end)

describe("gluoncv COCODetectionMetric", function()
  local F = read("spec/fixtures/cocoeval.json")
  local metrics = require("mx.gluoncv.utils.metrics")

  it("corner boxes per image give pycocotools' stats (areas w * h)", function()
    local cat_index = {}
    for k, c in ipairs(F.gt.categories) do cat_index[c.id] = k - 1 end
    local per = {}
    for _, im in ipairs(F.gt.images) do per[im.id] = { pb = {}, pl = {}, ps = {}, gb = {},
      gl = {}, gc = {} } end
    local function corners(b) return { b[1], b[2], b[1] + b[3] - 1, b[2] + b[4] - 1 } end
    for _, a in ipairs(F.gt.annotations) do
      local p = per[a.image_id]
      p.gb[#p.gb + 1], p.gl[#p.gl + 1], p.gc[#p.gc + 1] = corners(a.bbox),
        cat_index[a.category_id], a.iscrowd
    end
    for _, d in ipairs(F.dets) do
      local p = per[d.image_id]
      p.pb[#p.pb + 1], p.pl[#p.pl + 1], p.ps[#p.ps + 1] = corners(d.bbox),
        cat_index[d.category_id], d.score
    end
    local m = metrics.COCODetectionMetric({ class_names = { "a", "b", "c", "d", "e" } })
    -- two updates (images 1..12, 13..24) as two batches
    for half = 0, 1 do
      local batch = { pb = {}, pl = {}, ps = {}, gb = {}, gl = {}, gc = {} }
      for id = 1 + 12 * half, 12 + 12 * half do
        for k, v in pairs(per[id]) do batch[k][#batch[k] + 1] = v end
      end
      -- a list of batches, each a list of images
      m:update({ batch.pb }, { batch.pl }, { batch.ps }, { batch.gb }, { batch.gl }, { batch.gc })
    end
    local names, values = m:get()
    assert.are.equal(17, #names)
    assert.are.equal("a", names[1])
    assert.are.equal("AP", names[6])
    assert.are.equal(-1, values[5]) -- no ground truth of the last class
    for i, want in ipairs(F.stats_wh) do
      assert(math.abs(values[5 + i] - want) < 1e-9, string.format("%s: %.15g vs %.15g",
        names[5 + i], values[5 + i], want))
    end
    m:reset()
    local _, v0 = m:get()
    assert.are.equal(-1, v0[6])
  end)

  it("errors", function()
    assert.has_error(function() metrics.COCODetectionMetric({}) end,
      "COCODetectionMetric: class_names must be a non-empty list of strings")
    local m = metrics.COCODetectionMetric({ class_names = { "a" } })
    assert.has_error(function() m:update({ { {} } }, { { {} } }, { {} }, { { {} } }, { { {} } }) end,
      "COCODetectionMetric:update: the inputs hold different numbers of images")
  end)
end)
