-- mx.gluoncv.data.transforms.image — GluonCV 0.11's image transforms
-- (gluoncv.data.transforms.image) on (H, W, C) NDArrays: imresize, resize_short_within,
-- random_expand and random_flip. The random ones take an rng (transforms.rng; the default
-- one when nil) and return what GluonCV returns: the image and the offsets / flips drawn.
local nd = require("mx.nd")
local R = require("mx.gluoncv.data.transforms.rng")

local floor = math.floor

local M = {}

-- NumPy's round: halves to the even neighbour
local function round_even(v)
  local f = floor(v)
  local d = v - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end

local function hwc(who, src, level)
  if not nd.is_tensor(src) or src:ndim() ~= 3 then
    error(who .. ": src must be an (H, W, C) NDArray", level + 1)
  end
  local s = src:shape()
  return s[1], s[2], s[3]
end

-- imresize(src, w, h, interp=1): MXNet's _get_interp_method picks for 9 and 10. GluonCV's
-- training presets draw interp 0..4; 4 (Lanczos) is not in luamx's imresize and bicubic (2)
-- stands in for it.
function M.imresize(src, w, h, interp)
  local image = require("mx.image")
  local oh, ow = hwc("image.imresize", src, 2)
  if interp == 4 then interp = 2 end
  local r = image.imresize(src, w, h, image._get_interp_method(interp or 1, { oh, ow, h, w }))
  return r
end

-- resize_short_within(src (H, W, C), short, max_size, mult_base=1, interp=2): the shorter
-- side to short unless the longer would pass max_size (then the longer to max_size), both
-- sides rounded to multiples of mult_base
function M.resize_short_within(src, short, max_size, mult_base, interp)
  local image = require("mx.image")
  mult_base = mult_base or 1
  local h, w = hwc("image.resize_short_within", src, 2)
  local lo, hi = math.min(h, w), math.max(h, w)
  local scale = short / lo
  if round_even(scale * hi / mult_base) * mult_base > max_size then
    scale = floor(max_size / mult_base) * mult_base / hi
  end
  local nw = round_even(w * scale / mult_base) * mult_base
  local nh = round_even(h * scale / mult_base) * mult_base
  return image.imresize(src, nw, nh, image._get_interp_method(interp or 2, { h, w, nh, nw }))
end

-- random_expand(src, max_ratio=4, fill=0, keep_ratio=true, rng) -> dst, {off_x, off_y, ow, oh}:
-- src placed at a random offset on a canvas up to max_ratio times its size, filled with
-- fill (a number or one value per channel)
function M.random_expand(src, max_ratio, fill, keep_ratio, rng)
  local h, w, c = hwc("image.random_expand", src, 2)
  max_ratio, fill, rng = max_ratio or 4, fill or 0, rng or R.default()
  if keep_ratio == nil then keep_ratio = true end
  if max_ratio <= 1 then return src, { 0, 0, w, h } end
  local ratio_x = rng:uniform(1, max_ratio)
  local ratio_y = keep_ratio and ratio_x or rng:uniform(1, max_ratio)
  local oh, ow = floor(h * ratio_y), floor(w * ratio_x)
  local off_y = rng:randint(0, oh - h)
  local off_x = rng:randint(0, ow - w)
  local dst
  if type(fill) == "number" then
    dst = nd.full({ oh, ow, c }, fill, { dtype = src:dtype() })
  else
    if type(fill) ~= "table" or #fill ~= c then
      error(string.format("image.random_expand: fill must be a number or %d values (one per "
        .. "channel)", c), 2)
    end
    dst = nd.broadcast_to(nd.reshape(nd.array(fill, { dtype = src:dtype() }), { 1, 1, c }),
      { shape = { oh, ow, c } })
  end
  dst = nd.slice_assign(dst, src, { begin = { off_y + 1, off_x + 1, 1 },
    ["end"] = { off_y + h, off_x + w, c } })
  return dst, { off_x, off_y, ow, oh }
end

-- random_flip(src, px=0, py=0, copy=false, rng) -> out, {flip_x, flip_y}: flips drawn with
-- probabilities py (vertical, drawn first, as GluonCV) and px
function M.random_flip(src, px, py, copy, rng)
  hwc("image.random_flip", src, 2)
  rng = rng or R.default()
  local flip_y = rng:bernoulli(py or 0)
  local flip_x = rng:bernoulli(px or 0)
  if flip_y then src = nd.flip(src, { axis = 1 }) end
  if flip_x then src = nd.flip(src, { axis = 2 }) end
  if copy and not (flip_x or flip_y) then src = nd.copy(src) end
  return src, { flip_x, flip_y }
end

return M
