-- mx.rnn — MXNet 1.x's symbolic RNN API (python/mxnet/rnn): cells that unroll into
-- mx.sym graphs (for Module / BucketingModule), and the bucketing text iterator.
--
--   local stack = mx.rnn.SequentialRNNCell()
--   stack:add(mx.rnn.LSTMCell(200, { prefix = "lstm_l0_" }))
--   local outputs = stack:unroll(seq_len, embed, { merge_outputs = true })  -- (N, T, 200)
--   local sents, vocab = mx.rnn.encode_sentences(lines, { invalid_label = 0, start_label = 1 })
--   local it = mx.rnn.BucketSentenceIter(sents, 32, { buckets = { 10, 20, 30 }, invalid_label = 0 })
--
-- Cells: RNNCell(num_hidden, activation="tanh", prefix="rnn_", params), LSTMCell(num_hidden,
-- prefix="lstm_", params, forget_bias=1), GRUCell(num_hidden, prefix="gru_", params),
-- SequentialRNNCell(params), DropoutCell(dropout, prefix="dropout_", params). Their
-- variables: <prefix>i2h_weight, i2h_bias, h2h_weight, h2h_bias (LSTM's i2h_bias made with
-- init.LSTMBias(forget_bias)), shared through an RNNParams (params=). cell(inputs,
-- states) is one step; begin_state() zeros of (0, num_hidden) (the batch from the
-- graph's inference); unroll(length, inputs, begin_state, layout="NTC", merge_outputs) ->
-- outputs, states. Gates as MXNet's: LSTM i, f, c, o; GRU r, z, n.
local class = require("mx.core.class")

local type, error, tostring, ipairs, pairs, setmetatable, getmetatable = type, error, tostring,
  ipairs, pairs, setmetatable, getmetatable

local M = {}

local function S() return require("mx.symbol") end

---------------------------------------------------------------- RNNParams
local RNNParams = class.base("RNNParams")
M.RNNParams = RNNParams
local PARAMS = class.declare(RNNParams, class.signature("RNNParams", { "prefix" }))
setmetatable(RNNParams, { __call = function(_, ...)
  local o = PARAMS(2, ...)
  return setmetatable({ _prefix = o.prefix or "", _params = {} }, RNNParams)
end })
-- get(name, var options): the variable <prefix><name>, made once
function RNNParams:get(name, opts)
  local full = self._prefix .. name
  local v = self._params[full]
  if v == nil then
    v = S().var(full, opts)
    self._params[full] = v
  end
  return v
end

---------------------------------------------------------------- BaseRNNCell
local BaseRNNCell = class.base("BaseRNNCell")
M.BaseRNNCell = BaseRNNCell
BaseRNNCell.__call = function(self, inputs, states) return self:step(inputs, states) end

local function base_init(self, prefix, params)
  self._own_params = params == nil
  self._prefix = prefix or ""
  self._params = params or RNNParams(self._prefix)
  self._modified = false
  self:reset()
  return self
end

-- Subclasses (MXNet's class C(mx.rnn.BaseRNNCell)): local C = mx.rnn.BaseRNNCell:extend("C");
-- C:__init(...) calls mx.rnn.BaseRNNCell.__init(self, prefix, params); define state_info()
-- and step(inputs, states) (MXNet's __call__); C(...) makes one.
function BaseRNNCell.extend(parent, name)
  local c = class.extend(parent, name)
  c.__call = BaseRNNCell.__call
  setmetatable(c, { __index = parent, __call = function(cls, ...)
    local self = setmetatable({}, cls)
    if cls.__init then cls.__init(self, ...) else base_init(self, "", nil) end
    return self
  end })
  return c
end
function BaseRNNCell.__init(self, prefix, params) return base_init(self, prefix, params) end

-- _get_activation(x, activation, name): an act_type name (Activation) or a function
-- activation(x, {name=}) (MXNet's callables, LeakyReLU with slope...)
function BaseRNNCell._get_activation(_, x, activation, name)
  if type(activation) == "string" then return S().Activation(x, { act_type = activation, name = name }) end
  return activation(x, { name = name })
end

function BaseRNNCell:reset()
  self._init_counter, self._counter = -1, -1
  for _, c in ipairs(self._cells or {}) do c:reset() end
end
function BaseRNNCell:params() self._own_params = false return self._params end
function BaseRNNCell.step(self)
  error(tostring(getmetatable(self).__name) .. ": a step is not implemented", 2)
end

-- begin_state(func=mx.sym.zeros, {var options}): one symbol per state
-- begin_state(func=mx.sym.zeros, {dtype=, ...}) or begin_state{func=, ...}: one symbol per
-- state, named <prefix>begin_state_<k>: func(shape, {name=}) for creation ops (zeros,
-- ones...); mx.sym.Variable / var get (name, {shape=, attr={__layout__=}}), as MXNet's
-- func(name=, shape=, __layout__=) (0 in a shape: the batch, from inference)
function BaseRNNCell:begin_state(func, opts)
  if type(func) == "table" and opts == nil and getmetatable(func) == nil then
    func, opts = func.func, func
  end
  if self._modified then
    error("BaseRNNCell: after a modifier cell (DropoutCell...) the base cell cannot be called "
      .. "directly; call the modifier cell instead", 2)
  end
  local r = {}
  for _, info in ipairs(self:state_info()) do
    self._init_counter = self._init_counter + 1
    local name = string.format("%sbegin_state_%d", self._prefix, self._init_counter)
    local sym = S()
    if func == nil then
      r[#r + 1] = sym.zeros(info.shape, { name = name, dtype = opts and opts.dtype })
    elseif func == sym.Variable or func == sym.var then
      r[#r + 1] = func(name, { shape = info.shape, attr = { __layout__ = info.__layout__ } })
    else
      r[#r + 1] = func(info.shape, { name = name })
    end
  end
  return r
end

-- inputs: a symbol (N, T, C) split into steps along layout's T, or a list of steps;
-- merged back when merge is true
local function normalize(length, inputs, layout, merge)
  local sym = S()
  local axis = layout:find("T", 1, true)
  if sym.is_symbol(inputs) then
    if merge == false then
      local steps = sym.SliceChannel(inputs, { axis = axis, num_outputs = length, squeeze_axis = true })
      local list = {}
      for t = 1, length do list[t] = length == 1 and steps or steps[t] end
      return list, axis
    end
    return inputs, axis
  end
  if type(inputs) ~= "table" or #inputs ~= length then
    error("unroll: inputs must be a Symbol or a list of " .. tostring(length) .. " Symbols", 3)
  end
  if merge == true then
    local e = {}
    for t, x in ipairs(inputs) do e[t] = sym.expand_dims(x, { axis = axis }) end
    return sym.Concat(e, { dim = axis }), axis
  end
  return inputs, axis
end
M._normalize = normalize

local UNROLL = class.signature("unroll", { "length", "inputs", { "begin_state", list = true },
  "layout", "merge_outputs" })

-- unroll(length, inputs, begin_state, layout="NTC", merge_outputs) -> outputs, states
function BaseRNNCell:unroll(...)
  local o = UNROLL(2, ...)
  self:reset()
  local layout = o.layout or "NTC"
  local steps = normalize(o.length, o.inputs, layout, false)
  local states = o.begin_state or self:begin_state()
  local outputs = {}
  for t = 1, o.length do
    local out
    out, states = self(steps[t], states)
    outputs[t] = out
  end
  outputs = normalize(o.length, outputs, layout, o.merge_outputs)
  return outputs, states
end

local function cell_class(name)
  local c = class.extend(BaseRNNCell, name)
  c.__call = BaseRNNCell.__call
  M[name] = c
  return c
end

local function gates(self, inputs, h, ngates, name)
  local sym = S()
  local nh = self._num_hidden * ngates
  local i2h = sym.FullyConnected(inputs, { weight = self._iW, bias = self._iB, num_hidden = nh,
    name = name .. "i2h" })
  local h2h = sym.FullyConnected(h, { weight = self._hW, bias = self._hB, num_hidden = nh,
    name = name .. "h2h" })
  return i2h, h2h
end

local function make_params(self, ib_init)
  self._iW = self._params:get("i2h_weight")
  self._iB = self._params:get("i2h_bias", ib_init and { init = ib_init } or nil)
  self._hW = self._params:get("h2h_weight")
  self._hB = self._params:get("h2h_bias")
end

local function num_hidden(who, n, level)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 then
    error(who .. ": num_hidden must be a positive integer, got " .. tostring(n), level + 1)
  end
  return n
end

---------------------------------------------------------------- RNNCell
local RNNCell = cell_class("RNNCell")
local RNN_SIG = class.declare(RNNCell, class.signature("RNNCell", { "num_hidden", "activation",
  "prefix", "params" }))
setmetatable(RNNCell, { __index = BaseRNNCell, __call = function(_, ...)
  local o = RNN_SIG(2, ...)
  local self = base_init(setmetatable({}, RNNCell), o.prefix or "rnn_", o.params)
  self._num_hidden = num_hidden("RNNCell", o.num_hidden, 2)
  self._activation = o.activation or "tanh"
  make_params(self)
  return self
end })
function RNNCell:state_info() return { { shape = { 0, self._num_hidden }, __layout__ = "NC" } } end
function RNNCell:step(inputs, states)
  self._counter = self._counter + 1
  local name = string.format("%st%d_", self._prefix, self._counter)
  local i2h, h2h = gates(self, inputs, states[1], 1, name)
  local out = self:_get_activation(i2h + h2h, self._activation, name .. "out")
  return out, { out }
end

---------------------------------------------------------------- LSTMCell
local LSTMCell = cell_class("LSTMCell")
local LSTM_SIG = class.declare(LSTMCell, class.signature("LSTMCell", { "num_hidden", "prefix",
  "params", "forget_bias" }))
setmetatable(LSTMCell, { __index = BaseRNNCell, __call = function(_, ...)
  local o = LSTM_SIG(2, ...)
  local self = base_init(setmetatable({}, LSTMCell), o.prefix or "lstm_", o.params)
  self._num_hidden = num_hidden("LSTMCell", o.num_hidden, 2)
  make_params(self, require("mx.initializer").LSTMBias(o.forget_bias or 1.0))
  return self
end })
function LSTMCell:state_info()
  return { { shape = { 0, self._num_hidden }, __layout__ = "NC" },
    { shape = { 0, self._num_hidden }, __layout__ = "NC" } }
end
function LSTMCell:step(inputs, states)
  local sym = S()
  self._counter = self._counter + 1
  local name = string.format("%st%d_", self._prefix, self._counter)
  local i2h, h2h = gates(self, inputs, states[1], 4, name)
  local g = sym.SliceChannel(i2h + h2h, { num_outputs = 4, name = name .. "slice" })
  local ig = sym.Activation(g[1], { act_type = "sigmoid", name = name .. "i" })
  local fg = sym.Activation(g[2], { act_type = "sigmoid", name = name .. "f" })
  local ct = sym.Activation(g[3], { act_type = "tanh", name = name .. "c" })
  local og = sym.Activation(g[4], { act_type = "sigmoid", name = name .. "o" })
  local c = sym.broadcast_add(fg * states[2], ig * ct, { name = name .. "state" })
  local h = sym.broadcast_mul(og, sym.Activation(c, { act_type = "tanh" }), { name = name .. "out" })
  return h, { h, c }
end

---------------------------------------------------------------- GRUCell
local GRUCell = cell_class("GRUCell")
local GRU_SIG = class.declare(GRUCell, class.signature("GRUCell", { "num_hidden", "prefix",
  "params" }))
setmetatable(GRUCell, { __index = BaseRNNCell, __call = function(_, ...)
  local o = GRU_SIG(2, ...)
  local self = base_init(setmetatable({}, GRUCell), o.prefix or "gru_", o.params)
  self._num_hidden = num_hidden("GRUCell", o.num_hidden, 2)
  make_params(self)
  return self
end })
function GRUCell:state_info() return { { shape = { 0, self._num_hidden }, __layout__ = "NC" } } end
function GRUCell:step(inputs, states)
  local sym = S()
  self._counter = self._counter + 1
  local name = string.format("%st%d_", self._prefix, self._counter)
  local h = states[1]
  local i2h, h2h = gates(self, inputs, h, 3, name)
  local a = sym.SliceChannel(i2h, { num_outputs = 3, name = name .. "i2h_slice" })
  local b = sym.SliceChannel(h2h, { num_outputs = 3, name = name .. "h2h_slice" })
  local r = sym.Activation(a[1] + b[1], { act_type = "sigmoid", name = name .. "r_act" })
  local z = sym.Activation(a[2] + b[2], { act_type = "sigmoid", name = name .. "z_act" })
  local n = sym.Activation(a[3] + r * b[3], { act_type = "tanh", name = name .. "h_act" })
  local out = sym.broadcast_add((1 - z) * n, z * h, { name = name .. "out" })
  return out, { out }
end

---------------------------------------------------------------- SequentialRNNCell
local SequentialRNNCell = cell_class("SequentialRNNCell")
local SEQ_SIG = class.declare(SequentialRNNCell, class.signature("SequentialRNNCell", { "params" }))
setmetatable(SequentialRNNCell, { __index = BaseRNNCell, __call = function(_, ...)
  local o = SEQ_SIG(2, ...)
  local self = base_init(setmetatable({ _cells = {} }, SequentialRNNCell), "", o.params)
  self._override_cell_params = o.params ~= nil
  return self
end })
function SequentialRNNCell:add(cell)
  self._cells[#self._cells + 1] = cell
  -- the stack's params hold its cells' (MXNet's params._params.update)
  for k, v in pairs(cell:params()._params) do self._params._params[k] = v end
  return self
end
function SequentialRNNCell:state_info()
  local r = {}
  for _, c in ipairs(self._cells) do
    for _, i in ipairs(c:state_info()) do r[#r + 1] = i end
  end
  return r
end
function SequentialRNNCell:begin_state(...)
  local r = {}
  for _, c in ipairs(self._cells) do
    for _, s in ipairs(c:begin_state(...)) do r[#r + 1] = s end
  end
  return r
end
local function split_states(cells, states)
  local parts, p = {}, 0
  for i, c in ipairs(cells) do
    local n = #c:state_info()
    local s = {}
    for j = 1, n do s[j] = states[p + j] end
    parts[i], p = s, p + n
  end
  return parts
end
function SequentialRNNCell:step(inputs, states)
  self._counter = self._counter + 1
  local parts = split_states(self._cells, states)
  local all = {}
  for i, c in ipairs(self._cells) do
    local s
    inputs, s = c(inputs, parts[i])
    for _, v in ipairs(s) do all[#all + 1] = v end
  end
  return inputs, all
end
function SequentialRNNCell:unroll(...)
  local o = UNROLL(2, ...)
  self:reset()
  local states = o.begin_state or self:begin_state()
  local parts = split_states(self._cells, states)
  local x = o.inputs
  local all = {}
  for i, c in ipairs(self._cells) do
    local s
    x, s = c:unroll(o.length, x, parts[i], o.layout or "NTC",
      i < #self._cells and nil or o.merge_outputs)
    for _, v in ipairs(s) do all[#all + 1] = v end
  end
  return x, all
end

---------------------------------------------------------------- DropoutCell
local DropoutCell = cell_class("DropoutCell")
local DROP_SIG = class.declare(DropoutCell, class.signature("DropoutCell", { "dropout", "prefix",
  "params" }))
setmetatable(DropoutCell, { __index = BaseRNNCell, __call = function(_, ...)
  local o = DROP_SIG(2, ...)
  local self = base_init(setmetatable({}, DropoutCell), o.prefix or "dropout_", o.params)
  if type(o.dropout) ~= "number" or o.dropout < 0 or o.dropout >= 1 then
    error("DropoutCell: dropout must be a number in [0, 1), got " .. tostring(o.dropout), 2)
  end
  self._dropout = o.dropout
  return self
end })
function DropoutCell.state_info() return {} end
function DropoutCell:step(inputs, states)
  if self._dropout > 0 then inputs = S().Dropout(inputs, { p = self._dropout }) end
  return inputs, states
end
function DropoutCell:unroll(...)
  local o = UNROLL(2, ...)
  self:reset()
  local x = normalize(o.length, o.inputs, o.layout or "NTC", o.merge_outputs)
  if S().is_symbol(x) then return self(x, {}), {} end
  return BaseRNNCell.unroll(self, o)
end

---------------------------------------------------------------- text
local ENC = class.signature("encode_sentences", { { "sentences", list = true }, "vocab",
  "invalid_label", "invalid_key", "start_label", "unknown_token" })
-- encode_sentences(sentences, vocab, invalid_label=-1, invalid_key="\n", start_label=0,
-- unknown_token) -> sentences of ids, vocab (word -> id): MXNet's (new words get the next
-- id, skipping invalid_label; with a given vocab an unknown word is an error unless
-- unknown_token)
function M.encode_sentences(...)
  local o = ENC(2, ...)
  local invalid_label = o.invalid_label or -1
  local idx = o.start_label or 0
  local vocab, new = o.vocab, false
  if vocab == nil then
    vocab = { [o.invalid_key or "\n"] = invalid_label }
    new = true
  end
  local res = {}
  for i, sent in ipairs(o.sentences) do
    local coded = {}
    for j, word in ipairs(sent) do
      if vocab[word] == nil then
        if not (new or o.unknown_token) then
          error(string.format("encode_sentences: unknown token %s (sentence %d, word %d)",
            tostring(word), i, j), 2)
        end
        if idx == invalid_label then idx = idx + 1 end
        if o.unknown_token then word = o.unknown_token end
        if vocab[word] == nil then
          vocab[word] = idx
          idx = idx + 1
        end
      end
      coded[j] = vocab[word]
    end
    res[i] = coded
  end
  return res, vocab
end
class.declare(M.encode_sentences, ENC)

M.BucketSentenceIter = require("mx.rnn.io").BucketSentenceIter
M._base_init, M._normalize, M._UNROLL, M._cell_class, M._split_states = base_init, normalize, UNROLL,
  cell_class, split_states
require("mx.rnn.cells")(M)
require("mx.rnn.conv_cells")(M)

return M
