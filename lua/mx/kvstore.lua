-- mx.kvstore (mx.kv) — MXNet's key-value store: the one API every backend shares.
--
--   local kv = mx.kv.create("device")
--   kv:init(3, mx.nd.zeros({2, 3}))
--   kv:push(3, {g_on_cpu0, g_on_cpu1})     -- a list is one value per device: summed
--   kv:pull(3, {w_on_cpu0, w_on_cpu1})     -- the stored value copied into every out
--
-- Types: 'local' (the reduction and the stored value on cpu(0)), 'device' (on the device
-- of the first value given to init), 'nccl' (GPU only), and the distributed ones, loaded
-- on first use: 'dist_sync' / 'dist_device_sync' (lua/mx/kvstore/dist_sync.lua, Open MPI)
-- and 'dist_async' (lua/mx/kvstore/dist_async.lua, ZeroMQ parameter servers).
-- Keys are integers or strings (MXNet: not both in one store). Values are NDArrays.
--
-- What a backend overrides (everything else — argument checks, key kinds, the per-key
-- store, the updater and its states, gradient compression — lives in this base class):
--   M.KVStore.new(name, opts) -> a base instance; a backend makes it with
--       local self = kvstore.KVStore._make(Backend, name, opts) and sets rank/num_workers.
--   self:_reduce(key, arrays)       -> one NDArray: the sum of one key's per-device values
--       in list order (compressed per source first for 'local'/'device' with compression),
--       in the store's per-key buffer (a backend may overwrite it in place).
--   self:_allreduce(keys, merged)   -> list: merged[i] summed over all workers (base: as is,
--       one worker). dist_sync fills this in (bucketed, deterministic order).
--   self:_push_merged(keys, merged) : apply the merged values: compression for dist types,
--       _allreduce, then the updater (or plain assignment) on the stored values.
--       dist_async overrides it with its _push_remote to the servers.
--   self:_pull_value(key)           -> the NDArray to copy into the outs (base: the stored
--       value). dist_async overrides it with its _pull_remote.
--   self:_pull_values(keys)         -> list: _pull_value of each (one request for all the
--       keys of a pull when a backend overrides it).
--   self:_init_values(keys, values) -> the values to store (base: as given). dist_sync
--       broadcasts rank 0's; dist_async has rank 0 send them to the servers.
--   self:_set_optimizer(opt)        : base: a local updater; dist_async sends it to servers.
--   self:_barrier()                 : base: nothing (one worker).
--   self:_close()                   : release transport (base: nothing); kv:close() calls it.
-- Backends keep `type`, `rank` (0-based, as MXNet) and `num_workers` as plain fields.
local nd = require("mx.nd")
local class = require("mx.core.class")
local context = require("mx.context")

local type, error, tostring, ipairs, pairs, setmetatable, tonumber =
  type, error, tostring, ipairs, pairs, setmetatable, tonumber
local is_tensor = nd.is_tensor

local M = {}

local KVStore = class.base("KVStore")
M.KVStore = KVStore
KVStore.__tostring = function(s) return "KVStore(" .. s.type .. ")" end

local function shape_str(t)
  local s = t:shape()
  return "(" .. table.concat(s, ", ") .. (#s == 1 and ",)" or ")")
end
M._shape_str = shape_str

local function same_shape(a, b)
  local sa, sb = a:shape(), b:shape()
  if #sa ~= #sb then return false end
  for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
  return true
end

-- A new store of class cls (KVStore or a backend's subclass).
function KVStore._make(cls, name, opts)
  return setmetatable({
    type = name, rank = 0, num_workers = 1, _opts = opts or {},
    _store = {},          -- key -> NDArray
    _key_kind = nil,      -- "number" or "string" once a key was seen
    _updater = nil,       -- function(key, grad, weight)
    _optimizer = nil,
    _states = {},         -- key -> optimizer state list (the local updater's)
    _gc = nil,            -- {type='2bit', threshold=}
    _residual = {},       -- key -> {slot -> NDArray}: 2-bit error feedback
    _bufs = {},           -- key -> {[0] = the reduce buffer, [i] = staging for value i}
    -- dist types compress the local sum on push; local/device each device's value
    _compress_merged = type(name) == "string" and name:sub(1, 4) == "dist",
  }, cls)
end

---------------------------------------------------------------- argument checks
local function check_key(self, k, who, level)
  local tk = type(k)
  if tk == "number" then
    if k % 1 ~= 0 then error(who .. ": key " .. tostring(k) .. " is not an integer", level + 1) end
  elseif tk ~= "string" then
    error(who .. ": a key must be an integer or a string, got " .. tk, level + 1)
  end
  if self._key_kind == nil then
    self._key_kind = tk
  elseif self._key_kind ~= tk then
    error(who .. ": key " .. (tk == "string" and string.format("%q", k) or tostring(k))
      .. " is a" .. (tk == "number" and "n integer" or " string") .. " but this store's keys are "
      .. (self._key_kind == "number" and "integers" or "strings")
      .. " (MXNet: int and string keys cannot be mixed in one store)", level + 1)
  end
  return k
end

local function key_str(k) return type(k) == "string" and string.format("'%s'", k) or tostring(k) end
M._key_str = key_str

-- One key's value(s) -> a list of NDArrays (what = "value" or "out").
local function value_list(v, k, who, what, level, allow_nil)
  if v == nil and allow_nil then return nil end
  if is_tensor(v) then return { v } end
  if type(v) == "table" and #v > 0 then
    for i = 1, #v do
      if not is_tensor(v[i]) then
        error(string.format("%s: %s %d for key %s is not an NDArray (got %s)", who, what, i,
          key_str(k), type(v[i])), level + 1)
      end
    end
    return v
  end
  error(string.format("%s: %s for key %s must be an NDArray or a non-empty list of NDArrays, got %s",
    who, what, key_str(k), type(v)), level + 1)
end

-- normalise(key(s), value(s)) -> keys list, list of value lists.
local function normalise(self, key, value, who, what, level, allow_nil)
  if type(key) == "table" then
    if #key == 0 then error(who .. ": the key list is empty", level + 1) end
    if value ~= nil and (type(value) ~= "table" or is_tensor(value) or #value ~= #key) then
      error(string.format("%s: %d keys need a list of %d %ss (one NDArray or list per key), got %s",
        who, #key, #key, what, is_tensor(value) and "one NDArray" or type(value) == "table"
        and (#value .. " entries") or type(value)), level + 1)
    end
    local keys, vals = {}, {}
    for i = 1, #key do
      keys[i] = check_key(self, key[i], who, level + 1)
      vals[i] = value_list(value and value[i], key[i], who, what, level + 1, allow_nil)
    end
    return keys, vals
  end
  check_key(self, key, who, level + 1)
  return { key }, { value_list(value, key, who, what, level + 1, allow_nil) }
end

local function stored(self, k, who, level)
  local s = self._store[k]
  if s == nil then
    error(who .. ": key " .. key_str(k) .. " has not been initialized (call init first)", level + 1)
  end
  return s
end

local function check_shapes(k, s, list, who, what, level)
  for i = 1, #list do
    if not same_shape(list[i], s) then
      error(string.format("%s: key %s has shape %s but %s %d has shape %s", who, key_str(k),
        shape_str(s), what, i, shape_str(list[i])), level + 1)
    end
  end
end

---------------------------------------------------------------- the hooks (base versions)
-- 2-bit quantisation with error feedback (MXNet's quantize_2bit then dequantize):
-- r += g; r >= t -> +t (r -= t); r <= -t -> -t (r += t); else 0.
function KVStore:_compress(key, arr, slot)
  local gc = self._gc
  local rk = self._residual[key]
  if rk == nil then rk = {}; self._residual[key] = rk end
  local r = rk[slot]
  if r == nil then
    r = nd.keep(nd.zeros(arr:shape(), { dtype = arr:dtype(), ctx = arr:context() }))
    rk[slot] = r
  end
  local t = gc.threshold
  nd.add(r, arr, { out = r })
  local pos = nd.greater_equal_scalar(r, { scalar = t })
  local neg = nd.lesser_equal_scalar(r, { scalar = -t })
  local q = nd.mul_scalar(nd.sub(pos, neg), { scalar = t })
  nd.sub(r, q, { out = r })
  return q
end

-- The sum goes into a buffer the store keeps per key (on the stored value's device and
-- dtype), values from other devices through per-slot staging buffers: a push allocates
-- nothing once the key was pushed before. The result is valid until the key's next push.
local function buffer(bufs, slot, like)
  local b = bufs[slot]
  if b == nil then
    b = nd.keep(nd.empty(like:shape(), { dtype = like:dtype(), ctx = like:context() }))
    bufs[slot] = b
  end
  return b
end

-- Row_sparse values (every value of the key must be one): summed row-wise on the store's
-- device (rsp + rsp keeps the union of the rows: only the rows some device touched are
-- added and moved), a new row_sparse NDArray.
local function reduce_rsp(self, key, arrays, level)
  local s = self._store[key]
  local ctx = s:context()
  if self._gc ~= nil then
    error("KVStore:push: key " .. key_str(key) .. ": gradient compression does not apply to "
      .. "row_sparse values (MXNet compresses dense values only)", level + 1)
  end
  local acc
  for i = 1, #arrays do
    local a = arrays[i]
    if a:stype() ~= "row_sparse" then
      error(string.format("KVStore:push: key %s: value %d is %s but value 1 is row_sparse (one "
        .. "storage type per key)", key_str(key), i, a:stype()), level + 1)
    end
    if a:context() ~= ctx then a = a:to(ctx) end
    if a:dtype() ~= s:dtype() then a = a:astype(s:dtype()) end
    acc = acc and nd.add(acc, a) or (a == arrays[i] and a:copy() or a)
  end
  self._rows_reduced = (self._rows_reduced or 0) + acc:nnz()
  return acc
end
M._reduce_rsp = reduce_rsp

function KVStore:_reduce(key, arrays)
  if arrays[1]:stype() == "row_sparse" then
    local r = reduce_rsp(self, key, arrays, 3) -- not a tail call: level 3 is push's caller
    return r
  end
  local s = self._store[key]
  local bufs = self._bufs[key]
  if bufs == nil then bufs = {}; self._bufs[key] = bufs end
  local ctx, dt = s:context(), s:dtype()
  local compress = self._gc ~= nil and not self._compress_merged
  local acc = buffer(bufs, 0, s)
  for i = 1, #arrays do
    local a = arrays[i]
    if compress then a = self:_compress(key, a, i) end
    if i == 1 then
      a:copyto(acc)
    else
      if a:context() ~= ctx or a:dtype() ~= dt then
        local st = buffer(bufs, i, s)
        a:copyto(st)
        a = st
      end
      nd.add(acc, a, { out = acc })
    end
  end
  return acc
end

function KVStore._allreduce(_, _, merged) return merged end

function KVStore:_push_merged(keys, merged)
  if self._gc ~= nil and self._compress_merged then
    for i = 1, #keys do merged[i] = self:_compress(keys[i], merged[i], 1) end
  end
  merged = self:_allreduce(keys, merged)
  local up = self._updater
  for i = 1, #keys do
    local k = keys[i]
    local s = self._store[k]
    local m = merged[i]
    if m:context() ~= s:context() then m = m:to(s:context()) end
    if up then
      -- a row_sparse stored weight (init with one) is updated as the dense weight it
      -- stands for: the update ops take row_sparse gradients for dense weights (lazily)
      if s:stype() ~= "default" then
        s = nd.keep(nd.cast_storage(s))
        self._store[k] = s
      end
      up(k, m, s)
    elseif m:stype() ~= s:stype() then
      -- MXNet's store takes the merged value's storage type (a copy: m is a buffer)
      self._store[k] = nd.keep(m:stype() == "default" and m:copy() or m:to(s:context()))
    else
      m:copyto(s)
    end
  end
end

function KVStore:_pull_value(key) return self._store[key] end

function KVStore:_pull_values(keys)
  local r = {}
  for i = 1, #keys do r[i] = self:_pull_value(keys[i]) end
  return r
end

function KVStore._init_values(_, _, values) return values end

function KVStore:_set_optimizer(opt)
  local states = self._states
  self._updater = function(k, g, w)
    local st = states[k]
    if st == nil then
      st = opt.create_state_multi_precision and opt:create_state_multi_precision(k, w)
        or opt:create_state(k, w)
      states[k] = st
    end
    if opt.update_multi_precision then opt:update_multi_precision(k, w, g, st)
    else opt:update(k, w, g, st) end
  end
end

function KVStore._barrier() end
function KVStore._close() end

---------------------------------------------------------------- the API
-- init(key(s), value(s)): a key can be initialised once; a list value uses its first.
function KVStore:init(key, value)
  local keys, vals = normalise(self, key, value, "KVStore:init", "value", 2)
  local first = {}
  for i = 1, #keys do
    local k = keys[i]
    if self._store[k] ~= nil then
      error("KVStore:init: duplicate init of key " .. key_str(k), 2)
    end
    first[i] = vals[i][1]
  end
  first = self:_init_values(keys, first)
  for i = 1, #keys do
    local v = first[i]
    local ctx = self.type == "local" and context.cpu(0) or v:context()
    self._store[keys[i]] = nd.keep(v:to(ctx))
  end
end

-- push(key(s), value(s)[, priority]): each key's list is summed, then the updater (when
-- set) runs on the stored value, else the sum replaces it.
function KVStore:push(key, value, priority)
  if priority ~= nil and type(priority) ~= "number" then
    error("KVStore:push: priority must be a number, got " .. type(priority), 2)
  end
  local keys, vals = normalise(self, key, value, "KVStore:push", "value", 2)
  for i = 1, #keys do check_shapes(keys[i], stored(self, keys[i], "KVStore:push", 2), vals[i],
    "KVStore:push", "value", 2) end
  local merged = {}
  for i = 1, #keys do merged[i] = self:_reduce(keys[i], vals[i]) end
  self:_push_merged(keys, merged)
end

-- Each key's pulled value copied into every one of its outs (converted to the out's
-- storage type, as MXNet's CopyFromTo).
local function deliver(vals, outs)
  for i = 1, #vals do
    local v, o = vals[i], outs[i]
    for j = 1, #o do
      local st = o[j]:stype()
      if v:stype() ~= st then v = nd.cast_storage(v, { stype = st }) end
      v:copyto(o[j])
    end
  end
end

local warned_sparse_pull = false

-- pull(key(s), out(s)[, priority[, ignore_sparse=true]]): the stored value into every
-- out. As MXNet, a row_sparse out is skipped (with a warning once) unless ignore_sparse
-- is false: its rows come with row_sparse_pull.
function KVStore:pull(key, out, priority, ignore_sparse)
  if priority ~= nil and type(priority) ~= "number" then
    error("KVStore:pull: priority must be a number, got " .. type(priority), 2)
  end
  if ignore_sparse ~= nil and type(ignore_sparse) ~= "boolean" then
    error("KVStore:pull: ignore_sparse must be a boolean, got " .. type(ignore_sparse), 2)
  end
  if out == nil then error("KVStore:pull: out is required", 2) end
  local keys, outs = normalise(self, key, out, "KVStore:pull", "out", 2)
  for i = 1, #keys do
    check_shapes(keys[i], stored(self, keys[i], "KVStore:pull", 2), outs[i], "KVStore:pull", "out", 2)
  end
  if ignore_sparse ~= false then
    local k2, o2 = {}, {}
    for i = 1, #keys do
      local kept = {}
      for _, o in ipairs(outs[i]) do
        if o:stype() == "row_sparse" then
          if not warned_sparse_pull then
            warned_sparse_pull = true
            io.stderr:write("Warning: non-default weights detected during kvstore pull. This "
              .. "call has been ignored. Please make sure to use row_sparse_pull with row_ids.\n")
          end
        else
          kept[#kept + 1] = o
        end
      end
      if #kept > 0 then k2[#k2 + 1], o2[#o2 + 1] = keys[i], kept end
    end
    if #k2 == 0 then return end
    keys, outs = k2, o2
  end
  deliver(self:_pull_values(keys), outs)
end

-- The sorted unique 0-based row ids of ids (an integer-valued NDArray) for a key of
-- `rows` rows: an int64 tensor; an id outside the rows is an error.
local function unique_rows(ids, rows, k, level)
  local list = ids:reshape({ -1 }):tolist()
  table.sort(list)
  local u, n = {}, 0
  for i = 1, #list do
    local v = list[i]
    if v % 1 ~= 0 or v < 0 or v >= rows then
      error(string.format("KVStore:row_sparse_pull: key %s: row id %s is outside the key's %d "
        .. "rows (0-based ids)", key_str(k), tostring(v), rows), level + 1)
    end
    if n == 0 or u[n] ~= v then n = n + 1; u[n] = v end
  end
  return u
end
M._unique_rows = unique_rows

-- _row_sparse_value(key, ids) -> a row_sparse NDArray of the stored value's rows ids (a
-- sorted list of unique 0-based ids; base: from the local store; dist_async asks the
-- servers). A row_sparse stored value gives the listed rows it stores.
function KVStore:_row_sparse_value(key, ids)
  local s = self._store[key]
  if #ids == 0 then
    return nd.sparse.zeros("row_sparse", s:shape(), { dtype = s:dtype(), ctx = s:context() })
  end
  local idt = nd.array(ids, { dtype = "int64" })
  if s:stype() == "row_sparse" then return nd.sparse_retain(s, idt) end
  if s:stype() ~= "default" then s = nd.cast_storage(s) end
  local rows = nd.take(s, idt + 1, { axis = 1 })
  return nd.sparse.row_sparse_array({ rows, idt }, { shape = s:shape(), ctx = s:context() })
end

-- row_sparse_pull(key(s), out(s), {row_ids=, priority=}) or (key, out, priority, row_ids):
-- MXNet's KVStore.row_sparse_pull: the stored value's rows listed in row_ids (0-based
-- integer NDArrays, repeats allowed) into row_sparse outs. row_ids is one NDArray per
-- out (a list per key for several outs) or one for all of a key's outs. Only the
-- requested rows are read (and, for dist_async, sent).
function KVStore:row_sparse_pull(key, out, priority, row_ids)
  local who = "KVStore:row_sparse_pull"
  if type(priority) == "table" and not is_tensor(priority) then
    class.check_opts(who, priority, { row_ids = true, priority = true }, 2)
    priority, row_ids = priority.priority, priority.row_ids
  end
  if priority ~= nil and type(priority) ~= "number" then
    error(who .. ": priority must be a number, got " .. type(priority), 2)
  end
  if out == nil then error(who .. ": out is required", 2) end
  if row_ids == nil then error(who .. ": row_ids is required (the 0-based rows to pull)", 2) end
  local keys, outs = normalise(self, key, out, who, "out", 2)
  local single = type(key) ~= "table"
  local _, idl = normalise(self, key, single and row_ids or row_ids, who, "row_ids", 2)
  local reqs = {}
  for i = 1, #keys do
    local k = keys[i]
    local s = stored(self, k, who, 2)
    check_shapes(k, s, outs[i], who, "out", 2)
    local il = idl[i]
    if #il ~= 1 and #il ~= #outs[i] then
      error(string.format("%s: key %s has %d outs but %d row_ids (one per out, or one for all)",
        who, key_str(k), #outs[i], #il), 2)
    end
    for j, o in ipairs(outs[i]) do
      if o:stype() ~= "row_sparse" then
        error(string.format("%s: out %d for key %s is %s; row_sparse_pull fills row_sparse outs "
          .. "(pull fills dense ones)", who, j, key_str(k), o:stype()), 2)
      end
    end
    local rows = s:shape()[1]
    local per = {}
    for j = 1, #il do per[j] = unique_rows(il[j], rows, k, 2) end
    reqs[i] = per
  end
  for i = 1, #keys do
    local per, o = reqs[i], outs[i]
    local got = {}
    for j = 1, #o do
      local r = got[#per == 1 and 1 or j]
      if r == nil then
        r = self:_row_sparse_value(keys[i], per[#per == 1 and 1 or j])
        got[#per == 1 and 1 or j] = r
      end
      r:copyto(o[j])
    end
  end
end

-- pushpull(key(s), value(s)[, out(s)[, priority]]): push then pull (out = value when nil).
function KVStore:pushpull(key, value, out, priority)
  if priority ~= nil and type(priority) ~= "number" then
    error("KVStore:pushpull: priority must be a number, got " .. type(priority), 2)
  end
  local keys, vals = normalise(self, key, value, "KVStore:pushpull", "value", 2)
  local _, outs = normalise(self, key, out or value, "KVStore:pushpull", "out", 2)
  for i = 1, #keys do
    local s = stored(self, keys[i], "KVStore:pushpull", 2)
    check_shapes(keys[i], s, vals[i], "KVStore:pushpull", "value", 2)
    check_shapes(keys[i], s, outs[i], "KVStore:pushpull", "out", 2)
  end
  local merged = {}
  for i = 1, #keys do merged[i] = self:_reduce(keys[i], vals[i]) end
  self:_push_merged(keys, merged)
  deliver(self:_pull_values(keys), outs)
end

-- broadcast(key(s), value(s), out(s)): init with value, then pull into out.
function KVStore:broadcast(key, value, out, priority)
  if out == nil then error("KVStore:broadcast: out is required", 2) end
  local ok, err = pcall(self.init, self, key, value)
  if not ok then error(tostring(err):gsub("KVStore:init", "KVStore:broadcast"), 2) end
  ok, err = pcall(self.pull, self, key, out, priority)
  if not ok then error(tostring(err):gsub("KVStore:pull", "KVStore:broadcast"), 2) end
end

-- set_optimizer(opt): the store runs opt on push (for dist_async on the servers).
function KVStore:set_optimizer(opt)
  if type(opt) ~= "table" or type(opt.update) ~= "function" then
    error("KVStore:set_optimizer: expected an Optimizer (mx.optimizer.create(...)), got "
      .. type(opt), 2)
  end
  self._optimizer = opt
  self:_set_optimizer(opt)
end

-- set_updater(fn): fn(key, merged_value, stored_value) updates stored_value in place.
function KVStore:set_updater(fn)
  if type(fn) ~= "function" then
    error("KVStore:set_updater: expected a function(key, value, stored), got " .. type(fn), 2)
  end
  self._updater = fn
  self._optimizer = nil
end
KVStore._set_updater = KVStore.set_updater

function KVStore:barrier() self:_barrier() end
function KVStore:close() self:_close() end

-- set_gradient_compression{type='2bit', threshold=0.5}
function KVStore:set_gradient_compression(params)
  if type(params) ~= "table" then
    error("KVStore:set_gradient_compression: expected a table {type='2bit', threshold=}, got "
      .. type(params), 2)
  end
  class.check_opts("KVStore:set_gradient_compression", params, { type = true, threshold = true }, 2)
  local t = params.type
  if t == "none" then self._gc = nil; return end
  if t ~= "2bit" then
    error("KVStore:set_gradient_compression: unknown type " .. tostring(t)
      .. " (supported: '2bit', 'none')", 2)
  end
  local th = params.threshold or 0.5
  if type(th) ~= "number" or th ~= th or th <= 0 then
    error("KVStore:set_gradient_compression: threshold must be a positive number, got "
      .. tostring(th), 2)
  end
  self._gc = { type = t, threshold = th }
  self._residual = {}
end

---------------------------------------------------------------- optimizer states
-- A header of plain "key=kind:value" lines (numbers, strings, booleans; nested tables
-- as dotted keys), stored as a uint8 array; shared with gluon.Trainer's state files.
local function encode(t, out, prefix)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = t[k]
    local key = prefix .. tostring(k)
    if type(v) == "table" then
      encode(v, out, key .. ".")
    elseif type(v) == "number" then
      out[#out + 1] = key .. "=n:" .. string.format("%.17g", v)
    elseif type(v) == "string" then
      out[#out + 1] = key .. "=s:" .. v:gsub("[\n\\]", { ["\n"] = "\\n", ["\\"] = "\\\\" })
    elseif type(v) == "boolean" then
      out[#out + 1] = key .. "=b:" .. tostring(v)
    end
  end
  return out
end

local function decode(text)
  local t = {}
  for line in text:gmatch("[^\n]+") do
    local key, kind, val = line:match("^([^=]+)=([nsb]):(.*)$")
    if key then
      local v
      if kind == "n" then v = tonumber(val)
      elseif kind == "b" then v = val == "true"
      else v = val:gsub("\\(.)", { n = "\n", ["\\"] = "\\" }) end
      local node = t
      local parts = {}
      for part in key:gmatch("[^.]+") do parts[#parts + 1] = part end
      for i = 1, #parts - 1 do
        local k = tonumber(parts[i]) or parts[i]
        node[k] = node[k] or {}
        node = node[k]
      end
      local last = parts[#parts]
      node[tonumber(last) or last] = v
    end
  end
  return t
end

function M._header_array(t)
  local text = table.concat(encode(t, {}, ""), "\n")
  local bytes = {}
  for i = 1, #text do bytes[i] = text:byte(i) end
  if #bytes == 0 then bytes[1] = 10 end
  return nd.array(bytes, { dtype = "uint8" })
end

function M._header_read(arr)
  local chars = {}
  for i, b in ipairs(arr:tolist()) do chars[i] = string.char(b) end
  return decode(table.concat(chars))
end

local KV_HEADER = "__kvstore_header__"

-- save_optimizer_states(fname[, dump_optimizer]): the local updater's states (and with
-- dump_optimizer the optimizer's counters and learning rate) in MXNet's .params format.
function KVStore:save_optimizer_states(fname, dump_optimizer)
  if type(fname) ~= "string" then
    error("KVStore:save_optimizer_states: fname must be a string, got " .. type(fname), 2)
  end
  local opt = self._optimizer
  if opt == nil then
    error("KVStore:save_optimizer_states: no optimizer is set (call set_optimizer first)", 2)
  end
  local h = { optimizer = opt.__name or "", key_kind = self._key_kind or "number", keys = {} }
  if dump_optimizer then h.data = opt:get_state_data() end
  local arrays = {}
  local n = 0
  local ks = {}
  for k in pairs(self._states) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(ks) do
    n = n + 1
    h.keys[n] = tostring(k)
    for j, s in ipairs(self._states[k]) do arrays[n .. ":" .. j] = s end
  end
  h.nkeys = n
  arrays[KV_HEADER] = M._header_array(h)
  nd.save(fname, arrays)
end

function KVStore:load_optimizer_states(fname)
  local opt = self._optimizer
  if opt == nil then
    error("KVStore:load_optimizer_states: no optimizer is set (call set_optimizer first)", 2)
  end
  local ok, loaded = pcall(nd.load, fname)
  if not ok then error("KVStore:load_optimizer_states: " .. tostring(loaded), 2) end
  local ha = loaded[KV_HEADER]
  if ha == nil then
    error("KVStore:load_optimizer_states: " .. fname .. " is not a kvstore state file", 2)
  end
  local h = M._header_read(ha)
  if h.optimizer ~= (opt.__name or "") then
    error(string.format("KVStore:load_optimizer_states: the file was saved by optimizer %s, "
      .. "this store uses %s", tostring(h.optimizer), tostring(opt.__name)), 2)
  end
  if h.data then opt:set_state_data(h.data) end
  local states = {}
  for name, t in pairs(loaded) do
    local i, j = name:match("^(%d+):(%d+)$")
    if i then
      local ks = h.keys and h.keys[tonumber(i)]
      if ks == nil then error("KVStore:load_optimizer_states: state for unknown key #" .. i, 2) end
      local k = h.key_kind == "number" and tonumber(ks) or ks
      local s = self._store[k]
      states[k] = states[k] or {}
      states[k][tonumber(j)] = nd.keep(s and t:to(s:context()) or t)
    end
  end
  for k, st in pairs(states) do self._states[k] = st end
end

---------------------------------------------------------------- create
local LOCAL = { ["local"] = true, device = true, local_update_cpu = true,
  local_allreduce_cpu = true, local_allreduce_device = true }

-- create(name='local'[, opts]): opts are the backend's (dist: timeouts and the like).
function M.create(name, opts)
  name = name or "local"
  if type(name) ~= "string" then
    error("mx.kv.create: the type must be a string ('local', 'device', 'nccl', 'dist_sync', "
      .. "'dist_device_sync', 'dist_async'), got " .. type(name), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("mx.kv.create: options must be a table, got " .. type(opts), 2)
  end
  if LOCAL[name] then
    local kind = name == "local_allreduce_device" and "device"
      or (name == "device" and "device" or "local")
    return KVStore._make(KVStore, kind, opts)
  end
  -- the other stores load with their first use: each needs an optional library
  -- (libmx_nccl, libmx_mpi, libzmq) and extends this file's KVStore
  if name == "nccl" then
    if context.num_gpus() == 0 then
      error("mx.kv.create: 'nccl' needs a GPU and this machine has none (use 'device' or "
        .. "'local' on CPUs)", 2)
    end
    -- lua/mx/kvstore/nccl.lua: raises the build hint when libmx_nccl is not built
    local kv = require("mx.kvstore.nccl").new(name, opts)
    return kv
  end
  if name == "dist_sync" or name == "dist_device_sync" then
    local kv = require("mx.kvstore.dist_sync").new(name, opts)
    return kv
  end
  if name == "dist_async" then
    local kv = require("mx.kvstore.dist_async").new(name, opts)
    return kv
  end
  error("mx.kv.create: unknown kvstore type " .. string.format("%q", name) .. " (known: local, "
    .. "device, nccl, dist_sync, dist_device_sync, dist_async)", 2)
end

return M
