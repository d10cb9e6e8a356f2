-- mx.gluonts.model.deepar — DeepAR (Salinas et al. 2017) as GluonTS's torch DeepAR: an
-- LSTM over lagged, mean-scaled targets, time features, the age feature, static category
-- embeddings and log(scale), emitting a distribution's arguments at each step; trained on
-- the negative log-likelihood of the context and prediction range; forecasts by ancestral
-- sampling (num_parallel_samples paths, each fed its own draws).
--
--   local est = gts.DeepAREstimator { freq = "M", prediction_length = 12, epochs = 50 }
--   local predictor = est:train(train_ds)
--   for _, f in ipairs(predictor:predict(test_ds)) do print(f:mean()[1]) end
--
-- Options (GluonTS's names and defaults): freq, prediction_length, context_length
-- (= prediction_length), num_layers 2, hidden_size 40, dropout_rate 0.1,
-- num_feat_static_cat 0 + cardinality, embedding_dimension (min(50, (c+1)//2)),
-- num_feat_dynamic_real 0, distr_output StudentTOutput(), scaling true, lags_seq (from
-- freq), time_features (from freq), num_parallel_samples 100, batch_size 32,
-- num_batches_per_epoch 50, epochs 100, learning_rate 1e-3, weight_decay 1e-8, patience 10,
-- clip_gradient 10, init "torch" (PyTorch's defaults, as GluonTS-torch; "xavier":
-- GluonTS-mx's; model/trainer.lua), restore_best true (the lowest-loss epoch's weights),
-- num_workers 0 (DataLoader threads), seed, quiet.
local mx = require("mx")
local nd, nn, rnn = mx.nd, mx.gluon.nn, mx.gluon.rnn
local tf = require("mx.gluonts.time_feature")
local T = require("mx.gluonts.transform")
local dist = require("mx.gluonts.distribution")
local trainer = require("mx.gluonts.model.trainer")
local predictor = require("mx.gluonts.model.predictor")
local P = require("mx.gluonts.period")

local ipairs, error = ipairs, error

local M = {}

---------------------------------------------------------------- scaling
-- GluonTS's MeanScaler: mean |observed value| per series over the context; series with no
-- observation take the batch's mean; at least 1e-10. x: (B, C), obs: (B, C) -> (B, 1)
function M.mean_scale(x, obs)
  local ts_sum = nd.sum(nd.abs(x * obs), { axis = 2, keepdims = true })
  local nobs = nd.sum(obs, { axis = 2, keepdims = true })
  local scale = ts_sum / nd.maximum_scalar(nobs, { scalar = 1 })
  local default = nd.sum(ts_sum) / nd.maximum_scalar(nd.sum(nobs), { scalar = 1 })
  scale = nd.where(nd.greater_scalar(nobs, { scalar = 0 }), scale,
    nd.broadcast_like(nd.reshape(default, { 1, 1 }), scale))
  return nd.maximum_scalar(scale, { scalar = 1e-10 })
end

-- lags: (B, T, #lags) from full = prior .. input (B, Lf); lag index j takes
-- full[Lf - j - T + 1 .. Lf - j] (1-based, inclusive). One gather (take) with the
-- positions (T, #lags), cached per (Lf, T, lags): one op instead of a slice per lag.
local LAG_POS = {}
local function lag_positions(Lf, lag_idx, n)
  local key = Lf .. ":" .. n .. ":" .. table.concat(lag_idx, ",")
  local pos = LAG_POS[key]
  if pos == nil then
    local rows = {}
    for t = 1, n do
      local r = {}
      for k, j in ipairs(lag_idx) do r[k] = Lf - j - n + t end
      rows[t] = r
    end
    pos = nd.array(rows)
    LAG_POS[key] = pos
  end
  return pos
end
local function lagged(full, lag_idx, n)
  return nd.take(full, lag_positions(full:shape()[2], lag_idx, n), { axis = 2 })
end
M._lagged = lagged

---------------------------------------------------------------- network
local Net = nn.HybridBlock:extend("DeepARNetwork")
M.DeepARNetwork = Net

function Net:__init(c)
  nn.HybridBlock.__init(self)
  self.c = c
  self.lag_idx = {}
  for i, l in ipairs(c.lags_seq) do self.lag_idx[i] = l - 1 end
  local emb = 0
  for i, card in ipairs(c.cardinality) do
    self["embed" .. i] = nn.Embedding(card, c.embedding_dimension[i])
    emb = emb + c.embedding_dimension[i]
  end
  local nfeat = emb + c.num_feat_static_real + 1 + c.num_feat_dynamic
  self.input_size = #c.lags_seq + nfeat
  self.rnn = rnn.LSTM(c.hidden_size, c.num_layers, { layout = "NTC", dropout = c.dropout_rate,
    input_size = self.input_size })
  self.proj = c.distr_output:get_args_proj(c.hidden_size)
end

function Net:_static(b, scale)
  local parts = {}
  for i = 1, #self.c.cardinality do
    local codes = nd.slice_axis(b.feat_static_cat, { axis = 2, begin = i, ["end"] = i })
    parts[#parts + 1] = nd.reshape(self["embed" .. i](nd.reshape(codes, { -1 })),
      { -1, self.c.embedding_dimension[i] })
  end
  parts[#parts + 1] = b.feat_static_real
  parts[#parts + 1] = nd.log(scale)
  return nd.concat(parts, { dim = 2 })
end

-- the RNN over the context (and, training, the prediction range): params, scale, state,
-- static features
function Net:unroll(b, future_time_feat, future_target)
  local c = self.c
  local C = c.context_length
  local L = b.past_target:shape()[2]
  local ctx = nd.slice_axis(b.past_target, { axis = 2, begin = L - C + 1, ["end"] = L })
  local octx = nd.slice_axis(b.past_observed_values, { axis = 2, begin = L - C + 1, ["end"] = L })
  local scale = M.mean_scale(ctx, octx)
  local input = ctx / scale
  local H = future_time_feat:shape()[2]
  if H > 1 then
    input = nd.concat({ input, nd.slice_axis(future_target, { axis = 2, begin = 1, ["end"] = H - 1 })
      / scale }, { dim = 2 })
  end
  local prior = nd.slice_axis(b.past_target, { axis = 2, begin = 1, ["end"] = L - C }) / scale
  local Tn = C + H - 1
  local lags = lagged(nd.concat({ prior, input }, { dim = 2 }), self.lag_idx, Tn)
  local tfeat = future_time_feat
  if C > 1 then
    tfeat = nd.concat({ nd.slice_axis(b.past_time_feat, { axis = 2, begin = L - C + 2, ["end"] = L }),
      future_time_feat }, { dim = 2 })
  end
  local static = self:_static(b, scale)
  local S = static:shape()[2]
  local B = static:shape()[1]
  local sexp = nd.broadcast_to(nd.reshape(static, { B, 1, S }), { shape = { B, Tn, S } })
  local x = nd.concat({ lags, sexp, tfeat }, { dim = 3 })
  local out, state = self.rnn(x, self.rnn:begin_state(B))
  return self.proj(out), scale, state, static
end

-- mean negative log-likelihood over the context and prediction range, observed steps only
function Net:loss(b)
  local c = self.c
  local args, scale = self:unroll(b, b.future_time_feat, b.future_target)
  local L = b.past_target:shape()[2]
  local C = c.context_length
  local target, obs = b.future_target, b.future_observed_values
  if C > 1 then
    target = nd.concat({ nd.slice_axis(b.past_target, { axis = 2, begin = L - C + 2, ["end"] = L }),
      target }, { dim = 2 })
    obs = nd.concat({ nd.slice_axis(b.past_observed_values, { axis = 2, begin = L - C + 2,
      ["end"] = L }), obs }, { dim = 2 })
  end
  local nll = c.distr_output:loss(target, args, nil, scale) * obs
  return nd.mean(nll)
end

-- samples (B, S, H) by ancestral sampling
function Net:sample_paths(b, S)
  local c = self.c
  local H = c.prediction_length
  local ftf = b.future_time_feat
  local args, scale, state, static = self:unroll(b, nd.slice_axis(ftf, { axis = 2, begin = 1,
    ["end"] = 1 }))
  local B = scale:shape()[1]
  local rep = function(x, axis) return nd["repeat"](x, { repeats = S, axis = axis or 1 }) end
  local rscale = rep(scale)
  local rstatic = nd.reshape(rep(static), { B * S, 1, -1 })
  local rpast = rep(b.past_target) / rscale
  local rtf = rep(ftf)
  local rstate = {}
  for i, s in ipairs(state) do rstate[i] = rep(s, 2) end
  local T0 = args[1]:shape()[2]
  local rargs = {}
  for i, a in ipairs(args) do
    rargs[i] = rep(nd.slice_axis(a, { axis = 2, begin = T0, ["end"] = T0 }))
  end
  local nxt = c.distr_output:distribution(rargs, nil, rscale):sample()
  local samples = { nxt }
  for k = 2, H do
    local scaled = nxt / rscale
    local feats = nd.concat({ rstatic, nd.slice_axis(rtf, { axis = 2, begin = k, ["end"] = k }) },
      { dim = 3 })
    local lags = lagged(nd.concat({ rpast, scaled }, { dim = 2 }), self.lag_idx, 1)
    local out
    out, rstate = self.rnn(nd.concat({ lags, feats }, { dim = 3 }), rstate)
    rpast = nd.concat({ rpast, scaled }, { dim = 2 })
    nxt = c.distr_output:distribution(self.proj(out), nil, rscale):sample()
    samples[k] = nxt
  end
  return nd.reshape(nd.concat(samples, { dim = 2 }), { B, S, H })
end

---------------------------------------------------------------- estimator
local FIELDS_TRAIN = { { "feat_static_cat", "static" }, { "feat_static_real", "static" },
  { "past_time_feat", "rows" }, { "past_target", "series" }, { "past_observed_values", "series" },
  { "future_time_feat", "rows" }, { "future_target", "series" },
  { "future_observed_values", "series" } }
local FIELDS_PRED = { { "feat_static_cat", "static" }, { "feat_static_real", "static" },
  { "past_time_feat", "rows" }, { "past_target", "series" }, { "past_observed_values", "series" },
  { "future_time_feat", "rows" } }
M.FIELDS_TRAIN, M.FIELDS_PRED = FIELDS_TRAIN, FIELDS_PRED -- the Transformer's batches too

local Estimator = {}
Estimator.__index = Estimator
M.DeepAREstimator = setmetatable(Estimator, { __call = function(c, o) return c.new(o) end })

-- the static categories' cardinalities and embedding sizes (GluonTS's min(50, (c+1)//2));
-- without categories, one constant category
function M.static_cat(o)
  local card = ((o.num_feat_static_cat or 0) > 0 and o.cardinality) or { 1 }
  local dims = o.embedding_dimension
  if not dims then
    dims = {}
    for i, n in ipairs(card) do dims[i] = math.min(50, math.floor((n + 1) / 2)) end
  end
  return card, dims
end

local function config(o)
  if type(o) ~= "table" or not o.freq or not o.prediction_length then
    error("DeepAREstimator: freq and prediction_length are required", 3)
  end
  local f = P.freq(o.freq, 3)
  local c = trainer.options(o)
  -- the network is GluonTS-torch's: it starts from PyTorch's default initialisation
  if o.init == nil then c.init = "torch" end
  c.freq = f.name
  c.context_length = o.context_length or o.prediction_length
  c.num_layers, c.hidden_size = o.num_layers or 2, o.hidden_size or 40
  c.dropout_rate = o.dropout_rate or 0.1
  c.num_feat_static_cat = o.num_feat_static_cat or 0
  c.cardinality, c.embedding_dimension = M.static_cat(o)
  c.num_feat_dynamic_real = o.num_feat_dynamic_real or 0
  c.num_feat_static_real = math.max(1, o.num_feat_static_real or 0)
  c.lags_seq = o.lags_seq or tf.get_lags_for_frequency(f)
  c.time_features = o.time_features_names
  if not c.time_features then
    c.time_features = {}
    for i, feat in ipairs(o.time_features or tf.time_features_from_frequency_str(f)) do
      c.time_features[i] = feat.name
    end
  end
  c.num_feat_dynamic = 1 + c.num_feat_dynamic_real + #c.time_features
  c.distr_output = o.distr_output or dist.StudentTOutput()
  c.distr_name = c.distr_output.__name
  c.scaling = o.scaling ~= false
  c.num_parallel_samples = o.num_parallel_samples or 100
  c.past_length = c.context_length + math.max(unpack(c.lags_seq))
  return c
end
M._config = config

function Estimator.new(o) return setmetatable({ c = config(o) }, Estimator) end

-- the field transformation (GluonTS's create_transformation)
function M.transformation(c)
  local feats = {}
  for i, n in ipairs(c.time_features) do feats[i] = tf[n] end
  local list = {}
  if c.num_feat_static_cat == 0 then
    list[#list + 1] = T.SetField { output_field = "feat_static_cat", value = { 0 } }
  end
  if (c.num_feat_static_real_given or 0) == 0 then
    list[#list + 1] = T.SetField { output_field = "feat_static_real", value = { 0 } }
  end
  -- quantile models (MQ-CNN) have no distribution: missing values are filled with 0
  local fill = c.distr_output and c.distr_output.value_in_support or 0
  list[#list + 1] = T.AddObservedValuesIndicator { target_field = "target",
    output_field = "observed_values", imputation_method = T.DummyValueImputation(fill) }
  list[#list + 1] = T.AddTimeFeatures { start_field = "start", target_field = "target",
    output_field = "time_feat", time_features = feats, pred_length = c.prediction_length }
  list[#list + 1] = T.AddAgeFeature { target_field = "target", output_field = "feat_dynamic_age",
    pred_length = c.prediction_length, log_scale = true }
  local vs = { "time_feat", "feat_dynamic_age" }
  if c.num_feat_dynamic_real > 0 then vs[#vs + 1] = "feat_dynamic_real" end
  list[#list + 1] = T.VstackFeatures { output_field = "time_feat", input_fields = vs }
  return T.Chain(list)
end

function M.splitter(c, mode)
  local sampler = mode == "training" and T.ExpectedNumInstanceSampler { num_instances = 1,
    min_future = c.prediction_length } or T.TestSplitSampler()
  return T.InstanceSplitter { instance_sampler = sampler, past_length = c.past_length,
    future_length = c.prediction_length, time_series_fields = { "time_feat", "observed_values" },
    dummy_value = c.distr_output.value_in_support }
end

function Estimator:train(train_ds)
  local c = self.c
  local net, history, times = trainer.train(c, train_ds, { net = function() return Net(c) end,
    transformation = M.transformation(c), splitter = M.splitter(c, "training"),
    fields = FIELDS_TRAIN, title = "DeepAR" })
  local p = M.DeepARPredictor(net, c)
  p.history, p.epoch_times = history, times
  return p
end

---------------------------------------------------------------- predictor
-- the settings predictor.json keeps: all but the distribution head (saved by its name)
local function saved_config(c)
  local t = {}
  for k, v in pairs(c) do if k ~= "distr_output" then t[k] = v end end
  return t
end
M.saved_config = saved_config
local Predictor
Predictor, M.DeepARPredictor = predictor.class("DeepARPredictor", saved_config)

-- predict(ds, {num_samples=}) -> a list of SampleForecasts
function Predictor:predict(ds, opts)
  local c = self.c
  local S = (opts and opts.num_samples) or c.num_parallel_samples
  local out = {}
  predictor.each_batch(c, ds, M.transformation(c), M.splitter(c, "test"), FIELDS_PRED, function(g)
    predictor.add_samples(out, g, self.net:sample_paths(g.batch, S):totable())
  end)
  return out
end

function M._load(dir, t)
  t.distr_output = dist.by_name(t.distr_name)
  return M.DeepARPredictor(predictor.load_net(dir, Net, t), t)
end

return M
