-- mx.gluon.data.vision datasets: MNIST and FashionMNIST from IDX files.
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
local lib = require("mx._lib")
local nd = require("mx.nd")
local dataset = require("mx.gluon.data.dataset")

local ffi, C = lib.ffi, lib.C
local class = dataset._class

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

return M
