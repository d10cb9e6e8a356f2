-- mx.engine — the dependency engine's controls (docs/engine.md).
--
--   mx.engine.set("naive" | "threaded")   mode (MX_ENGINE=naive at start-up)
--   mx.engine.get()                       current mode name
--   mx.engine.set_num_threads(n)          thread budget for kernels (MX_NUM_THREADS)
--   mx.engine.set_num_workers(n)          CPU worker threads (MX_CPU_WORKER_NTHREADS)
--   mx.engine.set_inline_max(n)           ops touching <= n elements run inline
--   mx.engine.set_nan_check(on)           fail ops whose float outputs hold NaN
--   mx.engine.set_debug(on)               full tracebacks in async errors (MX_ENGINE_DEBUG)
--   mx.engine.stats()                     counters (inline/queued/skipped/failed ops...)
--   mx.engine.waitall()                   same as mx.nd.waitall()
local lib = require("mx.core.lib")
local nd = require("mx.nd")

local ffi, C = lib.ffi, lib.C
local error, type, tostring, tonumber = error, type, tostring, tonumber

local engine = {}

local MODES = { naive = 0, threaded = 1 }
local NAMES = { [0] = "naive", [1] = "threaded" }

-- Switching waits for every queued op first; an asynchronous error found on the
-- way is raised after the switch.
function engine.set(mode)
  local m = MODES[mode]
  if not m then
    error("engine.set: mode must be \"naive\" or \"threaded\", got " .. tostring(mode), 2)
  end
  if C.mx_engine_set_mode(m) ~= 0 then error(ffi.string(C.mx_last_error()), 2) end
end

function engine.get() return NAMES[C.mx_engine_get_mode()] end

-- Threads doing kernel work at once (engine workers x intra-op threads never exceed
-- it). n <= 0 or nil: the number of cores.
function engine.set_num_threads(n)
  if n ~= nil and (type(n) ~= "number" or n % 1 ~= 0) then
    error("engine.set_num_threads: expected an integer, got " .. tostring(n), 2)
  end
  C.mx_set_num_threads(n or 0)
end
function engine.get_num_threads() return C.mx_get_num_threads() end

-- CPU worker threads for queued ops (default 1, MX_CPU_WORKER_NTHREADS).
function engine.set_num_workers(n)
  if type(n) ~= "number" or n % 1 ~= 0 then
    error("engine.set_num_workers: expected an integer, got " .. tostring(n), 2)
  end
  if C.mx_engine_set_num_workers(n) ~= 0 then error(ffi.string(C.mx_last_error()), 2) end
end
function engine.get_num_workers() return C.mx_engine_get_num_workers() end

function engine.set_inline_max(n)
  if type(n) ~= "number" or n < 0 or n % 1 ~= 0 then
    error("engine.set_inline_max: expected a non-negative integer, got " .. tostring(n), 2)
  end
  C.mx_engine_set_inline_max(n)
end
function engine.get_inline_max() return tonumber(C.mx_engine_get_inline_max()) end

function engine.set_nan_check(on)
  if type(on) ~= "boolean" then
    error("engine.set_nan_check: expected a boolean, got " .. tostring(on), 2)
  end
  C.mx_engine_set_nan_check(on)
end
function engine.get_nan_check() return C.mx_engine_get_nan_check() end

-- Record a full Lua traceback (instead of file:line) for every queued op, shown
-- in asynchronous error messages (MX_ENGINE_DEBUG=1 at start-up).
function engine.set_debug(on)
  if type(on) ~= "boolean" then
    error("engine.set_debug: expected a boolean, got " .. tostring(on), 2)
  end
  nd._set_engine_debug(on)
end
function engine.get_debug() return nd._get_engine_debug() end

local stats_t = ffi.typeof("mx_engine_stats")
function engine.stats()
  local s = stats_t()
  C.mx_engine_get_stats(s)
  return {
    ops_inline = tonumber(s.ops_inline), ops_queued = tonumber(s.ops_queued),
    ops_skipped = tonumber(s.ops_skipped), ops_failed = tonumber(s.ops_failed),
    pending = tonumber(s.pending), workers = tonumber(s.workers),
  }
end

function engine.waitall()
  if C.mx_engine_wait_all() ~= 0 then error(ffi.string(C.mx_last_error()), 2) end
end
engine.wait_all = engine.waitall

return engine
