-- mx.gluoncv.model_zoo.darknet — GluonCV 0.10's Darknet-53 (gluoncv/model_zoo/yolo/
-- darknet.py): 3x3 conv + BatchNorm + LeakyReLU(0.1) cells, strided downsampling and
-- residual 1x1/3x3 blocks, GluonCV's structural parameter names ("features.1.0.weight").
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring, floor = error, tostring, math.floor
local add = nd.add

local M = {}

-- conv (no bias) + BatchNorm(eps 1e-5, momentum 0.9) + LeakyReLU(0.1): GluonCV's _conv2d
function M.conv2d(channel, kernel, padding, stride)
  local L = U.nn()
  local cell = L.HybridSequential()
  cell:add(L.Conv2D(channel, kernel, { strides = stride, padding = padding, use_bias = false }))
  cell:add(L.BatchNorm({ epsilon = 1e-5, momentum = 0.9 }))
  cell:add(L.LeakyReLU(0.1))
  return cell
end
local conv2d = M.conv2d

-- DarknetBasicBlockV3(channel): 1x1 (channel) -> 3x3 (2 channel), plus the input
local Basic = HybridBlock:extend("DarknetBasicBlockV3")
M.DarknetBasicBlockV3 = Basic
function Basic:__init(channel)
  HybridBlock.__init(self)
  local L = U.nn()
  self.body = L.HybridSequential()
  self.body:add(conv2d(channel, 1, 0, 1))
  self.body:add(conv2d(channel * 2, 3, 1, 1))
end
function Basic:forward(x) return add(self.body(x), x) end

-- DarknetV3(layers, channels, {classes=1000})
local DarknetV3 = HybridBlock:extend("DarknetV3")
M.DarknetV3 = DarknetV3
function DarknetV3:__init(layers, channels, opts)
  HybridBlock.__init(self)
  local o = U.opts("DarknetV3", opts, nil, 3, true)
  if type(layers) ~= "table" or type(channels) ~= "table" or #layers ~= #channels - 1 then
    error("DarknetV3: channels must be one longer than layers", 3)
  end
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  f:add(conv2d(channels[1], 3, 1, 1))
  for i, n in ipairs(layers) do
    local c = channels[i + 1]
    if c % 2 ~= 0 then error("DarknetV3: channel " .. tostring(c) .. " cannot be divided by 2", 3) end
    f:add(conv2d(c, 3, 1, 2))
    for _ = 1, n do f:add(Basic(floor(c / 2))) end
  end
  self.output = L.Dense(o.classes or 1000)
end
local GAP = { kernel = { 7, 7 }, global_pool = true, pool_type = "avg" }
function DarknetV3:forward(x)
  return self.output(nd.pooling(self.features(x), GAP))
end

-- darknet53({classes=1000, pretrained=false, ctx=, root=})
function M.darknet53(opts, level)
  level = (level or 1) + 1
  local o = U.opts("darknet53", opts, nil, level)
  local net = DarknetV3({ 1, 2, 8, 8, 4 }, { 32, 64, 128, 256, 512, 1024 },
    { classes = o.classes })
  return (U.finish(net, "darknet53", o, "gluoncv", level))
end

return M
