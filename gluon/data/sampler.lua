-- mx.gluon.data samplers: which sample indices (1-based) a loader visits, and in
-- which batches.
--
--   SequentialSampler(length[, start])      start, start+1, ..., start+length-1
--   RandomSampler(length[, {seed=}])        a fresh permutation of 1..length per pass
--   FilterSampler(fn, dataset)              indices i where fn(dataset:get(i))
--   IntervalSampler(length, interval[, rollover])  1, 1+interval, ..., then (rollover)
--       2, 2+interval, ... until every index is visited (MXNet's contrib.data)
--   BatchSampler(sampler, batch_size[, last_batch])  lists of indices;
--       last_batch = "keep" (a short last batch), "discard" (drop it) or
--       "rollover" (carry the leftover samples into the next pass)
-- Arguments follow MXNet's calling convention (mx.core.class signature): positionally in
-- MXNet's order or by name; start is 1-based.
--
-- Every sampler has `s:len()` and `s:iter()` (a generic-for iterator). The shuffle
-- is a Fisher-Yates over a splitmix64 stream: an explicit seed gives the same
-- order on every machine; without one the seed comes from mx.random (so
-- mx.random.seed(s) makes a run reproducible) or, when mx.random is absent, from the
-- clock.
local ffi = require("ffi")
local bit = require("bit")
local class = require("mx.gluon.data.dataset")._class
local classlib = require("mx.core.class")

local type, error, tostring, floor = type, error, tostring, math.floor

local M = {}

local function sig(cls, params, named)
  return classlib.declare(cls, classlib.signature(cls._class_name, params, named))
end

---------------------------------------------------------------- random stream
local u64 = ffi.typeof("uint64_t")
local C1, C2, C3 = 0x9e3779b97f4a7c15ULL, 0xbf58476d1ce4e5b9ULL, 0x94d049bb133111ebULL

local Rng = {}
Rng.__index = Rng
local function rng_new(seed) return setmetatable({ s = u64(seed) }, Rng) end
-- uniform integer in 1..n
function Rng.int(r, n)
  r.s = r.s + C1
  local z = r.s
  z = bit.bxor(z, bit.rshift(z, 30)) * C2
  z = bit.bxor(z, bit.rshift(z, 27)) * C3
  z = bit.bxor(z, bit.rshift(z, 31))
  return floor(tonumber(bit.rshift(z, 11)) * (1 / 9007199254740992) * n) + 1
end
M._Rng = rng_new

local fallback -- process-wide stream when mx.random offers no seed
local function draw_seed()
  local ok, rnd = pcall(require, "mx.random")
  if ok and type(rnd) == "table" then
    if type(rnd.next_seed) == "function" then return rnd.next_seed() end
    if type(rnd.randint) == "function" then
      local ok2, v = pcall(rnd.randint, 0, 2147483647)
      if ok2 and type(v) == "number" then return v end
      if ok2 and v ~= nil and type(v) ~= "number" and v.item then return v:item() end
    end
  end
  fallback = fallback or rng_new(os.time() * 1000003 + floor(os.clock() * 1e6))
  return fallback:int(2 ^ 52)
end
M._draw_seed = draw_seed

local function check_len(n, who, level)
  if type(n) ~= "number" or n < 0 or n % 1 ~= 0 then
    error(who .. ": length must be a non-negative integer, got " .. tostring(n), level + 1)
  end
end

---------------------------------------------------------------- Sampler base
local Sampler = class("Sampler")
M.Sampler = Sampler
function Sampler.len(self) return self._n end

---------------------------------------------------------------- Sequential
local SequentialSampler = class("SequentialSampler", Sampler)
M.SequentialSampler = SequentialSampler

local SEQ = sig(SequentialSampler, { "length", "start" })
function SequentialSampler.new(...)
  local o = SEQ(2, ...)
  local length = o.length
  check_len(length, "SequentialSampler", 2)
  local start = o.start or 1
  return setmetatable({ _n = length, _start = start }, SequentialSampler)
end

function SequentialSampler.iter(self)
  local i, last = self._start - 1, self._start + self._n - 1
  return function()
    if i >= last then return nil end
    i = i + 1
    return i
  end
end

---------------------------------------------------------------- Random
local RandomSampler = class("RandomSampler", Sampler)
M.RandomSampler = RandomSampler

local RANDOM = sig(RandomSampler, { "length" }, { "seed" })
function RandomSampler.new(...)
  local opts = RANDOM(2, ...)
  local length = opts.length
  check_len(length, "RandomSampler", 2)
  if opts.seed ~= nil and (type(opts.seed) ~= "number" or opts.seed % 1 ~= 0 or opts.seed < 0) then
    error("RandomSampler: seed must be a non-negative integer", 2)
  end
  local self = setmetatable({ _n = length }, RandomSampler)
  if opts.seed then self._rng = rng_new(opts.seed) end
  self._perm = {}
  return self
end

-- The next permutation (a fresh one per pass).
function RandomSampler._permute(self)
  local rng = self._rng or rng_new(draw_seed())
  local p, n = self._perm, self._n
  for i = 1, n do p[i] = i end
  for i = n, 2, -1 do
    local j = rng:int(i)
    p[i], p[j] = p[j], p[i]
  end
  return p
end

function RandomSampler.iter(self)
  local p = self:_permute()
  local perm = {}
  for i = 1, self._n do perm[i] = p[i] end
  local i, n = 0, self._n
  return function()
    if i >= n then return nil end
    i = i + 1
    return perm[i]
  end
end

---------------------------------------------------------------- Filter
local FilterSampler = class("FilterSampler", Sampler)
M.FilterSampler = FilterSampler

local FILTER = sig(FilterSampler, { "fn", "dataset" })
function FilterSampler.new(...)
  local o = FILTER(2, ...)
  local fn, dataset = o.fn, o.dataset
  if type(fn) ~= "function" then error("FilterSampler: fn must be a function", 2) end
  local idx = {}
  for i = 1, dataset:len() do
    if fn(dataset:get(i)) then idx[#idx + 1] = i end
  end
  return setmetatable({ _idx = idx, _n = #idx }, FilterSampler)
end

function FilterSampler.iter(self)
  local i, idx = 0, self._idx
  return function()
    i = i + 1
    return idx[i]
  end
end

---------------------------------------------------------------- Interval
-- IntervalSampler(length, interval, rollover=true): MXNet's (contrib.data in 1.9, data in
-- 2.0): 1, 1 + interval, 1 + 2 interval, ... <= length; with rollover then 2, 2 +
-- interval, ... and so on until every index is visited (len: length), without it only
-- the first sweep (len: ceil(length / interval); MXNet's __len__ says length there).
local IntervalSampler = class("IntervalSampler", Sampler)
M.IntervalSampler = IntervalSampler

local INTERVAL = sig(IntervalSampler, { "length", "interval", "rollover" })
function IntervalSampler.new(...)
  local o = INTERVAL(2, ...)
  local length, interval = o.length, o.interval
  check_len(length, "IntervalSampler", 2)
  if type(interval) ~= "number" or interval < 1 or interval % 1 ~= 0 or interval > length then
    error(string.format("IntervalSampler: interval must be an integer in 1..length (%d), got %s",
      length, tostring(interval)), 2)
  end
  local rollover = o.rollover ~= false
  local n = rollover and length or floor((length + interval - 1) / interval)
  return setmetatable({ _n = n, _length = length, _interval = interval,
    _rollover = rollover }, IntervalSampler)
end

function IntervalSampler.iter(self)
  local len, step = self._length, self._interval
  local sweeps = self._rollover and step or 1
  local start, j = 1, 1 - step
  return function()
    j = j + step
    if j > len then
      start = start + 1
      if start > sweeps then return nil end
      j = start
    end
    return j
  end
end

---------------------------------------------------------------- Batch
local BatchSampler = class("BatchSampler", Sampler)
M.BatchSampler = BatchSampler

local LAST = { keep = true, discard = true, rollover = true }

local BATCH = sig(BatchSampler, { "sampler", "batch_size", "last_batch" })
function BatchSampler.new(...)
  local o = BATCH(2, ...)
  local sampler, batch_size, last_batch = o.sampler, o.batch_size, o.last_batch
  if type(sampler) ~= "table" or type(sampler.iter) ~= "function" then
    error("BatchSampler: sampler must be a sampler (with iter() and len()), got " .. type(sampler), 2)
  end
  if type(batch_size) ~= "number" or batch_size < 1 or batch_size % 1 ~= 0 then
    error("BatchSampler: batch_size must be a positive integer, got " .. tostring(batch_size), 2)
  end
  last_batch = last_batch or "keep"
  if not LAST[last_batch] then
    error("BatchSampler: last_batch must be \"keep\", \"discard\" or \"rollover\", got "
      .. tostring(last_batch), 2)
  end
  return setmetatable({ _sampler = sampler, _bs = batch_size, _last = last_batch, _prev = {} },
    BatchSampler)
end

function BatchSampler.len(self)
  local n, bs = self._sampler:len(), self._bs
  if self._last == "keep" then return floor((n + bs - 1) / bs) end
  if self._last == "discard" then return floor(n / bs) end
  return floor((n + #self._prev) / bs)
end

-- Yields (batch, size): batch is a fresh Lua list of indices.
function BatchSampler.iter(self)
  local it = self._sampler:iter()
  local bs, last = self._bs, self._last
  local carry = self._prev
  self._prev = {}
  local done = false
  return function()
    if done then return nil end
    local batch, n = {}, 0
    for k = 1, #carry do n = n + 1 batch[n] = carry[k] end
    carry = {}
    while n < bs do
      local i = it()
      if i == nil then break end
      n = n + 1
      batch[n] = i
    end
    if n == bs then return batch, n end
    done = true
    if n == 0 then return nil end
    if last == "keep" then return batch, n end
    if last == "rollover" then self._prev = batch end
    return nil
  end
end

return M
