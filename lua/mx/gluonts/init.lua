-- mx.gluonts — GluonTS in Lua: probabilistic time-series forecasting.
--
--   local gts = require("mx.gluonts")
--   local ds = gts.ListDataset({ { start = "1949-01", target = values } }, "M")
--   local train, template = gts.split(ds, { offset = -12 })
--   local predictor = gts.DeepAREstimator { freq = "M", prediction_length = 12 }:train(train)
--   local agg = gts.evaluation.backtest(template:generate_instances { prediction_length = 12 },
--     predictor)
--   print(agg.MASE, agg.mean_wQuantileLoss)
--
-- Modules under GluonTS's names: gts.dataset (ListDataset, split, FieldName),
-- gts.time_feature, gts.transform, gts.distribution (the output heads), gts.forecast,
-- gts.evaluation (Evaluator, make_evaluation_predictions, backtest), gts.model.* (the
-- estimators and predictors), gts.loader, gts.period, gts.repository (the data sets
-- tools/setup.sh prepares), gts.plot. docs/gluonts.md.
local lazy = require("mx.core.lazy")

local gts = {}
local MODS = {
  dataset = "mx.gluonts.dataset", time_feature = "mx.gluonts.time_feature",
  transform = "mx.gluonts.transform", distribution = "mx.gluonts.distribution",
  forecast = "mx.gluonts.forecast", evaluation = "mx.gluonts.evaluation",
  loader = "mx.gluonts.loader", period = "mx.gluonts.period",
  repository = "mx.gluonts.repository", plot = "mx.gluonts.plot",
  ListDataset = { "mx.gluonts.dataset", "ListDataset" }, split = { "mx.gluonts.dataset", "split" },
  Evaluator = { "mx.gluonts.evaluation", "Evaluator" },
  make_evaluation_predictions = { "mx.gluonts.evaluation", "make_evaluation_predictions" },
  SeasonalNaivePredictor = { "mx.gluonts.model.seasonal_naive", "SeasonalNaivePredictor" },
  DeepAREstimator = { "mx.gluonts.model.deepar", "DeepAREstimator" },
  SimpleFeedForwardEstimator = { "mx.gluonts.model.simple_feedforward", "SimpleFeedForwardEstimator" },
  load_predictor = { "mx.gluonts.model.predictor", "load" },
}
gts.model = lazy({}, { deepar = "mx.gluonts.model.deepar",
  seasonal_naive = "mx.gluonts.model.seasonal_naive",
  simple_feedforward = "mx.gluonts.model.simple_feedforward",
  predictor = "mx.gluonts.model.predictor", trainer = "mx.gluonts.model.trainer" })
return lazy(gts, MODS)
