-- mx.kvstore.dist_async — the worker side of MXNet's asynchronous parameter-server kvstore
-- over libzmq (docs/distributed.md, section dist_async).
--
--   local kv = mx.kv.create("dist_async")          -- in a process started by tools/launch.lua
--   kv:init(3, w); kv:push(3, grad); kv:pull(3, w) -- no barrier: updates apply as they come
--   mx.kv.create("dist_async", {staleness = 2, timeout = 10})
--
-- Roles come from MXNet's variables (DMLC_ROLE=worker, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT,
-- DMLC_NUM_WORKER, DMLC_NUM_SERVER): creating the store registers with the scheduler at the
-- root, which gives this worker its rank and the servers' addresses once every node came.
-- Sharding: a key of fewer than MXNET_KVSTORE_BIGARRAY_BOUND (1e6) elements lives whole on
-- server hash(key) % num_servers; a bigger one is cut, flat, into num_servers contiguous
-- slices, slice p on server p (ps-lite's layout). Every request has a deadline
-- (opts.timeout, else MX_KV_TIMEOUT, else 30 s); a server whose connection drops fails the
-- pending and every later request at once, naming it; errors from the servers (a dead worker
-- under a staleness bound, a shape mismatch) are raised naming key and server.
local Z = require("mx.kvstore.ps_zmq")
local P = require("mx.kvstore.ps_protocol")
local C = require("mx.kvstore.ps_common")
local caller = require("mx.core.caller")
local mx = require("mx")
local ffi = require("ffi")

local CMD = P.CMD
local M = {}

local kvstore = require("mx.kvstore")
local DistAsync = require("mx.core.class").extend(kvstore.KVStore, "DistAsync")
M.DistAsync = DistAsync

local BIG = tonumber(os.getenv("MXNET_KVSTORE_BIGARRAY_BOUND") or "") or 1000000
local MAX_INFLIGHT = 64
local u8p = ffi.typeof("uint8_t*")

-- djb2 over the key's text: the same server for a key on every worker
local function key_hash(s)
  local h = 5381
  for i = 1, #s do h = (h * 33 + s:byte(i)) % 4294967296 end
  return h
end
M.key_hash = key_hash

local function check_opts(opts, level)
  local known = { timeout = true, staleness = true }
  for k in pairs(opts) do
    if not known[k] then
      error("mx.kv.create('dist_async'): unknown option " .. tostring(k)
        .. " (known: staleness, timeout)", level + 1)
    end
  end
  if opts.timeout ~= nil and (type(opts.timeout) ~= "number" or opts.timeout <= 0) then
    error("mx.kv.create('dist_async'): timeout must be a positive number of seconds", level + 1)
  end
  if opts.staleness ~= nil and (type(opts.staleness) ~= "number" or opts.staleness < 0
      or opts.staleness % 1 ~= 0) then
    error("mx.kv.create('dist_async'): staleness must be a non-negative integer", level + 1)
  end
end

-- new(name, opts, level): registers with the scheduler and connects to every server.
function M.new(name, opts, level)
  level = level or 2
  opts = opts or {}
  check_opts(opts, level)
  local role = os.getenv("DMLC_ROLE")
  if role ~= "worker" then
    error(string.format("mx.kv.create('%s'): DMLC_ROLE is %s, not worker: start the job with "
      .. "tools/launch.lua -n WORKERS -s SERVERS COMMAND (it sets DMLC_ROLE and the root's "
      .. "address)", name or "dist_async", role and string.format("%q", role) or "unset"), level)
  end
  local ok, root = pcall(C.root_address)
  if not ok then error("mx.kv.create('dist_async'): " .. tostring(root):gsub("^.-: ", ""), level) end
  local self = kvstore.KVStore._make(DistAsync, name or "dist_async", opts)
  self.mx, self.nd = mx, mx.nd
  self.timeout = opts.timeout or C.timeout()
  self.staleness = opts.staleness or tonumber(os.getenv("MX_KV_STALENESS") or "") or -1
  self.req, self.pending, self.npending, self.inflight, self.layouts = 0, {}, 0, {}, {}
  self.servers, self.root, self.closed = {}, root, false
  -- payload bytes and row_sparse rows this worker sent and received (tensor traffic)
  self.bytes_sent, self.bytes_received, self.rows_sent, self.rows_received = 0, 0, 0, 0
  self._compress_merged = true -- compression (when set) runs on the merged value
  self.sched = Z.socket(Z.DEALER)
  Z.connect(self.sched, root)
  self.smon = Z.monitor(self.sched, Z.EVENT_DISCONNECTED)
  -- registration waits for the whole job to come up: allow several deadlines
  local info
  local want = os.getenv("DMLC_WORKER_ID") or os.getenv("OMPI_COMM_WORLD_RANK")
  want = want and want:match("^%d+$") and ("rank=" .. want) or ""
  local r = self:request_sched(P.text_message(CMD.REGISTER, "", want, 0, 1, self.staleness),
    "registration", function(m)
      info = C.parse_info(m.text)
      self.rank = m.arg
    end, self.timeout * 4)
  self:wait({ r }, level + 1)
  self.num_workers = info.num_workers
  self.num_servers = info.num_servers
  self.staleness = info.staleness
  if os.getenv("MX_KV_VERBOSE") == "1" then
    C.log("worker " .. self.rank, "registered, pid %d", C.getpid())
  end
  for i, addr in ipairs(info.servers) do
    local s = Z.socket(Z.DEALER, "w" .. self.rank)
    Z.connect(s, addr)
    self.servers[i] = { sock = s, mon = Z.monitor(s, Z.EVENT_DISCONNECTED), addr = addr,
      name = string.format("server %d (%s)", i - 1, addr) }
  end
  -- say goodbye when the process ends normally (the Lua state closes)
  local proxy = newproxy(true)
  getmetatable(proxy).__gc = function() pcall(DistAsync.close_, self) end
  self._gc_proxy = proxy
  return self
end

-- A transport failure: the store is unusable from now on; raised at the user's line (the
-- first frame outside luamx, however deep in the kvstore the failure surfaced).
local user_level = caller.level

local function fail(self, msg)
  self.broken = msg
  error(msg, user_level())
end

---------------------------------------------------------------- requests
-- Every request gets an id, a deadline and a handler for its reply; wait(ids) polls the
-- sockets until those are answered, failing on a deadline, a lost server or an ERR.
function DistAsync:_send(target, sock, frames, what, on_reply, timeout)
  self.req = self.req + 1
  local id = self.req
  frames[1] = frames[1]:sub(1, 8) .. ffi.string(ffi.new("uint32_t[1]", id), 4) .. frames[1]:sub(13)
  local sent, e = Z.send_parts(sock, frames)
  if not sent then
    fail(self, string.format("dist_async worker %s: cannot send %s to %s: %s", tostring(self.rank),
      what, target.name, Z.strerror(e)))
  end
  self.pending[id] = { target = target, what = what, on_reply = on_reply,
    deadline = Z.now() + (timeout or self.timeout) }
  self.npending = self.npending + 1
  return id
end

function DistAsync:request_sched(frames, what, on_reply, timeout)
  self.sched_target = self.sched_target or { name = "the scheduler (" .. self.root .. ")",
    sock = self.sched, mon = self.smon }
  if self.sched_target.dead then
    fail(self, string.format("dist_async: %s is gone (its connection dropped): cannot %s",
      self.sched_target.name, what))
  end
  return self:_send(self.sched_target, self.sched, frames, what, on_reply, timeout)
end

function DistAsync:request(i, frames, what, on_reply)
  local s = self.servers[i]
  if s.dead then
    fail(self, string.format("dist_async worker %d: %s is gone (its connection dropped: killed or "
      .. "crashed?); cannot %s", self.rank, s.name, what))
  end
  return self:_send(s, s.sock, frames, what, on_reply)
end

-- drain replies and transport events; returns nothing, raises on failure
function DistAsync:_pump(timeout_ms)
  local socks, targets = {}, {}
  local function add(t)
    socks[#socks + 1] = t.sock targets[#socks] = t
    socks[#socks + 1] = t.mon targets[#socks] = t
  end
  if self.sched_target then add(self.sched_target) end
  for _, s in ipairs(self.servers) do add(s) end
  local rd = Z.poll(socks, timeout_ms)
  for j = 1, #socks do
    if rd[j] then
      local t = targets[j]
      if j % 2 == 0 then
        if Z.read_event(t.mon) and not t.dead then
          t.dead = true
          for _, p in pairs(self.pending) do
            if p.target == t then
              fail(self, string.format("dist_async worker %s: %s went away (its connection "
                .. "dropped: killed or crashed?) while waiting for %s", tostring(self.rank),
                t.name, p.what))
            end
          end
        end
      else
        while true do
          local parts = Z.recv_parts(t.sock, Z.DONTWAIT)
          if not parts then break end
          local m, why = P.decode(Z, parts, 1)
          local p = m and self.pending[m.req]
          if not m then
            Z.free_parts(parts)
            fail(self, string.format("dist_async: malformed reply from %s: %s", t.name, why))
          end
          if p then
            self.pending[m.req] = nil
            self.npending = self.npending - 1
            if m.cmd == CMD.ERR then
              Z.free_parts(parts)
              fail(self, string.format("dist_async worker %s: %s failed on %s: %s",
                tostring(self.rank), p.what, t.name, m.text or "?"))
            end
            if p.on_reply then
              local ok, err = pcall(p.on_reply, m)
              if not ok then Z.free_parts(parts) fail(self, tostring(err):gsub("^[^:]*:%d+: ", "")) end
            end
          end
          Z.free_parts(parts)
        end
      end
    end
  end
end

function DistAsync:wait(ids)
  while true do
    local left = false
    local now = Z.now()
    for _, id in ipairs(ids) do
      local p = self.pending[id]
      if p then
        left = true
        if now > p.deadline then
          fail(self, string.format("dist_async worker %s: %s did not answer %s within %g s "
            .. "(MX_KV_TIMEOUT / opts.timeout)", tostring(self.rank), p.target.name, p.what,
            self.timeout))
        end
      end
    end
    if not left then return end
    self:_pump(100)
  end
end

function DistAsync:wait_all(level)
  local ids = {}
  for id in pairs(self.pending) do ids[#ids + 1] = id end
  self:wait(ids, (level or 2) + 1)
  self.inflight = {}
end

---------------------------------------------------------------- sharding
-- layout(key, x): the shards of a key: list of {server index, server key, first element
-- (0-based), count, row0 (its first row), shape (the shard's: rows, row dims...)}. A big
-- key is cut into num_servers runs of whole rows (of its first axis; a 1-d key's rows
-- are its elements), so row_sparse pushes and pulls address a shard's rows.
function DistAsync:layout(key, x)
  local L = self.layouts[key]
  if L then return L end
  local n = x:size()
  local shape = x:shape()
  local rows = #shape > 0 and shape[1] or 1
  local rowsize = rows > 0 and n / rows or 0
  L = {}
  local ns = self.num_servers
  if n >= BIG and ns > 1 then
    for p = 0, ns - 1 do
      local a, b = math.floor(rows * p / ns), math.floor(rows * (p + 1) / ns)
      local sshape = { b - a }
      for d = 2, #shape do sshape[d] = shape[d] end
      L[#L + 1] = { srv = p + 1, key = key .. "#" .. p, first = a * rowsize,
        count = (b - a) * rowsize, row0 = a, shape = sshape }
    end
  else
    L[1] = { srv = key_hash(key) % ns + 1, key = key, first = 0, count = n, whole = true,
      row0 = 0, shape = shape }
  end
  L.dtype = self.nd.dtype_code(x:dtype())
  L.itemsize = P.ITEMSIZE[L.dtype]
  L.shape = shape
  L.size = n
  L.rowbytes = rowsize * L.itemsize
  self.layouts[key] = L
  return L
end

local function as_cpu(self, x)
  local c = x:context()
  if c.device_type ~= "cpu" then return x:to(self.mx.cpu()) end
  return x
end

function DistAsync:_check(who, key, x, level)
  if self.closed then error("kvstore dist_async: " .. who .. " after close()", level + 1) end
  if self.broken then error("kvstore dist_async: " .. who .. " after an earlier failure: "
    .. self.broken, level + 1) end
  local L = self.layouts[key]
  if L and x and (x:size() ~= L.size or self.nd.dtype_code(x:dtype()) ~= L.dtype) then
    error(string.format("kvstore dist_async: %s of key %s: value is %s %s, the key holds %s %s",
      who, key, x:dtype(), table.concat(x:shape(), "x"),
      P.DT_NAME[L.dtype], table.concat(L.shape, "x")), level + 1)
  end
end

-- send the shards of x under cmd
function DistAsync:_send_shards(cmd, key, x, ids)
  local L = self:layout(key, x)
  x = as_cpu(self, x)
  local base = ffi.cast(u8p, x:data_ptr())
  for _, sh in ipairs(L) do
    local nb = sh.count * L.itemsize
    local shape = sh.shape
    local frames = { P.header(cmd, L.dtype, #shape, 0, self.rank, 0, nb), sh.key,
      P.shape_frame(shape), { base + sh.first * L.itemsize, nb } }
    ids[#ids + 1] = self:request(sh.srv, frames, P.CMD_NAME[cmd] .. " of key " .. key)
    self.bytes_sent = self.bytes_sent + nb
  end
  return L
end

---------------------------------------------------------------- transport (the KVStore base
-- class calls these with one key (a string) and one NDArray)
function DistAsync:_init(key, x, level)
  level = (level or 1) + 1
  self:_check("init", key, nil, level)
  if self.rank == 0 then
    local ids = {}
    self:_send_shards(CMD.INIT, key, x, ids)
    self:wait(ids, level)
  else
    self:layout(key, x)
  end
end

function DistAsync:_push(key, x, level)
  level = (level or 1) + 1
  self:_check("push", key, x, level)
  local ids = self.inflight[key] or {}
  self.inflight[key] = ids
  self:_send_shards(CMD.PUSH, key, x, ids)
  if self.npending > MAX_INFLIGHT then self:_pump(0) end
  while self.npending > MAX_INFLIGHT do
    local oldest = math.huge
    for id in pairs(self.pending) do if id < oldest then oldest = id end end
    self:wait({ oldest }, level)
  end
end

-- The shards' runs of a sorted list of 0-based row ids: for shard j, ids[a[j] .. b[j]]
local function runs(L, rows)
  local a, b, i = {}, {}, 1
  for j, sh in ipairs(L) do
    local lim = sh.row0 + sh.shape[1]
    a[j] = i
    while i <= #rows and rows[i] < lim do i = i + 1 end
    b[j] = i - 1
  end
  return a, b
end

-- A row_sparse value: each shard gets the rows that fall in it (ids made relative to the
-- shard), nothing for a shard none falls in.
function DistAsync:_push_rsp(key, m, level)
  level = (level or 1) + 1
  self:_check("push", key, m, level)
  local L = self.layouts[key]
  if not L then error("kvstore dist_async: push of key " .. key .. " before init", level) end
  m = as_cpu(self, m)
  local rows = m:indices():tolist()
  local data = m:data()
  local base = ffi.cast(u8p, data:data_ptr())
  local ids = self.inflight[key] or {}
  self.inflight[key] = ids
  local a, b = runs(L, rows)
  for j, sh in ipairs(L) do
    local k = b[j] - a[j] + 1
    if k > 0 then
      local nb = k * 8 + k * L.rowbytes
      local buf = ffi.new("uint8_t[?]", nb)
      local ip = ffi.cast("int64_t*", buf)
      for i = 0, k - 1 do ip[i] = rows[a[j] + i] - sh.row0 end
      ffi.copy(buf + k * 8, base + (a[j] - 1) * L.rowbytes, k * L.rowbytes)
      local shape = { k }
      for d = 2, #L.shape do shape[d] = L.shape[d] end
      local frames = { P.header(CMD.PUSH_RSP, L.dtype, #shape, 0, self.rank, 0, nb), sh.key,
        P.shape_frame(shape), { buf, nb } }
      ids[#ids + 1] = self:request(sh.srv, frames, "PUSH_RSP of key " .. key)
      self.bytes_sent = self.bytes_sent + nb
      self.rows_sent = self.rows_sent + k
    end
  end
  while self.npending > MAX_INFLIGHT do
    local oldest = math.huge
    for id in pairs(self.pending) do if id < oldest then oldest = id end end
    self:wait({ oldest }, level)
  end
end

-- row_sparse_pull's transport: the rows asked for (sorted unique 0-based ids) from the
-- servers holding them, after this worker's pending pushes of the key.
function DistAsync:_row_sparse_value(key, rows)
  local k = tostring(key)
  self:_check("row_sparse_pull", k, nil, 3)
  local L = self.layouts[k]
  local nd = self.nd
  local n = #rows
  local dshape = { n }
  for d = 2, #L.shape do dshape[d] = L.shape[d] end
  if n == 0 then
    return nd.sparse.zeros("row_sparse", L.shape, { dtype = P.DT_NAME[L.dtype] })
  end
  local data = nd.zeros(dshape, { dtype = P.DT_NAME[L.dtype] })
  local base = ffi.cast(u8p, data:data_ptr())
  local ids = {}
  for _, id in ipairs(self.inflight[k] or {}) do ids[#ids + 1] = id end
  self.inflight[k] = nil
  local a, b = runs(L, rows)
  for j, sh in ipairs(L) do
    local c = b[j] - a[j] + 1
    if c > 0 then
      local req = ffi.new("int64_t[?]", c)
      for i = 0, c - 1 do req[i] = rows[a[j] + i] - sh.row0 end
      local what = "PULL_RSP of key " .. k
      local want = c * L.rowbytes
      local off = (a[j] - 1) * L.rowbytes
      local frames = { P.header(CMD.PULL_RSP, 6, 1, 0, self.rank, 0, c * 8), sh.key,
        P.shape_frame({ c }), { req, c * 8 } }
      self.bytes_sent = self.bytes_sent + c * 8
      ids[#ids + 1] = self:request(sh.srv, frames, what, function(m)
        if m.nbytes ~= want then
          error(string.format("dist_async: %s: %s sent %d bytes, expected %d", what,
            self.servers[sh.srv].name, m.nbytes, want))
        end
        ffi.copy(base + off, m.data, want)
        self.bytes_received = self.bytes_received + want
        self.rows_received = self.rows_received + c
      end)
    end
  end
  self:wait(ids)
  return nd.sparse.row_sparse_array({ data, nd.array(rows, { dtype = "int64" }) },
    { shape = L.shape })
end

-- _pull_send(key, out, ids, level): the PULL requests of key's shards (ids collects them
-- and the key's pending push acknowledgements); returns the cpu buffer they fill
function DistAsync:_pull_send(key, out, ids, level)
  self:_check("pull", key, out, level + 1)
  local L = self.layouts[key]
  if not L then
    error("kvstore dist_async: pull of key " .. key .. " before init", level + 1)
  end
  local target = as_cpu(self, out)
  local base = ffi.cast(u8p, target:data_ptr())
  for _, id in ipairs(self.inflight[key] or {}) do ids[#ids + 1] = id end
  self.inflight[key] = nil
  for _, sh in ipairs(L) do
    local what = "PULL of key " .. key
    local nb = sh.count * L.itemsize
    ids[#ids + 1] = self:request(sh.srv, P.text_message(CMD.PULL, sh.key, "", 0, self.rank),
      what, function(m)
        if m.nbytes ~= nb then
          error(string.format("dist_async: %s: %s sent %d bytes, expected %d", what,
            self.servers[sh.srv].name, m.nbytes, nb))
        end
        ffi.copy(base + sh.first * L.itemsize, m.data, nb)
        self.bytes_received = self.bytes_received + nb
      end)
  end
  return target
end

function DistAsync:_pull(key, out, level)
  level = (level or 1) + 1
  local ids = {}
  local target = self:_pull_send(key, out, ids, level)
  self:wait(ids)
  if target ~= out then target:copyto(out) end
end

-- set_optimizer: the optimizer's class name and its plain options go to every server
function DistAsync:_set_optimizer(opt, level)
  level = (level or 1) + 1
  local mt = getmetatable(opt)
  local name = mt and (mt.__name or (mt.__index and mt.__index.__name))
  if type(name) ~= "string" then
    error("kvstore dist_async: set_optimizer needs an mx.optimizer optimizer", level)
  end
  local o = { learning_rate = opt.lr, wd = opt.wd, rescale_grad = opt.rescale_grad,
    clip_gradient = opt.clip_gradient, begin_num_update = opt.begin_num_update,
    multi_precision = opt.multi_precision or nil }
  for k in pairs(mt._extra or {}) do
    if opt[k] ~= nil then o[k] = opt[k] end
  end
  if opt.lr_scheduler then
    error("kvstore dist_async: set_optimizer: an lr_scheduler does not travel to the "
      .. "servers (only plain options do); set the learning rate instead", level)
  end
  local text = P.encode_options(o, "kvstore dist_async: set_optimizer", level)
  if self.rank == 0 then
    local ids = {}
    for i = 1, self.num_servers do
      ids[i] = self:request(i, P.text_message(CMD.SET_OPT, name:lower(), text), "set_optimizer")
    end
    self:wait(ids, level)
  end
  self:barrier_()
end

function DistAsync:barrier_()
  self:wait_all(2)
  local id = self:request_sched(P.text_message(CMD.BARRIER, "", "", 0, self.rank), "barrier")
  self:wait({ id }, 2)
end

-- save_optimizer_states(fname[, dump_optimizer]): every server's states (counters and
-- learning rate included), written atomically by this worker
function DistAsync:save_optimizer_states(fname, dump_optimizer)
  local _ = dump_optimizer -- the servers' counters always travel with their states
  if type(fname) ~= "string" then
    error("KVStore:save_optimizer_states: fname must be a string, got " .. type(fname), 2)
  end
  self:wait_all(2)
  local blobs = {}
  local ids = {}
  for i = 1, self.num_servers do
    ids[i] = self:request(i, P.text_message(CMD.GET_STATES, "", ""), "save_optimizer_states",
      function(m) blobs[i] = m.text end)
  end
  self:wait(ids, 2)
  local parts = { "MXPSFILE1\n", tostring(self.num_servers), "\n" }
  for i = 1, self.num_servers do
    parts[#parts + 1] = tostring(#blobs[i]) .. "\n"
    parts[#parts + 1] = blobs[i]
  end
  local tmp = fname .. ".tmp" .. tostring(os.time())
  local f, err = io.open(tmp, "wb")
  if not f then error("save_optimizer_states: cannot write " .. fname .. ": " .. err, 2) end
  f:write(table.concat(parts))
  f:close()
  local ok, rerr = os.rename(tmp, fname)
  if not ok then os.remove(tmp) error("save_optimizer_states: " .. tostring(rerr), 2) end
end

function DistAsync:load_optimizer_states(fname)
  local f, err = io.open(fname, "rb")
  if not f then error("load_optimizer_states: cannot read " .. fname .. ": " .. err, 2) end
  local s = f:read("*a")
  f:close()
  local ns, pos = s:match("^MXPSFILE1\n(%d+)\n()")
  if not ns then error("load_optimizer_states: " .. fname .. " is not a dist_async states file", 2) end
  ns = tonumber(ns)
  if ns ~= self.num_servers then
    error(string.format("load_optimizer_states: %s was saved by %d server(s); this job has %d",
      fname, ns, self.num_servers), 2)
  end
  local ids = {}
  for i = 1, ns do
    local len, p2 = s:match("^(%d+)\n()", pos)
    len = tonumber(len)
    if not len or p2 + len - 1 > #s then
      error("load_optimizer_states: " .. fname .. " is truncated", 2)
    end
    local blob = s:sub(p2, p2 + len - 1)
    pos = p2 + len
    ids[i] = self:request(i, P.text_message(CMD.SET_STATES, "", blob), "load_optimizer_states")
  end
  self:wait(ids, 2)
end

-- close(): wait for what is in flight, say goodbye to the servers and the scheduler (so
-- they do not count this worker as dead), close the sockets. Called at exit too.
function DistAsync:close_()
  if self.closed then return end
  local ok, err = true, nil
  if not self.broken then ok, err = pcall(self.wait_all, self, 2) end
  local ids = {}
  for i, s in ipairs(self.servers) do
    if not s.dead then
      local okr, id = pcall(self.request, self, i, P.text_message(CMD.BYE, "", "", 0, self.rank), "goodbye")
      if okr then ids[#ids + 1] = id end
    end
  end
  if self.sched_target and not self.sched_target.dead then
    local okr, id = pcall(self.request_sched, self, P.text_message(CMD.BYE, "", "", 0, self.rank),
      "goodbye")
    if okr then ids[#ids + 1] = id end
  end
  for _, id in ipairs(ids) do local p = self.pending[id] if p then p.deadline = Z.now() + 3 end end
  pcall(self.wait, self, ids, 2)
  self.closed = true
  for _, s in ipairs(self.servers) do Z.close(s.mon) Z.close(s.sock) end
  Z.close(self.smon) Z.close(self.sched)
  if not ok then error(err, 2) end
end

---------------------------------------------------------------- the KVStore hooks
-- (lua/mx/kvstore.lua's base class checks arguments, reduces per-device lists and keeps a
-- local copy of every key, which serves as the pull buffer)
function DistAsync:_init_values(keys, values)
  for i = 1, #keys do self:_init(tostring(keys[i]), values[i], 3) end
  self:_barrier()
  return values
end

function DistAsync:_push_merged(keys, merged)
  for i = 1, #keys do
    local m = merged[i]
    if m:stype() == "row_sparse" then
      self:_push_rsp(tostring(keys[i]), m, 3)
    else
      if self._gc ~= nil then m = self:_compress(keys[i], m, 1) end
      self:_push(tostring(keys[i]), m, 3)
    end
  end
end

function DistAsync:_pull_value(key)
  local buf = self._store[key]
  self:_pull(tostring(key), buf, 3)
  return buf
end

-- every key's PULL requests go out before the first answer is awaited
function DistAsync:_pull_values(keys)
  local ids, bufs, targets = {}, {}, {}
  for i = 1, #keys do
    bufs[i] = self._store[keys[i]]
    targets[i] = self:_pull_send(tostring(keys[i]), bufs[i], ids, 3)
  end
  self:wait(ids)
  for i = 1, #keys do
    if targets[i] ~= bufs[i] then targets[i]:copyto(bufs[i]) end
  end
  return bufs
end

function DistAsync:_barrier() self:barrier_() end
function DistAsync:_close() self:close_() end

function DistAsync:get_rank() return self.rank end
function DistAsync:get_num_workers() return self.num_workers end

return M
