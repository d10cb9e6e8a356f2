-- mx.gluon.nn transformer layers (GluonNLP 0.x names, the encoder side of "Attention Is
-- All You Need"): MultiHeadAttention, PositionwiseFFN, TransformerEncoderCell,
-- TransformerEncoder, PositionalEncoding and position_encoding(max_length, units).
--
--   local cell = nn.TransformerEncoderCell({units=64, hidden_size=256, num_heads=4,
--                                           dropout=0.1})
--   local y = cell(x)                 -- x (N, T, units)
--   local y = cell(x, mask)           -- mask (N, T, T): 1 = may attend, 0 = masked
--   local y = cell(x, nil, valid_len) -- valid_len (N,): keys past it are masked
--
-- Layout is batch-major (N, T, C) as GluonNLP's. Parameter names follow GluonNLP:
-- attention_cell.proj_query/proj_key/proj_value, proj, layer_norm, ffn.ffn_1, ffn.ffn_2,
-- ffn.layer_norm. Attention here is plain batch_dot + softmax (the fused self-attention
-- ops are a later optimisation): scores (N*heads, T, T) are masked by adding -1e9.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local check_opts = require("mx.core.class").check_opts
local basic = require("mx.gluon.nn.basic_layers")
local LayerNorm = require("mx.gluon.nn.norm_layers").LayerNorm

local Block, HybridBlock = block.Block, block.HybridBlock
local Dense, Dropout = basic.Dense, basic.Dropout
local type, error, tostring, math = type, error, tostring, math

local M = {}

-- the forwards run guarded: an error raised inside a child layer or an op (positioned in
-- mx's own files) is re-raised naming this layer, at its caller's line (block._guarded)
local guarded = block._guarded

-- A composite layer's constructor, its children's included: any error they raise is
-- re-raised at the caller's line, naming the layer (and the child that refused:
-- "TransformerEncoderCell: MultiHeadAttention: num_heads must be ...").
local function construct_guard(name, init)
  return function(self, ...)
    local ok, err = pcall(init, self, ...)
    if ok then return end
    local msg = tostring(err):gsub("^[^\n]-:%d+: ", "")
    if msg:sub(1, #name + 1) ~= name .. ":" then msg = name .. ": " .. msg end
    error(msg, 3) -- this function, new_instance, the caller
  end
end

-- nn.LayerNorm over the last axis
local function layer_norm(units, eps)
  return LayerNorm({ in_channels = units, epsilon = eps })
end

local function check_int(what, name, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(string.format("%s: %s must be a positive integer, got %s", what, name, tostring(v)),
      level + 1)
  end
end
local function check_rate(what, v, level)
  if type(v) ~= "number" or v < 0 or v >= 1 then
    error(what .. ": dropout must be a number in [0, 1), got " .. tostring(v), level + 1)
  end
end

---------------------------------------------------------------- positional encoding
-- position_encoding(max_length, units) -> (max_length, units) float32: GluonNLP's
-- sinusoid table, sin(pos / 10000^(2i/units)) in the first half of the features and cos
-- in the second (concatenated, not interleaved).
function M.position_encoding(max_length, units)
  check_int("position_encoding", "max_length", max_length, 2)
  check_int("position_encoding", "units", units, 2)
  -- in tensors (float64, then float32), not Lua tables: a size no memory holds is the
  -- allocation's clear error instead of a Lua heap that grows until the process dies
  local half = math.floor(units / 2)
  local ok, t = pcall(function()
    local pos = nd.arange(0, max_length, { dtype = "float64" }):reshape({ max_length, 1 })
    local parts = {}
    if half > 0 then
      local i = nd.arange(0, half, { dtype = "float64" }):reshape({ 1, half })
      -- p / 10000^(2i / units)
      local a = nd.div(pos, nd.exp(nd.mul_scalar(i, { scalar = 2 / units * math.log(10000) })))
      parts[1], parts[2] = nd.sin(a), nd.cos(a)
    end
    if units > 2 * half then parts[#parts + 1] = nd.zeros({ max_length, 1 }, { dtype = "float64" }) end
    return nd.concat(parts, { dim = 2 }):astype("float32")
  end)
  if not ok then error("position_encoding: " .. tostring(t):gsub("^[^\n]-:%d+: ", ""), 2) end
  return t
end

-- PositionalEncoding({units=128, max_length=512, scale=false}) (or (units, {...})):
-- x (N, T, units) -> x (* sqrt(units) with scale) + the first T rows of
-- position_encoding.
local PositionalEncoding = HybridBlock:extend("PositionalEncoding")
M.PositionalEncoding = PositionalEncoding
function PositionalEncoding:__init(units, opts)
  Block.__init(self)
  if type(units) == "table" and opts == nil then units, opts = nil, units end
  local o = check_opts("PositionalEncoding", opts, { units = true, max_length = true,
    scale = true }, 3)
  units = units or o.units or 128
  check_int("PositionalEncoding", "units", units, 3)
  check_int("PositionalEncoding", "max_length", o.max_length or 512, 3)
  self._units = units
  self._max_length = o.max_length or 512
  self._scale = o.scale and math.sqrt(units) or nil
  local ok, t = pcall(M.position_encoding, self._max_length, units)
  if not ok then error("PositionalEncoding: " .. tostring(t):gsub("^[^\n]-:%d+: ", ""), 3) end
  self._table = t
end
PositionalEncoding.__init = construct_guard("PositionalEncoding", PositionalEncoding.__init)
function PositionalEncoding:forward(x)
  if not nd.is_tensor(x) then
    error("PositionalEncoding: input must be a tensor, got " .. type(x), 2)
  end
  local s = x:shape()
  if #s ~= 3 or s[3] ~= self._units or s[2] > self._max_length then
    error(string.format("PositionalEncoding: input must be (N, T <= %d, %d), got (%s)",
      self._max_length, self._units, table.concat(s, ", ")), 2)
  end
  local pe = self._table[{ { 1, s[2] } }]
  if pe:dtype() ~= x:dtype() then pe = pe:astype(x:dtype()) end
  if self._scale then x = nd.mul_scalar(x, { scalar = self._scale }) end
  return nd.add(x, nd.expand_dims(pe, { axis = 1 }))
end

---------------------------------------------------------------- masks
-- (N,) valid lengths -> an (N, Tq, Tk) mask: key positions < valid_length
function M.length_mask(valid_length, tq, tk)
  local ar = nd.reshape(nd.arange(0, tk), { 1, 1, tk })
  local m = nd.lesser(ar, nd.reshape(valid_length:astype("float32"), { -1, 1, 1 }))
  return nd.broadcast_to(m, { shape = { valid_length:shape()[1], tq, tk } })
end

-- (T, T) causal mask: position t attends to positions <= t (a language model's)
function M.causal_mask(t)
  local r = nd.reshape(nd.arange(0, t), { t, 1 })
  local c = nd.reshape(nd.arange(0, t), { 1, t })
  return nd.greater_equal(r, c)
end

---------------------------------------------------------------- MultiHeadAttention
-- MultiHeadAttention({units=, num_heads=, dropout=0, scaled=true, use_bias=true,
-- weight_initializer=, bias_initializer='zeros'}): softmax(q k^T / sqrt(d) + mask) v per
-- head with q, k, v the projections proj_query/proj_key/proj_value (Dense, no flatten).
-- forward(query, key, value, mask) -> output (N, Tq, units), attention weights
-- (N, heads, Tq, Tk).
local MHA = HybridBlock:extend("MultiHeadAttention")
M.MultiHeadAttention = MHA
local MHA_OPTS = { units = true, num_heads = true, dropout = true, scaled = true,
  use_bias = true, weight_initializer = true, bias_initializer = true }
function MHA:__init(opts)
  Block.__init(self)
  local o = check_opts("MultiHeadAttention", opts, MHA_OPTS, 3)
  local units, heads = o.units or 128, o.num_heads or 4
  check_int("MultiHeadAttention", "units", units, 3)
  check_int("MultiHeadAttention", "num_heads", heads, 3)
  if units % heads ~= 0 then
    error(string.format("MultiHeadAttention: units (%d) must be divisible by num_heads (%d)",
      units, heads), 3)
  end
  check_rate("MultiHeadAttention", o.dropout or 0, 3)
  self._units, self._heads = units, heads
  self._scale = (o.scaled ~= false) and 1 / math.sqrt(units / heads) or 1
  local dopts = { flatten = false, use_bias = o.use_bias ~= false,
    weight_initializer = o.weight_initializer, bias_initializer = o.bias_initializer }
  self.proj_query = Dense(units, dopts)
  self.proj_key = Dense(units, dopts)
  self.proj_value = Dense(units, dopts)
  self._dropout = o.dropout or 0
  if self._dropout > 0 then self.dropout_layer = Dropout(self._dropout) end
end
MHA.__init = construct_guard("MultiHeadAttention", MHA.__init)

-- (N, T, C) -> (N*h, T, C/h)
local function heads_of(x, n, t, h, d)
  local y = nd.transpose(nd.reshape(x, { n, t, h, d }), { axes = { 1, 3, 2, 4 } })
  return nd.reshape(y, { n * h, t, d })
end

local function mha_forward(self, query, key, value, mask)
  if not nd.is_tensor(query) then
    error("MultiHeadAttention: query must be a tensor, got " .. type(query), 2)
  end
  key = key or query
  value = value or key
  local qs, ks = query:shape(), key:shape()
  if #qs ~= 3 or #ks ~= 3 then
    error("MultiHeadAttention: query, key and value must be (N, T, C)", 2)
  end
  local n, tq, tk = qs[1], qs[2], ks[2]
  local h = self._heads
  local d = self._units / h
  local q = heads_of(self.proj_query(query), n, tq, h, d)
  local k = heads_of(self.proj_key(key), n, tk, h, d)
  local v = heads_of(self.proj_value(value), n, tk, h, d)
  local scores = nd.batch_dot(q, k, { transpose_b = true })
  if self._scale ~= 1 then scores = nd.mul_scalar(scores, { scalar = self._scale }) end
  if mask ~= nil then
    if not nd.is_tensor(mask) then
      error("MultiHeadAttention: mask must be a tensor, got " .. type(mask), 2)
    end
    local ms = mask:shape()
    if #ms == 2 then mask = nd.broadcast_to(nd.expand_dims(mask, { axis = 1 }), { shape = { n, tq, tk } }) end
    ms = mask:shape()
    if #ms ~= 3 or ms[1] ~= n or ms[2] ~= tq or ms[3] ~= tk then
      error(string.format("MultiHeadAttention: mask must be (%d, %d, %d) (or (%d, %d)), got (%s)",
        n, tq, tk, tq, tk, table.concat(ms, ", ")), 2)
    end
    -- (N, Tq, Tk) -> (N*h, Tq, Tk), then 0 -> -1e9 added to the scores
    local m = nd.reshape(nd.broadcast_to(nd.expand_dims(mask:astype(scores:dtype()), { axis = 2 }),
      { shape = { n, h, tq, tk } }), { n * h, tq, tk })
    scores = nd.add(scores, nd.mul_scalar(nd.sub_scalar(m, { scalar = 1 }), { scalar = 1e9 }))
  end
  local att = nd.softmax(scores, { axis = -1 })
  local dl = self.dropout_layer
  local att_d = dl and dl(att) or att
  local out = nd.batch_dot(att_d, v) -- (N*h, Tq, d)
  out = nd.reshape(nd.transpose(nd.reshape(out, { n, h, tq, d }), { axes = { 1, 3, 2, 4 } }),
    { n, tq, self._units })
  return out, nd.reshape(att, { n, h, tq, tk })
end
MHA.forward = guarded("MultiHeadAttention", mha_forward)
function MHA:_repr_args()
  return string.format("units=%d, heads=%d", self._units, self._heads)
end

---------------------------------------------------------------- PositionwiseFFN
-- PositionwiseFFN({units=, hidden_size=, dropout=0, use_residual=true, activation='relu',
-- layer_norm_eps=1e-5, weight_initializer=, bias_initializer='zeros'}):
-- layer_norm(x + dropout(ffn_2(act(ffn_1(x))))).
local FFN = HybridBlock:extend("PositionwiseFFN")
M.PositionwiseFFN = FFN
local FFN_OPTS = { units = true, hidden_size = true, dropout = true, use_residual = true,
  activation = true, layer_norm_eps = true, weight_initializer = true, bias_initializer = true }
function FFN:__init(opts)
  Block.__init(self)
  local o = check_opts("PositionwiseFFN", opts, FFN_OPTS, 3)
  local units, hidden = o.units or 512, o.hidden_size or 2048
  check_int("PositionwiseFFN", "units", units, 3)
  check_int("PositionwiseFFN", "hidden_size", hidden, 3)
  check_rate("PositionwiseFFN", o.dropout or 0, 3)
  local act = o.activation or "relu"
  self.ffn_1 = Dense(hidden, { flatten = false, activation = act, in_units = units,
    weight_initializer = o.weight_initializer, bias_initializer = o.bias_initializer })
  self.ffn_2 = Dense(units, { flatten = false, in_units = hidden,
    weight_initializer = o.weight_initializer, bias_initializer = o.bias_initializer })
  if (o.dropout or 0) > 0 then self.dropout_layer = Dropout(o.dropout) end
  self._use_residual = o.use_residual ~= false
  self.layer_norm = layer_norm(units, o.layer_norm_eps or 1e-5)
end
FFN.__init = construct_guard("PositionwiseFFN", FFN.__init)
local function ffn_forward(self, x)
  if not nd.is_tensor(x) then error("input must be a tensor, got " .. type(x), 0) end
  local y = self.ffn_2(self.ffn_1(x))
  local dl = self.dropout_layer
  if dl then y = dl(y) end
  if self._use_residual then y = nd.add(y, x) end
  return self.layer_norm(y)
end
FFN.forward = guarded("PositionwiseFFN", ffn_forward)

---------------------------------------------------------------- TransformerEncoderCell
-- TransformerEncoderCell({units=128, hidden_size=512, num_heads=4, scaled=true,
-- dropout=0, use_residual=true, output_attention=false, activation='relu',
-- layer_norm_eps=1e-5, weight_initializer=, bias_initializer='zeros'}) (post-norm):
--   a = layer_norm(x + dropout(proj(attention(x, x, x, mask))));  y = ffn(a)
-- forward(x, mask=nil, valid_length=nil) -> y (and the attention weights with
-- output_attention).
local Cell = HybridBlock:extend("TransformerEncoderCell")
M.TransformerEncoderCell = Cell
local CELL_OPTS = { units = true, hidden_size = true, num_heads = true, scaled = true,
  dropout = true, use_residual = true, output_attention = true, activation = true,
  layer_norm_eps = true, weight_initializer = true, bias_initializer = true }
function Cell:__init(opts)
  Block.__init(self)
  local o = check_opts("TransformerEncoderCell", opts, CELL_OPTS, 3)
  local units = o.units or 128
  local dropout = o.dropout or 0
  check_rate("TransformerEncoderCell", dropout, 3)
  self._units = units
  self._use_residual = o.use_residual ~= false
  self._output_attention = o.output_attention and true or false
  self.attention_cell = MHA({ units = units, num_heads = o.num_heads or 4, dropout = dropout,
    scaled = o.scaled, weight_initializer = o.weight_initializer,
    bias_initializer = o.bias_initializer })
  self.proj = Dense(units, { flatten = false, use_bias = false, in_units = units,
    weight_initializer = o.weight_initializer })
  if dropout > 0 then self.dropout_layer = Dropout(dropout) end
  self.layer_norm = layer_norm(units, o.layer_norm_eps or 1e-5)
  self.ffn = FFN({ units = units, hidden_size = o.hidden_size or 512, dropout = dropout,
    use_residual = self._use_residual, activation = o.activation,
    layer_norm_eps = o.layer_norm_eps, weight_initializer = o.weight_initializer,
    bias_initializer = o.bias_initializer })
end
Cell.__init = construct_guard("TransformerEncoderCell", Cell.__init)
local function cell_forward(self, x, mask, valid_length)
  if not nd.is_tensor(x) then
    error("TransformerEncoderCell: input must be a tensor, got " .. type(x), 2)
  end
  local s = x:shape()
  if #s ~= 3 or s[3] ~= self._units then
    error(string.format("TransformerEncoderCell: input must be (N, T, %d), got (%s)", self._units,
      table.concat(s, ", ")), 2)
  end
  if valid_length ~= nil then
    local lm = M.length_mask(valid_length, s[2], s[2])
    mask = mask and nd.mul(mask:astype("float32"), lm) or lm
  end
  local a, w = self.attention_cell(x, x, x, mask)
  a = self.proj(a)
  local dl = self.dropout_layer
  if dl then a = dl(a) end
  if self._use_residual then a = nd.add(a, x) end
  local y = self.ffn(self.layer_norm(a))
  if self._output_attention then return y, w end
  return y
end
Cell.forward = guarded("TransformerEncoderCell", cell_forward)

---------------------------------------------------------------- TransformerEncoder
-- TransformerEncoder({num_layers=2, units=128, hidden_size=512, num_heads=4,
-- max_length=512, dropout=0, scale_embed=true, ... cell options}): x * sqrt(units) +
-- position encoding, dropout, then num_layers TransformerEncoderCells (children
-- "transformer_cells.0", ...). forward(x, mask, valid_length) -> (N, T, units).
local Encoder = HybridBlock:extend("TransformerEncoder")
M.TransformerEncoder = Encoder
local ENC_OPTS = { num_layers = true, max_length = true, scale_embed = true }
for k in pairs(CELL_OPTS) do ENC_OPTS[k] = true end
function Encoder:__init(opts)
  Block.__init(self)
  local o = check_opts("TransformerEncoder", opts, ENC_OPTS, 3)
  local L = o.num_layers or 2
  check_int("TransformerEncoder", "num_layers", L, 3)
  local units = o.units or 128
  check_int("TransformerEncoder", "units", units, 3)
  check_int("TransformerEncoder", "max_length", o.max_length or 512, 3)
  if o.dropout ~= nil then check_rate("TransformerEncoder", o.dropout, 3) end
  -- a layer holds ~4 units^2 + 2 units hidden parameters: a count no memory holds is an
  -- error now, not a loop building a trillion layers
  check_int("TransformerEncoder", "hidden_size", o.hidden_size or 512, 3)
  local per = 4 * units * units + 2 * units * (o.hidden_size or 512)
  if L * per > 2 ^ 40 then
    error(string.format("TransformerEncoder: num_layers = %d of units = %d would hold %.3g "
      .. "parameters (more than 2^40)", L, units, L * per), 3)
  end
  self._units = units
  self.position = PositionalEncoding(units, { max_length = o.max_length or 512,
    scale = o.scale_embed ~= false })
  if (o.dropout or 0) > 0 then self.dropout_layer = Dropout(o.dropout) end
  self.transformer_cells = basic.Sequential()
  local co = {}
  for k in pairs(CELL_OPTS) do co[k] = o[k] end
  co.output_attention = nil
  for _ = 1, L do self.transformer_cells:add(Cell(co)) end
end
Encoder.__init = construct_guard("TransformerEncoder", Encoder.__init)
local function encoder_forward(self, x, mask, valid_length)
  if not nd.is_tensor(x) then
    error("TransformerEncoder: input must be a tensor, got " .. type(x), 0)
  end
  local s = x:shape()
  if #s ~= 3 or s[3] ~= self._units then
    error(string.format("TransformerEncoder: input must be (N, T, %d), got (%s)", self._units,
      table.concat(s, ", ")), 0)
  end
  local y = self.position(x)
  local dl = self.dropout_layer
  if dl then y = dl(y) end
  if valid_length ~= nil then
    local lm = M.length_mask(valid_length, s[2], s[2])
    mask = mask and nd.mul(mask:astype("float32"), lm) or lm
  end
  local cells = self.transformer_cells:children()
  for i = 1, #cells do y = cells[i](y, mask) end
  return y
end
Encoder.forward = guarded("TransformerEncoder", encoder_forward)

return M
