-- mx.gluon.model_zoo.vision.resnet — ResNet V1 and V2 exactly as MXNet 1.9's
-- python/mxnet/gluon/model_zoo/vision/resnet.py: the same blocks (BasicBlockV1/V2,
-- BottleneckV1/V2), layer order and attribute names, so collect_params() gives the
-- structural names MXNet's save_parameters writes ("features.1.0.body.0.weight") and an
-- MXNet .params file of the same model loads with net:load_parameters(path).
--
--   local vision = mx.gluon.model_zoo.vision
--   local net = vision.resnet18_v1({ classes = 10, thumbnail = true })  -- CIFAR-sized input
--   local net = vision.get_resnet(2, 50)                                 -- ResNet-50 v2
--
-- GluonCV 0.10's SE-ResNets (se_resnet18_v1 ... se_resnet152_v2, gluoncv/model_zoo/resnet.py)
-- are the same networks with a squeeze-excite path in every block (`use_se`).
--
-- Options (MXNet's keyword arguments): classes=1000, thumbnail=false (a 3x3 stem for
-- 32x32 inputs instead of 7x7/2 conv + max pool), pretrained=false (true loads
-- <root>/resnet18_v1-<hash>.params from MXNet's model-store layout: model_store.lua),
-- ctx (where the pretrained weights go), root (default ~/.mxnet/models).
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local check_opts = require("mx.core.class").check_opts
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local type, error, tostring = type, error, tostring
local relu, add, mul, adaptive, expand_dims = nd.relu, nd.add, nd.mul,
  nd.adaptive_avg_pooling2d, nd.expand_dims

local M = {}

local nn = U.nn

local function conv3x3(channels, stride, in_channels)
  return nn().Conv2D(channels, 3, { strides = stride, padding = 1, use_bias = false,
    in_channels = in_channels })
end

---------------------------------------------------------------- residual blocks
-- The squeeze-excite path of GluonCV's blocks: Dense(c/16) -> relu -> Dense(c) -> sigmoid
-- over the global average, scaling each channel.
local function make_se(L, channels)
  local se = L.HybridSequential()
  se:add(L.Dense(math.floor(channels / 16), { use_bias = false }))
  se:add(L.Activation("relu"))
  se:add(L.Dense(channels, { use_bias = false }))
  se:add(L.Activation("sigmoid"))
  return se
end
local ONE, AX3 = { output_size = { 1 } }, { axis = 3 }
local function apply_se(se, x)
  local w = se(adaptive(x, ONE))
  return mul(x, expand_dims(expand_dims(w, AX3), AX3))
end

-- The last BatchNorm of a block: gamma starts at 0 with GluonCV's last_gamma
local function last_bn(L, o)
  if o and o.last_gamma then return L.BatchNorm({ gamma_initializer = "zeros" }) end
  return L.BatchNorm()
end

-- Every block takes (channels, stride, downsample=false, in_channels=0, {use_se=false,
-- last_gamma=false}): the last table is GluonCV's additions.
-- BasicBlockV1(channels, stride, downsample=false, in_channels=0): two 3x3 convs
-- (ResNet V1 18/34).
local BasicBlockV1 = HybridBlock:extend("BasicBlockV1")
M.BasicBlockV1 = BasicBlockV1
function BasicBlockV1:__init(channels, stride, downsample, in_channels, opts)
  HybridBlock.__init(self)
  local L = nn()
  in_channels = in_channels or 0
  self.body = L.HybridSequential()
  self.body:add(conv3x3(channels, stride, in_channels))
  self.body:add(L.BatchNorm())
  self.body:add(L.Activation("relu"))
  self.body:add(conv3x3(channels, 1, channels))
  self.body:add(last_bn(L, opts))
  if opts and opts.use_se then self.se = make_se(L, channels) end
  if downsample then
    self.downsample = L.HybridSequential()
    self.downsample:add(L.Conv2D(channels, 1, { strides = stride, use_bias = false,
      in_channels = in_channels }))
    self.downsample:add(L.BatchNorm())
  end
end
function BasicBlockV1:forward(x)
  local residual = x
  x = self.body(x)
  local se = self.se
  if se then x = apply_se(se, x) end
  local ds = self.downsample
  if ds then residual = ds(residual) end
  return relu(add(residual, x))
end

-- BottleneckV1(channels, stride, downsample=false, in_channels=0): 1x1 -> 3x3 -> 1x1
-- (ResNet V1 50/101/152; the 1x1 convs keep MXNet's default bias).
local BottleneckV1 = HybridBlock:extend("BottleneckV1")
M.BottleneckV1 = BottleneckV1
function BottleneckV1:__init(channels, stride, downsample, in_channels, opts)
  HybridBlock.__init(self)
  local L = nn()
  in_channels = in_channels or 0
  local c4 = math.floor(channels / 4)
  self.body = L.HybridSequential()
  self.body:add(L.Conv2D(c4, 1, { strides = stride }))
  self.body:add(L.BatchNorm())
  self.body:add(L.Activation("relu"))
  self.body:add(conv3x3(c4, 1, c4))
  self.body:add(L.BatchNorm())
  self.body:add(L.Activation("relu"))
  self.body:add(L.Conv2D(channels, 1, { strides = 1 }))
  self.body:add(last_bn(L, opts))
  if opts and opts.use_se then self.se = make_se(L, channels) end
  if downsample then
    self.downsample = L.HybridSequential()
    self.downsample:add(L.Conv2D(channels, 1, { strides = stride, use_bias = false,
      in_channels = in_channels }))
    self.downsample:add(L.BatchNorm())
  end
end
BottleneckV1.forward = BasicBlockV1.forward

-- BasicBlockV2(channels, stride, downsample=false, in_channels=0): pre-activation
-- (BN -> relu -> conv) twice (ResNet V2 18/34).
local BasicBlockV2 = HybridBlock:extend("BasicBlockV2")
M.BasicBlockV2 = BasicBlockV2
function BasicBlockV2:__init(channels, stride, downsample, in_channels, opts)
  HybridBlock.__init(self)
  local L = nn()
  in_channels = in_channels or 0
  self.bn1 = L.BatchNorm()
  self.conv1 = conv3x3(channels, stride, in_channels)
  self.bn2 = last_bn(L, opts)
  self.conv2 = conv3x3(channels, 1, channels)
  if opts and opts.use_se then self.se = make_se(L, channels) end
  if downsample then
    self.downsample = L.Conv2D(channels, 1, { strides = stride, use_bias = false,
      in_channels = in_channels })
  end
end
function BasicBlockV2:forward(x)
  local residual = x
  x = relu(self.bn1(x))
  local ds = self.downsample
  if ds then residual = ds(x) end
  x = self.conv1(x)
  x = relu(self.bn2(x))
  x = self.conv2(x)
  local se = self.se
  if se then x = apply_se(se, x) end
  return add(x, residual)
end

-- BottleneckV2(channels, stride, downsample=false, in_channels=0): pre-activation
-- 1x1 -> 3x3 -> 1x1 (ResNet V2 50/101/152).
local BottleneckV2 = HybridBlock:extend("BottleneckV2")
M.BottleneckV2 = BottleneckV2
function BottleneckV2:__init(channels, stride, downsample, in_channels, opts)
  HybridBlock.__init(self)
  local L = nn()
  in_channels = in_channels or 0
  local c4 = math.floor(channels / 4)
  self.bn1 = L.BatchNorm()
  self.conv1 = L.Conv2D(c4, 1, { strides = 1, use_bias = false })
  self.bn2 = L.BatchNorm()
  self.conv2 = conv3x3(c4, stride, c4)
  self.bn3 = last_bn(L, opts)
  self.conv3 = L.Conv2D(channels, 1, { strides = 1, use_bias = false })
  if opts and opts.use_se then self.se = make_se(L, channels) end
  if downsample then
    self.downsample = L.Conv2D(channels, 1, { strides = stride, use_bias = false,
      in_channels = in_channels })
  end
end
function BottleneckV2:forward(x)
  local residual = x
  x = relu(self.bn1(x))
  local ds = self.downsample
  if ds then residual = ds(x) end
  x = self.conv1(x)
  x = relu(self.bn2(x))
  x = self.conv2(x)
  x = relu(self.bn3(x))
  x = self.conv3(x)
  local se = self.se
  if se then x = apply_se(se, x) end
  return add(x, residual)
end

---------------------------------------------------------------- networks
-- A stage: `layers` blocks, the first with the stride and a downsample path when the
-- channel count changes (MXNet's _make_layer).
local function make_layer(blk, layers, channels, stride, in_channels, bo)
  local layer = nn().HybridSequential()
  layer:add(blk(channels, stride, channels ~= in_channels, in_channels, bo))
  for _ = 2, layers do layer:add(blk(channels, 1, false, channels, bo)) end
  return layer
end

local NET_OPTS = { classes = true, thumbnail = true, use_se = true, last_gamma = true }
local function check_net(who, layers, channels, opts, level)
  level = level + 1
  local o = check_opts(who, opts, NET_OPTS, level)
  if type(layers) ~= "table" or type(channels) ~= "table" or #layers ~= #channels - 1 then
    error(who .. ": layers must be a list one shorter than channels", level)
  end
  local classes = o.classes or 1000
  if type(classes) ~= "number" or classes < 1 or classes % 1 ~= 0 then
    error(who .. ": classes must be a positive integer, got " .. tostring(classes), level)
  end
  return classes, o.thumbnail == true, { use_se = o.use_se, last_gamma = o.last_gamma }
end

-- ResNetV1(block, layers, channels, {classes=1000, thumbnail=false, use_se=false,
-- last_gamma=false})
local ResNetV1 = HybridBlock:extend("ResNetV1")
M.ResNetV1 = ResNetV1
function ResNetV1:__init(blk, layers, channels, opts)
  HybridBlock.__init(self)
  local classes, thumbnail, bo = check_net("ResNetV1", layers, channels, opts, 3)
  local L = nn()
  self.features = L.HybridSequential()
  if thumbnail then
    self.features:add(conv3x3(channels[1], 1, 0))
  else
    self.features:add(L.Conv2D(channels[1], 7, { strides = 2, padding = 3, use_bias = false }))
    self.features:add(L.BatchNorm())
    self.features:add(L.Activation("relu"))
    self.features:add(L.MaxPool2D(3, { strides = 2, padding = 1 }))
  end
  for i, num_layer in ipairs(layers) do
    self.features:add(make_layer(blk, num_layer, channels[i + 1], i == 1 and 1 or 2,
      channels[i], bo))
  end
  self.features:add(L.GlobalAvgPool2D())
  self.output = L.Dense(classes, { in_units = channels[#channels] })
end
function ResNetV1:forward(x)
  return self.output(self.features(x))
end

-- ResNetV2(block, layers, channels, {classes=1000, thumbnail=false, use_se=false,
-- last_gamma=false})
local ResNetV2 = HybridBlock:extend("ResNetV2")
M.ResNetV2 = ResNetV2
function ResNetV2:__init(blk, layers, channels, opts)
  HybridBlock.__init(self)
  local classes, thumbnail, bo = check_net("ResNetV2", layers, channels, opts, 3)
  local L = nn()
  self.features = L.HybridSequential()
  self.features:add(L.BatchNorm({ scale = false, center = false }))
  if thumbnail then
    self.features:add(conv3x3(channels[1], 1, 0))
  else
    self.features:add(L.Conv2D(channels[1], 7, { strides = 2, padding = 3, use_bias = false }))
    self.features:add(L.BatchNorm())
    self.features:add(L.Activation("relu"))
    self.features:add(L.MaxPool2D(3, { strides = 2, padding = 1 }))
  end
  local in_channels = channels[1]
  for i, num_layer in ipairs(layers) do
    self.features:add(make_layer(blk, num_layer, channels[i + 1], i == 1 and 1 or 2,
      in_channels, bo))
    in_channels = channels[i + 1]
  end
  self.features:add(L.BatchNorm())
  self.features:add(L.Activation("relu"))
  self.features:add(L.GlobalAvgPool2D())
  self.features:add(L.Flatten())
  self.output = L.Dense(classes, { in_units = in_channels })
end
ResNetV2.forward = ResNetV1.forward

---------------------------------------------------------------- constructors
-- MXNet's resnet_spec: block type, blocks per stage, channels (stem, then per stage).
local SPEC = {
  [18] = { "basic_block", { 2, 2, 2, 2 }, { 64, 64, 128, 256, 512 } },
  [34] = { "basic_block", { 3, 4, 6, 3 }, { 64, 64, 128, 256, 512 } },
  [50] = { "bottle_neck", { 3, 4, 6, 3 }, { 64, 256, 512, 1024, 2048 } },
  [101] = { "bottle_neck", { 3, 4, 23, 3 }, { 64, 256, 512, 1024, 2048 } },
  [152] = { "bottle_neck", { 3, 8, 36, 3 }, { 64, 256, 512, 1024, 2048 } },
}
local NETS = { ResNetV1, ResNetV2 }
local BLOCKS = { { basic_block = BasicBlockV1, bottle_neck = BottleneckV1 },
  { basic_block = BasicBlockV2, bottle_neck = BottleneckV2 } }
local GET_EXTRA = { thumbnail = true, use_se = true, last_gamma = true }

local function get_resnet(version, num_layers, opts, level)
  level = level + 1
  local o = U.opts("get_resnet", opts, GET_EXTRA, level)
  local spec = SPEC[num_layers]
  if spec == nil then
    error("get_resnet: invalid number of layers: " .. tostring(num_layers)
      .. ". Options are 18, 34, 50, 101, 152", level)
  end
  if version ~= 1 and version ~= 2 then
    error("get_resnet: invalid resnet version: " .. tostring(version) .. ". Options are 1 and 2",
      level)
  end
  local net = NETS[version](BLOCKS[version][spec[1]], spec[2], spec[3],
    { classes = o.classes, thumbnail = o.thumbnail, use_se = o.use_se,
      last_gamma = o.last_gamma })
  local name = string.format("%sresnet%d_v%d", o.use_se and "se_" or "", num_layers, version)
  return (U.finish(net, name, o, o.use_se and "gluoncv" or "mxnet", level))
end

-- get_resnet(version, num_layers, {classes=1000, thumbnail=false, use_se=false,
-- last_gamma=false, pretrained=false, ctx=, root=})
function M.get_resnet(version, num_layers, opts)
  local net = get_resnet(version, num_layers, opts, 2)
  return net
end

-- resnet18_v1(opts) ... resnet152_v2(opts); GluonCV's se_resnet18_v1 ... se_resnet152_v2
for _, n in ipairs { 18, 34, 50, 101, 152 } do
  for v = 1, 2 do
    M[string.format("resnet%d_v%d", n, v)] = function(opts, level)
      local net = get_resnet(v, n, opts, level or 2)
      return net
    end
    M[string.format("se_resnet%d_v%d", n, v)] = function(opts, level)
      local o = {}
      for k, x in pairs(opts or {}) do o[k] = x end
      o.use_se = true
      local net = get_resnet(v, n, o, level or 2)
      return net
    end
  end
end

return M
