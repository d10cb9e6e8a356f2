-- mx.kvstore.ps_job — run a dist_async job in the background and watch it (the specs and
-- bench/ps_bench.lua use it): tools/launch.lua with a worker script, its output in a file.
--
--   local J = require("mx.kvstore.ps_job")
--   local job = J.start{ workers = 2, servers = 1, script = "local mx = require('mx') ...",
--                        env = { MX_KV_TIMEOUT = "5" } }
--   local pid = job:wait_for("%[server 0%].-pid (%d+)", 20)
--   local rc = job:wait(30)            -- the launcher's exit code (nil on timeout)
--   job:output()
local M = {}

local root = (debug.getinfo(1, "S").source:sub(2):match("^(.*)/lua/mx/kvstore/[^/]*$")) or "."
if root:sub(1, 1) ~= "/" then
  local p = io.popen("pwd")
  local cwd = p:read("*l")
  p:close()
  root = root == "." and cwd or (cwd .. "/" .. root)
end
M.root = root

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.sh_quote = sh_quote

local Job = {}
Job.__index = Job

local function tmpname(suffix)
  local n = os.tmpname()
  os.remove(n)
  return n .. suffix
end

function M.sleep(s) os.execute("sleep " .. s) end

local function now()
  local p = io.popen("date +%s.%N")
  local t = tonumber(p:read("*l"))
  p:close()
  return t
end
M.now = now

-- start{workers, servers, script, env, args}: the launcher in the background
function M.start(o)
  local script = tmpname(".lua")
  local f = assert(io.open(script, "w"))
  f:write(o.script)
  f:close()
  local out = tmpname(".log")
  local env = {}
  for k, v in pairs(o.env or {}) do env[#env + 1] = k .. "=" .. sh_quote(v) end
  local cmd = string.format("cd %s && (env %s luajit tools/launch.lua -n %d -s %d %s bin/mx %s "
    .. "> %s 2>&1; echo \"LAUNCH_RC=$?\" >> %s) >/dev/null 2>&1 & echo $!",
    sh_quote(root), table.concat(env, " "), o.workers, o.servers or 1, o.args or "",
    sh_quote(script), sh_quote(out), sh_quote(out))
  local p = io.popen(cmd)
  local pid = tonumber(p:read("*l"))
  p:close()
  return setmetatable({ pid = pid, out = out, script = script, t0 = now() }, Job)
end

function Job:output()
  local f = io.open(self.out, "r")
  if not f then return "" end
  local s = f:read("*a")
  f:close()
  return s
end

-- wait_for(pattern, timeout): the pattern's captures once the output has it (nil on timeout)
function Job:wait_for(pattern, timeout)
  local t = now() + timeout
  while true do
    local r = { self:output():match(pattern) }
    if r[1] ~= nil then return unpack(r) end
    if now() > t then return nil end
    M.sleep(0.1)
  end
end

-- wait(timeout): the launcher's exit code, or nil if it has not finished in time
function Job:wait(timeout)
  local rc = self:wait_for("LAUNCH_RC=(%d+)", timeout)
  self.elapsed = now() - self.t0
  return rc and tonumber(rc)
end

-- stop(): end the launcher (it kills its children) and remove the files
function Job:stop()
  if not self:output():find("LAUNCH_RC=") then
    -- the launcher first (the subshell's child: it stops its own children), then the subshell
    os.execute("pkill -TERM -P " .. self.pid .. " 2>/dev/null; sleep 0.2; kill -TERM " .. self.pid
      .. " 2>/dev/null")
    self:wait(10)
  end
  os.remove(self.script)
  os.remove(self.out)
end

function M.alive(pid) return os.execute("kill -0 " .. tonumber(pid) .. " 2>/dev/null") == 0
  or os.execute("kill -0 " .. tonumber(pid) .. " 2>/dev/null") == true end

-- is a TCP port in LISTEN state (any address)? (/proc/net/tcp{,6}: state 0A)
function M.listening(port)
  for _, f in ipairs { "/proc/net/tcp", "/proc/net/tcp6" } do
    local h = io.open(f, "r")
    if h then
      for line in h:lines() do
        local lp, st = line:match("^%s*%d+: %x+:(%x+) %x+:%x+ (%x%x)")
        if lp and tonumber(lp, 16) == tonumber(port) and st == "0A" then h:close() return true end
      end
      h:close()
    end
  end
  return false
end

return M
