-- mx.gluonts.model.mqcnn — MQ-CNN (Wen et al. 2017, "A Multi-Horizon Quantile Recurrent
-- Forecaster") as GluonTS's MQCNNEstimator: a stack of causal dilated 1-D convolutions over
-- the context (target, observed indicator, time features, static embeddings and
-- log(scale)), the target appended to the conv output (residual), and at every context
-- step ("forking sequences") an MLP that maps that step's code and the next
-- prediction_length steps' time features to prediction_length x decoder_mlp_dim, projected
-- to one output per quantile. Trained on the quantile loss of all forks at once; forecasts
-- are the last fork's quantiles (QuantileForecast).
--
--   local est = gts.MQCNNEstimator { freq = "M", prediction_length = 12, epochs = 50 }
--   local f = est:train(train_ds):predict(test_ds)[1]
--   print(f:quantile(0.9)[1], f:mean()[1])        -- mean = the median
--
-- Options (GluonTS's names and defaults): freq, prediction_length, context_length
-- (4 x prediction_length), channels_seq {30, 30, 30}, dilation_seq {1, 3, 9},
-- kernel_size_seq {7, 3, 3}, decoder_mlp_dim_seq {30}, quantiles {0.025, 0.1, ..., 0.9,
-- 0.975}, num_feat_static_cat 0 + cardinality, embedding_dimension, scaling, and the
-- trainer's (mx.gluonts.model.trainer). One difference: GluonTS's MQ-CNN defaults to no
-- scaling and, when scaled, only feeds log(scale) to the network; here scaling (default
-- true) divides the target by its context mean and multiplies the quantiles back, which
-- trains the same network on series of any magnitude. Forecast quantiles are sorted per
-- step so that they never cross.
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local tf = require("mx.gluonts.time_feature")
local T = require("mx.gluonts.transform")
local forecast = require("mx.gluonts.forecast")
local trainer = require("mx.gluonts.model.trainer")
local predictor = require("mx.gluonts.model.predictor")
local deepar = require("mx.gluonts.model.deepar")
local P = require("mx.gluonts.period")

local ipairs, error, type, sort = ipairs, error, type, table.sort

local M = {}

M.DEFAULT_QUANTILES = { 0.025, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.975 }

---------------------------------------------------------------- network
local Net = nn.HybridBlock:extend("MQCNNNetwork")
M.MQCNNNetwork = Net

function Net:__init(c)
  nn.HybridBlock.__init(self)
  self.c = c
  local emb = 0
  for i, card in ipairs(c.cardinality) do
    self["embed" .. i] = nn.Embedding(card, c.embedding_dimension[i])
    emb = emb + c.embedding_dimension[i]
  end
  self.static_dim = emb + 1 -- + log(scale)
  -- per step: target, observed, time features (+ age), static features
  local cin = 2 + c.num_feat_dynamic + self.static_dim
  self.convs = {}
  for i, ch in ipairs(c.channels_seq) do
    local k, d = c.kernel_size_seq[i], c.dilation_seq[i]
    local conv = nn.Conv1D(ch, k, { dilation = d, padding = d * (k - 1), activation = "relu",
      in_channels = cin })
    self["conv" .. i] = conv
    self.convs[i] = conv
    cin = ch
  end
  local H = c.prediction_length
  local din = cin + 1 + H * c.num_feat_dynamic
  self.decoder = nn.HybridSequential()
  for i, dim in ipairs(c.decoder_mlp_dim_seq) do
    self.decoder:add(nn.Dense(H * dim, { flatten = false, in_units = din,
      activation = i == #c.decoder_mlp_dim_seq and "softrelu" or "relu" }))
    din = H * dim
  end
  self.final_dim = c.decoder_mlp_dim_seq[#c.decoder_mlp_dim_seq]
  self.quantile_proj = nn.Dense(#c.quantiles, { flatten = false, in_units = self.final_dim })
end

-- the encoder's code at every context step (B, C, channels + 1) and the scale (B, 1)
function Net:encode(b)
  local c = self.c
  local x, obs = b.past_target, b.past_observed_values
  local B, C = x:shape()[1], x:shape()[2]
  local scale = c.scaling and deepar.mean_scale(x, obs) or nd.ones({ B, 1 })
  local target = nd.reshape(x / scale, { B, C, 1 })
  local parts = {}
  for i = 1, #c.cardinality do
    local codes = nd.slice_axis(b.feat_static_cat, { axis = 2, begin = i, ["end"] = i })
    parts[#parts + 1] = nd.reshape(self["embed" .. i](nd.reshape(codes, { -1 })),
      { B, c.embedding_dimension[i] })
  end
  parts[#parts + 1] = nd.log(scale)
  local static = nd.concat(parts, { dim = 2 })
  local sexp = nd.broadcast_to(nd.reshape(static, { B, 1, self.static_dim }),
    { shape = { B, C, self.static_dim } })
  local inp = nd.concat({ target, nd.reshape(obs, { B, C, 1 }), b.past_time_feat, sexp },
    { dim = 3 })
  local h = nd.swapaxes(inp, { dim1 = 2, dim2 = 3 }) -- NCW
  for _, conv in ipairs(self.convs) do
    -- symmetric padding d(k-1), the first C outputs: each sees only its past (causal)
    h = nd.slice_axis(conv(h), { axis = 3, begin = 1, ["end"] = C })
  end
  h = nd.swapaxes(h, { dim1 = 2, dim2 = 3 })
  return nd.concat({ h, target }, { dim = 3 }), scale
end

-- quantiles (B, T, H, Q) of the forks: code (B, T, D), future features (B, T, H*F)
function Net:decode(code, ffeat)
  local s = code:shape()
  local out = self.decoder(nd.concat({ code, ffeat }, { dim = 3 }))
  out = nd.reshape(out, { s[1], s[2], self.c.prediction_length, self.final_dim })
  return self.quantile_proj(out)
end

-- (B, C+H[, F]) -> the forks' windows (B, C, H[, F]): fork t holds steps t+1 .. t+H
local function forks(full, C, H)
  local cols = {}
  for h = 1, H do cols[h] = nd.slice_axis(full, { axis = 2, begin = h + 1, ["end"] = h + C }) end
  return nd.stack(cols, { axis = 3 })
end
M._forks = forks

local function quantile_loss(y, q, levels)
  local Q = #levels
  local total
  for k, p in ipairs(levels) do
    local yq = nd.reshape(nd.slice_axis(q, { axis = -1, begin = k, ["end"] = k }), y:shape())
    local d = y - yq
    local l = nd.maximum_scalar(d, { scalar = 0 }) * (2 * p)
      + nd.maximum_scalar(-d, { scalar = 0 }) * (2 * (1 - p))
    total = total and total + l or l
  end
  return total / Q
end
M._quantile_loss = quantile_loss

-- the quantile loss of every fork whose target step is observed (pads are not)
function Net:loss(b)
  local c = self.c
  local C, H = c.context_length, c.prediction_length
  local code, scale = self:encode(b)
  local B = code:shape()[1]
  local tfull = nd.concat({ b.past_time_feat, b.future_time_feat }, { dim = 2 })
  local ffeat = nd.reshape(forks(tfull, C, H), { B, C, -1 })
  local q = self:decode(code, ffeat)
  local y = forks(nd.concat({ b.past_target, b.future_target }, { dim = 2 }), C, H)
  local w = forks(nd.concat({ b.past_observed_values, b.future_observed_values }, { dim = 2 }), C, H)
  y = y / nd.reshape(scale, { B, 1, 1 })
  local l = quantile_loss(y, q, c.quantiles) * w
  return nd.sum(l) / nd.maximum_scalar(nd.sum(w), { scalar = 1 })
end

-- the last fork's quantiles, unscaled: (B, H, Q)
function Net:forecast(b)
  local c = self.c
  local code, scale = self:encode(b)
  local B, C = code:shape()[1], code:shape()[2]
  local last = nd.slice_axis(code, { axis = 2, begin = C, ["end"] = C })
  local ffeat = nd.reshape(b.future_time_feat, { B, 1, -1 })
  local q = nd.reshape(self:decode(last, ffeat), { B, c.prediction_length, #c.quantiles })
  return q * nd.reshape(scale, { B, 1, 1 })
end

---------------------------------------------------------------- estimator
local FIELDS_TRAIN = { { "feat_static_cat", "static" }, { "past_time_feat", "rows" },
  { "past_target", "series" }, { "past_observed_values", "series" },
  { "future_time_feat", "rows" }, { "future_target", "series" },
  { "future_observed_values", "series" } }
local FIELDS_PRED = { { "feat_static_cat", "static" }, { "past_time_feat", "rows" },
  { "past_target", "series" }, { "past_observed_values", "series" },
  { "future_time_feat", "rows" } }

local function int_list(name, v, n, level)
  if type(v) ~= "table" or #v == 0 or (n and #v ~= n) then
    error(string.format("MQCNNEstimator: %s must be a list of %s positive integers", name,
      n and tostring(n) or "one or more"), level + 1)
  end
  for _, x in ipairs(v) do
    if type(x) ~= "number" or x < 1 or x % 1 ~= 0 then
      error("MQCNNEstimator: " .. name .. " must hold positive integers, got " .. tostring(x),
        level + 1)
    end
  end
  return v
end

local function config(o)
  if type(o) ~= "table" or not o.freq or not o.prediction_length then
    error("MQCNNEstimator: freq and prediction_length are required", 3)
  end
  local f = P.freq(o.freq, 3)
  local c = trainer.options(o)
  c.freq = f.name
  c.context_length = o.context_length or 4 * o.prediction_length
  c.channels_seq = int_list("channels_seq", o.channels_seq or { 30, 30, 30 }, nil, 3)
  local n = #c.channels_seq
  c.dilation_seq = int_list("dilation_seq", o.dilation_seq or { 1, 3, 9 }, n, 3)
  c.kernel_size_seq = int_list("kernel_size_seq", o.kernel_size_seq or { 7, 3, 3 }, n, 3)
  c.decoder_mlp_dim_seq = int_list("decoder_mlp_dim_seq", o.decoder_mlp_dim_seq or { 30 }, nil, 3)
  local qs = o.quantiles or M.DEFAULT_QUANTILES
  if type(qs) ~= "table" or #qs == 0 then
    error("MQCNNEstimator: quantiles must be a list of levels in (0, 1)", 3)
  end
  c.quantiles = {}
  for i, q in ipairs(qs) do
    if type(q) ~= "number" or q <= 0 or q >= 1 then
      error("MQCNNEstimator: quantile levels must be in (0, 1), got " .. tostring(q), 3)
    end
    c.quantiles[i] = q
  end
  sort(c.quantiles)
  c.num_feat_static_cat = o.num_feat_static_cat or 0
  c.cardinality, c.embedding_dimension = deepar.static_cat(o)
  c.num_feat_dynamic_real = 0
  c.time_features = {}
  for i, feat in ipairs(o.time_features or tf.time_features_from_frequency_str(f)) do
    c.time_features[i] = feat.name
  end
  c.num_feat_dynamic = 1 + #c.time_features -- + age
  c.scaling = o.scaling ~= false
  return c
end
M._config = config

local function splitter(c, mode)
  return T.InstanceSplitter { instance_sampler = mode == "training"
    and T.ExpectedNumInstanceSampler { num_instances = 1, min_future = c.prediction_length }
    or T.TestSplitSampler(), past_length = c.context_length, future_length = c.prediction_length,
    time_series_fields = { "time_feat", "observed_values" }, dummy_value = 0 }
end

local Estimator = {}
Estimator.__index = Estimator
M.MQCNNEstimator = setmetatable(Estimator, { __call = function(cls, o)
  return setmetatable({ c = config(o) }, cls)
end })

local Predictor
Predictor, M.MQCNNPredictor = predictor.class("MQCNNPredictor")

function Estimator:train(ds)
  local c = self.c
  local net, history, times = trainer.train(c, ds, { net = function() return Net(c) end,
    transformation = deepar.transformation(c), splitter = splitter(c, "training"),
    fields = FIELDS_TRAIN, title = "MQCNN" })
  local p = M.MQCNNPredictor(net, c)
  p.history, p.epoch_times = history, times
  return p
end

-- predict(ds) -> a list of QuantileForecasts (num_samples is ignored: there are none)
function Predictor:predict(ds)
  local c = self.c
  local keys = {}
  for i, q in ipairs(c.quantiles) do keys[i] = tostring(q) end
  local out = {}
  predictor.each_batch(c, ds, deepar.transformation(c), splitter(c, "test"), FIELDS_PRED, function(g)
    local q = self.net:forecast(g.batch):totable() -- (B, H, Q)
    for k, inst in ipairs(g.instances) do
      local arrays = {}
      for j = 1, #c.quantiles do arrays[j] = {} end
      for t, row in ipairs(q[k]) do
        sort(row)
        for j = 1, #row do arrays[j][t] = row[j] end
      end
      out[#out + 1] = forecast.QuantileForecast(arrays, inst.forecast_start, keys,
        { item_id = inst.item_id })
    end
  end)
  return out
end

function M._load(dir, t)
  return M.MQCNNPredictor(predictor.load_net(dir, Net, t), t)
end

return M
