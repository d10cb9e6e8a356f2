-- mx.gluonnlp.data samplers: GluonNLP 0.10's FixedBucketSampler (with its bucket
-- schemes) and SortedBucketSampler. They are batch samplers: `s:iter()` yields lists
-- of 1-based sample indices and `s:len()` counts batches, so they plug into
-- mx.gluon.data.DataLoader{batch_sampler=}.
local U = require("mx.gluonnlp._util")
local gs = require("mx.gluon.data.sampler")

local floor, max, min = math.floor, math.max, math.min
local M = {}

local function shuffle(list, rng)
  for i = #list, 2, -1 do
    local j = rng:int(i)
    list[i], list[j] = list[j], list[i]
  end
end

local function rng_of(seed) return gs._Rng(seed or gs._draw_seed()) end

---------------------------------------------------------------- bucket schemes
-- scheme(max_len, min_len, num_buckets) -> bucket keys (numbers, or lists for
-- multi-field lengths)
local function per_field(f)
  return function(maxl, minl, nb)
    if type(maxl) ~= "table" then return f(maxl, minl, nb) end
    local cols = {}
    for d = 1, #maxl do cols[d] = f(maxl[d], minl[d], nb) end
    local keys = {}
    for i = 1, nb do
      local k = {}
      for d = 1, #maxl do k[d] = cols[d][i] end
      keys[i] = k
    end
    return keys
  end
end

function M.ConstWidthBucket()
  return per_field(function(maxl, minl, nb)
    local w = max(floor((1 + maxl - minl) / nb), 1)
    local keys = {}
    for i = 0, nb - 1 do keys[i + 1] = max(maxl - i * w, minl) end
    return keys
  end)
end

-- Python's round(): halves to even
local function pyround(x)
  local f = floor(x)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end

function M.LinearWidthBucket()
  return per_field(function(maxl, minl, nb)
    local alpha = 2 * (maxl - minl - nb) / (nb * (nb + 1))
    local keys = {}
    for i = 0, nb - 1 do keys[i + 1] = pyround(minl + alpha * ((i + 1) * (i + 2) / 2) + i + 1) end
    keys[nb] = max(keys[nb], maxl)
    return keys
  end)
end

function M.ExpWidthBucket(bucket_len_step)
  local step = bucket_len_step or 1.1
  return per_field(function(maxl, minl, nb)
    local w0 = (maxl - minl) * (step - 1) / (step ^ nb - 1)
    local keys = {}
    for i = 0, nb - 1 do keys[i + 1] = pyround(minl + w0 * (step ^ (i + 1) - 1) / (step - 1)) end
    keys[nb] = max(keys[nb], maxl)
    return keys
  end)
end

---------------------------------------------------------------- FixedBucketSampler
local FixedBucketSampler = U.class("FixedBucketSampler")
M.FixedBucketSampler = FixedBucketSampler

local function key_sum(k)
  if type(k) ~= "table" then return k end
  local s = 0
  for i = 1, #k do s = s + k[i] end
  return s
end

local function key_str(k)
  if type(k) ~= "table" then return tostring(k) end
  return "(" .. table.concat(k, ", ") .. ")"
end

local function key_less(a, b)
  if type(a) ~= "table" then return a < b end
  for i = 1, #a do if a[i] ~= b[i] then return a[i] < b[i] end end
  return false
end

local OPTS = { num_buckets = true, bucket_keys = true, ratio = true, shuffle = true,
  use_average_length = true, num_shards = true, bucket_scheme = true, seed = true }

-- FixedBucketSampler(lengths, batch_size, opts): lengths is a list of sequence lengths
-- (numbers, or lists of numbers for samples with several sequences). opts: num_buckets
-- (10), bucket_keys, ratio (0), shuffle (false), use_average_length (false),
-- num_shards (0), bucket_scheme (ConstWidthBucket()), seed (for shuffle).
function FixedBucketSampler:__init(lengths, batch_size, o)
  o = U.check_opts("FixedBucketSampler", o, OPTS, 3)
  if type(lengths) ~= "table" or #lengths == 0 then
    error("FixedBucketSampler: lengths must be a non-empty list", 3)
  end
  if type(batch_size) ~= "number" or batch_size < 1 then
    error("FixedBucketSampler: batch_size must be a positive number, got " .. tostring(batch_size), 3)
  end
  local ratio = o.ratio or 0
  if ratio < 0 then error("FixedBucketSampler: ratio cannot be negative", 3) end
  local single = type(lengths[1]) ~= "table"
  local nattr = single and 1 or #lengths[1]
  local maxl, minl
  for i, l in ipairs(lengths) do
    if single then
      if type(l) ~= "number" then error("FixedBucketSampler: lengths[" .. i .. "] is not a number", 3) end
      maxl, minl = max(maxl or l, l), min(minl or l, l)
    else
      if type(l) ~= "table" or #l ~= nattr then
        error("FixedBucketSampler: lengths[" .. i .. "] must be a list of " .. nattr .. " numbers", 3)
      end
      maxl, minl = maxl or {}, minl or {}
      for d = 1, nattr do maxl[d], minl[d] = max(maxl[d] or l[d], l[d]), min(minl[d] or l[d], l[d]) end
    end
  end
  for _, v in ipairs(single and { minl } or minl) do
    if v <= 0 then error("FixedBucketSampler: sequence lengths must all be larger than 0", 3) end
  end
  local keys = o.bucket_keys
  if keys == nil then
    local nb = o.num_buckets or 10
    if nb < 1 then error("FixedBucketSampler: num_buckets must be positive", 3) end
    keys = (o.bucket_scheme or M.ConstWidthBucket())(maxl, minl, nb)
  end
  -- sorted, without duplicates
  local uniq, seen = {}, {}
  for _, k in ipairs(keys) do
    local s = key_str(k)
    if not seen[s] then seen[s] = true uniq[#uniq + 1] = k end
  end
  table.sort(uniq, key_less)
  keys = uniq
  -- each sample into the fitting bucket with the least padding (first on ties)
  local ids = {}
  for b = 1, #keys do ids[b] = {} end
  for i, l in ipairs(lengths) do
    local best, bestpad
    for b, k in ipairs(keys) do
      local ok, pad = true, 0
      if single then
        pad = k - l
        ok = pad >= 0
      else
        for d = 1, nattr do
          local p = k[d] - l[d]
          if p < 0 then ok = false break end
          pad = pad + p
        end
      end
      if ok and (bestpad == nil or pad < bestpad) then best, bestpad = b, pad end
    end
    if not best then
      error(string.format("FixedBucketSampler: a sequence of length %s fits no bucket (keys %s); "
        .. "increase the bucket size", key_str(l), key_str(keys[#keys])), 3)
    end
    local t = ids[best]
    t[#t + 1] = i
  end
  self.bucket_keys, self.bucket_sample_ids = {}, {}
  for b, k in ipairs(keys) do
    if #ids[b] > 0 then
      self.bucket_keys[#self.bucket_keys + 1] = k
      self.bucket_sample_ids[#self.bucket_sample_ids + 1] = ids[b]
    end
  end
  local sizes = {}
  if not o.use_average_length then
    local maxkey = 0
    for _, k in ipairs(self.bucket_keys) do maxkey = max(maxkey, key_sum(k)) end
    for b, k in ipairs(self.bucket_keys) do
      sizes[b] = max(floor(maxkey / key_sum(k) * ratio * batch_size), batch_size)
    end
  else
    for b, sids in ipairs(self.bucket_sample_ids) do
      local s, s2 = 0, 0
      for _, i in ipairs(sids) do
        local l = key_sum(lengths[i])
        s, s2 = s + l, s2 + l * l
      end
      local mean = s / #sids
      local std = math.sqrt(max(s2 / #sids - mean * mean, 0))
      sizes[b] = max(floor(batch_size / (mean + std)), 1)
    end
  end
  self.bucket_batch_sizes = sizes
  -- batches from the largest bucket down, as GluonNLP lists them
  local infos = {}
  for b = #self.bucket_keys, 1, -1 do
    for start = 1, #self.bucket_sample_ids[b], sizes[b] do infos[#infos + 1] = { b, start } end
  end
  self._infos = infos
  self._shuffle = o.shuffle
  self._num_shards = o.num_shards or 0
  self._rng = o.seed and rng_of(o.seed) or nil
  self._nsamples = #lengths
  self._len = self._num_shards > 0 and math.ceil(#infos / self._num_shards) or #infos
end

function FixedBucketSampler:len() return self._len end
FixedBucketSampler.__len = FixedBucketSampler.len

local function slice(list, a, b)
  local r = {}
  for i = a, b do r[#r + 1] = list[i] end
  return r
end

-- s:iter() -> the batches (lists of 1-based indices); with num_shards, lists of
-- num_shards batches
function FixedBucketSampler:iter()
  local infos, sids, sizes = self._infos, self.bucket_sample_ids, self.bucket_batch_sizes
  if self._shuffle then
    local rng = self._rng or rng_of()
    shuffle(infos, rng)
    for b = 1, #sids do shuffle(sids[b], rng) end
  end
  local k, ns = 0, self._num_shards
  local function batch(info)
    local b, start = info[1], info[2]
    return slice(sids[b], start, min(start + sizes[b] - 1, #sids[b]))
  end
  return function()
    if ns > 0 then
      if k >= #infos then return nil end
      local first = k + 1
      if first + ns - 1 > #infos then first = #infos - ns + 1 end
      k = k + ns
      local r = {}
      for j = first, first + ns - 1 do r[#r + 1] = batch(infos[j]) end
      return r
    end
    k = k + 1
    local info = infos[k]
    if not info then return nil end
    return batch(info)
  end
end

function FixedBucketSampler:stats()
  local keys, cnt = {}, {}
  for b, k in ipairs(self.bucket_keys) do keys[b] = key_str(k) cnt[b] = #self.bucket_sample_ids[b] end
  return string.format("FixedBucketSampler:\n  sample_num=%d, batch_num=%d\n  key=[%s]\n  cnt=[%s]\n"
    .. "  batch_size=[%s]", self._nsamples, #self._infos, table.concat(keys, ", "),
    table.concat(cnt, ", "), table.concat(self.bucket_batch_sizes, ", "))
end

---------------------------------------------------------------- SortedBucketSampler
local SortedBucketSampler = U.class("SortedBucketSampler")
M.SortedBucketSampler = SortedBucketSampler

-- SortedBucketSampler(sort_keys, batch_size, {mult=100, reverse=true, shuffle=false,
-- seed=}): samples sorted by key within chunks of batch_size * mult, then batched.
function SortedBucketSampler:__init(sort_keys, batch_size, o)
  o = U.check_opts("SortedBucketSampler", o, { mult = true, reverse = true, shuffle = true, seed = true }, 3)
  if type(sort_keys) ~= "table" or #sort_keys == 0 then
    error("SortedBucketSampler: sort_keys must be a non-empty list", 3)
  end
  self._keys, self._bs = sort_keys, batch_size
  self._mult = o.mult or 100
  self._reverse = o.reverse == nil or o.reverse
  self._shuffle = o.shuffle
  self._rng = o.seed and rng_of(o.seed) or nil
end

function SortedBucketSampler:len() return math.ceil(#self._keys / self._bs) end

function SortedBucketSampler:iter()
  local n, keys = #self._keys, self._keys
  local idx = {}
  for i = 1, n do idx[i] = i end
  if self._shuffle then shuffle(idx, self._rng or rng_of()) end
  local chunk = self._bs * self._mult
  local order = {}
  for a = 1, n, chunk do
    local part = slice(idx, a, min(a + chunk - 1, n))
    local rev = self._reverse
    table.sort(part, function(x, y)
      if keys[x] ~= keys[y] then
        if rev then return keys[x] > keys[y] end
        return keys[x] < keys[y]
      end
      return x < y
    end)
    for _, i in ipairs(part) do order[#order + 1] = i end
  end
  local batches = {}
  for a = 1, n, self._bs do batches[#batches + 1] = slice(order, a, min(a + self._bs - 1, n)) end
  if self._shuffle then shuffle(batches, self._rng or rng_of()) end
  local k = 0
  return function()
    k = k + 1
    return batches[k]
  end
end

return M
