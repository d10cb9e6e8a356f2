-- spec/image_spec.lua — to_tensor (MXNet's image.to_tensor): HWC uint8/float32 to
-- CHW float32 / 255, the CPU kernel against the ref kernel bit for bit.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local ffi = require("ffi")
local FILE = "image_spec.lua"

local fbuf = ffi.new("float[1]")
local function ffi_float(v) fbuf[0] = v return fbuf[0] end -- v rounded to float32

describe("to_tensor", function()
  it("moves the channel axis first and divides by 255", function()
    local x = nd.array({ { { 0, 255, 51 }, { 1, 2, 3 } } }, { dtype = "uint8" }) -- (1, 2, 3)
    local y = nd.to_tensor(x)
    assert.are.same({ 3, 1, 2 }, y:shape())
    assert.are.equal("float32", y:dtype())
    local f = function(v) return tonumber(ffi_float(v / 255)) end
    assert.are.same({ { { f(0), f(1) } }, { { f(255), f(2) } }, { { f(51), f(3) } } }, y:totable())
    local b = nd.to_tensor(nd.ones({ 5, 4, 3, 1 }, { dtype = "uint8" }) * 255) -- a batch
    assert.are.same({ 5, 1, 4, 3 }, b:shape())
    assert.are.equal(1, b:min():item())
  end)

  it("matches the ref kernel bit for bit (uint8 and float32, 1 and 3 channels)", function()
    for _, sh in ipairs { { 64, 28, 28, 1 }, { 2, 7, 5, 3 }, { 9, 4, 3 }, { 300, 300, 1 } } do
      local r = H.rand(mx, sh, { seed = #sh + sh[1], dtype = "float32" })
      local u8 = nd.cast((r + 1) * 127.9, { dtype = "uint8" })
      for _, x in ipairs { u8, nd.cast(u8, { dtype = "float32" }) } do
        local y, ref = nd.to_tensor(x), nd._ref.to_tensor(x)
        assert.are.equal(0, (y - ref):abs():max():item())
      end
    end
    -- every uint8 value: the float nearest v / 255
    local all = nd.arange(0, 256, { dtype = "uint8" }):reshape { 256, 1, 1 }
    local y = nd.to_tensor(all):reshape { 256 }:tolist()
    for v = 0, 255 do assert.are.equal(tonumber(ffi_float(v / 255)), y[v + 1]) end
  end)

  it("rejects other ranks and dtypes at the caller's line", function()
    H.assert_error(function(mark) mark() nd.to_tensor(nd.ones({ 2, 3 }, { dtype = "uint8" })) end,
      FILE, "to_tensor", "(H, W, C)")
    H.assert_error(function(mark) mark() nd.to_tensor(nd.ones({ 2, 3, 1 }, { dtype = "int32" })) end,
      FILE, "to_tensor", "int32")
  end)
end)

-- ---- imresize, copy_make_border, colour ops, imrotate (against MXNet 1.9.1:
-- spec/fixtures/image_mxnet.lua from tools/fixtures/make_image_mxnet.py) ----
local MX = dofile("spec/fixtures/image_mxnet.lua")

-- the fixture script's formula image (h, w, 3)
local function formula(h, w, dtype)
  local t = {}
  for y = 0, h - 1 do
    local row = {}
    for x = 0, w - 1 do
      local px = {}
      for c = 0, 2 do px[c + 1] = (x * 37 + y * 91 + c * 53 + (x * y) % 17) % 256 end
      row[x + 1] = px
    end
    t[y + 1] = row
  end
  return nd.array(t, { dtype = dtype or "uint8" })
end

local function diff(a, list)
  local f = a:reshape { -1 }:tolist()
  assert.are.equal(#list, #f)
  local m = 0
  for i = 1, #f do m = math.max(m, math.abs(f[i] - list[i])) end
  return m
end

describe("imresize", function()
  it("matches MXNet's (OpenCV's) resize for every interp: uint8 within 1, float32 within 1e-3", function()
    local u8, f32 = formula(17, 20), formula(17, 20, "float32")
    local n = 0
    for _, r in ipairs(MX.imresize) do
      local o = nd.imresize(u8, { w = r.w, h = r.h, interp = r.interp })
      assert.are.same({ r.h, r.w, 3 }, o:shape())
      assert.are.equal("uint8", o:dtype())
      -- the cpu kernel runs OpenCV 3.4's uint8 fixed point for bilinear and bicubic: nearest
      -- and bilinear are exact; bicubic and area may round a pixel of these tiny images
      -- differently (by 1)
      assert.is_true(diff(o, r.u8) <= (r.interp <= 1 and 0 or 1), "interp " .. r.interp)
      if r.f32 then
        assert.is_true(diff(nd.imresize(f32, { w = r.w, h = r.h, interp = r.interp }), r.f32) < 1e-3)
        n = n + 1
      end
    end
    assert.is_true(n >= 8)
  end)

  it("the cpu kernel agrees with the ref kernel (uint8 within 1, float32 within 1e-3)", function()
    for _, sh in ipairs { { 23, 31, 3 }, { 2, 40, 9, 1 }, { 64, 64, 4 } } do
      local r = H.rand(mx, sh, { seed = sh[1] })
      local u8 = nd.cast((r + 1) * 127.9, { dtype = "uint8" })
      for _, x in ipairs { u8, nd.cast(u8, { dtype = "float32" }) } do
        for interp = 0, 3 do
          for _, wh in ipairs { { 7, 5 }, { 50, 61 }, { 16, 16 }, { 3, 90 } } do
            local p = { w = wh[1], h = wh[2], interp = interp }
            local d = (nd.cast(nd.imresize(x, p), { dtype = "float32" })
              - nd.cast(nd._ref.imresize(x, p), { dtype = "float32" })):abs():max():item()
            assert.is_true(d <= (x:dtype() == "uint8" and 1 or 1e-3), x:dtype() .. " interp " .. interp)
          end
        end
      end
    end
  end)

  it("resizes a batch (N, H, W, C) image by image; an identity size is a copy", function()
    local a, b = formula(9, 11, "float32"), formula(9, 11, "float32") * 0.5
    local batch = nd.stack({ a, b }, { axis = 1 })
    for interp = 0, 3 do
      local o = nd.imresize(batch, { w = 5, h = 13, interp = interp })
      assert.are.same({ 2, 13, 5, 3 }, o:shape())
      local one = nd.imresize(b, { w = 5, h = 13, interp = interp })
      assert.are.equal(0, diff(o[2], one:reshape { -1 }:tolist()))
      assert.are.equal(0, diff(nd.imresize(a, { w = 11, h = 9, interp = interp }), a:reshape { -1 }:tolist()))
    end
  end)

  it("rejects bad sizes, interp codes and ranks at the caller's line", function()
    local x = formula(4, 4)
    H.assert_error(function(mark) mark() nd.imresize(x, { w = 0, h = 3 }) end, FILE, "imresize", "w=0")
    H.assert_error(function(mark) mark() nd.imresize(x, { w = 3, h = 3, interp = 4 }) end, FILE,
      "imresize", "interp=4")
    H.assert_error(function(mark) mark() nd.imresize(nd.ones({ 3, 3 }), { w = 3, h = 3 }) end, FILE,
      "imresize", "(H, W, C)")
  end)
end)

describe("copy_make_border", function()
  it("matches MXNet's copyMakeBorder for OpenCV's types 0..4 (borders wider than the image)", function()
    for _, b in ipairs(MX.border) do
      local o = nd.copy_make_border(formula(5, 6), { top = 2, bot = 3, left = 4, right = 13,
        type = b.type, value = 7 })
      assert.are.same(b.shape, o:shape())
      assert.are.equal(0, diff(o, b.out), "type " .. b.type)
    end
  end)

  it("rejects negative widths and unknown types", function()
    local x = formula(3, 3)
    H.assert_error(function(mark) mark() nd.copy_make_border(x, { top = -1 }) end, FILE,
      "copy_make_border", "top")
    H.assert_error(function(mark) mark() nd.copy_make_border(x, { type = 5 }) end, FILE,
      "copy_make_border", "type=5")
  end)
end)

describe("colour ops", function()
  local x = formula(17, 20, "float32")
  it("match MXNet's jitter augmenters for fixed draws (float32)", function()
    assert.is_true(diff(nd.adjust_brightness(x, { alpha = 1.3 }), MX.colour.brightness) < 1e-3)
    assert.is_true(diff(nd.adjust_contrast(x, { alpha = 1.3 }), MX.colour.contrast) < 1e-3)
    assert.is_true(diff(nd.adjust_saturation(x, { alpha = 1.3 }), MX.colour.saturation) < 1e-3)
    assert.is_true(diff(nd.adjust_hue(x, { alpha = 0.3 }), MX.colour.hue) < 1e-3)
    assert.is_true(diff(nd.adjust_lighting(x, { alpha_r = 0.5, alpha_g = -1, alpha_b = 2 }),
      MX.colour.lighting) < 1e-3)
  end)

  it("imrotate matches MXNet's image.imrotate (bilinear, zero outside)", function()
    assert.is_true(diff(nd.imrotate(x, { angle = 30 }), MX.colour.rotate30) < 1e-3)
    assert.are.equal(0, diff(nd.imrotate(x, { angle = 0 }), x:reshape { -1 }:tolist()))
  end)

  it("uint8 results are rounded and saturated; to_gray gives three equal channels", function()
    local u = formula(6, 7)
    local b = nd.adjust_brightness(u, { alpha = 2 })
    assert.are.equal("uint8", b:dtype())
    local want = nd.cast(nd.clip(nd.cast(u, { dtype = "float32" }) * 2, { a_min = 0, a_max = 255 }),
      { dtype = "uint8" })
    assert.are.equal(0, diff(b, want:reshape { -1 }:tolist()))
    local g = nd.to_gray(x):totable()
    local p = x:totable()[3][4]
    local want_g = 0.299 * p[1] + 0.587 * p[2] + 0.114 * p[3]
    for c = 1, 3 do assert.is_true(math.abs(g[3][4][c] - want_g) < 1e-3) end
    -- a batch: each image's own mean gray
    local batch = nd.stack({ x, x * 0.25 }, { axis = 1 })
    local o = nd.adjust_contrast(batch, { alpha = 0.5 })
    assert.is_true(diff(o[2], nd.adjust_contrast(x * 0.25, { alpha = 0.5 }):reshape { -1 }:tolist()) < 1e-4)
  end)

  it("the cpu kernels agree with the ref ones (uint8 within 1, float32 within 1e-3)", function()
    local r = H.rand(mx, { 3, 9, 11, 3 }, { seed = 7 })
    local u8 = nd.cast((r + 1) * 127.9, { dtype = "uint8" })
    local cases = { { "adjust_brightness", { alpha = 1.7 } }, { "adjust_contrast", { alpha = 0.4 } },
      { "adjust_saturation", { alpha = 1.6 } }, { "adjust_hue", { alpha = -0.4 } },
      { "adjust_lighting", { alpha_r = 0.3, alpha_g = -0.2, alpha_b = 0.9 } }, { "to_gray" },
      { "imrotate", { angle = 33 } }, { "imrotate", { angle = -170 } } }
    for t = 0, 4 do
      cases[#cases + 1] = { "copy_make_border", { top = 2, bot = 5, left = 23, right = 1, type = t,
        value = 300 } }
    end
    for _, c in ipairs(cases) do
      for _, xx in ipairs { u8, nd.cast(u8, { dtype = "float32" }), u8[2] } do
        local d = (nd.cast(nd[c[1]](xx, c[2]), { dtype = "float32" })
          - nd.cast(nd._ref[c[1]](xx, c[2]), { dtype = "float32" })):abs():max():item()
        assert.is_true(d <= (xx:dtype() == "uint8" and 1 or 1e-3), c[1] .. " " .. xx:dtype() .. " " .. d)
      end
    end
  end)

  it("need 3 channels", function()
    H.assert_error(function(mark) mark() nd.adjust_hue(nd.ones({ 2, 2, 1 }), { alpha = 0.1 }) end,
      FILE, "adjust_hue", "3 channels")
  end)
end)
