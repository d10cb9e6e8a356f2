-- mx.gluonts.model.transformer — GluonTS's TransformerEstimator: DeepAR's inputs (lags of
-- the mean-scaled target, time features, age, static embeddings, log(scale)) projected to
-- model_dim; a transformer encoder over the context and a decoder over the prediction
-- range (causal self-attention, attention over the encoder's output) emitting a
-- distribution's arguments per step. Trained on the negative log-likelihood of the
-- prediction range (teacher forcing: step t's lags hold the true values before t);
-- forecasts by ancestral sampling, each step's draws fed back as the next step's lags,
-- the decoder's self-attention keys cached.
--
--   local est = gts.TransformerEstimator { freq = "M", prediction_length = 12, epochs = 50 }
--   local f = est:train(train_ds):predict(test_ds)[1]
--
-- Options (GluonTS's names and defaults): freq, prediction_length, context_length
-- (= prediction_length), model_dim 32, inner_ff_dim_scale 4, num_heads 8, act_type
-- "softrelu", dropout_rate 0.1, num_encoder_layers 1, num_decoder_layers 1 (GluonTS has one
-- block each), distr_output StudentTOutput(), num_feat_static_cat + cardinality,
-- embedding_dimension, lags_seq, time features, scaling, num_parallel_samples 100, and the
-- trainer's. The blocks are post-norm (residual, then layer norm) as
-- mx.gluon.nn.TransformerEncoderCell and GluonNLP's decoder cell; there is no positional
-- encoding: the time features and the age give each step its position, as in GluonTS.
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local tr = require("mx.gluon.nn.transformer")
local nlp_tr = require("mx.gluonnlp.model.transformer")
local dist = require("mx.gluonts.distribution")
local trainer = require("mx.gluonts.model.trainer")
local predictor = require("mx.gluonts.model.predictor")
local deepar = require("mx.gluonts.model.deepar")

local ipairs, error, type = ipairs, error, type
local lagged = deepar._lagged

local M = {}

---------------------------------------------------------------- network
local Net = nn.HybridBlock:extend("TransformerNetwork")
M.TransformerNetwork = Net

function Net:__init(c)
  nn.HybridBlock.__init(self)
  self.c = c
  self.lags = c.lags_seq
  self.shifted = {}
  for i, l in ipairs(c.lags_seq) do self.shifted[i] = l - 1 end
  local emb = 0
  for i, card in ipairs(c.cardinality) do
    self["embed" .. i] = nn.Embedding(card, c.embedding_dimension[i])
    emb = emb + c.embedding_dimension[i]
  end
  local nin = #c.lags_seq + c.num_feat_dynamic + emb + c.num_feat_static_real + 1
  local D = c.model_dim
  local cell = { units = D, hidden_size = c.inner_ff_dim_scale * D, num_heads = c.num_heads,
    dropout = c.dropout_rate, activation = c.act_type }
  self.enc_input = nn.Dense(D, { flatten = false, in_units = nin })
  self.dec_input = nn.Dense(D, { flatten = false, in_units = nin })
  self.enc_cells, self.dec_cells = {}, {}
  for i = 1, c.num_encoder_layers do
    self["enc" .. i] = tr.TransformerEncoderCell(cell)
    self.enc_cells[i] = self["enc" .. i]
  end
  for i = 1, c.num_decoder_layers do
    self["dec" .. i] = nlp_tr.TransformerDecoderCell(cell)
    self.dec_cells[i] = self["dec" .. i]
  end
  self.proj = c.distr_output:get_args_proj(D)
end
Net._static = deepar.DeepARNetwork._static

-- inputs (B, C [+ H], features) over the context (and, training, the prediction range),
-- the scale (B, 1) and the static features (B, S)
function Net:inputs(b, future_target)
  local c = self.c
  local C, H = c.context_length, c.prediction_length
  local L = b.past_target:shape()[2]
  local ctx = nd.slice_axis(b.past_target, { axis = 2, begin = L - C + 1, ["end"] = L })
  local octx = nd.slice_axis(b.past_observed_values, { axis = 2, begin = L - C + 1, ["end"] = L })
  local scale = c.scaling and deepar.mean_scale(ctx, octx) or nd.ones({ ctx:shape()[1], 1 })
  local seq, n = b.past_target, C
  local tfeat = nd.slice_axis(b.past_time_feat, { axis = 2, begin = L - C + 1, ["end"] = L })
  if future_target then
    seq = nd.concat({ seq, future_target }, { dim = 2 })
    tfeat = nd.concat({ tfeat, b.future_time_feat }, { dim = 2 })
    n = C + H
  end
  local lags = lagged(seq / scale, self.lags, n)
  local static = self:_static(b, scale)
  local B, S = static:shape()[1], static:shape()[2]
  local sexp = nd.broadcast_to(nd.reshape(static, { B, 1, S }), { shape = { B, n, S } })
  return nd.concat({ lags, tfeat, sexp }, { dim = 3 }), scale, static
end

function Net:encode(x)
  local h = self.enc_input(x)
  for _, cell in ipairs(self.enc_cells) do h = cell(h) end
  return h
end

-- mean negative log-likelihood of the observed prediction-range steps
function Net:loss(b)
  local c = self.c
  local C, H = c.context_length, c.prediction_length
  local x, scale = self:inputs(b, b.future_target)
  local mem = self:encode(nd.slice_axis(x, { axis = 2, begin = 1, ["end"] = C }))
  local y = self.dec_input(nd.slice_axis(x, { axis = 2, begin = C + 1, ["end"] = C + H }))
  local causal = tr.causal_mask(H)
  for _, cell in ipairs(self.dec_cells) do y = cell(y, y, causal, mem) end
  local nll = c.distr_output:loss(b.future_target, self.proj(y), nil, scale)
    * b.future_observed_values
  return nd.sum(nll) / nd.maximum_scalar(nd.sum(b.future_observed_values), { scalar = 1 })
end

-- samples (B, S, H) by ancestral sampling
function Net:sample_paths(b, S)
  local c = self.c
  local H = c.prediction_length
  local x, scale, static = self:inputs(b)
  local B = scale:shape()[1]
  local rep = function(t) return nd["repeat"](t, { repeats = S, axis = 1 }) end
  local mem = rep(self:encode(x))
  local rscale = rep(scale)
  local rstatic = nd.reshape(rep(static), { B * S, 1, -1 })
  local rpast = rep(b.past_target) / rscale
  local rtf = rep(b.future_time_feat)
  local cache = {}
  local samples = {}
  for k = 1, H do
    local lags = lagged(rpast, self.shifted, 1)
    local inp = nd.concat({ lags, nd.slice_axis(rtf, { axis = 2, begin = k, ["end"] = k }), rstatic },
      { dim = 3 })
    local y = self.dec_input(inp)
    for i, cell in ipairs(self.dec_cells) do
      local keys = cache[i] and nd.concat({ cache[i], y }, { dim = 2 }) or y
      cache[i] = keys
      y = cell(y, keys, nil, mem)
    end
    local nxt = c.distr_output:distribution(self.proj(y), nil, rscale):sample() -- (B*S, 1)
    samples[k] = nxt
    rpast = nd.concat({ rpast, nxt / rscale }, { dim = 2 })
  end
  return nd.reshape(nd.concat(samples, { dim = 2 }), { B, S, H })
end

---------------------------------------------------------------- estimator
local FIELDS_TRAIN, FIELDS_PRED = deepar.FIELDS_TRAIN, deepar.FIELDS_PRED

local function positive_int(name, v, level)
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error("TransformerEstimator: " .. name .. " must be a positive integer, got " .. tostring(v),
      level + 1)
  end
  return v
end

local function config(o)
  if type(o) ~= "table" or not o.freq or not o.prediction_length then
    error("TransformerEstimator: freq and prediction_length are required", 3)
  end
  local c = deepar._config(o)
  -- GluonTS's Transformer is an MXNet model: GluonTS-mx's Xavier initialisation
  if o.init == nil then c.init = "xavier" end
  c.model_dim = positive_int("model_dim", o.model_dim or 32, 3)
  c.inner_ff_dim_scale = positive_int("inner_ff_dim_scale", o.inner_ff_dim_scale or 4, 3)
  c.num_heads = positive_int("num_heads", o.num_heads or 8, 3)
  if c.model_dim % c.num_heads ~= 0 then
    error(string.format("TransformerEstimator: model_dim (%d) must be divisible by num_heads (%d)",
      c.model_dim, c.num_heads), 3)
  end
  c.act_type = o.act_type or "softrelu"
  c.num_encoder_layers = positive_int("num_encoder_layers", o.num_encoder_layers or 1, 3)
  c.num_decoder_layers = positive_int("num_decoder_layers", o.num_decoder_layers or 1, 3)
  -- DeepAR's LSTM options do not apply
  c.num_layers, c.hidden_size = nil, nil
  return c
end
M._config = config

local Estimator = {}
Estimator.__index = Estimator
M.TransformerEstimator = setmetatable(Estimator, { __call = function(cls, o)
  return setmetatable({ c = config(o) }, cls)
end })

local Predictor
Predictor, M.TransformerPredictor = predictor.class("TransformerPredictor", deepar.saved_config)

function Estimator:train(ds)
  local c = self.c
  local net, history, times = trainer.train(c, ds, { net = function() return Net(c) end,
    transformation = deepar.transformation(c), splitter = deepar.splitter(c, "training"),
    fields = FIELDS_TRAIN, title = "Transformer" })
  local p = M.TransformerPredictor(net, c)
  p.history, p.epoch_times = history, times
  return p
end

-- predict(ds, {num_samples=}) -> a list of SampleForecasts
function Predictor:predict(ds, opts)
  local c = self.c
  local S = (opts and opts.num_samples) or c.num_parallel_samples
  local out = {}
  predictor.each_batch(c, ds, deepar.transformation(c), deepar.splitter(c, "test"), FIELDS_PRED,
    function(g) predictor.add_samples(out, g, self.net:sample_paths(g.batch, S):totable()) end)
  return out
end

function M._load(dir, t)
  t.distr_output = dist.by_name(t.distr_name)
  return M.TransformerPredictor(predictor.load_net(dir, Net, t), t)
end

return M
