-- mx.gluon.data.DataLoader — batches from a dataset.
--
--   local loader = gluon.data.DataLoader(ds, {batch_size = 64, shuffle = true})
--   for data, label in loader:iter() do ... end      -- one value per dataset field
--   loader:len()                                     -- batches per pass
--
-- Options (MXNet's): batch_size, shuffle, sampler, batch_sampler, last_batch
-- ("keep" | "discard" | "rollover"), batchify_fn, num_workers (0 for now), plus
-- `seed` (the shuffle's seed; default: drawn from mx.random each pass).
-- pin_memory, pin_device_id, prefetch, thread_pool and timeout are accepted for
-- MXNet compatibility and have no effect without workers.
--
-- How a batch is made (`_fetch`, a pure function of the dataset and a list of
-- indices): with the default batchify_fn and a dataset that can gather batches
-- itself (`ds:_get_batch`: ArrayDataset, the vision datasets, and lazy transforms
-- of them whose transform is batchable), the fields are gathered straight into
-- batch tensors (one memcpy per sample and field) and batchable transforms run
-- once per batch. Otherwise each sample is read with ds:get(i) and batchify_fn
-- stacks them (again one copy per sample into a preallocated batch).
--
-- Worker threads (num_workers > 0) slot in at `_fetch`: the loader keeps producing
-- index lists on the main thread, each worker is an OS thread with its own
-- lua_State that rebuilds the dataset (from `ds:_recipe()`: module name + arguments;
-- tensors travel as retained C handles) and runs _fetch, and batches come back as C
-- tensor handles through a C queue, reordered by batch number. Nothing in _fetch
-- touches loader state, so that move changes no result. See docs/design/data.md.
local dataset = require("mx.gluon.data.dataset")
local sampler = require("mx.gluon.data.sampler")
local batchify = require("mx.gluon.data.batchify")
local nd = require("mx.nd")

local class = dataset._class
local type, error, tostring, select = type, error, tostring, select
local is_tensor = nd.is_tensor

local DataLoader = class("DataLoader")

local VALID = {
  batch_size = true, shuffle = true, sampler = true, batch_sampler = true, last_batch = true,
  batchify_fn = true, num_workers = true, pin_memory = true, pin_device_id = true,
  prefetch = true, thread_pool = true, timeout = true, seed = true,
}

-- DataLoader(dataset, {batch_size=, shuffle=false, sampler=, batch_sampler=,
-- last_batch="keep"|"discard"|"rollover", batchify_fn=, seed=, num_workers=0}):
-- `for data, label in loader:iter() do ... end` gives one batch tensor per dataset
-- field; loader:len() is the number of batches per pass.
function DataLoader.new(ds, opts)
  if type(ds) ~= "table" or type(ds.get) ~= "function" or type(ds.len) ~= "function" then
    error("DataLoader: first argument must be a dataset (with len() and get(i)), got "
      .. type(ds), 2)
  end
  opts = opts or {}
  if type(opts) ~= "table" then error("DataLoader: options must be a table", 2) end
  for k in pairs(opts) do
    if not VALID[k] then
      local names = {}
      for n in pairs(VALID) do names[#names + 1] = n end
      table.sort(names)
      error("DataLoader: unknown option '" .. tostring(k) .. "' (valid: "
        .. table.concat(names, ", ") .. ")", 2)
    end
  end
  local nw = opts.num_workers or 0
  if type(nw) ~= "number" or nw < 0 or nw % 1 ~= 0 then
    error("DataLoader: num_workers must be a non-negative integer", 2)
  end
  if nw > 0 then
    error("DataLoader: num_workers > 0 is not yet supported (worker threads come in a later "
      .. "release); use num_workers = 0", 2)
  end
  local self = setmetatable({ _dataset = ds, _batchify = opts.batchify_fn }, DataLoader)
  if opts.batchify_fn ~= nil and type(opts.batchify_fn) ~= "function"
      and not (type(opts.batchify_fn) == "table" and getmetatable(opts.batchify_fn)) then
    error("DataLoader: batchify_fn must be a function", 2)
  end
  local bsamp = opts.batch_sampler
  if bsamp == nil then
    local bs = opts.batch_size
    if bs == nil then
      error("DataLoader: batch_size must be given when batch_sampler is not", 2)
    end
    if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
      error("DataLoader: batch_size must be a positive integer, got " .. tostring(bs), 2)
    end
    local s = opts.sampler
    if s == nil then
      if opts.shuffle then
        s = sampler.RandomSampler(ds:len(), opts.seed and { seed = opts.seed } or nil)
      else
        s = sampler.SequentialSampler(ds:len())
      end
    elseif opts.shuffle then
      error("DataLoader: shuffle must not be set when a sampler is given", 2)
    end
    local ok, r = pcall(sampler.BatchSampler, s, bs, opts.last_batch or "keep")
    if not ok then error("DataLoader: " .. tostring(r):gsub("^.-BatchSampler: ", ""), 2) end
    bsamp = r
  else
    for _, k in ipairs { "batch_size", "shuffle", "sampler", "last_batch" } do
      if opts[k] ~= nil then
        error("DataLoader: " .. k .. " must not be set when batch_sampler is given", 2)
      end
    end
    if type(bsamp) ~= "table" or type(bsamp.iter) ~= "function" then
      error("DataLoader: batch_sampler must have iter() (and len())", 2)
    end
  end
  self._batch_sampler = bsamp
  return self
end

-- Batches per pass.
function DataLoader.len(self)
  local b = self._batch_sampler
  if type(b.len) ~= "function" then error("DataLoader: the batch_sampler has no len()", 2) end
  return b:len()
end

function DataLoader.__tostring(self)
  return string.format("<DataLoader: %d batches over %s>", self:len(), tostring(self._dataset))
end

local function pack(...) return { n = select("#", ...), ... } end

-- The batch for indices idx[1..n], as one value per field.
function DataLoader._fetch(self, idx, n)
  local ds = self._dataset
  local bf = self._batchify
  if bf == nil and ds._get_batch then
    local r = pack(ds:_get_batch(idx, n))
    if r.n > 0 and r[1] ~= nil then return unpack(r, 1, r.n) end
  end
  local samples = {}
  for b = 1, n do
    local s = pack(ds:get(idx[b]))
    samples[b] = s.n == 1 and s[1] or s
  end
  local out = (bf or batchify.default)(samples)
  if type(out) == "table" and not is_tensor(out) then return unpack(out, 1, out.n or #out) end
  return out
end

-- for data, label in loader:iter() do ... end
function DataLoader.iter(self)
  local it = self._batch_sampler:iter()
  return function()
    local idx, n = it()
    if idx == nil then return nil end
    return self:_fetch(idx, n or #idx)
  end
end

return DataLoader
