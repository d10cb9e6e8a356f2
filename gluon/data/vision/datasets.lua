-- mx.gluon.data.vision datasets: MNIST and FashionMNIST from IDX files; the image
-- datasets (ImageFolderDataset, ImageListDataset, ImageRecordDataset) and CIFAR10 /
-- CIFAR100 further down.
--
--   local train = vision.FashionMNIST{train = true}     -- 60000 samples
--   local img, label = train:get(1)   -- img: (28, 28, 1) uint8 view (HWC, like
--                                     -- MXNet); label: a number 0..9
--
-- Options: train (default true), root (the folder with the four IDX files, .gz or
-- not), transform (MXNet's legacy per-sample fn(data, label)). FashionMNIST's
-- default root is where Debian's dataset-fashion-mnist package installs the files
-- (/usr/share/datasets/fashion-mnist), then ~/.mxnet/datasets/fashion-mnist; MNIST
-- has no Debian package and looks in ~/.mxnet/datasets/mnist. Nothing is downloaded.
--
-- The whole split is two tensors: images (N, 28, 28, 1) uint8 and labels (N) int32
-- (`ds:arrays()`), read by libmx's mx_idx_load (zlib, every size checked before
-- allocating). A DataLoader gathers batches straight from them.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local dataset = require("mx.gluon.data.dataset")
local image_mod = require("mx.image")
local recordio = require("mx.recordio")

local ffi, C = lib.ffi, lib.C
local class = dataset._class
local norm_index = dataset._norm_index

local M = {}

local hbuf = ffi.new("mx_tensor*[1]")

-- Read an IDX file (plain or .gz) into a new CPU tensor. Errors name the file.
function M.read_idx(path)
  if type(path) ~= "string" then error("read_idx: path must be a string", 2) end
  if C.mx_idx_load(path, hbuf) ~= 0 then error(ffi.string(C.mx_last_error()), 2) end
  return nd._wrap(hbuf[0])
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() return true end
  return false
end

local function find_file(root, base)
  for _, name in ipairs { base .. ".gz", base } do
    local p = root .. "/" .. name
    if exists(p) then return p end
  end
  return nil
end

local FILES = {
  train = { "train-images-idx3-ubyte", "train-labels-idx1-ubyte" },
  test = { "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte" },
}

-- Loaded splits, shared between dataset objects while any is alive.
local cache = setmetatable({}, { __mode = "v" })

local function home() return os.getenv("HOME") or "~" end

local function locate(spec, opts, level)
  local roots = {}
  if opts.root then
    roots[1] = opts.root:gsub("^~", home())
  else
    for _, r in ipairs(spec.roots()) do roots[#roots + 1] = r end
  end
  local split = opts.train == false and "test" or "train"
  local names = FILES[split]
  for _, root in ipairs(roots) do
    local img, lab = find_file(root, names[1]), find_file(root, names[2])
    if img and lab then return img, lab end
  end
  local msg = string.format("%s: the %s files %s(.gz) and %s(.gz) were not found in %s", spec.name,
    split, names[1], names[2], table.concat(roots, " or "))
  error(msg .. ". " .. spec.hint, level + 1)
end

local function load_split(spec, opts, level)
  local img_path, lab_path = locate(spec, opts, level + 1)
  local key = img_path .. "\0" .. lab_path
  local hit = cache[key]
  if hit then return hit[1], hit[2] end
  local ok, images = pcall(M.read_idx, img_path)
  if not ok then error(spec.name .. ": " .. tostring(images), level + 1) end
  local labels
  ok, labels = pcall(M.read_idx, lab_path)
  if not ok then error(spec.name .. ": " .. tostring(labels), level + 1) end
  local s, ls = images:shape(), labels:shape()
  if #s ~= 3 or #ls ~= 1 or s[1] ~= ls[1] then
    error(string.format("%s: %s has shape (%s) and %s has shape (%s); expected (N, H, W) images "
      .. "and N labels", spec.name, img_path, table.concat(s, ", "), lab_path,
      table.concat(ls, ", ")), level + 1)
  end
  images = images:reshape { s[1], s[2], s[3], 1 } -- HWC with one channel, like MXNet
  labels = labels:to(nil, "int32")
  cache[key] = { images, labels }
  return images, labels
end

local function make_dataset(spec)
  local cls = class(spec.name, dataset.ArrayDataset)
  cls.__tostring = dataset.Dataset.__tostring
  function cls.new(opts)
    opts = opts or {}
    if type(opts) ~= "table" then error(spec.name .. ": options must be a table", 2) end
    for k in pairs(opts) do
      if k ~= "train" and k ~= "root" and k ~= "transform" then
        error(spec.name .. ": unknown option '" .. tostring(k) .. "' (valid: train, root, transform)", 2)
      end
    end
    if opts.train ~= nil and type(opts.train) ~= "boolean" then
      error(spec.name .. ": train must be a boolean", 2)
    end
    if opts.root ~= nil and type(opts.root) ~= "string" then
      error(spec.name .. ": root must be a string (a folder)", 2)
    end
    local images, labels = load_split(spec, opts, 2)
    local self = dataset.ArrayDataset.new(images, labels)
    self._class_name = spec.name
    self._train = opts.train ~= false
    setmetatable(self, cls)
    if opts.transform then return self:transform(opts.transform) end
    return self
  end
  -- Rebuild recipe for worker threads: a module, a constructor and plain options.
  function cls._recipe(self)
    return { module = "mx.gluon.data.vision", ctor = spec.name, opts = { train = self._train } }
  end
  return cls
end

M.FashionMNIST = make_dataset {
  name = "FashionMNIST",
  roots = function()
    return { "/usr/share/datasets/fashion-mnist", home() .. "/.mxnet/datasets/fashion-mnist" }
  end,
  hint = "On Debian/Ubuntu install them with `apt-get install dataset-fashion-mnist` (they go "
    .. "to /usr/share/datasets/fashion-mnist), or pass root= a folder holding the files from "
    .. "https://github.com/zalandoresearch/fashion-mnist",
}

M.MNIST = make_dataset {
  name = "MNIST",
  roots = function() return { home() .. "/.mxnet/datasets/mnist" } end,
  hint = "Debian has no MNIST package: put the four IDX files (from "
    .. "http://yann.lecun.com/exdb/mnist/) in that folder or pass root= another one",
}

---------------------------------------------------------------- image datasets
-- ImageFolderDataset, ImageListDataset, ImageRecordDataset, CIFAR10, CIFAR100 (MXNet
-- 1.9's gluon.data.vision.datasets). Images come back as (H, W, C) uint8 NDArrays,
-- decoded by mx.image (RGB; flag 0: one gray channel); labels are numbers (MXNet's
-- 0-based class ids), or a float32 NDArray when a record carries several values.
-- `transform` is MXNet's legacy per-sample fn(img, label) -> img, label.

-- Warnings (skipped files) go to stderr; specs replace M._warn to see them.
function M._warn(msg) io.stderr:write("warning: ", msg, "\n") end

local function check_opts(who, opts, valid, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(who .. ": options must be a table, got " .. type(opts), level + 1) end
  for k in pairs(opts) do
    if not valid[k] then
      local names = {}
      for n in pairs(valid) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (valid: %s)", who, tostring(k),
        table.concat(names, ", ")), level + 1)
    end
  end
  return opts
end

local function check_transform(who, t, level)
  if t == nil or type(t) == "function" or (type(t) == "table" and getmetatable(t)
      and getmetatable(t).__call) then return t end
  error(who .. ": transform must be a function fn(img, label) or a callable transform, got "
    .. type(t), level + 1)
end

local function check_flag(who, flag, level)
  if flag == nil then return 1 end
  if flag ~= 0 and flag ~= 1 then
    error(who .. ": flag must be 1 (colour, 3 channels) or 0 (gray, 1 channel), got "
      .. tostring(flag), level + 1)
  end
  return flag
end

local function expand(path) return (path:gsub("^~", home())) end

-- The entries of a directory, sorted by name (byte order, as Python's sorted):
-- { {name=, dir=true|false}, ... }. lfs when installed, else find(1).
local function listdir(path, who, level)
  local out = {}
  local ok, lfs = pcall(require, "lfs")
  if ok then
    if lfs.attributes(path, "mode") ~= "directory" then
      error(who .. ": " .. path .. " is not a directory", level + 1)
    end
    for name in lfs.dir(path) do
      if name ~= "." and name ~= ".." then
        out[#out + 1] = { name = name, dir = lfs.attributes(path .. "/" .. name, "mode") == "directory" }
      end
    end
  else
    local q = "'" .. path:gsub("'", "'\\''") .. "'"
    local p = io.popen("test -d " .. q .. " && find -L " .. q
      .. " -mindepth 1 -maxdepth 1 -printf '%y %f\\n' 2>/dev/null && echo OK")
    local okd = false
    for line in p:lines() do
      if line == "OK" then okd = true
      else out[#out + 1] = { name = line:sub(3), dir = line:sub(1, 1) == "d" } end
    end
    p:close()
    if not okd then error(who .. ": " .. path .. " is not a directory", level + 1) end
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end
M._listdir = listdir

local IMG_EXTS = { [".jpg"] = true, [".jpeg"] = true, [".png"] = true }
local function ext_of(name) return (name:match("(%.[^./]*)$") or ""):lower() end
M._ext_of = ext_of

local function imread(path, flag)
  return image_mod.imread(path, { flag = flag })
end

-- label values -> a number (one value) or a float32 NDArray
local function label_value(v)
  if type(v) == "number" then return v end
  if #v == 1 then return v[1] end
  return nd.array(v, { dtype = "float32" })
end

local function apply_transform(t, img, label)
  if t then return t(img, label) end
  return img, label
end

local VMOD = "mx.gluon.data.vision"

-- ImageFolderDataset(root, {flag=1, transform=}): root/<class>/<image>.jpg|.jpeg|.png.
-- ds.synsets: the class folder names, sorted (label k-1 = synsets[k]); ds.items: {path,
-- label} pairs, by class then file name. Other files are skipped with a warning.
local ImageFolderDataset = class("ImageFolderDataset", dataset.Dataset)
ImageFolderDataset.__tostring = dataset.Dataset.__tostring
M.ImageFolderDataset = ImageFolderDataset

-- (listing: the synsets and items of an earlier listing, what _recipe passes to the
-- worker threads so they do not list the folder again)
function ImageFolderDataset.new(root, opts, listing)
  local who = "ImageFolderDataset"
  if type(root) ~= "string" then error(who .. ": root must be a string (a folder)", 2) end
  opts = check_opts(who, opts, { flag = true, transform = true }, 2)
  local self = setmetatable({ _root = expand(root), _flag = check_flag(who, opts.flag, 2),
    _transform = check_transform(who, opts.transform, 2), _opts = opts, synsets = {}, items = {} },
    ImageFolderDataset)
  if type(listing) == "table" then
    self.synsets, self.items = listing.synsets, listing.items
    return self
  end
  for _, e in ipairs(listdir(self._root, who, 2)) do
    local path = self._root .. "/" .. e.name
    if not e.dir then
      M._warn(string.format("Ignoring %s, which is not a directory.", path))
    else
      local label = #self.synsets
      self.synsets[#self.synsets + 1] = e.name
      for _, f in ipairs(listdir(path, who, 2)) do
        local fp = path .. "/" .. f.name
        local ext = ext_of(f.name)
        if f.dir or not IMG_EXTS[ext] then
          M._warn(string.format("Ignoring %s of type %s. Only support .jpg, .jpeg, .png", fp,
            f.dir and "directory" or ext))
        else
          self.items[#self.items + 1] = { fp, label }
        end
      end
    end
  end
  return self
end
function ImageFolderDataset.len(self) return #self.items end
function ImageFolderDataset.get(self, i)
  local it = self.items[norm_index(i, #self.items, "ImageFolderDataset:get", 2)]
  local ok, img = pcall(imread, it[1], self._flag)
  if not ok then error("ImageFolderDataset: " .. tostring(img):gsub("^[^\n]-:%d+: ", ""), 2) end
  return apply_transform(self._transform, img, it[2])
end
function ImageFolderDataset._recipe(self)
  return { module = VMOD, ctor = "ImageFolderDataset", args = { n = 3, self._root, self._opts,
    { synsets = self.synsets, items = self.items } } }
end

-- ImageListDataset(root='.', imglist, {flag=1}): imglist is a .lst file (MXNet's
-- `index\tlabel...\tpath` lines; relative to root unless absolute) or a Lua list of
-- {label, path} / {label1, ..., labelk, path}; image paths are relative to root.
local ImageListDataset = class("ImageListDataset", dataset.Dataset)
ImageListDataset.__tostring = dataset.Dataset.__tostring
M.ImageListDataset = ImageListDataset

local function parse_lst(path, who, level)
  local f, why = io.open(path, "r")
  if not f then error(who .. ": cannot open " .. path .. ": " .. tostring(why), level + 1) end
  local items, ln = {}, 0
  for line in f:lines() do
    ln = ln + 1
    line = line:gsub("\r$", "")
    if line:match("%S") then
      local parts = {}
      for p in (line .. "\t"):gmatch("([^\t]*)\t") do parts[#parts + 1] = p:match("^%s*(.-)%s*$") end
      local key = tonumber(parts[1])
      if #parts < 3 or not key then
        f:close()
        error(string.format("%s: %s line %d: expected 'index<TAB>label...<TAB>path', got %q", who,
          path, ln, line), level + 1)
      end
      local labels = {}
      for k = 2, #parts - 1 do
        labels[k - 1] = tonumber(parts[k])
        if not labels[k - 1] then
          f:close()
          error(string.format("%s: %s line %d: label %q is not a number", who, path, ln, parts[k]),
            level + 1)
        end
      end
      items[#items + 1] = { key = key, label = labels, path = parts[#parts] }
    end
  end
  f:close()
  return items
end
M._parse_lst = parse_lst

function ImageListDataset.new(root, imglist, opts)
  local who = "ImageListDataset"
  root = root or "."
  if type(root) ~= "string" then error(who .. ": root must be a string (a folder)", 2) end
  opts = check_opts(who, opts, { flag = true, transform = true }, 2)
  local self = setmetatable({ _root = expand(root), _flag = check_flag(who, opts.flag, 2),
    _transform = check_transform(who, opts.transform, 2), _opts = opts, _imglist = imglist },
    ImageListDataset)
  local items
  if type(imglist) == "string" then
    local p = imglist:sub(1, 1) == "/" and imglist or self._root .. "/" .. imglist
    items = parse_lst(p, who, 2)
  elseif type(imglist) == "table" then
    items = {}
    for k, v in ipairs(imglist) do
      if type(v) ~= "table" or #v < 2 or type(v[#v]) ~= "string" then
        error(string.format("%s: imglist[%d] must be {label, ..., path}", who, k), 2)
      end
      local labels = {}
      for j = 1, #v - 1 do
        if type(v[j]) ~= "number" then
          error(string.format("%s: imglist[%d][%d] (a label) is not a number", who, k, j), 2)
        end
        labels[j] = v[j]
      end
      items[k] = { key = k, label = labels, path = v[#v] }
    end
  else
    error(who .. ": imglist must be a .lst path or a list of {label, ..., path}", 2)
  end
  self.items = items
  return self
end
function ImageListDataset.len(self) return #self.items end
function ImageListDataset.get(self, i)
  local it = self.items[norm_index(i, #self.items, "ImageListDataset:get", 2)]
  local path = it.path:sub(1, 1) == "/" and it.path or self._root .. "/" .. it.path
  local ok, img = pcall(imread, path, self._flag)
  if not ok then error("ImageListDataset: " .. tostring(img):gsub("^[^\n]-:%d+: ", ""), 2) end
  return apply_transform(self._transform, img, label_value(it.label))
end
function ImageListDataset._recipe(self)
  return { module = VMOD, ctor = "ImageListDataset", args = { n = 3, self._root, self._imglist, self._opts } }
end

-- ImageRecordDataset(filename, {flag=1, transform=}): the images of a .rec file made by
-- im2rec (MXNet's or tools/im2rec.lua), with the .idx next to it (same name); the
-- label is the record's IRHeader label.
local ImageRecordDataset = class("ImageRecordDataset", dataset.Dataset)
ImageRecordDataset.__tostring = dataset.Dataset.__tostring
M.ImageRecordDataset = ImageRecordDataset

function ImageRecordDataset.new(filename, opts)
  local who = "ImageRecordDataset"
  if type(filename) ~= "string" then error(who .. ": filename must be a string (a .rec file)", 2) end
  opts = check_opts(who, opts, { flag = true, transform = true }, 2)
  local idx = filename:gsub("%.[^./]*$", "") .. ".idx"
  local fi = io.open(idx, "rb")
  if not fi then
    error(string.format("%s: %s has no index beside it (%s is missing): make the .rec and its "
      .. ".idx with tools/im2rec.lua or MXNet's im2rec", who, filename, idx), 2)
  end
  fi:close()
  local ok, rec = pcall(recordio.MXIndexedRecordIO, idx, filename, "r")
  if not ok then error(who .. ": " .. tostring(rec):gsub("^[^\n]-:%d+: ", ""), 2) end
  return setmetatable({ _file = filename, _flag = check_flag(who, opts.flag, 2),
    _transform = check_transform(who, opts.transform, 2), _opts = opts, _rec = rec,
    _keys = rec.keys, _rio = recordio }, ImageRecordDataset)
end
function ImageRecordDataset.len(self) return #self._keys end
function ImageRecordDataset.get(self, i)
  local key = self._keys[norm_index(i, #self._keys, "ImageRecordDataset:get", 2)]
  local ok, header, img = pcall(function()
    local h, payload = self._rio.unpack(self._rec:read_idx(key))
    return h, image_mod.imdecode(payload, { flag = self._flag })
  end)
  if not ok then
    error(string.format("ImageRecordDataset: %s record %s: %s", self._file, tostring(key),
      tostring(header):gsub("^[^\n]-:%d+: ", "")), 2)
  end
  return apply_transform(self._transform, img, label_value(header.label))
end
function ImageRecordDataset._recipe(self)
  return { module = VMOD, ctor = "ImageRecordDataset", args = { n = 2, self._file, self._opts } }
end

-- CIFAR10({root=, train=true, transform=}) and CIFAR100({root=, train=true,
-- fine_label=false, transform=}): the binary versions' files (CIFAR-10:
-- data_batch_1..5.bin / test_batch.bin, records of 1 label byte + 3072 bytes CHW;
-- CIFAR-100: train.bin / test.bin, coarse + fine label bytes + 3072) in root or in
-- root/cifar-10-batches-bin (root/cifar-100-binary). Default roots
-- ~/.mxnet/datasets/cifar10 and cifar100 (MXNet's); nothing is downloaded. Images
-- (N, 32, 32, 3) uint8 HWC and labels (N) int32, as one ArrayDataset.
local CIFAR_SPECS = {
  CIFAR10 = { sub = "cifar-10-batches-bin", labels = 1, root = "cifar10",
    train = { "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
      "data_batch_5.bin" }, test = { "test_batch.bin" },
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz" },
  CIFAR100 = { sub = "cifar-100-binary", labels = 2, root = "cifar100",
    train = { "train.bin" }, test = { "test.bin" },
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz" },
}

local function read_cifar(name, files, nlab, lab_off, level)
  local chunks, n = {}, 0
  local rec = 3072 + nlab
  for k, path in ipairs(files) do
    local f, why = io.open(path, "rb")
    if not f then error(name .. ": cannot open " .. path .. ": " .. tostring(why), level + 1) end
    local s = f:read("*a")
    f:close()
    if #s == 0 or #s % rec ~= 0 then
      error(string.format("%s: %s has %d bytes, not a whole number of %d-byte records (%d label "
        .. "byte%s + 3072 pixels)", name, path, #s, rec, nlab, nlab > 1 and "s" or ""), level + 1)
    end
    chunks[k] = s
    n = n + #s / rec
  end
  local chw = nd.zeros({ n, 3, 32, 32 }, { dtype = "uint8" })
  local labels = nd.zeros({ n }, { dtype = "int32" })
  local ip, lp = chw:data_ptr(), labels:data_ptr()
  local r = 0
  for _, s in ipairs(chunks) do
    local p = ffi.cast("const uint8_t *", s)
    for off = 0, #s - 1, rec do
      lp[r] = p[off + lab_off]
      ffi.copy(ip + r * 3072, p + off + nlab, 3072)
      r = r + 1
    end
  end
  return nd.transpose(chw, { axes = { 1, 3, 4, 2 } }), labels
end

local function make_cifar(name)
  local spec = CIFAR_SPECS[name]
  local cls = class(name, dataset.ArrayDataset)
  cls.__tostring = dataset.Dataset.__tostring
  local valid = { root = true, train = true, transform = true }
  if name == "CIFAR100" then valid.fine_label = true end
  function cls.new(opts)
    opts = check_opts(name, opts, valid, 2)
    if opts.train ~= nil and type(opts.train) ~= "boolean" then
      error(name .. ": train must be a boolean", 2)
    end
    if opts.root ~= nil and type(opts.root) ~= "string" then
      error(name .. ": root must be a string (a folder)", 2)
    end
    local root = expand(opts.root or (home() .. "/.mxnet/datasets/" .. spec.root))
    local names = opts.train == false and spec.test or spec.train
    local files
    for _, dir in ipairs { root, root .. "/" .. spec.sub } do
      local all = {}
      for k, f in ipairs(names) do
        if exists(dir .. "/" .. f) then all[k] = dir .. "/" .. f else all = nil break end
      end
      if all then files = all break end
    end
    if not files then
      error(string.format("%s: the files %s were not found in %s or %s/%s. Nothing is downloaded: "
        .. "extract %s there, or pass root= the folder holding them", name, table.concat(names, ", "),
        root, root, spec.sub, spec.url), 2)
    end
    local lab_off = (name == "CIFAR100" and opts.fine_label) and 1 or 0
    local key = table.concat(files, "\0") .. "\0" .. lab_off
    local hit = cache[key]
    if not hit then
      local images, labels = read_cifar(name, files, spec.labels, lab_off, 2)
      hit = { images, labels }
      cache[key] = hit
    end
    local self = dataset.ArrayDataset.new(hit[1], hit[2])
    self._class_name = name
    self._opts = { root = opts.root, train = opts.train, fine_label = opts.fine_label }
    setmetatable(self, cls)
    if opts.transform then return self:transform(check_transform(name, opts.transform, 2)) end
    return self
  end
  function cls._recipe(self)
    return { module = VMOD, ctor = name, opts = self._opts }
  end
  return cls
end
M.CIFAR10 = make_cifar("CIFAR10")
M.CIFAR100 = make_cifar("CIFAR100")

return M
