-- mx.gluon.model_zoo.vision.mobilenet — MobileNet v1 and v2 (width multipliers 1.0,
-- 0.75, 0.5, 0.25) as MXNet 1.9's model_zoo/vision/mobilenet.py builds them: depthwise
-- separable convs (v1), inverted residual LinearBottlenecks with ReLU6 = clip(0, 6) (v2),
-- MXNet's layer order and structural parameter names. Input 3x224x224.
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring, format, floor = error, tostring, string.format, math.floor
local add = nd.add

local M = {}
M.RELU6 = U.ReLU6

-- conv (no bias) + BatchNorm + relu/relu6 (MXNet's _add_conv)
local function add_conv(L, out, channels, kernel, stride, pad, groups, active, relu6)
  out:add(L.Conv2D(channels, kernel or 1, { strides = stride or 1, padding = pad or 0,
    groups = groups or 1, use_bias = false }))
  out:add(L.BatchNorm({ scale = true }))
  if active ~= false then out:add(relu6 and U.ReLU6() or L.Activation("relu")) end
end

local function add_conv_dw(L, out, dw_channels, channels, stride, relu6)
  add_conv(L, out, dw_channels, 3, stride, 1, dw_channels, true, relu6)
  add_conv(L, out, channels, 1, 1, 0, 1, true, relu6)
end

-- LinearBottleneck(in_channels, channels, t, stride): expand 1x1 (x t) -> depthwise 3x3
-- -> project 1x1 (no activation), plus the input when the shapes match.
local LinearBottleneck = HybridBlock:extend("LinearBottleneck")
M.LinearBottleneck = LinearBottleneck
function LinearBottleneck:__init(in_channels, channels, t, stride)
  HybridBlock.__init(self)
  local L = U.nn()
  self._use_shortcut = stride == 1 and in_channels == channels
  self.out = L.HybridSequential()
  add_conv(L, self.out, in_channels * t, 1, 1, 0, 1, true, true)
  add_conv(L, self.out, in_channels * t, 3, stride, 1, in_channels * t, true, true)
  add_conv(L, self.out, channels, 1, 1, 0, 1, false, true)
end
function LinearBottleneck:forward(x)
  local out = self.out(x)
  if self._use_shortcut then out = add(out, x) end
  return out
end

-- Python's int(x * multiplier)
local function mul(x, m) return floor(x * m) end
local function rep(list, v, n) for _ = 1, n do list[#list + 1] = v end return list end

local function check_multiplier(who, m, level)
  if type(m) ~= "number" or m <= 0 then
    error(who .. ": multiplier must be a positive number, got " .. tostring(m), level + 1)
  end
end

-- MobileNet(multiplier=1.0, {classes=1000})
local MobileNet = HybridBlock:extend("MobileNet")
M.MobileNet = MobileNet
function MobileNet:__init(multiplier, opts)
  HybridBlock.__init(self)
  multiplier = multiplier or 1.0
  check_multiplier("MobileNet", multiplier, 3)
  local o = U.opts("MobileNet", opts, nil, 3, true)
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  add_conv(L, f, mul(32, multiplier), 3, 2, 1)
  local dw = rep(rep(rep(rep({ 32, 64 }, 128, 2), 256, 2), 512, 6), 1024, 1)
  local ch = rep(rep(rep(rep({ 64 }, 128, 2), 256, 2), 512, 6), 1024, 2)
  local strides = { 1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1 }
  for i = 1, #dw do
    add_conv_dw(L, f, mul(dw[i], multiplier), mul(ch[i], multiplier), strides[i])
  end
  f:add(L.GlobalAvgPool2D())
  f:add(L.Flatten())
  self.output = L.Dense(o.classes or 1000)
end
function MobileNet:forward(x) return self.output(self.features(x)) end

-- MobileNetV2(multiplier=1.0, {classes=1000})
local MobileNetV2 = HybridBlock:extend("MobileNetV2")
M.MobileNetV2 = MobileNetV2
function MobileNetV2:__init(multiplier, opts)
  HybridBlock.__init(self)
  multiplier = multiplier or 1.0
  check_multiplier("MobileNetV2", multiplier, 3)
  local o = U.opts("MobileNetV2", opts, nil, 3, true)
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  add_conv(L, f, mul(32, multiplier), 3, 2, 1, 1, true, true)
  local in_c = rep(rep(rep(rep(rep({ 32, 16 }, 24, 2), 32, 3), 64, 4), 96, 3), 160, 3)
  local ch = rep(rep(rep(rep(rep(rep({ 16 }, 24, 2), 32, 3), 64, 4), 96, 3), 160, 3), 320, 1)
  local strides = { 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1 }
  for i = 1, #in_c do
    f:add(LinearBottleneck(mul(in_c[i], multiplier), mul(ch[i], multiplier), i == 1 and 1 or 6,
      strides[i]))
  end
  local last = multiplier > 1.0 and mul(1280, multiplier) or 1280
  add_conv(L, f, last, 1, 1, 0, 1, true, true)
  f:add(L.GlobalAvgPool2D())
  local out = L.HybridSequential()
  self.output = out
  out:add(L.Conv2D(o.classes or 1000, 1, { use_bias = false }))
  out:add(L.Flatten())
end
MobileNetV2.forward = MobileNet.forward

-- the model-store name's suffix: Python's '{0:.2f}' with 1.00 -> 1.0 and 0.50 -> 0.5
local function suffix(m)
  local s = format("%.2f", m)
  if s == "1.00" or s == "0.50" then s = s:sub(1, -2) end
  return s
end

local function get(cls, prefix, who, multiplier, opts, level)
  level = level + 1
  check_multiplier(who, multiplier, level)
  local o = U.opts(who, opts, nil, level)
  return (U.finish(cls(multiplier, { classes = o.classes }), prefix .. suffix(multiplier), o,
    "mxnet", level))
end

-- get_mobilenet(multiplier, {classes=1000, pretrained=false, ctx=, root=})
function M.get_mobilenet(multiplier, opts)
  return (get(MobileNet, "mobilenet", "get_mobilenet", multiplier, opts, 2))
end
-- get_mobilenet_v2(multiplier, {classes=1000, pretrained=false, ctx=, root=})
function M.get_mobilenet_v2(multiplier, opts)
  return (get(MobileNetV2, "mobilenetv2_", "get_mobilenet_v2", multiplier, opts, 2))
end
for _, m in ipairs { 1.0, 0.75, 0.5, 0.25 } do
  local s = format("%g", m):gsub("%.", "_")
  if s == "1" then s = "1_0" end
  M["mobilenet" .. s] = function(opts, level)
    return (get(MobileNet, "mobilenet", "get_mobilenet", m, opts, level or 2))
  end
  M["mobilenet_v2_" .. s] = function(opts, level)
    return (get(MobileNetV2, "mobilenetv2_", "get_mobilenet_v2", m, opts, level or 2))
  end
end

return M
