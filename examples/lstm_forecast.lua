-- examples/lstm_forecast.lua — a one-step-ahead LSTM forecaster on the yearly sunspot
-- numbers (1700-2008, Debian's python3-statsmodels dataset).
--
--   bin/mx examples/lstm_forecast.lua                  # ~1 minute on 2 threads
--   bin/mx examples/lstm_forecast.lua --epochs 5 --max-mase 100   # a smoke test
--
-- The model reads the previous --window years (default 22: two solar cycles) of the
-- series, sqrt-transformed and standardised on the training part, through an LSTM
-- (rnn.LSTM, hidden --hidden, layout NTC) and maps its last hidden state to next year's
-- value (nn.Dense(1)); L2 loss, Adam. The last --test years (default 40) are held out:
-- each is forecast one step ahead from the true values before it.
--
-- Score: MASE (Hyndman & Koehler 2006) with season m = 11 years (the solar cycle): the
-- forecast's mean absolute error on the held-out tail divided by the in-sample mean
-- absolute error of the seasonal-naive forecast y_t = y_{t-11} on the training part.
-- The script also prints the seasonal-naive forecast's own MAE on the tail and the
-- ratio of the two, and exits with status 1 when MASE >= --max-mase (default 1.0).
-- Curves (training loss; the tail's forecasts against the truth) go to --plot
-- (default docs/results/lstm_forecast.svg).
--
-- Options: --epochs N (150)  --hidden N (32)  --window N (22)  --test N (40)
--   --batch-size N (32)  --lr X (0.01)  --seed N (42)  --season N (11)
--   --max-mase X (1.0)  --csv PATH  --plot PATH  --threads N  --quiet
local mx = require("mx")
local gluon = mx.gluon
local nn, rnn = gluon.nn, gluon.rnn
local nd = mx.nd
local progress = require("mx.progress")

local USAGE = [==[
usage: lstm_forecast.lua [--epochs N] [--hidden N] [--window N] [--test N] [--batch-size N]
       [--lr X] [--seed N] [--season N] [--max-mase X] [--csv PATH] [--plot PATH]
       [--threads N] [--quiet]]==]

local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { epochs = 150, hidden = 32, window = 22, test = 40, batch_size = 32, lr = 0.01,
    seed = 42, season = 11, max_mase = 1.0,
    csv = "/usr/lib/python3/dist-packages/statsmodels/datasets/sunspots/sunspots.csv",
    plot = "docs/results/lstm_forecast.svg" },
  numeric = { epochs = true, hidden = true, window = true, test = true, batch_size = true,
    lr = true, seed = true, season = true, max_mase = true, threads = true },
  string = { csv = true, plot = true }, flags = { quiet = true } })
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)
local t_start = progress.now()

---------------------------------------------------------------- data
local f = io.open(opts.csv, "r")
if not f then
  io.stderr:write("cannot open ", opts.csv, " (Debian package python3-statsmodels)\n")
  os.exit(2)
end
local years, y = {}, {}
for line in f:lines() do
  local yr, v = line:match("^%s*\"?(%d+)%.?%d*\"?%s*,%s*\"?([%d%.]+)\"?")
  if yr then
    years[#years + 1] = tonumber(yr)
    y[#y + 1] = tonumber(v)
  end
end
f:close()
local n, W, m = #y, opts.window, opts.season
local n_train = n - opts.test
if n_train <= W + m then
  io.stderr:write("too few training years for window ", W, "\n")
  os.exit(2)
end

-- sqrt transform (the counts' variance grows with their level), standardised on the
-- training years only
local z = {}
local mean, sq = 0, 0
for i = 1, n do z[i] = math.sqrt(y[i]) end
for i = 1, n_train do mean = mean + z[i] end
mean = mean / n_train
for i = 1, n_train do sq = sq + (z[i] - mean) ^ 2 end
local sd = math.sqrt(sq / n_train)
for i = 1, n do z[i] = (z[i] - mean) / sd end
local function unscale(v)
  local s = v * sd + mean
  if s < 0 then s = 0 end
  return s * s
end

-- samples: the W values before year t -> year t; training targets are training years
local function window_at(t)
  local w = {}
  for k = 1, W do w[k] = { z[t - W + k - 1] } end
  return w
end
local train_x, train_y = {}, {}
for t = W + 1, n_train do
  train_x[#train_x + 1] = window_at(t)
  train_y[#train_y + 1] = { z[t] }
end
local test_x = {}
for t = n_train + 1, n do test_x[#test_x + 1] = window_at(t) end

---------------------------------------------------------------- model
local Forecaster = nn.HybridBlock:extend("Forecaster")
function Forecaster:__init(hidden)
  nn.HybridBlock.__init(self)
  self.lstm = rnn.LSTM(hidden, 1, { layout = "NTC", input_size = 1 })
  self.out = nn.Dense(1, { in_units = hidden })
end
function Forecaster:forward(x)
  local b = x:shape()[1]
  local _, states = self.lstm(x, self.lstm:begin_state(b))
  return self.out(nd.reshape(states[1], { b, -1 }))
end

local net = Forecaster(opts.hidden)
net:initialize(mx.init.Xavier())
local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr })
local loss_fn = gluon.loss.L2Loss()

print(string.format("sunspots %d-%d: %d training years (%d windows of %d), %d held out; "
  .. "LSTM(%d), Adam lr=%g, %d epochs", years[1], years[n], n_train, #train_x, W, opts.test,
  opts.hidden, opts.lr, opts.epochs))

local X, Y = nd.array(train_x), nd.array(train_y)
local ns = #train_x
local losses = {}
local bar = progress.Bar { total = opts.epochs, title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
for epoch = 1, opts.epochs do
  -- a random order each epoch
  local perm = {}
  for i = 1, ns do perm[i] = i end
  for i = ns, 2, -1 do
    local j = math.random(i)
    perm[i], perm[j] = perm[j], perm[i]
  end
  local sum = 0
  for s = 1, ns, opts.batch_size do
    local idx = {}
    for k = s, math.min(ns, s + opts.batch_size - 1) do idx[#idx + 1] = perm[k] end
    local ix = nd.array(idx, { dtype = "int64" })
    local xb, yb = nd.take(X, ix, { axis = 1 }), nd.take(Y, ix, { axis = 1 })
    local loss = mx.autograd.record(function() return loss_fn(net(xb), yb) end)
    loss:backward()
    trainer:step(#idx)
    sum = sum + loss:sum():item()
  end
  losses[epoch] = sum / ns
  bar:update(1, { { "loss", losses[epoch] } })
end
bar:finish { { "loss", losses[#losses] } }

---------------------------------------------------------------- score
local pred = net(nd.array(test_x)):totable()
local mae, mae_naive, scale = 0, 0, 0
local truth, fc, naive = {}, {}, {}
for i = 1, opts.test do
  local t = n_train + i
  fc[i] = unscale(pred[i][1])
  truth[i] = y[t]
  naive[i] = y[t - m]
  mae = mae + math.abs(fc[i] - y[t])
  mae_naive = mae_naive + math.abs(naive[i] - y[t])
end
mae, mae_naive = mae / opts.test, mae_naive / opts.test
for t = m + 1, n_train do scale = scale + math.abs(y[t] - y[t - m]) end
scale = scale / (n_train - m)
local mase = mae / scale

local xs = {}
for i = 1, opts.test do xs[i] = years[n_train + i] end
mx.viz.plot_curves(opts.plot, {
  title = string.format("LSTM one-step-ahead forecast of yearly sunspots (MASE %.3f, m=%d)",
    mase, m),
  panels = {
    { title = "training loss", xlabel = "epoch", ylabel = "L2 loss (standardised sqrt)",
      series = { { name = "train", values = losses } } },
    { title = "held-out years", xlabel = "year", ylabel = "sunspot number",
      series = { { name = "actual", values = truth, x = xs }, { name = "LSTM", values = fc, x = xs },
        { name = "seasonal naive (m=" .. m .. ")", values = naive, x = xs } } },
  } })

print(string.format("held-out %d-%d: LSTM MAE %.2f, seasonal-naive (m=%d) MAE %.2f (ratio %.3f); "
  .. "in-sample seasonal-naive MAE %.2f -> MASE %.3f (bound %g: %s)", years[n_train + 1],
  years[n], mae, m, mae_naive, mae / mae_naive, scale, mase, opts.max_mase,
  mase < opts.max_mase and "met" or "NOT met"))
print(string.format("total %.1fs; plot: %s", progress.now() - t_start, opts.plot))
if mase >= opts.max_mase then os.exit(1) end
