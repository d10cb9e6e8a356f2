-- mx.kvstore.ps_main — the entry of the non-worker dist_async roles: DMLC_ROLE=scheduler or
-- server runs that role and returns its exit code (0: clean shutdown once every worker
-- said goodbye or died; 1: a server or the scheduler was lost, or registration timed out).
--   luajit -e 'os.exit(require("mx.kvstore.ps_main").main())'
local M = {}

function M.main()
  local role = os.getenv("DMLC_ROLE")
  local ok, code = pcall(function()
    if role == "scheduler" then return require("mx.kvstore.ps_scheduler").run()
    elseif role == "server" then return require("mx.kvstore.ps_server").run()
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
