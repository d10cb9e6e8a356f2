-- mx.gluonts.loader — batches of training and prediction instances as NDArrays.
--
--   local loader = loader.TrainDataLoader { entries = transformed, splitter = splitter,
--     batch_size = 32, num_batches_per_epoch = 50, fields = FIELDS, num_workers = 2 }
--   for batch in loader:iter() do ... batch.past_target ... end   -- one epoch
--
-- Training follows GluonTS's stream: the series are visited cyclically, each visit asks the
-- splitter's instance sampler for split points, and the instances are cut into batches of
-- batch_size, num_batches_per_epoch per epoch; the stream goes on where the last epoch
-- stopped. The split points are drawn in the main state; the windows are cut and packed
-- into tensors by mx.gluon.data.DataLoader, in its worker threads when num_workers > 0
-- (each worker rebuilds an InstanceDataset from its recipe: the series and the splitter's
-- settings).
--
-- fields: a list of {name, kind}: "series" (past_/future_ arrays: (B, len)), "rows"
-- (feature rows: (B, len, F)), "static" (per-series arrays: (B, n)).
local ffi = require("ffi")
local mx = require("mx")
local nd = mx.nd
local transform = require("mx.gluonts.transform")

local ipairs, error, floor = ipairs, error, math.floor

local M = {}

---------------------------------------------------------------- packing
local function pack(insts, n, fields)
  local out = {}
  for _, f in ipairs(fields) do
    local name, kind = f[1], f[2]
    local first = insts[1][name]
    if first == nil then error("gluonts loader: instances have no field '" .. name .. "'", 0) end
    local t
    if kind == "rows" then
      local F, L = #first, #first[1]
      t = nd.empty({ n, L, F })
      local p = t:data_ptr()
      for b = 1, n do
        local rows = insts[b][name]
        local base = (b - 1) * L * F
        for j = 1, F do
          local r = rows[j]
          for k = 1, L do p[base + (k - 1) * F + j - 1] = r[k] end
        end
      end
    else
      local L = #first
      t = nd.empty({ n, L })
      local p = t:data_ptr()
      for b = 1, n do
        local a = insts[b][name]
        local base = (b - 1) * L
        for k = 1, L do p[base + k - 1] = a[k] end
      end
    end
    out[#out + 1] = t
  end
  return out
end
M.pack = pack

---------------------------------------------------------------- InstanceDataset
-- every (series, split point) pair of the entries as one sample
local InstanceDataset = {}
InstanceDataset.__index = InstanceDataset

-- cfg: {splitter = InstanceSplitter options (no sampler), fields = ..., is_train =,
-- lo = {per series first split}, hi = {last split}}
function M.InstanceDataset(entries, cfg)
  local self = setmetatable({ entries = entries, cfg = cfg, offset = {} }, InstanceDataset)
  local opts = {}
  for k, v in pairs(cfg.splitter) do opts[k] = v end
  self.splitter = transform.InstanceSplitter(opts)
  local n = 0
  for s = 1, #entries do
    self.offset[s] = n
    n = n + math.max(0, cfg.hi[s] - cfg.lo[s] + 1)
  end
  self.n = n
  return self
end
function InstanceDataset:len() return self.n end
-- the dataset index of split point i of series s
function InstanceDataset:index(s, i) return self.offset[s] + (i - self.cfg.lo[s]) + 1 end
function InstanceDataset:_locate(k)
  local lo, hi = 1, #self.entries
  while lo < hi do
    local mid = floor((lo + hi + 1) / 2)
    if self.offset[mid] < k then lo = mid else hi = mid - 1 end
  end
  return lo, self.cfg.lo[lo] + (k - self.offset[lo] - 1)
end
function InstanceDataset:_instances(idx, n)
  local insts = {}
  for b = 1, n do
    local s, i = self:_locate(idx[b])
    insts[b] = self.splitter:split_at(self.entries[s], i, self.cfg.is_train)
  end
  return insts
end

-- the batch's tensors cut straight from the series: what split_at + pack give (past windows
-- left-padded, the target with dummy_value, other fields with 0; future windows after
-- lead_time; static fields as they are), without the per-instance tables. A plan per field,
-- or nil when a field is none of these (then split_at + pack).
local function direct_plan(sp, fields)
  local ts = { [sp.target_field] = sp.dummy_value }
  for _, f in ipairs(sp.time_series_fields) do ts[f] = 0 end
  local plan = {}
  for k, f in ipairs(fields) do
    local name, kind = f[1], f[2]
    local side, base = name:match("^(past)_(.+)$")
    if not side then side, base = name:match("^(future)_(.+)$") end
    if side and ts[base] ~= nil and kind ~= "static" then
      plan[k] = { src = base, side = side, kind = kind, pad = ts[base] }
    elseif kind == "static" then
      plan[k] = { src = name, kind = kind }
    else
      return nil
    end
  end
  return plan
end
M._direct_plan = direct_plan

-- a time-series field of one entry as float32, time-major (T, F) (F = 1 for a series):
-- a window of every row is then one contiguous block of the (n, len, F) batch
local function as_block(v, rows)
  local F = rows and #v or 1
  local T = rows and #v[1] or #v
  local buf = ffi.new("float[?]", math.max(1, T * F))
  for j = 1, F do
    local a = rows and v[j] or v
    for q = 1, T do buf[(q - 1) * F + j - 1] = a[q] end
  end
  return { buf = buf, T = T, F = F }
end

-- blocks: a per-entry cache of as_block's results (keyed by entry, then field)
local function direct_batch(entries, sp, plan, locs, n, fields, blocks)
  local L, H, lead = sp.past_length, sp.future_length, sp.lead_time
  blocks = blocks or {}
  local out = {}
  for k, pl in ipairs(plan) do
    local t
    local first = entries[locs[1][1]][pl.src]
    if first == nil then
      error("gluonts loader: instances have no field '" .. fields[k][1] .. "'", 0)
    end
    if pl.kind == "static" then
      local m = #first
      t = nd.empty({ n, m })
      local p = t:data_ptr()
      for b = 1, n do
        local a = entries[locs[b][1]][pl.src]
        for j = 1, m do p[(b - 1) * m + j - 1] = a[j] end
      end
    else
      local len = pl.side == "past" and L or H
      local rows = pl.kind == "rows"
      if rows ~= (type(first[1]) == "table") then
        error("gluonts loader: field '" .. fields[k][1] .. "' is " .. (rows and "not " or "")
          .. "a list of rows", 0)
      end
      local F = rows and #first or 1
      t = rows and nd.empty({ n, len, F }) or nd.empty({ n, len })
      local p = t:data_ptr()
      local pad = pl.pad
      for b = 1, n do
        local s, i = locs[b][1], locs[b][2]
        local bs = blocks[s]
        if bs == nil then bs = {} blocks[s] = bs end
        local blk = bs[pl.src]
        if blk == nil then blk = as_block(entries[s][pl.src], rows) bs[pl.src] = blk end
        local off = pl.side == "past" and (i - len) or (i + lead) -- values off+1 .. off+len
        if off + len > blk.T then
          error("gluonts loader: field '" .. fields[k][1] .. "' ends before the window", 0)
        end
        local base = (b - 1) * len * F
        local skip = off < 0 and -off or 0 -- left padding
        for q = 0, skip * F - 1 do p[base + q] = pad end
        ffi.copy(p + base + skip * F, blk.buf + (off + skip) * F, (len - skip) * F * 4)
      end
    end
    out[k] = t
  end
  return out
end
M._direct_batch = direct_batch

function InstanceDataset:get(k)
  return self:_get_batch({ k }, 1)
end
function InstanceDataset:_get_batch(idx, n)
  if self.plan == nil then self.plan = direct_plan(self.splitter, self.cfg.fields) or false end
  if self.plan and self.cfg.is_train then
    local locs = {}
    for b = 1, n do locs[b] = { self:_locate(idx[b]) } end
    self.blocks = self.blocks or {}
    return unpack(direct_batch(self.entries, self.splitter, self.plan, locs, n, self.cfg.fields,
      self.blocks))
  end
  return unpack(pack(self:_instances(idx, n), n, self.cfg.fields))
end
function InstanceDataset:_recipe()
  return { module = "mx.gluonts.loader", ctor = "InstanceDataset", args = { self.entries, self.cfg } }
end

-- the series with only the fields the splitter reads (what travels to the workers)
local function slim(entries, fields, splitter)
  local keep = { [splitter.target_field] = true, [splitter.start_field] = true }
  for _, f in ipairs(splitter.time_series_fields) do keep[f] = true end
  for _, f in ipairs(fields) do if f[2] == "static" then keep[f[1]] = true end end
  local out = {}
  for s, e in ipairs(entries) do
    local c = {}
    for k in pairs(keep) do c[k] = e[k] end
    out[s] = c
  end
  return out
end

local function splitter_cfg(sp)
  return { target_field = sp.target_field, is_pad_field = sp.is_pad_field,
    start_field = sp.start_field, forecast_start_field = sp.forecast_start_field,
    past_length = sp.past_length, future_length = sp.future_length, lead_time = sp.lead_time,
    time_series_fields = sp.time_series_fields, dummy_value = sp.dummy_value }
end

---------------------------------------------------------------- TrainDataLoader
local TrainDataLoader = {}
TrainDataLoader.__index = TrainDataLoader

function M.TrainDataLoader(o)
  local sp = o.splitter
  local entries = slim(o.entries, o.fields, sp)
  local lo, hi = {}, {}
  local smp = sp.instance_sampler
  for s, e in ipairs(entries) do
    local n = #e[sp.target_field] - sp.lead_time
    lo[s] = smp.min_past or 0
    hi[s] = n - (smp.min_future or 0)
  end
  local ds = M.InstanceDataset(entries, { splitter = splitter_cfg(sp), fields = o.fields,
    is_train = true, lo = lo, hi = hi })
  local self = setmetatable({ ds = ds, sampler = smp, splitter = sp, entries = o.entries,
    batch_size = o.batch_size or 32, num_batches = o.num_batches_per_epoch or 50,
    fields = o.fields, next_series = 1, pending = {} }, TrainDataLoader)
  local bs = { len = function() return self.num_batches end,
    iter = function() return self:_batches() end }
  self.loader = mx.gluon.data.DataLoader(ds, { batch_sampler = bs, num_workers = o.num_workers or 0 })
  return self
end

-- the next batch of dataset indices from the cyclic stream
function TrainDataLoader:_next_batch()
  local out = self.pending
  local guard = 0
  local sp = self.splitter
  while #out < self.batch_size do
    local s = self.next_series
    local e = self.entries[s]
    local n = #e[sp.target_field] - sp.lead_time
    for _, i in ipairs(self.sampler(n)) do out[#out + 1] = self.ds:index(s, i) end
    self.next_series = s % #self.entries + 1
    guard = guard + 1
    if guard > 1000 * #self.entries + 1000 and #out == 0 then
      error("TrainDataLoader: the sampler gives no instances (series too short for "
        .. "past_length/future_length?)", 0)
    end
  end
  local batch = {}
  for k = 1, self.batch_size do batch[k] = out[k] end
  local rest = {}
  for k = self.batch_size + 1, #out do rest[#rest + 1] = out[k] end
  self.pending = rest
  return batch
end

function TrainDataLoader:_batches()
  local k = 0
  return function()
    k = k + 1
    if k > self.num_batches then return nil end
    local b = self:_next_batch()
    return b, #b
  end
end

-- one epoch: for batch in loader:iter() do ... end; batch[name] is a tensor
function TrainDataLoader:iter()
  local it = self.loader:iter()
  local fields = self.fields
  return function()
    local r = { it() }
    if r[1] == nil then return nil end
    local b = {}
    for j, f in ipairs(fields) do b[f[1]] = r[j] end
    return b
  end
end
function TrainDataLoader:close() if self.loader.close then self.loader:close() end end

---------------------------------------------------------------- prediction batches
-- the test instances (split at the end of each series) in batches: {batch, instances}
function M.inference_batches(entries, splitter, batch_size, fields)
  local out = {}
  local insts = {}
  for _, e in ipairs(entries) do
    insts[#insts + 1] = splitter:split_at(e, #e[splitter.target_field], false)
  end
  for s = 1, #insts, batch_size do
    local group = {}
    for k = s, math.min(#insts, s + batch_size - 1) do group[#group + 1] = insts[k] end
    local t = pack(group, #group, fields)
    local b = {}
    for j, f in ipairs(fields) do b[f[1]] = t[j] end
    out[#out + 1] = { batch = b, instances = group }
  end
  return out
end

return M
