-- mx.gluon.model_zoo.vision.alexnet — AlexNet as MXNet 1.9's model_zoo/vision/alexnet.py
-- builds it ("One weird trick...", no LRN): the same layers in the same order, so the
-- structural parameter names ("features.0.weight", "output.bias") are MXNet's and an
-- MXNet .params file loads with net:load_parameters(path). Input 3x224x224.
local block = require("mx.gluon.block")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock

local M = {}

-- AlexNet({classes=1000})
local AlexNet = HybridBlock:extend("AlexNet")
M.AlexNet = AlexNet
function AlexNet:__init(opts)
  HybridBlock.__init(self)
  local o = U.opts("AlexNet", opts, nil, 3, true)
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  f:add(L.Conv2D(64, 11, { strides = 4, padding = 2, activation = "relu" }))
  f:add(L.MaxPool2D(3, { strides = 2 }))
  f:add(L.Conv2D(192, 5, { padding = 2, activation = "relu" }))
  f:add(L.MaxPool2D(3, { strides = 2 }))
  f:add(L.Conv2D(384, 3, { padding = 1, activation = "relu" }))
  f:add(L.Conv2D(256, 3, { padding = 1, activation = "relu" }))
  f:add(L.Conv2D(256, 3, { padding = 1, activation = "relu" }))
  f:add(L.MaxPool2D(3, { strides = 2 }))
  f:add(L.Flatten())
  f:add(L.Dense(4096, { activation = "relu" }))
  f:add(L.Dropout(0.5))
  f:add(L.Dense(4096, { activation = "relu" }))
  f:add(L.Dropout(0.5))
  self.output = L.Dense(o.classes or 1000)
end
function AlexNet:forward(x) return self.output(self.features(x)) end

-- alexnet({classes=1000, pretrained=false, ctx=, root=})
function M.alexnet(opts, level)
  level = (level or 1) + 1
  local o = U.opts("alexnet", opts, nil, level)
  return (U.finish(AlexNet { classes = o.classes }, "alexnet", o, "mxnet", level))
end

return M
