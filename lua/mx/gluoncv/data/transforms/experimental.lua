-- mx.gluoncv.data.transforms.experimental — GluonCV 0.11's experimental transforms:
-- image.random_color_distort (brightness, then contrast / saturation / hue in one of
-- GluonCV's two orders) and bbox.random_crop_with_constraints (SSD's IoU-constrained crop
-- sampling). Each takes an rng (transforms.rng; the default one when nil) and draws what
-- GluonCV draws, in its order.
local nd = require("mx.nd")
local R = require("mx.gluoncv.data.transforms.rng")
local B = require("mx.gluoncv.data.transforms.bbox")
local check_opts = require("mx.core.class").check_opts

local floor, sqrt, cos, sin, pi = math.floor, math.sqrt, math.cos, math.sin, math.pi

local M = { image = {}, bbox = {} }

local function brightness(src, delta, rng)
  if rng:uniform(0, 1) > 0.5 then
    return nd.add_scalar(src, { scalar = rng:uniform(-delta, delta) })
  end
  return src
end

local function contrast(src, low, high, rng)
  if rng:uniform(0, 1) > 0.5 then return nd.mul_scalar(src, { scalar = rng:uniform(low, high) }) end
  return src
end

local GRAY = { 0.299, 0.587, 0.114 }
local function saturation(src, low, high, rng)
  if rng:uniform(0, 1) > 0.5 then
    local alpha = rng:uniform(low, high)
    local gray = nd.sum(nd.mul(src, nd.reshape(nd.array(GRAY), { 1, 1, 3 })),
      { axis = 3, keepdims = true })
    gray = nd.mul_scalar(gray, { scalar = 1 - alpha })
    return nd.add(nd.mul_scalar(src, { scalar = alpha }), gray)
  end
  return src
end

local TYIQ = { { 0.299, 0.587, 0.114 }, { 0.596, -0.274, -0.321 }, { 0.211, -0.523, 0.311 } }
local ITYIQ = { { 1.0, 0.956, 0.621 }, { 1.0, -0.272, -0.647 }, { 1.0, -1.107, 1.705 } }
local function matmul(a, b)
  local out = {}
  for i = 1, 3 do
    out[i] = {}
    for j = 1, 3 do
      local s = 0
      for k = 1, 3 do s = s + a[i][k] * b[k][j] end
      out[i][j] = s
    end
  end
  return out
end

-- GluonCV rotates the YIQ chroma by alpha * pi radians with alpha drawn in degrees
-- ([-hue_delta, hue_delta]); kept as it is, so the distortions are GluonCV's
local function hue(src, delta, rng)
  if rng:uniform(0, 1) > 0.5 then
    local alpha = rng:uniform(-delta, delta)
    local u, w = cos(alpha * pi), sin(alpha * pi)
    local bt = { { 1, 0, 0 }, { 0, u, -w }, { 0, w, u } }
    local m = matmul(matmul(ITYIQ, bt), TYIQ)
    local t = {}
    for i = 1, 3 do t[i] = { m[1][i], m[2][i], m[3][i] } end
    local s = src:shape()
    return nd.reshape(nd.dot(nd.reshape(src, { -1, 3 }), nd.array(t)), s)
  end
  return src
end

local COLOR_OPTS = { brightness_delta = true, contrast_low = true, contrast_high = true,
  saturation_low = true, saturation_high = true, hue_delta = true, rng = true }

-- image.random_color_distort(src (H, W, 3) in [0, 255], {brightness_delta=32,
-- contrast_low=0.5, contrast_high=1.5, saturation_low=0.5, saturation_high=1.5, hue_delta=18,
-- rng=}) -> float32 (H, W, 3): each distortion with probability 1/2
function M.image.random_color_distort(src, opts)
  local o = check_opts("experimental.image.random_color_distort", opts, COLOR_OPTS, 2)
  if not nd.is_tensor(src) or src:ndim() ~= 3 or src:shape()[3] ~= 3 then
    error("experimental.image.random_color_distort: src must be an (H, W, 3) NDArray", 2)
  end
  local rng = o.rng or R.default()
  local cl, ch = o.contrast_low or 0.5, o.contrast_high or 1.5
  local sl, sh = o.saturation_low or 0.5, o.saturation_high or 1.5
  local hd = o.hue_delta or 18
  src = nd.cast(src, { dtype = "float32" })
  src = brightness(src, o.brightness_delta or 32, rng)
  if rng:randint(0, 1) == 1 then
    src = contrast(src, cl, ch, rng)
    src = saturation(src, sl, sh, rng)
    src = hue(src, hd, rng)
  else
    src = saturation(src, sl, sh, rng)
    src = hue(src, hd, rng)
    src = contrast(src, cl, ch, rng)
  end
  return src
end

local DEFAULT_CONSTRAINTS = { { 0.1, false }, { 0.3, false }, { 0.5, false }, { 0.7, false },
  { 0.9, false }, { false, 1 } }
local CROP_OPTS = { min_scale = true, max_scale = true, max_aspect_ratio = true,
  constraints = true, max_trial = true, rng = true }

-- bbox.random_crop_with_constraints(bbox, size={w, h}, {min_scale=0.3, max_scale=1,
-- max_aspect_ratio=2, constraints={{0.1, false}, ..., {false, 1}}, max_trial=50, rng=})
-- -> boxes, crop {x, y, w, h}: per constraint {min_iou, max_iou} (false: unbounded) up to
-- max_trial crops are drawn and the first whose IoU with every box lies in the range is a
-- candidate; one random candidate (the whole image among them) that keeps a box centre
-- is taken, the boxes cropped to it (bbox.crop without outside centres)
function M.bbox.random_crop_with_constraints(bbox, size, opts)
  local who = "experimental.bbox.random_crop_with_constraints"
  local o = check_opts(who, opts, CROP_OPTS, 2)
  local rows, like = B._rows_of(who, bbox, 2)
  if type(size) ~= "table" or type(size[1]) ~= "number" or type(size[2]) ~= "number" then
    error(who .. ": size must be {width, height}", 2)
  end
  local rng = o.rng or R.default()
  local min_scale, max_scale = o.min_scale or 0.3, o.max_scale or 1
  local mar = o.max_aspect_ratio or 2
  local w, h = size[1], size[2]
  local candidates = { { 0, 0, w, h } }
  for _, c in ipairs(o.constraints or DEFAULT_CONSTRAINTS) do
    local min_iou = c[1] or -math.huge
    local max_iou = c[2] or math.huge
    for _ = 1, o.max_trial or 50 do
      local scale = rng:uniform(min_scale, max_scale)
      local ar = rng:uniform(math.max(1 / mar, scale * scale), math.min(mar, 1 / (scale * scale)))
      local crop_h = floor(h * scale / sqrt(ar))
      local crop_w = floor(w * scale * sqrt(ar))
      -- Python's randrange(n) (n = 0 raises there: a full-size crop, offset 0 here)
      local crop_t = h - crop_h > 0 and rng:randint(0, h - crop_h - 1) or 0
      local crop_l = w - crop_w > 0 and rng:randint(0, w - crop_w - 1) or 0
      local crop = { crop_l, crop_t, crop_l + crop_w, crop_t + crop_h }
      if #rows == 0 then
        return B.crop(bbox, nil), { crop_l, crop_t, crop_w, crop_h }
      end
      local lo, hi = math.huge, -math.huge
      for _, r in ipairs(B.bbox_iou(rows, { crop })) do
        lo, hi = math.min(lo, r[1]), math.max(hi, r[1])
      end
      if min_iou <= lo and hi <= max_iou then
        candidates[#candidates + 1] = { crop_l, crop_t, crop_w, crop_h }
        break
      end
    end
  end
  while #candidates > 0 do
    local crop = table.remove(candidates, rng:randint(0, #candidates - 1) + 1)
    local new = B.crop(rows, crop, false)
    if #new > 0 then
      if like then new = B.crop(like, crop, false) end
      return new, crop
    end
  end
  return B.crop(bbox, nil), { 0, 0, w, h }
end

return M
