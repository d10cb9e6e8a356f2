-- mx.gluonnlp.model.transformer — GluonNLP 0.10's transformer encoder-decoder ("Attention
-- Is All You Need", post-norm): the encoder is mx.gluon.nn.TransformerEncoder; the
-- decoder cells add a causal self-attention (attention_cell_in, proj_in, layer_norm_in)
-- and an attention over the encoder's memory (attention_cell_inter, proj_inter,
-- layer_norm_inter) before the FFN, as GluonNLP names them. NMTModel joins embeddings,
-- encoder, decoder and the output projection; BeamSearchTranslator decodes with the
-- samplers of mx.gluonnlp.model.sequence_sampler.
--
-- Layout: batch-major (N, T) token ids (0-based); valid lengths (N,) count real tokens.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local nn = require("mx.gluon.nn")
local tr = require("mx.gluon.nn.transformer")
local check_opts = require("mx.core.class").check_opts
local S = require("mx.gluonnlp.model.sequence_sampler")

local Block, HybridBlock = block.Block, block.HybridBlock
local M = {}

local function ln(units) return nn.LayerNorm({ in_channels = units, epsilon = 1e-5 }) end

---------------------------------------------------------------- decoder
local DecCell = HybridBlock:extend("TransformerDecoderCell")
M.TransformerDecoderCell = DecCell
function DecCell:__init(o)
  Block.__init(self)
  local u = o.units
  self._units = u
  local function mha() return tr.MultiHeadAttention({ units = u, num_heads = o.num_heads,
    dropout = o.dropout }) end
  self.attention_cell_in = mha()
  self.attention_cell_inter = mha()
  self.proj_in = nn.Dense(u, { flatten = false, use_bias = false, in_units = u })
  self.proj_inter = nn.Dense(u, { flatten = false, use_bias = false, in_units = u })
  if o.dropout > 0 then self.dropout_layer = nn.Dropout(o.dropout) end
  self.layer_norm_in = ln(u)
  self.layer_norm_inter = ln(u)
  self.ffn = tr.PositionwiseFFN({ units = u, hidden_size = o.hidden_size, dropout = o.dropout })
end
-- x (N, Tq, C) queries; keys (N, Tk, C) what the self-attention sees (x itself, or the
-- cached inputs up to the current step); self_mask (Tq, Tk) or nil; mem (N, S, C) and
-- mem_mask (N, Tq, S)
function DecCell:forward(x, keys, self_mask, mem, mem_mask)
  local a = self.proj_in(self.attention_cell_in(x, keys, keys, self_mask))
  if self.dropout_layer then a = self.dropout_layer(a) end
  a = self.layer_norm_in(nd.add(a, x))
  local b = self.proj_inter(self.attention_cell_inter(a, mem, mem, mem_mask))
  if self.dropout_layer then b = self.dropout_layer(b) end
  b = self.layer_norm_inter(nd.add(b, a))
  return self.ffn(b)
end

local Decoder = HybridBlock:extend("TransformerDecoder")
M.TransformerDecoder = Decoder
function Decoder:__init(o)
  Block.__init(self)
  self._units = o.units
  self.position = tr.PositionalEncoding(o.units, { max_length = o.max_length, scale = true })
  if o.dropout > 0 then self.dropout_layer = nn.Dropout(o.dropout) end
  self.transformer_cells = nn.Sequential()
  for _ = 1, o.num_layers do self.transformer_cells:add(DecCell(o)) end
end

local function mem_mask_of(mem_valid, tq, s)
  if mem_valid == nil then return nil end
  return tr.length_mask(mem_valid, tq, s)
end

-- teacher forcing: x (N, T, C) embedded targets -> (N, T, C)
function Decoder:forward(x, mem, mem_valid)
  local s = x:shape()
  local y = self.position(x)
  if self.dropout_layer then y = self.dropout_layer(y) end
  local causal = tr.causal_mask(s[2])
  local mm = mem_mask_of(mem_valid, s[2], mem:shape()[2])
  local cells = self.transformer_cells:children()
  for i = 1, #cells do y = cells[i](y, y, causal, mem, mm) end
  return y
end

-- one step: x (N, 1, C) the newest embedded target, states {mem=, mem_valid=, t=,
-- inputs = {layer inputs so far (N, t-1, C)}} -> (N, 1, C), new states. Each layer's
-- self-attention sees that layer's inputs up to this step (GluonNLP keeps the same cache).
function Decoder:step(x, st)
  local t = st.t + 1
  local pe = self.position._table[{ { t, t } }]
  if pe:dtype() ~= x:dtype() then pe = pe:astype(x:dtype()) end
  local y = nd.add(nd.mul_scalar(x, { scalar = math.sqrt(self._units) }), nd.expand_dims(pe, { axis = 1 }))
  local mm = mem_mask_of(st.mem_valid, 1, st.mem:shape()[2])
  local cells = self.transformer_cells:children()
  local inputs = {}
  for i = 1, #cells do
    local keys = st.inputs[i] and nd.concat(st.inputs[i], y, { dim = 2 }) or y
    inputs[i] = keys
    y = cells[i](y, keys, nil, st.mem, mm)
  end
  return y, { mem = st.mem, mem_valid = st.mem_valid, t = t, inputs = inputs }
end

---------------------------------------------------------------- NMTModel
local NMTModel = HybridBlock:extend("NMTModel")
M.NMTModel = NMTModel
local OPTS = { src_vocab_size = true, tgt_vocab_size = true, units = true, hidden_size = true,
  num_layers = true, num_heads = true, dropout = true, max_src_length = true, max_tgt_length = true,
  share_embed = true, tie_weights = true }

-- NMTModel{src_vocab_size=, tgt_vocab_size=, units=512, hidden_size=2048, num_layers=6,
-- num_heads=8, dropout=0.1, max_src_length=50, max_tgt_length=50, tie_weights=true}
-- (get_transformer_encoder_decoder's options)
function NMTModel:__init(o)
  Block.__init(self)
  o = check_opts("NMTModel", o, OPTS, 3)
  if not o.src_vocab_size or not o.tgt_vocab_size then
    error("NMTModel: src_vocab_size and tgt_vocab_size are required", 3)
  end
  local c = { units = o.units or 512, hidden_size = o.hidden_size or 2048, num_layers = o.num_layers or 6,
    num_heads = o.num_heads or 8, dropout = o.dropout or 0.1 }
  self.config = c
  self._tie = o.tie_weights ~= false
  self.src_embed = nn.Embedding(o.src_vocab_size, c.units)
  self.tgt_embed = nn.Embedding(o.tgt_vocab_size, c.units)
  self.encoder = tr.TransformerEncoder({ num_layers = c.num_layers, units = c.units,
    hidden_size = c.hidden_size,
    num_heads = c.num_heads, dropout = c.dropout, max_length = o.max_src_length or 50 })
  self.decoder = Decoder({ num_layers = c.num_layers, units = c.units, hidden_size = c.hidden_size,
    num_heads = c.num_heads, dropout = c.dropout, max_length = o.max_tgt_length or 50 })
  if not self._tie then self.tgt_proj = nn.Dense(o.tgt_vocab_size, { flatten = false,
    in_units = c.units }) end
  self._V = o.tgt_vocab_size
end

function NMTModel:project(y)
  if self._tie then
    return nd.fully_connected(y, self.tgt_embed.weight:data(), { num_hidden = self._V, no_bias = true,
      flatten = false })
  end
  return self.tgt_proj(y)
end

-- encode(src (N, S), src_valid (N,)) -> memory (N, S, C)
function NMTModel:encode(src, src_valid)
  return self.encoder(self.src_embed(src), nil, src_valid)
end

-- forward(src, tgt, src_valid) -> logits (N, T, V) for tgt (teacher forcing: tgt starts
-- with bos, the logits at t predict tgt[t + 1])
function NMTModel:forward(src, tgt, src_valid)
  local mem = self:encode(src, src_valid)
  return self:project(self.decoder(self.tgt_embed(tgt), mem, src_valid))
end

-- decoder_fn() -> the samplers' decoder over states from init_states
function NMTModel:decoder_fn()
  return function(step, st)
    local x = self.tgt_embed(nd.reshape(step, { -1, 1 }))
    local y, ns = self.decoder:step(x, st)
    local logits = nd.reshape(self:project(y), { -1, self._V })
    return nd.log_softmax(logits, { axis = -1 }), ns
  end
end

-- the sampler state for a batch; the samplers tile and reorder every tensor in it along
-- the first axis
function NMTModel:init_states(src, src_valid)
  return { mem = self:encode(src, src_valid), mem_valid = src_valid, t = 0, inputs = {} }
end

---------------------------------------------------------------- BeamSearchTranslator
local Translator = {}
Translator.__index = Translator
M.BeamSearchTranslator = setmetatable(Translator, { __call = function(_, model, o)
  o = check_opts("BeamSearchTranslator", o, { beam_size = true, scorer = true, max_length = true,
    bos_id = true, eos_id = true }, 2)
  if not o.bos_id or not o.eos_id then error("BeamSearchTranslator: bos_id and eos_id are required", 2) end
  return setmetatable({ model = model, o = o }, Translator)
end })

-- translate(src, src_valid) -> samples (N, beam, L), scores, valid_length (bos first)
function Translator:translate(src, src_valid)
  local o, model = self.o, self.model
  local n = src:shape()[1]
  local st = model:init_states(src, src_valid)
  -- the samplers tile tensors in the state; t and the (empty) input cache are plain
  local sampler = S.BeamSearchSampler(o.beam_size or 4, model:decoder_fn(), o.eos_id,
    { scorer = o.scorer, max_length = o.max_length or 50 })
  local bos = {}
  for i = 1, n do bos[i] = o.bos_id end
  return sampler(bos, st)
end

return M
