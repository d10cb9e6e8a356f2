-- bench/gluonts_backtest.lua — mx.gluonts's DeepAR and SeasonalNaive on the real data sets
-- (mx.gluonts.repository, prepared by tools/gluonts_data.sh): per data set the last
-- windows x prediction_length values are held out and forecast in rolling windows (the
-- splits, horizons, epochs and batches of tools/gluonts_reference.py, GluonTS's side); the
-- Evaluator's mean wQL, MASE, ND and RMSE, the training seconds per epoch, and a forecast
-- plot per data set (docs/results/gluonts_<name>.svg). Results: docs/results/gluonts_backtest.json.
--
--   bin/mx bench/gluonts_backtest.lua --epochs 20 --threads 1 [--datasets airpassengers,co2]
local mx = require("mx")
local gts = require("mx.gluonts")
local repo = gts.repository
local cjson = require("cjson")

local opts = { epochs = 20, threads = 1, seed = 1, out = "docs/results/gluonts_backtest.json",
  plots = true, workers = 0 }
local i = 1
while i <= #arg do
  local k, v = arg[i]:match("^%-%-([%w_]+)"), arg[i + 1]
  if k == "no-plots" or k == "no_plots" then opts.plots = false i = i + 1
  else
    if k == nil or v == nil then error("usage: gluonts_backtest.lua [--epochs N] [--threads N] "
      .. "[--datasets a,b] [--seed N] [--workers N] [--out PATH] [--no-plots]") end
    opts[k] = tonumber(v) or v
    i = i + 2
  end
end
mx.engine.set_num_threads(opts.threads)

local names = repo.names()
if opts.datasets then
  names = {}
  for n in tostring(opts.datasets):gmatch("[^,]+") do names[#names + 1] = n end
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
    local est = gts.DeepAREstimator { freq = meta.freq, prediction_length = h, epochs = opts.epochs,
      seed = opts.seed, num_feat_static_cat = cat and 1 or 0, cardinality = cat and meta.cardinality or nil,
      num_workers = opts.workers, quiet = os.getenv("QUIET") ~= nil }
    local t0 = require("mx.progress").now()
    local pred = est:train(train)
    local train_s = require("mx.progress").now() - t0
    mx.random.seed(opts.seed)
    local agg, _, fcs, tss = gts.evaluation.backtest(test, pred, nil, { num_samples = 100 })
    local times = {}
    for k, v in ipairs(pred.epoch_times) do times[k] = v end
    table.sort(times)
    res[name] = { freq = meta.freq, prediction_length = h, windows = w, seasonal_naive = pick(sn_agg),
      deepar = pick(agg), train_s = train_s, epoch_s = times[math.floor((#times + 1) / 2)],
      epochs = opts.epochs, threads = opts.threads }
    print(name, cjson.encode(res[name]))
    if opts.plots then
      local first = w -- the first series' last window (windows are per series, in order)
      gts.plot.plot_forecast("docs/results/gluonts_" .. name .. ".svg", tss[first], fcs[first], {
        title = string.format("%s: DeepAR, last %d-step window (mean wQL %.3f, seasonal naive %.3f)",
          name, h, agg.mean_wQuantileLoss, sn_agg.mean_wQuantileLoss),
        history = math.min(#tss[first].target, 4 * h) })
    end
  end
end
require("mx.core.file").write_atomic("gluonts_backtest", opts.out, cjson.encode(res), 1)
