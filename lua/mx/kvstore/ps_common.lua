-- mx.kvstore.ps_common — what the dist_async roles share: logging, the DMLC_* variables,
-- the request deadline, replies, and which peer came over which connection.
local Z = require("mx.kvstore.ps_zmq")
local P = require("mx.kvstore.ps_protocol")

local M = {}

local ffi = require("ffi")
pcall(ffi.cdef, "int mx_ps_getpid(void) __asm__(\"getpid\");")
function M.getpid() return ffi.C.mx_ps_getpid() end

local function log(role, fmt, ...)
  io.stderr:write(string.format("[mx.ps %s] " .. fmt .. "\n", role, ...))
  io.stderr:flush()
end
M.log = log

local function env_num(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then
    if default ~= nil then return default end
    error(string.format("dist_async: environment variable %s is not set", name), 3)
  end
  local n = tonumber(v)
  if not n or n < 0 or n ~= math.floor(n) then
    error(string.format("dist_async: %s=%q is not a non-negative integer", name, v), 3)
  end
  return n
end
M.env_num = env_num

function M.timeout()
  local t = tonumber(os.getenv("MX_KV_TIMEOUT") or "") or 30
  return t
end

-- the root's address from DMLC_PS_ROOT_URI / DMLC_PS_ROOT_PORT
function M.root_address()
  local uri = os.getenv("DMLC_PS_ROOT_URI")
  if not uri or uri == "" then error("dist_async: DMLC_PS_ROOT_URI is not set", 3) end
  local port = env_num("DMLC_PS_ROOT_PORT")
  return string.format("tcp://%s:%d", uri, port), uri, port
end

local function reply(sock, ident, cmd, req, text, arg, arg2)
  local m = P.text_message(cmd, "", text, req, arg, arg2)
  Z.send_parts(sock, { ident, m[1], m[2], m[3], m[4] })
end
M.reply = reply

---------------------------------------------------------------- peers by connection
-- Which routing identity came over which TCP connection (ZMQ_SRCFD), so a DISCONNECTED
-- event (which names the fd) tells which peer went away.
local Peers = {}
Peers.__index = Peers
function M.new_peers() return setmetatable({ by_fd = {}, fd_of = {} }, Peers) end
function Peers:saw(ident, fd)
  if fd and fd >= 0 then self.by_fd[fd] = ident self.fd_of[ident] = fd end
end
function Peers:lost(fd)
  local ident = self.by_fd[fd]
  if ident then self.by_fd[fd] = nil self.fd_of[ident] = nil end
  return ident
end

-- ranks for registered nodes: the rank a node asked for (n.want) when it is free and in
-- range, the others fill the gaps in arrival order. Returns the nodes in rank order.
function M.assign_ranks(nodes)
  local out, rest = {}, {}
  for _, n in ipairs(nodes) do
    local w = n.want
    if w and w >= 0 and w < #nodes and not out[w + 1] then out[w + 1] = n
    else rest[#rest + 1] = n end
  end
  local j = 1
  for i = 1, #nodes do
    if not out[i] then out[i] = rest[j] j = j + 1 end
  end
  return out
end

-- the scheduler's "k=v" lines (num_workers, num_servers, staleness, servers=a,b,...)
function M.parse_info(text)
  local t = {}
  for k, v in (text or ""):gmatch("([%w_]+)=([^\n]*)") do t[k] = v end
  local info = { num_workers = tonumber(t.num_workers), num_servers = tonumber(t.num_servers),
    staleness = tonumber(t.staleness) or -1, servers = {} }
  for a in (t.servers or ""):gmatch("[^,]+") do info.servers[#info.servers + 1] = a end
  if not info.num_workers or not info.num_servers or #info.servers ~= info.num_servers then
    error("dist_async: malformed answer from the scheduler: " .. string.format("%q", text), 2)
  end
  return info
end

return M
