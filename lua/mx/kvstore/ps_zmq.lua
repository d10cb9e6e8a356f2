-- mx.kvstore.ps_zmq — the few libzmq calls the dist_async parameter server uses, through
-- LuaJIT's FFI (Debian's libzmq.so.5, libzmq 4.3). No C of our own: the transport is
-- libzmq's; framing and checks live in ps_protocol.lua.
--
-- Every socket is created with ZMQ_LINGER 0 (a closing process never waits on unsent
-- messages, so nothing is left behind) and ZMQ_MAXMSGSIZE (a peer cannot make libzmq
-- allocate more than that for one frame: huge claimed sizes are refused by the transport
-- before any memory is taken; MX_KV_MAX_MSG bytes, default 2 GiB).
local ffi = require("ffi")

ffi.cdef [[
typedef struct zmq_msg_t { union { unsigned char _[64]; void *p; } u; } zmq_msg_t;
typedef struct zmq_pollitem_t { void *socket; int fd; short events; short revents; } zmq_pollitem_t;
void *zmq_ctx_new(void);
int zmq_ctx_term(void *context);
int zmq_ctx_set(void *context, int option, int optval);
void *zmq_socket(void *context, int type);
int zmq_close(void *s);
int zmq_setsockopt(void *s, int option, const void *optval, size_t optvallen);
int zmq_getsockopt(void *s, int option, void *optval, size_t *optvallen);
int zmq_bind(void *s, const char *addr);
int zmq_connect(void *s, const char *addr);
int zmq_unbind(void *s, const char *addr);
int zmq_send(void *s, const void *buf, size_t len, int flags);
int zmq_msg_init(zmq_msg_t *msg);
int zmq_msg_close(zmq_msg_t *msg);
int zmq_msg_recv(zmq_msg_t *msg, void *s, int flags);
void *zmq_msg_data(zmq_msg_t *msg);
size_t zmq_msg_size(const zmq_msg_t *msg);
int zmq_msg_more(const zmq_msg_t *msg);
int zmq_msg_get(const zmq_msg_t *msg, int property);
const char *zmq_msg_gets(const zmq_msg_t *msg, const char *property);
int zmq_poll(zmq_pollitem_t *items, int nitems, long timeout);
int zmq_socket_monitor(void *s, const char *addr, int events);
int zmq_errno(void);
const char *zmq_strerror(int errnum);
]]

-- Pin libzmq in memory first (RTLD_NODELETE): the library object's finaliser would
-- dlclose it when the Lua state closes while libzmq's I/O threads still run its code.
pcall(ffi.cdef, "void *mx_ps_dlopen(const char *file, int mode) __asm__(\"dlopen\");")
pcall(function() ffi.C.mx_ps_dlopen("libzmq.so.5", 0x1002) end) -- RTLD_NOW | RTLD_NODELETE
local ok, Z = pcall(ffi.load, "zmq")
if not ok then ok, Z = pcall(ffi.load, "libzmq.so.5") end
if not ok then
  error("mx.kvstore dist_async: libzmq is not installed (Debian: apt-get install libzmq5; "
    .. "to build: libzmq3-dev): " .. tostring(Z), 2)
end

local M = {
  PAIR = 0, DEALER = 5, ROUTER = 6,
  ROUTING_ID = 5, RCVMORE = 13, LINGER = 17, MAXMSGSIZE = 22, SNDHWM = 23, RCVHWM = 24,
  LAST_ENDPOINT = 32, ROUTER_MANDATORY = 33, IMMEDIATE = 39,
  HEARTBEAT_IVL = 75, HEARTBEAT_TTL = 76, HEARTBEAT_TIMEOUT = 77,
  DONTWAIT = 1, SNDMORE = 2, SRCFD = 2, POLLIN = 1,
  EVENT_CONNECTED = 0x0001, EVENT_ACCEPTED = 0x0020, EVENT_DISCONNECTED = 0x0200,
  EAGAIN = 11, EINTR = 4,
  lib = Z,
}

local int1 = ffi.new("int[1]")
local i64_1 = ffi.new("int64_t[1]")
local sz1 = ffi.new("size_t[1]")

local function zerr(what, level)
  local e = Z.zmq_errno()
  error(string.format("mx.kvstore dist_async: %s: %s (errno %d)", what,
    ffi.string(Z.zmq_strerror(e)), e), level + 1)
end
M.zerr = zerr
function M.errno() return Z.zmq_errno() end
function M.strerror(e) return ffi.string(Z.zmq_strerror(e or Z.zmq_errno())) end

local ctx
function M.context()
  if ctx == nil then
    ctx = Z.zmq_ctx_new()
    if ctx == nil then zerr("zmq_ctx_new", 2) end
  end
  return ctx
end

local MAX_MSG = tonumber(os.getenv("MX_KV_MAX_MSG") or "") or 2 ^ 31
M.MAX_MSG = MAX_MSG

function M.setint(s, opt, v)
  int1[0] = v
  if Z.zmq_setsockopt(s, opt, int1, 4) ~= 0 then zerr("zmq_setsockopt " .. opt, 2) end
end

-- socket(type): a socket with LINGER 0 and the message-size cap.
function M.socket(typ, routing_id)
  local s = Z.zmq_socket(M.context(), typ)
  if s == nil then zerr("zmq_socket", 2) end
  M.setint(s, M.LINGER, 0)
  i64_1[0] = MAX_MSG
  if Z.zmq_setsockopt(s, M.MAXMSGSIZE, i64_1, 8) ~= 0 then zerr("zmq_setsockopt MAXMSGSIZE", 2) end
  if routing_id then
    if Z.zmq_setsockopt(s, M.ROUTING_ID, routing_id, #routing_id) ~= 0 then
      zerr("zmq_setsockopt ROUTING_ID", 2)
    end
  end
  return s
end

function M.close(s) if s ~= nil then Z.zmq_close(s) end end

function M.bind(s, addr, level)
  if Z.zmq_bind(s, addr) ~= 0 then zerr("cannot bind " .. addr, (level or 1) + 1) end
end
function M.connect(s, addr, level)
  if Z.zmq_connect(s, addr) ~= 0 then zerr("cannot connect to " .. addr, (level or 1) + 1) end
end

-- The endpoint a socket bound last (resolves "tcp://*:0" to the chosen port).
local epbuf = ffi.new("char[256]")
function M.last_endpoint(s)
  sz1[0] = 256
  if Z.zmq_getsockopt(s, M.LAST_ENDPOINT, epbuf, sz1) ~= 0 then zerr("LAST_ENDPOINT", 2) end
  return ffi.string(epbuf)
end

-- send_parts(s, parts): parts is a list of Lua strings or {ptr, len} pairs (cdata data
-- sent without an intermediate Lua string). Returns true, or false + errno.
function M.send_parts(s, parts, n)
  n = n or #parts
  for i = 1, n do
    local p = parts[i]
    local flags = i < n and M.SNDMORE or 0
    local rc
    if type(p) == "string" then rc = Z.zmq_send(s, p, #p, flags)
    else rc = Z.zmq_send(s, p[1], p[2], flags) end
    if rc < 0 then return false, Z.zmq_errno() end
  end
  return true
end

-- recv_parts(s, flags): all frames of one message as a list of zmq_msg_t (the caller
-- frees them with free_parts), plus the source fd of the first frame. nil, errno when
-- nothing (DONTWAIT) or on error.
function M.recv_parts(s, flags)
  local parts = {}
  while true do
    local m = ffi.new("zmq_msg_t")
    Z.zmq_msg_init(m)
    if Z.zmq_msg_recv(m, s, flags or 0) < 0 then
      local e = Z.zmq_errno()
      Z.zmq_msg_close(m)
      if #parts == 0 then M.free_parts(parts) return nil, e end
      -- a multipart message arrives whole or not at all: cannot happen mid-message
      M.free_parts(parts)
      return nil, e
    end
    parts[#parts + 1] = m
    if Z.zmq_msg_more(m) == 0 then break end
    flags = 0
  end
  return parts, Z.zmq_msg_get(parts[#parts], M.SRCFD)
end

-- The IP address a received frame came from (libzmq's "Peer-Address" property).
function M.peer_address(m)
  local s = Z.zmq_msg_gets(m, "Peer-Address")
  if s == nil then return "127.0.0.1" end
  return ffi.string(s)
end

function M.free_parts(parts)
  for i = 1, #parts do Z.zmq_msg_close(parts[i]) end
end

function M.part_size(m) return tonumber(Z.zmq_msg_size(m)) end
function M.part_data(m) return Z.zmq_msg_data(m) end
function M.part_string(m) return ffi.string(Z.zmq_msg_data(m), Z.zmq_msg_size(m)) end

-- monitor(s, events): a PAIR socket receiving s's transport events (two frames: a u16
-- event + u32 value, then the endpoint). read_event(mon) -> event, value, endpoint.
local nmon = 0
function M.monitor(s, events)
  nmon = nmon + 1
  local addr = string.format("inproc://mx-ps-mon-%d", nmon)
  if Z.zmq_socket_monitor(s, addr, events) ~= 0 then zerr("zmq_socket_monitor", 2) end
  local p = M.socket(M.PAIR)
  M.connect(p, addr, 2)
  return p
end
local u16p, u32p = ffi.typeof("uint16_t*"), ffi.typeof("uint32_t*")
function M.read_event(mon)
  local parts = M.recv_parts(mon, M.DONTWAIT)
  if not parts then return nil end
  local ev, val, ep
  if #parts >= 2 and M.part_size(parts[1]) >= 6 then
    local d = ffi.cast("uint8_t*", M.part_data(parts[1]))
    ev = ffi.cast(u16p, d)[0]
    val = ffi.cast(u32p, d + 2)[0]
    ep = M.part_string(parts[2])
  end
  M.free_parts(parts)
  return ev, val, ep
end

-- poll(items_list, timeout_ms): items is a list of sockets; returns a list of booleans
-- (readable) or nil on timeout.
local pollbuf = ffi.new("zmq_pollitem_t[16]")
function M.poll(socks, timeout_ms)
  local n = #socks
  for i = 1, n do
    pollbuf[i - 1].socket = socks[i]
    pollbuf[i - 1].fd = 0
    pollbuf[i - 1].events = M.POLLIN
    pollbuf[i - 1].revents = 0
  end
  local rc = Z.zmq_poll(pollbuf, n, timeout_ms)
  if rc < 0 then
    if Z.zmq_errno() == M.EINTR then return {} end
    zerr("zmq_poll", 2)
  end
  local r = {}
  for i = 1, n do r[i] = pollbuf[i - 1].revents ~= 0 end
  return r, rc
end

-- Monotonic-enough clock in seconds (gettimeofday through the FFI: os.clock is CPU time).
ffi.cdef [[
typedef struct mx_ps_timespec { long tv_sec; long tv_nsec; } mx_ps_timespec;
int mx_ps_clock_gettime(int clk, mx_ps_timespec *tp) __asm__("clock_gettime");
]]
local ts = ffi.new("mx_ps_timespec")
function M.now()
  ffi.C.mx_ps_clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

return M
