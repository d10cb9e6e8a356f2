-- mx.gluonnlp.model BERT: GluonNLP 0.10's BERTModel (post-norm transformer encoder with
-- GELU, learned positions, token types, tanh pooler) with its parameter names, the
-- get_model configurations, a loader for Hugging Face BERT checkpoint directories
-- (config.json + model.safetensors + vocab.txt), BERTClassifier, and mean-pooled
-- sentence embeddings (sentence-transformers' recipe).
--
-- Layout is batch-major: inputs (N, T) int token ids (0-based), token_types (N, T),
-- valid_length (N,) the number of real tokens per row (the rest is padding).
local nd = require("mx.nd")
local autograd = require("mx.autograd")
local block = require("mx.gluon.block")
local nn = require("mx.gluon.nn")
local Parameter = require("mx.gluon.parameter").Parameter
local tr = require("mx.gluon.nn.transformer")
local check_opts = require("mx.core.class").check_opts
local json = require("mx.gluonnlp._json")

local Block, HybridBlock = block.Block, block.HybridBlock
local M = {}

local function layer_norm(units, eps)
  return nn.LayerNorm({ in_channels = units, epsilon = eps })
end

---------------------------------------------------------------- BERTPositionwiseFFN
-- ffn_2(gelu(ffn_1(x))), dropout, residual, layer_norm (names ffn_1, ffn_2, layer_norm)
local FFN = HybridBlock:extend("BERTPositionwiseFFN")
M.BERTPositionwiseFFN = FFN
function FFN:__init(units, hidden, dropout, eps)
  Block.__init(self)
  self.ffn_1 = nn.Dense(hidden, { flatten = false, in_units = units })
  self.ffn_2 = nn.Dense(units, { flatten = false, in_units = hidden })
  if dropout > 0 then self.dropout_layer = nn.Dropout(dropout) end
  self.layer_norm = layer_norm(units, eps)
end
local GELU_FC = { flatten = false, act_type = "gelu" }
function FFN:forward(x)
  local h
  if autograd.is_recording() then
    h = nd.gelu(self.ffn_1(x))
  else -- inference: gelu as the product's post-op, no second pass over the hidden layer
    local l = self.ffn_1
    GELU_FC.num_hidden = l.weight:data():shape()[1]
    h = nd.fully_connected(x, l.weight:data(), l.bias:data(), GELU_FC)
  end
  local y = self.ffn_2(h)
  if self.dropout_layer then y = self.dropout_layer(y) end
  return self.layer_norm(nd.add(y, x))
end

---------------------------------------------------------------- BERTEncoderCell
-- a = layer_norm(x + dropout(proj(attention(x, mask)))); y = ffn(a)
local Cell = HybridBlock:extend("BERTEncoderCell")
M.BERTEncoderCell = Cell
function Cell:__init(o)
  Block.__init(self)
  local units = o.units
  self._units, self._heads = units, o.num_heads
  self.attention_cell = tr.MultiHeadAttention({ units = units, num_heads = o.num_heads,
    dropout = o.attention_dropout or o.dropout })
  -- the fused projection reads these weights directly: no deferred shapes
  for _, l in ipairs({ "proj_query", "proj_key", "proj_value" }) do
    self.attention_cell[l].weight:set_shape({ units, units }, 3)
  end
  self.proj = nn.Dense(units, { flatten = false, in_units = units })
  if o.dropout > 0 then self.dropout_layer = nn.Dropout(o.dropout) end
  self.layer_norm = layer_norm(units, o.layer_norm_eps)
  self.ffn = FFN(units, o.hidden_size, o.dropout, o.layer_norm_eps)
end

-- the attention's three projections as one (3 units, units) weight whose output rows are
-- interleaved per head (h: its D query, D key, D value rows): the layout of MXNet's
-- interleaved_matmul_selfatt ops. Built from the three Dense parameters at each call, so
-- gradients reach them and loaded weights are used as they are.
local function fused_qkv(att, heads, units)
  local d = units / heads
  local function w(l) return nd.reshape(l.weight:data(), { heads, 1, d, units }) end
  local function b(l) return nd.reshape(l.bias:data(), { heads, 1, d }) end
  local q, k, v = att.proj_query, att.proj_key, att.proj_value
  local W = nd.reshape(nd.concat(w(q), w(k), w(v), { dim = 2 }), { 3 * units, units })
  local B = nd.reshape(nd.concat(b(q), b(k), b(v), { dim = 2 }), { 3 * units })
  return W, B
end

-- x (T, N, units) time-major; bias nil or (N, 1, 1, T): 0 for real keys, -1e9 for
-- padding, added to the (N, heads, T, T) scores; valid_length nil or (N,): the same
-- padding as lengths, for the fused attention of inference
function Cell:forward(x, bias, valid_length)
  local u, h = self._units, self._heads
  local W, B = fused_qkv(self.attention_cell, h, u)
  local qkv = nd.fully_connected(x, W, B, { num_hidden = 3 * u, flatten = false })
  local ctx
  if not autograd.is_recording() and not autograd.is_training() then
    -- inference (no dropout): scores, softmax and the weighted values in one pass
    local o = { heads = h }
    ctx = valid_length and nd.interleaved_selfatt(qkv, valid_length, o) or nd.interleaved_selfatt(qkv, o)
  else
    local scores = nd.interleaved_matmul_selfatt_qk(qkv, { heads = h })
    if bias then
      local t, n = x:shape()[1], x:shape()[2]
      scores = nd.reshape(nd.add(nd.reshape(scores, { n, h, t, t }), bias), { n * h, t, t })
    end
    local att = nd.softmax(scores, { axis = -1 })
    local adrop = self.attention_cell.dropout_layer
    if adrop then att = adrop(att) end
    ctx = nd.interleaved_matmul_selfatt_valatt(qkv, att, { heads = h })
  end
  local a = self.proj(ctx)
  if self.dropout_layer then a = self.dropout_layer(a) end
  return self.ffn(self.layer_norm(nd.add(a, x)))
end

---------------------------------------------------------------- BERTEncoder
local Encoder = HybridBlock:extend("BERTEncoder")
M.BERTEncoder = Encoder
function Encoder:__init(o)
  Block.__init(self)
  self._units, self._max_length, self._heads = o.units, o.max_length, o.num_heads
  self.position_weight = Parameter("position_weight", { shape = { o.max_length, o.units } })
  self.layer_norm = layer_norm(o.units, o.layer_norm_eps)
  if o.dropout > 0 then self.dropout_layer = nn.Dropout(o.dropout) end
  self.transformer_cells = nn.Sequential()
  for _ = 1, o.num_layers do self.transformer_cells:add(Cell(o)) end
end
-- x (N, T, units) embeddings -> (N, T, units). The cells run time-major (T, N, units),
-- the layout of the interleaved attention ops: one transpose in, one out.
function Encoder:forward(x, valid_length)
  local s = x:shape()
  if s[2] > self._max_length then
    error(string.format("BERTEncoder: sequence length %d is over max_length %d", s[2], self._max_length), 2)
  end
  local pos = self.position_weight:data()[{ { 1, s[2] } }]
  local y = self.layer_norm(nd.add(x, nd.expand_dims(pos, { axis = 1 })))
  if self.dropout_layer then y = self.dropout_layer(y) end
  local bias, lengths
  local fused = not autograd.is_recording() and not autograd.is_training()
  if valid_length ~= nil and nd.min(valid_length):item() < s[2] then
    lengths = valid_length
  end
  if lengths and not fused then
    -- (N) -> (N, 1, 1, T): -1e9 at the keys past each sequence's length (none: no mask)
    local ar = nd.reshape(nd.arange(0, s[2]), { 1, 1, 1, s[2] })
    local keep = nd.lesser(ar, nd.reshape(valid_length:astype("float32"), { s[1], 1, 1, 1 }))
    bias = nd.mul_scalar(nd.sub_scalar(keep, { scalar = 1 }), { scalar = 1e9 })
    if bias:dtype() ~= y:dtype() then bias = bias:astype(y:dtype()) end
  end
  y = nd.transpose(y, { axes = { 2, 1, 3 } })
  local cells = self.transformer_cells:children()
  for i = 1, #cells do
    local cell = cells[i]
    if fused then -- a layer's temporaries back to the pool at once, hot, not at a GC cycle
      y = nd.scope(function() return cell(y, bias, lengths) end)
    else
      y = cell(y, bias, lengths)
    end
  end
  return nd.transpose(y, { axes = { 2, 1, 3 } })
end

---------------------------------------------------------------- BERTModel
local BERTModel = HybridBlock:extend("BERTModel")
M.BERTModel = BERTModel
local OPTS = { vocab_size = true, token_type_vocab_size = true, units = true, hidden_size = true,
  num_layers = true, num_heads = true, max_length = true, dropout = true, attention_dropout = true,
  layer_norm_eps = true, use_pooler = true, use_token_type_embed = true, embed_size = true }

-- BERTModel{vocab_size=30522, token_type_vocab_size=2, units=768, hidden_size=3072,
-- num_layers=12, num_heads=12, max_length=512, dropout=0.1, layer_norm_eps=1e-12,
-- use_pooler=true, use_token_type_embed=true}.
-- forward(inputs, token_types=nil, valid_length=nil) -> sequence output (N, T, units),
-- and the pooled output (N, units) with use_pooler.
function BERTModel:__init(o)
  Block.__init(self)
  o = check_opts("BERTModel", o, OPTS, 3)
  local c = {
    vocab_size = o.vocab_size or 30522, token_type_vocab_size = o.token_type_vocab_size or 2,
    units = o.units or 768, hidden_size = o.hidden_size or 3072, num_layers = o.num_layers or 12,
    num_heads = o.num_heads or 12, max_length = o.max_length or 512, dropout = o.dropout or 0.1,
    attention_dropout = o.attention_dropout, layer_norm_eps = o.layer_norm_eps or 1e-12,
  }
  if c.units % c.num_heads ~= 0 then
    error(string.format("BERTModel: units (%d) must be divisible by num_heads (%d)", c.units, c.num_heads), 3)
  end
  self.config = c
  self._use_pooler = o.use_pooler ~= false
  self._use_tt = o.use_token_type_embed ~= false
  self.word_embed = nn.Sequential()
  self.word_embed:add(nn.Embedding(c.vocab_size, c.units))
  if self._use_tt then
    self.token_type_embed = nn.Sequential()
    self.token_type_embed:add(nn.Embedding(c.token_type_vocab_size, c.units))
  end
  self.encoder = Encoder(c)
  if self._use_pooler then self.pooler = nn.Dense(c.units, { flatten = false, activation = "tanh",
    in_units = c.units }) end
end

function BERTModel:forward(inputs, token_types, valid_length)
  if not nd.is_tensor(inputs) or #inputs:shape() ~= 2 then
    error("BERTModel: inputs must be an (N, T) tensor of token ids", 2)
  end
  local x = self.word_embed(inputs)
  if self._use_tt then
    token_types = token_types or nd.zeros_like(inputs)
    x = nd.add(x, self.token_type_embed(token_types))
  end
  local seq = self.encoder(x, valid_length)
  if not self._use_pooler then return seq end
  local first = nd.reshape(nd.slice_axis(seq, { axis = 2, begin = 1, ["end"] = 1 }), { -1,
    self.config.units })
  return seq, self.pooler(first)
end

---------------------------------------------------------------- configurations
-- GluonNLP's names (bert_<layers>_<units>_<heads>) plus MiniLM-L6-H384's shape
M.CONFIGS = {
  bert_12_768_12 = { num_layers = 12, units = 768, hidden_size = 3072, num_heads = 12 },
  bert_24_1024_16 = { num_layers = 24, units = 1024, hidden_size = 4096, num_heads = 16 },
  bert_6_384_12 = { num_layers = 6, units = 384, hidden_size = 1536, num_heads = 12 },
}

-- get_model(name, opts): a BERTModel of a named configuration (opts override it). No
-- weights are downloaded: pretrained=true is an error pointing at from_hf.
function M.get_bert(name, o)
  o = o or {}
  local c = M.CONFIGS[name]
  if not c then
    local names = {}
    for k in pairs(M.CONFIGS) do names[#names + 1] = k end
    table.sort(names)
    error("get_model: unknown BERT model '" .. tostring(name) .. "' (valid: " .. table.concat(names,
      ", ") .. ")", 3)
  end
  if o.pretrained then
    error("get_model: luamx downloads nothing; load a Hugging Face checkpoint directory with "
      .. "nlp.model.bert.from_hf(dir)", 3)
  end
  local args = {}
  for k, v in pairs(c) do args[k] = v end
  for k, v in pairs(o) do if k ~= "pretrained" then args[k] = v end end
  return BERTModel(args)
end

---------------------------------------------------------------- Hugging Face checkpoints
-- hf_name_map(n_layers) -> function(hf_name) -> GluonNLP name (nil: not a parameter)
function M.hf_name_map(name)
  local s = name:gsub("^bert%.", "")
  local fixed = {
    ["embeddings.word_embeddings.weight"] = "word_embed.0.weight",
    ["embeddings.token_type_embeddings.weight"] = "token_type_embed.0.weight",
    ["embeddings.position_embeddings.weight"] = "encoder.position_weight",
    ["embeddings.LayerNorm.weight"] = "encoder.layer_norm.gamma",
    ["embeddings.LayerNorm.bias"] = "encoder.layer_norm.beta",
    ["pooler.dense.weight"] = "pooler.weight",
    ["pooler.dense.bias"] = "pooler.bias",
  }
  if fixed[s] then return fixed[s] end
  local i, rest = s:match("^encoder%.layer%.(%d+)%.(.+)$")
  if not i then return nil end
  local p = "encoder.transformer_cells." .. i .. "."
  local map = {
    ["attention.self.query"] = "attention_cell.proj_query",
    ["attention.self.key"] = "attention_cell.proj_key",
    ["attention.self.value"] = "attention_cell.proj_value",
    ["attention.output.dense"] = "proj",
    ["attention.output.LayerNorm"] = "layer_norm",
    ["intermediate.dense"] = "ffn.ffn_1",
    ["output.dense"] = "ffn.ffn_2",
    ["output.LayerNorm"] = "ffn.layer_norm",
  }
  local mod, leaf = rest:match("^(.+)%.(%w+)$")
  local to = map[mod]
  if not to then return nil end
  if to:match("layer_norm$") then leaf = leaf == "weight" and "gamma" or "beta" end
  return p .. to .. "." .. leaf
end

-- from_hf(dir, {use_pooler=true}) -> model, tokenizer, config: a BERT checkpoint
-- directory as Hugging Face writes it (config.json, model.safetensors, vocab.txt).
function M.from_hf(dir, o)
  o = o or {}
  local cfg = json.read_file(dir .. "/config.json", 2)
  if cfg.model_type and cfg.model_type ~= "bert" then
    error("from_hf: " .. dir .. " holds a '" .. tostring(cfg.model_type) .. "' model, not bert", 2)
  end
  if cfg.hidden_act and cfg.hidden_act ~= "gelu" then
    error("from_hf: hidden_act '" .. tostring(cfg.hidden_act) .. "' is not supported (gelu)", 2)
  end
  local model = BERTModel({
    vocab_size = cfg.vocab_size, token_type_vocab_size = cfg.type_vocab_size or 2,
    units = cfg.hidden_size, hidden_size = cfg.intermediate_size, num_layers = cfg.num_hidden_layers,
    num_heads = cfg.num_attention_heads, max_length = cfg.max_position_embeddings,
    dropout = cfg.hidden_dropout_prob or 0.1, attention_dropout = cfg.attention_probs_dropout_prob,
    layer_norm_eps = cfg.layer_norm_eps or 1e-12, use_pooler = o.use_pooler,
  })
  model:initialize()
  local path = dir .. "/model.safetensors"
  model:load_parameters(path, { name_map = M.hf_name_map, ignore_extra = o.use_pooler == false })
  local tok = require("mx.gluonnlp.data.tokenizers").BERTTokenizer(dir .. "/vocab.txt",
    { lower = o.lower == nil and true or o.lower })
  return model, tok, cfg
end

---------------------------------------------------------------- inputs and pooling
-- encode_batch(tokenizer, sentences, {max_length=128, cls_id=, sep_id=, pad_id=0}) ->
-- ids (N, T) int32, token_types (N, T), valid_length (N,) int32: [CLS] ids [SEP], cut at
-- max_length, padded to the longest
function M.encode_batch(tok, sentences, o)
  o = o or {}
  local maxlen = o.max_length or 128
  local cls = o.cls_id or tok:convert_tokens_to_ids("[CLS]")
  local sep = o.sep_id or tok:convert_tokens_to_ids("[SEP]")
  local pad = o.pad_id or 0
  local rows, lens, T = {}, {}, 0
  for i, s in ipairs(sentences) do
    local ids = tok:encode(s)
    local row = { cls }
    for k = 1, math.min(#ids, maxlen - 2) do row[#row + 1] = ids[k] end
    row[#row + 1] = sep
    rows[i], lens[i] = row, #row
    if #row > T then T = #row end
  end
  local flat = {}
  for i, row in ipairs(rows) do
    for k = 1, T do flat[(i - 1) * T + k] = row[k] or pad end
  end
  local ids = nd.array(flat, { dtype = "int32" }):reshape({ #rows, T })
  return ids, nd.zeros({ #rows, T }, { dtype = "int32" }), nd.array(lens, { dtype = "int32" })
end

-- mean_pool(seq (N, T, C), valid_length (N,), normalize) -> (N, C): the mean over each
-- row's real tokens, L2-normalised when asked (sentence-transformers' all-MiniLM-L6-v2)
function M.mean_pool(seq, valid_length, normalize)
  local s = seq:shape()
  local ar = nd.reshape(nd.arange(0, s[2]), { 1, s[2], 1 })
  local m = nd.lesser(ar, nd.reshape(valid_length:astype("float32"), { -1, 1, 1 }))
  local summed = nd.sum(nd.mul(seq, m), { axis = 2 })
  local counts = nd.maximum(nd.reshape(valid_length:astype("float32"), { -1, 1 }), 1e-9)
  local mean = nd.div(summed, counts)
  if normalize then
    local norm = nd.sqrt(nd.sum(nd.mul(mean, mean), { axis = 2, keepdims = true }))
    mean = nd.div(mean, nd.maximum(norm, 1e-12))
  end
  return mean
end

-- sentence_embeddings(model, tok, sentences, {max_length=128, batch_size=32,
-- normalize=true}) -> (#sentences, units)
function M.sentence_embeddings(model, tok, sentences, o)
  o = o or {}
  local bs = o.batch_size or 32
  local parts = {}
  for a = 1, #sentences, bs do
    local batch = {}
    for i = a, math.min(a + bs - 1, #sentences) do batch[#batch + 1] = sentences[i] end
    local ids, tt, vl = M.encode_batch(tok, batch, o)
    local seq = model(ids, tt, vl)
    parts[#parts + 1] = M.mean_pool(seq, vl, o.normalize ~= false)
  end
  if #parts == 1 then return parts[1] end
  parts[#parts + 1] = { dim = 1 }
  return nd.concat(unpack(parts))
end

---------------------------------------------------------------- BERTClassifier
-- BERTClassifier(bert, {num_classes=2, dropout=0.0}): a Dense on the pooled output
local BERTClassifier = HybridBlock:extend("BERTClassifier")
M.BERTClassifier = BERTClassifier
function BERTClassifier:__init(bert, o)
  Block.__init(self)
  o = check_opts("BERTClassifier", o, { num_classes = true, dropout = true }, 3)
  self.bert = bert
  self.classifier = nn.Sequential()
  if (o.dropout or 0) > 0 then self.classifier:add(nn.Dropout(o.dropout)) end
  self.classifier:add(nn.Dense(o.num_classes or 2, { in_units = bert.config.units }))
end
function BERTClassifier:forward(inputs, token_types, valid_length)
  local _, pooled = self.bert(inputs, token_types, valid_length)
  if pooled == nil then error("BERTClassifier: the BERT model has no pooler (use_pooler=false)", 2) end
  return self.classifier(pooled)
end

return M
