-- mx.io.MNISTIter: MXNet's C++ MNIST iterator (src/io/iter_mnist.cc) over IDX files
-- (plain or .gz, read by libmx's IDX reader: mx.gluon.data.vision.read_idx). Arguments
-- by name, as MXNet's:
--
--   MNISTIter{image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
--             batch_size=128, shuffle=true, flat=false, seed=0, silent=false, num_parts=1,
--             part_index=0, prefetch_buffer=, ctx=, dtype=}
--
-- data (batch_size, 1, 28, 28) float32 (flat: (batch_size, 784)), the pixels / 256 as
-- MXNet's; label (batch_size) float32; the short last batch is dropped (MXNet's). shuffle
-- permutes the samples once, at construction, by `seed` (the same order every run;
-- MXNet's generator differs). Debian's dataset-fashion-mnist installs such files under
-- /usr/share/datasets/fashion-mnist.
local nd = require("mx.nd")
local io_ = require("mx.io")
local BL = require("mx.io.batch_loader")

local error, tostring = error, tostring

local M = {}

local MNISTIter = io_._class("MNISTIter", BL.Loader)
M.MNISTIter = MNISTIter
local SIG = io_._sig(MNISTIter, {}, { "image", "label", "batch_size", "shuffle", "flat", "seed",
  "silent", "num_parts", "part_index", "prefetch_buffer", "ctx", "dtype" })

function MNISTIter:__init(...)
  local o = SIG(3, ...)
  local who = "MNISTIter"
  local read_idx = require("mx.gluon.data.vision").read_idx
  local function load(path, what)
    if type(path) ~= "string" then
      error(who .. ": " .. what .. " must be a file name, got " .. type(path), 4)
    end
    local ok, t = pcall(read_idx, path)
    if not ok then error(who .. ": " .. tostring(t):gsub("^[^\n]-:%d+: ", ""), 4) end
    return t
  end
  local img = load(o.image or "./train-images-idx3-ubyte", "image")
  local lab = load(o.label or "./train-labels-idx1-ubyte", "label")
  local s = img:shape()
  if #s ~= 3 or lab:ndim() ~= 1 or lab:shape()[1] ~= s[1] then
    error(string.format("%s: expected (N, H, W) images and N labels, got (%s) and (%s)", who,
      table.concat(s, ", "), table.concat(lab:shape(), ", ")), 3)
  end
  local dt = o.dtype and o.dtype ~= "None" and o.dtype or "float32"
  local data = nd.div_scalar(img:astype(dt), { scalar = 256 })
  data = o.flat and data:reshape(s[1], s[2] * s[3]) or data:reshape(s[1], 1, s[2], s[3])
  local label = lab:astype("float32")
  local parts, part = o.num_parts or 1, (o.part_index or 0) + 1
  if parts > 1 then
    if part < 1 or part > parts then error(who .. ": part_index must be in 0.." .. parts - 1, 3) end
    local a, b = BL.part(s[1], parts, part)
    data, label = data[{ { a + 1, b } }], label[{ { a + 1, b } }]
  end
  local fields = { { "data", data }, { "softmax_label", label, label = true } }
  if o.shuffle ~= false then
    local sampler = require("mx.gluon.data").RandomSampler(data:shape()[1], { seed = o.seed or 0 })
    local perm = {}
    for i in sampler:iter() do perm[#perm + 1] = i end
    BL.permute(fields, nd.array(perm, { dtype = "int64" }))
  end
  self:setup(who, fields, o.batch_size or 128, { drop_last = true }, 3)
  if o.silent == false then
    io.stderr:write(string.format("MNISTIter: load %d images, shuffle=%s, shape=(%s)\n",
      data:shape()[1], tostring(o.shuffle ~= false), table.concat(data:shape(), ",")))
  end
end

return M
