-- mx.profiler — per-op timing, MXNet's API:
--
--   mx.profiler.set_config{filename = "trace.json"}   where dump() writes
--   mx.profiler.set_state("run" | "stop")
--   mx.profiler.dump()          Chrome trace JSON (chrome://tracing, Perfetto)
--   mx.profiler.dumps()         aggregate table per op: count, total, min, max, avg
--   mx.profiler.reset()         drop the recorded events
-- Every kernel run is one event (op name, thread, start, duration); ops queued on
-- engine workers show on the workers' rows. A stopped profiler costs one load per op.
local lib = require("mx.core.lib")

local ffi, C = lib.ffi, lib.C
local error, type, tostring, pairs = error, type, tostring, pairs

local profiler = {}
local config = { filename = "profile.json" }

local KNOWN = { filename = true, profile_all = true, profile_symbolic = true,
  profile_imperative = true, profile_memory = true, profile_api = true,
  aggregate_stats = true, continuous_dump = true }

-- Options other than filename are accepted for MXNet compatibility and ignored:
-- every op is profiled.
function profiler.set_config(opts)
  if type(opts) ~= "table" then error("profiler.set_config: expected a table of options", 2) end
  for k, v in pairs(opts) do
    if not KNOWN[k] then
      error("profiler.set_config: unknown option '" .. tostring(k) .. "' (valid: filename, "
        .. "profile_all, profile_symbolic, profile_imperative, profile_memory, profile_api, "
        .. "aggregate_stats, continuous_dump)", 2)
    end
    if k == "filename" and type(v) ~= "string" then
      error("profiler.set_config: filename must be a string, got " .. type(v), 2)
    end
    config[k] = v
  end
end

function profiler.set_state(state)
  if state ~= "run" and state ~= "stop" then
    error("profiler.set_state: expected \"run\" or \"stop\", got " .. tostring(state), 2)
  end
  C.mx_profiler_set_state(state == "run" and 1 or 0)
end

function profiler.state() return C.mx_profiler_get_state() == 1 and "run" or "stop" end

-- The readers report finished runs: ops still queued are waited for first.
-- Writes the trace to set_config's filename (or `filename` when given).
function profiler.dump(filename)
  local f = filename or config.filename
  C.mx_engine_wait_idle()
  if C.mx_profiler_dump(f) ~= 0 then error(ffi.string(C.mx_last_error()), 2) end
  return f
end

-- The aggregate table as a string; reset = true drops the events afterwards.
function profiler.dumps(reset)
  C.mx_engine_wait_idle()
  local p = C.mx_profiler_dumps(reset and 1 or 0)
  if p == nil then error("profiler.dumps: out of memory", 2) end
  local s = ffi.string(p)
  C.mx_free(p)
  return s
end

function profiler.reset() C.mx_profiler_reset() end
function profiler.num_events()
  C.mx_engine_wait_idle()
  return tonumber(C.mx_profiler_num_events())
end

-- profiler.scope(fn): run fn with the profiler on, then stop it; returns fn's results.
function profiler.scope(fn, ...)
  C.mx_profiler_set_state(1)
  local r = { pcall(fn, ...) }
  C.mx_profiler_set_state(0)
  if not r[1] then error(r[2], 2) end
  return unpack(r, 2, table.maxn(r))
end

return profiler
