-- gluon/rnn/conv_cells.lua — the convolutional recurrent cells of MXNet 1.9's
-- gluon.contrib.rnn: Conv1D/2D/3DRNNCell, Conv1D/2D/3DLSTMCell, Conv1D/2D/3DGRUCell. The
-- gates come from convolutions of the input (i2h: i2h_kernel, i2h_pad, i2h_dilate) and of
-- the hidden state (h2h: h2h_kernel, odd, padded to keep the state's size); states are
-- (N, hidden_channels, spatial...) with the spatial size of i2h's output.
--
--   ConvKDXCell(input_shape, hidden_channels, i2h_kernel, h2h_kernel, i2h_pad=0,
--     i2h_dilate=1, h2h_dilate=1, i2h_weight_initializer, h2h_weight_initializer,
--     i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", conv_layout="NC[D][H]W",
--     activation="tanh"; dtype=, prefix= by name)
--
-- input_shape is one sample's (C, spatial...); C = 0 is inferred from the first input.
-- Kernel, pad and dilate settings are a number or K of them. Channel-first layouts only.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local cells = require("mx.gluon.rnn.rnn_cell")

local type, error, tostring, rawget, rawset, ipairs = type, error, tostring, rawget, rawset, ipairs
local floor = math.floor

local M = {}
local RecurrentCell = cells.RecurrentCell

local LAYOUT = { "NCW", "NCHW", "NCDHW" }
local ACT = { tanh = nd.tanh, relu = nd.relu, sigmoid = nd.sigmoid, softsign = nd.softsign,
  softrelu = function(x) return nd.activation(x, { act_type = "softrelu" }) end }

local function tuple(who, name, v, k, lo, level)
  if type(v) == "number" then
    local t = {}
    for i = 1, k do t[i] = v end
    v = t
  end
  local ok = type(v) == "table" and #v == k
  for i = 1, k do ok = ok and type(v[i]) == "number" and v[i] % 1 == 0 and v[i] >= lo end
  if not ok then
    error(string.format("%s: %s must be an integer >= %d or a list of %d of them, got %s", who,
      name, lo, k, tostring(v)), level + 1)
  end
  local t = {}
  for i = 1, k do t[i] = v[i] end
  return t
end

local function make(k, kind, gates)
  local name = string.format("Conv%dD%sCell", k, kind)
  local C = RecurrentCell:extend(name)
  M[name] = C
  local SIG = block.sig(C, { { "input_shape", list = true }, "hidden_channels", "i2h_kernel",
    "h2h_kernel", "i2h_pad", "i2h_dilate", "h2h_dilate", "i2h_weight_initializer",
    "h2h_weight_initializer", "i2h_bias_initializer", "h2h_bias_initializer", "conv_layout",
    "activation" }, { "dtype", "prefix" })
  C._alias = "conv_" .. kind:lower()
  function C:__init(...)
    RecurrentCell.__init(self)
    local o = SIG(3, ...)
    block._set_prefix(self, o.prefix, name, 3)
    local ish = o.input_shape
    if type(ish) ~= "table" or #ish ~= k + 1 then
      error(string.format("%s: input_shape must be one sample's {C, %d spatial dims}, got %s", name,
        k, tostring(ish)), 3)
    end
    for i = 1, k + 1 do
      if type(ish[i]) ~= "number" or ish[i] < 0 or ish[i] % 1 ~= 0 then
        error(name .. ": input_shape must hold whole numbers (C = 0: inferred)", 3)
      end
    end
    local hc = o.hidden_channels
    if type(hc) ~= "number" or hc < 1 or hc % 1 ~= 0 then
      error(name .. ": hidden_channels must be a positive integer, got " .. tostring(hc), 3)
    end
    local layout = o.conv_layout or LAYOUT[k]
    if layout ~= LAYOUT[k] then
      error(string.format("%s: conv_layout must be %s (channel-first), got %s", name, LAYOUT[k],
        tostring(layout)), 3)
    end
    local act = o.activation or "tanh"
    if not ACT[act] then
      error(name .. ": activation must be tanh, relu, sigmoid, softsign or softrelu, got "
        .. tostring(act), 3)
    end
    local ik = tuple(name, "i2h_kernel", o.i2h_kernel, k, 1, 3)
    local hk = tuple(name, "h2h_kernel", o.h2h_kernel, k, 1, 3)
    for i = 1, k do
      if hk[i] % 2 ~= 1 then error(name .. ": h2h_kernel must be odd, got " .. hk[i], 3) end
    end
    local ip = tuple(name, "i2h_pad", o.i2h_pad or 0, k, 0, 3)
    local id = tuple(name, "i2h_dilate", o.i2h_dilate or 1, k, 1, 3)
    local hd = tuple(name, "h2h_dilate", o.h2h_dilate or 1, k, 1, 3)
    local hp, state = {}, { hc }
    for i = 1, k do
      hp[i] = floor(hd[i] * (hk[i] - 1) / 2)
      local x = ish[i + 1]
      state[i + 1] = x > 0 and floor(x + 2 * ip[i] - id[i] * (ik[i] - 1) - 1) + 1 or 0
    end
    rawset(self, "_hidden_channels", hc)
    rawset(self, "_activation", act)
    rawset(self, "_state_shape", state)
    rawset(self, "_i2h", { kernel = ik, pad = ip, dilate = id, num_filter = hc * gates })
    rawset(self, "_h2h", { kernel = hk, pad = hp, dilate = hd, num_filter = hc * gates })
    local G, dt = hc * gates, o.dtype or "float32"
    local function cr(x) return x ~= nil and initializer.create(x) or nil end
    local iw, hw = { G, ish[1] }, { G, hc }
    for i = 1, k do iw[#iw + 1], hw[#hw + 1] = ik[i], hk[i] end
    self.i2h_weight = Parameter("i2h_weight", { shape = iw, dtype = dt, init = cr(o.i2h_weight_initializer) })
    self.h2h_weight = Parameter("h2h_weight", { shape = hw, dtype = dt, init = cr(o.h2h_weight_initializer) })
    self.i2h_bias = Parameter("i2h_bias", { shape = { G }, dtype = dt,
      init = cr(o.i2h_bias_initializer or "zeros") })
    self.h2h_bias = Parameter("h2h_bias", { shape = { G }, dtype = dt,
      init = cr(o.h2h_bias_initializer or "zeros") })
  end
  function C:state_info(batch_size)
    local s = { batch_size or 0 }
    for _, d in ipairs(rawget(self, "_state_shape")) do s[#s + 1] = d end
    local r = {}
    for i = 1, (kind == "LSTM" and 2 or 1) do
      local t = {}
      for j, d in ipairs(s) do t[j] = d end
      r[i] = { shape = t, __layout__ = LAYOUT[k] }
    end
    return r
  end
  -- the two convolutions of one step; the first call infers in_channels and the state's
  -- spatial size from the input
  function C:_conv(x, h)
    if not nd.is_tensor(x) then error(name .. ": inputs must be a tensor, got " .. type(x), 3) end
    local reg = rawget(self, "_reg")
    local w = reg.i2h_weight
    if w._data == nil then
      local s = x:shape()
      local shp = {}
      for i, d in ipairs(w.shape) do shp[i] = d end
      shp[2] = s[2]
      w:set_shape(shp, 3)
      w:_finish_deferred_init(3)
    end
    local i2h = nd.convolution(x, w:data(), reg.i2h_bias:data(), rawget(self, "_i2h"))
    local h2h = nd.convolution(h, reg.h2h_weight:data(), reg.h2h_bias:data(), rawget(self, "_h2h"))
    return i2h, h2h
  end
  function C:_repr_args()
    local s = self.i2h_weight.shape
    return string.format("%s -> %d, %s, %s", s[2] > 0 and tostring(s[2]) or "None", s[1],
      rawget(self, "_activation"), LAYOUT[k])
  end
  return C
end

for k = 1, 3 do
  local R = make(k, "RNN", 1)
  function R:forward(x, states)
    cells._check_states(self, states, 1, 2)
    rawset(self, "_counter", rawget(self, "_counter") + 1)
    local i2h, h2h = self:_conv(x, states[1])
    local h = ACT[rawget(self, "_activation")](nd.add(i2h, h2h))
    return h, { h }
  end
  local L = make(k, "LSTM", 4)
  function L:forward(x, states)
    cells._check_states(self, states, 2, 2)
    rawset(self, "_counter", rawget(self, "_counter") + 1)
    local i2h, h2h = self:_conv(x, states[1])
    local gi, gf, gc, go = nd.split(nd.add(i2h, h2h), { num_outputs = 4, axis = 2 })
    local act = ACT[rawget(self, "_activation")]
    local c = nd.add(nd.mul(nd.sigmoid(gf), states[2]), nd.mul(nd.sigmoid(gi), act(gc)))
    local h = nd.mul(nd.sigmoid(go), act(c))
    return h, { h, c }
  end
  local G = make(k, "GRU", 3)
  function G:forward(x, states)
    cells._check_states(self, states, 1, 2)
    rawset(self, "_counter", rawget(self, "_counter") + 1)
    local i2h, h2h = self:_conv(x, states[1])
    local ir, iz, ih = nd.split(i2h, { num_outputs = 3, axis = 2 })
    local hr, hz, hh = nd.split(h2h, { num_outputs = 3, axis = 2 })
    local r, z = nd.sigmoid(nd.add(ir, hr)), nd.sigmoid(nd.add(iz, hz))
    local n = ACT[rawget(self, "_activation")](nd.add(ih, nd.mul(r, hh)))
    local h = nd.add(nd.mul(nd.rsub_scalar(z, { scalar = 1 }), n), nd.mul(z, states[1]))
    return h, { h }
  end
end

return M
