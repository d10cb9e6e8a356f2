-- examples/gluonts_forecast.lua — probabilistic forecasting with mx.gluonts on a real
-- series: DeepAR against seasonal naive in a rolling backtest, a forecast plot with its
-- 50% and 90% intervals, the predictor saved and loaded back.
--
--   ./tools/setup.sh --data                   # the data sets (R's, statsmodels', pmdarima's)
--   bin/mx examples/gluonts_forecast.lua      # AirPassengers, 30 epochs (~2 min on 2 threads)
--   bin/mx examples/gluonts_forecast.lua --dataset co2 --epochs 5 --plot /tmp/co2.svg
--
-- Options: --dataset NAME (airpassengers; mx.gluonts.repository.names()), --epochs N (30),
--   --threads N, --seed N (1), --plot PATH (docs/results/gluonts_forecast.svg),
--   --save DIR (a directory for the predictor; default none)
local mx = require("mx")
local gts = require("mx.gluonts")

local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
local opts = cli.parse(arg, { usage = "usage: gluonts_forecast.lua [--dataset NAME] [--epochs N] "
    .. "[--threads N] [--seed N] [--plot PATH] [--save DIR]",
  defaults = { dataset = "airpassengers", epochs = 30, seed = 1,
    plot = "docs/results/gluonts_forecast.svg" },
  numeric = { epochs = true, threads = true, seed = true },
  string = { dataset = true, plot = true, save = true } })
if opts.threads then mx.engine.set_num_threads(opts.threads) end

if not gts.repository.available(opts.dataset) then
  io.stderr:write("data set ", opts.dataset, " is not prepared: run ./tools/setup.sh --data\n")
  os.exit(2)
end
local ds, meta = gts.repository.get_dataset(opts.dataset)
local h, w = meta.prediction_length, meta.windows
local train, template = gts.split(ds, { offset = -h * w })
local test = template:generate_instances { prediction_length = h, windows = w }
print(string.format("%s: %d series, freq %s, horizon %d, %d rolling test windows",
  opts.dataset, ds:len(), meta.freq, h, w))

local naive = gts.SeasonalNaivePredictor { freq = meta.freq, prediction_length = h }
local sn = gts.evaluation.backtest(test, naive)

-- the progress bar is the estimator's (mx.progress): loss and learning rate per epoch
local cat = ds:len() > 1
local predictor = gts.DeepAREstimator { freq = meta.freq, prediction_length = h,
  epochs = opts.epochs, seed = opts.seed, num_feat_static_cat = cat and 1 or 0,
  cardinality = cat and meta.cardinality or nil }:train(train)
mx.random.seed(opts.seed)
local agg, _, fcs, tss = gts.evaluation.backtest(test, predictor)

print(string.format("%-16s %10s %8s %8s", "", "mean wQL", "MASE", "ND"))
print(string.format("%-16s %10.4f %8.3f %8.4f", "seasonal naive", sn.mean_wQuantileLoss, sn.MASE, sn.ND))
print(string.format("%-16s %10.4f %8.3f %8.4f", "DeepAR", agg.mean_wQuantileLoss, agg.MASE, agg.ND))
gts.plot.plot_forecast(opts.plot, tss[w], fcs[w], { title = string.format(
  "%s: DeepAR, last window (mean wQL %.3f; seasonal naive %.3f)", opts.dataset,
  agg.mean_wQuantileLoss, sn.mean_wQuantileLoss) })
print("plot: " .. opts.plot)
if opts.save then
  predictor:serialize(opts.save)
  local back = gts.load_predictor(opts.save)
  print("saved to " .. opts.save .. " and loaded back (" .. back.freq .. ", horizon "
    .. back.prediction_length .. ")")
end
