-- mx.viz.plot_image / plot_bbox / plot_mask: PNG files read back with mx.image, SVG text
-- checked for the boxes and labels, and the errors.
local mx = require("mx")
local nd = mx.nd
local H = require("helpers.la")
local FILE = "viz_image_spec.lua"

local function tmp(ext)
  local p = os.tmpname()
  os.remove(p)
  return p .. ext
end

local function gray(h, w) return nd.full({ h, w, 3 }, 100, { dtype = "uint8" }) end

describe("mx.viz pictures", function()
  it("plot_image writes the image as PNG (read back equal) and as SVG", function()
    local img = nd.array(nd.random_uniform { low = 0, high = 255, shape = { 6, 5, 3 } }:floor(),
      { dtype = "uint8" })
    local p = tmp(".png")
    assert.are.equal(p, mx.viz.plot_image(p, img))
    assert.are.same(img:tolist(), mx.image.imread(p):tolist())
    os.remove(p)
    p = tmp(".svg")
    mx.viz.plot_image(p, img)
    local s = assert(io.open(p)):read("*a")
    os.remove(p)
    assert.truthy(s:find('<svg xmlns="http://www.w3.org/2000/svg" width="5" height="6"', 1, true))
    assert.truthy(s:find('href="data:image/png;base64,iVBORw0KGgo', 1, true))
  end)

  it("plot_bbox draws boxes above thresh into a PNG's pixels", function()
    local p = tmp(".png")
    mx.viz.plot_bbox(p, gray(20, 30), { { 2, 3, 12, 15 }, { 20, 2, 28, 10 } },
      { scores = { 0.9, 0.2 }, labels = { 1, 0 }, linewidth = 1 })
    local out = mx.image.imread(p):totable()
    os.remove(p)
    -- box 1 (class 1: palette orange 255,127,14) on its edges, the inside untouched
    assert.are.same({ 255, 127, 14 }, out[4][3])   -- (x=2, y=3): top-left corner
    assert.are.same({ 255, 127, 14 }, out[16][13]) -- (x=12, y=15)
    assert.are.same({ 100, 100, 100 }, out[10][8])
    -- box 2 (score 0.2 < 0.5) not drawn
    assert.are.same({ 100, 100, 100 }, out[3][21])
  end)

  it("plot_bbox in SVG: rectangles, class names and scores; relative coordinates", function()
    local p = tmp(".svg")
    mx.viz.plot_bbox(p, gray(20, 40), nd.array { { 0.1, 0.2, 0.5, 0.9 }, { 0, 0, 1, 1 } },
      { scores = nd.array { 0.75, 0.6 }, labels = nd.array { 0, -1 },
        class_names = { "dog" }, absolute_coordinates = false })
    local s = assert(io.open(p)):read("*a")
    os.remove(p)
    assert.truthy(s:find('<rect x="4.0" y="4.0" width="16.0" height="14.0" fill="none" '
      .. 'stroke="rgb(31,119,180)"', 1, true))
    assert.truthy(s:find(">dog 0.750</text>", 1, true))
    local _, n = s:gsub('fill="none"', "")
    assert.are.equal(1, n) -- the label -1 row (padding) is skipped
  end)

  it("plot_mask blends each mask's colour at alpha", function()
    local p = tmp(".png")
    local masks = nd.zeros { 1, 4, 4 }
    masks[{ 1, 2, 3 }] = 1
    mx.viz.plot_mask(p, gray(4, 4), masks, { alpha = 0.5 })
    local out = mx.image.imread(p):totable()
    os.remove(p)
    -- 100 * 0.5 + (31, 119, 180) * 0.5, rounded
    assert.are.same({ 66, 110, 140 }, out[2][3])
    assert.are.same({ 100, 100, 100 }, out[1][1])
  end)

  it("names the bad argument", function()
    H.assert_error(function(mark) mark() mx.viz.plot_image("x.jpg", gray(2, 2)) end, FILE,
      "plot_image: path must end in .png or .svg, got x.jpg")
    H.assert_error(function(mark) mark() mx.viz.plot_bbox("x.png", nd.zeros { 2, 2 }, {}) end,
      FILE, "plot_bbox: img must be an (H, W, 3) NDArray (RGB), got shape (2, 2)")
    H.assert_error(function(mark) mark() mx.viz.plot_bbox("x.png", gray(2, 2), { { 0, 0, 1, 1 } },
      { scores = { 1, 2 } }) end, FILE, "plot_bbox: scores has 2 entries for 1 boxes")
    H.assert_error(function(mark) mark() mx.viz.plot_mask("x.png", gray(2, 2), nd.zeros { 1, 3, 2 })
    end, FILE, "plot_mask: masks must be an (n, 2, 2) NDArray")
  end)
end)
