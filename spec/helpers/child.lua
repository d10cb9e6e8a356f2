-- spec/helpers/child.lua — run Lua code in child LuaJIT processes, so that a crash
-- (a signal, an abort, a sanitizer report) fails one case instead of killing the run.
--
--   local child = require("helpers.child")
--   local h = child.start("require('helpers.sweep').child_main(1, 200)")  -- non-blocking
--   local r = child.finish(h)   -- { out = "<stdout+stderr>", status = 0, signal = nil }
--
-- Several children started before the first finish() run in parallel (each writes into
-- its own pipe; keep a child's output under the pipe buffer, ~64 KiB, or read it first).
-- The child sees the same package paths as the parent. Environment knobs:
--   SWEEP_LUAJIT   the interpreter command (default "luajit"); e.g. for ASan:
--                  "env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libasan.so.8 luajit"
--   SWEEP_TIMEOUT  seconds before a child is killed (default 300; reported as signal 9)
local M = {}

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
M.quote = shell_quote

M.luajit = os.getenv("SWEEP_LUAJIT") or "luajit"
M.timeout = tonumber(os.getenv("SWEEP_TIMEOUT") or "") or 300

-- Package paths made absolute (a child may change its directory).
local function absolute(paths)
  local cwd = os.getenv("PWD") or "."
  return (paths:gsub("[^;]+", function(e)
    if e:sub(1, 1) == "/" or e:sub(1, 1) == "?" then return e end
    return cwd .. "/" .. e:gsub("^%./", "")
  end))
end

-- The command line that runs `code` with this process's package paths; env: a table of
-- environment variables for the child ({ OPENBLAS_CORETYPE = "Haswell" }).
function M.command(code, timeout, env)
  local pre = string.format("package.path = %q; package.cpath = %q; ", absolute(package.path),
    absolute(package.cpath))
  local vars = {}
  for k, v in pairs(env or {}) do vars[#vars + 1] = k .. "=" .. shell_quote(tostring(v)) end
  table.sort(vars)
  return string.format("%stimeout -s KILL %d %s -e %s 2>&1; echo \"__CHILD_EXIT $?\"",
    #vars > 0 and "env " .. table.concat(vars, " ") .. " " or "",
    timeout or M.timeout, M.luajit, shell_quote(pre .. code))
end

function M.start(code, timeout, env)
  return assert(io.popen(M.command(code, timeout, env), "r"))
end

-- Wait for a child; status is the exit code, signal the signal that killed it (if any:
-- the shell reports 128 + n; `timeout -s KILL` gives 137).
function M.finish(h)
  local out = h:read("*a")
  h:close()
  local body, code = out:match("^(.*)__CHILD_EXIT (%d+)%s*$")
  code = tonumber(code) or -1
  local r = { out = body or out, status = code }
  if code > 128 then r.signal = code - 128 end
  return r
end

function M.run(code, timeout, env) return M.finish(M.start(code, timeout, env)) end

return M
