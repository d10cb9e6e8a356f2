-- mx.gluon.data.DataLoader — batches from a dataset.
--
--   local loader = gluon.data.DataLoader(ds, {batch_size = 64, shuffle = true})
--   for data, label in loader:iter() do ... end      -- one value per dataset field
--   loader:len()                                     -- batches per pass
--
-- Options (MXNet's): batch_size, shuffle, sampler, batch_sampler, last_batch
-- ("keep" | "discard" | "rollover"), batchify_fn, num_workers, prefetch (default
-- 2 * num_workers), timeout (seconds, default 120), thread_pool and pin_memory /
-- pin_device_id (accepted; see below), plus `seed` (the shuffle's seed; default:
-- drawn from mx.random each pass). The dataset may also be a Lua list (a
-- SimpleDataset) or an NDArray (an ArrayDataset of its rows), as in MXNet.
--
-- How a batch is made (`_fetch`, a pure function of the dataset and a list of
-- indices): with the default batchify_fn and a dataset that can gather batches
-- itself (`ds:_get_batch`: ArrayDataset, the vision datasets, and lazy transforms
-- of them whose transform is batchable), the fields are gathered straight into
-- batch tensors (one memcpy per sample and field) and batchable transforms run
-- once per batch. Otherwise each sample is read with ds:get(i) and batchify_fn
-- stacks them (again one copy per sample into a preallocated batch).
--
-- Every iter() is a pass of its own, also with workers (MXNet's behaviour): two
-- iterators of one loader may be interleaved. num_workers is at most
-- DataLoader.max_workers() (4 per core, at least 16); the sampler's indices must be
-- whole numbers in 1..#dataset.
--
-- Worker threads (num_workers > 0; docs/design/data.md "Worker threads"): OS threads
-- (libmxworker), each with its own LuaJIT state that rebuilds the dataset and
-- batchify_fn from recipes (ds:_recipe(); tensors travel as retained C handles, Lua
-- functions through string.dump with their upvalues checked) and runs _fetch. The
-- main state pushes index lists to worker (batch - 1) % num_workers + 1 and takes the
-- batch tensors back through C queues (no copy), in sampler order. thread_pool=true
-- is the same (workers are always threads); pin_memory is a no-op (CPU only). The
-- workers start at the first iter() and live until loader:close() or collection.
local lib = require("mx.core.lib")
local dataset = require("mx.gluon.data.dataset")
local sampler = require("mx.gluon.data.sampler")
local batchify = require("mx.gluon.data.batchify")
local nd = require("mx.nd")
local H = require("mx.nd.handles")

local ffi, C = lib.ffi, lib.C
local class = dataset._class
local type, error, tostring, select = type, error, tostring, select
local is_tensor = nd.is_tensor

local DataLoader = class("DataLoader")

-- The cores online (sysconf(_SC_NPROCESSORS_ONLN), 84 on Linux); 1 if unknown.
local ncores
do
  local ok = pcall(ffi.cdef, "long sysconf(int name);")
  local n = ok and tonumber(ffi.C.sysconf(84)) or 1
  n = n >= 1 and n or 1
  ncores = function() return n end
end

-- The most workers a loader may have: 4 per core, at least 16 (a worker waits on its
-- dataset's IO as often as it computes). More is an error, not a machine brought down
-- by a million threads.
function DataLoader.max_workers() return math.max(16, 4 * ncores()) end

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
  if is_tensor(ds) then
    ds = dataset.ArrayDataset.new(ds)
  elseif type(ds) == "table" and getmetatable(ds) == nil and ds.get == nil then
    ds = dataset.SimpleDataset.new(ds)
  end
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
    error("DataLoader: num_workers must be a non-negative integer, got " .. tostring(nw), 2)
  end
  local cap = DataLoader.max_workers()
  if nw > cap then
    error(string.format("DataLoader: num_workers = %d is above the limit of %d (4 x the %d cores "
      .. "of this machine, at least 16: each worker is an OS thread with its own Lua state)",
      nw, cap, ncores()), 2)
  end
  local prefetch = opts.prefetch
  if prefetch == nil then prefetch = 2 * nw end
  if type(prefetch) ~= "number" or prefetch < 0 or prefetch % 1 ~= 0 then
    error("DataLoader: prefetch must be a non-negative integer, got " .. tostring(prefetch), 2)
  end
  local timeout = opts.timeout == nil and 120 or opts.timeout
  if type(timeout) ~= "number" or timeout ~= timeout or timeout <= 0 then
    error("DataLoader: timeout must be a positive number of seconds, got " .. tostring(timeout), 2)
  end
  local self = setmetatable({ _dataset = ds, _batchify = opts.batchify_fn, _num_workers = nw,
    _prefetch = math.max(prefetch, nw, 1), _timeout = timeout }, DataLoader)
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

-- The batch sampler's indices, checked where they enter: a whole number in 1..len each
-- (a 1.5 would read across rows of the gathered tensors, a NaN anywhere).
local function check_indices(idx, n, len, batch, level)
  if type(idx) ~= "table" then
    error("DataLoader: the batch sampler gave a " .. type(idx) .. " for batch " .. batch
      .. " (expected a list of sample indices)", level + 1)
  end
  n = n or #idx
  if type(n) ~= "number" or n < 0 or n % 1 ~= 0 or n > #idx then
    error("DataLoader: the batch sampler gave a size of " .. tostring(n) .. " for batch " .. batch
      .. " with " .. #idx .. " indices", level + 1)
  end
  for b = 1, n do
    local i = idx[b]
    if type(i) ~= "number" or i % 1 ~= 0 or i < 1 or i > len then
      error(string.format("DataLoader: the sampler gave index %s at position %d of batch %d; "
        .. "indices are whole numbers in 1..%d (the dataset's length)", tostring(i), b, batch,
        len), level + 1)
    end
  end
  return n
end

-- The batch for indices idx[1..n], as one value per field.
function DataLoader._fetch(self, idx, n)
  local ds = self._dataset
  local bf = self._batchify
  if bf == nil and ds._get_batch then
    local r = pack(ds:_get_batch(idx, n))
    if r.n > 0 and r[1] ~= nil then return unpack(r, 1, r.n) end
  end
  local samples = {}
  local nf
  for b = 1, n do
    local s = pack(ds:get(idx[b]))
    nf = nf or s.n
    if s.n ~= nf then
      error(string.format("DataLoader: sample %d (index %s) has %d field%s where sample %d (index "
        .. "%s) has %d: a dataset must return the same fields for every sample", b, tostring(idx[b]),
        s.n, s.n == 1 and "" or "s", 1, tostring(idx[1]), nf), 2) -- (tail-called: the loop's line)
    end
    samples[b] = s.n == 1 and s[1] or s
  end
  local out = (bf or batchify.default)(samples)
  if type(out) == "table" and not is_tensor(out) then return unpack(out, 1, out.n or #out) end
  return out
end

---------------------------------------------------------------- worker threads
-- docs/design/data.md "Worker threads". The dataset (and a custom batchify_fn) are
-- encoded as Lua source the worker state runs: T(handle) a tensor retained for the
-- worker (shared storage), R{module=, ctor=, args=} a recipe, M(name) a module,
-- F(bytecode, upvalues) a Lua function from string.dump whose upvalues are encoded
-- the same way (each worker gets copies: upvalues shared between closures are not
-- shared there, and globals are the worker's own standard ones).
local W -- libmxworker, loaded on first use
local wrap, uintptr = H._wrap, ffi.typeof("uintptr_t")
local INT64 = nd.dtype_code("int64")
local SLICE = 0.1

local function wlib(level)
  if W then return W end
  local path = package.searchpath("mx.libmxworker", package.cpath)
  if not path then
    error("DataLoader: num_workers > 0 needs libmxworker (mx/libmxworker.so on package.cpath, "
      .. "built with LuaJIT's headers: libluajit-5.1-dev); use num_workers = 0", level + 1)
  end
  ffi.cdef [[
    typedef struct mxw_thread mxw_thread;
    int mxw_start(const char *path, const char *cpath, const char *arg, mxw_thread **out, char *err);
    void mxw_cancel(mxw_thread *t);
    const char *mxw_error(mxw_thread *t);
    int mxw_finished(mxw_thread *t);
    int mxw_join(mxw_thread *t, double grace_s);
    int mxw_live(void);
  ]]
  W = ffi.load(path)
  return W
end

-- Worker threads alive in the process (0 before any loader used workers).
function DataLoader._live_workers() return W and W.mxw_live() or 0 end

local function num(v) return string.format("%.17g", v) end

local function module_names()
  local m = {}
  for name, mod in pairs(package.loaded) do
    if type(mod) == "table" or type(mod) == "function" then m[mod] = name end
  end
  return m
end

local function cannot(path, what)
  error({ msg = "DataLoader: num_workers > 0 needs a dataset the worker threads can rebuild, "
    .. "but " .. path .. " is " .. what .. " (give it a recipe: "
    .. "require('mx.gluon.data.dataset').recipe(module, ctor, ...), or use num_workers = 0)" })
end

local encode
local function encode_table(v, path, ctx)
  if ctx.seen[v] then cannot(path, "a table that contains itself") end
  ctx.seen[v] = true
  local parts = {}
  for k, x in pairs(v) do
    local ks = type(k) == "string" and string.format("%q", k) or
      (type(k) == "number" and num(k)) or cannot(path, "a table with a " .. type(k) .. " key")
    parts[#parts + 1] = "[" .. ks .. "]=" .. encode(x, path .. "[" .. tostring(k) .. "]", ctx)
  end
  ctx.seen[v] = nil
  return "{" .. table.concat(parts, ",") .. "}"
end

encode = function(v, path, ctx)
  local tv = type(v)
  if tv == "nil" or tv == "boolean" then return tostring(v) end
  if tv == "number" then
    if v ~= v then return "(0/0)" end
    if v == math.huge then return "(1/0)" end
    if v == -math.huge then return "(-1/0)" end
    return num(v)
  end
  if tv == "string" then return string.format("%q", v) end
  if is_tensor(v) then
    -- every worker state holds it too: its ops go through the engine's ordering
    C.mx_tensor_share(v.h)
    C.mx_tensor_retain(v.h)
    ctx.handles[#ctx.handles + 1] = v.h
    return "T(" .. num(tonumber(ffi.cast(uintptr, v.h))) .. ")"
  end
  local mname = ctx.modules[v]
  if mname then return "M(" .. string.format("%q", mname) .. ")" end
  if tv == "table" then
    local r = rawget(v, "_recipe_value")
    if r == nil and v._fields ~= nil and v._nf ~= nil and type(v.get) == "function" then
      r = dataset.ArrayDataset._recipe(v) -- an ArrayDataset or a subclass: share its arrays
    end
    if r == nil and type(v._recipe) == "function" then r = v:_recipe() end
    if r ~= nil then
      local args = r.args or (r.opts ~= nil and { n = 1, r.opts }) or { n = 0 }
      if args.n == nil then args = { n = #args, unpack(args) } end
      local parts = { "n=" .. num(args.n) }
      for k = 1, args.n do
        parts[k + 1] = encode(args[k], string.format("%s (%s argument %d)", path, r.ctor, k), ctx)
      end
      return "R{module=" .. string.format("%q", r.module) .. ",ctor=" .. string.format("%q", r.ctor)
        .. ",args={" .. table.concat(parts, ",") .. "}}"
    end
    if getmetatable(v) ~= nil then
      cannot(path, "an object (" .. tostring(v._class_name or v._name or "a table with a "
        .. "metatable") .. ") without a recipe")
    end
    return encode_table(v, path, ctx)
  end
  if tv == "function" then
    local ok, code = pcall(string.dump, v)
    if not ok then cannot(path, "a C function") end
    if ctx.seen[v] then cannot(path, "a function that refers to itself (a recursive closure)") end
    ctx.seen[v] = true
    local ups, i = {}, 1
    while true do
      local name, val = debug.getupvalue(v, i)
      if name == nil then break end
      ups[i] = encode(val, path .. " (upvalue '" .. name .. "')", ctx)
      i = i + 1
    end
    ctx.seen[v] = nil
    return "F(" .. string.format("%q", code) .. ",{n=" .. (i - 1) .. "," .. table.concat(ups, ",")
      .. "})"
  end
  cannot(path, "a " .. tv)
end

local function release_handles(hs)
  for k = 1, #hs do C.mx_tensor_release(hs[k]) end
end

-- Closes the queues, cancels and joins the workers (a worker stuck in C longer than
-- the grace is detached: it frees itself when it returns). Idempotent.
local function shutdown(pool)
  if pool.closed then return end
  pool.closed = true
  for w = 1, pool.nw do C.mx_queue_close(pool.jobq[w]) end
  C.mx_queue_close(pool.resq)
  for w = 1, #pool.threads do W.mxw_cancel(pool.threads[w]) end
  for w = 1, #pool.threads do W.mxw_join(pool.threads[w], pool.grace) end
  pool.threads, pool.owner = {}, {}
  for w = 1, pool.nw do C.mx_queue_release(pool.jobq[w]) end
  C.mx_queue_release(pool.resq)
end

local function start_pool(self, level)
  local Wl = wlib(level + 1)
  local nw = self._num_workers
  local pool = { nw = nw, prefetch = self._prefetch, jobq = {}, threads = {},
    idx = {}, owner = setmetatable({}, { __mode = "v" }), next_id = 0,
    grace = math.min(self._timeout, 10) }
  pool.resq = C.mx_queue_new(pool.prefetch)
  for w = 1, nw do pool.jobq[w] = C.mx_queue_new(pool.prefetch) end
  local base = sampler._draw_seed()
  local errbuf = ffi.new("char[256]")
  local tbuf = ffi.new("mxw_thread *[1]")
  for w = 1, nw do
    local ctx = { handles = {}, modules = module_names(), seen = {} }
    local ok, src = pcall(function()
      local bf = self._batchify
      return string.format("return {jobs=%s,results=%s,wid=%d,seed=%s,dataset=function() return %s "
        .. "end,batchify=%s}", num(tonumber(ffi.cast(uintptr, pool.jobq[w]))),
        num(tonumber(ffi.cast(uintptr, pool.resq))), w, num((base + w * 1000003) % 4503599627370496),
        encode(self._dataset, "the dataset", ctx),
        bf and ("function() return " .. encode(bf, "batchify_fn", ctx) .. " end") or "nil")
    end)
    if not ok then
      release_handles(ctx.handles)
      shutdown(pool)
      error(type(src) == "table" and src.msg or tostring(src), level + 1)
    end
    C.mx_queue_retain(pool.jobq[w]) -- the worker's references (its state releases them)
    C.mx_queue_retain(pool.resq)
    if Wl.mxw_start(package.path, package.cpath, src, tbuf, errbuf) ~= 0 then
      release_handles(ctx.handles)
      C.mx_queue_release(pool.jobq[w])
      C.mx_queue_release(pool.resq)
      shutdown(pool)
      error("DataLoader: cannot start worker " .. w .. ": " .. ffi.string(errbuf), level + 1)
    end
    pool.threads[w] = tbuf[0]
  end
  self._pool = pool
  -- collected with the loader (the finalizer must not reference the sentinel itself)
  self._pool_gc = ffi.gc(ffi.new("char[1]"), function() shutdown(pool) end)
  return pool
end

local shapebuf = ffi.new("int64_t[1]")
local hbuf = ffi.new("mx_tensor*[1]")
local jitem = ffi.new("mx_queue_item")
local ritem = ffi.new("mx_queue_item")

-- Queues job `id` (indices idx[1..n]) for its worker. A full job queue (the passes of
-- several iterators at once) is waited out by taking results meanwhile: the workers
-- may be blocked on a full result queue.
local take_one
local function push_job(pool, id, idx, n, timeout, level)
  shapebuf[0] = n
  if C.mx_tensor_empty(1, shapebuf, INT64, 1, 0, hbuf) ~= 0 then
    error("DataLoader: " .. ffi.string(C.mx_last_error()), level + 1)
  end
  local p = ffi.cast("int64_t *", C.mx_tensor_data(hbuf[0]))
  for b = 1, n do p[b - 1] = idx[b] end
  local q = pool.jobq[(id - 1) % pool.nw + 1]
  local waited = 0
  while true do
    jitem.id, jitem.kind, jitem.n, jitem.t[0], jitem.msg = id, 0, 1, hbuf[0], nil
    local rc = C.mx_queue_push(q, jitem, 0)
    if rc == 0 then break end
    if rc ~= 1 or waited >= timeout then
      C.mx_tensor_release(hbuf[0])
      if rc == 1 then
        shutdown(pool)
        error(string.format("DataLoader: no worker took a job within timeout=%g s; the workers "
          .. "were stopped", timeout), level + 1)
      end
      error("DataLoader: the job queue refused a batch (code " .. rc .. ")", level + 1)
    end
    if not take_one(pool, SLICE, level + 1) then waited = waited + SLICE end
  end
  local copy = {}
  for b = 1, n do copy[b] = idx[b] end
  pool.idx[id] = copy
end

local function idx_str(idx)
  if not idx then return "?" end
  if #idx <= 16 then return table.concat(idx, ", ") end
  return table.concat(idx, ", ", 1, 16) .. ", ... (" .. #idx .. " samples)"
end

-- A stopped worker (its state's own error) or a rebuild failure: the pool is over.
local function check_workers(pool, level)
  for w = 1, #pool.threads do
    local t = pool.threads[w]
    if W.mxw_finished(t) ~= 0 then
      local msg = ffi.string(W.mxw_error(t))
      shutdown(pool)
      error("DataLoader: worker " .. w .. " stopped: " .. (msg ~= "" and msg or "(no message)"),
        level + 1)
    end
  end
end

-- Takes one result from the result queue (waiting at most `slice` s) into the pending
-- list of the pass that asked for it (pool.owner, weak: the result of a pass whose
-- iterator was collected is dropped). true when one came.
take_one = function(pool, slice, level)
  local rc = C.mx_queue_pop(pool.resq, ritem, slice)
  if rc == 2 then error("DataLoader: the loader was closed", level + 1) end
  if rc ~= 0 then
    check_workers(pool, level + 1)
    return false
  end
  local rid = tonumber(ritem.id)
  local r = { kind = ritem.kind, n = ritem.n }
  for k = 1, r.n do
    local t = ritem.t[k - 1]
    C.mx_tensor_adopt(t, lib.session) -- this state's GC accounts for the batch now
    r[k] = wrap(t)
    ritem.t[k - 1] = nil
  end
  ritem.n = 0
  if ritem.msg ~= nil then r.msg = ffi.string(ritem.msg) end
  C.mx_queue_item_clear(ritem)
  if rid == 0 then -- a worker could not rebuild the dataset
    shutdown(pool)
    error("DataLoader: " .. r.msg, level + 1)
  end
  local idx, pass = pool.idx[rid], pool.owner[rid]
  pool.idx[rid], pool.owner[rid] = nil, nil
  if pass then
    pass.outstanding = pass.outstanding - 1
    if r.kind ~= 0 then -- raised in its turn: earlier batches come first
      r.msg = string.format("DataLoader: worker %d failed on batch %d (sample indices %s): %s",
        (rid - 1) % pool.nw + 1, pass.pos[rid] or 0, idx_str(idx), r.msg)
    end
    pass.pending[rid], pass.npending = r, pass.npending + 1
  end
  return true
end

-- The result of job `id` of `pass`, raising a worker's error, a dead worker's or a
-- timeout.
local function wait_result(pool, pass, id, timeout, level)
  local waited = 0
  local slice = math.min(SLICE, timeout)
  while not pass.pending[id] do
    if not take_one(pool, slice, level + 1) then
      waited = waited + slice
      if waited >= timeout then
        local idx = pool.idx[id]
        shutdown(pool)
        error(string.format("DataLoader: worker %d gave no batch within timeout=%g s (batch %d, "
          .. "sample indices %s); the workers were stopped", (id - 1) % pool.nw + 1, timeout,
          pass.pos[id] or 0, idx_str(idx)), level + 1)
      end
    end
  end
  local r = pass.pending[id]
  pass.pending[id], pass.npending = nil, pass.npending - 1
  if r.kind ~= 0 then error(r.msg, level + 1) end
  return r
end

-- Each iter() is a pass of its own over the loader's workers, as in MXNet (and as with
-- num_workers = 0): two iterators may be interleaved, each gives every batch of its
-- pass in order, with at most `prefetch` jobs of its own in flight. Job ids are global
-- (pool.next_id) and each result goes to the pass that sent it; an iterator dropped
-- mid-pass (a `break`) is collected, and its batches still in flight are dropped as
-- they come back.
local function worker_iter(self)
  local pool = self._pool
  if pool == nil or pool.closed then pool = start_pool(self, 2) end
  local pass = { pending = {}, npending = 0, outstanding = 0, pos = {} }
  local sent, nsent = {}, 0 -- this pass's job ids, in batch order
  local it = self._batch_sampler:iter()
  local head, done, bad = 1, false, nil
  local timeout, prefetch = self._timeout, pool.prefetch
  local len = self._dataset:len()
  local function fill(level)
    -- in flight: jobs not back yet plus batches back early (waiting for their turn)
    while not done and pass.outstanding + pass.npending < prefetch do
      local idx, n = it()
      if idx == nil then done = true return end
      local ok, m = pcall(check_indices, idx, n, len, nsent + 1, 1)
      if not ok then -- raised in that batch's turn, after the batches before it
        done, bad = true, { pos = nsent + 1, msg = tostring(m) }
        return
      end
      n = m
      local id = pool.next_id + 1
      pool.next_id = id
      nsent = nsent + 1
      sent[nsent], pass.pos[id] = id, nsent
      pool.owner[id] = pass
      pass.outstanding = pass.outstanding + 1
      push_job(pool, id, idx, n, timeout, level + 1)
    end
  end
  local loader = self
  return function()
    -- the iterator keeps the loader (and so its workers) alive:
    -- `for x in DataLoader(ds, opts):iter()` holds no other reference to it
    if loader._pool ~= pool or pool.closed then
      error("DataLoader: this pass is over (the loader was closed)", 2)
    end
    fill(2)
    local id = sent[head]
    if id == nil then
      if bad and bad.pos == head then error(bad.msg, 2) end
      return nil
    end
    local r = wait_result(pool, pass, id, timeout, 2)
    sent[head], head = nil, head + 1
    pass.pos[id] = nil
    fill(2)
    if r.n == 1 then return r[1] end
    if r.n == 2 then return r[1], r[2] end
    return unpack(r, 1, r.n)
  end
end

-- for data, label in loader:iter() do ... end
function DataLoader.iter(self)
  if self._num_workers > 0 then
    return worker_iter(self)
  end
  local it = self._batch_sampler:iter()
  local len, batch = self._dataset:len(), 0
  return function()
    local idx, n = it()
    if idx == nil then return nil end
    batch = batch + 1
    return self:_fetch(idx, check_indices(idx, n, len, batch, 2))
  end
end

-- Stops and joins the worker threads now (they restart at the next iter()). Without
-- it they go when the loader is collected or the program ends.
function DataLoader.close(self)
  if self._pool then
    shutdown(self._pool)
    self._pool, self._pool_gc = nil, nil
  end
end

return DataLoader
