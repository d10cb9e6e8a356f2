-- mx.io.NDArrayIter — batches of in-memory arrays, MXNet 1.9's NDArrayIter
-- (python/mxnet/io/io.py) with its cursor arithmetic:
--
--   NDArrayIter(data, label=nil, batch_size=1, shuffle=false, last_batch_handle="pad",
--               data_name="data", label_name="softmax_label", layout="NCHW")
--
-- data / label: an NDArray, a Lua list of them (named "_0_data", "_1_data", ... when more
-- than one) or a table name -> NDArray (taken in name order); nested Lua tables become
-- NDArrays. Batches are slices along the layout's N axis (views on the first axis).
-- last_batch_handle: "pad" (the last batch is filled from the start; batch.pad says how
-- many), "discard" (the last partial batch is dropped), "roll_over" (it is kept for the
-- next pass, whose first batch completes it). shuffle permutes the samples (mx.random:
-- mx.random.seed repeats it) at construction and at every reset; it.idx lists the given
-- samples in their current order (1-based; MXNet's idx).
local nd = require("mx.nd")
local io_ = require("mx.io")

local type, error, tostring, pairs, ipairs = type, error, tostring, pairs, ipairs

local M = {}

local function init_data(who, data, allow_empty, default_name, level)
  if data == nil then
    if allow_empty then return {} end
    error(who .. ": data must be given", level + 1)
  end
  -- a nested Lua table of numbers is one array (a list of arrays holds NDArrays)
  local first = type(data) == "table" and not nd.is_tensor(data) and data[1]
  if type(first) == "number" or (type(first) == "table" and not nd.is_tensor(first)) then
    data = { data }
  end
  if nd.is_tensor(data) then data = { data } end
  local list = {}
  if type(data) == "table" and (data[1] ~= nil or next(data) == nil) then
    if #data == 0 and not allow_empty then error(who .. ": data is an empty list", level + 1) end
    for i, v in ipairs(data) do
      list[i] = { #data == 1 and default_name or ("_" .. (i - 1) .. "_" .. default_name), v }
    end
  elseif type(data) == "table" then
    for k, v in pairs(data) do list[#list + 1] = { k, v } end
    table.sort(list, function(a, b) return tostring(a[1]) < tostring(b[1]) end)
  else
    error(who .. ": data must be an NDArray, a list of them or a table name -> NDArray, got "
      .. type(data), level + 1)
  end
  for _, kv in ipairs(list) do
    if type(kv[1]) ~= "string" then
      error(who .. ": array names must be strings, got " .. type(kv[1]), level + 1)
    end
    if not nd.is_tensor(kv[2]) then
      local ok, a = pcall(nd.array, kv[2])
      if not ok then
        error(who .. ": '" .. kv[1] .. "' must be an NDArray or a nested Lua table of numbers",
          level + 1)
      end
      kv[2] = a
    end
  end
  return list
end

local HANDLES = { pad = true, discard = true, roll_over = true }

local NDArrayIter = io_._class("NDArrayIter", io_.DataIter)
M.NDArrayIter = NDArrayIter
local SIG = io_._sig(NDArrayIter, { "data", "label", "batch_size", "shuffle",
  "last_batch_handle", "data_name", "label_name", "layout" })

function NDArrayIter:__init(...)
  local o = SIG(3, ...)
  local who = "NDArrayIter"
  self.data = init_data(who, o.data, false, o.data_name or "data", 3)
  self.label = init_data(who, o.label, true, o.label_name or "softmax_label", 3)
  local bs = o.batch_size or 1
  if type(bs) ~= "number" or bs < 1 or bs % 1 ~= 0 then
    error(who .. ": batch_size must be a positive integer, got " .. tostring(bs), 3)
  end
  local handle = o.last_batch_handle or "pad"
  if not HANDLES[handle] then
    error(who .. ": last_batch_handle must be 'pad', 'discard' or 'roll_over', got "
      .. tostring(handle), 3)
  end
  self.layout = o.layout or "NCHW"
  self._axis = io_.DataDesc.get_batch_axis(self.layout)
  local n
  for _, kv in ipairs(self.data) do
    local s = kv[2]:shape()
    if #s < self._axis then
      error(who .. ": '" .. kv[1] .. "' has no axis " .. self._axis .. " (the layout's N)", 3)
    end
    n = n or s[self._axis]
    if s[self._axis] ~= n then
      error(string.format("%s: the arrays have %d and %d samples ('%s')", who, n,
        s[self._axis], kv[1]), 3)
    end
  end
  for _, kv in ipairs(self.label) do
    local s = kv[2]:shape()
    if (s[self._axis] or s[1]) ~= n then
      error(string.format("%s: label '%s' has %s samples, data %d", who, kv[1],
        tostring(s[self._axis] or s[1]), n), 3)
    end
  end
  self.batch_size, self.num_data = bs, n
  self.shuffle = o.shuffle == true
  self.last_batch_handle = handle
  self.cursor = -bs
  self._cache_data, self._cache_label = nil, nil
  -- idx: each position's sample in the data as given (1-based; MXNet's 0-based idx)
  self.idx = {}
  for i = 1, n do self.idx[i] = i end
  self:reset()
  self.provide_data = self:_descs(self.data)
  self.provide_label = self:_descs(self.label)
end

function NDArrayIter:_descs(list)
  local r = {}
  for i, kv in ipairs(list) do
    local s = kv[2]:shape()
    s[math.min(self._axis, #s)] = self.batch_size
    r[i] = io_.DataDesc(kv[1], s, kv[2]:dtype(), self.layout)
  end
  return r
end

-- the samples permuted (one permutation for data and label)
function NDArrayIter:_shuffle_data()
  local n = self.num_data
  local perm = nd.shuffle(nd.arange(1, n + 1, { dtype = "int64" }))
  local function take(list)
    for _, kv in ipairs(list) do
      local ax = math.min(self._axis, kv[2]:ndim())
      kv[2] = nd.take(kv[2], perm, { axis = ax })
    end
  end
  take(self.data)
  take(self.label)
  local p, idx = perm:tolist(), {}
  for i = 1, n do idx[i] = self.idx[p[i]] end
  self.idx = idx
end

function NDArrayIter:hard_reset()
  if self.shuffle then self:_shuffle_data() end
  self.cursor = -self.batch_size
  self._cache_data, self._cache_label = nil, nil
end

function NDArrayIter:reset()
  if self.shuffle then self:_shuffle_data() end
  local bs, n = self.batch_size, self.num_data
  if self.last_batch_handle == "roll_over" and n - bs < self.cursor and self.cursor < n then
    self.cursor = self.cursor - n - bs
  else
    self.cursor = -bs
  end
end

function NDArrayIter:iter_next()
  self.cursor = self.cursor + self.batch_size
  return self.cursor < self.num_data
end

function NDArrayIter:next()
  if not self:iter_next() then return nil end
  local data, label = self:getdata(), self:getlabel()
  if data[1]:shape()[math.min(self._axis, data[1]:ndim())] ~= self.batch_size then
    self._cache_data, self._cache_label = data, label -- roll_over / discard
    return nil
  end
  return io_.DataBatch(data, label, self:getpad(), nil)
end

-- rows [start, stop) (0-based) of every array of the list
function NDArrayIter:_getdata(list, start, stop)
  start = start or 0
  stop = stop or self.num_data
  local r = {}
  for i, kv in ipairs(list) do
    local a = kv[2]
    local ax = math.min(self._axis, a:ndim())
    if ax == 1 then
      r[i] = a[{ { start + 1, stop } }]
    else
      r[i] = nd.slice_axis(a, { axis = ax, begin = start + 1, ["end"] = stop })
    end
  end
  return r
end

function NDArrayIter:_concat(a, b)
  if a == nil or #a == 0 then return b end
  if b == nil or #b == 0 then return a end
  local r = {}
  for i = 1, #a do r[i] = nd.concat(a[i], b[i], { dim = math.min(self._axis, a[i]:ndim()) }) end
  return r
end

function NDArrayIter:_batchify(list)
  local bs, n, c = self.batch_size, self.num_data, self.cursor
  if c >= n then error("NDArrayIter: the iterator needs a reset", 3) end
  if self.last_batch_handle == "roll_over" and -bs < c and c < 0 then
    local cache = self._cache_data ~= nil and self._cache_data or self._cache_label
    if cache == nil then error("NDArrayIter: the next pass should have cached data", 3) end
    local second = self:_getdata(list, nil, c + bs)
    if self._cache_data ~= nil then self._cache_data = nil else self._cache_label = nil end
    return self:_concat(cache, second)
  elseif self.last_batch_handle == "pad" and c + bs > n then
    local pad = bs - n + c
    local first = self:_getdata(list, c)
    local second
    if pad > n then
      second = {}
      local whole = self:_getdata(list, nil, n)
      for _ = 1, math.floor(pad / n) do second = self:_concat(second, whole) end
      if pad % n ~= 0 then second = self:_concat(second, self:_getdata(list, nil, pad % n)) end
    else
      second = self:_getdata(list, nil, pad)
    end
    return self:_concat(first, second)
  end
  return self:_getdata(list, c, math.min(c + bs, n))
end

function NDArrayIter:getdata() return self:_batchify(self.data) end
function NDArrayIter:getlabel() return self:_batchify(self.label) end
function NDArrayIter:getpad()
  local bs, n, c = self.batch_size, self.num_data, self.cursor
  if self.last_batch_handle == "pad" and c + bs > n then return c + bs - n end
  if self.last_batch_handle == "roll_over" and -bs < c and c < 0 then return -c end
  return 0
end

return M
