-- mx.gluonts.dataset — GluonTS's datasets: ListDataset, FieldName, split (train/test
-- splits with rolling windows) and the entries they hold.
--
--   local ds = dataset.ListDataset({ { start = "1949-01", target = {112, 118, ...},
--     feat_static_cat = {1}, item_id = "air" } }, "M")
--   ds:len()  ds:get(i)  for entry in ds:iter() do ... end
--   local train, template = dataset.split(ds, { offset = -36 })
--   local test = template:generate_instances { prediction_length = 12, windows = 3 }
--   for inp, label in test:iter() do ... end      -- input and label entries
--
-- An entry is a table: start (a period of the dataset's frequency, mx.gluonts.period),
-- target (a Lua array of numbers; NaN = missing), optional feat_static_cat (category codes
-- 0..cardinality-1: codes are data, as in GluonTS and Embedding), feat_static_real,
-- feat_dynamic_real (a list of arrays as long as the target, or longer for the future),
-- item_id. A target may be given as an NDArray (1-d); it becomes a Lua array.
local P = require("mx.gluonts.period")

local type, error, tostring, ipairs, pairs = type, error, tostring, ipairs, pairs

local M = {}

M.FieldName = {
  ITEM_ID = "item_id", START = "start", TARGET = "target",
  FEAT_STATIC_CAT = "feat_static_cat", FEAT_STATIC_REAL = "feat_static_real",
  FEAT_DYNAMIC_REAL = "feat_dynamic_real", FEAT_TIME = "time_feat", FEAT_AGE = "feat_dynamic_age",
  OBSERVED_VALUES = "observed_values", IS_PAD = "is_pad", FORECAST_START = "forecast_start",
}

local function as_array(v, what, level)
  if type(v) == "table" and getmetatable(v) == nil then return v end
  local ok, nd = pcall(require, "mx.nd")
  if ok and nd.is_tensor(v) then return v:tolist() end
  error("ListDataset: " .. what .. " must be a list of numbers or an NDArray, got " .. type(v),
    level + 1)
end

local function slice(a, i, j)
  local out = {}
  for k = i, j do out[#out + 1] = a[k] end
  return out
end
M._slice = slice

-- a shallow copy of an entry with target (and the dynamic features) cut to [i, j]
local function cut(entry, i, j)
  local e = {}
  for k, v in pairs(entry) do e[k] = v end
  e.target = slice(entry.target, i, j)
  if entry.feat_dynamic_real then
    local f = {}
    for r, row in ipairs(entry.feat_dynamic_real) do f[r] = slice(row, i, j) end
    e.feat_dynamic_real = f
  end
  e.start = P.add(entry.start, i - 1)
  return e
end
M._cut = cut

---------------------------------------------------------------- ListDataset
local ListDataset = {}
ListDataset.__index = ListDataset
M.ListDataset = setmetatable(ListDataset, { __call = function(c, ...) return c.new(...) end })

-- ListDataset(entries, freq[, {one_dim_target=true}])
function ListDataset.new(entries, freq)
  local f = P.freq(freq, 3)
  if type(entries) ~= "table" then error("ListDataset: entries must be a list of tables", 2) end
  local list = {}
  for i, e in ipairs(entries) do
    if type(e) ~= "table" then error("ListDataset: entry " .. i .. " is not a table", 2) end
    if e.start == nil or e.target == nil then
      error("ListDataset: entry " .. i .. " needs start and target", 2)
    end
    local c = {}
    for k, v in pairs(e) do c[k] = v end
    c.start = P.parse(e.start, f, 2)
    c.target = as_array(e.target, "entry " .. i .. " target", 2)
    if #c.target == 0 then error("ListDataset: entry " .. i .. " has an empty target", 2) end
    if e.feat_static_cat then c.feat_static_cat = as_array(e.feat_static_cat, "feat_static_cat", 2) end
    if e.feat_static_real then c.feat_static_real = as_array(e.feat_static_real, "feat_static_real", 2) end
    if e.feat_dynamic_real then
      local rows = {}
      for r, row in ipairs(e.feat_dynamic_real) do
        rows[r] = as_array(row, "feat_dynamic_real", 2)
        if #rows[r] < #c.target then
          error(string.format("ListDataset: entry %d: feat_dynamic_real row %d has %d values, "
            .. "the target %d", i, r, #rows[r], #c.target), 2)
        end
      end
      c.feat_dynamic_real = rows
    end
    c.item_id = e.item_id or tostring(i)
    list[i] = c
  end
  return setmetatable({ entries = list, freq = f }, ListDataset)
end
function ListDataset:len() return #self.entries end
function ListDataset:get(i) return self.entries[i] end
function ListDataset:iter()
  local i = 0
  return function()
    i = i + 1
    return self.entries[i]
  end
end
M._as_list = function(ds)
  if getmetatable(ds) == ListDataset then return ds.entries, ds.freq end
  if type(ds) == "table" and ds.entries then return ds.entries, ds.freq end
  error("gluonts: expected a ListDataset, got " .. type(ds), 3)
end
function ListDataset:__tostring()
  return string.format("ListDataset(%d series, freq=%s)", #self.entries, self.freq.name)
end

-- a ListDataset of already-processed entries (no parsing)
function M._wrap(entries, freq)
  return setmetatable({ entries = entries, freq = freq }, ListDataset)
end

---------------------------------------------------------------- split
local TestTemplate = {}
TestTemplate.__index = TestTemplate
local TestData = {}
TestData.__index = TestData

-- split(ds, {offset=k} | {date="YYYY-MM..."}): the training part of every series (the
-- first k values for k > 0, all but the last -k for k < 0, or up to and including date)
-- and a template for test windows after that point (GluonTS's OffsetSplitter and
-- DateSplitter).
function M.split(ds, opts)
  local entries, freq = M._as_list(ds)
  opts = opts or {}
  if (opts.offset == nil) == (opts.date == nil) then
    error("split: give exactly one of offset and date", 2)
  end
  local train = {}
  local offsets = {}
  for i, e in ipairs(entries) do
    local n = #e.target
    local k
    if opts.offset then
      k = opts.offset >= 0 and opts.offset or n + opts.offset
    else
      local d = P.parse(opts.date, freq, 2)
      k = P.diff(d, e.start) + 1
    end
    if k < 1 or k > n then
      error(string.format("split: series %d (%s, length %d) has no training part at this split "
        .. "point (%d values)", i, tostring(e.item_id), n, k), 2)
    end
    offsets[i] = k
    train[i] = cut(e, 1, k)
  end
  return M._wrap(train, freq), setmetatable({ entries = entries, freq = freq, k = offsets },
    TestTemplate)
end

-- template:generate_instances{prediction_length=, windows=1, distance=prediction_length,
-- max_history=}: for window w the input is the series up to split point + (w-1) * distance
-- and the label the prediction_length values after it.
function TestTemplate:generate_instances(opts)
  opts = opts or {}
  local h = opts.prediction_length
  if type(h) ~= "number" or h < 1 then
    error("generate_instances: prediction_length must be a positive integer", 2)
  end
  local windows, dist = opts.windows or 1, opts.distance or h
  local inputs, labels = {}, {}
  for i, e in ipairs(self.entries) do
    for w = 1, windows do
      local k = self.k[i] + (w - 1) * dist
      if k + h > #e.target then
        error(string.format("generate_instances: series %d (length %d) is too short for window %d "
          .. "(split %d + %d)", i, #e.target, w, k, h), 2)
      end
      local first = opts.max_history and math.max(1, k - opts.max_history + 1) or 1
      inputs[#inputs + 1] = cut(e, first, k)
      labels[#labels + 1] = cut(e, k + 1, k + h)
    end
  end
  return setmetatable({ input = M._wrap(inputs, self.freq), label = M._wrap(labels, self.freq),
    prediction_length = h, freq = self.freq }, TestData)
end

function TestData:len() return #self.input.entries end
function TestData:iter()
  local i = 0
  return function()
    i = i + 1
    local a = self.input.entries[i]
    if a then return a, self.label.entries[i] end
  end
end

return M
