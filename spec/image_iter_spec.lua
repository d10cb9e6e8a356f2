-- mx.image's augmenters, CreateAugmenter and ImageIter against MXNet 1.9.1
-- (spec/fixtures/image_iter_mxnet.lua, tools/fixtures/make_image_iter_fixture.py).
local mx = require("mx")
local H = require("helpers.la")
local nd, image = mx.nd, mx.image
local cjson = require("cjson")

local FILE = "image_iter_spec.lua"
local FX = dofile("spec/fixtures/image_iter_mxnet.lua")
local REC = "spec/fixtures/image_mxnet.rec"
local function T(f) return nd.reshape(nd.array(f.data), f.shape) end
local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(a, b))):item() end
local function fails(f, ...) return H.assert_error(f, FILE, ...) end

local function det_augs()
  return { image.ForceResizeAug({ 12, 10 }, 1), image.CenterCropAug({ 8, 8 }, 1), image.CastAug(),
    image.ColorNormalizeAug(nd.array { 100, 110, 120 }, nd.array { 50, 60, 70 }) }
end
local function all_batches(it)
  local r = {}
  for b in it:iter() do r[#r + 1] = b end
  return r
end
local function same_batches(got, want, tol)
  assert.equal(#want, #got)
  for i, w in ipairs(want) do
    assert.are.same(w.data.shape, got[i].data[1]:shape())
    -- bilinear resizes of uint8 pixels: within one grey level, after the normalisation
    assert.is_true(maxdiff(got[i].data[1], T(w.data)) <= tol, "batch " .. i)
    assert.is_true(maxdiff(got[i].label[1], T(w.label)) == 0)
    assert.equal(w.pad, got[i].pad)
  end
end

describe("mx.image.ImageIter", function()
  it("gives MXNet 1.9.1's batches: pad, discard, the shorter side resized and cropped", function()
    same_batches(all_batches(image.ImageIter(3, { 3, 8, 8 }, { path_imgrec = REC, aug_list = det_augs() })),
      FX.pad, 1 / 50 + 1e-5)
    same_batches(all_batches(image.ImageIter(1, { 3, 8, 8 }, { path_imgrec = REC, aug_list = det_augs(),
      last_batch_handle = "discard" })), FX.discard, 1 / 50 + 1e-5)
    local augs = { image.ResizeAug(9, 1), image.CenterCropAug({ 6, 7 }, 1), image.CastAug() }
    same_batches(all_batches(image.ImageIter(2, { 3, 7, 6 }, { path_imgrec = REC, aug_list = augs })),
      FX.resize, 1 + 1e-5)
  end)

  it("provides DataDescs, resets for another pass, rolls a short batch over", function()
    local it = image.ImageIter(3, { 3, 8, 8 }, { path_imgrec = REC, aug_list = det_augs(),
      label_name = "lab" })
    assert.are.same({ 3, 3, 8, 8 }, it.provide_data[1].shape)
    assert.equal("lab", it.provide_label[1].name)
    assert.equal(1, #all_batches(it))
    it:reset()
    assert.equal(1, #all_batches(it))
    -- roll_over: 2 images (labels 3, 1), batches of 3: the first pass gives none, the
    -- second one batch of the two held back and the next pass's first image (MXNet 1.9.1
    -- says pad 1 for it), the third the rest of that pass rolled over (pad 2)
    local r = image.ImageIter(3, { 3, 8, 8 }, { path_imgrec = REC, aug_list = det_augs(),
      last_batch_handle = "roll_over" })
    assert.equal(0, #all_batches(r))
    r:reset()
    local b = all_batches(r)
    assert.equal(1, #b)
    assert.equal(1, b[1].pad)
    assert.are.same({ 3, 1, 3 }, b[1].label[1]:tolist())
    assert.is_true(maxdiff(b[1].data[1][1], b[1].data[1][3]) == 0)
    r:reset()
    b = all_batches(r)
    assert.equal(1, #b)
    assert.equal(2, b[1].pad)
    assert.are.same({ 1, 3, 1 }, b[1].label[1]:tolist())
  end)

  it("reads an image list with path_root, and imglist; CreateAugmenter's defaults by name", function()
    local dir = os.tmpname()
    os.remove(dir)
    os.execute("mkdir -p " .. dir)
    local src = io.open("spec/fixtures/images/grace_hopper.jpg", "rb")
    local bytes = src:read("*a")
    src:close()
    local f = io.open(dir .. "/a.jpg", "wb")
    f:write(bytes)
    f:close()
    local lst = io.open(dir .. "/list.lst", "w")
    lst:write("0\t4\t5\ta.jpg\n7\t1\t2\ta.jpg\n")
    lst:close()
    local it = image.ImageIter(2, { 3, 16, 16 }, { label_width = 2, path_imglist = dir .. "/list.lst",
      path_root = dir, resize = 20 })
    local b = it:next()
    assert.are.same({ 2, 3, 16, 16 }, b.data[1]:shape())
    assert.are.same({ 4, 5, 1, 2 }, b.label[1]:tolist())
    local it2 = image.ImageIter(1, { 3, 16, 16 }, { imglist = { { 3, "a.jpg" } }, path_root = dir })
    assert.are.same({ 3 }, it2:next().label[1]:tolist())
    -- CreateAugmenter's list from resize = 20: the shorter side resized, the centre
    -- cropped, CHW; the same as by hand
    local want = image.center_crop(image.resize_short(image.imdecode(bytes), 20), { 16, 16 })
    assert.is_true(maxdiff(b.data[1][1], nd.transpose(want:astype("float32"), { axes = { 3, 1, 2 } })) == 0)
    os.execute("rm -rf " .. dir)
  end)

  it("names its errors", function()
    fails(function(at) at() image.ImageIter(2, { 1, 8, 8 }, { path_imgrec = REC }) end, "ImageIter",
      "3 channels")
    fails(function(at) at() image.ImageIter(2, { 3, 8, 8 }) end, "ImageIter", "path_imgrec")
    fails(function(at)
      at() image.ImageIter(2, { 3, 8, 8 }, { path_imgrec = REC, last_batch_handle = "x" })
    end, "ImageIter", "last_batch_handle")
    fails(function(at) at() image.ImageIter(2, { 3, 8, 8 }, { path_imgrec = REC, shuffle = true }) end,
      "ImageIter", "path_imgidx")
  end)
end)

describe("mx.image augmenters", function()
  -- JSON values equal up to float32 rounding
  local function same_json(a, b)
    if type(a) == "number" then return math.abs(a - b) <= 1e-5 * math.max(1, math.abs(b)) end
    if type(a) ~= "table" then return a == b end
    for k, v in pairs(b) do if not same_json(a[k], v) then return false end end
    for k in pairs(a) do if b[k] == nil then return false end end
    return true
  end
  local function decode_all(s)
    local v = cjson.decode(s)
    if type(v) == "table" and type(v[2]) == "table" and type(v[2][1]) == "string" then
      for i, x in ipairs(v[2]) do v[2][i] = decode_all(x) end
    end
    return v
  end

  it("CreateAugmenter makes MXNet 1.9.1's list (dumps)", function()
    local augs = image.CreateAugmenter({ 3, 224, 224 }, { resize = 256, rand_crop = true, rand_mirror = true,
      mean = true, std = true, brightness = 0.1, contrast = 0.2, saturation = 0.3, pca_noise = 0.1,
      rand_gray = 0.2, hue = 0.1 })
    assert.equal(#FX.create_dumps, #augs)
    for i, a in ipairs(augs) do
      assert.is_true(same_json(decode_all(a:dumps()), decode_all(FX.create_dumps[i])),
        a:dumps() .. " vs " .. FX.create_dumps[i])
    end
  end)

  it("the colour and flip augmenters follow MXNet's formulas", function()
    local img = nd.random.uniform(0, 255, { 5, 4, 3 })
    math.randomseed(5)
    local b = image.BrightnessJitterAug(0.3)(img)
    local ratio = nd.mean(b):item() / nd.mean(img):item()
    assert.is_true(ratio >= 0.7 - 1e-6 and ratio <= 1.3 + 1e-6)
    assert.is_true(maxdiff(b, img * ratio) < 1e-3)
    -- saturation 0 jitter: alpha in [1, 1]: the image unchanged
    assert.is_true(maxdiff(image.SaturationJitterAug(0)(img), img) < 1e-4)
    assert.is_true(maxdiff(image.ContrastJitterAug(0)(img), img) < 1e-4)
    -- hue 0: the YIQ round trip only (its matrices are MXNet's rounded ones)
    assert.is_true(maxdiff(image.HueJitterAug(0)(img), img) < 1.5)
    assert.is_true(maxdiff(image.HorizontalFlipAug(1)(img), nd.flip(img, { axis = 2 })) == 0)
    assert.is_true(maxdiff(image.HorizontalFlipAug(0)(img), img) == 0)
    local g = image.RandomGrayAug(1)(img)
    assert.is_true(maxdiff(g[{ {}, {}, 1 }], g[{ {}, {}, 3 }]) < 1e-3)
    local c = image.RandomSizedCropAug({ 3, 2 }, 0.5, { 0.75, 1.33 })(img)
    assert.are.same({ 2, 3, 3 }, c:shape())
    assert.are.same({ 2, 3, 3 }, image.RandomCropAug({ 3, 2 })(img):shape())
    local seq = image.SequentialAug { image.CastAug("float32"), image.ForceResizeAug({ 2, 2 }) }
    assert.equal("float32", seq(img:astype("uint8")):dtype())
    fails(function(at) at() image.HorizontalFlipAug(2) end, "HorizontalFlipAug", "probability")
    fails(function(at) at() image.ResizeAug(-1) end, "ResizeAug", "size")
    fails(function(at) at() image.CastAug()(5) end, "CastAug", "NDArray")
  end)
end)
