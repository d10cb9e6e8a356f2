-- bench/gluonts_backtest.lua — mx.gluonts's DeepAR (MQ-CNN, Transformer with --models) and
-- SeasonalNaive on the real data sets
-- (mx.gluonts.repository, prepared by tools/gluonts_data.sh): per data set the last
-- windows x prediction_length values are held out and forecast in rolling windows (the
-- splits, horizons, epochs and batches of tools/gluonts_reference.py, GluonTS's side); the
-- Evaluator's mean wQL, MASE, ND and RMSE, the training seconds per epoch, and a forecast
-- plot per data set (docs/results/gluonts_<name>.svg). Results: --out, by default
-- docs/results/gluonts_backtest_s<seed>.json (what bench/gluonts_seeds_table.lua reads).
--
--   bin/mx bench/gluonts_backtest.lua --epochs 20 --threads 1 [--datasets airpassengers,co2]
--     [--models deepar,mqcnn,transformer]   (the first model's forecasts are plotted)
--     [--init xavier|torch]   (the networks' initialisation, model/trainer.lua; default each
--     estimator's own: DeepAR "torch", MQ-CNN and Transformer "xavier")
local mx = require("mx")
local gts = require("mx.gluonts")
local repo = gts.repository
local cjson = require("cjson")

local opts = { epochs = 20, threads = 1, seed = 1, plots = true, workers = 0, models = "deepar" }
local i = 1
while i <= #arg do
  local k, v = arg[i]:match("^%-%-([%w_-]+)$"), arg[i + 1]
  if k == "no-plots" or k == "no_plots" then opts.plots = false i = i + 1
  else
    if k == nil or v == nil then error("usage: gluonts_backtest.lua [--epochs N] [--threads N] "
      .. "[--datasets a,b] [--models deepar,mqcnn,transformer] [--seed N] [--workers N] "
      .. "[--init xavier|torch] [--out PATH] [--no-plots]") end
    opts[k] = tonumber(v) or v
    i = i + 2
  end
end
mx.engine.set_num_threads(opts.threads)
opts.out = opts.out or string.format("docs/results/gluonts_backtest_s%d.json", opts.seed)

local names = repo.names()
if opts.datasets then
  names = {}
  for n in tostring(opts.datasets):gmatch("[^,]+") do names[#names + 1] = n end
end
local ESTIMATORS = { deepar = gts.DeepAREstimator, mqcnn = gts.MQCNNEstimator,
  transformer = gts.TransformerEstimator, simple_feedforward = gts.SimpleFeedForwardEstimator }
local LABEL = { deepar = "DeepAR", mqcnn = "MQ-CNN", transformer = "Transformer",
  simple_feedforward = "SimpleFeedForward" }
local models = {}
for m in tostring(opts.models):gmatch("[^,]+") do
  if not ESTIMATORS[m] then error("gluonts_backtest: unknown model '" .. m .. "'") end
  models[#models + 1] = m
end
local res = {}
for _, name in ipairs(names) do
  if not repo.available(name) then
    io.stderr:write("skip ", name, ": not prepared (tools/gluonts_data.sh)\n")
  else
    local ds, meta = repo.get_dataset(name)
    local h, w = meta.prediction_length, meta.windows
    local train, tmpl = gts.split(ds, { offset = -h * w })
    local test = tmpl:generate_instances { prediction_length = h, windows = w, distance = h }
    local function pick(a)
      return { mean_wQuantileLoss = a.mean_wQuantileLoss, MASE = a.MASE, ND = a.ND, RMSE = a.RMSE }
    end
    local sn = gts.SeasonalNaivePredictor { freq = meta.freq, prediction_length = h }
    local sn_agg = gts.evaluation.backtest(test, sn)
    local cat = ds:len() > 1
    res[name] = { freq = meta.freq, prediction_length = h, windows = w, seasonal_naive = pick(sn_agg),
      epochs = opts.epochs, threads = opts.threads }
    local agg, fcs, tss
    for _, model in ipairs(models) do
      local est = ESTIMATORS[model] { freq = meta.freq, prediction_length = h, epochs = opts.epochs,
        seed = opts.seed, num_feat_static_cat = cat and 1 or 0,
        cardinality = cat and meta.cardinality or nil, num_workers = opts.workers, init = opts.init,
        quiet = os.getenv("QUIET") ~= nil }
      local t0 = require("mx.progress").now()
      local pred = est:train(train)
      local train_s = require("mx.progress").now() - t0
      mx.random.seed(opts.seed)
      local a, _, f, t = gts.evaluation.backtest(test, pred, nil, { num_samples = 100 })
      if model == models[1] then agg, fcs, tss = a, f, t end
      local times = {}
      for k, v in ipairs(pred.epoch_times) do times[k] = v end
      table.sort(times)
      local r = pick(a)
      r.train_s, r.epoch_s = train_s, times[math.floor((#times + 1) / 2)]
      local cpu = {}
      for k, v in ipairs(pred.epoch_times.cpu or {}) do cpu[k] = v end
      table.sort(cpu)
      r.epoch_cpu_s = cpu[math.floor((#cpu + 1) / 2)] -- the process's CPU seconds
      r.train_loss = pred.history -- the epochs' mean training losses
      res[name][model] = r
      if model == "deepar" then
        res[name].train_s, res[name].epoch_s, res[name].epoch_cpu_s = train_s, r.epoch_s, r.epoch_cpu_s
      end
    end
    print(name, cjson.encode(res[name]))
    if opts.plots then
      local first = w -- the first series' last window (windows are per series, in order)
      gts.plot.plot_forecast("docs/results/gluonts_" .. name .. ".svg", tss[first], fcs[first], {
        title = string.format("%s: %s, last %d-step window (mean wQL %.3f, seasonal naive %.3f)",
          name, LABEL[models[1]], h, agg.mean_wQuantileLoss, sn_agg.mean_wQuantileLoss),
        history = math.min(#tss[first].target, 4 * h) })
    end
  end
end
require("mx.core.file").write_atomic("gluonts_backtest", opts.out, cjson.encode(res), 1)
