-- mx.gluon.model_zoo.vision.densenet — DenseNet-121/161/169/201 as MXNet 1.9's
-- model_zoo/vision/densenet.py builds them: dense layers that concatenate their input
-- (an Identity branch) with BN-relu-conv1x1-BN-relu-conv3x3 features, transitions
-- (BN-relu-conv1x1-avgpool) between the blocks, MXNet's structural parameter names.
-- Input 3x224x224 (the final 7x7 average pool).
local block = require("mx.gluon.block")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring, floor = error, tostring, math.floor

local M = {}

local function dense_layer(L, growth_rate, bn_size, dropout)
  local new = L.HybridSequential()
  new:add(L.BatchNorm())
  new:add(L.Activation("relu"))
  new:add(L.Conv2D(bn_size * growth_rate, 1, { use_bias = false }))
  new:add(L.BatchNorm())
  new:add(L.Activation("relu"))
  new:add(L.Conv2D(growth_rate, 3, { padding = 1, use_bias = false }))
  if dropout and dropout > 0 then new:add(L.Dropout(dropout)) end
  local out = L.HybridConcatenate(2)
  out:add(L.Identity())
  out:add(new)
  return out
end

local function dense_block(L, num_layers, bn_size, growth_rate, dropout)
  local out = L.HybridSequential()
  for _ = 1, num_layers do out:add(dense_layer(L, growth_rate, bn_size, dropout)) end
  return out
end

local function transition(L, num_output_features)
  local out = L.HybridSequential()
  out:add(L.BatchNorm())
  out:add(L.Activation("relu"))
  out:add(L.Conv2D(num_output_features, 1, { use_bias = false }))
  out:add(L.AvgPool2D(2, { strides = 2 }))
  return out
end

-- DenseNet(num_init_features, growth_rate, block_config, {bn_size=4, dropout=0,
-- classes=1000})
local DenseNet = HybridBlock:extend("DenseNet")
M.DenseNet = DenseNet
function DenseNet:__init(num_init_features, growth_rate, block_config, opts)
  HybridBlock.__init(self)
  local o = U.opts("DenseNet", opts, { bn_size = true, dropout = true }, 3, true)
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  f:add(L.Conv2D(num_init_features, 7, { strides = 2, padding = 3, use_bias = false }))
  f:add(L.BatchNorm())
  f:add(L.Activation("relu"))
  f:add(L.MaxPool2D(3, { strides = 2, padding = 1 }))
  local num_features = num_init_features
  for i, num_layers in ipairs(block_config) do
    f:add(dense_block(L, num_layers, o.bn_size or 4, growth_rate, o.dropout or 0))
    num_features = num_features + num_layers * growth_rate
    if i ~= #block_config then
      num_features = floor(num_features / 2)
      f:add(transition(L, num_features))
    end
  end
  f:add(L.BatchNorm())
  f:add(L.Activation("relu"))
  f:add(L.AvgPool2D(7))
  f:add(L.Flatten())
  self.output = L.Dense(o.classes or 1000)
end
function DenseNet:forward(x) return self.output(self.features(x)) end

-- MXNet's densenet_spec: initial features, growth rate, layers per dense block
local SPEC = {
  [121] = { 64, 32, { 6, 12, 24, 16 } },
  [161] = { 96, 48, { 6, 12, 36, 24 } },
  [169] = { 64, 32, { 6, 12, 32, 32 } },
  [201] = { 64, 32, { 6, 12, 48, 32 } },
}

local function get_densenet(num_layers, opts, level)
  level = level + 1
  local o = U.opts("get_densenet", opts, { bn_size = true, dropout = true }, level)
  local s = SPEC[num_layers]
  if not s then
    error("get_densenet: invalid number of layers: " .. tostring(num_layers)
      .. ". Options are 121, 161, 169, 201", level)
  end
  local net = DenseNet(s[1], s[2], s[3], { classes = o.classes, bn_size = o.bn_size,
    dropout = o.dropout })
  return (U.finish(net, "densenet" .. num_layers, o, "mxnet", level))
end

-- get_densenet(num_layers, {classes=1000, bn_size=4, dropout=0, pretrained=false, ctx=, root=})
function M.get_densenet(num_layers, opts) return (get_densenet(num_layers, opts, 2)) end
for n in pairs(SPEC) do
  M["densenet" .. n] = function(opts, level) return (get_densenet(n, opts, level or 2)) end
end

return M
