-- mx.viz's pictures (GluonCV's gluoncv.utils.viz, writing files instead of matplotlib
-- axes): plot_image, plot_bbox and plot_mask take an (H, W, 3) uint8 RGB image and write
-- PNG (through mx.image.imencode: libpng) or SVG (the image embedded as a PNG data URI, with
-- the boxes and their labels as vector shapes), chosen by the path's extension. In a PNG
-- the boxes are drawn into the pixels and carry no text (no font rasterizer); an SVG has
-- the class names and scores. Files are written atomically (mx.core.file.write_atomic).
--
--   mx.viz.plot_bbox("dets.svg", img, bboxes, { scores = s, labels = ids,
--     class_names = { "dog", "cat" }, thresh = 0.5 })
local ffi = require("ffi")
local nd = require("mx.nd")
local image = require("mx.image")
local check_opts = require("mx.core.class").check_opts
local write_atomic = require("mx.core.file").write_atomic

local type, error, tostring, format, floor = type, error, tostring, string.format, math.floor
local min, max = math.min, math.max

local M = {}

-- a fixed palette (tab10's colours), one per class id
local PALETTE = { { 31, 119, 180 }, { 255, 127, 14 }, { 44, 160, 44 }, { 214, 39, 40 },
  { 148, 103, 189 }, { 140, 86, 75 }, { 227, 119, 194 }, { 127, 127, 127 }, { 188, 189, 34 },
  { 23, 190, 207 } }

local function color_of(colors, id)
  local c = colors and colors[id]
  if c then return c end
  return PALETTE[(id % #PALETTE) + 1]
end

local function check_image(who, img, level)
  if not nd.is_tensor(img) or img:ndim() ~= 3 or img:shape()[3] ~= 3 then
    error(who .. ": img must be an (H, W, 3) NDArray (RGB), got "
      .. (nd.is_tensor(img) and ("shape (" .. table.concat(img:shape(), ", ") .. ")")
        or type(img)), level + 1)
  end
  if img:dtype() ~= "uint8" then img = nd.clip(img, { a_min = 0, a_max = 255 }):astype("uint8") end
  return img:copy()
end

local function kind_of(who, path, level)
  local ext = type(path) == "string" and path:match("%.(%w+)$")
  ext = ext and ext:lower()
  if ext ~= "png" and ext ~= "svg" then
    error(format("%s: path must end in .png or .svg, got %s", who, tostring(path)), level + 1)
  end
  return ext
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  local out, n = {}, #s
  for i = 1, n, 3 do
    local a, b, c = s:byte(i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for k = 3, 0, -1 do
      local d = floor(v / 64 ^ k) % 64
      q[#q + 1] = B64:sub(d + 1, d + 1)
    end
    if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

-- (H, W, 3) uint8 img -> the file's bytes: PNG, or SVG with the image and `shapes` (SVG text)
local function encode(kind, img, shapes)
  local png = image.imencode(img, { img_fmt = ".png" })
  if kind == "png" then return png end
  local s = img:shape()
  return format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
    .. 'viewBox="0 0 %d %d">\n<image width="%d" height="%d" href="data:image/png;base64,%s"/>\n%s'
    .. "</svg>\n", s[2], s[1], s[2], s[1], s[2], s[1], base64(png), shapes or "")
end

-- plot_image(path, img): img as a PNG or SVG file. Returns path.
function M.plot_image(path, img)
  local kind = kind_of("plot_image", path, 2)
  img = check_image("plot_image", img, 2)
  write_atomic("plot_image", path, encode(kind, img), 2)
  return path
end

-- the (n, 4) / (n) / (n) inputs as Lua lists; tensors or tables of numbers
local function rows(who, what, v, width, level)
  if v == nil then return nil end
  local t = nd.is_tensor(v) and v:totable() or v
  if type(t) ~= "table" then
    error(format("%s: %s must be a tensor or a list, got %s", who, what, type(v)), level + 1)
  end
  local out = {}
  for i, r in ipairs(t) do
    if width then
      if type(r) ~= "table" or #r < width then
        error(format("%s: %s[%d] must hold %d numbers", who, what, i, width), level + 1)
      end
      out[i] = { r[1], r[2], r[3], r[4] }
    else
      out[i] = type(r) == "table" and r[1] or r
    end
  end
  return out
end

-- draw a w-pixel rectangle outline into an (H, W, 3) uint8 buffer
local function draw_rect(p, H, W, x1, y1, x2, y2, lw, rgb)
  x1, y1 = max(0, floor(x1)), max(0, floor(y1))
  x2, y2 = min(W - 1, floor(x2)), min(H - 1, floor(y2))
  if x2 < x1 or y2 < y1 then return end
  for y = y1, y2 do
    local edge_y = y < y1 + lw or y > y2 - lw
    for x = x1, x2 do
      if edge_y or x < x1 + lw or x > x2 - lw then
        local o = (y * W + x) * 3
        p[o], p[o + 1], p[o + 2] = rgb[1], rgb[2], rgb[3]
      end
    end
  end
end

local BBOX_OPTS = { scores = true, labels = true, thresh = true, class_names = true,
  colors = true, absolute_coordinates = true, linewidth = true, fontsize = true }

-- plot_bbox(path, img, bboxes, {scores=, labels=, thresh=0.5, class_names=, colors=,
-- absolute_coordinates=true, linewidth=3.5, fontsize=12}): GluonCV's plot_bbox. bboxes
-- (n, 4) corners (x1, y1, x2, y2), pixels or fractions of the image (absolute_coordinates=
-- false); rows with a score below thresh or a negative label (GluonCV's padding) are
-- skipped; labels are 0-based class ids, class_names a list indexed by id + 1, colors a
-- table id -> {r, g, b}. Returns path.
function M.plot_bbox(path, img, bboxes, opts)
  local who = "plot_bbox"
  local kind = kind_of(who, path, 2)
  local o = check_opts(who, opts, BBOX_OPTS, 2)
  img = check_image(who, img, 2)
  local boxes = rows(who, "bboxes", bboxes, 4, 2) or {}
  local scores, labels = rows(who, "scores", o.scores, nil, 2), rows(who, "labels", o.labels, nil, 2)
  for what, list in pairs { scores = scores, labels = labels } do
    if #list ~= #boxes then
      error(format("%s: %s has %d entries for %d boxes", who, what, #list, #boxes), 2)
    end
  end
  local thresh = o.thresh or 0.5
  local s = img:shape()
  local H, W = s[1], s[2]
  local lw = o.linewidth or 3.5
  local p = kind == "png" and ffi.cast("uint8_t *", img:data_ptr())
  local shapes = {}
  for i, b in ipairs(boxes) do
    local sc = scores and scores[i]
    local id = labels and floor(labels[i]) or -1
    if not (sc and sc < thresh) and not (labels and id < 0) then
      local x1, y1, x2, y2 = b[1], b[2], b[3], b[4]
      if o.absolute_coordinates == false then x1, y1, x2, y2 = x1 * W, y1 * H, x2 * W, y2 * H end
      local rgb = color_of(o.colors, id < 0 and 0 or id)
      if p then
        draw_rect(p, H, W, x1, y1, x2, y2, max(1, floor(lw + 0.5)), rgb)
      else
        local col = format("rgb(%d,%d,%d)", rgb[1], rgb[2], rgb[3])
        shapes[#shapes + 1] = format('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
          .. 'fill="none" stroke="%s" stroke-width="%.1f"/>', x1, y1, x2 - x1, y2 - y1, col, lw)
        local name = id >= 0 and (o.class_names and o.class_names[id + 1] or tostring(id)) or ""
        local text = name .. (sc and format(" %.3f", sc) or "")
        if text ~= "" then
          local fs = o.fontsize or 12
          shapes[#shapes + 1] = format('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
            .. 'fill="%s" fill-opacity="0.5"/><text x="%.1f" y="%.1f" font-family="sans-serif" '
            .. 'font-size="%d" fill="white">%s</text>', x1, y1 - fs - 4, #text * fs * 0.6 + 4,
            fs + 4, col, x1 + 2, y1 - 4, fs, esc(text))
        end
      end
    end
  end
  write_atomic(who, path, encode(kind, img, table.concat(shapes, "\n") .. "\n"), 2)
  return path
end

-- plot_mask(path, img, masks, {alpha=0.5, colors=}): GluonCV's plot_mask: each (H, W) mask
-- of masks (n, H, W) (nonzero = inside) blended over img in its colour. Returns path.
function M.plot_mask(path, img, masks, opts)
  local who = "plot_mask"
  local kind = kind_of(who, path, 2)
  local o = check_opts(who, opts, { alpha = true, colors = true }, 2)
  img = check_image(who, img, 2)
  local s = img:shape()
  if not nd.is_tensor(masks) or masks:ndim() ~= 3 or masks:shape()[2] ~= s[1]
    or masks:shape()[3] ~= s[2] then
    error(format("%s: masks must be an (n, %d, %d) NDArray", who, s[1], s[2]), 2)
  end
  local a = o.alpha or 0.5
  if type(a) ~= "number" or a < 0 or a > 1 then
    error(who .. ": alpha must be a number in [0, 1], got " .. tostring(a), 2)
  end
  local m = masks:astype("float32"):copy()
  local mp, p = ffi.cast("float *", m:data_ptr()), ffi.cast("uint8_t *", img:data_ptr())
  local n, HW = masks:shape()[1], s[1] * s[2]
  for k = 0, n - 1 do
    local rgb = color_of(o.colors, k)
    for i = 0, HW - 1 do
      if mp[k * HW + i] ~= 0 then
        for c = 0, 2 do
          p[i * 3 + c] = floor(p[i * 3 + c] * (1 - a) + rgb[c + 1] * a + 0.5)
        end
      end
    end
  end
  write_atomic(who, path, encode(kind, img), 2)
  return path
end

return M
