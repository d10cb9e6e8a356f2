-- spec/mximage_spec.lua — mx.image (decode/encode, MXNet 1.9's crop/resize helpers) and
-- recordio.pack_img/unpack_img, against MXNet 1.9.1 (spec/fixtures/image_mxnet.lua and
-- image_mxnet.rec from tools/fixtures/make_image_mxnet.py) on real images: a JPEG photo
-- (Debian's python-matplotlib-data grace_hopper.jpg) and an RGBA PNG from the same package.
local mx = require("mx")
local nd = mx.nd
local bit = require("bit")
local H = require("helpers.la")
local FILE = "mximage_spec.lua"
local MX = dofile("spec/fixtures/image_mxnet.lua")
local JPG_PATH = "spec/fixtures/images/grace_hopper.jpg"
local PNG_PATH = "spec/fixtures/images/minduka_rgba.png"

local function slurp(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end
local JPG, PNG = slurp(JPG_PATH), slurp(PNG_PATH)

-- the fixture's summary of an image: shape, exact sum, every 997th value
local function same_as(img, want)
  assert.are.same(want.shape, img:shape())
  local f = img:reshape { -1 }:tolist()
  local s = 0
  for i = 1, #f do s = s + f[i] end
  assert.are.equal(want.sum, s)
  local k = 0
  for i = 1, #f, 997 do
    k = k + 1
    assert.are.equal(want.sample[k], f[i])
  end
  assert.are.equal(#want.sample, k)
end

local function f32(x) return nd.cast(x, { dtype = "float32" }) end
local function maxabs(a, b) return (f32(a) - f32(b)):abs():max():item() end

local function crc32(s)
  local c = 0xffffffff
  for i = 1, #s do
    c = bit.bxor(c, s:byte(i))
    for _ = 1, 8 do
      c = bit.band(c, 1) ~= 0 and bit.bxor(bit.rshift(c, 1), 0xedb88320) or bit.rshift(c, 1)
    end
  end
  return bit.bnot(c)
end
local function be32(v)
  return string.char(bit.band(bit.rshift(v, 24), 255), bit.band(bit.rshift(v, 16), 255),
    bit.band(bit.rshift(v, 8), 255), bit.band(v, 255))
end

describe("mx.image.imdecode", function()
  it("decodes the JPEG photo to MXNet's pixels exactly (RGB, BGR, gray)", function()
    same_as(mx.image.imdecode(JPG), MX.decode.jpg_rgb)
    same_as(mx.image.imdecode(JPG, { to_rgb = false }), MX.decode.jpg_bgr)
    same_as(mx.image.imdecode(JPG, { flag = 0 }), MX.decode.jpg_gray)
    local img = mx.image.imread(JPG_PATH)
    assert.are.same({ 600, 512, 3 }, img:shape())
    assert.are.equal("uint8", img:dtype())
  end)

  it("decodes an RGBA PNG as MXNet does (flag 1 drops alpha, flag 0 gray, flag -1 keeps 4)", function()
    same_as(mx.image.imdecode(PNG), MX.decode.png_rgb)
    same_as(mx.image.imdecode(PNG, { flag = 0 }), MX.decode.png_gray)
    local a = mx.image.imdecode(PNG, { flag = -1 })
    assert.are.same({ 128, 128, 4 }, a:shape())
    assert.are.equal(0, maxabs(nd.slice(a, { begin = { 1, 1, 1 }, ["end"] = { 128, 128, 3 } }),
      mx.image.imdecode(PNG)))
  end)

  it("decodes palette+tRNS, 16-bit, 1-bit and gray+alpha PNGs to MXNet's pixels (flag 1 and 0)", function()
    local n = 0
    for name, want in pairs(MX.png_formats) do
      local s = slurp("spec/fixtures/images/small_" .. name .. ".png")
      local rgb, gray = mx.image.imdecode(s), mx.image.imdecode(s, { flag = 0 })
      assert.are.same({ 4, 5, 3 }, rgb:shape())
      assert.are.same(want.rgb, rgb:reshape { -1 }:tolist(), name)
      assert.are.same(want.gray, gray:reshape { -1 }:tolist(), name)
      n = n + 1
    end
    assert.are.equal(5, n)
  end)

  it("accepts a 1-D uint8 NDArray of bytes", function()
    local t = {}
    for i = 1, #JPG do t[i] = JPG:byte(i) end
    local bytes = nd.array(t, { dtype = "uint8" })
    assert.are.equal(0, maxabs(mx.image.imdecode(bytes), mx.image.imdecode(JPG)))
  end)

  it("rejects truncated, corrupt, non-image and huge inputs, blaming the caller's line", function()
    H.assert_error(function(mark) mark() mx.image.imdecode(JPG:sub(1, 5000)) end, FILE,
      "truncated JPEG")
    H.assert_error(function(mark) mark() mx.image.imdecode(PNG:sub(1, 3000)) end, FILE,
      "PNG", "truncated")
    H.assert_error(function(mark) mark() mx.image.imdecode("GIF89a....") end, FILE,
      "not a JPEG or PNG")
    H.assert_error(function(mark) mark() mx.image.imdecode("") end, FILE, "empty")
    -- corrupt: the JPEG's SOF0 sample precision patched to 7 bits
    local sof = JPG:find("\255\192", 1, true)
    assert.is_truthy(sof)
    H.assert_error(function(mark)
      mark() mx.image.imdecode(JPG:sub(1, sof + 3) .. "\7" .. JPG:sub(sof + 5))
    end, FILE, "corrupt JPEG", "precision")
    -- a JPEG claiming 60000 x 60000 pixels (its SOF0 patched): refused before allocating
    local big = JPG:sub(1, sof + 4) .. "\234\96\234\96" .. JPG:sub(sof + 9)
    H.assert_error(function(mark) mark() mx.image.imdecode(big) end, FILE, "JPEG", "too large")
    -- a PNG claiming 40000 x 40000 (IHDR patched, its CRC recomputed)
    local ihdr = "IHDR" .. be32(40000) .. be32(40000) .. PNG:sub(25, 29)
    local bigpng = PNG:sub(1, 12) .. ihdr .. be32(crc32(ihdr)) .. PNG:sub(34)
    H.assert_error(function(mark) mark() mx.image.imdecode(bigpng) end, FILE, "PNG", "too large")
    -- a tEXt chunk declaring 0x2B000019 bytes (fuzzer finding: libpng allocated the
    -- declared size first): skipped unread, the file is then truncated
    local hugetext = PNG:sub(1, 33) .. be32(0x2B000019) .. "tEXt" .. ("x"):rep(40)
    H.assert_error(function(mark) mark() mx.image.imdecode(hugetext) end, FILE, "PNG", "truncated")
    -- a flipped byte in IHDR: libpng's CRC check
    local bad = PNG:sub(1, 20) .. "\9" .. PNG:sub(22)
    H.assert_error(function(mark) mark() mx.image.imdecode(bad) end, FILE, "corrupt PNG")
    H.assert_error(function(mark) mark() mx.image.imdecode(JPG, { flag = 2 }) end, FILE, "flag")
    H.assert_error(function(mark) mark() mx.image.imdecode(JPG, { falg = 1 }) end, FILE, "falg")
    H.assert_error(function(mark) mark() mx.image.imread("spec/fixtures/images/nope.jpg") end,
      FILE, "nope.jpg")
  end)
end)

describe("mx.image.imencode", function()
  local img = mx.image.imdecode(JPG)
  it("round-trips PNG exactly (1, 3 and 4 channels) and JPEG closely", function()
    for _, x in ipairs { img, mx.image.imdecode(JPG, { flag = 0 }), mx.image.imdecode(PNG, { flag = -1 }) } do
      local s = mx.image.imencode(x, { img_fmt = ".png" })
      assert.are.equal("\137PNG", s:sub(1, 4))
      assert.are.equal(0, maxabs(mx.image.imdecode(s, { flag = -1 }), x))
    end
    local j = mx.image.imencode(img, { quality = 95 })
    assert.are.equal("\255\216\255", j:sub(1, 3))
    local back = mx.image.imdecode(j)
    assert.is_true((f32(back) - f32(img)):abs():mean():item() < 2)
    local lo = mx.image.imencode(img, { quality = 10 })
    assert.is_true(#lo < #j / 3)
    -- BGR in, RGB out: the channels swap
    local bgr = mx.image.imdecode(mx.image.imencode(img, { img_fmt = ".png", to_rgb = false }))
    assert.are.equal(0, maxabs(nd.flip(bgr, { axis = 3 }), img))
  end)

  it("rejects bad images and parameters", function()
    H.assert_error(function(mark) mark() mx.image.imencode(img, { quality = 0 }) end, FILE, "quality")
    H.assert_error(function(mark) mark() mx.image.imencode(img, { img_fmt = ".gif" }) end, FILE, ".gif")
    H.assert_error(function(mark) mark() mx.image.imencode(f32(img)) end, FILE, "uint8")
    H.assert_error(function(mark)
      mark() mx.image.imencode(mx.image.imdecode(PNG, { flag = -1 }), { img_fmt = ".jpg" })
    end, FILE, "4 channels")
  end)
end)

describe("mx.image helpers (MXNet 1.9's)", function()
  local img = mx.image.imdecode(JPG) -- 600 x 512 (H x W)
  it("imresize, resize_short, scale_down", function()
    local r = mx.image.imresize(img, 100, 50, { interp = 3 })
    assert.are.same({ 50, 100, 3 }, r:shape())
    assert.are.equal(0, maxabs(r, nd.imresize(img, { w = 100, h = 50, interp = 3 })))
    assert.are.same({ 50, 100, 3 }, mx.image.imresize(img, 100, 50, 0):shape())
    local s = mx.image.resize_short(img, 256) -- MXNet: new_h = 256 * 600 // 512 = 300
    assert.are.same({ 300, 256, 3 }, s:shape())
    -- interp 9: area when shrinking both sides (MXNet's _get_interp_method)
    assert.are.equal(0, maxabs(mx.image.resize_short(img, 256, 9),
      nd.imresize(img, { w = 256, h = 300, interp = 3 })))
    assert.are.same({ 60, 48 }, { mx.image.scale_down({ 60, 600 }, { 100, 80 }) })
    assert.are.same({ 100, 80 }, { mx.image.scale_down({ 600, 600 }, { 100, 80 }) })
    local w, h = mx.image.scale_down({ 640, 480 }, { 720, 120 })
    assert.are.same({ 640, 106 }, { w, h })
  end)

  it("resizes the photo to MXNet's pixels exactly (bilinear, bicubic, area; uint8)", function()
    for _, r in ipairs(MX.photo_resize) do
      same_as(mx.image.imresize(img, r.w, r.h, r.interp), r)
    end
  end)

  it("fixed_crop takes 0-based offsets; center_crop and random_crop return MXNet's rects", function()
    local c = mx.image.fixed_crop(img, 10, 20, 30, 40)
    assert.are.same({ 40, 30, 3 }, c:shape())
    assert.are.same(img:totable()[21][11], c:totable()[1][1]) -- (x0, y0) = (10, 20)
    local cr = mx.image.fixed_crop(img, 10, 20, 30, 40, { 15, 20 })
    assert.are.same({ 20, 15, 3 }, cr:shape())
    local out, rect = mx.image.center_crop(img, { 224, 224 })
    assert.are.same({ 224, 224, 3 }, out:shape())
    assert.are.same({ 144, 188, 224, 224 }, rect) -- ((512-224)/2, (600-224)/2)
    assert.are.equal(0, maxabs(out, mx.image.fixed_crop(img, 144, 188, 224, 224)))
    for _ = 1, 5 do
      local o, r = mx.image.random_crop(img, { 100, 50 })
      assert.are.same({ 50, 100, 3 }, o:shape())
      assert.is_true(r[1] >= 0 and r[1] <= 412 and r[2] >= 0 and r[2] <= 550)
      assert.are.equal(0, maxabs(o, mx.image.fixed_crop(img, r[1], r[2], r[3], r[4])))
    end
    H.assert_error(function(mark) mark() mx.image.fixed_crop(img, 500, 0, 30, 40) end, FILE,
      "fixed_crop", "leaves the 512x600 image")
  end)

  it("color_normalize and copyMakeBorder", function()
    local x = f32(mx.image.imresize(img, 4, 3))
    local n = mx.image.color_normalize(x, { 123.68, 116.28, 103.53 }, { 58.395, 57.12, 57.375 })
    local p, q = x:totable()[2][3], n:totable()[2][3]
    assert.is_true(math.abs(q[2] - (p[2] - 116.28) / 57.12) < 1e-4)
    local b = mx.image.copyMakeBorder(img, 1, 2, 3, 4, { type = 0, value = 9 })
    assert.are.same({ 603, 519, 3 }, b:shape())
    assert.are.same({ 9, 9, 9 }, b:totable()[1][1])
    H.assert_error(function(mark) mark() mx.image.copyMakeBorder(img, 1, 1, 1, 1, { kind = 1 }) end,
      FILE, "kind")
  end)
end)

describe("recordio.pack_img / unpack_img", function()
  local rio = mx.recordio
  it("round-trips an image (PNG exactly, JPEG closely)", function()
    local img = mx.image.imdecode(PNG)
    local s = rio.pack_img({ flag = 0, label = 4, id = 2, id2 = 0 }, img, { img_fmt = ".png" })
    local h, back = rio.unpack_img(s)
    assert.are.equal(4, h.label)
    assert.are.equal(2, h.id)
    assert.are.equal(0, maxabs(back, img))
    local photo = mx.image.imdecode(JPG)
    local j = rio.pack_img({ label = { 1, 2 } }, photo, { quality = 90 })
    local hj, bj = rio.unpack_img(j, { iscolor = 1 })
    assert.are.same({ 1, 2 }, hj.label)
    local err = (f32(bj) - f32(photo)):abs():mean():item()
    assert.is_true(err > 0 and err < 3, "JPEG mean error " .. err)
    H.assert_error(function(mark) mark() rio.pack_img({}, img, { qualty = 3 }) end, FILE, "qualty")
    H.assert_error(function(mark) mark() rio.unpack_img(rio.pack({}, "not an image")) end, FILE,
      "not a JPEG or PNG")
  end)

  it("unpacks the records MXNet 1.9.1 packed to MXNet's unpack_img pixels (BGR)", function()
    local r = rio.MXRecordIO("spec/fixtures/image_mxnet.rec", "r")
    for i = 1, 2 do
      local h, img = rio.unpack_img(r:read(), { iscolor = 1 })
      local want = MX.unpack_img[i]
      assert.are.equal(want.label, h.label)
      assert.are.equal(want.id, h.id)
      same_as(img, want)
    end
    assert.is_nil(r:read())
    r:close()
  end)
end)
