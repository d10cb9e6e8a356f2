-- spec/gluonts_model_spec.lua — mx.gluonts's models, small and fast: SeasonalNaive's
-- forecasts, a tiny DeepAR that learns a synthetic seasonal series and a real one
-- (statsmodels' elec_equip when the data set is prepared), SimpleFeedForward, the
-- distribution heads' scaling, and predictors that serialise and load back to the same
-- forecasts. The full backtests are bench/gluonts_backtest.lua (docs/gluonts.md).
local mx = require("mx")
local nd = mx.nd
local gts = require("mx.gluonts")
local P = require("mx.gluonts.period")

-- a seasonal series with a trend and Gaussian noise (fixed seed): seasonal naive's error is
-- the difference of two noises, a model's can approach one
local function seasonal(n, noise)
  math.randomseed(17)
  local y = {}
  for t = 1, n do
    local g = math.sqrt(-2 * math.log(1 - math.random())) * math.cos(2 * math.pi * math.random())
    y[t] = 50 + 0.2 * t + 12 * math.sin(2 * math.pi * t / 12) + noise * g
  end
  return y
end

describe("mx.gluonts models", function()
  it("SeasonalNaivePredictor repeats the last season (last value filling gaps)", function()
    local y = {}
    for t = 1, 30 do y[t] = t end
    y[25] = 0 / 0
    local ds = gts.ListDataset({ { start = "2000-01", target = y } }, "M")
    local f = gts.SeasonalNaivePredictor { freq = "M", prediction_length = 14 }:predict(ds)[1]
    assert.same({ 19, 20, 21, 22, 23, 24, 24, 26, 27, 28, 29, 30, 19, 20 }, f:mean())
    assert.equal("2002-07", P.tostring(f.start_date))
    local short = gts.ListDataset({ { start = "2000-01", target = { 1, 2, 6 } } }, "M")
    assert.same({ 3, 3 }, gts.SeasonalNaivePredictor { freq = "M", prediction_length = 2 }
      :predict(short)[1]:mean())
  end)

  it("distribution heads apply the scale (StudentT loc/scale, NegBin mean, Poisson rate)", function()
    local D = gts.distribution
    local raw = { nd.array { { 0.3 } }, nd.array { { 1.5 } }, nd.array { { -0.2 } } }
    local st = D.StudentTOutput()
    local a = st:domain_map(raw)
    local d = st:distribution(a, nil, nd.array { 10 })
    assert.near(15, d:mean():item(), 1e-5)
    local df = a[1]:item()
    assert.near(2 + math.log(1 + math.exp(0.3)), df, 1e-6)
    local nb = D.NegativeBinomialOutput()
    local b = nb:domain_map({ raw[1], raw[3] })
    local m1 = nb:distribution(b):mean():item()
    assert.near(4 * m1, nb:distribution(b, nil, nd.array { 4 }):mean():item(), 1e-4)
    local po = D.PoissonOutput()
    local r = po:domain_map({ raw[2] })
    assert.near(3 * r[1]:item(), po:distribution(r, nil, nd.array { 3 }):mean():item(), 1e-5)
  end)

  it("a tiny DeepAR learns a seasonal series and beats seasonal naive's wQL; it serialises", function()
    local ds = gts.ListDataset({ { start = "1990-01", target = seasonal(180, 4) } }, "M")
    local train, tmpl = gts.split(ds, { offset = -24 })
    local test = tmpl:generate_instances { prediction_length = 12, windows = 2 }
    local est = gts.DeepAREstimator { freq = "M", prediction_length = 12, hidden_size = 16,
      num_layers = 1, epochs = 20, num_batches_per_epoch = 16, batch_size = 16, seed = 4,
      learning_rate = 1e-2, quiet = true }
    local pred = est:train(train)
    local h = pred.history
    assert.is_true(h[#h] < h[1] - 0.5, "loss " .. h[1] .. " -> " .. h[#h])
    mx.random.seed(9)
    local agg = gts.evaluation.backtest(test, pred, nil, { num_samples = 50 })
    local sn = gts.evaluation.backtest(test,
      gts.SeasonalNaivePredictor { freq = "M", prediction_length = 12 })
    assert.is_true(agg.mean_wQuantileLoss < sn.mean_wQuantileLoss,
      agg.mean_wQuantileLoss .. " vs seasonal naive " .. sn.mean_wQuantileLoss)
    local dir = os.tmpname()
    os.remove(dir)
    pred:serialize(dir)
    local back = gts.load_predictor(dir)
    mx.random.seed(9)
    local f1 = pred:predict(test.input, { num_samples = 20 })[1]
    mx.random.seed(9)
    local f2 = back:predict(test.input, { num_samples = 20 })[1]
    assert.same(f1.samples, f2.samples)
    assert.equal(P.tostring(f1.start_date), P.tostring(f2.start_date))
    os.execute("rm -rf '" .. dir .. "'")
  end)

  local repo = gts.repository
  local have = repo.available("elec_equip")
  ;(have and it or pending)("a tiny DeepAR trains on a real series (elec_equip), sane forecasts", function()
    local ds, meta = repo.get_dataset("elec_equip")
    local train, tmpl = gts.split(ds, { offset = -12 })
    local test = tmpl:generate_instances { prediction_length = 12 }
    local pred = gts.DeepAREstimator { freq = meta.freq, prediction_length = 12, hidden_size = 16,
      num_layers = 1, epochs = 8, num_batches_per_epoch = 10, seed = 2, learning_rate = 1e-2,
      quiet = true }:train(train)
    assert.is_true(pred.history[#pred.history] < pred.history[1])
    local agg = gts.evaluation.backtest(test, pred, nil, { num_samples = 50 })
    assert.is_true(agg.ND < 0.25, "ND " .. agg.ND)
    assert.is_true(agg["Coverage[0.9]"] >= 0.5)
  end)

  it("SimpleFeedForward trains, predicts samples of the horizon and reloads", function()
    local ds = gts.ListDataset({ { start = "1990-01", target = seasonal(150, 2) } }, "M")
    local train, tmpl = gts.split(ds, { offset = -12 })
    local test = tmpl:generate_instances { prediction_length = 6, windows = 2 }
    local pred = gts.SimpleFeedForwardEstimator { prediction_length = 6, context_length = 24,
      epochs = 6, num_batches_per_epoch = 10, seed = 1, learning_rate = 1e-2, quiet = true }:train(train)
    local f = pred:predict(test.input, { num_samples = 30 })
    assert.equal(2, #f)
    assert.equal(30, f[1].num_samples)
    assert.equal(6, f[1].prediction_length)
    local dir = os.tmpname()
    os.remove(dir)
    pred:serialize(dir)
    assert.equal(6, gts.load_predictor(dir).prediction_length)
    os.execute("rm -rf '" .. dir .. "'")
    assert.has_error(function() gts.load_predictor(dir) end)
  end)
end)
