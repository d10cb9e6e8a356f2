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

  it("init: 'torch' gives PyTorch's default bounds, 'xavier' zero biases, bad values an error", function()
    local trainer = require("mx.gluonts.model.trainer")
    local deepar = require("mx.gluonts.model.deepar")
    local c = gts.DeepAREstimator { freq = "M", prediction_length = 6, hidden_size = 16 }.c
    local function absmax(p) return nd.max(nd.abs(p:data())):item() end
    mx.random.seed(3)
    local net = deepar.DeepARNetwork(c)
    trainer.initialize(net, "torch")
    local H = 16
    for name, p in net:collect_params():items() do
      if name:match("^rnn%.") then
        local m = absmax(p)
        assert.is_true(m <= 1 / math.sqrt(H) and m > 0.8 / math.sqrt(H), name .. " " .. m)
      elseif name:match("^proj%.") then -- Dense(in 16): weight and bias U(+-1/sqrt(16))
        assert.is_true(absmax(p) <= 0.25 and absmax(p) > 0, name)
      end
    end
    assert.is_true(absmax(net:collect_params():get("rnn.l0_i2h_bias")) > 0) -- biases drawn too
    local xnet = deepar.DeepARNetwork(c)
    trainer.initialize(xnet, "xavier")
    assert.equals(0, absmax(xnet:collect_params():get("rnn.l0_i2h_bias")))
    local ok, err = pcall(trainer.initialize, xnet, "kaiming")
    assert.is_false(ok)
    assert.truthy(tostring(err):find("init must be 'xavier', 'torch' or an mx.init initializer",
      1, true), err)
  end)

  it("fit restores the epoch with the lowest mean loss (GluonTS-torch's best checkpoint)", function()
    local trainer = require("mx.gluonts.model.trainer")
    -- one batch per epoch; the target jumps away at epoch 3, so epoch 2's loss is the lowest
    local targets = { 0, 0, 100 }
    local function run(restore)
      mx.random.seed(5)
      local net = mx.gluon.nn.Dense(1, { in_units = 1, use_bias = false })
      net:initialize(mx.init.Constant(1))
      local epoch, seen = 0, {}
      local loader = { iter = function()
        local done = false
        epoch = epoch + 1
        return function()
          if done then return nil end
          done = true
          return epoch
        end
      end }
      local w = net:collect_params():get("weight")
      local hist = trainer.fit(net, loader, function(n, e)
        seen[e] = w:data():item()
        return nd.sum(nd.square(n(nd.array { { 1 } }) - targets[e]))
      end, { epochs = 3, learning_rate = 0.1, weight_decay = 0, patience = 10, quiet = true,
        restore_best = restore })
      return w:data():item(), seen, hist
    end
    local w, seen, hist = run(nil)
    assert.is_true(hist[2] < hist[1] and hist[2] < hist[3])
    -- the weights after epoch 2's step are what epoch 3 saw
    assert.near(seen[3], w, 1e-7)
    local last = run(false)
    assert.is_true(last > seen[3] + 0.05, "without restore the last step's weight " .. last)
    assert.equal("torch", gts.DeepAREstimator { freq = "M", prediction_length = 6 }.c.init)
    assert.equal("xavier", gts.DeepAREstimator { freq = "M", prediction_length = 6,
      init = "xavier" }.c.init)
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
  it("MQCNN's forks hold the next prediction_length steps of every context step", function()
    local mq = require("mx.gluonts.model.mqcnn")
    local f = mq._forks(nd.array { { 1, 2, 3, 4, 5, 6 } }, 4, 2):totable()
    assert.same({ { { 2, 3 }, { 3, 4 }, { 4, 5 }, { 5, 6 } } }, f)
    -- the quantile loss: 2 (q (y - yq)+ + (1 - q) (yq - y)+), averaged over the levels
    local y, q = nd.array { { 1, 4 } }, nd.array { { { 2, 3 }, { 2, 3 } } }
    local l = mq._quantile_loss(y, q, { 0.1, 0.9 }):totable()[1]
    assert.near((2 * 0.9 * 1 + 2 * 0.1 * 2) / 2, l[1], 1e-6)
    assert.near((2 * 0.1 * 2 + 2 * 0.9 * 1) / 2, l[2], 1e-6)
  end)

  it("MQCNN's encoder is causal: a step's code never sees later steps", function()
    local mq = require("mx.gluonts.model.mqcnn")
    local c = mq._config { freq = "M", prediction_length = 3, context_length = 12 }
    local net = mq.MQCNNNetwork(c)
    net:initialize(mx.init.Xavier())
    local F = c.num_feat_dynamic
    local function batch(last)
      local y = {}
      for t = 1, 12 do y[t] = 10 + t end
      y[12] = last
      return { past_target = nd.array { y }, past_observed_values = nd.ones({ 1, 12 }),
        past_time_feat = nd.zeros({ 1, 12, F }), feat_static_cat = nd.zeros({ 1, 1 }) }
    end
    -- scaling off: the scale would pass the last value to every step
    c.scaling = false
    local a = net:encode(batch(23)):totable()[1]
    local b = net:encode(batch(-500)):totable()[1]
    for t = 1, 11 do assert.same(a[t], b[t]) end
    assert.are_not.same(a[12], b[12])
  end)

  it("MQCNN trains on quantile loss, beats seasonal naive, forecasts ordered quantiles, reloads", function()
    local ds = gts.ListDataset({ { start = "1990-01", target = seasonal(180, 4) } }, "M")
    local train, tmpl = gts.split(ds, { offset = -24 })
    local test = tmpl:generate_instances { prediction_length = 12, windows = 2 }
    local pred = gts.MQCNNEstimator { freq = "M", prediction_length = 12, channels_seq = { 16, 16 },
      dilation_seq = { 1, 3 }, kernel_size_seq = { 3, 3 }, epochs = 12, num_batches_per_epoch = 16,
      batch_size = 16, seed = 3, learning_rate = 1e-2, quiet = true }:train(train)
    local h = pred.history
    assert.is_true(h[#h] < 0.5 * h[1], "loss " .. h[1] .. " -> " .. h[#h])
    local fs = pred:predict(test.input)
    assert.equal(2, #fs)
    assert.equal(12, fs[1].prediction_length)
    local lo, mid, hi = fs[1]:quantile(0.1), fs[1]:quantile(0.5), fs[1]:quantile(0.9)
    for t = 1, 12 do assert.is_true(lo[t] <= mid[t] and mid[t] <= hi[t]) end
    local agg = gts.evaluation.backtest(test, pred)
    local sn = gts.evaluation.backtest(test,
      gts.SeasonalNaivePredictor { freq = "M", prediction_length = 12 })
    assert.is_true(agg.mean_wQuantileLoss < sn.mean_wQuantileLoss,
      agg.mean_wQuantileLoss .. " vs seasonal naive " .. sn.mean_wQuantileLoss)
    local dir = os.tmpname()
    os.remove(dir)
    pred:serialize(dir)
    local back = gts.load_predictor(dir)
    assert.same(fs[2]:quantile(0.975), back:predict(test.input)[2]:quantile(0.975))
    os.execute("rm -rf '" .. dir .. "'")
    assert.has_error(function() gts.MQCNNEstimator { freq = "M", prediction_length = 4,
      dilation_seq = { 1, 2 } } end, "MQCNNEstimator: dilation_seq must be a list of 3 positive integers")
    assert.has_error(function() gts.MQCNNEstimator { freq = "M", prediction_length = 4,
      quantiles = { 0.5, 1 } } end, "MQCNNEstimator: quantile levels must be in (0, 1), got 1")
  end)

  it("the Transformer's decoder is causal: step t's arguments ignore targets from t on", function()
    local trm = require("mx.gluonts.model.transformer")
    local c = trm._config { freq = "M", prediction_length = 4, context_length = 6, model_dim = 8,
      num_heads = 2, lags_seq = { 1, 2 }, dropout_rate = 0 }
    local net = trm.TransformerNetwork(c)
    net:initialize(mx.init.Xavier())
    local L, F = c.past_length, c.num_feat_dynamic
    local b = { past_target = nd.random.uniform(1, 2, { 1, L }), past_observed_values = nd.ones({ 1, L }),
      past_time_feat = nd.zeros({ 1, L, F }), future_time_feat = nd.zeros({ 1, 4, F }),
      feat_static_cat = nd.zeros({ 1, 1 }), feat_static_real = nd.zeros({ 1, 1 }) }
    local function args(fut)
      local x = net:inputs(b, nd.array { fut })
      local mem = net:encode(nd.slice_axis(x, { axis = 2, begin = 1, ["end"] = 6 }))
      local y = net.dec_input(nd.slice_axis(x, { axis = 2, begin = 7, ["end"] = 10 }))
      y = net.dec1(y, y, require("mx.gluon.nn.transformer").causal_mask(4), mem)
      return net.proj(y)[2]:totable()[1]
    end
    local a, d = args { 1, 2, 3, 4 }, args { 1, 2, 30, 40 }
    -- step 3's lag 1 is target 2: steps 1-3 unchanged, step 4 sees target 3
    for t = 1, 3 do assert.near(a[t], d[t], 1e-6) end
    assert.is_true(math.abs(a[4] - d[4]) > 1e-6)
  end)

  it("a tiny Transformer learns a seasonal series, samples the horizon and reloads", function()
    local ds = gts.ListDataset({ { start = "1990-01", target = seasonal(180, 4) } }, "M")
    local train, tmpl = gts.split(ds, { offset = -24 })
    local test = tmpl:generate_instances { prediction_length = 12, windows = 2 }
    local pred = gts.TransformerEstimator { freq = "M", prediction_length = 12, model_dim = 16,
      num_heads = 4, epochs = 12, num_batches_per_epoch = 16, batch_size = 16, seed = 5,
      learning_rate = 1e-2, quiet = true }:train(train)
    local h = pred.history
    assert.is_true(h[#h] < h[1] - 0.5, "loss " .. h[1] .. " -> " .. h[#h])
    mx.random.seed(3)
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
    local f1 = pred:predict(test.input, { num_samples = 10 })[1]
    mx.random.seed(9)
    local f2 = back:predict(test.input, { num_samples = 10 })[1]
    assert.equal(10, f1.num_samples)
    assert.same(f1.samples, f2.samples)
    os.execute("rm -rf '" .. dir .. "'")
    assert.has_error(function() gts.TransformerEstimator { freq = "M", prediction_length = 4,
      model_dim = 30 } end, "TransformerEstimator: model_dim (30) must be divisible by num_heads (8)")
  end)
end)
