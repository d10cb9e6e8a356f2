-- mx.gluon.model_zoo.vision.vgg — VGG 11/13/16/19 with and without BatchNorm, as MXNet
-- 1.9's model_zoo/vision/vgg.py builds them (same layers, order and initializers), so the
-- structural parameter names are MXNet's and its .params files load. Input 3x224x224.
local block = require("mx.gluon.block")
local initializer = require("mx.initializer")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring, format = error, tostring, string.format

local M = {}

-- VGG(layers, filters, {classes=1000, batch_norm=false}): layers[i] 3x3 convs of
-- filters[i] channels, then a 2x2 max pool, per stage; two Dense(4096) + dropout; output.
local VGG = HybridBlock:extend("VGG")
M.VGG = VGG
function VGG:__init(layers, filters, opts)
  HybridBlock.__init(self)
  local o = U.opts("VGG", opts, { batch_norm = true }, 3, true)
  if type(layers) ~= "table" or type(filters) ~= "table" or #layers ~= #filters then
    error("VGG: layers and filters must be lists of the same length", 3)
  end
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  for i, num in ipairs(layers) do
    for _ = 1, num do
      f:add(L.Conv2D(filters[i], 3, { padding = 1,
        weight_initializer = initializer.Xavier("gaussian", "out", 2),
        bias_initializer = "zeros" }))
      if o.batch_norm then f:add(L.BatchNorm()) end
      f:add(L.Activation("relu"))
    end
    f:add(L.MaxPool2D({ strides = 2 }))
  end
  f:add(L.Dense(4096, { activation = "relu", weight_initializer = "normal",
    bias_initializer = "zeros" }))
  f:add(L.Dropout(0.5))
  f:add(L.Dense(4096, { activation = "relu", weight_initializer = "normal",
    bias_initializer = "zeros" }))
  f:add(L.Dropout(0.5))
  self.output = L.Dense(o.classes or 1000, { weight_initializer = "normal",
    bias_initializer = "zeros" })
end
function VGG:forward(x) return self.output(self.features(x)) end

-- MXNet's vgg_spec: convs per stage, channels per stage
local SPEC = {
  [11] = { { 1, 1, 2, 2, 2 }, { 64, 128, 256, 512, 512 } },
  [13] = { { 2, 2, 2, 2, 2 }, { 64, 128, 256, 512, 512 } },
  [16] = { { 2, 2, 3, 3, 3 }, { 64, 128, 256, 512, 512 } },
  [19] = { { 2, 2, 4, 4, 4 }, { 64, 128, 256, 512, 512 } },
}

local function get_vgg(num_layers, opts, level)
  level = level + 1
  local o = U.opts("get_vgg", opts, { batch_norm = true }, level)
  local spec = SPEC[num_layers]
  if not spec then
    error("get_vgg: invalid number of layers: " .. tostring(num_layers)
      .. ". Options are 11, 13, 16, 19", level)
  end
  local net = VGG(spec[1], spec[2], { classes = o.classes, batch_norm = o.batch_norm })
  return (U.finish(net, format("vgg%d%s", num_layers, o.batch_norm and "_bn" or ""), o, "mxnet",
    level))
end

-- get_vgg(num_layers, {classes=1000, batch_norm=false, pretrained=false, ctx=, root=})
function M.get_vgg(num_layers, opts) return (get_vgg(num_layers, opts, 2)) end

-- vgg11(opts) ... vgg19_bn(opts)
for _, n in ipairs { 11, 13, 16, 19 } do
  M["vgg" .. n] = function(opts, level) return (get_vgg(n, opts, level or 2)) end
  M["vgg" .. n .. "_bn"] = function(opts, level)
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.batch_norm = true
    return (get_vgg(n, o, level or 2))
  end
end

return M
