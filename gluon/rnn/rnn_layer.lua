-- mx.gluon.rnn layers (MXNet 1.9's gluon.rnn.rnn_layer): RNN, LSTM, GRU over the fused
-- `rnn` op.
--
--   local lstm = rnn.LSTM(256, 2, {layout="NTC", dropout=0.2, bidirectional=false})
--   lstm:initialize()
--   local out = lstm(x)                                  -- zero begin states
--   local out, states = lstm(x, lstm:begin_state(N))     -- states in -> states out
--   local out, states = lstm(x, states, valid_length)    -- {use_sequence_length=true}
--
-- Parameters per layer l (0-based, MXNet's names) and direction (l = forwards, r =
-- backwards): l0_i2h_weight (G*H, I), l0_h2h_weight (G*H, H), l0_i2h_bias, l0_h2h_bias,
-- r0_..., with G = 1 (RNN), 4 (LSTM: i, f, c, o), 3 (GRU: r, z, n). An LSTM with
-- projection_size P (LSTMP, as LSTMPCell) has l0_h2h_weight (4H, P) and l0_h2r_weight
-- (P, H), states {r (L*D, N, P), c (L*D, N, H)} and outputs (T, N, D*P). They are packed
-- into the op's parameter vector at each forward in MXNet's order (all weights, then all
-- biases; per layer, per direction, i2h, h2h, then h2r).
-- MXNet 1.9.1's save_parameters writes these under '_unfused.<l>.<g>_<t>' (and
-- '_unfused.<l>.<d>_cell.<g>_<t>' when bidirectional): load_parameters on the layer
-- accepts both names; rnn.load_mxnet_parameters(net, path) loads such a file into any
-- network holding fused layers; rnn.from_mxnet_names(dict) renames a loaded dict.
local nd = require("mx.nd")
local S = require("mx.core.state")
local block = require("mx.gluon.block")
local Parameter = require("mx.gluon.parameter").Parameter
local initializer = require("mx.initializer")
local cells = require("mx.gluon.rnn.rnn_cell")

local Block, HybridBlock = block.Block, block.HybridBlock
local type, error, tostring, rawget, ipairs, pairs, pcall =
  type, error, tostring, rawget, ipairs, pairs, pcall

local M = {}

local GATES = { rnn_relu = 1, rnn_tanh = 1, lstm = 4, gru = 3 }
-- MXNet 1.9's parameters in its order (RNN has activation; LSTM projection_size and the
-- state clips, also by the op's names lstm_state_clip_*); MXNet 2.0's use_sequence_length
-- by name
local INITS = { "i2h_weight_initializer", "h2h_weight_initializer", "i2h_bias_initializer",
  "h2h_bias_initializer" }
local function param_list(head, tail)
  local r = {}
  for _, t in ipairs { head, INITS, tail } do
    for _, n in ipairs(t) do r[#r + 1] = n end
  end
  return r
end
local RNN_PARAMS = param_list({ "hidden_size", "num_layers", "activation", "layout", "dropout",
  "bidirectional" }, { "input_size", "dtype" })
local LSTM_PARAMS = param_list({ "hidden_size", "num_layers", "layout", "dropout", "bidirectional",
  "input_size" }, { "projection_size", "h2r_weight_initializer", "state_clip_min",
  "state_clip_max", "state_clip_nan", "dtype" })
local GRU_PARAMS = param_list({ "hidden_size", "num_layers", "layout", "dropout", "bidirectional",
  "input_size" }, { "dtype" })
local NAMED = { "use_sequence_length" }
local LSTM_NAMED = { "use_sequence_length", "lstm_state_clip_min", "lstm_state_clip_max",
  "lstm_state_clip_nan" }

local RNNLayer = HybridBlock:extend("_RNNLayer")
M._RNNLayer = RNNLayer

-- o: the constructor's arguments (its signature's table)
function RNNLayer:__init(what, mode, o, level)
  level = level + 1
  Block.__init(self)
  local hidden_size, num_layers = o.hidden_size, o.num_layers
  for _, k in ipairs { "min", "max", "nan" } do
    local a, b = "state_clip_" .. k, "lstm_state_clip_" .. k
    if o[a] ~= nil and o[b] ~= nil then
      error(what .. ": " .. a .. " given twice (also as " .. b .. ")", level)
    end
    if o[a] ~= nil then o[b] = o[a] end
  end
  if type(hidden_size) ~= "number" or hidden_size < 1 or hidden_size % 1 ~= 0 then
    error(what .. ": hidden_size must be a positive integer, got " .. tostring(hidden_size), level)
  end
  num_layers = num_layers or 1
  if type(num_layers) ~= "number" or num_layers < 1 or num_layers % 1 ~= 0 then
    error(what .. ": num_layers must be a positive integer, got " .. tostring(num_layers), level)
  end
  local layout = o.layout or "TNC"
  if layout ~= "TNC" and layout ~= "NTC" then
    error(what .. ": layout must be 'TNC' or 'NTC', got " .. tostring(layout), level)
  end
  local dropout = o.dropout or 0
  if type(dropout) ~= "number" or dropout < 0 or dropout >= 1 then
    error(what .. ": dropout must be a number in [0, 1), got " .. tostring(dropout), level)
  end
  local proj = o.projection_size
  if proj ~= nil and (type(proj) ~= "number" or proj < 1 or proj % 1 ~= 0 or proj > hidden_size) then
    error(what .. ": projection_size must be a positive integer at most hidden_size=" .. hidden_size
      .. " (as MXNet's), got " .. tostring(proj), level)
  end
  if proj == nil and o.h2r_weight_initializer ~= nil then
    error(what .. ": h2r_weight_initializer is for projection_size (LSTMP), which is not given",
      level)
  end
  local ni = o.input_size or 0
  if type(ni) ~= "number" or ni < 0 or ni % 1 ~= 0 then
    error(what .. ": input_size must be a non-negative integer, got " .. tostring(ni), level)
  end
  self._what = what
  self._mode = mode
  self._hidden_size = hidden_size
  self._projection_size = proj
  self._num_layers = num_layers
  self._layout = layout
  self._dropout = dropout
  self._dir = o.bidirectional and 2 or 1
  self._input_size = ni
  self._use_sequence_length = o.use_sequence_length and true or false
  self._dtype = o.dtype or "float32"
  if type(self._dtype) ~= "string" or not nd.dtype_code(self._dtype) then
    error(what .. ": dtype must be a dtype name ('float32', ...), got " .. tostring(o.dtype), level)
  end
  self._gates = GATES[mode]
  self._init_opts = { i2h_weight_initializer = o.i2h_weight_initializer,
    h2h_weight_initializer = o.h2h_weight_initializer,
    i2h_bias_initializer = o.i2h_bias_initializer, h2h_bias_initializer = o.h2h_bias_initializer,
    h2r_weight_initializer = o.h2r_weight_initializer }
  local inits = {}
  for _, k in ipairs { "i2h_weight_initializer", "h2h_weight_initializer", "i2h_bias_initializer",
    "h2h_bias_initializer", "h2r_weight_initializer" } do
    if o[k] ~= nil then
      local ok, r = pcall(initializer.create, o[k])
      if not ok then error(what .. ": " .. k .. ": " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), level) end
      inits[o[k]] = r
    end
  end
  local function cr(x) return x ~= nil and (inits[x] or initializer.create(x)) or nil end
  local G = self._gates * hidden_size
  local R = proj or hidden_size -- the recurrent state's (and output's) size
  local names = {}
  for l = 0, num_layers - 1 do
    for d = 1, self._dir do
      local p = (d == 1 and "l" or "r") .. l .. "_"
      self[p .. "i2h_weight"] = Parameter(p .. "i2h_weight", { shape = { G, ni },
        dtype = self._dtype, init = cr(o.i2h_weight_initializer) })
      self[p .. "h2h_weight"] = Parameter(p .. "h2h_weight", { shape = { G, R },
        dtype = self._dtype, init = cr(o.h2h_weight_initializer) })
      self[p .. "i2h_bias"] = Parameter(p .. "i2h_bias", { shape = { G }, dtype = self._dtype,
        init = cr(o.i2h_bias_initializer or "zeros") })
      self[p .. "h2h_bias"] = Parameter(p .. "h2h_bias", { shape = { G }, dtype = self._dtype,
        init = cr(o.h2h_bias_initializer or "zeros") })
      if proj then
        self[p .. "h2r_weight"] = Parameter(p .. "h2r_weight", { shape = { proj, hidden_size },
          dtype = self._dtype, init = cr(o.h2r_weight_initializer) })
      end
    end
    ni = R * self._dir
  end
  -- the packing order: every weight (layer, direction, i2h, h2h, h2r), then every bias
  for _, t in ipairs { "weight", "bias" } do
    for l = 0, num_layers - 1 do
      for d = 1, self._dir do
        for _, g in ipairs { "i2h", "h2h", "h2r" } do
          if g ~= "h2r" or (proj and t == "weight") then
            names[#names + 1] = (d == 1 and "l" or "r") .. l .. "_" .. g .. "_" .. t
          end
        end
      end
    end
  end
  self._pack_names = names
  self._op_opts = { state_size = hidden_size, num_layers = num_layers,
    bidirectional = self._dir == 2, mode = mode, p = dropout, state_outputs = true,
    projection_size = proj,
    use_sequence_length = self._use_sequence_length,
    lstm_state_clip_min = o.lstm_state_clip_min, lstm_state_clip_max = o.lstm_state_clip_max,
    lstm_state_clip_nan = o.lstm_state_clip_nan }
end

-- state_info(batch_size): {shape=(L*D, N, H), __layout__='LNC', dtype=} per state (with
-- a projection the first is (L*D, N, projection_size))
function RNNLayer:state_info(batch_size)
  local s = { self._num_layers * self._dir, batch_size or 0,
    self._projection_size or self._hidden_size }
  local r = { { shape = s, __layout__ = "LNC", dtype = self._dtype } }
  if self._mode == "lstm" then
    r[2] = { shape = { s[1], s[2], self._hidden_size }, __layout__ = "LNC", dtype = self._dtype }
  end
  return r
end

-- begin_state(batch_size, {func=mx.nd.zeros, dtype=, ctx=}): the list of initial states
function RNNLayer:begin_state(batch_size, opts)
  opts = opts or {}
  local func = opts.func or nd.zeros
  local r = {}
  for i, info in ipairs(self:state_info(batch_size)) do
    r[i] = func(info.shape, { dtype = opts.dtype or info.dtype, ctx = opts.ctx })
  end
  return r
end

-- the first layer's input size from the data, then the deferred parameters
function RNNLayer:_infer(x, level)
  local ni = x:shape()[3]
  local reg = rawget(self, "_reg")
  for d = 1, self._dir do
    local w = reg[(d == 1 and "l" or "r") .. "0_i2h_weight"]
    if w._data == nil then
      if w.shape[2] == 0 then w:set_shape({ w.shape[1], ni }, level + 1) end
    end
  end
  for _, n in ipairs(rawget(self, "_pack_names")) do
    local p = reg[n]
    if p._data == nil then p:_finish_deferred_init(level + 1) end
  end
end

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end

-- forward(inputs, states=nil, sequence_length=nil) -> outputs (no states given) or
-- outputs, states (a list: {h} or, for LSTM, {h, c}). inputs: (T, N, C) for 'TNC',
-- (N, T, C) for 'NTC'; states: tensors (L*D, N, H) (a single tensor is taken as {h}).
-- sequence_length (N,): the valid lengths, when built with use_sequence_length=true.
local function layer_forward(self, inputs, states, sequence_length)
  local what = self._what
  if not nd.is_tensor(inputs) then
    error(what .. ": inputs must be a tensor, got " .. type(inputs), 2)
  end
  local s = inputs:shape()
  if #s ~= 3 then
    error(string.format("%s: inputs must be 3-D (%s), got shape %s", what, self._layout,
      shape_str(s)), 2)
  end
  local x = inputs
  if self._layout == "NTC" then x = nd.swapaxes(inputs, { dim1 = 1, dim2 = 2 }) end
  local n = x:shape()[2]
  local skip = states == nil
  if skip then
    states = self:begin_state(n, { dtype = inputs:dtype(), ctx = inputs:context() })
  elseif nd.is_tensor(states) then
    states = { states }
  end
  local info = self:state_info(n)
  if type(states) ~= "table" or #states ~= #info then
    error(string.format("%s: states must be a list of %d tensor%s (begin_state(batch_size))",
      what, #info, #info == 1 and "" or "s"), 2)
  end
  for i = 1, #info do
    local st = states[i]
    if not nd.is_tensor(st) then
      error(string.format("%s: state %d must be a tensor, got %s", what, i, type(st)), 2)
    end
    local ss, es = st:shape(), info[i].shape
    if #ss ~= 3 or ss[1] ~= es[1] or ss[2] ~= es[2] or ss[3] ~= es[3] then
      error(string.format("%s: invalid recurrent state %d shape: expecting %s, got %s", what, i,
        shape_str(es), shape_str(ss)), 2)
    end
  end
  if self._use_sequence_length then
    if not nd.is_tensor(sequence_length) then
      error(what .. ": sequence_length (N,) is required (built with use_sequence_length=true)", 2)
    end
  elseif sequence_length ~= nil then
    error(what .. ": sequence_length given but the layer was built without "
      .. "use_sequence_length=true", 2)
  end
  local reg = rawget(self, "_reg")
  if reg.l0_i2h_weight._data == nil then self:_infer(x, 2) end
  local names = rawget(self, "_pack_names")
  local flat = {}
  for i = 1, #names do flat[i] = nd.reshape(reg[names[i]]:data(), { -1 }) end
  local params = nd.concat(flat, { dim = 1 })
  local opo = rawget(self, "_op_opts")
  opo.training = S.training and true or false
  local lstm = self._mode == "lstm"
  local out, hy, cy = nd.rnn(x, params, states[1], lstm and states[2] or nil,
    self._use_sequence_length and sequence_length or nil, opo)
  if not lstm then cy = nil end
  if self._layout == "NTC" then out = nd.swapaxes(out, { dim1 = 1, dim2 = 2 }) end
  if skip then return out end
  return out, lstm and { hy, cy } or { hy }
end
-- errors inside (an op's, positioned in mx's files) are re-raised naming the layer at
-- its caller's line (block._rethrow; Block.__call tail-calls forward: level 2)
local rethrow = block._rethrow
function RNNLayer:forward(inputs, states, sequence_length)
  local ok, a, b = pcall(layer_forward, self, inputs, states, sequence_length)
  if not ok then rethrow(self._what, a, 2) end
  -- no states given: the output alone (a trailing nil would count as a second result,
  -- which hybridize refuses)
  if b == nil then return a end
  return a, b
end

function RNNLayer:_repr_args()
  local sh = self.l0_i2h_weight.shape
  local r = string.format("%s -> %d, %s", sh[2] > 0 and tostring(sh[2]) or "None",
    self._hidden_size, self._layout)
  if self._projection_size then r = r .. ", projection_size=" .. self._projection_size end
  if self._num_layers ~= 1 then r = r .. ", num_layers=" .. self._num_layers end
  if self._dropout ~= 0 then r = r .. ", dropout=" .. self._dropout end
  if self._dir == 2 then r = r .. ", bidirectional" end
  return r
end

-- _unfuse(): the equivalent stack of cells (SequentialRNNCell of the layer's cells,
-- BidirectionalCell per layer when bidirectional, DropoutCell between layers), sharing
-- this layer's parameters: cell:unroll(T, x, {layout=...}) computes what the layer does.
function RNNLayer:_unfuse()
  local stack = cells.SequentialRNNCell()
  local reg = rawget(self, "_reg")
  local function make(prefix, ni)
    local o = {}
    for k, v in pairs(rawget(self, "_init_opts")) do o[k] = v end
    o.input_size = ni
    local c
    local proj = self._projection_size
    if proj then
      o.projection_size = proj
      c = require("mx.gluon.rnn.contrib_cells").LSTMPCell(self._hidden_size, o)
    elseif self._mode == "lstm" then
      c = cells.LSTMCell(self._hidden_size, o)
    elseif self._mode == "gru" then
      c = cells.GRUCell(self._hidden_size, o)
    else
      o.activation = self._mode == "rnn_relu" and "relu" or "tanh"
      c = cells.RNNCell(self._hidden_size, o)
    end
    for _, n in ipairs { "i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias", "h2r_weight" } do
      if n ~= "h2r_weight" or proj then c[n] = reg[prefix .. n] end
    end
    return c
  end
  local ni = self._input_size
  for l = 0, self._num_layers - 1 do
    if self._dir == 2 then
      stack:add(cells.BidirectionalCell(make("l" .. l .. "_", ni), make("r" .. l .. "_", ni)))
    else
      stack:add(make("l" .. l .. "_", ni))
    end
    if self._dropout > 0 and l ~= self._num_layers - 1 then
      stack:add(cells.DropoutCell(self._dropout))
    end
    ni = (self._projection_size or self._hidden_size) * self._dir
  end
  return stack
end

-- MXNet 1.9.1's file names for a fused layer's parameters -> ours:
-- '<prefix>_unfused.<l>.<g>_<t>' -> '<prefix>l<l>_<g>_<t>',
-- '<prefix>_unfused.<l>.<d>_cell.<g>_<t>' -> '<prefix><d><l>_<g>_<t>'.
local function from_mxnet_name(k)
  local pre, l, d, rest = k:match("^(.-)_unfused%.(%d+)%.([lr])_cell%.([ih2]+_%a+)$")
  if pre then return pre .. d .. l .. "_" .. rest end
  pre, l, rest = k:match("^(.-)_unfused%.(%d+)%.([ih2]+_%a+)$")
  if pre then return pre .. "l" .. l .. "_" .. rest end
  return k
end
M._from_mxnet_name = from_mxnet_name

-- from_mxnet_names(dict) -> a new dict with MXNet 1.9.1's '_unfused' names renamed
function M.from_mxnet_names(dict)
  local r = {}
  for k, v in pairs(dict) do r[from_mxnet_name(k)] = v end
  return r
end

-- load_mxnet_parameters(block, path, opts): block:load_parameters(path, opts) (Block's
-- options) for a file whose fused-layer names are MXNet 1.9.1's '_unfused' ones, at any
-- depth ('encoder.0._unfused.1.h2h_bias' -> 'encoder.0.l1_h2h_bias'); other names as they
-- are. Errors name `path` and blame the caller's line.
local function load_mx(blk, path, opts, level)
  local ok, loaded = pcall(nd.load, path)
  if ok and type(loaded) == "table" and loaded[1] == nil then
    local any = false
    for k in pairs(loaded) do if k:find("_unfused.", 1, true) then any = true end end
    if any then
      local tmp = os.tmpname()
      nd.save(tmp, M.from_mxnet_names(loaded))
      local ok2, err = pcall(Block.load_parameters, blk, tmp, opts)
      os.remove(tmp)
      if not ok2 then
        error((tostring(err):gsub(tmp:gsub("%p", "%%%0"), (path:gsub("%%", "%%%%")))), level + 1)
      end
      return
    end
  end
  local ok3, err3 = pcall(Block.load_parameters, blk, path, opts)
  if not ok3 then error(err3, level + 1) end
end
function M.load_mxnet_parameters(blk, path, opts)
  load_mx(blk, path, opts, 2)
end

-- load_parameters(path, opts): Block's, also accepting MXNet 1.9.1's '_unfused' names
function RNNLayer:load_parameters(path, opts)
  load_mx(self, path, opts, 2)
end

---------------------------------------------------------------- the layers
-- MXNet 1.9's calling convention: positionally in its order or by name.
-- RNN(hidden_size, num_layers=1, activation='relu', layout='TNC', dropout=0,
-- bidirectional=false, i2h_weight_initializer=, h2h_weight_initializer=,
-- i2h_bias_initializer='zeros', h2h_bias_initializer='zeros', input_size=0,
-- dtype='float32'; use_sequence_length=false by name)
local RNN = RNNLayer:extend("RNN")
M.RNN = RNN
local RNN_SIG = block.sig(RNN, RNN_PARAMS, NAMED)
function RNN:__init(...)
  local o = RNN_SIG(3, ...)
  local act = o.activation or "relu"
  if act ~= "relu" and act ~= "tanh" then
    error("RNN: activation must be 'relu' or 'tanh', got " .. tostring(act), 3)
  end
  RNNLayer.__init(self, "RNN", "rnn_" .. act, o, 3)
end

-- LSTM(hidden_size, num_layers=1, layout='TNC', dropout=0, bidirectional=false,
-- input_size=0, the four initializers, projection_size=, h2r_weight_initializer=,
-- state_clip_min=, state_clip_max=, state_clip_nan=false, dtype='float32'): states {h, c}
local LSTM = RNNLayer:extend("LSTM")
M.LSTM = LSTM
local LSTM_SIG = block.sig(LSTM, LSTM_PARAMS, LSTM_NAMED)
function LSTM:__init(...)
  RNNLayer.__init(self, "LSTM", "lstm", LSTM_SIG(3, ...), 3)
end

-- GRU(hidden_size, num_layers=1, layout='TNC', dropout=0, bidirectional=false,
-- input_size=0, the four initializers, dtype='float32')
local GRU = RNNLayer:extend("GRU")
M.GRU = GRU
local GRU_SIG = block.sig(GRU, GRU_PARAMS, NAMED)
function GRU:__init(...)
  RNNLayer.__init(self, "GRU", "gru", GRU_SIG(3, ...), 3)
end

return M
