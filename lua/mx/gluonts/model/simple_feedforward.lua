-- mx.gluonts.model.simple_feedforward — GluonTS's SimpleFeedForwardEstimator (torch): an
-- MLP from the mean-scaled context window to the arguments of prediction_length
-- distributions (one per step), trained on their negative log-likelihood.
--
--   local est = gts.SimpleFeedForwardEstimator { freq = "M", prediction_length = 12,
--     hidden_dimensions = {20, 20}, epochs = 50 }
--
-- Options: prediction_length, context_length (10 x prediction_length, GluonTS's),
-- hidden_dimensions {20, 20}, distr_output StudentTOutput(), batch_norm false, scaling
-- true, num_parallel_samples 100, and the trainer's (mx.gluonts.model.trainer).
local mx = require("mx")
local nd, nn = mx.nd, mx.gluon.nn
local T = require("mx.gluonts.transform")
local dist = require("mx.gluonts.distribution")
local trainer = require("mx.gluonts.model.trainer")
local predictor = require("mx.gluonts.model.predictor")
local deepar = require("mx.gluonts.model.deepar")
local P = require("mx.gluonts.period")

local M = {}

local Net = nn.HybridBlock:extend("SimpleFeedForwardNetwork")
M.SimpleFeedForwardNetwork = Net
function Net:__init(c)
  nn.HybridBlock.__init(self)
  self.c = c
  self.mlp = nn.HybridSequential()
  local inp = c.context_length
  for _, h in ipairs(c.hidden_dimensions) do
    self.mlp:add(nn.Dense(h, { activation = "relu", in_units = inp }))
    if c.batch_norm then self.mlp:add(nn.BatchNorm { in_channels = h }) end
    inp = h
  end
  local last = c.hidden_dimensions[#c.hidden_dimensions]
  self.out = nn.Dense(c.prediction_length * last, { in_units = inp })
  self.proj = c.distr_output:get_args_proj(last)
end
-- args of the H distributions and the scale
function Net:args(b)
  local c = self.c
  local obs = b.past_observed_values
  local scale = c.scaling and deepar.mean_scale(b.past_target, obs)
    or nd.ones({ b.past_target:shape()[1], 1 })
  local h = self.out(self.mlp(b.past_target / scale))
  local B = h:shape()[1]
  h = nd.reshape(h, { B, c.prediction_length, -1 })
  return self.proj(h), scale
end
function Net:loss(b)
  local args, scale = self:args(b)
  return nd.mean(self.c.distr_output:loss(b.future_target, args, nil, scale) * b.future_observed_values)
end

local FIELDS_TRAIN = { { "past_target", "series" }, { "past_observed_values", "series" },
  { "future_target", "series" }, { "future_observed_values", "series" } }
local FIELDS_PRED = { { "past_target", "series" }, { "past_observed_values", "series" } }

local function config(o)
  if type(o) ~= "table" or not o.prediction_length then
    error("SimpleFeedForwardEstimator: prediction_length is required", 3)
  end
  local c = trainer.options(o)
  c.freq = o.freq and P.freq(o.freq, 3).name
  c.context_length = o.context_length or 10 * o.prediction_length
  c.hidden_dimensions = o.hidden_dimensions or { 20, 20 }
  c.distr_output = o.distr_output or dist.StudentTOutput()
  c.distr_name = c.distr_output.__name
  c.scaling = o.scaling ~= false
  c.batch_norm = o.batch_norm or false
  c.num_parallel_samples = o.num_parallel_samples or 100
  return c
end

local function transformation(c)
  return T.Chain { T.AddObservedValuesIndicator { target_field = "target",
    output_field = "observed_values",
    imputation_method = T.DummyValueImputation(c.distr_output.value_in_support) } }
end
local function splitter(c, mode)
  return T.InstanceSplitter { instance_sampler = mode == "training"
    and T.ExpectedNumInstanceSampler { num_instances = 1, min_future = c.prediction_length }
    or T.TestSplitSampler(), past_length = c.context_length, future_length = c.prediction_length,
    time_series_fields = { "observed_values" }, dummy_value = c.distr_output.value_in_support }
end

local Estimator = {}
Estimator.__index = Estimator
M.SimpleFeedForwardEstimator = setmetatable(Estimator, { __call = function(cls, o)
  return setmetatable({ c = config(o) }, cls)
end })

local Predictor
Predictor, M.SimpleFeedForwardPredictor = predictor.class("SimpleFeedForwardPredictor",
  deepar.saved_config)

function Estimator:train(ds)
  local c = self.c
  local net, history, times = trainer.train(c, ds, { net = function() return Net(c) end,
    transformation = transformation(c), splitter = splitter(c, "training"), fields = FIELDS_TRAIN,
    title = "SimpleFeedForward" })
  local p = M.SimpleFeedForwardPredictor(net, c)
  p.history, p.epoch_times = history, times
  return p
end

function Predictor:predict(ds, opts)
  local c = self.c
  local S = (opts and opts.num_samples) or c.num_parallel_samples
  local out = {}
  predictor.each_batch(c, ds, transformation(c), splitter(c, "test"), FIELDS_PRED, function(g)
    local args, scale = self.net:args(g.batch)
    local s = c.distr_output:distribution(args, nil, scale):sample_n(S) -- (S, B, H)
    predictor.add_samples(out, g, nd.swapaxes(s, { dim1 = 1, dim2 = 2 }):totable())
  end)
  return out
end

function M._load(dir, t)
  t.distr_output = dist.by_name(t.distr_name)
  return M.SimpleFeedForwardPredictor(predictor.load_net(dir, Net, t), t)
end

return M
