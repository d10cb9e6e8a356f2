-- mx.gluonts.forecast — forecasts as GluonTS gives them.
--
--   f.samples            num_samples x prediction_length (a Lua array of arrays)
--   f:mean()  f:median()  f:quantile(0.9)   arrays of prediction_length numbers
--   f.start_date (a period)  f:index() (the periods)  f.item_id  f.prediction_length
--
-- SampleForecast's quantile is GluonTS's: the sorted samples' element round((n - 1) q)
-- (NumPy's round, halves to even). QuantileForecast holds quantile rows (MQ-CNN's output);
-- its quantile(q) interpolates linearly between the levels it has, its mean is the median.
local P = require("mx.gluonts.period")

local floor, sort, type, error, tostring = math.floor, table.sort, type, error, tostring

local M = {}

local function round_half_even(x)
  local r = floor(x + 0.5)
  if r - x == 0.5 and r % 2 == 1 then r = r - 1 end
  return r
end
M._round_half_even = round_half_even

local function parse_q(q)
  if type(q) == "string" then q = tonumber(q) end
  if type(q) ~= "number" or q < 0 or q > 1 then
    error("forecast:quantile: q must be a number in [0, 1], got " .. tostring(q), 3)
  end
  return q
end

local function index(self)
  local out = {}
  for t = 1, self.prediction_length do out[t] = P.add(self.start_date, t - 1) end
  return out
end

---------------------------------------------------------------- SampleForecast
local SampleForecast = {}
SampleForecast.__index = SampleForecast
M.SampleForecast = setmetatable(SampleForecast, { __call = function(c, ...) return c.new(...) end })

-- SampleForecast(samples, start_date, {item_id=, info=}): samples an NDArray (n, T) or a
-- list of n arrays of T numbers
function SampleForecast.new(samples, start_date, opts)
  if type(samples) ~= "table" then
    error("SampleForecast: samples must be a list of arrays or an NDArray", 2)
  end
  if samples.totable then samples = samples:totable() end
  if #samples == 0 or type(samples[1]) ~= "table" then
    error("SampleForecast: samples must be num_samples x prediction_length", 2)
  end
  opts = opts or {}
  return setmetatable({ samples = samples, start_date = start_date, item_id = opts.item_id,
    info = opts.info, num_samples = #samples, prediction_length = #samples[1] }, SampleForecast)
end
SampleForecast.index = index
function SampleForecast:_sorted(t)
  self._cols = self._cols or {}
  local c = self._cols[t]
  if not c then
    c = {}
    for s = 1, self.num_samples do c[s] = self.samples[s][t] end
    sort(c)
    self._cols[t] = c
  end
  return c
end
function SampleForecast:quantile(q)
  q = parse_q(q)
  local k = round_half_even((self.num_samples - 1) * q) + 1
  local out = {}
  for t = 1, self.prediction_length do out[t] = self:_sorted(t)[k] end
  return out
end
function SampleForecast:median() return self:quantile(0.5) end
function SampleForecast:mean()
  if not self._mean then
    local m = {}
    for t = 1, self.prediction_length do
      local s = 0
      for i = 1, self.num_samples do s = s + self.samples[i][t] end
      m[t] = s / self.num_samples
    end
    self._mean = m
  end
  return self._mean
end
function SampleForecast:__tostring()
  return string.format("SampleForecast(%d samples x %d steps from %s, item %s)", self.num_samples,
    self.prediction_length, P.tostring(self.start_date), tostring(self.item_id))
end

---------------------------------------------------------------- QuantileForecast
local QuantileForecast = {}
QuantileForecast.__index = QuantileForecast
M.QuantileForecast = setmetatable(QuantileForecast, { __call = function(c, ...) return c.new(...) end })

-- QuantileForecast(arrays, start_date, keys, {item_id=}): arrays[k] the forecast of
-- quantile level keys[k] (numbers or strings such as "0.5")
function QuantileForecast.new(arrays, start_date, keys, opts)
  opts = opts or {}
  local levels, order = {}, {}
  for k, key in ipairs(keys) do levels[k] = tonumber(key) order[k] = k end
  sort(order, function(a, b) return levels[a] < levels[b] end)
  local lv, arr = {}, {}
  for i, k in ipairs(order) do lv[i], arr[i] = levels[k], arrays[k] end
  return setmetatable({ levels = lv, arrays = arr, start_date = start_date,
    item_id = opts.item_id, prediction_length = #arrays[1], forecast_keys = keys },
    QuantileForecast)
end
QuantileForecast.index = index
function QuantileForecast:quantile(q)
  q = parse_q(q)
  local lv, arr = self.levels, self.arrays
  local n = #lv
  local out = {}
  for t = 1, self.prediction_length do
    if q <= lv[1] then
      out[t] = arr[1][t]
    elseif q >= lv[n] then
      out[t] = arr[n][t]
    else
      local j = 1
      while lv[j + 1] < q do j = j + 1 end
      local w = (q - lv[j]) / (lv[j + 1] - lv[j])
      out[t] = arr[j][t] + w * (arr[j + 1][t] - arr[j][t])
    end
  end
  return out
end
function QuantileForecast:median() return self:quantile(0.5) end
function QuantileForecast:mean() return self:quantile(0.5) end

return M
