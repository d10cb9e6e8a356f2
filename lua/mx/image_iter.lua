-- mx.image_iter — MXNet 1.9's mx.image augmenters and ImageIter (python/mxnet/image/
-- image.py), reached as mx.image.ImageIter, mx.image.CreateAugmenter, mx.image.ResizeAug...
--
--   local augs = mx.image.CreateAugmenter({3, 224, 224}, {resize = 256, rand_crop = true,
--     rand_mirror = true, mean = true, std = true})
--   local it = mx.image.ImageIter(32, {3, 224, 224}, {path_imgrec = "train.rec",
--     aug_list = augs, shuffle = true})
--   for batch in it:iter() do ... batch.data[1] (32, 3, 224, 224) ... end
--
-- An augmenter is called on one HWC image (an NDArray) and returns the augmented image;
-- aug:dumps() is MXNet's JSON ["resizeaug", {"size": 256, "interp": 2}]. The random ones
-- draw with math.random (as mx.image.random_crop; MXNet: Python's random). Constructors
-- take MXNet's positional parameters in its order or by name (mx.core.class signature).
local nd = require("mx.nd")
local image = require("mx.image")
local class = require("mx.core.class")

local type, error, tostring, ipairs, pairs, setmetatable, getmetatable, rawget =
  type, error, tostring, ipairs, pairs, setmetatable, getmetatable, rawget
local floor, sqrt, exp, log, random = math.floor, math.sqrt, math.exp, math.log, math.random

local M = {}

local function uniform(a, b) return a + (b - a) * random() end

---------------------------------------------------------------- Augmenter
-- Augmenter: the base class; aug(src) runs aug:call(src). Augmenter:extend(name, params,
-- init, call): a subclass taking params (MXNet's order) whose values dumps() lists.
local Augmenter = class.base("Augmenter")
M.Augmenter = Augmenter
Augmenter.__call = function(self, src)
  if not nd.is_tensor(src) then
    error(getmetatable(self).__name .. ": src must be an NDArray (an HWC image), got " .. type(src), 2)
  end
  local r = self:call(src)
  return r
end
function Augmenter.call(self)
  error(getmetatable(self).__name .. ": call is not implemented", 2)
end
function Augmenter:dumps()
  local cjson = require("cjson")
  local parts = {}
  for _, k in ipairs(rawget(self, "_dump_keys") or {}) do
    local v = self[k]
    if nd.is_tensor(v) then v = v:tolist() end
    parts[#parts + 1] = cjson.encode(k) .. ": " .. (v == nil and "null" or cjson.encode(v))
  end
  return "[" .. cjson.encode(getmetatable(self).__name:lower()) .. ", {"
    .. table.concat(parts, ", ") .. "}]"
end
Augmenter.__tostring = function(self) return self:dumps() end

local function aug_class(name, params, init, call)
  local cls = class.extend(Augmenter, name)
  local sig = class.declare(cls, class.signature(name, params))
  local keys = {}
  for i, p in ipairs(params) do
    keys[i] = type(p) == "table" and (p.dump or p[1]) or p
  end
  cls.call = call
  M[name] = setmetatable(cls, { __index = Augmenter, __call = function(c, ...)
    local o = sig(2, ...)
    local self = setmetatable({ _dump_keys = keys }, c)
    init(self, o, 3)
    return self
  end })
  return cls
end

local function check_num(who, k, v, lo, level)
  if type(v) ~= "number" or v ~= v or v < lo then
    error(string.format("%s: %s must be a number >= %g, got %s", who, k, lo, tostring(v)), level + 1)
  end
  return v
end
local function check_size(who, v, level)
  local ok = type(v) == "table" and #v == 2
  for i = 1, 2 do ok = ok and type(v[i]) == "number" and v[i] >= 1 and v[i] % 1 == 0 end
  if not ok then
    error(who .. ": size must be {width, height} (positive integers), got " .. tostring(v), level + 1)
  end
  return { v[1], v[2] }
end
local function check_p(who, p, level)
  if type(p) ~= "number" or p < 0 or p > 1 then
    error(who .. ": p must be a probability in [0, 1], got " .. tostring(p), level + 1)
  end
  return p
end

---------------------------------------------------------------- geometry
aug_class("ResizeAug", { "size", "interp" }, function(self, o, level)
  local s = o.size
  if type(s) ~= "number" or s < 1 or s % 1 ~= 0 then
    error("ResizeAug: size must be a positive integer (the shorter side), got " .. tostring(s), level)
  end
  self.size, self.interp = s, o.interp or 2
end, function(self, src) return image.resize_short(src, self.size, self.interp) end)

aug_class("ForceResizeAug", { { "size", list = true }, "interp" }, function(self, o, level)
  self.size, self.interp = check_size("ForceResizeAug", o.size, level), o.interp or 2
end, function(self, src)
  local s = src:shape()
  local interp = image._get_interp_method(self.interp, { s[1], s[2], self.size[2], self.size[1] })
  return image.imresize(src, self.size[1], self.size[2], { interp = interp })
end)

aug_class("RandomCropAug", { { "size", list = true }, "interp" }, function(self, o, level)
  self.size, self.interp = check_size("RandomCropAug", o.size, level), o.interp or 2
end, function(self, src) return (image.random_crop(src, self.size, self.interp)) end)

aug_class("CenterCropAug", { { "size", list = true }, "interp" }, function(self, o, level)
  self.size, self.interp = check_size("CenterCropAug", o.size, level), o.interp or 2
end, function(self, src) return (image.center_crop(src, self.size, self.interp)) end)

-- random_size_crop(src, size, area, ratio, interp=2) -> out, {x0, y0, w, h}: a box of
-- area fraction in area = {min, max} (a number: {n, 1}) and aspect ratio in ratio (log-
-- uniform), resized to size; after 10 misses the center crop.
local RSC = class.signature("random_size_crop", { "src", { "size", list = true }, "area",
  { "ratio", list = true }, "interp" })
function M.random_size_crop(...)
  local o = RSC(2, ...)
  local src, size, area, ratio, interp = o.src, o.size, o.area, o.ratio, o.interp
  if not nd.is_tensor(src) then
    error("random_size_crop: src must be an NDArray (an HWC image), got " .. type(src), 2)
  end
  size = check_size("random_size_crop", size, 2)
  if type(ratio) ~= "table" or type(ratio[1]) ~= "number" or type(ratio[2]) ~= "number" then
    error("random_size_crop: ratio must be {min, max}, got " .. tostring(ratio), 2)
  end
  local s = src:shape()
  local h, w = s[1], s[2]
  if type(area) == "number" then area = { area, 1.0 } end
  for _ = 1, 10 do
    local target = uniform(area[1], area[2]) * h * w
    local r = exp(uniform(log(ratio[1]), log(ratio[2])))
    local nw, nh = floor(sqrt(target * r) + 0.5), floor(sqrt(target / r) + 0.5)
    if nw >= 1 and nh >= 1 and nw <= w and nh <= h then
      local x0, y0 = random(0, w - nw), random(0, h - nh)
      return image.fixed_crop(src, x0, y0, nw, nh, size, interp), { x0, y0, nw, nh }
    end
  end
  return image.center_crop(src, size, interp)
end
class.declare(M.random_size_crop, RSC)
aug_class("RandomSizedCropAug", { { "size", list = true }, "area", { "ratio", list = true }, "interp" },
  function(self, o, level)
    self.size = check_size("RandomSizedCropAug", o.size, level)
    local a = o.area
    if type(a) == "number" then a = { a, 1.0 } end
    if type(a) ~= "table" or type(a[1]) ~= "number" or type(a[2]) ~= "number" or a[1] <= 0
        or a[1] > a[2] or a[2] > 1 then
      error("RandomSizedCropAug: area must be a fraction in (0, 1] or {min, max} of them, got "
        .. tostring(o.area), level)
    end
    local r = o.ratio
    if type(r) ~= "table" or type(r[1]) ~= "number" or type(r[2]) ~= "number" or r[1] <= 0
        or r[1] > r[2] then
      error("RandomSizedCropAug: ratio must be {min, max} aspect ratios > 0, got " .. tostring(r), level)
    end
    self.area, self.ratio, self.interp = o.area, { r[1], r[2] }, o.interp or 2
  end, function(self, src)
    return (M.random_size_crop(src, self.size, self.area, self.ratio, self.interp))
  end)

aug_class("HorizontalFlipAug", { "p" }, function(self, o, level)
  self.p = check_p("HorizontalFlipAug", o.p, level)
end, function(self, src)
  if random() < self.p then return nd.flip(src, { axis = 2 }) end
  return src
end)

aug_class("CastAug", { { "typ", dump = "type" } }, function(self, o)
  self.type = o.typ or "float32"
end, function(self, src) return src:astype(self.type) end)

---------------------------------------------------------------- colour
aug_class("BrightnessJitterAug", { "brightness" }, function(self, o, level)
  self.brightness = check_num("BrightnessJitterAug", "brightness", o.brightness, 0, level)
end, function(self, src)
  return src * (1.0 + uniform(-self.brightness, self.brightness))
end)

local COEF = { { { 0.299, 0.587, 0.114 } } }
aug_class("ContrastJitterAug", { "contrast" }, function(self, o, level)
  self.contrast = check_num("ContrastJitterAug", "contrast", o.contrast, 0, level)
end, function(self, src)
  local alpha = 1.0 + uniform(-self.contrast, self.contrast)
  local gray = src * nd.array(COEF, { dtype = src:dtype() })
  local g = 3.0 * (1.0 - alpha) / gray:size() * nd.sum(gray):item()
  return src * alpha + g
end)

aug_class("SaturationJitterAug", { "saturation" }, function(self, o, level)
  self.saturation = check_num("SaturationJitterAug", "saturation", o.saturation, 0, level)
end, function(self, src)
  local alpha = 1.0 + uniform(-self.saturation, self.saturation)
  local gray = nd.sum(src * nd.array(COEF, { dtype = src:dtype() }), { axis = 3, keepdims = true })
  return src * alpha + gray * (1.0 - alpha)
end)

-- the 3x3 product a * b
local function mm(a, b)
  local r = {}
  for i = 1, 3 do
    r[i] = {}
    for j = 1, 3 do
      local s = 0
      for k = 1, 3 do s = s + a[i][k] * b[k][j] end
      r[i][j] = s
    end
  end
  return r
end
local TYIQ = { { 0.299, 0.587, 0.114 }, { 0.596, -0.274, -0.321 }, { 0.211, -0.523, 0.311 } }
local ITYIQ = { { 1.0, 0.956, 0.621 }, { 1.0, -0.272, -0.647 }, { 1.0, -1.107, 1.705 } }
aug_class("HueJitterAug", { "hue" }, function(self, o, level)
  self.hue = check_num("HueJitterAug", "hue", o.hue, 0, level)
end, function(self, src)
  local alpha = uniform(-self.hue, self.hue)
  local u, w = math.cos(alpha * math.pi), math.sin(alpha * math.pi)
  local t = mm(mm(ITYIQ, { { 1, 0, 0 }, { 0, u, -w }, { 0, w, u } }), TYIQ)
  local tt = {}
  for i = 1, 3 do tt[i] = { t[1][i], t[2][i], t[3][i] } end
  return nd.dot(src, nd.array(tt, { dtype = src:dtype() }))
end)

aug_class("LightingAug", { "alphastd", { "eigval", list = true }, { "eigvec", list = true } },
  function(self, o, level)
    self.alphastd = check_num("LightingAug", "alphastd", o.alphastd, 0, level)
    local ev, evec = o.eigval, o.eigvec
    if nd.is_tensor(ev) then ev = ev:tolist() end
    if nd.is_tensor(evec) then evec = evec:tolist() end
    if type(ev) ~= "table" or #ev ~= 3 or type(evec) ~= "table" or #evec ~= 3 then
      error("LightingAug: eigval must be 3 numbers and eigvec 3x3", level)
    end
    self.eigval, self.eigvec = ev, evec
  end, function(self, src)
    local a = nd.random.normal(0, self.alphastd, { 3 }):tolist()
    -- rgb = (eigvec * alpha) . eigval
    local rgb = {}
    for i = 1, 3 do
      local s = 0
      for j = 1, 3 do s = s + self.eigvec[i][j] * a[j] * self.eigval[j] end
      rgb[i] = s
    end
    return src + nd.array(rgb, { dtype = src:dtype() })
  end)

aug_class("ColorNormalizeAug", { { "mean", list = true }, { "std", list = true } }, function(self, o)
  self.mean, self.std = o.mean, o.std
end, function(self, src) return image.color_normalize(src, self.mean, self.std) end)

local GRAY = { { 0.21, 0.21, 0.21 }, { 0.72, 0.72, 0.72 }, { 0.07, 0.07, 0.07 } }
aug_class("RandomGrayAug", { "p" }, function(self, o, level)
  self.p = check_p("RandomGrayAug", o.p, level)
end, function(self, src)
  if random() < self.p then return nd.dot(src, nd.array(GRAY, { dtype = src:dtype() })) end
  return src
end)

---------------------------------------------------------------- composition
local function check_augs(who, ts, level)
  if type(ts) ~= "table" then error(who .. ": ts must be a list of augmenters", level + 1) end
  for i, t in ipairs(ts) do
    local mt = getmetatable(t)
    if not (mt and mt.call and mt.__call) then
      error(string.format("%s: ts[%d] is not an augmenter", who, i), level + 1)
    end
  end
  return ts
end
local function dumps_list(self)
  local cjson = require("cjson")
  local parts = {}
  for i, t in ipairs(self.ts) do parts[i] = cjson.encode(t:dumps()) end
  return "[" .. cjson.encode(getmetatable(self).__name:lower()) .. ", [" .. table.concat(parts, ", ") .. "]]"
end
local Seq = aug_class("SequentialAug", { { "ts", list = true } }, function(self, o, level)
  self.ts = check_augs("SequentialAug", o.ts, level)
end, function(self, src)
  for _, t in ipairs(self.ts) do src = t(src) end
  return src
end)
Seq.dumps = dumps_list
local Order = aug_class("RandomOrderAug", { { "ts", list = true } }, function(self, o, level)
  self.ts = check_augs("RandomOrderAug", o.ts, level)
end, function(self, src)
  local ts = self.ts
  for i = #ts, 2, -1 do
    local j = random(1, i)
    ts[i], ts[j] = ts[j], ts[i]
  end
  for _, t in ipairs(ts) do src = t(src) end
  return src
end)
Order.dumps = dumps_list
-- ColorJitterAug(brightness, contrast, saturation): the jitters whose amount is > 0, in a
-- random order per call (MXNet's RandomOrderAug)
local Jitter = aug_class("ColorJitterAug", { "brightness", "contrast", "saturation" },
  function(self, o, level)
    local ts = {}
    for _, k in ipairs { "brightness", "contrast", "saturation" } do
      check_num("ColorJitterAug", k, o[k] or 0, 0, level)
    end
    if (o.brightness or 0) > 0 then ts[#ts + 1] = M.BrightnessJitterAug(o.brightness) end
    if (o.contrast or 0) > 0 then ts[#ts + 1] = M.ContrastJitterAug(o.contrast) end
    if (o.saturation or 0) > 0 then ts[#ts + 1] = M.SaturationJitterAug(o.saturation) end
    self.ts = ts
  end, Order.call)
Jitter.dumps = dumps_list

---------------------------------------------------------------- CreateAugmenter
-- CreateAugmenter(data_shape, resize=0, rand_crop=false, rand_resize=false,
-- rand_mirror=false, mean=nil, std=nil, brightness=0, contrast=0, saturation=0, hue=0,
-- pca_noise=0, rand_gray=0, inter_method=2): MXNet's standard list (mean/std true: the
-- ImageNet values).
local CREATE = class.signature("CreateAugmenter", { { "data_shape", list = true }, "resize",
  "rand_crop", "rand_resize", "rand_mirror", { "mean", list = true }, { "std", list = true },
  "brightness", "contrast", "saturation", "hue", "pca_noise", "rand_gray", "inter_method" })
function M.CreateAugmenter(...)
  local o = CREATE(2, ...)
  local ds = o.data_shape
  if type(ds) ~= "table" or #ds ~= 3 then
    error("CreateAugmenter: data_shape must be {channels, height, width}, got " .. tostring(ds), 2)
  end
  local interp = o.inter_method or 2
  local list = {}
  if (o.resize or 0) > 0 then list[#list + 1] = M.ResizeAug(o.resize, interp) end
  local crop = { ds[3], ds[2] }
  if o.rand_resize then
    if not o.rand_crop then error("CreateAugmenter: rand_resize needs rand_crop", 2) end
    list[#list + 1] = M.RandomSizedCropAug(crop, 0.08, { 3 / 4, 4 / 3 }, interp)
  elseif o.rand_crop then
    list[#list + 1] = M.RandomCropAug(crop, interp)
  else
    list[#list + 1] = M.CenterCropAug(crop, interp)
  end
  if o.rand_mirror then list[#list + 1] = M.HorizontalFlipAug(0.5) end
  list[#list + 1] = M.CastAug()
  local b, c, s = o.brightness or 0, o.contrast or 0, o.saturation or 0
  if b ~= 0 or c ~= 0 or s ~= 0 then list[#list + 1] = M.ColorJitterAug(b, c, s) end
  if (o.hue or 0) ~= 0 then list[#list + 1] = M.HueJitterAug(o.hue) end
  if (o.pca_noise or 0) > 0 then
    list[#list + 1] = M.LightingAug(o.pca_noise, { 55.46, 4.794, 1.148 },
      { { -0.5675, 0.7192, 0.4009 }, { -0.5808, -0.0045, -0.8140 }, { -0.5836, -0.6948, 0.4203 } })
  end
  if (o.rand_gray or 0) > 0 then list[#list + 1] = M.RandomGrayAug(o.rand_gray) end
  local mean, std = o.mean, o.std
  if mean == true then mean = nd.array { 123.68, 116.28, 103.53 } end
  if std == true then std = nd.array { 58.395, 57.12, 57.375 } end
  for k, v in pairs { mean = mean, std = std } do
    local n = nd.is_tensor(v) and v:size() or (type(v) == "table" and #v) or nil
    if v ~= nil and v ~= false and n ~= 1 and n ~= 3 then
      error("CreateAugmenter: " .. k .. " must be true, or 1 or 3 values", 2)
    end
  end
  if mean == false then mean = nil end
  if std == false then std = nil end
  if mean ~= nil or std ~= nil then list[#list + 1] = M.ColorNormalizeAug(mean, std) end
  return list
end
class.declare(M.CreateAugmenter, CREATE)

M.ImageIter = require("mx.io.image_iter")

return M
