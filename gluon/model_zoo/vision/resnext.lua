-- mx.gluon.model_zoo.vision.resnext — GluonCV 0.10's ResNeXt and SE-ResNeXt
-- (gluoncv/model_zoo/resnext.py): bottleneck blocks with a grouped 3x3 conv (cardinality
-- groups of bottleneck_width x channels/64 each), an optional squeeze-excite path, and
-- GluonCV's structural parameter names, so its .params files load. Input 3x224x224.
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring, floor, format = error, tostring, math.floor, string.format
local add, relu, broadcast_mul, adaptive = nd.add, nd.relu, nd.mul, nd.adaptive_avg_pooling2d

local M = {}

-- Block(channels, cardinality, bottleneck_width, stride, downsample, {last_gamma=false,
-- use_se=false, avg_down=false})
local Block = HybridBlock:extend("ResNextBlock")
M.Block = Block
function Block:__init(channels, cardinality, bottleneck_width, stride, downsample, opts)
  HybridBlock.__init(self)
  local o = opts or {}
  local L = U.nn()
  local D = floor(channels * (bottleneck_width / 64))
  local gw = cardinality * D
  local body = L.HybridSequential()
  self.body = body
  body:add(L.Conv2D(gw, 1, { use_bias = false }))
  body:add(L.BatchNorm())
  body:add(L.Activation("relu"))
  body:add(L.Conv2D(gw, 3, { strides = stride, padding = 1, groups = cardinality,
    use_bias = false }))
  body:add(L.BatchNorm())
  body:add(L.Activation("relu"))
  body:add(L.Conv2D(channels * 4, 1, { use_bias = false }))
  -- GluonCV's rule, as written there: the last BN starts at gamma 0 unless last_gamma
  body:add(o.last_gamma and L.BatchNorm() or L.BatchNorm({ gamma_initializer = "zeros" }))
  if o.use_se then
    local se = L.HybridSequential()
    self.se = se
    se:add(L.Conv2D(floor(channels / 4), 1))
    se:add(L.Activation("relu"))
    se:add(L.Conv2D(channels * 4, 1))
    se:add(L.Activation("sigmoid"))
  end
  if downsample then
    local ds = L.HybridSequential()
    self.downsample = ds
    if o.avg_down then
      ds:add(L.AvgPool2D(stride, { strides = stride, ceil_mode = true,
        count_include_pad = false }))
      ds:add(L.Conv2D(channels * 4, 1, { use_bias = false }))
    else
      ds:add(L.Conv2D(channels * 4, 1, { strides = stride, use_bias = false }))
    end
    ds:add(L.BatchNorm())
  end
end
local ONE = { output_size = { 1 } }
function Block:forward(x)
  local residual = x
  x = self.body(x)
  local se = self.se
  if se then x = broadcast_mul(x, se(adaptive(x, ONE))) end
  local ds = self.downsample
  if ds then residual = ds(residual) end
  return relu(add(x, residual))
end

-- ResNext(layers, cardinality, bottleneck_width, {classes=1000, last_gamma=false,
-- use_se=false, deep_stem=false, avg_down=false, stem_width=64})
local ResNext = HybridBlock:extend("ResNext")
M.ResNext = ResNext
local NET_EXTRA = { last_gamma = true, use_se = true, deep_stem = true, avg_down = true,
  stem_width = true }
function ResNext:__init(layers, cardinality, bottleneck_width, opts)
  HybridBlock.__init(self)
  local o = U.opts("ResNext", opts, NET_EXTRA, 3, true)
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  if not o.deep_stem then
    f:add(L.Conv2D(64, 7, { strides = 2, padding = 3, use_bias = false }))
  else
    local sw = o.stem_width or 64
    f:add(L.Conv2D(sw, 3, { strides = 2, padding = 1, use_bias = false }))
    f:add(L.BatchNorm())
    f:add(L.Activation("relu"))
    f:add(L.Conv2D(sw, 3, { strides = 1, padding = 1, use_bias = false }))
    f:add(L.BatchNorm())
    f:add(L.Activation("relu"))
    f:add(L.Conv2D(sw * 2, 3, { strides = 1, padding = 1, use_bias = false }))
  end
  f:add(L.BatchNorm())
  f:add(L.Activation("relu"))
  f:add(L.MaxPool2D(3, { strides = 2, padding = 1 }))
  local channels = 64
  for i, n in ipairs(layers) do
    local stage = L.HybridSequential()
    local bo = { last_gamma = o.last_gamma, use_se = o.use_se, avg_down = i > 1 and o.avg_down }
    stage:add(Block(channels, cardinality, bottleneck_width, i == 1 and 1 or 2, true, bo))
    for _ = 2, n do stage:add(Block(channels, cardinality, bottleneck_width, 1, false, bo)) end
    f:add(stage)
    channels = channels * 2
  end
  f:add(L.GlobalAvgPool2D())
  self.output = L.Dense(o.classes or 1000)
end
function ResNext:forward(x) return self.output(self.features(x)) end

local SPEC = { [50] = { 3, 4, 6, 3 }, [101] = { 3, 4, 23, 3 } }
local GET_EXTRA = { use_se = true, deep_stem = true, avg_down = true, last_gamma = true }

local function get_resnext(num_layers, cardinality, bottleneck_width, opts, level)
  level = level + 1
  local o = U.opts("get_resnext", opts, GET_EXTRA, level)
  local layers = SPEC[num_layers]
  if not layers then
    error("get_resnext: invalid number of layers: " .. tostring(num_layers)
      .. ". Options are 50, 101", level)
  end
  cardinality, bottleneck_width = cardinality or 32, bottleneck_width or 4
  local net = ResNext(layers, cardinality, bottleneck_width, { classes = o.classes,
    use_se = o.use_se, deep_stem = o.deep_stem, avg_down = o.avg_down,
    last_gamma = o.last_gamma })
  local name = format("%sresnext%d%s_%dx%dd", o.use_se and "se_" or "", num_layers,
    o.deep_stem and "e" or "", cardinality, bottleneck_width)
  return (U.finish(net, name, o, "gluoncv", level))
end

-- get_resnext(num_layers, cardinality=32, bottleneck_width=4, {use_se=, deep_stem=,
-- avg_down=, last_gamma=, classes=1000, pretrained=false, ctx=, root=})
function M.get_resnext(num_layers, cardinality, bottleneck_width, opts)
  return (get_resnext(num_layers, cardinality, bottleneck_width, opts, 2))
end

-- resnext50_32x4d, resnext101_32x4d, resnext101_64x4d, resnext101e_64x4d and their se_
local function variant(n, card, se, e)
  return function(opts, level)
    local o = {}
    for k, v in pairs(opts or {}) do o[k] = v end
    o.use_se, o.deep_stem, o.avg_down = se, e or nil, e or nil
    return (get_resnext(n, card, 4, o, level or 2))
  end
end
for _, v in ipairs { { 50, 32 }, { 101, 32 }, { 101, 64 } } do
  M[format("resnext%d_%dx4d", v[1], v[2])] = variant(v[1], v[2], false)
  M[format("se_resnext%d_%dx4d", v[1], v[2])] = variant(v[1], v[2], true)
end
M.resnext101e_64x4d = variant(101, 64, false, true)
M.se_resnext101e_64x4d = variant(101, 64, true, true)

return M
