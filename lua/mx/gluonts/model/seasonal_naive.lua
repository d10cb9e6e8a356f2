-- mx.gluonts.model.seasonal_naive — GluonTS's SeasonalNaivePredictor: the forecast for
-- step t is the value season_length steps before it (the last season repeated), missing
-- values first filled with the last observed one (GluonTS's LastValueImputation); a series
-- shorter than one season gets the mean of its observed values. Point forecasts (one sample
-- path), so every quantile is that path.
--
--   local p = gts.SeasonalNaivePredictor { freq = "M", prediction_length = 12 }
--   local fcs = p:predict(ds)
local tf = require("mx.gluonts.time_feature")
local P = require("mx.gluonts.period")
local forecast = require("mx.gluonts.forecast")
local predictor = require("mx.gluonts.model.predictor")
local dataset = require("mx.gluonts.dataset")

local M = {}

local Predictor = {}
Predictor.__index = Predictor

function M.SeasonalNaivePredictor(o)
  if type(o) ~= "table" or not o.freq or not o.prediction_length then
    error("SeasonalNaivePredictor: freq and prediction_length are required", 2)
  end
  local f = P.freq(o.freq, 2)
  return setmetatable({ freq = f.name, prediction_length = o.prediction_length,
    season_length = o.season_length or tf.get_seasonality(f) }, Predictor)
end

function Predictor:predict(ds)
  local entries = dataset._as_list(ds)
  local H, m = self.prediction_length, self.season_length
  local out = {}
  for i, e in ipairs(entries) do
    local y, n = {}, #e.target
    local last, sum, cnt = nil, 0, 0
    for k = 1, n do
      local v = e.target[k]
      if v == v then last, sum, cnt = v, sum + v, cnt + 1 end
      y[k] = last
    end
    local first = nil
    for k = 1, n do if y[k] then first = y[k] break end end
    for k = 1, n do if not y[k] then y[k] = first or 0 / 0 end end
    local path = {}
    if n >= m then
      for t = 1, H do path[t] = y[n - m + 1 + (t - 1) % m] end
    else
      for t = 1, H do path[t] = cnt > 0 and sum / cnt or 0 / 0 end
    end
    out[i] = forecast.SampleForecast({ path }, P.add(e.start, n), { item_id = e.item_id })
  end
  return out
end

function Predictor:serialize(dir)
  predictor.write(dir, "SeasonalNaivePredictor", { freq = self.freq,
    prediction_length = self.prediction_length, season_length = self.season_length }, nil, 2)
end
function M._load(_, t) return M.SeasonalNaivePredictor(t) end

return M
