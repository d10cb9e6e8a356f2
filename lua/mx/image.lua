-- mx.image — MXNet 1.9's mx.image functions on HWC images (docs/image.md):
--   local img = mx.image.imread("cat.jpg")            -- (H, W, 3) uint8, RGB
--   local out, rect = mx.image.center_crop(mx.image.resize_short(img, 256), { 224, 224 })
-- Decoding and encoding are libmx's (core/src/imgcodec.c: libjpeg-turbo, libpng); the
-- pixel work is op-table ops (nd.imresize, nd.copy_make_border, nd.adjust_*, ...).
-- Coordinates are MXNet's: x0/y0 are 0-based pixel offsets from the top-left corner,
-- sizes are (width, height) pairs, rects are { x0, y0, w, h }.
local ffi = require("ffi")
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local context = require("mx.context")
local check_opts = require("mx.core.class").check_opts
local C = lib.C

local type, error, tostring, floor, format = type, error, tostring, math.floor, string.format
local ffi_string = ffi.string

local M = {}

local hbuf = ffi.new("mx_tensor *[1]")
local pbuf = ffi.new("void *[1]")
local lbuf = ffi.new("size_t[1]")

local function last_error() return ffi_string(C.mx_last_error()) end

local DECODE = { flag = true, to_rgb = true }
local function decode(who, buf, opts, level)
  opts = check_opts(who, opts, DECODE, level + 1)
  local flag = opts.flag == nil and 1 or opts.flag
  if flag ~= 0 and flag ~= 1 and flag ~= -1 then
    error(format("%s: flag must be 1 (colour), 0 (gray) or -1 (as stored), got %s", who,
      tostring(flag)), level + 1)
  end
  local to_rgb = opts.to_rgb ~= false and opts.to_rgb ~= 0
  local ptr, len
  if type(buf) == "string" then
    ptr, len = buf, #buf
  elseif nd.is_tensor(buf) and buf:dtype() == "uint8" and buf:ndim() == 1 then
    ptr, len = C.mx_tensor_data(buf.h), buf:size()
  else
    error(format("%s: buf must be a string of bytes or a 1-D uint8 NDArray, got %s", who,
      nd.is_tensor(buf) and buf:dtype() .. " NDArray" or type(buf)), level + 1)
  end
  if C.mx_image_decode(ptr, len, flag, to_rgb and 1 or 0, hbuf) ~= 0 then
    error(last_error(), level + 1)
  end
  return nd._wrap(hbuf[0])
end

-- imdecode(buf, {flag=1, to_rgb=true}): JPEG or PNG bytes (a string, or a 1-D uint8
-- NDArray) to (H, W, 3) (flag 1) / (H, W, 1) (flag 0) / as stored (flag -1) uint8.
function M.imdecode(buf, opts)
  local r = decode("imdecode", buf, opts, 2)
  return r
end

-- imread(path, {flag=1, to_rgb=true})
function M.imread(path, opts)
  if type(path) ~= "string" then error("imread: path must be a string", 2) end
  local f, why = io.open(path, "rb")
  if not f then error("imread: cannot open " .. path .. ": " .. tostring(why), 2) end
  local s = f:read("*a")
  f:close()
  local ok, r = pcall(decode, "imread", s, opts, 1)
  if not ok then error(tostring(r) .. " (" .. path .. ")", 2) end
  return r
end

local ENCODE = { img_fmt = true, quality = true, compression = true, to_rgb = true }
-- imencode(img, {img_fmt='.jpg', quality=95, compression=3, to_rgb=true}) -> string:
-- a (H, W, C) uint8 image as JPEG ('.jpg'/'.jpeg', C 1 or 3) or PNG ('.png', C 1, 3, 4).
-- to_rgb=false: img's channels are B, G, R as OpenCV's (what pack_img passes).
function M.imencode(img, opts)
  opts = check_opts("imencode", opts, ENCODE, 2)
  if not nd.is_tensor(img) or img:ndim() ~= 3 or img:dtype() ~= "uint8" then
    error("imencode: img must be a (H, W, C) uint8 NDArray", 2)
  end
  local fmt = (opts.img_fmt or ".jpg"):lower()
  local code, param
  if fmt == ".jpg" or fmt == ".jpeg" then
    code, param = 0, opts.quality or 95
  elseif fmt == ".png" then
    code, param = 1, opts.compression or 3
  else
    error("imencode: img_fmt must be '.jpg', '.jpeg' or '.png', got " .. tostring(opts.img_fmt), 2)
  end
  if type(param) ~= "number" or param % 1 ~= 0 then
    error("imencode: quality/compression must be an integer, got " .. tostring(param), 2)
  end
  if img:context().device_type ~= "cpu" then img = img:as_in_context(context.cpu()) end
  if C.mx_image_encode(img.h, code, param, opts.to_rgb == false and 0 or 1, pbuf, lbuf) ~= 0 then
    error(last_error(), 2)
  end
  local s = ffi_string(pbuf[0], lbuf[0])
  C.mx_free(pbuf[0])
  return s
end

local function hw(who, src, level)
  if not nd.is_tensor(src) or src:ndim() ~= 3 then
    error(who .. ": src must be an (H, W, C) NDArray", level + 1)
  end
  local s = src:shape()
  return s[1], s[2], s[3]
end

local function int_arg(who, name, v, lo, level)
  if type(v) ~= "number" or v % 1 ~= 0 or v < lo then
    error(format("%s: %s must be an integer >= %d, got %s", who, name, lo, tostring(v)), level + 1)
  end
  return v
end

-- MXNet's _get_interp_method: 9 picks by the sizes (2 (bicubic) when enlarging both
-- sides, 3 (area) when shrinking both, else 1), 10 a random one of 0..3
-- (MXNet: 0..4; lanczos (4) is not implemented here).
local function interp_of(who, interp, sizes, level)
  if interp == 9 then
    if not sizes then return 2 end
    local oh, ow, nh, nw = sizes[1], sizes[2], sizes[3], sizes[4]
    if nh > oh and nw > ow then return 2 elseif nh < oh and nw < ow then return 3 end
    return 1
  end
  if interp == 10 then return math.random(0, 3) end
  if interp ~= 0 and interp ~= 1 and interp ~= 2 and interp ~= 3 then
    error(format("%s: interp must be 0 (nearest), 1 (bilinear), 2 (bicubic), 3 (area), 9 "
      .. "(auto) or 10 (random), got %s", who, tostring(interp)), level + 1)
  end
  return interp
end
M._get_interp_method = function(interp, sizes) return interp_of("interp", interp, sizes, 2) end

local function resize(who, src, w, h, interp, level)
  int_arg(who, "w", w, 1, level + 1)
  int_arg(who, "h", h, 1, level + 1)
  local r = nd.imresize(src, { w = w, h = h, interp = interp })
  return r
end

-- imresize(src, w, h, {interp=1}) (or interp as a number)
function M.imresize(src, w, h, opts)
  local interp = 1
  if type(opts) == "number" then interp = opts
  elseif opts ~= nil then interp = check_opts("imresize", opts, { interp = true }, 2).interp or 1 end
  if not nd.is_tensor(src) then error("imresize: src must be an NDArray", 2) end
  local r = resize("imresize", src, w, h, interp_of("imresize", interp, nil, 2), 2)
  return r
end

-- scale_down({sw, sh}, {w, h}) -> w, h: the size shrunk (keeping its ratio) to fit the source
local function wh_arg(who, what, t, level)
  if type(t) ~= "table" or nd.is_tensor(t) or type(t[1]) ~= "number" or type(t[2]) ~= "number"
      or t[1] ~= t[1] or t[2] ~= t[2] or t[1] <= 0 or t[2] <= 0 then
    error(who .. ": " .. what .. " must be {width, height} of positive numbers", level + 1)
  end
end

function M.scale_down(src_size, size)
  wh_arg("scale_down", "src_size", src_size, 2)
  wh_arg("scale_down", "size", size, 2)
  local sw, sh, w, h = src_size[1], src_size[2], size[1], size[2]
  if sh < h then w, h = w * sh / h, sh end
  if sw < w then w, h = sw, h * sw / w end
  return floor(w), floor(h)
end

-- resize_short(src, size, interp=2): the shorter side to size, the ratio kept
function M.resize_short(src, size, interp)
  local h, w = hw("resize_short", src, 2)
  int_arg("resize_short", "size", size, 1, 2)
  local nh, nw
  if h > w then nh, nw = floor(size * h / w), size else nh, nw = size, floor(size * w / h) end
  local r = resize("resize_short", src, nw, nh, interp_of("resize_short", interp or 2,
    { h, w, nh, nw }, 2), 2)
  return r
end

local function crop(who, src, x0, y0, w, h, size, interp, level)
  local H, W, Cc = hw(who, src, level + 1)
  int_arg(who, "x0", x0, 0, level + 1)
  int_arg(who, "y0", y0, 0, level + 1)
  int_arg(who, "w", w, 1, level + 1)
  int_arg(who, "h", h, 1, level + 1)
  if x0 + w > W or y0 + h > H then
    error(format("%s: the box x0=%d, y0=%d, w=%d, h=%d leaves the %dx%d image", who, x0, y0, w,
      h, W, H), level + 1)
  end
  local out = nd.slice(src, { begin = { y0 + 1, x0 + 1, 1 }, ["end"] = { y0 + h, x0 + w, Cc } })
  if size and (size[1] ~= w or size[2] ~= h) then
    out = resize(who, out, size[1], size[2],
      interp_of(who, interp or 2, { h, w, size[2], size[1] }, level + 1), level + 1)
  end
  return out
end

-- fixed_crop(src, x0, y0, w, h, size=nil, interp=2): the box at 0-based offsets (x0, y0),
-- resized to size = {w, h} when given and different
function M.fixed_crop(src, x0, y0, w, h, size, interp)
  if size ~= nil then wh_arg("fixed_crop", "size", size, 2) end
  local r = crop("fixed_crop", src, x0, y0, w, h, size, interp, 2)
  return r
end

-- center_crop(src, size, interp=2) -> out, {x0, y0, w, h}
function M.center_crop(src, size, interp)
  local h, w = hw("center_crop", src, 2)
  wh_arg("center_crop", "size", size, 2)
  local nw, nh = M.scale_down({ w, h }, size)
  local x0, y0 = floor((w - nw) / 2), floor((h - nh) / 2)
  local out = crop("center_crop", src, x0, y0, nw, nh, size, interp, 2)
  return out, { x0, y0, nw, nh }
end

-- random_crop(src, size, interp=2) -> out, {x0, y0, w, h}; offsets drawn with math.random
-- (MXNet: Python's random)
function M.random_crop(src, size, interp)
  local h, w = hw("random_crop", src, 2)
  wh_arg("random_crop", "size", size, 2)
  local nw, nh = M.scale_down({ w, h }, size)
  local x0, y0 = math.random(0, w - nw), math.random(0, h - nh)
  local out = crop("random_crop", src, x0, y0, nw, nh, size, interp, 2)
  return out, { x0, y0, nw, nh }
end

local function as_array(v, like)
  if nd.is_tensor(v) then return v end
  if type(v) == "table" then return nd.array(v, { dtype = like:dtype(), ctx = like:context() }) end
  return v
end

-- color_normalize(src, mean, std=nil): (src - mean) / std; mean/std numbers, lists or NDArrays
-- broadcast over the channel axis
function M.color_normalize(src, mean, std)
  if not nd.is_tensor(src) then error("color_normalize: src must be an NDArray", 2) end
  local nch = src:shape()[src:ndim()]
  for _, a in ipairs({ { "mean", mean }, { "std", std } }) do
    local v = a[2]
    local ok = v == nil or type(v) == "number" or nd.is_tensor(v)
    if type(v) == "table" and not nd.is_tensor(v) then
      ok = #v > 0
      for _, x in ipairs(v) do ok = ok and type(x) == "number" end
    end
    if not ok then
      error("color_normalize: " .. a[1] .. " must be a number, a list of numbers or an NDArray, got "
        .. type(v), 2)
    end
    local n = type(v) == "table" and not nd.is_tensor(v) and #v or nd.is_tensor(v) and v:size() or 1
    if n ~= 1 and n ~= nch then
      error(string.format("color_normalize: %s has %d values for the image's %d channels", a[1], n, nch), 2)
    end
  end
  if mean ~= nil then src = src - as_array(mean, src) end
  if std ~= nil then src = src / as_array(std, src) end
  return src
end

-- copyMakeBorder(src, top, bot, left, right, {type=0, value=0}): OpenCV's border types
-- 0 constant, 1 replicate, 2 reflect, 3 wrap, 4 reflect_101
function M.copyMakeBorder(src, top, bot, left, right, opts)
  opts = check_opts("copyMakeBorder", opts, { type = true, value = true }, 2)
  if not nd.is_tensor(src) then error("copyMakeBorder: src must be an NDArray", 2) end
  local ok, r = pcall(nd.copy_make_border, src, { top = top, bot = bot, left = left, right = right,
    type = opts.type or 0, value = opts.value or 0 })
  if not ok then error("copyMakeBorder: " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), 2) end
  return r
end

-- imsize(buf) -> h, w, c: the size JPEG or PNG bytes declare, from their header only (no
-- pixel is decoded: a caller can refuse an image before it exists); c the stored channels.
local hw_buf = ffi.new("int64_t[2]")
local c_buf = ffi.new("int[1]")
function M.imsize(buf)
  if type(buf) ~= "string" then error("imsize: buf must be a string of bytes, got " .. type(buf), 2) end
  if C.mx_image_info(buf, #buf, hw_buf, hw_buf + 1, c_buf) ~= 0 then error(last_error(), 2) end
  return tonumber(hw_buf[0]), tonumber(hw_buf[1]), c_buf[0]
end

-- the augmenters, CreateAugmenter and ImageIter (lua/mx/image_iter.lua), loaded on first use
setmetatable(M, { __index = function(t, k)
  local v = require("mx.image_iter")[k]
  if v ~= nil then rawset(t, k, v) end
  return v
end })

return M
