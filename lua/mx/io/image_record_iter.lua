-- mx.io.ImageRecordIter / ImageRecordUInt8Iter: MXNet's C++ image iterator
-- (src/io/iter_image_recordio_2.cc) over luamx's RecordIO reader and vision transforms,
-- decoding and augmenting in DataLoader worker threads (preprocess_threads of them, each
-- with its own LuaJIT state). Arguments by name, as MXNet's:
--
--   ImageRecordIter{path_imgrec=, path_imgidx=, data_shape={c, h, w}, batch_size=,
--     label_width=1, shuffle=false, seed=0, round_batch=true, preprocess_threads=4,
--     num_parts=1, part_index=0, prefetch_buffer=4, resize=-1, rand_crop=false,
--     random_resized_crop=false, rand_mirror=false, mirror=false, brightness=0,
--     contrast=0, saturation=0, pca_noise=0, pad=0, fill_value=255, inter_method=1,
--     mean_r/g/b=0, std_r/g/b=1, scale=1, dtype="float32", data_name="data",
--     label_name="softmax_label", verbose=, ctx=}
--
-- Each image: decoded (c = 1: gray), its shorter side resized to `resize` (when > 0),
-- padded by `pad` pixels of fill_value, cropped to (h, w) (randomly with rand_crop, a
-- random area and ratio with random_resized_crop, else the centre; a smaller image's box
-- is shrunk to fit and resized), flipped (rand_mirror: with probability 1/2; mirror:
-- always), colour-jittered (brightness/contrast/saturation, pca_noise), then
-- (pixel - mean) * scale / std per channel, CHW (MXNet's formula). ImageRecordUInt8Iter:
-- the uint8 CHW pixels, no normalisation. Labels: float32 (batch_size) (label_width 1)
-- or (batch_size, label_width). round_batch as MXNet's BatchLoader (lua/mx/io/
-- batch_loader.lua): a short last batch is completed from the next pass's first samples
-- (pad says how many), and that pass starts after them; round_batch=false keeps a short
-- last batch (pad says how short). shuffle: a new order each pass (mx.random; the
-- workers' augmentation draws are seeded per worker, docs/design/data.md).
-- Not supported (an error when set): path_imglist, aug_seq other than the default,
-- mean_img, rotations, shears, aspect/scale/area ranges, HSL jitter, max_random_contrast /
-- max_random_illumination, shuffle chunks, seed_aug, alpha channels.
local nd = require("mx.nd")
local io_ = require("mx.io")

local type, error, tostring, pairs = type, error, tostring, pairs

local M = {}

local NAMES = { "path_imglist", "path_imgrec", "path_imgidx", "aug_seq", "label_width",
  "data_shape", "preprocess_threads", "verbose", "num_parts", "part_index", "device_id",
  "shuffle_chunk_size", "shuffle_chunk_seed", "seed_aug", "shuffle", "seed", "batch_size",
  "round_batch", "prefetch_buffer", "ctx", "dtype", "resize", "rand_crop",
  "random_resized_crop", "max_rotate_angle", "max_aspect_ratio", "min_aspect_ratio",
  "max_shear_ratio", "max_crop_size", "min_crop_size", "max_random_scale", "min_random_scale",
  "max_random_area", "min_random_area", "max_img_size", "min_img_size", "brightness",
  "contrast", "saturation", "pca_noise", "random_h", "random_s", "random_l", "rotate",
  "fill_value", "inter_method", "pad", "mirror", "rand_mirror", "mean_img", "mean_r", "mean_g",
  "mean_b", "mean_a", "std_r", "std_g", "std_b", "std_a", "scale", "max_random_contrast",
  "max_random_illumination", "data_name", "label_name" }
-- MXNet's, not luamx's: only their defaults are accepted
local UNSUPPORTED = { path_imglist = "", aug_seq = "aug_default", mean_img = "",
  max_rotate_angle = 0, max_aspect_ratio = 0, max_shear_ratio = 0, max_crop_size = -1,
  min_crop_size = -1, max_random_scale = 1, min_random_scale = 1, max_random_area = 1,
  min_random_area = 1, random_h = 0, random_s = 0, random_l = 0, rotate = -1,
  max_random_contrast = 0, max_random_illumination = 0, shuffle_chunk_size = 0,
  shuffle_chunk_seed = 0, mean_a = 0, std_a = 1, device_id = 0 }

---------------------------------------------------------------- the per-image work
-- The normalisation, as a recipe (mx.gluon.data.recipe) the workers rebuild:
-- img (H, W, C) -> (C, H, W) in dtype, (x - mean) * scale / std unless dtype is uint8.
function M._to_chw(mean, std, scale, dtype)
  local m, s
  return function(img, label)
    local x = nd.transpose(img, { axes = { 3, 1, 2 } })
    if dtype == "uint8" then return x, label end
    x = x:astype(dtype)
    local c = x:shape()[1]
    if m == nil or m:shape()[1] ~= c then
      local mv, sv = {}, {}
      for i = 1, c do
        mv[i] = { { mean[i] or mean[1] } }
        sv[i] = { { (std[i] or std[1]) / scale } }
      end
      m, s = nd.array(mv, { dtype = dtype }), nd.array(sv, { dtype = dtype })
    end
    return nd.div(nd.sub(x, m), s), label
  end
end

-- The round_batch batches of one pass over indices 1..n (perm: a permutation or nil):
-- a batch_sampler for the DataLoader; pads[k] = filler samples of batch k.
local Sampler = {}
Sampler.__index = Sampler
local function new_sampler(n, bs, round, shuffle)
  return setmetatable({ n = n, bs = bs, round = round, shuffle = shuffle, start = 0,
    pads = {} }, Sampler)
end
function Sampler:len()
  return math.floor((self.n - self.start + self.bs - 1) / self.bs)
end
function Sampler:_order()
  local order = {}
  if self.shuffle then
    local p = nd.shuffle(nd.arange(1, self.n + 1, { dtype = "int64" })):tolist()
    for i = 1, self.n do order[i] = p[i] end
  else
    for i = 1, self.n do order[i] = i end
  end
  return order
end
function Sampler:iter()
  local order = self:_order()
  local first = self.start
  self.start = 0
  local batches, pads = {}, {}
  local c = first
  while c < self.n do
    local b = {}
    for i = c + 1, math.min(c + self.bs, self.n) do b[#b + 1] = order[i] end
    local pad = self.bs - #b
    if pad > 0 then
      if self.round then
        local nxt = self:_order() -- the next pass's order starts here (MXNet: no reset)
        for i = 1, pad do b[#b + 1] = nxt[i] end
        self.start = pad
      end
    end
    batches[#batches + 1] = b
    pads[#pads + 1] = pad
    c = c + self.bs
  end
  self.pads = pads
  local k = 0
  return function()
    k = k + 1
    local b = batches[k]
    if b then return b, #b end
  end
end

---------------------------------------------------------------- the iterator
local function build(name, uint8)
  local cls = io_._class(name, io_.DataIter)
  M[name] = cls
  local SIG = io_._sig(cls, {}, NAMES)
  function cls:__init(...)
    local o = SIG(3, ...)
    for k, dflt in pairs(UNSUPPORTED) do
      if o[k] ~= nil and o[k] ~= dflt then
        error(string.format("%s: %s is not supported (only its default %s)", name, k,
          tostring(dflt)), 3)
      end
    end
    local ds = o.data_shape
    if type(ds) ~= "table" or #ds ~= 3 then
      error(name .. ": data_shape must be {channels, height, width}", 3)
    end
    local c, h, w = ds[1], ds[2], ds[3]
    if c ~= 1 and c ~= 3 then
      error(name .. ": data_shape's channels must be 1 or 3, got " .. tostring(c), 3)
    end
    local bs = o.batch_size
    if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
      error(name .. ": batch_size must be a positive integer, got " .. tostring(bs), 3)
    end
    local rec = o.path_imgrec
    if type(rec) ~= "string" or rec == "" then error(name .. ": path_imgrec must be given", 3) end
    local idx = rec:gsub("%.[^./]*$", "") .. ".idx"
    if o.path_imgidx ~= nil and o.path_imgidx ~= "" and o.path_imgidx ~= idx then
      error(name .. ": path_imgidx must be the .idx beside the .rec (" .. idx .. ")", 3)
    end
    local gluon = require("mx.gluon")
    local T = gluon.data.vision.transforms
    local okd, base = pcall(gluon.data.vision.ImageRecordDataset, rec, { flag = c == 1 and 0 or 1 })
    if not okd then error(name .. ": " .. tostring(base):gsub("^[^\n]-:%d+: ", ""), 3) end
    local parts, part = o.num_parts or 1, (o.part_index or 0) + 1
    if parts > 1 then
      if part < 1 or part > parts then error(name .. ": part_index must be in 0.." .. parts - 1, 3) end
      base = base:shard(parts, part)
    end
    local interp = o.inter_method or 1
    local tf = {}
    if (o.resize or -1) > 0 then tf[#tf + 1] = T.Resize(o.resize, true, interp) end
    if (o.pad or 0) > 0 then
      tf[#tf + 1] = T.RandomCrop({ w, h }, o.pad, o.fill_value or 255, interp)
    elseif o.random_resized_crop then
      tf[#tf + 1] = T.RandomResizedCrop({ w, h }, nil, nil, interp)
    elseif o.rand_crop then
      tf[#tf + 1] = T.RandomCrop({ w, h }, nil, nil, interp)
    else
      tf[#tf + 1] = T.CenterCrop({ w, h }, interp)
    end
    if o.mirror then
      tf[#tf + 1] = gluon.data.recipe("mx.io.image_record_iter", "_flip")
    elseif o.rand_mirror then
      tf[#tf + 1] = T.RandomFlipLeftRight()
    end
    if c == 3 and ((o.brightness or 0) > 0 or (o.contrast or 0) > 0 or (o.saturation or 0) > 0) then
      tf[#tf + 1] = T.RandomColorJitter(o.brightness or 0, o.contrast or 0, o.saturation or 0)
    end
    if c == 3 and (o.pca_noise or 0) > 0 then tf[#tf + 1] = T.RandomLighting(o.pca_noise) end
    local dtype = uint8 and "uint8" or (o.dtype and o.dtype ~= "None" and o.dtype or "float32")
    local ds_ = base:transform_first(T.Compose(tf)):transform(gluon.data.recipe(
      "mx.io.image_record_iter", "_to_chw", { o.mean_r or 0, o.mean_g or 0, o.mean_b or 0 },
      { o.std_r or 1, o.std_g or 1, o.std_b or 1 }, o.scale or 1, dtype))
    local n = ds_:len()
    if n == 0 then error(name .. ": " .. rec .. " holds no records", 3) end
    if o.round_batch ~= false and n < bs then
      error(string.format("%s: %d records for a batch of %d (round_batch needs at least a batch)",
        name, n, bs), 3)
    end
    self._sampler = new_sampler(n, bs, o.round_batch ~= false, o.shuffle == true)
    local nw = o.preprocess_threads or 4
    self._loader = gluon.data.DataLoader(ds_, { batch_sampler = self._sampler,
      num_workers = nw > 1 and nw or 0, prefetch = o.prefetch_buffer })
    self.batch_size = bs
    local lw = o.label_width or 1
    self._label_width = lw
    self.provide_data = { io_.DataDesc(o.data_name or "data", { bs, c, h, w }, dtype) }
    self.provide_label = { io_.DataDesc(o.label_name or "softmax_label", lw == 1 and { bs }
      or { bs, lw }, "float32") }
    self:reset()
  end
  function cls:reset()
    self._it = self._loader:iter()
    self._k = 0
  end
  function cls:next()
    local x, y = self._it()
    if x == nil then return nil end
    self._k = self._k + 1
    if not nd.is_tensor(y) then y = nd.array(y) end
    y = y:astype("float32")
    if self._label_width == 1 and y:ndim() == 2 then y = y:reshape(y:shape()[1]) end
    local b = io_.DataBatch({ x }, { y }, self._sampler.pads[self._k] or 0, nil)
    self._batch = b
    return b
  end
  function cls:iter_next()
    return self:next() ~= nil
  end
  -- one NDArray each, as MXNet's C++ iterators
  function cls:getdata() return self._batch.data[1] end
  function cls:getlabel() return self._batch.label[1] end
  function cls:getpad() return self._batch.pad end
end

-- mirror=true: every image flipped (a recipe the workers rebuild)
function M._flip()
  return function(img) return nd.flip(img, { axis = 2 }) end
end

build("ImageRecordIter", false)
build("ImageRecordUInt8Iter", true)

return M
