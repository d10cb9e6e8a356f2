-- gluon/nn/deformable_layers.lua — MXNet's deformable convolution layers
-- (gluon.contrib.cnn in 1.9, gluon.nn in 2.0): DeformableConvolution (v1) and
-- ModulatedDeformableConvolution (v2), each with the convolution that makes its offsets
-- (and, v2, its mask: 2 sigmoid of the last third of that convolution's channels), as
-- MXNet's layers: the same parameters (offset_weight, offset_bias, deformable_conv_weight,
-- deformable_conv_bias), initializers and defaults (the offset convolution starts at
-- zero: a plain convolution until trained). in_channels may be deferred to the first
-- forward. gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local lib = require("mx.core.lib")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local basic = require("mx.gluon.nn.basic_layers")
local caller = require("mx.core.caller")

local HybridBlock, Block = block.HybridBlock, block.Block
local type, error, tostring, rawget, rawset, pcall = type, error, tostring, rawget, rawset, pcall

local M = {}

local PARAMS = { "channels", "kernel_size", "strides", "padding", "dilation", "groups",
  "num_deformable_group", "layout", "use_bias", "in_channels", "activation",
  "weight_initializer", "bias_initializer", "offset_weight_initializer",
  "offset_bias_initializer", "offset_use_bias", "op_name",
  { "adj", unsupported = "the deformable convolution ops take no adj: MXNet passes it on "
    .. "and its op refuses it" } }

-- a positive (lo = 0: non-negative) integer or a list of 2 as a list of 2
local function pair(cls, name, v, lo, level)
  if type(v) == "number" then v = { v, v } end
  local ok = type(v) == "table" and #v == 2
  for i = 1, ok and 2 or 0 do
    ok = ok and type(v[i]) == "number" and v[i] % 1 == 0 and v[i] >= lo
  end
  if not ok then
    error(string.format("%s: %s must be %s integer or a list of 2, got %s", cls, name,
      lo == 0 and "a non-negative" or "a positive", tostring(v)), level + 1)
  end
  return { v[1], v[2] }
end

local function positive(cls, name, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(cls .. ": " .. name .. " must be a positive integer, got " .. tostring(v), level + 1)
  end
  return v
end

local function init_of(v, dflt)
  if v == nil then v = dflt end
  return v ~= nil and initializer.create(v) or nil
end

local _Deformable = HybridBlock:extend("_Deformable")

local function deformable_init(self, cls, modulated, o, level)
  Block.__init(self)
  local channels = positive(cls, "channels", o.channels, level + 1)
  local k = pair(cls, "kernel_size", o.kernel_size or 1, 1, level + 1)
  local s = pair(cls, "strides", o.strides or 1, 1, level + 1)
  local p = pair(cls, "padding", o.padding or 0, 0, level + 1)
  local d = pair(cls, "dilation", o.dilation or 1, 1, level + 1)
  local groups = positive(cls, "groups", o.groups or 1, level + 1)
  local dg = positive(cls, "num_deformable_group", o.num_deformable_group or 1, level + 1)
  local layout = o.layout or "NCHW"
  if layout == "NHWC" then
    error(cls .. ": layout NHWC is not supported: the deformable convolution ops take NCHW "
      .. "only (MXNet's layer accepts NHWC and its op then refuses it)", level + 1)
  elseif layout ~= "NCHW" then
    error(cls .. ": layout must be NCHW, got " .. tostring(layout), level + 1)
  end
  local in_ch = o.in_channels or 0
  if type(in_ch) ~= "number" or in_ch < 0 or in_ch % 1 ~= 0 then
    error(cls .. ": in_channels must be a non-negative integer, got " .. tostring(in_ch), level + 1)
  end
  if channels % groups ~= 0 or in_ch % groups ~= 0 then
    error(string.format("%s: groups=%d must divide channels=%d and in_channels=%d", cls, groups,
      channels, in_ch), level + 1)
  end
  local taps = k[1] * k[2]
  local off_ch = (modulated and 3 or 2) * dg * taps
  if off_ch % groups ~= 0 then
    error(string.format("%s: groups=%d must divide the offset convolution's %d channels "
      .. "(%d num_deformable_group kh kw)", cls, groups, off_ch, modulated and 3 or 2), level + 1)
  end
  if modulated and channels % dg ~= 0 then
    error(string.format("%s: num_deformable_group=%d must divide channels=%d (as MXNet's op "
      .. "requires)", cls, dg, channels), level + 1)
  end
  local use_bias, off_bias = o.use_bias ~= false, o.offset_use_bias ~= false
  self._cls, self._channels, self._in_channels = cls, channels, in_ch
  self._kernel, self._strides, self._padding, self._dilation = k, s, p, d
  self._groups, self._use_bias, self._modulated = groups, use_bias, modulated
  self._split = 2 * dg * taps -- the offset channels (the mask's follow, v2)
  self._off_ch = off_ch
  self._off_opts = { kernel = k, stride = s, dilate = d, pad = p, num_filter = off_ch,
    num_group = groups, no_bias = not off_bias, layout = layout }
  self._opts = { kernel = k, stride = s, dilate = d, pad = p, num_filter = channels,
    num_group = groups, num_deformable_group = dg, no_bias = not use_bias, layout = layout }
  local icg = in_ch > 0 and in_ch / groups or 0
  self.offset_weight = Parameter("offset_weight", { shape = { off_ch, icg, k[1], k[2] },
    init = init_of(o.offset_weight_initializer, "zeros") })
  if off_bias then
    self.offset_bias = Parameter("offset_bias", { shape = { off_ch },
      init = init_of(o.offset_bias_initializer, "zeros") })
  end
  self.deformable_conv_weight = Parameter("deformable_conv_weight",
    { shape = { channels, icg, k[1], k[2] }, init = init_of(o.weight_initializer) })
  if use_bias then
    self.deformable_conv_bias = Parameter("deformable_conv_bias", { shape = { channels },
      init = init_of(o.bias_initializer, "zeros") })
  end
  if o.activation ~= nil then
    local ok, act = pcall(basic.Activation, o.activation)
    if not ok then
      error(cls .. ": " .. tostring(act):gsub("^[^\n]-%.lua:%d+: ", "", 1), level + 1)
    end
    self.act = act
  end
  rawset(self, "_conv_op", lib.ops_by_name.convolution)
end

local function forward(self, x)
  local cls = rawget(self, "_cls")
  if not nd.is_tensor(x) then error(cls .. ": input must be a tensor, got " .. type(x), 2) end
  local ow, w = self.offset_weight, self.deformable_conv_weight
  if ow._data == nil or w._data == nil then -- deferred: in_channels from x
    local sh = x:shape()
    if #sh ~= 4 then
      error(string.format("%s: expected a 4-d input (N, C, H, W), got %d-d", cls, #sh), 2)
    end
    local g = rawget(self, "_groups")
    if sh[2] % g ~= 0 then
      error(string.format("%s: input has %d channels, not divisible by groups=%d", cls, sh[2], g), 2)
    end
    self:_infer_params(rawget(self, "_conv_op"), rawget(self, "_off_opts"), x,
      { ow, self.offset_bias }, 2)
    local k = rawget(self, "_kernel")
    w:set_shape({ rawget(self, "_channels"), sh[2] / g, k[1], k[2] }, 2)
    w:_finish_deferred_init(2)
    local b = self.deformable_conv_bias
    if b then b:_finish_deferred_init(2) end
  end
  local ob, b = self.offset_bias, self.deformable_conv_bias
  local off = nd.convolution(x, ow:data(), ob and ob:data() or nil, rawget(self, "_off_opts"))
  local y
  if rawget(self, "_modulated") then
    local n = rawget(self, "_split")
    local mask = nd.slice_axis(off, { axis = 2, begin = n + 1, ["end"] = rawget(self, "_off_ch") })
    mask = nd.mul_scalar(nd.sigmoid(mask), { scalar = 2 })
    off = nd.slice_axis(off, { axis = 2, begin = 1, ["end"] = n })
    y = nd.modulated_deformable_convolution(x, off, mask, w:data(), b and b:data() or nil,
      rawget(self, "_opts"))
  else
    y = nd.deformable_convolution(x, off, w:data(), b and b:data() or nil, rawget(self, "_opts"))
  end
  local act = self.act
  if act then y = act(y) end
  return y
end

-- the ops' errors (raised at this file's lines) blame the user's line that called the block,
-- under the layer's name (the offset convolution's op runs first: its message alone would
-- name a convolution the user never made)
local function blame(cls, ok, ...)
  if not ok then
    local msg = tostring((...)):gsub("^[^\n]-%.lua:%d+: ", "", 1)
    if msg:sub(1, #cls + 1) ~= cls .. ":" then msg = cls .. ": " .. msg end
    error(msg, caller.level())
  end
  return ...
end

function _Deformable:forward(x)
  return blame(rawget(self, "_cls"), pcall(forward, self, x))
end

local function tuple_str(t) return "(" .. table.concat(t, ", ") .. ")" end

-- MXNet's repr: DeformableConvolution(None -> 10, kernel_size=(3, 3), stride=(1, 1), ...)
function _Deformable:_repr_args()
  local s = self.deformable_conv_weight.shape
  local r = { string.format("%s -> %d, kernel_size=%s, stride=%s",
    s[2] > 0 and tostring(s[2]) or "None", s[1], tuple_str(self._kernel),
    tuple_str(self._strides)) }
  if self._padding[1] ~= 0 or self._padding[2] ~= 0 then
    r[#r + 1] = "padding=" .. tuple_str(self._padding)
  end
  if self._dilation[1] ~= 1 or self._dilation[2] ~= 1 then
    r[#r + 1] = "dilation=" .. tuple_str(self._dilation)
  end
  if self._groups ~= 1 then r[#r + 1] = "groups=" .. self._groups end
  if not self._use_bias then r[#r + 1] = "bias=False" end
  return table.concat(r, ", ")
end

-- DeformableConvolution / ModulatedDeformableConvolution(channels, kernel_size=(1, 1),
-- strides=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1, num_deformable_group=1,
-- layout="NCHW", use_bias=true, in_channels=0, activation=, weight_initializer=,
-- bias_initializer="zeros", offset_weight_initializer="zeros",
-- offset_bias_initializer="zeros", offset_use_bias=true, op_name=): MXNet's calling
-- convention, positionally in this order or by name.
for name, modulated in pairs { DeformableConvolution = false,
  ModulatedDeformableConvolution = true } do
  local cls = _Deformable:extend(name)
  M[name] = cls
  local SIG = block.sig(cls, PARAMS)
  function cls:__init(...)
    deformable_init(self, name, modulated, SIG(3, ...), 3)
  end
end

return M
