-- mx.gluonts.evaluation — GluonTS's Evaluator and make_evaluation_predictions.
--
--   local forecasts, tss = evaluation.make_evaluation_predictions { dataset = test,
--     predictor = predictor, num_samples = 100 }
--   local agg, items = evaluation.Evaluator { quantiles = {0.1, 0.5, 0.9} }(tss, forecasts)
--   agg.MASE, agg.mean_wQuantileLoss, agg["wQuantileLoss[0.5]"], items[1].sMAPE
--
-- Per series (GluonTS's get_metrics_per_ts; NaN targets are masked out): MSE of the mean
-- forecast, abs_error, MASE, MAPE and sMAPE of the median, abs_target_sum/mean,
-- seasonal_error (the in-sample seasonal naive MAE, seasonality from the frequency unless
-- given; 1 when the history is not longer than it), ND, MSIS (alpha), QuantileLoss[q] and
-- Coverage[q]. Aggregates (GluonTS's aggregate_no_nan: NaNs skipped, infs kept): means of
-- MSE, abs_target_mean, seasonal_error, MASE, MAPE, sMAPE, MSIS and the coverages; sums of
-- abs_error, abs_target_sum and the quantile losses; then RMSE = sqrt(MSE), NRMSE =
-- RMSE / abs_target_mean, ND = abs_error / abs_target_sum, wQuantileLoss[q] =
-- QuantileLoss[q] / abs_target_sum, mean_wQuantileLoss (the CRPS estimate),
-- mean_absolute_QuantileLoss and MAE_Coverage. Quantile keys print as GluonTS's ("0.1").
local P = require("mx.gluonts.period")
local tf = require("mx.gluonts.time_feature")
local dataset = require("mx.gluonts.dataset")

local abs, sqrt, ipairs, error, type = math.abs, math.sqrt, ipairs, error, type

local M = {}

local function qkey(q)
  local s = string.format("%.10g", q)
  if not s:find("%.") then s = s .. ".0" end
  return s
end
M._qkey = qkey

local DEFAULT_Q = { 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9 }

local Evaluator = {}
Evaluator.__index = Evaluator
M.Evaluator = setmetatable(Evaluator, { __call = function(c, opts) return c.new(opts) end })

function Evaluator.new(opts)
  opts = opts or {}
  return setmetatable({ quantiles = opts.quantiles or DEFAULT_Q, seasonality = opts.seasonality,
    alpha = opts.alpha or 0.05 }, Evaluator)
end

local function isnan(v) return v ~= v end

-- the masked mean of |a - b| over the unmasked (non-NaN target) points
local function seasonal_error(past, m)
  local f = m < #past and m or 1
  local s, n = 0, 0
  for t = f + 1, #past do
    local a, b = past[t], past[t - f]
    if not isnan(a) and not isnan(b) then s, n = s + abs(a - b), n + 1 end
  end
  return n > 0 and s / n or 0 / 0
end

function Evaluator:metrics_per_ts(ts, fc)
  local start, h = fc.start_date, fc.prediction_length
  local off = P.diff(start, ts.start) -- values before the forecast
  if off < 0 or off + h > #ts.target then
    error(string.format("Evaluator: the forecast (%s, %d steps) is outside its series (%s, %d "
      .. "values)", P.tostring(start), h, P.tostring(ts.start), #ts.target), 3)
  end
  local y, past = {}, {}
  for t = 1, h do y[t] = ts.target[off + t] end
  for t = 1, off do past[t] = ts.target[t] end
  local mean, median = fc:mean(), fc:quantile(0.5)
  local m = self.seasonality or tf.get_seasonality(start.freq)
  local se = seasonal_error(past, m)
  local n, sq, ae, ats, ape, sape = 0, 0, 0, 0, 0, 0
  for t = 1, h do
    if not isnan(y[t]) then
      n = n + 1
      sq = sq + (y[t] - mean[t]) ^ 2
      local e = abs(y[t] - median[t])
      ae = ae + e
      ats = ats + abs(y[t])
      ape = ape + e / abs(y[t])
      sape = sape + e / (abs(y[t]) + abs(median[t]))
    end
  end
  local r = {
    item_id = fc.item_id, forecast_start = P.tostring(start),
    MSE = sq / n, abs_error = ae, abs_target_sum = ats, abs_target_mean = ats / n,
    seasonal_error = se, MASE = (ae / n) / se, MAPE = ape / n, sMAPE = 2 * sape / n,
    num_masked_target_values = h - n,
  }
  r.ND = ae / ats
  local a = self.alpha
  local lo, hi = fc:quantile(a / 2), fc:quantile(1 - a / 2)
  local ms = 0
  for t = 1, h do
    if not isnan(y[t]) then
      local v = hi[t] - lo[t]
      if y[t] < lo[t] then v = v + 2 / a * (lo[t] - y[t]) end
      if y[t] > hi[t] then v = v + 2 / a * (y[t] - hi[t]) end
      ms = ms + v
    end
  end
  r.MSIS = (ms / n) / se
  for _, q in ipairs(self.quantiles) do
    local fq = fc:quantile(q)
    local ql, cov = 0, 0
    for t = 1, h do
      if not isnan(y[t]) then
        local le = y[t] <= fq[t] and 1 or 0
        ql = ql + abs((fq[t] - y[t]) * (le - q))
        cov = cov + le
      end
    end
    r["QuantileLoss[" .. qkey(q) .. "]"] = 2 * ql
    r["Coverage[" .. qkey(q) .. "]"] = cov / n
  end
  return r
end

local function agg(items, key, how)
  local s, n = 0, 0
  for _, r in ipairs(items) do
    local v = r[key]
    if v ~= nil and not isnan(v) then s, n = s + v, n + 1 end
  end
  if n == 0 then return 0 / 0 end
  return how == "sum" and s or s / n
end

function Evaluator:aggregate(items)
  local t = {}
  for k, how in pairs { MSE = "mean", abs_error = "sum", abs_target_sum = "sum",
    abs_target_mean = "mean", seasonal_error = "mean", MASE = "mean", MAPE = "mean",
    sMAPE = "mean", MSIS = "mean", num_masked_target_values = "sum" } do
    t[k] = agg(items, k, how)
  end
  for _, q in ipairs(self.quantiles) do
    local k = qkey(q)
    t["QuantileLoss[" .. k .. "]"] = agg(items, "QuantileLoss[" .. k .. "]", "sum")
    t["Coverage[" .. k .. "]"] = agg(items, "Coverage[" .. k .. "]", "mean")
  end
  t.RMSE = sqrt(t.MSE)
  t.NRMSE = t.RMSE / t.abs_target_mean
  t.ND = t.abs_error / t.abs_target_sum
  local wq, aq, cov = 0, 0, 0
  for _, q in ipairs(self.quantiles) do
    local k = qkey(q)
    local w = t["QuantileLoss[" .. k .. "]"] / t.abs_target_sum
    t["wQuantileLoss[" .. k .. "]"] = w
    wq, aq = wq + w, aq + t["QuantileLoss[" .. k .. "]"]
    cov = cov + abs(t["Coverage[" .. k .. "]"] - q)
  end
  local nq = #self.quantiles
  t.mean_wQuantileLoss, t.mean_absolute_QuantileLoss, t.MAE_Coverage = wq / nq, aq / nq, cov / nq
  t.OWA = 0 / 0
  return t
end

-- evaluator(tss, forecasts) -> aggregate metrics, per-series metrics (lists in order)
function Evaluator:__call(tss, forecasts)
  if type(tss) ~= "table" or type(forecasts) ~= "table" then
    error("Evaluator: expected the list of series and the list of forecasts", 2)
  end
  if tss.entries then tss = tss.entries end
  if #tss ~= #forecasts then
    error(string.format("Evaluator: %d series but %d forecasts", #tss, #forecasts), 2)
  end
  local items = {}
  for i, ts in ipairs(tss) do items[i] = self:metrics_per_ts(ts, forecasts[i]) end
  return self:aggregate(items), items
end

-- make_evaluation_predictions{dataset=, predictor=, num_samples=100}: forecasts of each
-- series' last prediction_length values from the values before them, and the series
-- themselves (GluonTS's backtest helper)
function M.make_evaluation_predictions(opts)
  local ds, pred = opts.dataset, opts.predictor
  local entries, freq = dataset._as_list(ds)
  local h = pred.prediction_length
  local inputs = {}
  for i, e in ipairs(entries) do
    if #e.target <= h then
      error(string.format("make_evaluation_predictions: series %d has %d values, not more than "
        .. "prediction_length %d", i, #e.target, h), 2)
    end
    inputs[i] = dataset._cut(e, 1, #e.target - h)
  end
  local fcs = pred:predict(dataset._wrap(inputs, freq), { num_samples = opts.num_samples })
  return fcs, entries
end

-- backtest(test_data, predictor, evaluator): forecasts for a TestData (split + windows),
-- their metrics; the series for the evaluator are input .. label
function M.backtest(test, predictor, evaluator, opts)
  local fcs = predictor:predict(test.input, opts)
  local tss = {}
  for i, inp in ipairs(test.input.entries) do
    local lab = test.label.entries[i]
    local full = {}
    for _, v in ipairs(inp.target) do full[#full + 1] = v end
    for _, v in ipairs(lab.target) do full[#full + 1] = v end
    tss[i] = { start = inp.start, target = full, item_id = inp.item_id }
  end
  local a, items = (evaluator or M.Evaluator())(tss, fcs)
  return a, items, fcs, tss
end

return M
