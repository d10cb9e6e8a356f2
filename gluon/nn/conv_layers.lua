-- gluon/nn/conv_layers.lua — MXNet's convolution layers: Conv1D/2D/3D and
-- Conv1DTranspose/2D/3D over the convolution / deconvolution ops, with MXNet's
-- constructor arguments and defaults (positional channels and kernel_size, then one
-- options table of MXNet's keyword names), deferred in_channels (the op's partial
-- inference fills the weight's shape at the first forward) and activation='relu' fused
-- into the op; PixelShuffle1D/2D/3D (sub-pixel upsampling, MXNet 2.0's and 1.9's
-- contrib). gluon/nn/init.lua exports every key.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local fast = require("mx.gluon._fast")

local HybridBlock, Block = block.HybridBlock, block.Block
local type, error, tostring, rawget, rawset = type, error, tostring, rawget, rawset
local weighted = fast.weighted

local M = {}

-- MXNet's parameter order (a transposed layer has output_padding after padding)
local CONV_PARAMS = { "channels", "kernel_size", "strides", "padding", "dilation", "groups",
  "layout", "activation", "use_bias", "weight_initializer", "bias_initializer", "in_channels" }
local TRANSPOSE_PARAMS = { "channels", "kernel_size", "strides", "padding", "output_padding",
  "dilation", "groups", "layout", "activation", "use_bias", "weight_initializer",
  "bias_initializer", "in_channels" }

local LAYOUTS = { { NCW = true, NWC = true }, { NCHW = true, NHWC = true },
  { NCDHW = true, NDHWC = true } }
local DEFAULT_LAYOUT = { "NCW", "NCHW", "NCDHW" }
local ACT = { sigmoid = nd.sigmoid, tanh = nd.tanh, softrelu = nd.softrelu, softsign = nd.softsign }

-- a number or a list of n positive (or, lo = 0, non-negative) integers as a list of n
local function tuple(cls, name, v, n, lo, level)
  if type(v) == "number" then
    local t = {}
    for i = 1, n do t[i] = v end
    v = t
  end
  local ok = type(v) == "table" and #v == n
  for i = 1, ok and n or 0 do
    ok = ok and type(v[i]) == "number" and v[i] % 1 == 0 and v[i] >= lo
  end
  if not ok then
    error(string.format("%s: %s must be %s integer or a list of %d, got %s", cls, name,
      lo == 0 and "a non-negative" or "a positive", n, tostring(v)), level + 1)
  end
  local t = {}
  for i = 1, n do t[i] = v[i] end
  return t
end

local function tuple_str(t)
  if #t == 1 then return "(" .. t[1] .. ",)" end
  return "(" .. table.concat(t, ", ") .. ")"
end
local function all(t, v)
  for i = 1, #t do if t[i] ~= v then return false end end
  return true
end

-- The shared constructor: cls (the class name), nsp spatial dims, transpose or not.
-- level: the user's frame as seen from here.
local _Conv = HybridBlock:extend("_Conv")
local function conv_init(self, cls, nsp, transpose, o, level)
  Block.__init(self)
  local channels, kernel_size = o.channels, o.kernel_size
  if type(channels) ~= "number" or channels < 1 or channels % 1 ~= 0 then
    error(cls .. ": channels must be a positive integer, got " .. tostring(channels), level + 1)
  end
  local k = tuple(cls, "kernel_size", kernel_size, nsp, 1, level + 1)
  local s = tuple(cls, "strides", o.strides or 1, nsp, 1, level + 1)
  local p = tuple(cls, "padding", o.padding or 0, nsp, 0, level + 1)
  local d = tuple(cls, "dilation", o.dilation or 1, nsp, 1, level + 1)
  local op = transpose and tuple(cls, "output_padding", o.output_padding or 0, nsp, 0, level + 1)
  local groups = o.groups or 1
  if type(groups) ~= "number" or groups < 1 or groups % 1 ~= 0 or channels % groups ~= 0 then
    error(string.format("%s: groups must be a positive integer dividing channels=%d, got %s", cls,
      channels, tostring(groups)), level + 1)
  end
  local layout = o.layout or DEFAULT_LAYOUT[nsp]
  if not LAYOUTS[nsp][layout] then
    error(string.format("%s: layout must be %s or %s, got %s", cls, DEFAULT_LAYOUT[nsp],
      DEFAULT_LAYOUT[nsp]:gsub("^N(C)(.*)$", "N%2%1"), tostring(layout)), level + 1)
  end
  local act = o.activation
  if act ~= nil and act ~= "relu" and not ACT[act] then
    error(cls .. ": unknown activation '" .. tostring(act) .. "' (relu, sigmoid, tanh, softrelu, "
      .. "softsign)", level + 1)
  end
  local in_ch = o.in_channels or 0
  if type(in_ch) ~= "number" or in_ch < 0 or in_ch % 1 ~= 0 then
    error(cls .. ": in_channels must be a non-negative integer, got " .. tostring(in_ch), level + 1)
  end
  self._cls, self._channels, self._in_channels = cls, channels, in_ch
  self._kernel, self._strides, self._padding, self._dilation = k, s, p, d
  self._output_padding, self._groups, self._layout = op, groups, layout
  self._act_type, self._use_bias = act, o.use_bias ~= false
  rawset(self, "_act", act and act ~= "relu" and ACT[act] or nil)
  -- the weight: convolution (channels, in/groups, k...), transposed (in, channels/groups,
  -- k...); channel-last layouts put the channel dim last (as MXNet); 0 = unknown
  local last = layout:sub(-1) == "C"
  local ws = { channels, in_ch > 0 and in_ch / groups or 0 }
  if transpose then ws = { in_ch, channels / groups } end
  local shape = { ws[1] }
  if not last then shape[2] = ws[2] end
  for i = 1, nsp do shape[#shape + 1] = k[i] end
  if last then shape[#shape + 1] = ws[2] end
  self.weight = Parameter("weight", { shape = shape,
    init = o.weight_initializer and initializer.create(o.weight_initializer) })
  if self._use_bias then
    self.bias = Parameter("bias", { shape = { channels },
      init = initializer.create(o.bias_initializer or "zeros") })
  end
  local fo = { kernel = k, stride = s, pad = p, dilate = d, num_filter = channels,
    num_group = groups, layout = layout, no_bias = not self._use_bias }
  if transpose then
    fo.adj = op
  elseif act == "relu" then
    fo.act_type = "relu" -- fused: a oneDNN post-op
  end
  self._rec = fast.prepare(transpose and "deconvolution" or "convolution", fo, level + 1)
end

function _Conv:forward(x) -- (unknown in_channels come from x at the first call)
  local y = weighted(self, rawget(self, "_rec"), rawget(self, "_cls"), x, rawget(self, "_act"), 2)
  return y
end

-- MXNet's repr: Conv2D(3 -> 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), ...)
function _Conv:_repr_args()
  local s = self.weight.shape
  local last = self._layout:sub(-1) == "C"
  -- MXNet prints weight.shape[1] -> weight.shape[0] (for a transposed layer too); the
  -- channel dim when it is last
  local i = last and s[#s] or s[2]
  local r = { string.format("%s -> %d, kernel_size=%s, stride=%s",
    i > 0 and tostring(i) or "None", s[1], tuple_str(self._kernel), tuple_str(self._strides)) }
  if not all(self._padding, 0) then r[#r + 1] = "padding=" .. tuple_str(self._padding) end
  if not all(self._dilation, 1) then r[#r + 1] = "dilation=" .. tuple_str(self._dilation) end
  if self._output_padding and not all(self._output_padding, 0) then
    r[#r + 1] = "output_padding=" .. tuple_str(self._output_padding)
  end
  if self._groups ~= 1 then r[#r + 1] = "groups=" .. self._groups end
  if not self._use_bias then r[#r + 1] = "bias=False" end
  if self._act_type then r[#r + 1] = "Activation(" .. self._act_type .. ")" end
  return table.concat(r, ", ")
end

-- Conv1D/2D/3D(channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
-- layout="NCW"/"NCHW"/"NCDHW", activation=, use_bias=true, weight_initializer=,
-- bias_initializer="zeros", in_channels=0); ...Transpose adds output_padding=0 after
-- padding. MXNet's calling convention: positionally in this order or by name.
local function layer(name, nsp, transpose)
  local cls = _Conv:extend(name)
  M[name] = cls
  local SIG = block.sig(cls, transpose and TRANSPOSE_PARAMS or CONV_PARAMS)
  function cls:__init(...)
    conv_init(self, name, nsp, transpose, SIG(3, ...), 3)
  end
end
layer("Conv1D", 1, false)
layer("Conv2D", 2, false)
layer("Conv3D", 3, false)
layer("Conv1DTranspose", 1, true)
layer("Conv2DTranspose", 2, true)
layer("Conv3DTranspose", 3, true)

---------------------------------------------------------------- PixelShuffle
-- PixelShuffle<k>D(factor): (N, C*f1*...*fk, d1, ..., dk) -> (N, C, d1*f1, ..., dk*fk):
-- channel block (f1, ..., fk) of each output channel spread over the factor-sized cells,
-- MXNet's reshape / transpose / reshape. factor: a positive integer or k of them.
for k = 1, 3 do
  local cname = "PixelShuffle" .. k .. "D"
  local PS = HybridBlock:extend(cname)
  M[cname] = PS
  local SIG = block.sig(PS, { "factor" })
  function PS:__init(...)
    local o = SIG(3, ...)
    Block.__init(self)
    local f = o.factor
    if type(f) == "number" then
      local t = {}
      for i = 1, k do t[i] = f end
      f = t
    end
    local ok = type(f) == "table" and #f == k
    for i = 1, k do ok = ok and type(f[i]) == "number" and f[i] >= 1 and f[i] % 1 == 0 end
    if not ok then
      error(string.format("%s: factor must be a positive integer%s, got %s", cname,
        k > 1 and (" or a list of " .. k) or "", tostring(o.factor)), 3)
    end
    rawset(self, "_factors", f)
  end
  function PS:forward(x)
    if not nd.is_tensor(x) then error(cname .. ": input must be a tensor, got " .. type(x), 2) end
    local s = x:shape()
    if #s ~= k + 2 then
      error(string.format("%s: expected a %d-d input (N, C, %s), got %d-d", cname, k + 2,
        k == 1 and "W" or k == 2 and "H, W" or "D, H, W", #s), 2)
    end
    local f = rawget(self, "_factors")
    local prod = 1
    for i = 1, k do prod = prod * f[i] end
    if s[2] % prod ~= 0 then
      error(string.format("%s: %d input channels are not a multiple of the factors' product %d",
        cname, s[2], prod), 2)
    end
    if k == 3 then
      -- one factor at a time, so no tensor has more than 6 dims (MXNet's transpose takes at
      -- most 6: the exported graph runs there); B = N*C:
      -- (B, f1, f2*f3, D, H, W) -> (B, D, f1, f2*f3, H, W) = (B, D*f1, f2, f3, H, W)
      -- -> (B, D*f1, H, f2, f3, W) = (B, D*f1, H*f2, f3, W) -> (B, D*f1, H*f2, W, f3)
      local b, D, H, W = s[1] * (s[2] / prod), s[3], s[4], s[5]
      local y = nd.transpose(x:reshape { b, f[1], f[2] * f[3], D, H, W }, { axes = { 1, 4, 2, 3, 5, 6 } })
      y = nd.transpose(y:reshape { b, D * f[1], f[2], f[3], H, W }, { axes = { 1, 2, 5, 3, 4, 6 } })
      y = nd.transpose(y:reshape { b, D * f[1], H * f[2], f[3], W }, { axes = { 1, 2, 3, 5, 4 } })
      return y:reshape { s[1], s[2] / prod, D * f[1], H * f[2], W * f[3] }
    end
    -- (N, C, f1..fk, d1..dk) -> (N, C, d1, f1, ..., dk, fk) -> (N, C, d1*f1, ..., dk*fk)
    local split, axes, out = { s[1], s[2] / prod }, { 1, 2 }, { s[1], s[2] / prod }
    for i = 1, k do split[2 + i] = f[i] end
    for i = 1, k do split[2 + k + i] = s[2 + i] end
    for i = 1, k do
      axes[#axes + 1] = 2 + k + i
      axes[#axes + 1] = 2 + i
      out[2 + i] = s[2 + i] * f[i]
    end
    return nd.transpose(x:reshape(split), { axes = axes }):reshape(out)
  end
  function PS:__tostring()
    return string.format("%s(%s)", cname, table.concat(rawget(self, "_factors"), ", "))
  end
end

return M
