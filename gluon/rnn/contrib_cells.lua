-- gluon/rnn/contrib_cells.lua — the cells of MXNet 1.9's gluon.contrib.rnn (gluon.rnn in
-- 2.0): LSTMPCell (an LSTM with a projected recurrent state) and VariationalDropoutCell
-- (dropout masks drawn once per sequence, the same at every step); dynamic_unroll.
local nd = require("mx.nd")
local S = require("mx.core.state")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local cells = require("mx.gluon.rnn.rnn_cell")

local type, error, tostring, rawget, rawset, getmetatable, ipairs = type, error, tostring, rawget,
  rawset, getmetatable, ipairs
local RecurrentCell, ModifierCell = cells.RecurrentCell, cells.ModifierCell

local M = {}

---------------------------------------------------------------- LSTMPCell
-- LSTMPCell(hidden_size, projection_size, i2h_weight_initializer, h2h_weight_initializer,
-- h2r_weight_initializer, i2h_bias_initializer='zeros', h2h_bias_initializer='zeros',
-- input_size=0; dtype=, prefix= by name): LSTMCell's gates, read from the projected state r
-- (W_hh is (4 hidden, projection)); c' = f*c + i*c~, h = o*tanh(c'), r' = W_hr h (no bias).
-- Output r'; states {r, c}: (N, projection_size), (N, hidden_size).
local LSTMPCell = RecurrentCell:extend("LSTMPCell")
M.LSTMPCell = LSTMPCell
local LSTMP = block.sig(LSTMPCell, { "hidden_size", "projection_size", "i2h_weight_initializer",
  "h2h_weight_initializer", "h2r_weight_initializer", "i2h_bias_initializer",
  "h2h_bias_initializer", "input_size" }, { "dtype", "prefix" })
LSTMPCell._alias = "lstmp"
function LSTMPCell:__init(...)
  RecurrentCell.__init(self)
  local o = LSTMP(3, ...)
  block._set_prefix(self, o.prefix, "LSTMPCell", 3)
  local P = o.projection_size
  if type(P) ~= "number" or P < 1 or P % 1 ~= 0 then
    error("LSTMPCell: projection_size must be a positive integer, got " .. tostring(P), 3)
  end
  cells._init_gates(self, "LSTMPCell", o.hidden_size, 4, o, 3)
  local dt = o.dtype or "float32"
  local function cr(x) return x ~= nil and initializer.create(x) or nil end
  self.h2h_weight = Parameter("h2h_weight", { shape = { 4 * o.hidden_size, P }, dtype = dt,
    init = cr(o.h2h_weight_initializer) })
  self.h2r_weight = Parameter("h2r_weight", { shape = { P, o.hidden_size }, dtype = dt,
    init = cr(o.h2r_weight_initializer) })
  self._projection_size = P
end
function LSTMPCell:state_info(batch_size)
  return { { shape = { batch_size or 0, self._projection_size }, __layout__ = "NC" },
    { shape = { batch_size or 0, self._hidden_size }, __layout__ = "NC" } }
end
function LSTMPCell:forward(x, states)
  cells._check_states(self, states, 2, 2)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  local i2h, h2h = cells._projections(self, x, states[1])
  local gi, gf, gc, go = nd.split(nd.add(i2h, h2h), { num_outputs = 4, axis = 2 })
  local c = nd.add(nd.mul(nd.sigmoid(gf), states[2]), nd.mul(nd.sigmoid(gi), nd.tanh(gc)))
  local h = nd.mul(nd.sigmoid(go), nd.tanh(c))
  local r = nd.fully_connected(h, self.h2r_weight:data(), nil,
    { num_hidden = self._projection_size, no_bias = true })
  return r, { r, c }
end
function LSTMPCell:_repr_args()
  local s = self.i2h_weight.shape
  return string.format("%s -> %d -> %d", s[2] > 0 and tostring(s[2]) or "None", s[1],
    self._projection_size)
end

---------------------------------------------------------------- VariationalDropoutCell
-- VariationalDropoutCell(base_cell, drop_inputs=0, drop_states=0, drop_outputs=0): in
-- train mode the step's input, the first state (h) and the output are multiplied by
-- dropout masks (scaled by 1 / (1 - p)) drawn at the first step of a sequence and kept
-- until reset() (unroll resets): the same units are dropped at every step (Gal and
-- Ghahramani's variational dropout). The masks are drop_inputs_mask, drop_states_mask,
-- drop_outputs_mask, as MXNet names them.
local VarDrop = ModifierCell:extend("VariationalDropoutCell")
M.VariationalDropoutCell = VarDrop
local VARDROP = block.sig(VarDrop, { "base_cell", "drop_inputs", "drop_states", "drop_outputs" })
function VarDrop:__init(...)
  local o = VARDROP(3, ...)
  local rates = {}
  for _, k in ipairs { "drop_inputs", "drop_states", "drop_outputs" } do
    local p = o[k] or 0
    if type(p) ~= "number" or p < 0 or p >= 1 then
      error("VariationalDropoutCell: " .. k .. " must be a number in [0, 1), got " .. tostring(p), 3)
    end
    rates[k] = p
  end
  if o.base_cell ~= nil and getmetatable(o.base_cell) == cells.BidirectionalCell then
    error("VariationalDropoutCell: a BidirectionalCell cannot be stepped; wrap the cells under it", 3)
  end
  ModifierCell.__init(self, o.base_cell, 4)
  rawset(self, "_rates", rates)
end
function VarDrop:reset()
  RecurrentCell.reset(self)
  rawset(self, "drop_inputs_mask", nil)
  rawset(self, "drop_states_mask", nil)
  rawset(self, "drop_outputs_mask", nil)
end
-- hybridize traces the base cell; the masks (drawn at a sequence's first step, kept until
-- reset) are applied in Lua at every call, as in eager mode
cells._step_in_lua(VarDrop)
-- the mask of `key` (drawn like x's shape on first use), or nil when not dropping
local function mask(self, key, x)
  local p = rawget(self, "_rates")[key]
  if p == 0 or not S.training then return nil end
  local m = rawget(self, key .. "_mask")
  if m == nil then
    m = nd.dropout(nd.ones_like(x), { p = p })
    rawset(self, key .. "_mask", m)
  end
  return m
end
function VarDrop:forward(x, states)
  rawset(self, "_counter", rawget(self, "_counter") + 1)
  if type(states) ~= "table" or nd.is_tensor(states) then
    error("VariationalDropoutCell: states must be a list of tensors (begin_state(batch_size))", 2)
  end
  local ms = states[1] ~= nil and mask(self, "drop_states", states[1])
  if ms then
    local s = {}
    for i = 1, #states do s[i] = states[i] end
    s[1] = nd.mul(s[1], ms)
    states = s
  end
  local mi = mask(self, "drop_inputs", x)
  if mi then x = nd.mul(x, mi) end
  local out, new = self.base_cell(x, states)
  local mo = mask(self, "drop_outputs", out)
  if mo then out = nd.mul(out, mo) end
  return out, new
end
function VarDrop:_repr_args()
  local r = rawget(self, "_rates")
  return string.format("drop_inputs = %g, drop_states = %g, drop_outputs = %g", r.drop_inputs,
    r.drop_states, r.drop_outputs)
end

---------------------------------------------------------------- dynamic_unroll
-- dynamic_unroll(cell, inputs, begin_state, drop_inputs=0, drop_outputs=0, layout="TNC",
-- valid_length=nil) -> outputs, states: MXNet 1.9's contrib.rnn.dynamic_unroll (a foreach
-- over the time axis there): the cell unrolled over inputs (a tensor in layout), outputs
-- merged; with valid_length, outputs past each sequence's length are 0 and the states
-- are those of its last valid step. drop_inputs / drop_outputs: dropout (train mode) with
-- one mask for every step (shared along the time axis).
local DYN = require("mx.core.class").signature("dynamic_unroll", { "cell", "inputs",
  "begin_state", "drop_inputs", "drop_outputs", "layout", "valid_length" })
function M.dynamic_unroll(...)
  local o = DYN(2, ...)
  local cell, x = o.cell, o.inputs
  if type(cell) ~= "table" or type(cell.unroll) ~= "function" then
    error("dynamic_unroll: cell must be a recurrent cell, got " .. type(cell), 2)
  end
  if not nd.is_tensor(x) then error("dynamic_unroll: inputs must be a tensor, got " .. type(x), 2) end
  local layout = o.layout or "TNC"
  if layout ~= "TNC" and layout ~= "NTC" then
    error("dynamic_unroll: layout must be 'TNC' or 'NTC', got " .. tostring(layout), 2)
  end
  local taxis = layout:find("T")
  for _, k in ipairs { "drop_inputs", "drop_outputs" } do
    local p = o[k] or 0
    if type(p) ~= "number" or p < 0 or p >= 1 then
      error("dynamic_unroll: " .. k .. " must be a number in [0, 1), got " .. tostring(p), 2)
    end
  end
  if (o.drop_inputs or 0) > 0 and S.training then
    x = nd.dropout(x, { p = o.drop_inputs, axes = { taxis } })
  end
  local ok, out, states = pcall(cell.unroll, cell, x:shape()[taxis], x, { begin_state = o.begin_state,
    layout = layout, merge_outputs = true, valid_length = o.valid_length })
  if not ok then error("dynamic_unroll: " .. tostring(out):gsub("^[^\n]-:%d+: ", ""), 2) end
  if (o.drop_outputs or 0) > 0 and S.training then
    out = nd.dropout(out, { p = o.drop_outputs, axes = { taxis } })
  end
  return out, states
end
require("mx.core.class").declare(M.dynamic_unroll, DYN)

return M
