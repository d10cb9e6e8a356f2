-- mx.image.ImageIter: MXNet 1.9's Python image iterator (python/mxnet/image/image.py)
-- over a RecordIO file (path_imgrec, with path_imgidx for shuffling and parts), an image
-- list file (path_imglist: "index<TAB>label...<TAB>path" lines, paths under path_root) or
-- a Lua list (imglist: {label, path} or {label1, ..., labeln, path}). Each image is
-- decoded (HWC), run through aug_list (default CreateAugmenter(data_shape, extra options
-- by name)), and written CHW into a (batch_size, c, h, w) float32 batch; labels are
-- (batch_size) or (batch_size, label_width) of dtype. last_batch_handle as MXNet's:
-- "pad" (the last batch completed from the next pass's first images, pad = how many;
-- then the pass ends), "discard" (a short last batch is dropped), "roll_over" (its images
-- start the next pass's first batch).
--
--   ImageIter(batch_size, data_shape, label_width=1, path_imgrec=, path_imglist=,
--     path_root=, path_imgidx=, shuffle=false, part_index=0, num_parts=1, aug_list=,
--     imglist=, data_name="data", label_name="softmax_label", dtype="float32",
--     last_batch_handle="pad"; CreateAugmenter's options by name)
local nd = require("mx.nd")
local io_ = require("mx.io")
local recordio = require("mx.recordio")
local image = require("mx.image")

local type, error, tostring, ipairs, pcall, tonumber = type, error, tostring, ipairs, pcall, tonumber

local ImageIter = io_.DataIter:extend("ImageIter")
local AUG_OPTS = { "resize", "rand_crop", "rand_resize", "rand_mirror", "mean", "std",
  "brightness", "contrast", "saturation", "hue", "pca_noise", "rand_gray", "inter_method" }
local SIG = io_._sig(ImageIter, { "batch_size", { "data_shape", list = true }, "label_width",
  "path_imgrec", "path_imglist", "path_root", "path_imgidx", "shuffle", "part_index",
  "num_parts", { "aug_list", list = true }, { "imglist", list = true }, "data_name",
  "label_name", "dtype", "last_batch_handle" }, AUG_OPTS)
local LABEL_DTYPES = { int32 = true, float32 = true, int64 = true, float64 = true }
local HANDLES = { pad = true, discard = true, roll_over = true }

local function read_file(path, level)
  local f, err = io.open(path, "rb")
  if not f then error("ImageIter: cannot open " .. tostring(err), level + 1) end
  local s = f:read("*a")
  f:close()
  return s
end

function ImageIter:__init(...)
  local o = SIG(3, ...)
  local bs = o.batch_size
  if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
    error("ImageIter: batch_size must be a positive integer, got " .. tostring(bs), 3)
  end
  local ds = o.data_shape
  if type(ds) ~= "table" or #ds ~= 3 then
    error("ImageIter: data_shape should have length 3, with dimensions CxHxW", 3)
  end
  if ds[1] ~= 3 then error("ImageIter: this iterator expects inputs to have 3 channels", 3) end
  if not (o.path_imgrec or o.path_imglist or type(o.imglist) == "table") then
    error("ImageIter: give path_imgrec, path_imglist or imglist", 3)
  end
  local dtype = o.dtype or "float32"
  if not LABEL_DTYPES[dtype] then
    error("ImageIter: dtype " .. tostring(dtype) .. " label not supported (int32, float32, int64, "
      .. "float64)", 3)
  end
  local handle = o.last_batch_handle or "pad"
  if not HANDLES[handle] then
    error("ImageIter: last_batch_handle must be 'pad', 'discard' or 'roll_over', got "
      .. tostring(handle), 3)
  end
  local lw = o.label_width or 1
  self.batch_size, self.data_shape, self.label_width = bs, { ds[1], ds[2], ds[3] }, lw
  self.shuffle, self.last_batch_handle, self.path_root = o.shuffle and true or false, handle,
    o.path_root
  self._dtype = dtype
  -- the records: rec (sequential or indexed), list (key -> {label, path})
  local keys
  if o.path_imgrec then
    if o.path_imgidx then
      self.imgrec = recordio.MXIndexedRecordIO(o.path_imgidx, o.path_imgrec, "r")
      self.imgidx = {}
      for i, k in ipairs(self.imgrec.keys) do self.imgidx[i] = k end
    else
      self.imgrec = recordio.MXRecordIO(o.path_imgrec, "r")
    end
  end
  if o.path_imglist then
    local list = {}
    keys = {}
    for line in read_file(o.path_imglist, 2):gmatch("[^\n]+") do
      local f = {}
      for x in (line:gsub("\r$", "") .. "\t"):gmatch("([^\t]*)\t") do f[#f + 1] = x end
      if #f < 3 then error("ImageIter: " .. o.path_imglist .. ": a line without a label: " .. line, 3) end
      local lab = {}
      for i = 2, #f - 1 do lab[#lab + 1] = tonumber(f[i]) end
      local key = tonumber(f[1])
      list[key] = { lab, f[#f] }
      keys[#keys + 1] = key
    end
    self.imglist = list
  elseif type(o.imglist) == "table" then
    local list = {}
    keys = {}
    for i, img in ipairs(o.imglist) do
      local lab = {}
      if #img > 2 then
        for j = 1, #img - 1 do lab[j] = img[j] end
      elseif type(img[1]) == "number" then
        lab = { img[1] }
      else
        lab = img[1]
      end
      list[i] = { lab, img[#img] }
      keys[i] = i
    end
    self.imglist = list
  end
  if self.imgrec == nil then
    self.seq = keys
  elseif self.shuffle or (o.num_parts or 1) > 1 or o.path_imgidx then
    if self.imgidx == nil then
      error("ImageIter: shuffle and num_parts need path_imgidx (an indexed RecordIO file)", 3)
    end
    self.seq = self.imgidx
  end
  local np, pi = o.num_parts or 1, o.part_index or 0
  if np > 1 then
    if pi < 0 or pi >= np then error("ImageIter: part_index must be in [0, num_parts)", 3) end
    local C = math.floor(#self.seq / np)
    local part = {}
    for i = pi * C + 1, (pi + 1) * C do part[#part + 1] = self.seq[i] end
    self.seq = part
  end
  if o.aug_list ~= nil then
    self.auglist = o.aug_list
  else
    local a = {}
    for _, k in ipairs(AUG_OPTS) do a[k] = o[k] end
    self.auglist = require("mx.image_iter").CreateAugmenter(ds, a)
  end
  local dn, ln = o.data_name or "data", o.label_name or "softmax_label"
  self.provide_data = { io_.DataDesc(dn, { bs, ds[1], ds[2], ds[3] }) }
  self.provide_label = { io_.DataDesc(ln, lw > 1 and { bs, lw } or { bs }, dtype) }
  self.cur, self._allow_read = 0, true
  self.num_image = self.seq and #self.seq or nil
  self:reset()
end

local function shuffle(t)
  for i = #t, 2, -1 do
    local j = math.random(1, i)
    t[i], t[j] = t[j], t[i]
  end
end

function ImageIter:reset()
  if self.seq and self.shuffle then shuffle(self.seq) end
  if self.last_batch_handle ~= "roll_over" or self._cache_data == nil then
    if self.imgrec then self.imgrec:reset() end
    self.cur, self._allow_read = 0, true
  end
end
function ImageIter:hard_reset()
  if self.seq and self.shuffle then shuffle(self.seq) end
  if self.imgrec then self.imgrec:reset() end
  self.cur, self._allow_read = 0, true
  self._cache_data, self._cache_label, self._cache_idx = nil, nil, nil
end

-- next_sample() -> label, image bytes; nil at the end of the pass
function ImageIter:next_sample()
  if not self._allow_read then return nil end
  if self.seq then
    if self.cur >= self.num_image then
      if self.last_batch_handle ~= "discard" then self.cur = 0 end
      return nil
    end
    local idx = self.seq[self.cur + 1]
    self.cur = self.cur + 1
    if self.imgrec then
      local header, img = recordio.unpack(self.imgrec:read_idx(idx))
      if self.imglist == nil then return header.label, img end
      return self.imglist[idx][1], img
    end
    local entry = self.imglist[idx]
    local path = self.path_root and (self.path_root .. "/" .. entry[2]) or entry[2]
    return entry[1], read_file(path, 3)
  end
  local s = self.imgrec:read()
  if s == nil then
    if self.last_batch_handle ~= "discard" then self.imgrec:reset() end
    return nil
  end
  local header, img = recordio.unpack(s)
  return header.label, img
end

function ImageIter:augmentation_transform(data)
  for _, aug in ipairs(self.auglist) do data = aug(data) end
  return data
end
function ImageIter.postprocess_data(_, datum) return nd.transpose(datum, { axes = { 3, 1, 2 } }) end

local function set_label(self, batch_label, i, label)
  if type(label) == "number" then label = { label } end
  if nd.is_tensor(label) then label = label:reshape(-1):tolist() end
  if self.label_width > 1 then
    batch_label[i + 1] = nd.array({ label }, { dtype = self._dtype }):reshape(self.label_width)
  else
    batch_label[i + 1] = label[1]
  end
end

-- fills the batch from position start (0-based); returns how many positions are filled
function ImageIter:_batchify(batch_data, batch_label, start)
  local i = start or 0
  while i < self.batch_size do
    local label, s = self:next_sample()
    if label == nil then break end
    local ok, data = pcall(image.imdecode, s)
    if not ok then
      error("ImageIter: broken image " .. (self.seq and ("at position " .. self.cur) or "")
        .. ": " .. tostring(data), 3)
    end
    data = self:augmentation_transform(data)
    local d = self:postprocess_data(data)
    batch_data[i + 1] = d:astype("float32")
    set_label(self, batch_label, i, label)
    i = i + 1
  end
  return i
end

function ImageIter:next()
  local bs = self.batch_size
  local c, h, w = self.data_shape[1], self.data_shape[2], self.data_shape[3]
  local batch_data, batch_label, i
  if self._cache_data then
    batch_data, batch_label, i = self._cache_data, self._cache_label, self._cache_idx
  else
    batch_data = nd.zeros({ bs, c, h, w })
    batch_label = self.label_width > 1 and nd.zeros({ bs, self.label_width }, { dtype = self._dtype })
      or {}
    i = self:_batchify(batch_data, batch_label, 0)
    if i == 0 then return nil end
  end
  local pad = bs - i
  if pad ~= 0 then
    if self.last_batch_handle == "discard" then return nil end
    if self.last_batch_handle == "roll_over" and self._cache_data == nil then
      self._cache_data, self._cache_label, self._cache_idx = batch_data, batch_label, i
      return nil
    end
    self:_batchify(batch_data, batch_label, i)
    if self.last_batch_handle == "pad" then
      self._allow_read = false
    else
      self._cache_data, self._cache_label, self._cache_idx = nil, nil, nil
    end
  end
  local label = batch_label
  if not nd.is_tensor(label) then
    local t = {}
    for k = 1, bs do t[k] = label[k] or 0 end
    label = nd.array(t, { dtype = self._dtype })
  end
  return io_.DataBatch({ batch_data }, { label }, pad)
end

return ImageIter
