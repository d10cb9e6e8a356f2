-- mx.gluon.rnn cells (MXNet 1.9's gluon.rnn.rnn_cell): RNNCell, LSTMCell, GRUCell,
-- SequentialRNNCell (HybridSequentialRNNCell), BidirectionalCell, DropoutCell,
-- ZoneoutCell, ResidualCell. A cell runs one step:
--
--   local out, states = cell(x, states)          -- x (N, C); states: a list of (N, H)
--   local outs, states = cell:unroll(T, inputs, {layout="NTC", merge_outputs=true,
--                                                begin_state=, valid_length=})
--
-- Parameters carry MXNet 1.9's names (i2h_weight, h2h_weight, i2h_bias, h2h_bias), so a
-- cell's save_parameters file has the names MXNet 1.9's cell writes (with prefix=, MXNet
-- 1.x's full names: rnn_i2h_weight). On mx.sym Symbols a cell gives Symbols (the "on
-- Symbols" section below). Gates are in MXNet's
-- order: LSTM i, f, c, o; GRU r, z, n. Axes in layouts: the position of 'T'/'N' in the
-- layout string (1-based in Lua).
local nd = require("mx.nd")
local S = require("mx.core.state")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local class = require("mx.core.class")

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget, rawset, getmetatable, ipairs, pairs, pcall =
  type, error, tostring, rawget, rawset, getmetatable, ipairs, pairs, pcall

local M = {}

local function cname(self) return tostring(getmetatable(self).__name) end

---------------------------------------------------------------- helpers
local ACT = { tanh = nd.tanh, relu = nd.relu, sigmoid = nd.sigmoid, softsign = nd.softsign,
  softrelu = nd.softrelu }
-- an activation by name (MXNet's _get_activation) or a function / Block applied to x
local function act_of(what, a, level)
  if type(a) == "string" then
    local f = ACT[a]
    if not f then
      error(string.format("%s: unknown activation '%s' (tanh, relu, sigmoid, softsign, "
        .. "softrelu, or a function)", what, a), level + 1)
    end
    return f
  end
  if type(a) == "function" or (type(a) == "table" and getmetatable(a) and getmetatable(a).__call) then
    return a
  end
  error(what .. ": activation must be a name or a function, got " .. type(a), level + 1)
end

local function check_size(what, name, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(string.format("%s: %s must be a positive integer, got %s", what, name, tostring(v)),
      level + 1)
  end
end

local function is_list(v) return type(v) == "table" and not nd.is_tensor(v) end

-- layout: 'NTC' or 'TNC' -> time axis, batch axis (1-based)
local function axes_of(what, layout, level)
  if layout ~= "NTC" and layout ~= "TNC" then
    error(string.format("%s: layout must be 'NTC' or 'TNC', got %s", what, tostring(layout)),
      level + 1)
  end
  return layout:find("T"), layout:find("N")
end

-- MXNet's _format_sequence: inputs (a tensor in `layout`, or a list of (N, C) steps) ->
-- a list of steps (merge false) or a tensor in `layout` (merge true); merge nil keeps
-- the kind it was given. Returns the value, the batch size.
local function format_sequence(what, length, inputs, layout, merge, level)
  local taxis, baxis = axes_of(what, layout, level + 1)
  if nd.is_tensor(inputs) then
    local s = inputs:shape()
    if #s < 3 then -- (the convolutional cells' steps have more than one feature dim)
      error(string.format("%s: inputs must be 3-D (%s) or more, got %d-D", what, layout, #s),
        level + 1)
    end
    if length ~= nil and s[taxis] ~= length then
      error(string.format("%s: length %d does not match the inputs' time axis (%d, layout %s)",
        what, length, s[taxis], layout), level + 1)
    end
    if merge == false then
      local r = {}
      if taxis == 1 then
        for t = 1, s[1] do r[t] = inputs[t] end
      else
        for t = 1, s[2] do r[t] = inputs[{ {}, t }] end
      end
      return r, s[baxis]
    end
    return inputs, s[baxis]
  end
  if not is_list(inputs) or not nd.is_tensor(inputs[1]) then
    error(what .. ": inputs must be a tensor or a non-empty list of (N, C) tensors, got "
      .. type(inputs), level + 1)
  end
  if length ~= nil and #inputs ~= length then
    error(string.format("%s: length %d does not match the %d inputs given", what, length,
      #inputs), level + 1)
  end
  local n = inputs[1]:shape()[1]
  if merge == true then
    return nd.stack(inputs, { axis = taxis }), n
  end
  return inputs, n
end
M._format_sequence = format_sequence

-- (N,) valid lengths -> the (N, 1) float mask of step t (1-based): t <= valid_length
local function step_mask(vl, t)
  local m = nd.greater_scalar(vl, { scalar = t - 1 })
  return nd.reshape(m, { -1, 1 })
end

-- keep where mask (N, 1) is 1: new, else old
local function blend(m, new, old)
  return nd.add(old, nd.mul(m, nd.sub(new, old)))
end

-- reverse each sequence of a list of (N, C) steps within its valid length (MXNet's
-- SequenceReverse with use_sequence_length): positions past the length stay in place
local function reverse_steps(steps, vl)
  local T = #steps
  local r = {}
  if vl == nil then
    for t = 1, T do r[t] = steps[T - t + 1] end
    return r
  end
  local lens = vl:totable()
  local N = #lens
  local idx = {}
  for t = 1, T do
    for n = 1, N do
      local L = lens[n]
      local src = t <= L and (L - t + 1) or t
      idx[(t - 1) * N + n] = (src - 1) * N + n -- 1-based row of the (T*N, C) stack
    end
  end
  local st = nd.stack(steps, { axis = 1 })
  local C = st:shape()[3]
  local flat = nd.reshape(st, { T * N, C })
  local g = nd.reshape(nd.take(flat, nd.array(idx, { dtype = "int64" }), { axis = 1 }),
    { T, N, C })
  for t = 1, T do r[t] = g[t] end
  return r
end
M._reverse_steps = reverse_steps

---------------------------------------------------------------- RecurrentCell
local RecurrentCell = HybridBlock:extend("RecurrentCell")
M.RecurrentCell = RecurrentCell
M.HybridRecurrentCell = RecurrentCell
function RecurrentCell:__init()
  Block.__init(self)
  rawset(self, "_modified", false)
  rawset(self, "_counter", 0)
end
function RecurrentCell:reset()
  rawset(self, "_counter", 0)
  for _, c in ipairs((self:children())) do
    if c.reset then c:reset() end
  end
end
function RecurrentCell:state_info()
  error(cname(self) .. ": state_info is not implemented", 2)
end
-- begin_state(batch_size, {func=mx.nd.zeros, dtype=, ctx=}): the list of initial states
function RecurrentCell:begin_state(batch_size, opts)
  if rawget(self, "_modified") then
    error(cname(self) .. ": after applying a modifier cell (ZoneoutCell, ResidualCell) the "
      .. "base cell cannot be called directly; call the modifier cell instead", 2)
  end
  opts = opts or {}
  local func = opts.func or nd.zeros
  local r = {}
  for i, info in ipairs(self:state_info(batch_size or 0)) do
    r[i] = func(info.shape, { dtype = opts.dtype or info.dtype, ctx = opts.ctx })
  end
  return r
end

-- unroll's arguments, MXNet's calling convention (positionally or by name); one signature
-- per cell class, for the messages
local UNROLL_PARAMS = { "length", "inputs", "begin_state", "layout", "merge_outputs",
  "valid_length" }
local unroll_sigs = {}
local function unroll_args(what, level, ...)
  local sig = unroll_sigs[what]
  if sig == nil then
    sig = class.signature(what, UNROLL_PARAMS)
    unroll_sigs[what] = sig
  end
  local o = sig(level + 1, ...)
  return o
end
M._unroll_args = unroll_args
-- unroll(length, inputs, begin_state=, layout='NTC', merge_outputs=, valid_length=)
-- -> outputs, states. outputs: a list of (N, H) steps, or a tensor in `layout` when
-- merge_outputs (nil: a list, a tensor when valid_length is given). With valid_length
-- (an (N,) tensor), outputs past each sequence's length are 0 and the states are those
-- of its last valid step.
function RecurrentCell:unroll(...)
  local what = cname(self) .. ":unroll"
  local opts = unroll_args(what, 2, ...)
  local length, inputs = opts.length, opts.inputs
  local layout = opts.layout or "NTC"
  self:reset()
  local steps, n = format_sequence(what, length, inputs, layout, false, 2)
  length = #steps
  local states = opts.begin_state or self:begin_state(n, { dtype = steps[1]:dtype() })
  local vl = opts.valid_length
  local outputs = {}
  for t = 1, length do
    local out, new = self(steps[t], states)
    if vl ~= nil then
      local m = step_mask(vl, t)
      out = nd.mul(out, m)
      for i = 1, #new do new[i] = blend(m, new[i], states[i]) end
    end
    outputs[t] = out
    states = new
  end
  local merge = opts.merge_outputs
  if merge == nil and vl ~= nil then merge = true end
  local o = format_sequence(what, length, outputs, layout, merge, 2)
  return o, states
end

-- cell bookkeeping shared by RNNCell, LSTMCell, GRUCell
local INITS = { "i2h_weight_initializer", "h2h_weight_initializer", "i2h_bias_initializer",
  "h2h_bias_initializer" }
-- MXNet 1.x's prefix/params, where a later parameter keeps MXNet's position after them:
-- prefix names the cell's parameters 1.x's way (gluon.block's _mx1_names: collect_params
-- lists prefix .. "i2h_weight", ...; the variables of a cell called on Symbols)
M._PREFIX = "prefix"
M._PARAMS = { "params", unsupported = "share parameters with share_parameters" }
local function cell_params(head, tail)
  local r = {}
  for _, t in ipairs { head, INITS, tail } do
    for _, n in ipairs(t) do r[#r + 1] = n end
  end
  return r
end
M._cell_params = cell_params
local function init_gates(self, what, hidden_size, ngates, o, level)
  check_size(what, "hidden_size", hidden_size, level + 1)
  local ni = o.input_size or 0
  if type(ni) ~= "number" or ni < 0 or ni % 1 ~= 0 then
    error(what .. ": input_size must be a non-negative integer, got " .. tostring(ni), level + 1)
  end
  self._hidden_size = hidden_size
  self._input_size = ni
  self._ngates = ngates
  local dt = o.dtype or "float32"
  local G = ngates * hidden_size
  local function cr(x) return x ~= nil and initializer.create(x) or nil end
  self.i2h_weight = Parameter("i2h_weight", { shape = { G, ni }, dtype = dt,
    init = cr(o.i2h_weight_initializer) })
  self.h2h_weight = Parameter("h2h_weight", { shape = { G, hidden_size }, dtype = dt,
    init = cr(o.h2h_weight_initializer) })
  self.i2h_bias = Parameter("i2h_bias", { shape = { G }, dtype = dt,
    init = cr(o.i2h_bias_initializer or "zeros") })
  self.h2h_bias = Parameter("h2h_bias", { shape = { G }, dtype = dt,
    init = cr(o.h2h_bias_initializer or "zeros") })
  self._fc = { num_hidden = G }
end

M._init_gates = init_gates

-- the two projections of one step: i2h(x), h2h(h); infers input_size at the first step
local function projections(self, x, h)
  local reg = rawget(self, "_reg")
  local w = reg.i2h_weight
  if w._data == nil then
    if not nd.is_tensor(x) then
      error(cname(self) .. ": inputs must be a tensor, got " .. type(x), 3)
    end
    local s = x:shape()
    w:set_shape({ w.shape[1], s[#s] }, 3)
    w:_finish_deferred_init(3)
  end
  local fo = rawget(self, "_fc")
  local i2h = nd.fully_connected(x, w:data(), reg.i2h_bias:data(), fo)
  local h2h = nd.fully_connected(h, reg.h2h_weight:data(), reg.h2h_bias:data(), fo)
  return i2h, h2h
end

M._projections = projections

local function check_states(self, states, k, level)
  if not is_list(states) or #states ~= k then
    error(string.format("%s: states must be a list of %d tensor%s (begin_state(batch_size))",
      cname(self), k, k == 1 and "" or "s"), level + 1)
  end
end

M._check_states = check_states

local function cell_repr(self)
  local s = self.i2h_weight.shape
  return string.format("%s -> %d", s[2] > 0 and tostring(s[2]) or "None", s[1])
end

---------------------------------------------------------------- RNNCell
-- RNNCell(hidden_size, activation='tanh', i2h_weight_initializer=, h2h_weight_initializer=,
-- i2h_bias_initializer='zeros', h2h_bias_initializer='zeros', input_size=0; dtype=, prefix=
-- by name):
-- h' = act(W_ih x + b_ih + W_hh h + b_hh)
local RNNCell = RecurrentCell:extend("RNNCell")
M.RNNCell = RNNCell
local RNNCELL = block.sig(RNNCell, cell_params({ "hidden_size", "activation" },
  { "input_size" }), { "dtype", "prefix" })
RNNCell._alias = "rnn"
function RNNCell:__init(...)
  RecurrentCell.__init(self)
  local o = RNNCELL(3, ...)
  block._set_prefix(self, o.prefix, "RNNCell", 3)
  init_gates(self, "RNNCell", o.hidden_size, 1, o, 3)
  self._activation = o.activation or "tanh"
  self._act = act_of("RNNCell", self._activation, 3)
end
function RNNCell:state_info(batch_size)
  return { { shape = { batch_size or 0, self._hidden_size }, __layout__ = "NC" } }
end
function RNNCell:forward(x, states)
  check_states(self, states, 1, 2)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local i2h, h2h = projections(self, x, states[1])
  local out = self._act(nd.add(i2h, h2h))
  return out, { out }
end
function RNNCell:_repr_args()
  return cell_repr(self) .. ", " .. tostring(self._activation)
end

---------------------------------------------------------------- LSTMCell
-- LSTMCell(hidden_size, the four initializers, input_size=0, prefix, params,
-- activation='tanh', recurrent_activation='sigmoid'; dtype= by name) (MXNet's order,
-- prefix/params included: params only nil):
-- gates i, f, c~, o from W_ih x + b_ih + W_hh h + b_hh; c' = f*c + i*c~; h' = o*act(c').
-- States: {h, c}.
local LSTMCell = RecurrentCell:extend("LSTMCell")
M.LSTMCell = LSTMCell
local LSTMCELL = block.sig(LSTMCell, cell_params({ "hidden_size" }, { "input_size", M._PREFIX,
  M._PARAMS, "activation", "recurrent_activation" }), { "dtype" })
LSTMCell._alias = "lstm"
function LSTMCell:__init(...)
  RecurrentCell.__init(self)
  local o = LSTMCELL(3, ...)
  block._set_prefix(self, o.prefix, "LSTMCell", 3)
  init_gates(self, "LSTMCell", o.hidden_size, 4, o, 3)
  self._act = act_of("LSTMCell", o.activation or "tanh", 3)
  self._ract = act_of("LSTMCell", o.recurrent_activation or "sigmoid", 3)
end
function LSTMCell:state_info(batch_size)
  local s = { batch_size or 0, self._hidden_size }
  return { { shape = s, __layout__ = "NC" }, { shape = { s[1], s[2] }, __layout__ = "NC" } }
end
function LSTMCell:forward(x, states)
  check_states(self, states, 2, 2)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local i2h, h2h = projections(self, x, states[1])
  local gi, gf, gc, go = nd.split(nd.add(i2h, h2h), { num_outputs = 4, axis = 2 })
  local act, ract = self._act, self._ract
  local c = nd.add(nd.mul(ract(gf), states[2]), nd.mul(ract(gi), act(gc)))
  local h = nd.mul(ract(go), act(c))
  return h, { h, c }
end
LSTMCell._repr_args = cell_repr

---------------------------------------------------------------- GRUCell
-- GRUCell(hidden_size, the four initializers, input_size=0; dtype=, prefix= by name): r, z, n gates
-- (MXNet's and cuDNN's form: the reset gate multiplies W_hh h + b_hh):
-- h' = (1 - z) * n + z * h.
local GRUCell = RecurrentCell:extend("GRUCell")
M.GRUCell = GRUCell
local GRUCELL = block.sig(GRUCell, cell_params({ "hidden_size" }, { "input_size" }),
  { "dtype", "prefix" })
GRUCell._alias = "gru"
function GRUCell:__init(...)
  RecurrentCell.__init(self)
  local o = GRUCELL(3, ...)
  block._set_prefix(self, o.prefix, "GRUCell", 3)
  init_gates(self, "GRUCell", o.hidden_size, 3, o, 3)
end
function GRUCell:state_info(batch_size)
  return { { shape = { batch_size or 0, self._hidden_size }, __layout__ = "NC" } }
end
function GRUCell:forward(x, states)
  check_states(self, states, 1, 2)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local h = states[1]
  local i2h, h2h = projections(self, x, h)
  local ir, iz, in_ = nd.split(i2h, { num_outputs = 3, axis = 2 })
  local hr, hz, hn = nd.split(h2h, { num_outputs = 3, axis = 2 })
  local r = nd.sigmoid(nd.add(ir, hr))
  local z = nd.sigmoid(nd.add(iz, hz))
  local n = nd.tanh(nd.add(in_, nd.mul(r, hn)))
  local out = nd.add(n, nd.mul(z, nd.sub(h, n))) -- (1 - z) * n + z * h
  return out, { out }
end
GRUCell._repr_args = cell_repr

---------------------------------------------------------------- SequentialRNNCell
-- SequentialRNNCell(): a stack of cells; add(cell, ...); states are the cells' states
-- concatenated in order. unroll runs each cell's unroll over the whole sequence (so a
-- BidirectionalCell may be part of the stack there, as in MXNet).
local SequentialRNNCell = RecurrentCell:extend("SequentialRNNCell")
M.SequentialRNNCell = SequentialRNNCell
M.HybridSequentialRNNCell = SequentialRNNCell
SequentialRNNCell.__is_sequential = true
local SEQCELL = block.sig(SequentialRNNCell, {})
function SequentialRNNCell:__init(...)
  SEQCELL(3, ...)
  RecurrentCell.__init(self)
end
function SequentialRNNCell:add(...)
  for i = 1, select("#", ...) do
    local c = select(i, ...)
    if type(c) ~= "table" or not c.state_info then
      error("SequentialRNNCell:add: argument " .. i .. " is not a recurrent cell", 2)
    end
    self:register_child(c)
  end
  return self
end
function SequentialRNNCell:len() return #rawget(self, "_child_names") end
function SequentialRNNCell:get(i) return (self:children())[i] end
function SequentialRNNCell:state_info(batch_size)
  local r = {}
  for _, c in ipairs((self:children())) do
    for _, info in ipairs(c:state_info(batch_size)) do r[#r + 1] = info end
  end
  return r
end
-- the slice of the flat states list that belongs to each child
local function split_states(cells, states, batch_size)
  local parts, p = {}, 0
  for i, c in ipairs(cells) do
    local k = #c:state_info(batch_size)
    local s = {}
    for j = 1, k do s[j] = states[p + j] end
    parts[i] = s
    p = p + k
  end
  return parts
end
function SequentialRNNCell:forward(x, states)
  local cells = self:children()
  check_states(self, states, #self:state_info(0), 2)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local parts = split_states(cells, states, 0)
  local all = {}
  for i, c in ipairs(cells) do
    if getmetatable(c) == M.BidirectionalCell then
      error("SequentialRNNCell: a BidirectionalCell cannot be stepped; use unroll", 2)
    end
    local s
    x, s = c(x, parts[i])
    for _, v in ipairs(s) do all[#all + 1] = v end
  end
  return x, all
end
function SequentialRNNCell:unroll(...)
  local what = "SequentialRNNCell:unroll"
  local opts = unroll_args(what, 2, ...)
  local length, inputs = opts.length, opts.inputs
  local layout = opts.layout or "NTC"
  self:reset()
  local x, n = format_sequence(what, length, inputs, layout, nil, 2)
  local cells = self:children()
  local begin = opts.begin_state
  if begin == nil then
    local dt = nd.is_tensor(x) and x:dtype() or x[1]:dtype()
    begin = {}
    for _, c in ipairs(cells) do
      for _, s in ipairs(c:begin_state(n, { dtype = dt })) do begin[#begin + 1] = s end
    end
  end
  local parts = split_states(cells, begin, n)
  local all = {}
  for i, c in ipairs(cells) do
    local s
    x, s = c:unroll(length, x, { begin_state = parts[i], layout = layout,
      merge_outputs = i < #cells and nil or opts.merge_outputs, valid_length = opts.valid_length })
    for _, v in ipairs(s) do all[#all + 1] = v end
  end
  return x, all
end
function SequentialRNNCell:begin_state(batch_size, opts)
  local r = {}
  for _, c in ipairs((self:children())) do
    for _, s in ipairs(c:begin_state(batch_size, opts)) do r[#r + 1] = s end
  end
  return r
end

---------------------------------------------------------------- DropoutCell
-- DropoutCell(rate, axes): dropout on the step's input in train mode; no states.
local DropoutCell = RecurrentCell:extend("DropoutCell")
M.DropoutCell = DropoutCell
local DROPCELL = block.sig(DropoutCell, { "rate", "axes" })
function DropoutCell:__init(...)
  RecurrentCell.__init(self)
  local o = DROPCELL(3, ...)
  local rate = o.rate
  if o.axes ~= nil and #o.axes == 0 then o.axes = nil end
  if type(rate) ~= "number" or rate < 0 or rate >= 1 then
    error("DropoutCell: rate must be a number in [0, 1), got " .. tostring(rate), 3)
  end
  self._rate = rate
  self._opts = { p = rate, axes = o.axes }
end
function DropoutCell.state_info() return {} end
function DropoutCell:forward(x, states)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  if self._rate > 0 and S.training then x = nd.dropout(x, self._opts) end
  return x, states or {}
end
function DropoutCell:unroll(...)
  local what = "DropoutCell:unroll"
  local opts = unroll_args(what, 2, ...)
  local length, inputs = opts.length, opts.inputs
  local layout = opts.layout or "NTC"
  self:reset()
  local x = format_sequence(what, length, inputs, layout, opts.merge_outputs, 2)
  if nd.is_tensor(x) then return (self:forward(x, opts.begin_state or {})) , opts.begin_state or {} end
  local r = {}
  for t = 1, #x do r[t] = self:forward(x[t], {}) end
  return r, opts.begin_state or {}
end
function DropoutCell:_repr_args() return "rate = " .. tostring(self._rate) end

---------------------------------------------------------------- modifier cells
-- ModifierCell(base_cell): wraps a cell (child "base_cell"); the base cell can no longer
-- be called on its own (MXNet's _modified).
local ModifierCell = RecurrentCell:extend("ModifierCell")
M.ModifierCell = ModifierCell
function ModifierCell:__init(base_cell, level)
  level = level or 3
  local what = cname(self)
  if type(base_cell) ~= "table" or not base_cell.state_info then
    error(what .. ": base_cell must be a recurrent cell", level)
  end
  if rawget(base_cell, "_modified") then
    error(what .. ": the cell is already modified; one cell cannot be modified twice", level)
  end
  RecurrentCell.__init(self)
  rawset(base_cell, "_modified", true)
  self.base_cell = base_cell
end
function ModifierCell:state_info(batch_size) return self.base_cell:state_info(batch_size) end
function ModifierCell:begin_state(batch_size, opts)
  local b = self.base_cell
  rawset(b, "_modified", false)
  local ok, r = pcall(b.begin_state, b, batch_size, opts)
  rawset(b, "_modified", true)
  if not ok then error(r, 2) end
  return r
end

-- A modifier cell keeping state between steps in Lua (ZoneoutCell, VariationalDropoutCell):
-- hybridize(on) hybridizes its children only; export names the reason it has no graph.
function M._step_in_lua(cls)
  function cls._hybridize_self(self)
    rawset(self, "_active", false)
    rawset(self, "_cached_op", nil)
  end
  function cls.export(self)
    local name = tostring(getmetatable(self).__name)
    error("export: " .. name .. " keeps its state between steps in Lua, so hybridize traces "
      .. "only its base cell (its own step runs in Lua at every call): export the base cell, "
      .. "or the block that steps this cell", 2)
  end
end

-- ZoneoutCell(base_cell, zoneout_outputs=0, zoneout_states=0): in train mode each
-- output/state element keeps its previous value with the given probability.
local ZoneoutCell = ModifierCell:extend("ZoneoutCell")
M.ZoneoutCell = ZoneoutCell
local ZONEOUT = block.sig(ZoneoutCell, { "base_cell", "zoneout_outputs", "zoneout_states" })
function ZoneoutCell:__init(...)
  local o = ZONEOUT(3, ...)
  local base_cell = o.base_cell
  if getmetatable(base_cell) == M.BidirectionalCell then
    error("ZoneoutCell: a BidirectionalCell cannot be stepped; wrap the cells under it", 3)
  end
  ModifierCell.__init(self, base_cell, 4)
  self.zoneout_outputs = o.zoneout_outputs or 0
  self.zoneout_states = o.zoneout_states or 0
end
function ZoneoutCell:reset()
  RecurrentCell.reset(self)
  rawset(self, "_prev_output", nil)
end
-- hybridize traces and replays the base cell; this cell's own step (the previous output
-- it keeps, the zoneout masks) runs in Lua at every call, so its state carries over from
-- step to step as in eager mode (a graph of this step would hold the trace's: zeros)
M._step_in_lua(ZoneoutCell)
local function zone(p, new, old)
  if p == 0 or not S.training then return new end
  local m = nd.dropout(nd.ones_like(new), { p = p })
  return nd.where(m, new, old)
end
function ZoneoutCell:forward(x, states)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local out, new = self.base_cell(x, states)
  local prev = rawget(self, "_prev_output") or nd.zeros_like(out)
  out = zone(self.zoneout_outputs, out, prev)
  local r = {}
  for i = 1, #new do r[i] = zone(self.zoneout_states, new[i], states[i]) end
  rawset(self, "_prev_output", out)
  return out, r
end

-- ResidualCell(base_cell): output = base_cell(x) + x.
local ResidualCell = ModifierCell:extend("ResidualCell")
M.ResidualCell = ResidualCell
local RESIDUAL = block.sig(ResidualCell, { "base_cell" })
function ResidualCell:__init(...)
  ModifierCell.__init(self, RESIDUAL(3, ...).base_cell, 4)
end
function ResidualCell:forward(x, states)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local out, s = self.base_cell(x, states)
  return nd.add(out, x), s
end
function ResidualCell:unroll(...)
  local what = "ResidualCell:unroll"
  local opts = unroll_args(what, 2, ...)
  local length, inputs = opts.length, opts.inputs
  local layout = opts.layout or "NTC"
  self:reset()
  local b = self.base_cell
  rawset(b, "_modified", false)
  local ok, outputs, states = pcall(b.unroll, b, length, inputs, { begin_state = opts.begin_state,
    layout = opts.layout, merge_outputs = opts.merge_outputs, valid_length = opts.valid_length })
  rawset(b, "_modified", true)
  if not ok then error(outputs, 2) end
  local merge = opts.merge_outputs
  if merge == nil then merge = nd.is_tensor(outputs) end
  local x = format_sequence(what, length, inputs, layout, merge, 2)
  local vl = opts.valid_length
  if merge then
    if vl ~= nil then
      local taxis = layout:find("T")
      local T = x:shape()[taxis]
      local m = nd.lesser(nd.reshape(nd.arange(0, T), taxis == 1 and { T, 1, 1 } or { 1, T, 1 }),
        nd.reshape(vl, taxis == 1 and { 1, -1, 1 } or { -1, 1, 1 }))
      x = nd.mul(x, m)
    end
    return nd.add(outputs, x), states
  end
  local r = {}
  for t = 1, #outputs do
    local xt = x[t]
    if vl ~= nil then xt = nd.mul(xt, step_mask(vl, t)) end
    r[t] = nd.add(outputs[t], xt)
  end
  return r, states
end

---------------------------------------------------------------- BidirectionalCell
-- BidirectionalCell(l_cell, r_cell, output_prefix): l_cell reads the sequence forwards, r_cell
-- backwards (within each valid length); outputs are concatenated (l first) on the
-- feature axis; states: l_cell's then r_cell's. Only unroll (it cannot be stepped).
local BidirectionalCell = RecurrentCell:extend("BidirectionalCell")
M.BidirectionalCell = BidirectionalCell
local BICELL = block.sig(BidirectionalCell, { "l_cell", "r_cell",
  { "output_prefix", unsupported = "outputs are not named", default = "bi_" } })
function BidirectionalCell:__init(...)
  local a = BICELL(3, ...)
  local l_cell, r_cell = a.l_cell, a.r_cell
  RecurrentCell.__init(self)
  for i, c in ipairs { l_cell, r_cell } do
    if type(c) ~= "table" or not c.state_info then
      error("BidirectionalCell: argument " .. i .. " is not a recurrent cell", 3)
    end
  end
  self:register_child(l_cell, "l_cell")
  self:register_child(r_cell, "r_cell")
end
function BidirectionalCell.forward()
  error("BidirectionalCell: cannot be stepped; use unroll", 2)
end
function BidirectionalCell:state_info(batch_size)
  local r = {}
  for _, c in ipairs((self:children())) do
    for _, info in ipairs(c:state_info(batch_size)) do r[#r + 1] = info end
  end
  return r
end
BidirectionalCell.begin_state = SequentialRNNCell.begin_state
function BidirectionalCell:unroll(...)
  local what = "BidirectionalCell:unroll"
  local opts = unroll_args(what, 2, ...)
  local length, inputs = opts.length, opts.inputs
  local layout = opts.layout or "NTC"
  self:reset()
  local steps, n = format_sequence(what, length, inputs, layout, false, 2)
  length = #steps
  local vl = opts.valid_length
  local l_cell, r_cell = self.l_cell, self.r_cell
  local begin = opts.begin_state or self:begin_state(n, { dtype = steps[1]:dtype() })
  local parts = split_states({ l_cell, r_cell }, begin, n)
  local lo, ls = l_cell:unroll(length, steps, { begin_state = parts[1], layout = layout,
    merge_outputs = false, valid_length = vl })
  local ro, rs = r_cell:unroll(length, reverse_steps(steps, vl), { begin_state = parts[2],
    layout = layout, merge_outputs = false, valid_length = vl })
  ro = reverse_steps(ro, vl)
  local outs = {}
  for t = 1, length do outs[t] = nd.concat(lo[t], ro[t], { dim = 2 }) end
  if vl ~= nil then
    for t = 1, length do outs[t] = nd.mul(outs[t], step_mask(vl, t)) end
  end
  local merge = opts.merge_outputs
  if merge == nil and vl ~= nil then merge = true end
  local o = format_sequence(what, length, outs, layout, merge, 2)
  local states = {}
  for _, s in ipairs(ls) do states[#states + 1] = s end
  for _, s in ipairs(rs) do states[#states + 1] = s end
  return o, states
end

---------------------------------------------------------------- on Symbols
-- A cell stepped or unrolled on mx.sym Symbols gives Symbols (MXNet 1.x's F = symbol;
-- mx.gluon.symbol_node): the parameters are variables named as MXNet 1.x names them
-- (prefix .. "i2h_weight"), step t's output <prefix>t<t>_out_output (t from 0 after
-- reset, as MXNet's). unroll makes one node for the whole sequence (begin states, when
-- not given, are zeros of the inputs' batch; a variational dropout mask is drawn once for
-- all steps); its states are <prefix>t<T-1>_state<k>_output.
local function on_symbols(v)
  local sym = require("mx.symbol")
  return sym.is_symbol(v) or (type(v) == "table" and getmetatable(v) == nil and sym.is_symbol(v[1]))
end
M._on_symbols = on_symbols
-- the cell whose step names the outputs (a stack: its last cell; a modifier: its base)
local function out_cell(c)
  local mt = getmetatable(c)
  if rawget(c, "_reg").base_cell ~= nil then return out_cell(c.base_cell) end
  if mt.__is_sequential then
    local kids = c:children()
    if #kids > 0 then return out_cell(kids[#kids]) end
  end
  return c
end
local function out_name(c, prefixes, t)
  return (prefixes[out_cell(c)] or prefixes[c]) .. "t" .. t .. "_out_output"
end

function RecurrentCell:_symbol_spec(level, x, states)
  if type(states) ~= "table" or getmetatable(states) ~= nil then
    error(cname(self) .. ": states must be a list of Symbols (a cell called on Symbols)", level + 1)
  end
  local t = rawget(self, "_counter")
  rawset(self, "_counter", t + 1)
  local _, prefixes = block._mx1_names(self)
  return { args = { n = 2, x, states }, outs = { true, #states },
    names = { out_name(self, prefixes, t) }, name = prefixes[self] .. "t" .. t }
end

local function symbolic_unroll(self, what, opts, level)
  local sym = require("mx.symbol")
  local inputs, length = opts.inputs, opts.length
  local layout = opts.layout or "NTC"
  axes_of(what, layout, level + 1)
  local listed = not sym.is_symbol(inputs)
  if listed then
    if length ~= nil and length ~= #inputs then
      error(string.format("%s: length %s does not match the %d inputs given", what,
        tostring(length), #inputs), level + 1)
    end
    length = #inputs
  elseif type(length) ~= "number" or length < 1 or length % 1 ~= 0 then
    error(what .. ": length must be a positive integer to unroll a Symbol, got "
      .. tostring(length), level + 1)
  end
  local vl = opts.valid_length
  local merge = opts.merge_outputs
  if merge == nil then merge = not listed or vl ~= nil end
  self:reset()
  local nstates = #self:state_info(0)
  local _, prefixes = block._mx1_names(self)
  local names, k = {}, merge and 1 or length
  if not merge then
    for t = 1, length do names[t] = out_name(self, prefixes, t - 1) end
  end
  for i = 1, nstates do
    names[k + i] = string.format("%st%d_state%d_output", prefixes[self], length - 1, i - 1)
  end
  return require("mx.gluon.symbol_node").node(self, {
    args = { n = 3, inputs, opts.begin_state, vl },
    fn = function(cell, x, bs, v)
      return cell:unroll(length, x, { begin_state = bs, layout = layout, merge_outputs = merge,
        valid_length = v })
    end,
    outs = { merge and true or length, nstates }, names = names, name = prefixes[self] .. "unroll" },
    level) -- (a tail call)
end

-- unroll(...) on Symbols: symbolic_unroll; else the cell's own
local function sym_or(f)
  return function(self, ...)
    local what = cname(self) .. ":unroll"
    local opts = unroll_args(what, 2, ...)
    if on_symbols(opts.inputs) then return symbolic_unroll(self, what, opts, 2) end
    return f(self, ...)
  end
end
M._sym_or = sym_or

---------------------------------------------------------------- errors
-- Every cell's forward and unroll run under pcall: an error raised inside (a child
-- cell's, an op's, positioned in mx's own files) is re-raised naming the cell, at the
-- caller's line (block._guarded).
for _, cls in pairs(M) do
  if type(cls) == "table" and rawget(cls, "__is_block") then
    for _, meth in ipairs { "forward", "unroll" } do
      local f = rawget(cls, meth)
      if f and meth == "unroll" then f = sym_or(f) end
      if f then cls[meth] = block._guarded(cname, f) end
    end
  end
end

return M
