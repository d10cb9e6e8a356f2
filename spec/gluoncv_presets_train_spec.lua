-- GluonCV 0.11's training transforms (mx.gluoncv.data.transforms bbox / image /
-- experimental, presets.ssd.SSDDefaultTrainTransform, presets.yolo.YOLO3DefaultTrainTransform)
-- against GluonCV on a 32x24 copy of grace_hopper with GluonCV's random draws replayed
-- (spec/fixtures/gluoncv_train_presets.json: tools/fixtures/make_gluoncv_train_presets_fixture.py),
-- and the random parts' ranges and frequencies under the seeded rng.
local nd = require("mx.nd")
local cjson = require("cjson")
local T = require("mx.gluoncv").data.transforms
local R = T.rng

local F
local function fixture()
  if not F then
    local f = assert(io.open("spec/fixtures/gluoncv_train_presets.json", "rb"))
    F = cjson.decode(f:read("*a"))
    f:close()
  end
  return F
end

local function rows(a)
  local out, k = {}, a.shape[2] or 0
  for i = 1, a.shape[1] do
    local r = {}
    for j = 1, k do r[j] = a.data[(i - 1) * k + j] end
    out[i] = r
  end
  return out
end

local function flat(x)
  if nd.is_tensor(x) then return nd.reshape(nd.cast(x, { dtype = "float64" }), { -1 }):tolist() end
  local out = {}
  for _, r in ipairs(x) do for _, v in ipairs(r) do out[#out + 1] = v end end
  return out
end

local function shape_of(x)
  if nd.is_tensor(x) then return x:shape() end
  return { #x, #x > 0 and #x[1] or 0 }
end

-- x equals fixture array a (its every-th values) within tol (absolute)
local function same(x, a, tol, what)
  local s = shape_of(x)
  if a.shape[1] == 0 then
    assert.are.equal(0, s[1], what .. ": no rows")
    return
  end
  assert.are.same(a.shape, s, what .. ": shape")
  local v, every = flat(x), a.every or 1
  local worst, at = 0, 0
  for i, want in ipairs(a.data) do
    -- the fixture keeps 7 significant digits
    local d = math.abs(v[(i - 1) * every + 1] - want) - 1e-6 * math.abs(want)
    if d > worst then worst, at = d, i end
  end
  assert(worst <= tol, string.format("%s: off by %.3g at %d (tol %.3g)", what, worst, at, tol))
end

local function image()
  local I = fixture().image
  return nd.array(flat({ I.data }), { dtype = "uint8" }):reshape(I.shape)
end

describe("gluoncv.data.transforms.bbox", function()
  it("crop, flip, resize and translate equal GluonCV's", function()
    local G = fixture()
    local label = rows(G.label)
    for i, c in ipairs(G.crop) do
      local box = {}
      for j = 1, 4 do box[j] = c.box[j] ~= -1 and c.box[j] end
      same(T.bbox.crop(label, box, c.inside), c.out, 1e-9, "crop " .. i)
    end
    for i, c in ipairs(G.flip) do
      same(T.bbox.flip(label, { 32, 24 }, c.fx, c.fy), c.out, 1e-9, "flip " .. i)
    end
    same(T.bbox.resize(label, { 32, 24 }, { 300, 250 }), G.resize, 1e-9, "resize")
    same(T.bbox.translate(label, 7, -3), G.translate, 1e-9, "translate")
    -- an NDArray in, an NDArray of its dtype out; the input unchanged
    local t = nd.array(label)
    local f = T.bbox.flip(t, { 32, 24 }, true)
    assert.is_true(nd.is_tensor(f))
    same(f, G.flip[1].out, 1e-5, "flip of an NDArray")
    same(t, G.label, 1e-6, "input kept")
  end)

  it("says what is wrong with bad boxes and sizes", function()
    assert.has_error(function() T.bbox.flip({ { 1, 2, 3 } }, { 4, 4 }) end,
      "bbox.flip: bbox[1] must be a row {x1, y1, x2, y2, ...}")
    assert.has_error(function() T.bbox.resize({ { 1, 2, 3, 4 } }, { 4 }, { 2, 2 }) end,
      "bbox.resize: in_size must be {width, height}")
    assert.has_error(function() T.bbox.crop(nd.zeros({ 3 }), { 0, 0, 1, 1 }) end,
      "bbox.crop: bbox must be (N, K >= 4), got shape (3)")
  end)
end)

describe("gluoncv.data.transforms.image / experimental with GluonCV's draws", function()
  it("random_expand places the image where GluonCV does, with its fill", function()
    local src = nd.cast(image(), { dtype = "float32" })
    for i, c in ipairs(fixture().expand) do
      local rng = R.Replay(c.draws)
      local out, e = T.image.random_expand(src, c.max_ratio, c.fill, c.keep_ratio, rng)
      assert.is_true(rng:done(), "expand " .. i .. ": every draw taken")
      assert.are.same(c.offsets, e)
      same(out, c.out, 0, "expand " .. i)
    end
  end)

  it("random_crop_with_constraints picks GluonCV's crop and boxes", function()
    local label = rows(fixture().label)
    for i, c in ipairs(fixture().random_crop) do
      local rng = R.Replay(c.draws)
      local opts = { rng = rng, min_scale = c.min_scale, max_aspect_ratio = c.max_aspect_ratio,
        max_trial = c.max_trial }
      if c.constraints then
        opts.constraints = {}
        for j, k in ipairs(c.constraints) do
          opts.constraints[j] = { k[1] ~= -1 and k[1], k[2] ~= -1 and k[2] }
        end
      end
      local b, crop = T.experimental.bbox.random_crop_with_constraints(label, { 32, 24 }, opts)
      assert.is_true(rng:done(), "random_crop " .. i .. ": every draw taken")
      assert.are.same(c.crop, crop)
      same(b, c.out, 1e-9, "random_crop " .. i)
    end
  end)

  it("random_color_distort equals GluonCV's for its draws (both orders, each part)", function()
    local src = image()
    for i, c in ipairs(fixture().color) do
      local rng = R.Replay(c.draws)
      local out = T.experimental.image.random_color_distort(src, { rng = rng })
      assert.is_true(rng:done(), "color " .. i .. ": every draw taken")
      assert.are.equal("float32", out:dtype())
      same(out, c.out, 1e-4, "color " .. i)
    end
  end)
end)

describe("gluoncv presets' training transforms with GluonCV's draws", function()
  it("SSDDefaultTrainTransform without anchors: image and boxes", function()
    for i, c in ipairs(fixture().ssd) do
      local rng = R.Replay(c.draws)
      local t = T.presets.ssd.SSDDefaultTrainTransform(40, 32, nil, nil, nil, nil, nil,
        { rng = rng })
      local x, b = t(image(), rows(fixture().label))
      assert.is_true(rng:done(), "ssd " .. i .. ": every draw taken")
      same(x, c.img, 1e-4, "ssd " .. i .. " image")
      same(b, c.bbox, 1e-4, "ssd " .. i .. " boxes")
    end
  end)

  it("SSDDefaultTrainTransform with anchors: SSDTargetGenerator's targets", function()
    local anchors = nd.array(flat({ fixture().anchors.data })):reshape(fixture().anchors.shape)
    for i, c in ipairs(fixture().ssd_targets) do
      local rng = R.Replay(c.draws)
      local t = T.presets.ssd.SSDDefaultTrainTransform(40, 32, anchors, nil, nil, 0.4,
        { 0.1, 0.1, 0.2, 0.2 }, { rng = rng })
      local x, cls, box = t(image(), rows(fixture().label))
      assert.is_true(rng:done())
      same(x, c.img, 1e-4, "ssd targets " .. i .. " image")
      same(cls, c.cls, 0, "ssd targets " .. i .. " classes")
      same(box, c.box, 1e-5, "ssd targets " .. i .. " boxes")
    end
  end)

  it("YOLO3DefaultTrainTransform without a network, its own mean and std", function()
    for i, c in ipairs(fixture().yolo) do
      local rng = R.Replay(c.draws)
      local t = T.presets.yolo.YOLO3DefaultTrainTransform(40, 32, nil, { 0.5, 0.4, 0.3 },
        { 0.2, 0.25, 0.3 }, false, { rng = rng })
      local x, b = t(image(), rows(fixture().label))
      assert.is_true(rng:done())
      same(x, c.img, 1e-4, "yolo " .. i .. " image")
      same(b, c.bbox, 1e-4, "yolo " .. i .. " boxes")
    end
  end)

  it("YOLO3DefaultTrainTransform with a network gives its prefetched targets", function()
    local yolo3 = require("mx.gluoncv.model_zoo.yolo3")
    local net = yolo3.yolo3_mobilenet1_0_voc({ classes = { "a", "b", "c", "d" } })
    net:initialize()
    local t = T.presets.yolo.YOLO3DefaultTrainTransform(64, 64, net, nil, nil, false,
      { rng = R.new(3) })
    local x, obj, ctr, scl, wts, cls, gt = t(image(), rows(fixture().label))
    local n = (2 * 2 + 4 * 4 + 8 * 8) * 3
    assert.are.same({ 3, 64, 64 }, x:shape())
    assert.are.same({ n, 1 }, obj:shape())
    assert.are.same({ n, 2 }, ctr:shape())
    assert.are.same({ n, 2 }, scl:shape())
    assert.are.same({ n, 2 }, wts:shape())
    assert.are.same({ n, 4 }, cls:shape())
    -- one positive anchor per kept box
    assert.are.equal(gt:shape()[1], nd.sum(obj):item())
  end)

  it("says what is wrong with bad arguments", function()
    local P = T.presets
    assert.has_error(function() P.ssd.SSDDefaultTrainTransform(0, 32) end,
      "SSDDefaultTrainTransform: width must be a positive integer, got 0")
    assert.has_error(function() P.ssd.SSDDefaultTrainTransform(8, 8, nd.zeros({ 4, 4 })) end,
      "SSDDefaultTrainTransform: anchors must be a (1, N, 4) NDArray")
    local t = P.yolo.YOLO3DefaultTrainTransform(8, 8)
    assert.has_error(function() t(image(), { { 1, 2, 3, 4 } }) end,
      "YOLO3DefaultTrainTransform: label[1] must be {x1, y1, x2, y2, class id, ...}")
    assert.has_error(function() t(nd.zeros({ 4, 4 }), { { 1, 2, 3, 4, 0 } }) end,
      "YOLO3DefaultTrainTransform: src must be an (H, W, 3) image NDArray")
  end)
end)

describe("gluoncv training transforms' random draws (seeded rng)", function()
  local label = { { 7, 4, 25, 23, 0 }, { 1.5, 12, 9, 20.5, 2 }, { 20, 1, 31, 8, 1 },
    { 13, 11, 18, 16, 3 } }

  it("random_crop_with_constraints: crops inside, boxes inside the crop, IoU constraints met",
    function()
      local rng = R.new(11)
      local one = { { 4, 3, 26, 20, 1 } }
      local counts = { full = 0, sampled = 0 }
      for _ = 1, 300 do
        local b, c = T.experimental.bbox.random_crop_with_constraints(one, { 32, 24 },
          { rng = rng, constraints = { { 0.6, false } } })
        assert.is_true(c[1] >= 0 and c[2] >= 0 and c[1] + c[3] <= 32 and c[2] + c[4] <= 24)
        assert.are.equal(1, #b)
        local r = b[1]
        assert.is_true(r[1] >= 0 and r[2] >= 0 and r[3] <= c[3] and r[4] <= c[4])
        assert.is_true(r[1] < r[3] and r[2] < r[4])
        -- the box's centre is inside the crop
        local cx, cy = (one[1][1] + one[1][3]) / 2, (one[1][2] + one[1][4]) / 2
        assert.is_true(cx >= c[1] and cx < c[1] + c[3] and cy >= c[2] and cy < c[2] + c[4])
        if c[3] == 32 and c[4] == 24 and c[1] == 0 and c[2] == 0 then
          counts.full = counts.full + 1
        else
          counts.sampled = counts.sampled + 1
          -- scale in [0.3, 1] (sides floored), aspect ratio within [1/2, 2] of the image's
          local s = math.sqrt(c[3] * c[4] / (32 * 24))
          assert.is_true(s >= 0.28 and s <= 1 + 1e-9, "scale " .. s)
          local ar = (c[3] / 32) / (c[4] / 24)
          assert.is_true(ar >= 0.5 / 1.1 and ar <= 2 * 1.1, "aspect " .. ar)
          -- the constraint: IoU >= 0.6
          local iou = T.bbox.bbox_iou(one, { { c[1], c[2], c[1] + c[3], c[2] + c[4] } })[1][1]
          assert.is_true(iou >= 0.6, "iou " .. iou)
        end
      end
      -- the whole image is one of two candidates when the constraint finds a crop
      assert.is_true(counts.full > 110 and counts.full < 190, "full crops " .. counts.full)
      -- the boxes' rows of a crop are bbox.crop's without outside centres
      local b, c = T.experimental.bbox.random_crop_with_constraints(label, { 32, 24 },
        { rng = R.new(2) })
      assert.are.same(T.bbox.crop(label, c, false), b)
    end)

  it("flips about half the time; expansion, interpolation and colour in their ranges", function()
    local rng = R.new(5)
    local flips, n = 0, 400
    local src = nd.ones({ 4, 6, 3 })
    for _ = 1, n do
      local _, f = T.image.random_flip(src, 0.5, 0, false, rng)
      if f[1] then flips = flips + 1 end
      assert.is_false(f[2])
    end
    assert.is_true(math.abs(flips - n / 2) < 3 * math.sqrt(n / 4), "flips " .. flips)
    for _ = 1, 50 do
      local out, e = T.image.random_expand(src, 3, 0, true, rng)
      local s = out:shape()
      assert.is_true(s[1] >= 4 and s[1] <= 12 and s[2] >= 6 and s[2] <= 18)
      assert.is_true(e[1] + 6 <= s[2] and e[2] + 4 <= s[1])
      assert.are.equal(6 * 4 * 3, nd.sum(out):item())
    end
    -- brightness only (the others off): within +-32 of the input
    local img = nd.full({ 2, 2, 3 }, 100)
    for _ = 1, 40 do
      local out = T.experimental.image.random_color_distort(img, { rng = rng,
        contrast_low = 1, contrast_high = 1, saturation_low = 1, saturation_high = 1,
        hue_delta = 0 })
      local v = out:tolist()[1]
      assert.is_true(v >= 68 - 1e-3 and v <= 132 + 1e-3)
    end
  end)

  it("the same seed gives the same transform; boxes stay inside the output", function()
    local a = T.presets.ssd.SSDDefaultTrainTransform(40, 32, nil, nil, nil, nil, nil,
      { rng = R.new(9) })
    local b = T.presets.ssd.SSDDefaultTrainTransform(40, 32, nil, nil, nil, nil, nil,
      { rng = R.new(9) })
    for _ = 1, 5 do
      local x1, b1 = a(image(), label)
      local x2, b2 = b(image(), label)
      assert.are.same(x1:tolist(), x2:tolist())
      assert.are.same(b1:tolist(), b2:tolist())
      for _, r in ipairs(b1:totable()) do
        assert.is_true(r[1] >= -1e-4 and r[2] >= -1e-4 and r[3] <= 40 + 1e-4 and r[4] <= 32 + 1e-4)
      end
    end
  end)
end)
