-- gluon.data.vision.transforms: Resize, CenterCrop, the Random* transforms, RandomApply:
-- values against the image ops and mx.image, reproducible draws from
-- mx.random, batches, errors, recipes, and DataLoader workers.
local mx = require("mx")
local data = require("mx.gluon.data")
local T = data.vision.transforms
local nd = mx.nd

-- a small deterministic RGB image (H, W, 3) uint8 with varied pixels
local function test_image(h, w)
  local rows = {}
  for y = 1, h do
    local row = {}
    for x = 1, w do row[x] = { (y * 37 + x * 11) % 256, (y * 5 + x * 53) % 256, (x * y * 7) % 256 } end
    rows[y] = row
  end
  return nd.array(rows, { dtype = "uint8" })
end

local function same(a, b)
  assert.same(a:shape(), b:shape())
  assert.same(a:tolist(), b:tolist())
end

local function differs(a, b)
  if table.concat(a:shape(), ",") ~= table.concat(b:shape(), ",") then return true end
  local x, y = a:reshape { -1 }:tolist(), b:reshape { -1 }:tolist()
  for i = 1, #x do if x[i] ~= y[i] then return true end end
  return false
end

local img = test_image(12, 16)
local photo = mx.image.imread("spec/fixtures/images/grace_hopper.jpg")

describe("transforms: Resize and CenterCrop", function()
  it("Resize to a square, to {w, h}, and the shorter side with keep_ratio", function()
    same(mx.image.imresize(img, 8, 8, 1), T.Resize(8)(img))
    same(mx.image.imresize(img, 5, 7, 1), T.Resize({ 5, 7 })(img))
    -- 12x16: the shorter side (12) to 6, the other 16 * 6 // 12 = 8
    assert.same({ 6, 8, 3 }, T.Resize(6, { keep_ratio = true })(img):shape())
    assert.same({ 300, 256, 3 }, T.Resize(256, { keep_ratio = true })(photo):shape())
    same(mx.image.imresize(img, 8, 8, 0), T.Resize(8, { interpolation = 0 })(img))
  end)

  it("CenterCrop is mx.image.center_crop (interpolation 1)", function()
    same((mx.image.center_crop(img, { 6, 4 }, 1)), T.CenterCrop({ 6, 4 })(img))
    same((mx.image.center_crop(img, { 20, 20 }, 1)), T.CenterCrop(20)(img))
  end)

  it("are batchable: a batch gives the per-sample results", function()
    local other = nd.flip(img, { axis = 1 })
    local b = nd.stack(img, other)
    for _, t in ipairs { T.Resize(7), T.CenterCrop({ 5, 9 }) } do
      assert.is_true(t.batchable)
      local y = t:batch(b)
      same(t(img), y[1])
      same(t(other), y[2])
    end
  end)

  it("name the transform and the argument in errors", function()
    assert.has_error(function() T.Resize(0) end, "Resize: size must be a positive integer or a "
      .. "{width, height} pair, got 0")
    assert.has_error(function() T.Resize(4, { keepratio = true }) end,
      "Resize: unknown option 'keepratio' (valid: interpolation, keep_ratio)")
    assert.has_error(function() T.CenterCrop(4, { interpolation = 4 }) end)
    local ok, err = pcall(function()
      local y = T.Resize(4)(nd.zeros({ 4, 4 }, { dtype = "uint8" }))
      return y
    end)
    assert.is_false(ok)
    assert.matches("Resize: expected an image %(H, W, C%)", err)
    assert.matches("transforms_spec.lua", err) -- blames the caller's line
  end)
end)

describe("transforms: random geometry", function()
  it("RandomResizedCrop gives size; scale {1,1} at the image's ratio is the whole image", function()
    mx.random.seed(3)
    assert.same({ 8, 10, 3 }, T.RandomResizedCrop({ 10, 8 })(photo):shape())
    local t = T.RandomResizedCrop({ 8, 6 }, { scale = { 1, 1 }, ratio = { 16 / 12, 16 / 12 } })
    same(mx.image.imresize(img, 8, 6, 1), t(img))
  end)

  it("RandomResizedCrop repeats after mx.random.seed and varies between draws", function()
    local t = T.RandomResizedCrop(6)
    mx.random.seed(42)
    local a1, a2 = t(img), t(img)
    mx.random.seed(42)
    same(a1, t(img))
    same(a2, t(img))
    local varied = false
    for _ = 1, 10 do if differs(a1, t(img)) then varied = true end end
    assert.is_true(varied)
  end)

  it("RandomCrop with pad crops a box of the zero-padded image", function()
    local padded = mx.image.copyMakeBorder(img, 2, 2, 3, 3)
    same(padded, T.RandomCrop({ 22, 16 }, { pad = { 2, 2, 3, 3 } })(img))
    mx.random.seed(5)
    local t = T.RandomCrop({ 10, 8 }, { pad = 2 })
    local p2 = mx.image.copyMakeBorder(img, 2, 2, 2, 2)
    for _ = 1, 5 do
      local y = t(img)
      assert.same({ 8, 10, 3 }, y:shape())
      local found = false
      for y0 = 0, 16 - 8 do
        for x0 = 0, 20 - 10 do
          if not found and not differs(mx.image.fixed_crop(p2, x0, y0, 10, 8), y) then found = true end
        end
      end
      assert.is_true(found)
    end
  end)

  it("RandomFlipLeftRight / TopBottom flip about half the time", function()
    mx.random.seed(7)
    for _, c in ipairs { { T.RandomFlipLeftRight(), 2 }, { T.RandomFlipTopBottom(), 1 } } do
      local flipped, kept = 0, 0
      local f = nd.flip(img, { axis = c[2] })
      for _ = 1, 60 do
        local y = c[1](img)
        if not differs(y, f) then flipped = flipped + 1 elseif not differs(y, img) then kept = kept + 1 end
      end
      assert.equal(60, flipped + kept)
      assert.is_true(flipped > 15 and kept > 15)
    end
  end)

  it("Rotate is imrotate; zoom_in hides the zero border, zoom_out shows the whole image", function()
    same(nd.imrotate(img, { angle = 20 }), T.Rotate(20)(img))
    local white = nd.full({ 20, 30, 3 }, 255, { dtype = "uint8" })
    local plain = T.Rotate(30)(white)
    local zin = T.Rotate(30, { zoom_in = true })(white)
    local zout = T.Rotate(30, { zoom_out = true })(white)
    assert.same({ 20, 30, 3 }, zin:shape())
    assert.same({ 20, 30, 3 }, zout:shape())
    assert.equal(0, plain[{ 1, 1, 1 }]:item()) -- the corner leaves the image
    assert.is_true(zin:min():item() > 200)     -- zoomed in: no border
    assert.equal(0, zout[{ 1, 1, 1 }]:item())
    assert.equal(255, zout[{ 10, 15, 1 }]:item())
    -- zoom_out shows the whole rotated image: fewer white pixels than without zoom
    assert.is_true(zout:astype("float32"):sum():item() < plain:astype("float32"):sum():item())
    local b = T.Rotate(15):batch(nd.stack(img, img))
    same(T.Rotate(15)(img), b[2])
    assert.has_error(function() T.Rotate(1, { zoom_in = true, zoom_out = true }) end,
      "Rotate: zoom_in and zoom_out cannot both be true")
  end)

  it("RandomRotation draws the angle (per image on a batch); proba 0 keeps the image", function()
    mx.random.seed(13)
    local y = T.RandomRotation({ -30, 30 })(img)
    mx.random.seed(13)
    same(nd.imrotate(img, { angle = mx.random.uniform(-30, 30):item() }), y)
    same(img, T.RandomRotation({ -30, 30 }, { rotate_with_proba = 0 })(img))
    local b = T.RandomRotation({ -40, 40 }):batch(nd.stack(img, img))
    assert.same({ 2, 12, 16, 3 }, b:shape())
    assert.is_true(differs(b[1], b[2]))
    assert.has_error(function() T.RandomRotation({ 1, 2 }, { zoom_in = true, zoom_out = true }) end,
      "RandomRotation: zoom_in and zoom_out cannot both be true")
    assert.has_error(function() T.RandomRotation({ 5, 5 }) end,
      "RandomRotation: angle_limits must be an ordered {lower, upper} pair of degrees (lower < upper)")
    assert.has_error(function() T.RandomRotation({ 1, 5 }, { rotate_with_proba = 2 }) end,
      "RandomRotation: rotate_with_proba must be in [0, 1], got 2")
  end)

  it("CropResize crops at 0-based (x, y) and resizes when size is given, per image or batch", function()
    same(mx.image.fixed_crop(img, 3, 2, 5, 4), T.CropResize(3, 2, 5, 4)(img))
    local t = T.CropResize(1, 1, 8, 6, { size = { 4, 3 } })
    same(mx.image.imresize(mx.image.fixed_crop(img, 1, 1, 8, 6), 4, 3, 1), t(img))
    local b = t:batch(nd.stack(img, nd.flip(img, { axis = 1 })))
    same(t(img), b[1])
    same(t(nd.flip(img, { axis = 1 })), b[2])
    local ok, err = pcall(T.CropResize(10, 0, 8, 4), img)
    assert.is_false(ok)
    assert.matches("CropResize: the box x=10, y=0, width=8, height=4 leaves the 16x12 image", err)
  end)
end)

describe("transforms: random colour", function()
  local x = photo:astype("float32")

  -- the transform's draw, repeated with the same seed, applied with the op directly
  local function check_jitter(t, op, v, centre)
    mx.random.seed(11)
    local y = t(x)
    mx.random.seed(11)
    local alpha = centre + mx.random.uniform(-v, v):item()
    assert.is_true(alpha >= centre - v and alpha <= centre + v)
    same(op(x, { alpha = alpha }), y)
  end

  it("Brightness, Contrast, Saturation, Hue apply their op at a drawn alpha", function()
    check_jitter(T.RandomBrightness(0.4), nd.adjust_brightness, 0.4, 1)
    check_jitter(T.RandomContrast(0.3), nd.adjust_contrast, 0.3, 1)
    check_jitter(T.RandomSaturation(0.2), nd.adjust_saturation, 0.2, 1)
    check_jitter(T.RandomHue(0.1), nd.adjust_hue, 0.1, 0)
    same(img, T.RandomBrightness(0)(img))
  end)

  it("RandomColorJitter is its parts in order brightness, contrast, saturation, hue", function()
    mx.random.seed(2)
    local y = T.RandomColorJitter { brightness = 0.3, saturation = 0.2 } (x)
    mx.random.seed(2)
    same(T.RandomSaturation(0.2)(T.RandomBrightness(0.3)(x)), y)
    assert.has_error(function() T.RandomColorJitter { gamma = 1 } end)
  end)

  it("RandomLighting adds the PCA noise for three N(0, alpha) draws", function()
    mx.random.seed(9)
    local y = T.RandomLighting(0.1)(x)
    mx.random.seed(9)
    local a = mx.random.normal(0, 0.1, { 3 }):tolist()
    same(nd.adjust_lighting(x, { alpha_r = a[1], alpha_g = a[2], alpha_b = a[3] }), y)
  end)

  it("RandomGray: p = 1 always gray, p = 0 never", function()
    same(nd.to_gray(img), T.RandomGray(1)(img))
    same(img, T.RandomGray(0)(img))
  end)

  it("colour transforms need 3 channels and say so", function()
    local gray = nd.zeros({ 4, 4, 1 }, { dtype = "uint8" })
    for _, t in ipairs { T.RandomContrast(0.1), T.RandomHue(0.1), T.RandomLighting(0.1), T.RandomGray() } do
      local ok, err = pcall(t, gray)
      assert.is_false(ok)
      assert.matches(t._name .. ": expected 3 channels %(R, G, B%), got 1", err)
    end
    assert.has_error(function() T.RandomBrightness(-1) end,
      "RandomBrightness: its argument must be a number >= 0, got -1")
  end)

  it("on a batch (t:batch) one draw applies to every image, as MXNet's ops", function()
    local b = nd.stack(x, x)
    mx.random.seed(4)
    local y = T.RandomBrightness(0.5):batch(b)
    same(y[1], y[2])
    mx.random.seed(4)
    same(T.RandomBrightness(0.5)(x), y[1])
    assert.is_false(T.RandomBrightness(0.5).batchable)
  end)
end)

describe("transforms: RandomApply and Compose", function()
  it("RandomApply applies with probability p (a list is composed)", function()
    local t = { T.Resize(4), T.RandomGray(1) }
    same(img, T.RandomApply(t, 0)(img))
    same(nd.to_gray(mx.image.imresize(img, 4, 4, 1)), T.RandomApply(t, 1)(img))
    mx.random.seed(1)
    local applied = 0
    local half = T.RandomApply(T.RandomGray(1))
    for _ = 1, 60 do if differs(half(img), img) then applied = applied + 1 end end
    assert.is_true(applied > 15 and applied < 45)
    assert.has_error(function() T.RandomApply(5) end,
      "RandomApply: transforms must be a transform or a list of them")
  end)

  it("a Compose with random parts is not batchable", function()
    assert.is_false(T.Compose({ T.RandomFlipLeftRight(), T.ToTensor() }).batchable)
    assert.is_true(T.Compose({ T.Resize(4), T.ToTensor() }).batchable)
  end)
end)

describe("transforms: recipes", function()
  local all = {
    T.Resize(5, { keep_ratio = true }), T.CenterCrop({ 4, 6 }), T.RandomResizedCrop(5),
    T.RandomCrop(6, { pad = 1 }), T.RandomFlipLeftRight(), T.RandomFlipTopBottom(),
    T.RandomBrightness(0.2), T.RandomContrast(0.2), T.RandomSaturation(0.2), T.RandomHue(0.1),
    T.RandomColorJitter { brightness = 0.1, hue = 0.05 }, T.RandomLighting(0.1), T.RandomGray(0.5),
    T.RandomRotation({ -10, 10 }, { zoom_in = true }), T.RandomApply({ T.RandomGray(1) }, 0.5),
    T.Rotate(12, { zoom_out = true }), T.CropResize(1, 2, 6, 5, { size = 4 }),
    T.Compose { T.RandomFlipLeftRight(), T.Resize(3) }, T.ToTensor(), T.Cast("float64"),
  }
  it("every transform rebuilds from its _recipe() to one giving the same results", function()
    for _, t in ipairs(all) do
      local r = t:_recipe()
      assert.equal("mx.gluon.data.vision.transforms", r.module)
      assert.equal(t._name, r.ctor)
      local t2 = require(r.module)[r.ctor](unpack(r.args, 1, r.args.n))
      mx.random.seed(21)
      local a = t(img)
      mx.random.seed(21)
      same(a, t2(img))
    end
  end)

  it("a Compose of random transforms repeats its batches for the same seed (0 and 2 workers)",
    function()
      local n = 12
      local imgs = {}
      for k = 1, n do imgs[k] = test_image(10 + k % 3, 14) end
      local raw = data.SimpleDataset(imgs)
      local aug = T.Compose { T.RandomResizedCrop(8), T.RandomFlipLeftRight(),
        T.RandomColorJitter { brightness = 0.3, contrast = 0.3, saturation = 0.3, hue = 0.1 },
        T.RandomLighting(0.1), T.ToTensor(), T.Normalize(0.5, 0.25) }
      local ds = raw:transform(aug)
      local function run(nw)
        mx.random.seed(1234)
        local loader = data.DataLoader(ds, { batch_size = 4, num_workers = nw })
        local out = {}
        for b in loader:iter() do
          assert.same({ 4, 3, 8, 8 }, b:shape())
          out[#out + 1] = b:tolist()
        end
        if loader.close then loader:close() end
        return out
      end
      local r0 = run(0)
      assert.equal(3, #r0)
      assert.same(r0, run(0))
      local r2 = run(2)
      assert.equal(3, #r2)
      assert.same(r2, run(2))
    end)
end)
