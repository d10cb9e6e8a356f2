-- mx.gluon.data.worker — the main loop of a DataLoader worker state (docs/design/data.md
-- "Worker threads"). libmxworker's thread calls require("mx.gluon.data.worker")(arg, self)
-- in a fresh lua_State: `arg` is Lua source (made by the loader's encoder) returning the
-- job: its queues, its worker id and seed, and the dataset / batchify_fn recipes.
-- The loop pops index lists from its own job queue, runs DataLoader._fetch on the
-- rebuilt dataset and pushes the batch tensors (or the error with its traceback and
-- the sample indices) to the shared result queue. Waits are bounded slices so a
-- cancel from the loader is seen within 50 ms.
local ffi = require("ffi")
local lib = require("mx.core.lib")
local H = require("mx.nd.handles")
local random = require("mx.random")
local dataset = require("mx.gluon.data.dataset")
local DataLoader = require("mx.gluon.data.dataloader")

local C = lib.C
local SLICE = 0.05

return function(arg, self_ptr)
  local W = ffi.load(package.searchpath("mx.libmxworker", package.cpath))
  ffi.cdef [[
    typedef struct mxw_thread mxw_thread;
    int mxw_cancelled(mxw_thread *t);
  ]]
  local me = ffi.cast("mxw_thread *", ffi.cast("uintptr_t", self_ptr))
  local tensor_ptr = ffi.typeof("mx_tensor *")

  -- the decoder's vocabulary: T tensor handle, F dumped function, M module, R recipe
  local env = {}
  function env.T(h)
    -- the loader retained this handle for us; the wrapper gives it back on collection
    return H._wrap(ffi.cast(tensor_ptr, ffi.cast("uintptr_t", h)))
  end
  function env.M(name) return require(name) end
  function env.F(code, ups)
    local f = assert(loadstring(code, "=(DataLoader transform)"))
    for i = 1, ups.n do debug.setupvalue(f, i, ups[i]) end
    return f
  end
  function env.R(r)
    local f = require(r.module)[r.ctor]
    local args = r.args
    local obj = f(unpack(args, 1, args.n or #args))
    if type(obj) == "function" then -- as dataset.recipe does in the parent
      obj = setmetatable({ _fn = obj, _recipe_value = r }, dataset._RecipeFn)
    end
    return obj
  end
  local chunk = assert(loadstring(arg, "=(DataLoader job)"))
  setfenv(chunk, env)
  local job = chunk()

  -- the loader retained both queues for this worker: give them back when the state closes
  local jobs = ffi.gc(ffi.cast("mx_queue *", ffi.cast("uintptr_t", job.jobs)), C.mx_queue_release)
  local results = ffi.gc(ffi.cast("mx_queue *", ffi.cast("uintptr_t", job.results)),
    C.mx_queue_release)
  local item = ffi.new("mx_queue_item")
  local out = ffi.new("mx_queue_item")

  local function push(it)
    while true do
      local rc = C.mx_queue_push(results, it, SLICE)
      if rc == 0 then return true end
      if rc ~= 1 or W.mxw_cancelled(me) ~= 0 then
        C.mx_queue_item_clear(it) -- closed: nobody takes these any more
        return false
      end
    end
  end

  local function push_error(id, msg)
    ffi.fill(out, ffi.sizeof(out))
    out.id, out.kind, out.n, out.msg = id, 1, 0, ffi.cast("char *", msg)
    -- push copies msg; the Lua string stays alive across the call
    local rc
    repeat rc = C.mx_queue_push(results, out, SLICE)
    until rc ~= 1 or W.mxw_cancelled(me) ~= 0
    out.msg = nil
  end

  -- os.exit here would end the whole process, the main state with it: in a worker it
  -- raises instead, and the loader reports it like any error of the batch
  os.exit = function(code) -- luacheck: ignore 122
    error("os.exit(" .. tostring(code) .. ") called in a DataLoader worker: a worker cannot end "
      .. "the process", 2)
  end
  -- an error value that is not a string still says what it was
  local function traceback(e)
    if type(e) ~= "string" then
      local mt = getmetatable(e)
      local text = (mt and mt.__tostring) and tostring(e)
        or type(e) == "table" and (e.msg or e.message) or nil
      e = text and tostring(text) or ("a " .. type(e) .. " was raised as the error (no message)")
    end
    return debug.traceback(e, 2)
  end

  -- rebuild: a failure here is reported as the result of job 0 (the loader raises it)
  local ok, ds, bf = xpcall(function()
    random.seed(job.seed)
    math.randomseed(job.seed % 2147483647)
    local d = job.dataset()
    local b = job.batchify and job.batchify() or nil
    return d, b
  end, traceback)
  if not ok then
    push_error(0, "rebuilding the dataset in the worker failed: " .. tostring(ds))
    return
  end
  local fetch = DataLoader._fetch
  local loader = { _dataset = ds, _batchify = bf }
  local is_tensor = H.is_tensor

  local function pack(...) return { n = select("#", ...), ... } end
  local function run1(idx, n) return pack(fetch(loader, idx, n)) end

  while W.mxw_cancelled(me) == 0 do
    local rc = C.mx_queue_pop(jobs, item, SLICE)
    if rc == 2 then break end -- closed
    if rc == 0 then
      local id = item.id
      local t = item.t[0]
      local n = tonumber(C.mx_tensor_size(t))
      local p = ffi.cast("int64_t *", C.mx_tensor_data(t))
      local idx = {}
      for b = 1, n do idx[b] = tonumber(p[b - 1]) end
      C.mx_queue_item_clear(item)
      local okf, r = xpcall(run1, traceback, idx, n)
      if okf then
        -- results: tensors only, computed here (not left queued on the engine)
        local bad
        for k = 1, r.n do
          local v = r[k]
          if not is_tensor(v) then
            bad = "field " .. k .. " of the batch is a " .. type(v)
              .. " (with num_workers > 0 a batch must be tensors)"
            break
          end
          if C.mx_tensor_wait_to_read(v.h) ~= 0 then
            bad = ffi.string(C.mx_last_error())
            break
          end
        end
        if not bad and r.n > 8 then bad = "a batch has " .. r.n .. " fields (at most 8 with workers)" end
        if bad then
          push_error(id, bad)
        else
          ffi.fill(out, ffi.sizeof(out))
          out.id, out.kind, out.n = id, 0, r.n
          for k = 1, r.n do
            C.mx_tensor_retain(r[k].h) -- the queue's reference; ours goes with the wrapper
            out.t[k - 1] = r[k].h
          end
          if not push(out) then break end
        end
        r = nil -- luacheck: ignore 311
        -- the batch's wrappers here are garbage now; a small GC step per job keeps the
        -- worker's share of memory from growing until mx's byte-driven collection
        collectgarbage("step", 0)
      else
        push_error(id, tostring(r))
      end
    end
  end
end
