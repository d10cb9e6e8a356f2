-- spec/gluoncv_mixup_spec.lua — mx.gluoncv.data.MixupDetection against GluonCV 0.11's
-- (spec/fixtures/gluoncv_mixup.params: tools/fixtures/make_gluoncv_mixup_fixture.py), its
-- partner draws, the Beta sampler it is given in training, and the errors.
local mx = require("mx")
local nd = mx.nd
local gcv = require("mx.gluoncv")
local R = gcv.data.transforms.rng
local Dataset = require("mx.gluon.data.dataset").Dataset
local H = require("helpers.la")
local FILE = "gluoncv_mixup_spec.lua"

local F = nd.load("spec/fixtures/gluoncv_mixup.params")

-- the fixture's samples: images (7y + 13x + 29c + 31k) mod 256 of three sizes
local SIZES = { { 5, 6 }, { 4, 8 }, { 6, 3 } }
local LABELS = { { { 0, 0, 3, 4, 1 }, { 1, 2, 5, 4, 0 } }, { { 2, 1, 7, 3, 2 } }, {} }
local Samples = Dataset:extend("Samples")
function Samples.len() return 3 end
function Samples.get(_, i)
  local h, w = SIZES[i][1], SIZES[i][2]
  local v = {}
  for y = 0, h - 1 do for x = 0, w - 1 do for c = 0, 2 do
    v[#v + 1] = (7 * y + 13 * x + 29 * c + 31 * (i - 1)) % 256
  end end end
  local img = nd.cast(nd.reshape(nd.array(v), { h, w, 3 }), { dtype = "uint8" })
  local label = #LABELS[i] > 0 and nd.array(LABELS[i]) or nd.zeros({ 0, 5 })
  return img, label
end

-- an rng whose partner draws name the fixture's partners (the next sample)
local function fixed(j) return { randint = function() return j end } end

local function same(got, want, tol, what)
  assert.are.same(want:shape(), got:shape(), what)
  if got:size() > 0 then
    local d = H.maxdiff(nd.cast(got, { dtype = "float64" }), nd.cast(want, { dtype = "float64" }))
    assert(d <= tol, string.format("%s: max difference %g", what, d))
  end
end

describe("gluoncv.data.MixupDetection", function()
  it("mixes images and stacks labels with their ratios as GluonCV's", function()
    local ds = gcv.data.MixupDetection(Samples(), function() return 0.3 end)
    -- partner of 1 is 2, of 2 is 3, of 3 is 1: randint over the 2 others, skipping i
    local draws = { 1, 2, 1 }
    for i = 1, 3 do
      ds:set_rng(fixed(draws[i]))
      local img, label = ds:get(i)
      assert.equal("uint8", img:dtype())
      same(img, F["img" .. i], 0, "image " .. i)
      same(label, F["label" .. i], 1e-7, "label " .. i)
    end
    ds:set_mixup(nil)
    local img, label = ds:get(1)
    same(img, F.plain_img, 0, "no mixup: image")
    same(label, F.plain_label, 0, "no mixup: label")
    local _, rows = ds:rows(1)
    assert.are.same({ 0, 0, 3, 4, 1, 1 }, rows[1])
  end)

  it("draws partners uniformly from the other samples", function()
    local ds = gcv.data.MixupDetection(Samples(), function() return 0.5 end)
    ds:set_rng(R.new(4))
    local seen = { 0, 0, 0 }
    for _ = 1, 300 do
      local _, label = ds:get(3) -- sample 3 has no boxes: the rows are the partner's
      local n = label:shape()[1]
      seen[n] = seen[n] + 1
    end
    assert.equal(0, seen[3])
    assert.is_true(seen[1] > 120 and seen[2] > 120, seen[1] .. " / " .. seen[2])
  end)

  it("clips the ratio to [0, 1]; a ratio of 1 returns the sample", function()
    local ds = gcv.data.MixupDetection(Samples(), function() return 1.7 end)
    local img, label = ds:get(2)
    same(img, Samples():get(2), 0, "image")
    assert.are.same({ 1, 6 }, label:shape())
    ds:set_mixup(function(a) return a end, -2)
    ds:set_rng(fixed(1))
    img, label = ds:get(2)          -- ratio 0: the partner's pixels on the larger canvas
    assert.are.same({ 5, 8, 3 }, img:shape())
    local t = label:tolist() -- its one row at ratio 0, the partner's two at 1
    assert.are.same({ 0, 1, 1 }, { t[6], t[12], t[18] })
  end)

  it("rng:beta draws Beta(a, b): mean a / (a + b), variance ab / ((a + b)^2 (a + b + 1))", function()
    local rng = R.new(11)
    for _, ab in ipairs({ { 1.5, 1.5 }, { 0.5, 2 }, { 3, 1 } }) do
      local a, b = ab[1], ab[2]
      local n, s, s2 = 20000, 0, 0
      for _ = 1, n do
        local v = rng:beta(a, b)
        assert(v > 0 and v < 1)
        s, s2 = s + v, s2 + v * v
      end
      local mean, var = s / n, s2 / n - (s / n) ^ 2
      local m0, v0 = a / (a + b), a * b / ((a + b) ^ 2 * (a + b + 1))
      assert(math.abs(mean - m0) < 4 * math.sqrt(v0 / n), string.format("mean %g vs %g", mean, m0))
      assert(math.abs(var - v0) < 0.05 * v0, string.format("variance %g vs %g", var, v0))
    end
  end)

  it("rejects bad datasets, samplers and ratios, blaming the caller", function()
    H.assert_error(function(mark) mark() gcv.data.MixupDetection(42) end, FILE,
      "MixupDetection: dataset must be a dataset (with len and get), got number")
    H.assert_error(function(mark) mark() gcv.data.MixupDetection(Samples(), 0.5) end, FILE,
      "MixupDetection: mixup must be a function returning a ratio (or nil), got number")
    local ds = gcv.data.MixupDetection(Samples(), function() return "x" end)
    H.assert_error(function(mark) mark() ds:get(1) end, FILE,
      "MixupDetection:get: the mixup sampler returned string, not a number")
    H.assert_error(function(mark) mark() R.new(1):beta(0, 1) end, FILE,
      "rng: beta's a and b must be positive numbers, got 0, 1")
  end)
end)
