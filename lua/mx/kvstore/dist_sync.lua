-- mx.kvstore.dist_sync — the 'dist_sync' / 'dist_device_sync' kvstore: synchronous
-- data parallelism over Open MPI (libmx_mpi, core/dist/mx_mpi.h; docs/distributed.md
-- "dist_sync").
--
--   -- mpirun --enable-recovery -np 2 bin/mx train.lua   (tools/dist/mxrun -np 2 train.lua)
--   local kv = mx.kv.create("dist_sync", {timeout = 30})
--   kv:init(keys, params)        -- every worker starts from rank 0's values (broadcast)
--   kv:pushpull(keys, grads)     -- grads summed over all workers (and devices), in place
--
-- push sums each key over the local devices (the base class), then over the workers with
-- MPI allreduce; with set_optimizer every worker runs the same update on the same reduced
-- gradient (MXNet's update_on_kvstore: the weights stay identical everywhere), else the
-- sum is stored. pull copies the stored value. 2-bit compression (the base class) is
-- applied to each worker's merged gradient before the allreduce, error feedback kept per
-- worker.
--
-- Collectives are engine work: each allreduce is one mx_engine_push_fn writing its
-- tensors and one token tensor of this store, so they run in push order on every rank
-- (MPI needs the same collective order everywhere) while compute that does not touch
-- them proceeds; the update of a key waits only for its own bucket. Keys are bucketed
-- (opts.bucket_mb, default 4 MB, one dtype per bucket) in reverse key order — the last
-- layers' gradients, which backward finishes first, go first — fixed by the key list, so
-- every run reduces in the same order (bitwise the same result). Every collective has a
-- deadline (opts.timeout seconds, default $MX_KV_TIMEOUT or 30); a dead rank fails every
-- survivor's next sync point with a message naming it (see core/dist/mx_mpi.h).
local ffi = require("ffi")
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local class = require("mx.core.class")
local kvstore = require("mx.kvstore")
local context = require("mx.context")

local C = lib.C
local KVStore = kvstore.KVStore
local key_str = kvstore._key_str
local error, tostring, type, pcall, tonumber = error, tostring, type, pcall, tonumber

-- the C API of libmx_mpi: mx_mpi.h's FFI region (once per Lua state)
lib.cdef_header("mx_mpi.h", "mx_mpi_job")

local M = {}

local P -- libmx_mpi, loaded on the first dist_sync store
local function load(who, level)
  if P then return P end
  local path = package.searchpath("mx.libmx_mpi", package.cpath)
  if path == nil then
    error(who .. ": libmx_mpi.so is not built (configure with Open MPI installed: Debian's "
      .. "libopenmpi-dev; see docs/distributed.md)", level + 1)
  end
  local ok, l = pcall(ffi.load, path)
  if not ok then error(who .. ": cannot load " .. path .. ": " .. tostring(l), level + 1) end
  P = l
  return P
end
M._lib = function() return load("mx.kvstore.dist_sync", 2) end

local function check(rc, who, level)
  if rc ~= 0 then error(who .. ": " .. ffi.string(P.mx_mpi_last_error()), level + 1) end
end

local DistSync = class.extend(KVStore, "DistSync")
M.DistSync = DistSync

local OPTS = { timeout = true, bucket_mb = true }

-- new(name, opts): called by mx.kv.create (opts: timeout seconds, bucket_mb).
function M.new(name, opts)
  local who = "mx.kv.create('" .. name .. "')"
  opts = opts or {}
  class.check_opts(who, opts, OPTS, 3)
  local timeout = opts.timeout or 0
  if type(timeout) ~= "number" or timeout < 0 then
    error(who .. ": timeout must be a number of seconds >= 0, got " .. tostring(timeout), 3)
  end
  local mb = opts.bucket_mb or 4
  if type(mb) ~= "number" or mb ~= mb or mb <= 0 then
    error(who .. ": bucket_mb must be a positive number, got " .. tostring(mb), 3)
  end
  local lp = load(who, 3)
  check(lp.mx_mpi_init(timeout), who, 3)
  local self = KVStore._make(DistSync, name, opts)
  self.rank = lp.mx_mpi_rank()
  self.num_workers = lp.mx_mpi_size()
  self._timeout = timeout > 0 and timeout or lp.mx_mpi_default_timeout()
  self._bucket_bytes = mb * 2 ^ 20
  self._compress_merged = true -- compress each worker's merged value, then allreduce
  -- every collective writes this token: the engine runs them in push order
  self._token = nd.keep(nd.zeros({ 1 }))
  self._writes = ffi.new("mx_tensor*[?]", 65)
  self._bucket_out = ffi.new("mx_mpi_bucket*[1]")
  self._job_out = ffi.new("mx_mpi_job*[1]")
  self._pushed = 0 -- collectives queued so far (_guarded)
  return self
end

-- Raise the first asynchronous failure of this store's collectives at the caller.
function DistSync:_sync(who, level)
  local tok = self._token
  local ok, err = pcall(tok.wait_to_read, tok)
  if not ok then error(who .. ": " .. tostring(err):gsub("^[^:]*:%d+: ", ""), level + 1) end
end

-- One collective on one tensor through the engine (kind 0 allreduce, 1 broadcast,
-- 2 barrier, 3 stop: text says why). text: the key's name for 0/1 (the agreement's
-- messages name it).
local JOB_NAME = { [0] = "allreduce", "broadcast", "barrier", "stop" }
function DistSync:_job(kind, t, root, who, level, text)
  local out = self._job_out
  check(P.mx_mpi_job_new(kind, t and t.h or nil, root or 0, self._timeout, text, out), who,
    level + 1)
  local w = self._writes
  local n = 0
  if t then w[0] = t.h; n = 1 end
  w[n] = self._token.h
  self._pushed = self._pushed + 1
  local rc = C.mx_engine_push_fn("dist_sync." .. JOB_NAME[kind], P.mx_mpi_job_run, out[0],
    P.mx_mpi_job_free, 0, nil, n + 1, w, 1, 0, nil)
  if rc ~= 0 then error(who .. ": " .. ffi.string(C.mx_last_error()), level + 1) end
end

-- A local error (a wrong shape, an unknown key, a bad argument) raised before this rank
-- queued the call's collectives: the peers are about to run theirs and would wait for it.
-- A stop job takes their place (mx_mpi.h "Agreement"): every rank fails with one message
-- naming this rank and the error, then this rank raises it too.
local function bare(err)
  return (tostring(err):gsub("^[^\n]-:%d+: ", ""):gsub(" %[async op [^%]]*%]; queued at .*$", ""))
end
function DistSync:_guarded(who, f, ...)
  local pushed = self._pushed
  local ok, err = pcall(f, self, ...)
  if ok then return end
  local msg = bare(err)
  -- (an error once a collective was queued is that collective's, already shared)
  if self.num_workers > 1 and self._pushed == pushed then
    local okj, errj = pcall(self._job, self, 3, nil, 0, who, 1, msg)
    if okj then -- queued: its failure is raised at the token (it may have run inline)
      local tok = self._token
      okj, errj = pcall(tok.wait_to_read, tok)
    end
    if not okj then msg = who .. ": " .. bare(errj):gsub("^" .. who .. ": ", "") end
  end
  error(msg, 3)
end

function DistSync:init(key, value) self:_guarded("KVStore:init", KVStore.init, key, value) end
function DistSync:push(key, value, priority)
  self:_guarded("KVStore:push", KVStore.push, key, value, priority)
end
function DistSync:pushpull(key, value, out, priority)
  self:_guarded("KVStore:pushpull", DistSync._pushpull, key, value, out, priority)
end

-- init: every worker stores rank 0's values.
function DistSync:_init_values(keys, values)
  local out = {}
  for i = 1, #values do
    local v = values[i]:to(context.cpu(0)):copy()
    self:_job(1, v, 0, "KVStore:init", 3, key_str(keys[i]))
    out[i] = v
  end
  self:_sync("KVStore:init", 3)
  return out
end

-- Sum merged[i] over the workers, in place, bucketed in reverse key order. Returns
-- merged: the updates that read it are ordered after the allreduce by the engine.
-- level: where the user's line is (4 through the base's push/pushpull -> _push_merged).
-- A row_sparse value summed over the workers: only the stored rows travel. Every rank
-- learns every rank's row count (one allreduce of a count per rank), then each rank with
-- rows broadcasts its row ids and rows; every rank sums them in rank order (the same
-- result everywhere). Returns a new row_sparse NDArray.
function DistSync:_allreduce_rsp(key, m, level)
  local n, me = self.num_workers, self.rank
  local name = key_str(key)
  local c = {}
  for r = 1, n do c[r] = 0 end
  c[me + 1] = m:nnz()
  local counts = nd.array(c, { dtype = "int64" })
  self:_job(0, counts, 0, "KVStore:push", level + 1, name)
  self:_sync("KVStore:push", level + 1)
  c = counts:tolist()
  local shape = m:shape()
  local parts = {}
  for r = 0, n - 1 do
    local k = c[r + 1]
    if k > 0 then
      local idx, data
      if r == me then
        idx, data = m:indices(), m:data()
      else
        local ds = { k }
        for d = 2, #shape do ds[d] = shape[d] end
        idx = nd.empty({ k }, { dtype = "int64" })
        data = nd.empty(ds, { dtype = m:dtype() })
      end
      self:_job(1, idx, r, "KVStore:push", level + 1, name)
      self:_job(1, data, r, "KVStore:push", level + 1, name)
      parts[#parts + 1] = { data, idx }
    end
  end
  self:_sync("KVStore:push", level + 1)
  local sum
  for i = 1, #parts do
    local t = nd.sparse.row_sparse_array(parts[i], { shape = shape })
    sum = sum and nd.add(sum, t) or t
  end
  return sum or nd.sparse.zeros("row_sparse", shape, { dtype = m:dtype() })
end

function DistSync:_allreduce(keys, merged, level)
  if self.num_workers == 1 then return merged end
  level = level or 4
  -- row_sparse values first, in key order, then the dense ones bucketed
  local dkeys, dvals = {}, {}
  for j = 1, #merged do
    if merged[j]:stype() == "row_sparse" then
      merged[j] = self:_allreduce_rsp(keys[j], merged[j], level)
    else
      dkeys[#dkeys + 1], dvals[#dvals + 1] = keys[j], merged[j]
    end
  end
  self:_allreduce_dense(dkeys, dvals, level)
  return merged
end

function DistSync:_allreduce_dense(keys, merged, level)
  local cap = self._bucket_bytes
  local w = self._writes
  local i = #merged
  while i >= 1 do
    local dt = merged[i]:dtype()
    local n, bytes, names = 0, 0, {}
    while i >= 1 and n < 64 and merged[i]:dtype() == dt do
      local m = merged[i]
      if m:context().device_type ~= "cpu" then
        error("KVStore:push: dist_sync reduces CPU values; key " .. i .. " is on "
          .. tostring(m:context()), level)
      end
      local b = m:size() * tonumber(C.mx_dtype_size(C.mx_tensor_dtype(m.h)))
      if n > 0 and bytes + b > cap then break end
      w[n] = m.h
      names[n + 1] = key_str(keys[i]):gsub("\n", " ")
      n, bytes, i = n + 1, bytes + b, i - 1
    end
    local out = self._bucket_out
    check(P.mx_mpi_bucket_new(n, w, self._timeout, table.concat(names, "\n"), out),
      "KVStore:push", level)
    w[n] = self._token.h
    self._pushed = self._pushed + 1
    local rc = C.mx_engine_push_fn("dist_sync.allreduce", P.mx_mpi_bucket_run, out[0],
      P.mx_mpi_bucket_release, 0, nil, n + 1, w, 1, 0, nil)
    if rc ~= 0 then error("KVStore:push: " .. ffi.string(C.mx_last_error()), level) end
  end
  return merged
end

local function same_layout(a, s)
  local ah, sh = a.h, s.h
  if C.mx_tensor_stype(ah) ~= 0 or C.mx_tensor_stype(sh) ~= 0 then return false end
  local n = C.mx_tensor_ndim(ah)
  if n ~= C.mx_tensor_ndim(sh) or C.mx_tensor_dtype(ah) ~= C.mx_tensor_dtype(sh)
    or C.mx_tensor_dev_type(ah) ~= 1 then return false end
  for i = 0, n - 1 do
    if C.mx_tensor_dim(ah, i) ~= C.mx_tensor_dim(sh, i) then return false end
  end
  return true
end

-- pushpull(keys, grads) with no updater and no compression, one CPU value per key and
-- out = value (the gradient path): the values are summed over the workers in place (no
-- copy before the allreduce) and the sums stored. Anything else takes the base path,
-- which also reports every argument error (through _guarded).
function DistSync:_pushpull(key, value, out, priority)
  if self._updater or self._gc or self.num_workers == 1 or (out ~= nil and out ~= value)
    or value == nil then
    return KVStore.pushpull(self, key, value, out, priority)
  end
  local keys, vals = key, value
  if type(key) ~= "table" then keys, vals = { key }, { value } end
  if type(vals) ~= "table" or nd.is_tensor(vals) or #vals ~= #keys or #keys == 0 then
    return KVStore.pushpull(self, key, value, out, priority)
  end
  local merged, store = {}, self._store
  for i = 1, #keys do
    local v, s = vals[i], store[keys[i]]
    if type(v) == "table" and not nd.is_tensor(v) and #v == 1 then v = v[1] end
    if s == nil or not nd.is_tensor(v) or not same_layout(v, s) then
      return KVStore.pushpull(self, key, value, out, priority)
    end
    merged[i] = v
  end
  self:_allreduce_dense(keys, merged, 3)
  for i = 1, #keys do merged[i]:copyto(store[keys[i]]) end
end

function DistSync:_barrier()
  self:_job(2, nil, 0, "KVStore:barrier", 3)
  self:_sync("KVStore:barrier", 3)
end

-- allreduce(t): t summed over the workers in place (a helper for metrics and tests).
function DistSync:allreduce(t)
  if not nd.is_tensor(t) then
    error("KVStore:allreduce: expected an NDArray, got " .. type(t), 2)
  end
  self:_job(0, t, 0, "KVStore:allreduce", 2)
  self:_sync("KVStore:allreduce", 2)
  return t
end

-- wait(): sync point for every collective queued so far (raises their failure).
function DistSync:wait() self:_sync("KVStore:wait", 2) end

-- stats() -> {bytes=, seconds=, calls=}: totals of this process's collectives.
function M.stats()
  if P == nil then return { bytes = 0, seconds = 0, calls = 0 } end
  local b, s, c = ffi.new("int64_t[1]"), ffi.new("double[1]"), ffi.new("int64_t[1]")
  P.mx_mpi_stats(b, s, c)
  return { bytes = tonumber(b[0]), seconds = s[0], calls = tonumber(c[0]) }
end

function DistSync._close() end

return M
