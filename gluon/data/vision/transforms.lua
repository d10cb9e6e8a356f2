-- mx.gluon.data.vision.transforms — image transforms (MXNet's gluon.data.vision.
-- transforms): ToTensor, Normalize, Cast, Compose, and (further down) Resize,
-- CenterCrop, the Random* transforms and RandomApply. Every transform has `_recipe()`
-- (its constructor and arguments) so a DataLoader worker thread rebuilds it.
--
-- A transform is a callable object: `t(x)`. The deterministic ones accept a single
-- image and, for speed, a whole batch (an extra leading axis):
--   ToTensor   (H,W,C) uint8 -> (C,H,W) float32 / 255;  (N,H,W,C) -> (N,C,H,W)
--   Normalize  (C,H,W) or (N,C,H,W) float: (x - mean) / std per channel
--   Cast       any shape: a copy in another dtype
-- so `transforms.ToTensor()(x_all)` converts a whole (60000,28,28,1) dataset tensor
-- in one call, and `ds:transform_first(ToTensor())` runs once per *batch* inside a
-- DataLoader (the transforms are `batchable`: per-sample and per-batch application
-- give the same values). `t:batch(x)` applies t to x with axis 1 as the batch axis.
local nd = require("mx.nd")
local random = require("mx.random")
local image_mod = require("mx.image")
local check_opts = require("mx.core.class").check_opts

local is_tensor = nd.is_tensor
local type, error, tostring = type, error, tostring

local M = {}

-- dtype conversion through the cast op (a vectorised kernel, queued on the engine)
-- when the op table has it, else through a copy
local function cast(x, dtype)
  if x:dtype() == dtype then return x end
  if nd.cast then return nd.cast(x, { dtype = dtype }) end
  return x:to(nil, dtype)
end

local Transform = {}
Transform.__index = Transform
Transform.__call = function(self, x, ...)
  if not is_tensor(x) then
    error(self._name .. ": expected a tensor, got " .. type(x), 2)
  end
  local r = self:_forward(x, nil, 2)
  return r, ...
end
Transform.__tostring = function(self) return self._name .. "()" end
M.Transform = Transform

-- Apply to a batch: axis 1 indexes samples.
function Transform.batch(self, x)
  if not is_tensor(x) then error(self._name .. ": expected a tensor, got " .. type(x), 2) end
  local r = self:_forward(x, true, 2)
  return r
end

-- args: the constructor's arguments ({n=, ...}), kept for _recipe
local function make(name, forward, fields, args)
  local t = setmetatable(fields or {}, Transform)
  t._name, t._forward, t.batchable = name, forward, true
  t._args = args or { n = 0 }
  return t
end
M._make = make

-- How a DataLoader worker state rebuilds the transform (docs/design/data.md "Worker
-- threads"): this module's constructor called with the same arguments.
function Transform._recipe(self)
  return { module = "mx.gluon.data.vision.transforms", ctor = self._name, args = self._args }
end

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

-- ToTensor(): HWC uint8 image(s) in [0, 255] -> CHW float32 in [0, 1].
function M.ToTensor()
  return make("ToTensor", function(_, x, batched, level)
    local s = x:shape()
    local nd_ = #s
    if (batched and nd_ ~= 4) or (not batched and nd_ ~= 3 and nd_ ~= 4) then
      error("ToTensor: expected an image (H, W, C) or a batch (N, H, W, C), got shape "
        .. shape_str(s), level + 1)
    end
    local c = s[nd_]
    local dt = x:dtype()
    if (dt == "uint8" or dt == "float32") and x:context().device_type == "cpu" then
      -- the to_tensor op: one vectorised pass (8 us for a 64-image batch of 28x28,
      -- against 23 us for the JIT-compiled table-lookup loop it replaced)
      local y = nd.to_tensor(x)
      return y
    end
    local y
    if c == 1 then -- a channel axis of 1 moves without copying
      if nd_ == 3 then y = x:reshape { 1, s[1], s[2] } else y = x:reshape { s[1], 1, s[2], s[3] } end
    else
      if not nd.transpose then
        error("ToTensor: images with " .. c .. " channels need the transpose op", level + 1)
      end
      y = nd.transpose(x, { axes = nd_ == 3 and { 3, 1, 2 } or { 1, 4, 2, 3 } })
    end
    if x:dtype() == "float32" then -- no cast: write a new tensor, never into x
      y = nd.div_scalar(y, { scalar = 255 })
      return y
    end
    y = cast(y, "float32")
    return nd.div_scalar(y, { scalar = 255, out = y })
  end)
end

-- Normalize(mean, std): (x - mean) / std per channel; mean and std are numbers (all
-- channels) or lists with one entry per channel. Input (C, H, W) or (N, C, H, W).
function M.Normalize(mean, std)
  mean, std = mean or 0, std or 1
  local function check(v, what)
    if type(v) == "number" then return end
    if type(v) ~= "table" or #v == 0 then
      error("Normalize: " .. what .. " must be a number or a list of numbers", 3)
    end
    for i = 1, #v do
      if type(v[i]) ~= "number" then error("Normalize: " .. what .. "[" .. i .. "] is not a number", 3) end
    end
  end
  check(mean, "mean")
  check(std, "std")
  local cache = {}
  local function per_channel(v, c, x, what, level)
    if type(v) == "number" then return nil end
    if #v ~= c and #v ~= 1 then
      error(string.format("Normalize: %s has %d values but the input has %d channels", what, #v, c),
        level + 1)
    end
    local key = what .. x:dtype() .. tostring(x:context()) .. c
    local t = cache[key]
    if not t then
      local vals = {}
      for i = 1, c do vals[i] = { { #v == 1 and v[1] or v[i] } } end
      t = nd.array(vals, { dtype = x:dtype(), ctx = tostring(x:context()) })
      cache[key] = t
    end
    return t
  end
  return make("Normalize", function(_, x, batched, level)
    local s = x:shape()
    if (batched and #s ~= 4) or (not batched and #s ~= 3 and #s ~= 4) then
      error("Normalize: expected (C, H, W) or a batch (N, C, H, W), got shape " .. shape_str(s),
        level + 1)
    end
    if not x:dtype():find("float") then
      error("Normalize: expected a float tensor (apply ToTensor first), got " .. x:dtype(), level + 1)
    end
    local c = s[#s - 2]
    local m = per_channel(mean, c, x, "mean", level + 1)
    local d = per_channel(std, c, x, "std", level + 1)
    local y = m and nd.sub(x, m) or nd.sub_scalar(x, { scalar = mean })
    if d then return nd.div(y, d, { out = y }) end
    return nd.div_scalar(y, { scalar = std, out = y })
  end, { mean = mean, std = std }, { n = 2, mean, std })
end

-- Cast(dtype): a copy in dtype (default "float32").
function M.Cast(dtype)
  dtype = dtype or "float32"
  if not nd.dtype_code(dtype) then error("Cast: unknown dtype " .. tostring(dtype), 2) end
  return make("Cast", function(_, x)
    if x:dtype() == dtype then return x:to(nil, dtype) end -- always a copy
    return cast(x, dtype)
  end, { dtype = dtype }, { n = 1, dtype })
end

-- Compose{t1, t2, ...}: apply in order. Batchable when every part is.
function M.Compose(list)
  if type(list) ~= "table" then error("Compose: expected a list of transforms", 2) end
  local all = true
  for i = 1, #list do
    local t = list[i]
    local callable = type(t) == "function" or (type(t) == "table" and getmetatable(t)
      and getmetatable(t).__call)
    if not callable then error("Compose: item " .. i .. " is not callable", 2) end
    if type(t) ~= "table" or t.batchable ~= true then all = false end
  end
  local c = make("Compose", function(_, x, batched, level)
    for i = 1, #list do
      local t = list[i]
      if batched then x = t:batch(x) else x = t(x) end
      if x == nil then error("Compose: transform " .. i .. " returned nothing", level + 1) end
    end
    return x
  end, { transforms = list }, { n = 1, list })
  c.batchable = all
  return c
end

---------------------------------------------------------------- image transforms
-- MXNet 1.9's gluon.data.vision.transforms on HWC images (uint8 as decoded, or float32),
-- with MXNet's defaults. The pixel work is the image ops (docs/image.md: imresize,
-- adjust_*, to_gray, imrotate, copy_make_border) and nd.slice / nd.flip.
--   Resize, CenterCrop, CropResize, Rotate: deterministic and batchable (an (N, H, W, C)
--   batch in one op).
--   The Random* ones draw from mx.random (mx.random.seed makes them repeat; a DataLoader
--   worker has its own seed) once per call: per sample when called on an image, one draw
--   for the whole batch with t:batch(x) (as MXNet's ops on a 4-D input). They are not
--   `batchable`, so a DataLoader applies them sample by sample.
local floor, sqrt, exp, log, abs, cos, sin, max, min = math.floor, math.sqrt, math.exp,
  math.log, math.abs, math.cos, math.sin, math.max, math.min
local format = string.format

local function uniform(lo, hi)
  if lo == hi then return lo end
  return random.uniform(lo, hi):item()
end
local function randint(lo, hi) -- inclusive, as Python's random.randint
  if hi <= lo then return lo end
  return min(hi, lo + floor(random.uniform(0, 1):item() * (hi - lo + 1)))
end
M._uniform = uniform

local function number_arg(who, name, v, lo, level)
  if type(v) ~= "number" or v ~= v or v < lo then
    error(format("%s: %s must be a number >= %s, got %s", who, name, tostring(lo), tostring(v)),
      level + 1)
  end
  return v
end

local function pos_int(v) return type(v) == "number" and v >= 1 and v % 1 == 0 end

-- size: a number (a square) or {w, h} -> w, h
local function size_wh(who, size, level)
  if pos_int(size) then return size, size end
  if type(size) == "table" and #size == 2 and pos_int(size[1]) and pos_int(size[2]) then
    return size[1], size[2]
  end
  error(format("%s: size must be a positive integer or a {width, height} pair, got %s", who,
    tostring(size)), level + 1)
end

local INTERP = { [0] = true, [1] = true, [2] = true, [3] = true, [9] = true, [10] = true }
local function interp_arg(who, v, default, level)
  if v == nil then return default end
  if not INTERP[v] then
    error(format("%s: interpolation must be 0 (nearest), 1 (bilinear), 2 (bicubic), 3 (area), 9 "
      .. "(auto) or 10 (random), got %s", who, tostring(v)), level + 1)
  end
  return v
end

-- the image's shape and the offset of its H axis: 0 for (H, W, C), 1 for (N, H, W, C)
local function img_dims(who, x, batched, level)
  local s = x:shape()
  if batched then
    if #s ~= 4 then
      error(who .. ": expected a batch (N, H, W, C), got shape " .. shape_str(s), level + 1)
    end
    return s, 1
  end
  if #s ~= 3 then
    error(who .. ": expected an image (H, W, C) (t:batch(x) for a batch), got shape "
      .. shape_str(s), level + 1)
  end
  return s, 0
end

local function rgb_dims(who, x, batched, level)
  local s, o = img_dims(who, x, batched, level + 1)
  if s[o + 3] ~= 3 then
    error(format("%s: expected 3 channels (R, G, B), got %d (shape %s)", who, s[o + 3],
      shape_str(s)), level + 1)
  end
  return s, o
end

local function resize(x, s, o, w, h, interp)
  local H, W = s[o + 1], s[o + 2]
  if w == W and h == H then return x end
  if interp == 9 or interp == 10 then
    interp = image_mod._get_interp_method(interp, { H, W, h, w })
  end
  return nd.imresize(x, { w = w, h = h, interp = interp })
end

-- the box at 0-based offsets x0, y0 of size w x h
local function crop(x, s, o, x0, y0, w, h)
  if x0 == 0 and y0 == 0 and w == s[o + 2] and h == s[o + 1] then return x end
  if o == 0 then
    return nd.slice(x, { begin = { y0 + 1, x0 + 1, 1 }, ["end"] = { y0 + h, x0 + w, s[3] } })
  end
  return nd.slice(x, { begin = { 1, y0 + 1, x0 + 1, 1 }, ["end"] = { s[1], y0 + h, x0 + w, s[4] } })
end

local function scale_down(sw, sh, w, h) -- mx.image.scale_down
  if sh < h then w, h = w * sh / h, sh end
  if sw < w then w, h = sw, h * sw / w end
  return floor(w), floor(h)
end

-- random transforms: made like the others, but not batchable
local function make_random(name, forward, fields, args)
  local t = make(name, forward, fields, args)
  t.batchable = false
  return t
end

-- Resize(size, {keep_ratio=false, interpolation=1}): size a number (a square; with
-- keep_ratio the shorter side, MXNet's integer arithmetic) or {w, h}.
function M.Resize(size, opts)
  opts = check_opts("Resize", opts, { keep_ratio = true, interpolation = true }, 2)
  local w0, h0 = size_wh("Resize", size, 2)
  local keep = opts.keep_ratio == true
  local interp = interp_arg("Resize", opts.interpolation, 1, 2)
  local square = type(size) == "number"
  return make("Resize", function(_, x, batched, level)
    local s, o = img_dims("Resize", x, batched, level + 1)
    local H, W = s[o + 1], s[o + 2]
    local w, h = w0, h0
    if square and keep then
      if H > W then w, h = size, floor(H * size / W) else w, h = floor(W * size / H), size end
    end
    return resize(x, s, o, w, h, interp)
  end, nil, { n = 2, size, opts })
end

-- CenterCrop(size, {interpolation=1}): mx.image.center_crop (the box shrunk to fit a
-- smaller image, then resized to size).
function M.CenterCrop(size, opts)
  opts = check_opts("CenterCrop", opts, { interpolation = true }, 2)
  local w0, h0 = size_wh("CenterCrop", size, 2)
  local interp = interp_arg("CenterCrop", opts.interpolation, 1, 2)
  return make("CenterCrop", function(_, x, batched, level)
    local s, o = img_dims("CenterCrop", x, batched, level + 1)
    local H, W = s[o + 1], s[o + 2]
    local nw, nh = scale_down(W, H, w0, h0)
    local y = crop(x, s, o, floor((W - nw) / 2), floor((H - nh) / 2), nw, nh)
    return resize(y, y:shape(), o, w0, h0, interp)
  end, nil, { n = 2, size, opts })
end

local function pair_arg(who, name, v, level)
  if type(v) == "number" then return v, 1 end -- MXNet: a number means (v, 1.0)
  if type(v) ~= "table" or type(v[1]) ~= "number" or type(v[2]) ~= "number" or v[1] > v[2]
      or v[1] <= 0 then
    error(format("%s: %s must be a {min, max} pair of positive numbers, got %s", who, name,
      tostring(v)), level + 1)
  end
  return v[1], v[2]
end

-- RandomResizedCrop(size, {scale={0.08, 1}, ratio={3/4, 4/3}, interpolation=1}):
-- mx.image.random_size_crop: up to 10 tries at a box of area scale * H * W and aspect
-- ratio w/h drawn log-uniformly, then the center crop.
function M.RandomResizedCrop(size, opts)
  opts = check_opts("RandomResizedCrop", opts, { scale = true, ratio = true, interpolation = true }, 2)
  local w0, h0 = size_wh("RandomResizedCrop", size, 2)
  local a0, a1 = pair_arg("RandomResizedCrop", "scale", opts.scale or { 0.08, 1 }, 2)
  local r0, r1 = pair_arg("RandomResizedCrop", "ratio", opts.ratio or { 3 / 4, 4 / 3 }, 2)
  local lr0, lr1 = log(r0), log(r1)
  local interp = interp_arg("RandomResizedCrop", opts.interpolation, 1, 2)
  return make_random("RandomResizedCrop", function(_, x, batched, level)
    local s, o = img_dims("RandomResizedCrop", x, batched, level + 1)
    local H, W = s[o + 1], s[o + 2]
    for _ = 1, 10 do
      local area = uniform(a0, a1) * H * W
      local ratio = exp(uniform(lr0, lr1))
      local nw, nh = floor(sqrt(area * ratio) + 0.5), floor(sqrt(area / ratio) + 0.5)
      if nw <= W and nh <= H and nw >= 1 and nh >= 1 then
        local x0, y0 = randint(0, W - nw), randint(0, H - nh)
        local y = crop(x, s, o, x0, y0, nw, nh)
        return resize(y, y:shape(), o, w0, h0, interp)
      end
    end
    local nw, nh = scale_down(W, H, w0, h0)
    local y = crop(x, s, o, floor((W - nw) / 2), floor((H - nh) / 2), nw, nh)
    return resize(y, y:shape(), o, w0, h0, interp)
  end, nil, { n = 2, size, opts })
end

-- RandomCrop(size, {pad=, pad_value=0, interpolation=1}) (MXNet 2.0's; 1.9 has none):
-- pad (a number for all four sides or {top, bottom, left, right}) with pad_value
-- first, then mx.image.random_crop (the box shrunk to fit, resized to size).
function M.RandomCrop(size, opts)
  opts = check_opts("RandomCrop", opts, { pad = true, pad_value = true, interpolation = true }, 2)
  local w0, h0 = size_wh("RandomCrop", size, 2)
  local interp = interp_arg("RandomCrop", opts.interpolation, 1, 2)
  local pad_value = opts.pad_value or 0
  if type(pad_value) ~= "number" then error("RandomCrop: pad_value must be a number", 2) end
  local pad = opts.pad
  if type(pad) == "number" then pad = { pad, pad, pad, pad } end
  if pad ~= nil then
    if type(pad) ~= "table" or #pad ~= 4 then
      error("RandomCrop: pad must be a number or {top, bottom, left, right}", 2)
    end
    for i = 1, 4 do
      if type(pad[i]) ~= "number" or pad[i] < 0 or pad[i] % 1 ~= 0 then
        error("RandomCrop: pad[" .. i .. "] must be a non-negative integer", 2)
      end
    end
  end
  return make_random("RandomCrop", function(_, x, batched, level)
    local _, o = img_dims("RandomCrop", x, batched, level + 1)
    if pad then
      x = nd.copy_make_border(x, { top = pad[1], bot = pad[2], left = pad[3], right = pad[4],
        value = pad_value })
    end
    local s = x:shape()
    local H, W = s[o + 1], s[o + 2]
    local nw, nh = scale_down(W, H, w0, h0)
    local y = crop(x, s, o, randint(0, W - nw), randint(0, H - nh), nw, nh)
    return resize(y, y:shape(), o, w0, h0, interp)
  end, nil, { n = 2, size, opts })
end

local function flipper(name, axis)
  return function()
    return make_random(name, function(_, x, batched, level)
      local _, o = img_dims(name, x, batched, level + 1)
      if uniform(0, 1) < 0.5 then return nd.flip(x, { axis = axis + o }) end
      return x
    end)
  end
end
-- RandomFlipLeftRight() / RandomFlipTopBottom(): flip with probability 1/2
M.RandomFlipLeftRight = flipper("RandomFlipLeftRight", 2)
M.RandomFlipTopBottom = flipper("RandomFlipTopBottom", 1)

-- RandomBrightness(b), RandomContrast(c), RandomSaturation(s): the adjust_* op with
-- alpha = 1 + uniform(-v, v); RandomHue(h): adjust_hue with alpha = uniform(-h, h).
local function jitter(name, opname, rgb, centre)
  local f = nd[opname]
  return function(v)
    number_arg(name, "its argument", v, 0, 2)
    return make_random(name, function(_, x, batched, level)
      if rgb then rgb_dims(name, x, batched, level + 1) else img_dims(name, x, batched, level + 1) end
      if v == 0 then return x end
      return f(x, { alpha = centre + uniform(-v, v) })
    end, nil, { n = 1, v })
  end
end
M.RandomBrightness = jitter("RandomBrightness", "adjust_brightness", false, 1)
M.RandomContrast = jitter("RandomContrast", "adjust_contrast", true, 1)
M.RandomSaturation = jitter("RandomSaturation", "adjust_saturation", true, 1)
M.RandomHue = jitter("RandomHue", "adjust_hue", true, 0)

-- RandomColorJitter({brightness=0, contrast=0, saturation=0, hue=0}): those that are
-- non-zero, in that order (MXNet's random_color_jitter op).
function M.RandomColorJitter(opts)
  opts = check_opts("RandomColorJitter", opts,
    { brightness = true, contrast = true, saturation = true, hue = true }, 2)
  local parts = {}
  for _, k in ipairs { "brightness", "contrast", "saturation", "hue" } do
    local v = opts[k] or 0
    number_arg("RandomColorJitter", k, v, 0, 2)
    if v > 0 then
      local ctor = "Random" .. k:sub(1, 1):upper() .. k:sub(2)
      parts[#parts + 1] = M[ctor](v)
    end
  end
  return make_random("RandomColorJitter", function(_, x, batched, level)
    rgb_dims("RandomColorJitter", x, batched, level + 1)
    for i = 1, #parts do x = parts[i]:_forward(x, batched, level + 1) end
    return x
  end, nil, { n = 1, opts })
end

-- RandomLighting(alpha): AlexNet's PCA noise, the three alphas from N(0, alpha).
function M.RandomLighting(alpha)
  number_arg("RandomLighting", "alpha", alpha, 0, 2)
  return make_random("RandomLighting", function(_, x, batched, level)
    rgb_dims("RandomLighting", x, batched, level + 1)
    if alpha == 0 then return x end
    local a = random.normal(0, alpha, { 3 })
    local p = a:data_ptr()
    return nd.adjust_lighting(x, { alpha_r = tonumber(p[0]), alpha_g = tonumber(p[1]),
      alpha_b = tonumber(p[2]) })
  end, nil, { n = 1, alpha })
end

-- RandomGray(p=0.5) (MXNet 2.0's; 1.9 has none): gray (in all three channels) with
-- probability p.
function M.RandomGray(p)
  p = p == nil and 0.5 or p
  number_arg("RandomGray", "p", p, 0, 2)
  return make_random("RandomGray", function(_, x, batched, level)
    rgb_dims("RandomGray", x, batched, level + 1)
    if uniform(0, 1) < p then return nd.to_gray(x) end
    return x
  end, nil, { n = 1, p })
end

-- rotation by angle degrees about the centre (the imrotate op: bilinear, zeros
-- outside). zoom_in scales up so that no zero border shows, zoom_out down so that the
-- whole rotated image shows, by MXNet's imrotate factors (min(W/bw, H/bh) and
-- max(bw/W, bh/H), bw x bh the rotated image's bounding box), done here as a centre
-- crop + bilinear resize after the rotation (zoom_in) or a zero pad before it + resize
-- (zoom_out).
local function rotate(x, s, o, angle, zin, zout)
  if not (zin or zout) then return nd.imrotate(x, { angle = angle }) end
  local H, W = s[o + 1], s[o + 2]
  local a = abs(angle) * math.pi / 180
  local bw, bh = W * abs(cos(a)) + H * abs(sin(a)), W * abs(sin(a)) + H * abs(cos(a))
  if zin then
    local k = min(W / bw, H / bh)
    local r = nd.imrotate(x, { angle = angle })
    local cw, ch = max(1, floor(k * W + 0.5)), max(1, floor(k * H + 0.5))
    local y = crop(r, s, o, floor((W - cw) / 2), floor((H - ch) / 2), cw, ch)
    return resize(y, y:shape(), o, W, H, 1)
  end
  local k = max(bw / W, bh / H)
  local pw, ph = floor((floor(k * W + 0.5) - W) / 2), floor((floor(k * H + 0.5) - H) / 2)
  local padded = nd.copy_make_border(x, { top = ph, bot = ph, left = pw, right = pw })
  local r = nd.imrotate(padded, { angle = angle })
  return resize(r, r:shape(), o, W, H, 1)
end

local function zoom_opts(who, opts, level)
  local zin, zout = opts.zoom_in == true, opts.zoom_out == true
  if zin and zout then error(who .. ": zoom_in and zoom_out cannot both be true", level + 1) end
  return zin, zout
end

-- Rotate(rotation_degrees, {zoom_in=false, zoom_out=false}): a fixed rotation (every
-- image of a batch by the same angle).
function M.Rotate(rotation_degrees, opts)
  opts = check_opts("Rotate", opts, { zoom_in = true, zoom_out = true }, 2)
  if type(rotation_degrees) ~= "number" or rotation_degrees ~= rotation_degrees then
    error("Rotate: rotation_degrees must be a number, got " .. tostring(rotation_degrees), 2)
  end
  local zin, zout = zoom_opts("Rotate", opts, 2)
  return make("Rotate", function(_, x, batched, level)
    local s, o = img_dims("Rotate", x, batched, level + 1)
    return rotate(x, s, o, rotation_degrees, zin, zout)
  end, nil, { n = 2, rotation_degrees, opts })
end

-- RandomRotation(angle_limits, {zoom_in=false, zoom_out=false, rotate_with_proba=1}):
-- with probability rotate_with_proba, Rotate by uniform(lower, upper) degrees (on a
-- batch: one probability draw, then an angle per image, as MXNet's random_rotate).
function M.RandomRotation(angle_limits, opts)
  opts = check_opts("RandomRotation", opts,
    { zoom_in = true, zoom_out = true, rotate_with_proba = true }, 2)
  if type(angle_limits) ~= "table" or type(angle_limits[1]) ~= "number"
      or type(angle_limits[2]) ~= "number" or angle_limits[1] >= angle_limits[2] then
    error("RandomRotation: angle_limits must be an ordered {lower, upper} pair of degrees "
      .. "(lower < upper)", 2)
  end
  local zin, zout = zoom_opts("RandomRotation", opts, 2)
  local proba = opts.rotate_with_proba == nil and 1 or opts.rotate_with_proba
  if type(proba) ~= "number" or not (proba >= 0 and proba <= 1) then
    error("RandomRotation: rotate_with_proba must be in [0, 1], got " .. tostring(proba), 2)
  end
  local lo, hi = angle_limits[1], angle_limits[2]
  return make_random("RandomRotation", function(_, x, batched, level)
    local s, o = img_dims("RandomRotation", x, batched, level + 1)
    if proba < 1 and uniform(0, 1) > proba then return x end
    if o == 0 then return rotate(x, s, o, uniform(lo, hi), zin, zout) end
    local outs = {}
    for i = 1, s[1] do outs[i] = rotate(x[i], x[i]:shape(), 0, uniform(lo, hi), zin, zout) end
    return nd.stack(unpack(outs, 1, s[1]))
  end, nil, { n = 2, angle_limits, opts })
end

-- CropResize(x, y, width, height, {size=, interpolation=1}): the box at 0-based (x, y),
-- resized to size (a number or {w, h}) when given.
function M.CropResize(x0, y0, width, height, opts)
  opts = check_opts("CropResize", opts, { size = true, interpolation = true }, 2)
  for k, v in ipairs { x0, y0, width, height } do
    if type(v) ~= "number" or v % 1 ~= 0 or v < (k <= 2 and 0 or 1) then
      error(format("CropResize: %s must be an integer >= %d, got %s",
        ({ "x", "y", "width", "height" })[k], k <= 2 and 0 or 1, tostring(v)), 2)
    end
  end
  local sw, sh
  if opts.size ~= nil then sw, sh = size_wh("CropResize", opts.size, 2) end
  local interp = interp_arg("CropResize", opts.interpolation, 1, 2)
  return make("CropResize", function(_, x, batched, level)
    local s, o = img_dims("CropResize", x, batched, level + 1)
    if x0 + width > s[o + 2] or y0 + height > s[o + 1] then
      error(format("CropResize: the box x=%d, y=%d, width=%d, height=%d leaves the %dx%d image",
        x0, y0, width, height, s[o + 2], s[o + 1]), level + 1)
    end
    local y = crop(x, s, o, x0, y0, width, height)
    if sw then return resize(y, y:shape(), o, sw, sh, interp) end
    return y
  end, nil, { n = 5, x0, y0, width, height, opts })
end

-- RandomApply(transforms, p=0.5): the transform (or a list of them, composed) with
-- probability p, else the input unchanged.
function M.RandomApply(transforms, p)
  p = p == nil and 0.5 or p
  number_arg("RandomApply", "p", p, 0, 2)
  local t = transforms
  if type(t) == "table" and getmetatable(t) == nil then
    local ok, c = pcall(M.Compose, t)
    if not ok then error("RandomApply: " .. tostring(c):gsub("^[^\n]-:%d+: ", ""), 2) end
    t = c
  end
  local callable = type(t) == "function" or (type(t) == "table" and getmetatable(t)
    and getmetatable(t).__call)
  if not callable then error("RandomApply: transforms must be a transform or a list of them", 2) end
  return make_random("RandomApply", function(_, x, batched)
    if p < uniform(0, 1) then return x end
    if batched and type(t) == "table" and t.batch then return t:batch(x) end
    return t(x)
  end, { transforms = t, p = p }, { n = 2, transforms, p })
end

return M
