-- mx.nd.image — MXNet 1.9's mx.nd.image functions, on an image (H, W, C) or a batch
-- (N, H, W, C) as MXNet's (to_tensor and normalize: CHW / NCHW), with MXNet's calling
-- convention (positionally in MXNet's order or by name):
--
--   to_tensor(data)                          uint8 HWC -> float32 CHW / 255
--   normalize(data, mean=0, std=1)           (x - mean) / std per channel of CHW / NCHW
--   resize(data, size, keep_ratio=false, interp=1)
--   crop(data, x, y, width, height)          the box at 0-based pixel offsets x, y
--   flip_left_right(data), flip_top_bottom(data)
--   random_flip_left_right(data), random_flip_top_bottom(data)   (probability 1/2)
--   random_brightness / random_contrast / random_saturation / random_hue(data,
--     min_factor, max_factor)               alpha drawn uniformly in [min, max]
--   random_color_jitter(data, brightness=0, contrast=0, saturation=0, hue=0)
--   adjust_lighting(data, alpha)             alpha: the three PCA components
--   random_lighting(data, alpha_std=0.05)
--
-- They run the vision transforms' ops (docs/image.md); random draws come from mx.random.
local class = require("mx.core.class")

local type, error, tostring = type, error, tostring

return function(nd)
  local M = {}
  local T
  local function tr() T = T or require("mx.gluon.data.vision.transforms") return T end
  local function uniform(lo, hi) return tr()._uniform(lo, hi) end

  local function def(name, params, fn)
    local sig = class.signature("image." .. name, params)
    M[name] = function(...)
      local o = sig(2, ...)
      if not nd.is_tensor(o.data) then
        error("image." .. name .. ": data must be a tensor, got " .. type(o.data), 2)
      end
      local ok, r = pcall(fn, o)
      if not ok then error((tostring(r):gsub("^[^\n]-:%d+: ", "")), 2) end
      return r
    end
    class.declare(M[name], sig)
  end
  local function image_rank(who, x)
    local n = #x:shape()
    if n ~= 3 and n ~= 4 then
      error(who .. ": expected an image (H, W, C) or a batch (N, H, W, C), got rank " .. n, 0)
    end
    return n
  end

  def("to_tensor", { "data" }, function(o) return nd.to_tensor(o.data) end)
  def("normalize", { "data", "mean", "std" }, function(o)
    return tr().Normalize(o.mean or 0, o.std or 1)(o.data)
  end)
  def("resize", { "data", "size", "keep_ratio", "interp" }, function(o)
    return tr().Resize(o.size, o.keep_ratio or false, o.interp or 1)(o.data)
  end)
  def("crop", { "data", "x", "y", "width", "height" }, function(o)
    return tr().CropResize(o.x, o.y, o.width, o.height)(o.data)
  end)
  def("flip_left_right", { "data" }, function(o)
    image_rank("image.flip_left_right", o.data)
    return nd.flip(o.data, { axis = -2 })
  end)
  def("flip_top_bottom", { "data" }, function(o)
    image_rank("image.flip_top_bottom", o.data)
    return nd.flip(o.data, { axis = -3 })
  end)
  def("random_flip_left_right", { "data" }, function(o)
    image_rank("image.random_flip_left_right", o.data)
    if uniform(0, 1) < 0.5 then return nd.flip(o.data, { axis = -2 }) end
    return o.data:copy()
  end)
  def("random_flip_top_bottom", { "data" }, function(o)
    image_rank("image.random_flip_top_bottom", o.data)
    if uniform(0, 1) < 0.5 then return nd.flip(o.data, { axis = -3 }) end
    return o.data:copy()
  end)
  for _, kind in ipairs { "brightness", "contrast", "saturation", "hue" } do
    def("random_" .. kind, { "data", "min_factor", "max_factor" }, function(o)
      local lo, hi = o.min_factor, o.max_factor
      if type(lo) ~= "number" or type(hi) ~= "number" or lo > hi then
        error(string.format("image.random_%s: min_factor and max_factor must be numbers with "
          .. "min_factor <= max_factor, got %s and %s", kind, tostring(lo), tostring(hi)), 0)
      end
      return nd["adjust_" .. kind](o.data, { alpha = uniform(lo, hi) })
    end)
  end
  def("random_color_jitter", { "data", "brightness", "contrast", "saturation", "hue" }, function(o)
    return tr().RandomColorJitter(o.brightness or 0, o.contrast or 0, o.saturation or 0,
      o.hue or 0)(o.data)
  end)
  def("adjust_lighting", { "data", { "alpha", list = true } }, function(o)
    local a = o.alpha
    if type(a) ~= "table" or #a ~= 3 then
      error("image.adjust_lighting: alpha must be a list of 3 numbers, got " .. tostring(a), 0)
    end
    return nd.adjust_lighting(o.data, { alpha_r = a[1], alpha_g = a[2], alpha_b = a[3] })
  end)
  def("random_lighting", { "data", "alpha_std" }, function(o)
    return tr().RandomLighting(o.alpha_std or 0.05)(o.data)
  end)
  return M
end
