-- mx.gluonts.transform — GluonTS's transformation chains over dataset entries (Lua tables;
-- see mx.gluonts.dataset), and its instance samplers.
--
--   local t = transform.Chain {
--     transform.AddObservedValuesIndicator { target_field = "target",
--       output_field = "observed_values" },
--     transform.AddTimeFeatures { start_field = "start", target_field = "target",
--       output_field = "time_feat", time_features = feats, pred_length = 12 },
--     transform.AddAgeFeature { target_field = "target", output_field = "feat_dynamic_age",
--       pred_length = 12, log_scale = true },
--     transform.VstackFeatures { output_field = "time_feat",
--       input_fields = { "time_feat", "feat_dynamic_age" } },
--     transform.InstanceSplitter { instance_sampler = transform.ExpectedNumInstanceSampler {
--       num_instances = 1, min_future = 12 }, past_length = 48, future_length = 12,
--       time_series_fields = { "time_feat", "observed_values" } },
--   }
--   local out = t:apply(entries, true)        -- is_train: a list of entries (instances)
--
-- Entries are copied shallowly, never changed in place. Time-series fields other than the
-- target are lists of rows (features x time), as GluonTS's arrays. Split points count the
-- values before the split (past = values 1..i, future = i+1..i+future_length).
local tf = require("mx.gluonts.time_feature")
local P = require("mx.gluonts.period")

local type, error, ipairs, pairs, random, floor = type, error, ipairs, pairs, math.random, math.floor

local M = {}

local function class(name, fields)
  local c = {}
  c.__index = c
  c.__name = name
  setmetatable(c, { __call = function(cls, opts)
    local o = setmetatable({}, cls)
    opts = opts or {}
    for k, v in pairs(fields or {}) do o[k] = v end
    for k, v in pairs(opts) do
      if fields and fields[k] == nil and not (cls._extra and cls._extra[k]) then
        error(name .. ": unknown option '" .. tostring(k) .. "'", 2)
      end
      o[k] = v
    end
    if o._init then o:_init() end
    return o
  end })
  return c
end
M._class = class

local function copy(e)
  local c = {}
  for k, v in pairs(e) do c[k] = v end
  return c
end

-- a map transformation applies :map(entry, is_train) -> entry; a flat-map one
-- :flatmap(entry, is_train) -> list of entries
local function apply(t, entries, is_train)
  local out = {}
  if t.flatmap then
    for _, e in ipairs(entries) do
      for _, x in ipairs(t:flatmap(e, is_train)) do out[#out + 1] = x end
    end
  else
    for i, e in ipairs(entries) do out[i] = t:map(e, is_train) end
  end
  return out
end

---------------------------------------------------------------- Chain
local Chain = {}
Chain.__index = Chain
M.Chain = setmetatable(Chain, { __call = function(_, list)
  local flat = {}
  for _, t in ipairs(list) do
    if getmetatable(t) == Chain then
      for _, u in ipairs(t.list) do flat[#flat + 1] = u end
    else
      flat[#flat + 1] = t
    end
  end
  return setmetatable({ list = flat }, Chain)
end })
function Chain:apply(entries, is_train)
  for _, t in ipairs(self.list) do entries = apply(t, entries, is_train) end
  return entries
end
-- the chain without its last (flat-map) step, and that step
function Chain:__add(other) return M.Chain { self, other } end

---------------------------------------------------------------- field transforms
M.SetField = class("SetField", { output_field = false, value = false })
function M.SetField:map(e)
  local c = copy(e)
  c[self.output_field] = self.value
  return c
end

M.RemoveFields = class("RemoveFields", { field_names = {} })
function M.RemoveFields:map(e)
  local c = copy(e)
  for _, f in ipairs(self.field_names) do c[f] = nil end
  return c
end

-- AsNumpyArray{field=, expected_ndim=, dtype=}: checks the field's rank (lists of numbers
-- are rank 1, lists of rows rank 2)
M.AsNumpyArray = class("AsNumpyArray", { field = false, expected_ndim = 1, dtype = "float32" })
function M.AsNumpyArray:map(e)
  local v = e[self.field]
  if v == nil then error("AsNumpyArray: entry has no field '" .. self.field .. "'", 0) end
  local nd = type(v[1]) == "table" and 2 or 1
  if nd ~= self.expected_ndim then
    error(string.format("AsNumpyArray: field '%s' has %d dims, expected %d", self.field, nd,
      self.expected_ndim), 0)
  end
  return e
end

-- DummyValueImputation: NaNs become `value`
function M.DummyValueImputation(value) return { kind = "dummy", value = value or 0 } end
-- LastValueImputation: a NaN takes the last observed value (the first ones the first)
function M.LastValueImputation() return { kind = "last" } end

M.AddObservedValuesIndicator = class("AddObservedValuesIndicator", { target_field = "target",
  output_field = "observed_values", imputation_method = false })
function M.AddObservedValuesIndicator:map(e)
  local x = e[self.target_field]
  local obs, y = {}, {}
  local imp = self.imputation_method or M.DummyValueImputation(0)
  local last
  if imp.kind == "last" then
    for i = 1, #x do if x[i] == x[i] then last = x[i] break end end
  end
  local any = false
  for i = 1, #x do
    local v = x[i]
    if v ~= v then
      obs[i], any = 0, true
      y[i] = imp.kind == "last" and (last or 0) or imp.value
    else
      obs[i], y[i] = 1, v
      last = v
    end
  end
  local c = copy(e)
  c[self.target_field] = any and y or x
  c[self.output_field] = obs
  return c
end

-- AddTimeFeatures: rows of the time features over the target's span (+ pred_length when
-- not training)
M.AddTimeFeatures = class("AddTimeFeatures", { start_field = "start", target_field = "target",
  output_field = "time_feat", time_features = {}, pred_length = 0 })
function M.AddTimeFeatures:map(e, is_train)
  local c = copy(e)
  if #self.time_features == 0 then
    c[self.output_field] = nil
    return c
  end
  local len = #e[self.target_field] + (is_train and 0 or self.pred_length)
  local rows = {}
  for j = 1, #self.time_features do rows[j] = {} end
  local start = e[self.start_field]
  for t = 1, len do
    local p = P.add(start, t - 1)
    for j, f in ipairs(self.time_features) do rows[j][t] = f(p) end
  end
  c[self.output_field] = rows
  return c
end

M.AddAgeFeature = class("AddAgeFeature", { target_field = "target",
  output_field = "feat_dynamic_age", pred_length = 0, log_scale = true })
function M.AddAgeFeature:map(e, is_train)
  local len = #e[self.target_field] + (is_train and 0 or self.pred_length)
  local r = {}
  for t = 1, len do r[t] = self.log_scale and tf.age(t - 1) or (t - 1) end
  local c = copy(e)
  c[self.output_field] = { r }
  return c
end

-- VstackFeatures: the rows of input_fields stacked (missing fields skipped)
M.VstackFeatures = class("VstackFeatures", { output_field = false, input_fields = {},
  drop_inputs = true })
function M.VstackFeatures:map(e)
  local rows = {}
  for _, f in ipairs(self.input_fields) do
    local v = e[f]
    if v then for _, r in ipairs(v) do rows[#rows + 1] = r end end
  end
  local c = copy(e)
  if self.drop_inputs then
    for _, f in ipairs(self.input_fields) do if f ~= self.output_field then c[f] = nil end end
  end
  c[self.output_field] = rows
  return c
end

---------------------------------------------------------------- samplers
-- A sampler is called with the series length and returns the split points (past lengths)
-- to cut there, each in [min_past, length - min_future].
local function bounds(s, n) return s.min_past or 0, n - (s.min_future or 0) end

M.ExpectedNumInstanceSampler = class("ExpectedNumInstanceSampler", { num_instances = 1,
  min_past = 0, min_future = 0, min_instances = 0, total_length = 0, n = 0 })
function M.ExpectedNumInstanceSampler:__call(len)
  local a, b = bounds(self, len)
  local w = b - a + 1
  if w <= 0 then return {} end
  self.n = self.n + 1
  self.total_length = self.total_length + w
  local p = self.num_instances / (self.total_length / self.n)
  local out = {}
  for i = a, b do if random() < p then out[#out + 1] = i end end
  for _ = #out + 1, self.min_instances do table.insert(out, 1, a + floor(random() * w)) end
  return out
end
M.NumInstanceSampler = class("NumInstanceSampler", { N = 1, min_past = 0, min_future = 0 })
function M.NumInstanceSampler:__call(len)
  local a, b = bounds(self, len)
  local out = {}
  if a > b then return out end
  for k = 1, self.N do out[k] = a + floor(random() * (b - a + 1)) end
  return out
end
M.UniformSplitSampler = class("UniformSplitSampler", { p = 0.5, min_past = 0, min_future = 0 })
function M.UniformSplitSampler:__call(len)
  local a, b = bounds(self, len)
  local out = {}
  for i = a, b do if random() < self.p then out[#out + 1] = i end end
  return out
end
M.PredictionSplitSampler = class("PredictionSplitSampler", { min_past = 0, min_future = 0,
  allow_empty_interval = false })
function M.PredictionSplitSampler:__call(len)
  local a, b = bounds(self, len)
  if a > b then
    if not self.allow_empty_interval then
      error("PredictionSplitSampler: a series of length " .. len .. " is shorter than min_past "
        .. "+ min_future", 0)
    end
    return {}
  end
  return { b }
end
function M.TestSplitSampler(opts)
  return M.PredictionSplitSampler { min_past = opts and opts.min_past or 0, min_future = 0 }
end
function M.ValidationSplitSampler(opts)
  opts = opts or {}
  return M.PredictionSplitSampler { min_past = opts.min_past or 0, min_future = opts.min_future or 0,
    allow_empty_interval = true }
end

---------------------------------------------------------------- InstanceSplitter
M.InstanceSplitter = class("InstanceSplitter", { target_field = "target", is_pad_field = "is_pad",
  start_field = "start", forecast_start_field = "forecast_start", instance_sampler = false,
  past_length = false, future_length = false, lead_time = 0, time_series_fields = {},
  dummy_value = 0 })

-- the window [i - len + 1, i] of array a (1-based values), left-padded with pad
local function past_window(a, i, len, pad)
  local out = {}
  local first = i - len + 1
  for k = 1, len do
    local j = first + k - 1
    out[k] = j >= 1 and a[j] or pad
  end
  return out
end
local function future_window(a, i, len)
  local out = {}
  for k = 1, len do out[k] = a[i + k] end
  return out
end
M._past_window, M._future_window = past_window, future_window

-- one instance of entry e at split point i
function M.InstanceSplitter:split_at(e, i, is_train)
  local L, H = self.past_length, self.future_length
  local c = {}
  for k, v in pairs(e) do c[k] = v end
  local target = e[self.target_field]
  c["past_" .. self.target_field] = past_window(target, i, L, self.dummy_value)
  if is_train then c["future_" .. self.target_field] = future_window(target, i + self.lead_time, H) end
  c[self.target_field] = nil
  for _, f in ipairs(self.time_series_fields) do
    local v = e[f]
    if v then
      if type(v[1]) == "table" then
        local pr, fr = {}, {}
        for r, row in ipairs(v) do
          pr[r] = past_window(row, i, L, 0)
          fr[r] = future_window(row, i + self.lead_time, H)
        end
        c["past_" .. f], c["future_" .. f] = pr, fr
      else
        c["past_" .. f] = past_window(v, i, L, 0)
        c["future_" .. f] = future_window(v, i + self.lead_time, H)
      end
      c[f] = nil
    end
  end
  local pad = {}
  for k = 1, L do pad[k] = (i - L + k) < 1 and 1 or 0 end
  c["past_" .. self.is_pad_field] = pad
  c[self.forecast_start_field] = P.add(e[self.start_field], i + self.lead_time)
  return c
end

function M.InstanceSplitter:flatmap(e, is_train)
  local len = #e[self.target_field]
  local pts = self.instance_sampler(is_train and len - self.lead_time or len)
  local out = {}
  for _, i in ipairs(pts) do out[#out + 1] = self:split_at(e, i, is_train) end
  return out
end

return M
