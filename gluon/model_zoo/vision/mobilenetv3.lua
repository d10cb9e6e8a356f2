-- mx.gluon.model_zoo.vision.mobilenetv3 — GluonCV 0.10's MobileNetV3 small and large
-- (gluoncv/model_zoo/mobilenetv3.py): the same units (expand 1x1, depthwise kxk, optional
-- squeeze-excite, project 1x1), GluonCV's hard activations (HardSigmoid = ReLU6(x+3)/6,
-- HardSwish = x * HardSigmoid(x)) and its structural parameter names, so GluonCV .params
-- files load. Input 3x224x224.
local block = require("mx.gluon.block")
local nd = require("mx.nd")
local U = require("mx.gluon.model_zoo.vision._util")

local HybridBlock = block.HybridBlock
local error, tostring, ceil, floor = error, tostring, math.ceil, math.floor
local add, mul, broadcast_mul, div_scalar, add_scalar = nd.add, nd.mul, nd.mul, nd.div_scalar,
  nd.add_scalar

local M = {}
M.ReLU6 = U.ReLU6

local S3, S6 = { scalar = 3 }, { scalar = 6 }

-- HardSigmoid(): ReLU6(x + 3) / 6 (GluonCV's gluoncv.nn.HardSigmoid)
local HardSigmoid = HybridBlock:extend("HardSigmoid")
M.HardSigmoid = HardSigmoid
function HardSigmoid:__init()
  HybridBlock.__init(self)
  self.act = U.ReLU6()
end
function HardSigmoid:forward(x) return div_scalar(self.act(add_scalar(x, S3)), S6) end

-- HardSwish(): x * HardSigmoid(x) (GluonCV's gluoncv.nn.HardSwish)
local HardSwish = HybridBlock:extend("HardSwish")
M.HardSwish = HardSwish
function HardSwish:__init()
  HybridBlock.__init(self)
  self.act = HardSigmoid()
end
function HardSwish:forward(x) return mul(x, self.act(x)) end

-- make_divisible(x, 8): x rounded up to a multiple of 8 (GluonCV's helper)
local function make_divisible(x, by)
  by = by or 8
  return ceil(x / by) * by
end
M.make_divisible = make_divisible

local function activation(L, act)
  if act == "relu" then return L.Activation("relu") end
  if act == "relu6" then return U.ReLU6() end
  if act == "hard_sigmoid" then return HardSigmoid() end
  if act == "hard_swish" then return HardSwish() end
  error("MobileNetV3: unknown activation " .. tostring(act), 4)
end

-- _SE(num_out): global pool -> 1x1 conv (relu) -> 1x1 conv (hard sigmoid) -> scale x
local SE = HybridBlock:extend("_SE")
function SE:__init(num_out)
  HybridBlock.__init(self)
  local L = U.nn()
  local mid = make_divisible(floor(num_out / 4))
  self.pool = L.GlobalAvgPool2D()
  self.conv1 = L.Conv2D(mid, 1)
  self.act1 = activation(L, "relu")
  self.conv2 = L.Conv2D(num_out, 1)
  self.act2 = activation(L, "hard_sigmoid")
end
function SE:forward(x)
  local w = self.act2(self.conv2(self.act1(self.conv1(self.pool(x)))))
  return broadcast_mul(x, w)
end

-- _Unit: conv (no bias) + BatchNorm (+ activation)
local Unit = HybridBlock:extend("_Unit")
function Unit:__init(num_out, kernel, strides, pad, groups, use_act, act)
  HybridBlock.__init(self)
  local L = U.nn()
  self._use_act = use_act
  self.conv = L.Conv2D(num_out, kernel, { strides = strides, padding = pad, groups = groups,
    use_bias = false })
  self.bn = L.BatchNorm()
  if use_act then self.act = activation(L, act) end
end
function Unit:forward(x)
  local out = self.bn(self.conv(x))
  if self._use_act then out = self.act(out) end
  return out
end

local PAD = { [1] = 0, [3] = 1, [5] = 2, [7] = 3 }

-- _ResUnit: [expand 1x1] -> depthwise kxk -> [SE] -> linear 1x1, + x when shapes match
local ResUnit = HybridBlock:extend("_ResUnit")
function ResUnit:__init(num_in, num_mid, num_out, kernel, act, use_se, strides)
  HybridBlock.__init(self)
  self._first_conv = num_out ~= num_mid
  self._use_se = use_se
  if self._first_conv then self.expand = Unit(num_mid, 1, 1, 0, 1, true, act) end
  self.conv1 = Unit(num_mid, kernel, strides, PAD[kernel], num_mid, true, act)
  if use_se then self.se = SE(num_mid) end
  self.conv2 = Unit(num_out, 1, 1, 0, 1, false, act)
  self._short_cut = num_in == num_out and strides == 1
end
function ResUnit:forward(x)
  local out = self._first_conv and self.expand(x) or x
  out = self.conv1(out)
  if self._use_se then out = self.se(out) end
  out = self.conv2(out)
  if self._short_cut then return add(x, out) end
  return out
end

-- GluonCV's configurations: kernel, expansion channels, output channels, SE, activation,
-- stride per unit; then the last 1x1 convs' channels
local CFG = {
  large = { cfg = {
    { 3, 16, 16, false, "relu", 1 }, { 3, 64, 24, false, "relu", 2 },
    { 3, 72, 24, false, "relu", 1 }, { 5, 72, 40, true, "relu", 2 },
    { 5, 120, 40, true, "relu", 1 }, { 5, 120, 40, true, "relu", 1 },
    { 3, 240, 80, false, "hard_swish", 2 }, { 3, 200, 80, false, "hard_swish", 1 },
    { 3, 184, 80, false, "hard_swish", 1 }, { 3, 184, 80, false, "hard_swish", 1 },
    { 3, 480, 112, true, "hard_swish", 1 }, { 3, 672, 112, true, "hard_swish", 1 },
    { 5, 672, 160, true, "hard_swish", 2 }, { 5, 960, 160, true, "hard_swish", 1 },
    { 5, 960, 160, true, "hard_swish", 1 } }, squeeze = 960, expand = 1280 },
  small = { cfg = {
    { 3, 16, 16, true, "relu", 2 }, { 3, 72, 24, false, "relu", 2 },
    { 3, 88, 24, false, "relu", 1 }, { 5, 96, 40, true, "hard_swish", 2 },
    { 5, 240, 40, true, "hard_swish", 1 }, { 5, 240, 40, true, "hard_swish", 1 },
    { 5, 120, 48, true, "hard_swish", 1 }, { 5, 144, 48, true, "hard_swish", 1 },
    { 5, 288, 96, true, "hard_swish", 2 }, { 5, 576, 96, true, "hard_swish", 1 },
    { 5, 576, 96, true, "hard_swish", 1 } }, squeeze = 576, expand = 1280 },
}

-- MobileNetV3(cfg, cls_ch_squeeze, cls_ch_expand, {multiplier=1, classes=1000,
-- final_drop=0})
local MobileNetV3 = HybridBlock:extend("MobileNetV3")
M.MobileNetV3 = MobileNetV3
function MobileNetV3:__init(cfg, squeeze, expand, opts)
  HybridBlock.__init(self)
  local o = U.opts("MobileNetV3", opts, { multiplier = true, final_drop = true }, 3, true)
  local k = o.multiplier or 1
  local L = U.nn()
  local f = L.HybridSequential()
  self.features = f
  local inplanes = 16
  f:add(L.Conv2D(make_divisible(k * inplanes), 3, { padding = 1, strides = 2,
    use_bias = false }))
  f:add(L.BatchNorm())
  f:add(HardSwish())
  for _, c in ipairs(cfg) do
    local out = make_divisible(k * c[3])
    f:add(ResUnit(inplanes, make_divisible(k * c[2]), out, c[1], c[5], c[4], c[6]))
    inplanes = out
  end
  f:add(L.Conv2D(make_divisible(k * squeeze), 1, { use_bias = false }))
  f:add(L.BatchNorm())
  f:add(HardSwish())
  f:add(L.GlobalAvgPool2D())
  f:add(L.Conv2D(expand, 1, { use_bias = false }))
  f:add(HardSwish())
  if (o.final_drop or 0) > 0 then f:add(L.Dropout(o.final_drop)) end
  local out = L.HybridSequential()
  self.output = out
  out:add(L.Conv2D(o.classes or 1000, 1, { in_channels = expand }))
  out:add(L.Flatten())
end
function MobileNetV3:forward(x) return self.output(self.features(x)) end

local function get(model, opts, level)
  level = level + 1
  local o = U.opts("get_mobilenet_v3", opts, { multiplier = true }, level)
  local c = CFG[model]
  if not c then
    error("get_mobilenet_v3: model must be 'large' or 'small', got " .. tostring(model), level)
  end
  local net = MobileNetV3(c.cfg, c.squeeze, c.expand, { multiplier = o.multiplier,
    classes = o.classes, final_drop = 0.2 })
  return (U.finish(net, "mobilenetv3_" .. model, o, "gluoncv", level))
end

-- get_mobilenet_v3("large" | "small", {multiplier=1, classes=1000, pretrained=false, ctx=,
-- root=}); mobilenet_v3_large(opts), mobilenet_v3_small(opts)
function M.get_mobilenet_v3(model, opts) return (get(model, opts, 2)) end
function M.mobilenet_v3_large(opts, level) return (get("large", opts, level or 2)) end
function M.mobilenet_v3_small(opts, level) return (get("small", opts, level or 2)) end

return M
