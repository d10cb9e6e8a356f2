-- mx.kvstore.ps_main — the entry of the non-worker dist_async roles: DMLC_ROLE=scheduler or
-- server runs that role and returns its exit code (0: clean shutdown once every worker
-- said goodbye or died; 1: a server or the scheduler was lost, or registration timed out).
--   luajit -e 'os.exit(require("mx.kvstore.ps_main").main())'
-- A server runs its updates one request at a time, so by default it uses the naive
-- (synchronous) engine and MX_PS_SERVER_THREADS intra-op threads (default 1): they become
-- MX_ENGINE / MX_NUM_THREADS unless those are set. Servers usually share their host with
-- workers; the threaded engine's and the pool's threads on busy cores made a 4 MB SGD
-- push ~10x slower (bench/ps_bench.lua).
local M = {}

local function server_threads()
  local ffi = require("ffi")
  pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")
  ffi.C.setenv("MX_NUM_THREADS", os.getenv("MX_PS_SERVER_THREADS") or "1", 0)
  ffi.C.setenv("MX_ENGINE", "naive", 0)
end

function M.main()
  local role = os.getenv("DMLC_ROLE")
  local ok, code = pcall(function()
    if role == "scheduler" then return require("mx.kvstore.ps_scheduler").run()
    elseif role == "server" then
      server_threads() -- before anything loads libmx: it reads them when it loads
      return require("mx.kvstore.ps_server").run()
    end
    error(string.format("DMLC_ROLE=%q: expected scheduler or server (a worker runs the "
      .. "training script)", tostring(role)))
  end)
  if not ok then
    io.stderr:write("[mx.ps " .. tostring(role) .. "] error: " .. tostring(code) .. "\n")
    return 1
  end
  return code
end

return M
