-- mx.rnn's convolutional cells (MXNet 1.x's BaseConvRNNCell, ConvRNNCell, ConvLSTMCell,
-- ConvGRUCell), installed into mx.rnn by lua/mx/rnn/init.lua:
--
--   ConvRNNCell(input_shape, num_hidden, h2h_kernel={3, 3}, h2h_dilate={1, 1},
--     i2h_kernel={3, 3}, i2h_stride={1, 1}, i2h_pad={1, 1}, i2h_dilate={1, 1},
--     i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer="zeros",
--     h2h_bias_initializer="zeros", activation=LeakyReLU(slope 0.2), prefix="ConvRNN_",
--     params, conv_layout="NCHW")
--   ConvLSTMCell(... the same ..., prefix="ConvLSTM_"), ConvGRUCell(..., prefix="ConvGRU_")
--
-- input_shape is one step's (N, C, H, W); the states' shape is i2h's output (batch 0:
-- from the graph's inference). h2h kernels must be odd (the state keeps its size).
-- activation: an act_type name or a function(x, {name=}).
local class = require("mx.core.class")

local type, error, setmetatable = type, error, setmetatable

return function(M)
  local BaseRNNCell, base_init, cell_class = M.BaseRNNCell, M._base_init, M._cell_class
  local function S() return require("mx.symbol") end
  local function leaky(x, o)
    return S().LeakyReLU(x, { act_type = "leaky", slope = 0.2, name = o and o.name })
  end

  local PARAMS = { "input_shape", "num_hidden", "h2h_kernel", "h2h_dilate", "i2h_kernel",
    "i2h_stride", "i2h_pad", "i2h_dilate", "i2h_weight_initializer", "h2h_weight_initializer",
    "i2h_bias_initializer", "h2h_bias_initializer", "activation", "prefix", "params", "conv_layout" }

  local function conv_init(self, who, o, prefix, ngates)
    base_init(self, o.prefix or prefix, o.params)
    local k = o.h2h_kernel or { 3, 3 }
    local hd = o.h2h_dilate or { 1, 1 }
    if k[1] % 2 ~= 1 or k[2] % 2 ~= 1 then
      error(who .. ": h2h_kernel must be odd, got (" .. table.concat(k, ", ") .. ")", 4)
    end
    if type(o.input_shape) ~= "table" then error(who .. ": input_shape must be a list of dims", 4) end
    if type(o.num_hidden) ~= "number" then error(who .. ": num_hidden must be a number", 4) end
    self._h2h_kernel, self._h2h_dilate = k, hd
    self._h2h_pad = { math.floor(hd[1] * (k[1] - 1) / 2), math.floor(hd[2] * (k[2] - 1) / 2) }
    self._i2h_kernel, self._i2h_stride = o.i2h_kernel or { 3, 3 }, o.i2h_stride or { 1, 1 }
    self._i2h_pad, self._i2h_dilate = o.i2h_pad or { 1, 1 }, o.i2h_dilate or { 1, 1 }
    self._num_hidden, self._input_shape = o.num_hidden, o.input_shape
    self._conv_layout = o.conv_layout or "NCHW"
    self._activation = o.activation or leaky
    self._ngates = ngates
    local sym = S()
    local probe = sym.Convolution(sym.Variable("data"), { num_filter = self._num_hidden,
      kernel = self._i2h_kernel, stride = self._i2h_stride, pad = self._i2h_pad,
      dilate = self._i2h_dilate, layout = self._conv_layout })
    local _, outs = probe:infer_shape { data = o.input_shape }
    local st = { 0 }
    for i = 2, #outs[1] do st[i] = outs[1][i] end
    self._state_shape = st
    local function init(v) return v ~= nil and { init = v } or nil end
    self._iW = self._params:get("i2h_weight", init(o.i2h_weight_initializer))
    self._hW = self._params:get("h2h_weight", init(o.h2h_weight_initializer))
    self._iB = self._params:get("i2h_bias", init(o.i2h_bias_initializer or "zeros"))
    self._hB = self._params:get("h2h_bias", init(o.h2h_bias_initializer or "zeros"))
    return self
  end

  local function conv_forward(self, inputs, states, name)
    local sym = S()
    local nf = self._num_hidden * self._ngates
    local i2h = sym.Convolution(inputs, { name = name .. "i2h", num_filter = nf,
      kernel = self._i2h_kernel, stride = self._i2h_stride, pad = self._i2h_pad,
      dilate = self._i2h_dilate, weight = self._iW, bias = self._iB, layout = self._conv_layout })
    local h2h = sym.Convolution(states[1], { name = name .. "h2h", num_filter = nf,
      kernel = self._h2h_kernel, dilate = self._h2h_dilate, pad = self._h2h_pad, stride = { 1, 1 },
      weight = self._hW, bias = self._hB, layout = self._conv_layout })
    return i2h, h2h
  end

  local function make(name, prefix, ngates, nstates)
    local cls = cell_class(name)
    local sig = class.declare(cls, class.signature(name, PARAMS))
    setmetatable(cls, { __index = BaseRNNCell, __call = function(_, ...)
      return conv_init(setmetatable({}, cls), name, sig(2, ...), prefix, ngates)
    end })
    function cls:state_info()
      local r = {}
      for i = 1, nstates do r[i] = { shape = self._state_shape, __layout__ = self._conv_layout } end
      return r
    end
    return cls
  end

  local ConvRNNCell = make("ConvRNNCell", "ConvRNN_", 1, 1)
  function ConvRNNCell:step(inputs, states)
    self._counter = self._counter + 1
    local name = string.format("%st%d_", self._prefix, self._counter)
    local i2h, h2h = conv_forward(self, inputs, states, name)
    local out = self:_get_activation(i2h + h2h, self._activation, name .. "out")
    return out, { out }
  end

  local ConvLSTMCell = make("ConvLSTMCell", "ConvLSTM_", 4, 2)
  function ConvLSTMCell:step(inputs, states)
    local sym = S()
    self._counter = self._counter + 1
    local name = string.format("%st%d_", self._prefix, self._counter)
    local i2h, h2h = conv_forward(self, inputs, states, name)
    local g = sym.SliceChannel(i2h + h2h, { num_outputs = 4, axis = self._conv_layout:find("C"),
      name = name .. "slice" })
    local ig = sym.Activation(g[1], { act_type = "sigmoid", name = name .. "i" })
    local fg = sym.Activation(g[2], { act_type = "sigmoid", name = name .. "f" })
    local ct = self:_get_activation(g[3], self._activation, name .. "c")
    local og = sym.Activation(g[4], { act_type = "sigmoid", name = name .. "o" })
    local c = sym.broadcast_add(fg * states[2], ig * ct, { name = name .. "state" })
    local h = sym.broadcast_mul(og, self:_get_activation(c, self._activation),
      { name = name .. "out" })
    return h, { h, c }
  end

  local ConvGRUCell = make("ConvGRUCell", "ConvGRU_", 3, 1)
  function ConvGRUCell:step(inputs, states)
    local sym = S()
    self._counter = self._counter + 1
    local name = string.format("%st%d_", self._prefix, self._counter)
    local i2h, h2h = conv_forward(self, inputs, states, name)
    local a = sym.SliceChannel(i2h, { num_outputs = 3, name = name .. "_i2h_slice" })
    local b = sym.SliceChannel(h2h, { num_outputs = 3, name = name .. "_h2h_slice" })
    local r = sym.Activation(a[1] + b[1], { act_type = "sigmoid", name = name .. "_r_act" })
    local z = sym.Activation(a[2] + b[2], { act_type = "sigmoid", name = name .. "_z_act" })
    local n = self:_get_activation(a[3] + r * b[3], self._activation, name .. "_h_act")
    local out = sym.broadcast_add((1 - z) * n, z * states[1], { name = name .. "out" })
    return out, { out }
  end
end
