-- mx.kvstore.ps_server — the dist_async server role: holds its shard of the keys and runs
-- the optimizer on them (docs/distributed.md, section dist_async; the protocol is in
-- ps_protocol.lua, the scheduler in ps_scheduler.lua).
--
-- INIT key value: stored when the key is new (rank 0 initialises; a second INIT of the
-- same key with another shape or dtype is an error). PUSH key grad: applied at once —
-- opt:update(index, w, grad, state) when an optimizer is set, else the pushed value
-- replaces the stored one (MXNet's default updater: assignment). PULL key: the stored
-- value. SET_OPT name options: the optimizer rebuilt by name from mx.optimizer (options
-- are plain numbers/strings/booleans: no code travels). GET_STATES / SET_STATES: the
-- optimizer's states for this shard, as one blob (ps_protocol.encode_states).
-- PUSH_RSP key rows: a row_sparse gradient (the rows a worker touched) applied as PUSH's,
-- lazily by the optimizer (only those rows and their states change); without one the
-- stored value becomes the pushed rows, zeros elsewhere. PULL_RSP key ids: those rows.
-- Staleness s >= 0 (stale-synchronous parallel): the PUSH acknowledgement of a worker that
-- is more than s pushes of that key ahead of the slowest live worker waits until the
-- slowest catches up; when the slowest one died the wait ends with an error naming it.
local Z = require("mx.kvstore.ps_zmq")
local P = require("mx.kvstore.ps_protocol")
local C = require("mx.kvstore.ps_common")
local ffi = require("ffi")

local CMD = P.CMD
local log, reply = C.log, C.reply
local M = {}

local DT_NAME = P.DT_NAME

local Server = {}
Server.__index = Server

function M.new(info, rank, role)
  -- (mx loads here, not at the top: ps_main sets the server's MX_NUM_THREADS and
  -- MX_ENGINE first, and libmx reads them when it loads)
  local mx = require("mx")
  local self = setmetatable({
    mx = mx, nd = mx.nd, rank = rank, role = role,
    num_workers = info.num_workers, staleness = info.staleness,
    store = {},        -- key -> NDArray
    states = {},       -- key -> optimizer state list
    gbuf = {},         -- key -> gradient buffer
    clock = {},        -- key -> {rank -> pushes}
    deferred = {},     -- list of {key, rank, ident, req, step}
    worker = {},       -- rank -> "live" | "bye" | "dead"
    opt = nil,
  }, Server)
  for r = 0, info.num_workers - 1 do self.worker[r] = "live" end
  return self
end

local function worker_rank(ident)
  local r = ident:match("^w(%d+)$")
  return r and tonumber(r)
end

-- the optimizer's index for a key: the base key (shards "k#p" share it), a number
-- when it is one (MXNet's int keys)
local function opt_index(key)
  local base = key:match("^(.*)#%d+$") or key
  return tonumber(base) or base
end

function Server:tensor_from(m)
  local dt = DT_NAME[m.dtype]
  local shape = #m.shape > 0 and m.shape or { 1 }
  local t = self.nd.empty(shape, { dtype = dt })
  if m.nbytes > 0 then ffi.copy(t:data_ptr(), m.data, m.nbytes) end
  if #m.shape == 0 then t = t:reshape({}) end
  return t
end

local function same_layout(t, m, nd)
  if nd.dtype_code(t:dtype()) ~= m.dtype then return false end
  local s = t:shape()
  if #s ~= #m.shape then return false end
  for i = 1, #s do if s[i] ~= m.shape[i] then return false end end
  return true
end

function Server:send_tensor(ident, req, t)
  local nd = self.nd
  local shape = t:shape()
  local nbytes = t:size() * P.ITEMSIZE[nd.dtype_code(t:dtype())]
  local hdr = P.header(CMD.OK, nd.dtype_code(t:dtype()), #shape, req, 0, 0, nbytes)
  Z.send_parts(self.sock, { ident, hdr, "", P.shape_frame(shape), { t:data_ptr(), nbytes } })
end

-- the slowest live worker's clock for key (and its rank)
function Server:slowest(key)
  local ck = self.clock[key] or {}
  local lo, who = math.huge, nil
  for r = 0, self.num_workers - 1 do
    if self.worker[r] ~= "bye" then
      local c = ck[r] or 0
      if c < lo then lo, who = c, r end
    end
  end
  return lo, who
end

-- Deferred requests, in arrival order: a PUSH acknowledgement waiting for the slowest
-- worker, and any PULL its worker sent after it (a blocked worker reads nothing newer).
-- release() answers what is now allowed, keeping each worker's order, and fails those
-- waiting on a worker that died.
function Server:release()
  local keep, blocked = {}, {}
  for _, d in ipairs(self.deferred) do
    if blocked[d.ident] then
      keep[#keep + 1] = d
    elseif d.pull then
      local t = self.store[d.key]
      if not t then
        reply(self.sock, d.ident, CMD.ERR, d.req, "pull: key " .. d.key .. " was never initialised")
      elseif d.rows then self:send_rows(d.ident, d.req, d.key, t, d.rows)
      else self:send_tensor(d.ident, d.req, t) end
    else
      local lo, who = self:slowest(d.key)
      if who == nil or d.step - lo <= self.staleness then
        reply(self.sock, d.ident, CMD.OK, d.req, "")
      elseif self.worker[who] == "dead" then
        reply(self.sock, d.ident, CMD.ERR, d.req, string.format(
          "staleness bound %d: worker %d is %d pushes of key %s ahead of worker %d, which died "
          .. "(its connection to server %d dropped without a goodbye)",
          self.staleness, worker_rank(d.ident) or -1, d.step - lo, d.key, who, self.rank))
        blocked[d.ident] = "failed"
      else
        keep[#keep + 1] = d
        blocked[d.ident] = true
      end
    end
  end
  -- after a failure, the same worker's later deferred requests fail too
  local keep2 = {}
  for _, d in ipairs(keep) do
    if blocked[d.ident] == "failed" then
      reply(self.sock, d.ident, CMD.ERR, d.req, "an earlier request of this worker failed")
    else keep2[#keep2 + 1] = d end
  end
  self.deferred = keep2
end

function Server:is_blocked(ident)
  for _, d in ipairs(self.deferred) do if d.ident == ident then return true end end
  return false
end

-- The rows (a Lua list of 0-based ids, checked) of t as one (n, row dims...) reply.
function Server:send_rows(ident, req, key, t, rows)
  local nd = self.nd
  local shape = t:shape()
  local nrows = shape[1] or 1
  for _, r in ipairs(rows) do
    if r < 0 or r >= nrows then
      return reply(self.sock, ident, CMD.ERR, req, string.format(
        "row_sparse_pull: row %d of key %s is outside its %d rows", r, key, nrows))
    end
  end
  local rs = { #rows }
  for d = 2, #shape do rs[d] = shape[d] end
  local out = nd.empty(rs, { dtype = t:dtype() })
  local rb = (nrows > 0 and t:size() / nrows or 0) * P.ITEMSIZE[nd.dtype_code(t:dtype())]
  local src, dst = ffi.cast("uint8_t*", t:data_ptr()), ffi.cast("uint8_t*", out:data_ptr())
  for i, r in ipairs(rows) do ffi.copy(dst + (i - 1) * rb, src + r * rb, rb) end
  self:send_tensor(ident, req, out)
end

-- A PUSH_RSP's rows as a row_sparse gradient of t's shape (nil, why when they do not fit).
function Server:rsp_from(t, m)
  local nd = self.nd
  local s = t:shape()
  if nd.dtype_code(t:dtype()) ~= m.dtype or #s ~= #m.shape then
    return nil, string.format("push: key %s holds a %s %s; the pushed rows are %s %s", m.key,
      t:dtype(), table.concat(s, "x"), DT_NAME[m.dtype] or "?", table.concat(m.shape, "x"))
  end
  for d = 2, #s do
    if s[d] ~= m.shape[d] then
      return nil, string.format("push: key %s holds rows of %s; the pushed rows are %s", m.key,
        table.concat(s, "x", 2), table.concat(m.shape, "x", 2))
    end
  end
  local k = m.shape[1]
  local ids = nd.empty({ k }, { dtype = "int64" })
  local data = nd.empty(m.shape, { dtype = t:dtype() })
  local p = ffi.cast("const uint8_t*", m.data)
  local ip = ffi.cast("const int64_t*", p)
  for i = 0, k - 1 do
    if ip[i] < 0 or ip[i] >= s[1] then
      return nil, string.format("push: row %d of key %s is outside its %d rows",
        tonumber(ip[i]), m.key, s[1])
    end
  end
  if k > 0 then
    ffi.copy(ids:data_ptr(), p, k * 8)
    ffi.copy(data:data_ptr(), p + k * 8, m.nbytes - k * 8)
  end
  return nd.sparse.row_sparse_array({ data, ids }, { shape = s })
end

-- A push's acknowledgement, held back under a staleness bound (see the header).
function Server:ack_push(ident, key, m)
  local r = worker_rank(ident)
  if self.staleness >= 0 and r and self.worker[r] then
    local ck = self.clock[key]
    if not ck then ck = {} self.clock[key] = ck end
    local step = (ck[r] or 0) + 1
    ck[r] = step
    local lo = self:slowest(key)
    if step - lo > self.staleness then
      self.deferred[#self.deferred + 1] = { key = key, ident = ident, req = m.req, step = step }
    else
      reply(self.sock, ident, CMD.OK, m.req, "")
    end
    if #self.deferred > 0 then self:release() end
    return
  end
  return reply(self.sock, ident, CMD.OK, m.req, "")
end

function Server:handle(ident, m)
  local key = m.key
  local cmd = m.cmd
  local nd = self.nd
  if cmd == CMD.INIT then
    local t = self.store[key]
    if t then
      if not same_layout(t, m, nd) then
        return reply(self.sock, ident, CMD.ERR, m.req, string.format(
          "init: key %s already holds a %s %s, not a %s %s", key, t:dtype(),
          table.concat(t:shape(), "x"), DT_NAME[m.dtype] or "?", table.concat(m.shape, "x")))
      end
    else
      self.store[key] = self:tensor_from(m)
    end
    return reply(self.sock, ident, CMD.OK, m.req, "")
  elseif cmd == CMD.PUSH then
    local t = self.store[key]
    if not t then
      return reply(self.sock, ident, CMD.ERR, m.req, "push: key " .. key .. " was never initialised")
    end
    if not same_layout(t, m, nd) then
      return reply(self.sock, ident, CMD.ERR, m.req, string.format(
        "push: key %s holds a %s %s; the pushed value is a %s %s", key, t:dtype(),
        table.concat(t:shape(), "x"), DT_NAME[m.dtype] or "?", table.concat(m.shape, "x")))
    end
    if self.opt then
      -- one gradient buffer per key, refilled by every push (no allocation per push)
      local g = self.gbuf[key]
      if g then ffi.copy(g:data_ptr(), m.data, m.nbytes)
      else g = self:tensor_from(m) self.gbuf[key] = g end
      local st = self.states[key]
      local idx = opt_index(key)
      if st == nil then st = self.opt:create_state(idx, t) or {} self.states[key] = st end
      self.opt:update(idx, t, g, st)
    elseif m.nbytes > 0 then
      ffi.copy(t:data_ptr(), m.data, m.nbytes)
    end
    return self:ack_push(ident, key, m)
  elseif cmd == CMD.PUSH_RSP then
    local t = self.store[key]
    if not t then
      return reply(self.sock, ident, CMD.ERR, m.req, "push: key " .. key .. " was never initialised")
    end
    local g, why = self:rsp_from(t, m)
    if not g then return reply(self.sock, ident, CMD.ERR, m.req, why) end
    if self.opt then
      local st = self.states[key]
      local idx = opt_index(key)
      if st == nil then st = self.opt:create_state(idx, t) or {} self.states[key] = st end
      self.opt:update(idx, t, g, st)
    else
      nd.cast_storage(g):copyto(t)
    end
    return self:ack_push(ident, key, m)
  elseif cmd == CMD.PULL_RSP then
    local ip = ffi.cast("const int64_t*", m.data)
    local rows = {}
    if m.dtype ~= 6 or #m.shape ~= 1 then
      return reply(self.sock, ident, CMD.ERR, m.req, "row_sparse_pull: the row ids must be a "
        .. "1-d int64 tensor")
    end
    for i = 0, m.shape[1] - 1 do rows[i + 1] = tonumber(ip[i]) end
    if #self.deferred > 0 and self:is_blocked(ident) then
      self.deferred[#self.deferred + 1] = { key = key, ident = ident, req = m.req, pull = true,
        rows = rows }
      return
    end
    local t = self.store[key]
    if not t then
      return reply(self.sock, ident, CMD.ERR, m.req, "pull: key " .. key .. " was never initialised")
    end
    return self:send_rows(ident, m.req, key, t, rows)
  elseif cmd == CMD.PULL then
    if #self.deferred > 0 and self:is_blocked(ident) then
      self.deferred[#self.deferred + 1] = { key = key, ident = ident, req = m.req, pull = true }
      return
    end
    local t = self.store[key]
    if not t then
      return reply(self.sock, ident, CMD.ERR, m.req, "pull: key " .. key .. " was never initialised")
    end
    return self:send_tensor(ident, m.req, t)
  elseif cmd == CMD.SET_OPT then
    local opts, err = P.decode_options(m.text or "")
    if not opts then return reply(self.sock, ident, CMD.ERR, m.req, "set_optimizer: " .. err) end
    local ok, o = pcall(self.mx.optimizer.create, key, opts)
    if not ok then return reply(self.sock, ident, CMD.ERR, m.req, "set_optimizer: " .. tostring(o)) end
    self.opt, self.states = o, {}
    log(self.role, "optimizer %s set", key)
    return reply(self.sock, ident, CMD.OK, m.req, "")
  elseif cmd == CMD.GET_STATES then
    return reply(self.sock, ident, CMD.OK, m.req, self:encode_states())
  elseif cmd == CMD.SET_STATES then
    local ok, err = self:decode_states(m.text or "")
    return reply(self.sock, ident, ok and CMD.OK or CMD.ERR, m.req, ok and "" or
      ("load_optimizer_states: " .. err))
  elseif cmd == CMD.BYE then
    local r = worker_rank(ident)
    if r and self.worker[r] then self.worker[r] = "bye" end
    reply(self.sock, ident, CMD.OK, m.req, "")
    if #self.deferred > 0 then self:release() end
    return
  elseif cmd == CMD.PING then
    return reply(self.sock, ident, CMD.OK, m.req, "")
  end
  log(self.role, "rejected command %s from %q: not a server command", P.CMD_NAME[cmd], ident)
  return reply(self.sock, ident, CMD.ERR, m.req, "a server does not serve " .. P.CMD_NAME[cmd])
end

function Server:encode_states()
  local nd = self.nd
  local entries = {}
  local keys = {}
  for k in pairs(self.states) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local sts = {}
    for i, s in ipairs(self.states[k]) do
      local nb = s:size() * P.ITEMSIZE[nd.dtype_code(s:dtype())]
      sts[i] = { dtype = nd.dtype_code(s:dtype()), shape = s:shape(),
        bytes = ffi.string(s:data_ptr(), nb) }
    end
    entries[#entries + 1] = { key = k, states = sts }
  end
  local meta = {}
  if self.opt then
    local d = self.opt:get_state_data()
    meta.num_update = d.num_update
    meta.lr = d.lr
    for k, v in pairs(d.counts) do meta["count:" .. tostring(k)] = v end
  end
  return P.encode_states(meta, entries)
end

function Server:decode_states(blob)
  if not self.opt then return false, "no optimizer is set on server " .. self.rank end
  local meta, entries = P.decode_states(blob)
  if not meta then return false, entries end
  local states = {}
  for _, e in ipairs(entries) do
    local list = {}
    for i, s in ipairs(e.states) do
      local t = self.nd.empty(#s.shape > 0 and s.shape or { 1 }, { dtype = DT_NAME[s.dtype] })
      ffi.copy(t:data_ptr(), s.bytes, #s.bytes)
      list[i] = t
    end
    states[e.key] = list
  end
  self.states = states
  local counts = {}
  for k, v in pairs(meta) do
    local ck = type(k) == "string" and k:match("^count:(.*)$")
    if ck then counts[tonumber(ck) or ck] = v end
  end
  self.opt:set_state_data({ num_update = meta.num_update, lr = meta.lr, counts = counts })
  return true
end

-- run(): register with the scheduler, serve until SHUTDOWN (or the scheduler is gone).
function M.run()
  local root = C.root_address()
  local host = os.getenv("DMLC_NODE_HOST")
  local sock = Z.socket(Z.ROUTER)
  local port = tonumber(os.getenv("DMLC_SERVER_PORT") or "") or 0
  Z.bind(sock, string.format("tcp://*:%d", port))
  port = tonumber(Z.last_endpoint(sock):match(":(%d+)$"))
  local addr = (host and host ~= "") and string.format("tcp://%s:%d", host, port) or (":" .. port)
  local sched = Z.socket(Z.DEALER)
  Z.connect(sched, root)
  local smon = Z.monitor(sched, Z.EVENT_DISCONNECTED)
  local m0 = P.text_message(CMD.REGISTER, "", addr, 1, 2,
    tonumber(os.getenv("DMLC_SERVER_ID") or os.getenv("OMPI_COMM_WORLD_RANK") or "") or -1)
  Z.send_parts(sched, m0)
  -- the scheduler answers once every node has registered
  local rd
  local limit = Z.now() + C.timeout() * 4
  local info, rank
  while true do
    rd = Z.poll({ sched }, 500)
    if rd[1] then
      local parts = Z.recv_parts(sched, Z.DONTWAIT)
      if parts then
        local m, why = P.decode(Z, parts, 1)
        if m and m.cmd == CMD.OK then
          info = C.parse_info(m.text)
          rank = m.arg
        elseif m then
          error("dist_async server: the scheduler refused registration: " .. tostring(m.text))
        else
          error("dist_async server: malformed scheduler reply: " .. why)
        end
        Z.free_parts(parts)
        break
      end
    end
    if Z.now() > limit then
      error("dist_async server: no answer from the scheduler at " .. root .. " (registration)")
    end
  end
  local role = "server " .. rank
  local self = M.new(info, rank, role)
  self.sock = sock
  local mon = Z.monitor(sock, Z.EVENT_DISCONNECTED)
  local peers = C.new_peers()
  log(role, "serving on port %d (%d worker(s), staleness %d), pid %d", port, info.num_workers,
    info.staleness, C.getpid())
  local code = 0
  while true do
    rd = Z.poll({ sock, sched, mon, smon }, 500)
    if rd[3] then
      while true do
        local ev, fd = Z.read_event(mon)
        if not ev then break end
        local ident = peers:lost(fd)
        local r = ident and worker_rank(ident)
        if r and self.worker[r] == "live" then
          self.worker[r] = "dead"
          log(role, "worker %d disconnected without a goodbye: counted as dead", r)
          if #self.deferred > 0 then self:release() end
        end
      end
    end
    if rd[1] then
      for _ = 1, 64 do
        local parts, fd = Z.recv_parts(sock, Z.DONTWAIT)
        if not parts then break end
        local ident = Z.part_string(parts[1])
        local m, why = P.decode(Z, parts, 2)
        if not m then
          log(role, "rejected a malformed message from peer %q: %s", ident, why)
        else
          peers:saw(ident, fd)
          local ok, err = pcall(self.handle, self, ident, m)
          if not ok then
            log(role, "error serving %s of key %q: %s", P.CMD_NAME[m.cmd], m.key, tostring(err))
            reply(sock, ident, CMD.ERR, m.req, "server " .. rank .. ": " .. tostring(err))
          end
        end
        Z.free_parts(parts)
      end
    end
    if rd[2] then
      local parts = Z.recv_parts(sched, Z.DONTWAIT)
      if parts then
        local m = P.decode(Z, parts, 1)
        Z.free_parts(parts)
        if m and m.cmd == CMD.SHUTDOWN then log(role, "shutdown") break end
      end
    end
    if rd[4] and Z.read_event(smon) then
      log(role, "the scheduler went away: exiting")
      code = 1
      break
    end
  end
  Z.close(mon) Z.close(smon) Z.close(sched) Z.close(sock)
  return code
end

return M
