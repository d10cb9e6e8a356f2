-- mx.gluoncv.model_zoo.resnetv1b — GluonCV 0.10's ResNetV1b (gluoncv/model_zoo/resnetv1b.py):
-- the torchvision-style ResNet (stride in the 3x3 conv of each bottleneck), optionally with
-- the deep 3x3 stem of the "v1s" variants and dilated stages 3 and 4 (output stride 8) as
-- the segmentation networks use it. GluonCV's attribute names, so collect_params() gives
-- its structural names ("layer3.0.conv2.weight", "layer1.0.downsample.1.gamma").
--
--   local v1b = require("mx.gluoncv.model_zoo.resnetv1b")
--   local net = v1b.resnet50_v1b({ dilated = true })   -- stride 8 features (c3, c4)
--   local net = v1b.resnet101_v1s({ dilated = true })  -- deep stem, as FCN/DeepLabV3
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")
local check_opts = require("mx.core.class").check_opts

local HybridBlock = block.HybridBlock
local error, tostring, type = error, tostring, type
local add, relu = nd.add, nd.relu

local M = {}

-- BatchNorm with GluonCV's norm_kwargs (use_global_stats)
local function norm(L, o, extra)
  local k = { use_global_stats = o.use_global_stats or nil }
  if extra then for key, v in pairs(extra) do k[key] = v end end
  return L.BatchNorm(k)
end

-- BottleneckV1b(planes, strides, dilation, downsample, previous_dilation, o)
local Bottleneck = HybridBlock:extend("BottleneckV1b")
M.BottleneckV1b = Bottleneck
function Bottleneck:__init(planes, strides, dilation, downsample, o)
  HybridBlock.__init(self)
  local L = U.nn()
  self.conv1 = L.Conv2D(planes, 1, { use_bias = false })
  self.bn1 = norm(L, o)
  self.relu1 = L.Activation("relu")
  self.conv2 = L.Conv2D(planes, 3, { strides = strides, padding = dilation,
    dilation = dilation, use_bias = false })
  self.bn2 = norm(L, o)
  self.relu2 = L.Activation("relu")
  self.conv3 = L.Conv2D(planes * 4, 1, { use_bias = false })
  self.bn3 = norm(L, o, o.last_gamma and { gamma_initializer = "zeros" } or nil)
  self.relu3 = L.Activation("relu")
  if downsample then self.downsample = downsample end
end
function Bottleneck:forward(x)
  local out = self.relu1(self.bn1(self.conv1(x)))
  out = self.relu2(self.bn2(self.conv2(out)))
  out = self.bn3(self.conv3(out))
  local residual = self.downsample and self.downsample(x) or x
  return relu(add(out, residual))
end

-- ResNetV1b(layers, {classes=1000, dilated=false, deep_stem=false, stem_width=32,
-- last_gamma=false, use_global_stats=false, final_drop=0}): bottleneck stages only (50+)
local ResNetV1b = HybridBlock:extend("ResNetV1b")
M.ResNetV1b = ResNetV1b
local NET_OPTS = { classes = true, dilated = true, deep_stem = true, stem_width = true,
  last_gamma = true, use_global_stats = true, final_drop = true }
function ResNetV1b:__init(layers, opts)
  HybridBlock.__init(self)
  local o = check_opts("ResNetV1b", opts, NET_OPTS, 3)
  if type(layers) ~= "table" or #layers ~= 4 then
    error("ResNetV1b: layers must be a list of 4 block counts, got " .. tostring(layers), 3)
  end
  local L = U.nn()
  local sw = o.stem_width or 32
  self._inplanes = o.deep_stem and sw * 2 or 64
  if o.deep_stem then
    self.conv1 = L.HybridSequential()
    self.conv1:add(L.Conv2D(sw, 3, { strides = 2, padding = 1, use_bias = false }))
    self.conv1:add(norm(L, o))
    self.conv1:add(L.Activation("relu"))
    self.conv1:add(L.Conv2D(sw, 3, { strides = 1, padding = 1, use_bias = false }))
    self.conv1:add(norm(L, o))
    self.conv1:add(L.Activation("relu"))
    self.conv1:add(L.Conv2D(sw * 2, 3, { strides = 1, padding = 1, use_bias = false }))
  else
    self.conv1 = L.Conv2D(64, 7, { strides = 2, padding = 3, use_bias = false })
  end
  self.bn1 = norm(L, o)
  self.relu = L.Activation("relu")
  self.maxpool = L.MaxPool2D({ pool_size = 3, strides = 2, padding = 1 })
  self.layer1 = self:_make_layer(L, 64, layers[1], 1, 1, o)
  self.layer2 = self:_make_layer(L, 128, layers[2], 2, 1, o)
  if o.dilated then
    self.layer3 = self:_make_layer(L, 256, layers[3], 1, 2, o)
    self.layer4 = self:_make_layer(L, 512, layers[4], 1, 4, o)
  else
    self.layer3 = self:_make_layer(L, 256, layers[3], 2, 1, o)
    self.layer4 = self:_make_layer(L, 512, layers[4], 2, 1, o)
  end
  self.avgpool = L.GlobalAvgPool2D()
  self.flat = L.Flatten()
  if (o.final_drop or 0) > 0 then self.drop = L.Dropout(o.final_drop) end
  self.fc = L.Dense(o.classes or 1000, { in_units = 2048 })
end

-- a stage: the first block strides (and dilates by half the stage's dilation, as GluonCV)
function ResNetV1b:_make_layer(L, planes, blocks, strides, dilation, o)
  local downsample
  if strides ~= 1 or self._inplanes ~= planes * 4 then
    downsample = L.HybridSequential()
    downsample:add(L.Conv2D(planes * 4, 1, { strides = strides, use_bias = false }))
    downsample:add(norm(L, o))
  end
  local layers = L.HybridSequential()
  local first = dilation == 4 and 2 or 1
  layers:add(Bottleneck(planes, strides, first, downsample, o))
  self._inplanes = planes * 4
  for _ = 2, blocks do layers:add(Bottleneck(planes, 1, dilation, nil, o)) end
  return layers
end

-- features(x): c3, c4 (stages 3 and 4), what the segmentation heads take
function ResNetV1b:features(x)
  x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
  local c3 = self.layer3(self.layer2(self.layer1(x)))
  return c3, self.layer4(c3)
end

function ResNetV1b:forward(x)
  local _, c4 = self:features(x)
  x = self.flat(self.avgpool(c4))
  if self.drop then x = self.drop(x) end
  return self.fc(x)
end

local DEPTHS = { [50] = { 3, 4, 6, 3 }, [101] = { 3, 4, 23, 3 }, [152] = { 3, 8, 36, 3 } }
M.DEPTHS = DEPTHS

local GET_EXTRA = { "dilated", "last_gamma", "use_global_stats", "final_drop" }
local function getter(depth, suffix, stem)
  local name = "resnet" .. depth .. "_" .. suffix
  return function(opts, level)
    level = (level or 1) + 1
    local o = U.opts(name, opts, GET_EXTRA, level)
    local net = ResNetV1b(DEPTHS[depth], { classes = o.classes, dilated = o.dilated,
      deep_stem = stem and true or nil, stem_width = stem, last_gamma = o.last_gamma,
      use_global_stats = o.use_global_stats, final_drop = o.final_drop })
    return (U.finish(net, name, o, "gluoncv", level))
  end
end
for depth in pairs(DEPTHS) do
  M["resnet" .. depth .. "_v1b"] = getter(depth, "v1b")
  M["resnet" .. depth .. "_v1s"] = getter(depth, "v1s", 64)
end

return M
