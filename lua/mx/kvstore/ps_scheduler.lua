-- mx.kvstore.ps_scheduler — the dist_async scheduler role (and the server's outline) (docs/distributed.md,
-- section dist_async). Started by tools/launch.lua (or by hand) with MXNet's variables:
--
--   DMLC_ROLE=scheduler|server  DMLC_PS_ROOT_URI  DMLC_PS_ROOT_PORT
--   DMLC_NUM_WORKER  DMLC_NUM_SERVER   [DMLC_NODE_HOST: the address a server advertises]
--   luajit -e 'os.exit(require("mx.kvstore.ps_main").main())'   (or bin/mx -e ...)
--
-- Scheduler: binds ROOT_URI:ROOT_PORT, takes REGISTER from every server and worker, gives
-- ranks (the one a node asks for — DMLC_WORKER_ID / DMLC_SERVER_ID, as tools/launch.lua
-- sets them — else in arrival order) and, once all have come, tells each the server list (addresses)
-- and the staleness bound; then serves BARRIER, watches every connection (a zmq socket
-- monitor: a peer whose TCP connection drops without a BYE is dead; a waiting barrier is
-- answered with an error naming it), and when every worker has said BYE or died tells the
-- servers to shut down and exits.
-- Server: binds an ephemeral port, registers, then holds its shard of the keys: INIT,
-- PUSH (applied at once through the server-side optimizer, or stored when none is set),
-- PULL, SET_OPT (name + plain options, rebuilt with mx.optimizer.create), GET/SET_STATES;
-- with a staleness bound s, a PUSH from a worker more than s pushes (of that key) ahead of
-- the slowest live worker is acknowledged only when the slowest catches up, or answered
-- with an error naming the slowest when that one died. Malformed messages are logged and
-- dropped (no reply: a hostile peer gets nothing back); serving goes on.
local Z = require("mx.kvstore.ps_zmq")
local P = require("mx.kvstore.ps_protocol")

local CMD = P.CMD
local M = {}

local C = require("mx.kvstore.ps_common")
local log, env_num, reply = C.log, C.env_num, C.reply

---------------------------------------------------------------- scheduler
function M.run()
  local role = "scheduler"
  local nw, ns = env_num("DMLC_NUM_WORKER"), env_num("DMLC_NUM_SERVER")
  if nw < 1 or ns < 1 then error("dist_async: DMLC_NUM_WORKER and DMLC_NUM_SERVER must be >= 1", 2) end
  local _, _, port = C.root_address()
  local sock = Z.socket(Z.ROUTER)
  Z.bind(sock, string.format("tcp://*:%d", port))
  local mon = Z.monitor(sock, Z.EVENT_DISCONNECTED)
  local peers = C.new_peers()
  log(role, "listening on port %d for %d server(s), %d worker(s), pid %d", port, ns, nw,
    C.getpid())

  local servers, workers = {}, {} -- in rank order: {ident, addr, req}
  local staleness
  local deadline = Z.now() + C.timeout() * 4 -- registration: the whole job comes up
  local started = false
  local worker_state = {} -- rank -> "live" | "bye" | "dead"
  local rank_of = {}      -- ident -> {role, rank}
  local barrier = {}      -- rank -> {ident, req}
  local nbarrier = 0
  local server_dead
  local died = {} -- dead workers' names, in the order they died
  local function dead_names() return died end
  local function answer_barrier(err)
    for r, b in pairs(barrier) do
      reply(sock, b.ident, err and CMD.ERR or CMD.OK, b.req, err or "")
      barrier[r] = nil
    end
    nbarrier = 0
  end
  local function check_barrier()
    if nbarrier == 0 then return end
    local d = dead_names()
    if #d > 0 then
      answer_barrier("barrier cannot complete: " .. d[1] .. " died (its connection to the "
        .. "scheduler dropped without a goodbye)" .. (#d > 1 and ("; gone since: "
        .. table.concat(d, ", ", 2)) or ""))
      return
    end
    local live = 0
    for r = 0, nw - 1 do if worker_state[r] == "live" then live = live + 1 end end
    if nbarrier >= live then answer_barrier(nil) end
  end
  local function all_done()
    if not started then return false end
    for r = 0, nw - 1 do if worker_state[r] == "live" then return false end end
    return true
  end

  local code = 0
  while true do
    local rd = Z.poll({ sock, mon }, 200)
    if rd[2] then
      while true do
        local ev, fd = Z.read_event(mon)
        if not ev then break end
        local ident = peers:lost(fd)
        local who = ident and rank_of[ident]
        if who and who.role == "worker" and worker_state[who.rank] == "live" then
          worker_state[who.rank] = "dead"
          died[#died + 1] = "worker " .. who.rank
          log(role, "worker %d disconnected without a goodbye: counted as dead", who.rank)
          check_barrier()
        elseif who and who.role == "server" and not who.bye then
          server_dead = who.rank
          log(role, "server %d (%s) disconnected: shutting down", who.rank, servers[who.rank + 1].addr)
        end
      end
    end
    if rd[1] then
      while true do
        local parts, fd = Z.recv_parts(sock, Z.DONTWAIT)
        if not parts then break end
        local ident = Z.part_string(parts[1])
        local m, why = P.decode(Z, parts, 2)
        if not m then
          log(role, "rejected a malformed message from peer %q: %s", ident, why)
        else
          peers:saw(ident, fd)
          if m.cmd == CMD.REGISTER then
            if started then
              reply(sock, ident, CMD.ERR, m.req, "the job already has all its nodes")
            elseif m.arg == 2 and #servers < ns then
              local addr = m.text
              if addr:match("^:%d+$") then
                -- no host given: the address the server's connection came from
                addr = "tcp://" .. Z.peer_address(parts[#parts]) .. addr
              end
              servers[#servers + 1] = { ident = ident, addr = addr, req = m.req,
                want = tonumber(m.arg2) }
            elseif m.arg == 1 and #workers < nw then
              workers[#workers + 1] = { ident = ident, req = m.req, staleness = m.arg2,
                want = tonumber((m.text or ""):match("^rank=(%d+)$") or "") }
            else
              reply(sock, ident, CMD.ERR, m.req, "unexpected REGISTER (role " .. m.arg .. ")")
            end
            if #servers == ns and #workers == nw then
              started = true
              servers = C.assign_ranks(servers)
              workers = C.assign_ranks(workers)
              for i, sv in ipairs(servers) do rank_of[sv.ident] = { role = "server", rank = i - 1 } end
              for i, w in ipairs(workers) do rank_of[w.ident] = { role = "worker", rank = i - 1 } end
              staleness = workers[1].staleness
              local addrs = {}
              for i, s in ipairs(servers) do addrs[i] = s.addr end
              local info = string.format("num_workers=%d\nnum_servers=%d\nstaleness=%d\nservers=%s",
                nw, ns, staleness, table.concat(addrs, ","))
              for i, s in ipairs(servers) do reply(sock, s.ident, CMD.OK, s.req, info, i - 1) end
              for i, w in ipairs(workers) do
                worker_state[i - 1] = "live"
                reply(sock, w.ident, CMD.OK, w.req, info, i - 1)
              end
              log(role, "all %d server(s) and %d worker(s) registered", ns, nw)
            end
          elseif m.cmd == CMD.BARRIER then
            local who = rank_of[ident]
            if not started or not who or who.role ~= "worker" then
              reply(sock, ident, CMD.ERR, m.req, "BARRIER from an unregistered peer")
            else
              barrier[who.rank] = { ident = ident, req = m.req }
              nbarrier = 0
              for _ in pairs(barrier) do nbarrier = nbarrier + 1 end
              check_barrier()
            end
          elseif m.cmd == CMD.BYE then
            local who = rank_of[ident]
            if who and who.role == "worker" then
              worker_state[who.rank] = "bye"
              check_barrier()
            elseif who then who.bye = true end
            reply(sock, ident, CMD.OK, m.req, "")
          elseif m.cmd == CMD.PING then
            reply(sock, ident, CMD.OK, m.req, "")
          else
            log(role, "rejected command %s from %q: not a scheduler command", P.CMD_NAME[m.cmd], ident)
            reply(sock, ident, CMD.ERR, m.req, "the scheduler does not serve " .. P.CMD_NAME[m.cmd])
          end
        end
        Z.free_parts(parts)
      end
    end
    if server_dead or all_done() then
      if server_dead then code = 1 end
      for _, s in ipairs(servers) do
        local sm = P.text_message(CMD.SHUTDOWN, "", "")
        Z.send_parts(sock, { s.ident, sm[1], sm[2], sm[3], sm[4] })
      end
      local d = dead_names()
      if #d > 0 then log(role, "done; dead: %s", table.concat(d, ", ")) end
      break
    end
    if not started and Z.now() > deadline then
      log(role, "gave up: %d of %d server(s) and %d of %d worker(s) registered in time",
        #servers, ns, #workers, nw)
      code = 1
      break
    end
  end
  -- let the SHUTDOWN frames leave before the socket closes (LINGER is 0)
  local t = Z.now()
  while Z.now() - t < 0.2 do Z.poll({ sock }, 50) end
  Z.close(mon)
  Z.close(sock)
  return code
end

return M
