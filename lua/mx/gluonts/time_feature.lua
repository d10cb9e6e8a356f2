-- mx.gluonts.time_feature — GluonTS's time features, lags and seasonalities per frequency.
--
--   tf.hour_of_day, tf.day_of_week, ... (functions of a period, values in [-0.5, 0.5])
--   tf.time_features_from_frequency_str("H") -> {hour_of_day, day_of_week, day_of_month,
--     day_of_year}
--   tf.get_lags_for_frequency("M") -> {1, 2, ..., 7, 11, 12, 13, 23, 24, 25, 35, 36, 37}
--   tf.get_seasonality("H") -> 24
-- Each feature is a table {name=, fn=} callable as feature(period).
local P = require("mx.gluonts.period")

local floor = math.floor

local M = {}

local function feature(name, fn)
  local f = setmetatable({ name = name, fn = fn }, { __call = function(self, p) return self.fn(p) end })
  M[name] = f
  return f
end
local function norm(v, num) return v / (num - 1) - 0.5 end

feature("second_of_minute", function(p) return norm(P.fields(p).second, 60) end)
feature("minute_of_hour", function(p) return norm(P.fields(p).minute, 60) end)
feature("hour_of_day", function(p) return norm(P.fields(p).hour, 24) end)
feature("day_of_week", function(p) return norm(P.fields(p).dayofweek, 7) end)
feature("day_of_month", function(p) return norm(P.fields(p).day - 1, 31) end)
feature("day_of_year", function(p) return norm(P.fields(p).dayofyear - 1, 366) end)
feature("month_of_year", function(p) return norm(P.fields(p).month - 1, 12) end)
feature("week_of_year", function(p) return norm(P.fields(p).week - 1, 53) end)

local BY_BASE = {
  Y = {}, Q = { "month_of_year" }, M = { "month_of_year" },
  W = { "day_of_month", "week_of_year" },
  D = { "day_of_week", "day_of_month", "day_of_year" },
  H = { "hour_of_day", "day_of_week", "day_of_month", "day_of_year" },
  min = { "minute_of_hour", "hour_of_day", "day_of_week", "day_of_month", "day_of_year" },
  S = { "second_of_minute", "minute_of_hour", "hour_of_day", "day_of_week", "day_of_month",
    "day_of_year" },
}
function M.time_features_from_frequency_str(freq)
  local f = P.freq(freq, 2)
  local out = {}
  for i, n in ipairs(BY_BASE[f.base]) do out[i] = M[n] end
  return out
end

-- the features of periods start, start+1, ..., start+len-1: a list of len rows of #feats
function M.compute(feats, start, len)
  local rows = {}
  for t = 1, len do
    local p = P.add(start, t - 1)
    local r = {}
    for j, f in ipairs(feats) do r[j] = f(p) end
    rows[t] = r
  end
  return rows
end

-- age: log10(2 + t), t = 0, 1, ... (AddAgeFeature with log_scale)
function M.age(t) return math.log10(2 + t) end

---------------------------------------------------------------- lags
local function around(mid, delta, into)
  for v = mid - delta, mid + delta do into[#into + 1] = v end
end
local function cycles(unit, multiple, count, delta, into)
  for k = 1, count do around(floor(k * unit / multiple), delta, into) end
end
local function lags_second(n, into) cycles(60, n, 3, 2, into) end
local function lags_minute(n, into) cycles(60, n, 3, 2, into) end
local function lags_hour(n, into) cycles(24, n, 7, 1, into) end
local function lags_day(n, into, week, month)
  cycles(week or 7, n, 4, 1, into)
  around(floor((month or 30) / n), 1, into)
end
local function lags_week(n, into)
  cycles(52, n, 3, 1, into)
  into[#into + 1] = floor(4 / n)
  into[#into + 1] = floor(8 / n)
  into[#into + 1] = floor(12 / n)
end
local function lags_month(n, into) cycles(12, n, 3, 1, into) end

-- get_lags_for_frequency(freq, {lag_ub=1200, num_lags=, num_default_lags=7})
function M.get_lags_for_frequency(freq, opts)
  opts = opts or {}
  local f = P.freq(freq, 2)
  local n, b = f.n, f.base
  local raw = {}
  if b == "Q" then
    lags_month(3 * n, raw)
  elseif b == "M" then
    lags_month(n, raw)
  elseif b == "W" then
    lags_week(n, raw)
  elseif b == "D" then
    lags_day(n, raw)
    lags_week(n / 7, raw)
  elseif b == "H" then
    lags_hour(n, raw)
    lags_day(n / 24, raw)
    lags_week(n / (24 * 7), raw)
  elseif b == "min" then
    lags_minute(n, raw)
    lags_hour(n / 60, raw)
    lags_day(n / (60 * 24), raw)
    lags_week(n / (60 * 24 * 7), raw)
  elseif b == "S" then
    lags_second(n, raw)
    lags_minute(n / 60, raw)
    lags_hour(n / 3600, raw)
  end
  local ub, nd = opts.lag_ub or 1200, opts.num_default_lags or 7
  local seen, extra = {}, {}
  for _, l in ipairs(raw) do
    l = l >= 0 and floor(l) or -floor(-l) -- Python's int(): toward zero
    if l > 7 and l <= ub and not seen[l] then
      seen[l] = true
      extra[#extra + 1] = l
    end
  end
  table.sort(extra)
  local out = {}
  for i = 1, nd do out[i] = i end
  for _, l in ipairs(extra) do out[#out + 1] = l end
  if opts.num_lags then
    for i = #out, opts.num_lags + 1, -1 do out[i] = nil end
  end
  return out
end

local SEASON = { S = 3600, min = 1440, H = 24, D = 1, W = 1, M = 12, Q = 4, Y = 1 }
-- get_seasonality(freq): the base seasonality divided by the multiple (1 if it does not
-- divide)
function M.get_seasonality(freq)
  local f = P.freq(freq, 2)
  local s = SEASON[f.base] or 1
  if s % f.n ~= 0 then return 1 end
  return s / f.n
end

return M
