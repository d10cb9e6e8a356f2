#!/usr/bin/env luajit
-- tools/launch.lua — start a dist_async job (MXNet's tools/launch.py for luamx).
--
--   luajit tools/launch.lua -n WORKERS -s SERVERS [--launcher local|ssh|mpi] [-H hostfile]
--       [--port P] [--root-uri HOST] [--grace SECONDS] [--keep-going] [--dry-run]
--       COMMAND [ARGS...]
--
-- Every process gets MXNet's variables: DMLC_ROLE (scheduler|server|worker),
-- DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT, DMLC_NUM_WORKER, DMLC_NUM_SERVER, plus
-- DMLC_WORKER_ID / DMLC_SERVER_ID (the rank it asks the scheduler for). Workers run
-- COMMAND; the scheduler and the servers run luamx's server entry
-- (bin/mx -e 'os.exit(require("mx.kvstore.ps_main").main())').
--
-- local (default): spawns everything here on 127.0.0.1 (a free port unless --port), each
-- process in its own process group; forwards every line of output prefixed with its role
-- ("[worker 1] ..."); when a process fails, or on Ctrl-C / SIGTERM, kills all the others
-- (SIGTERM, then SIGKILL after --grace seconds, default 2) and exits with the first failing
-- exit code (128 + signal for a killed one). With --keep-going a failing process
-- stops nobody (dist_async: the other workers go on, or fail by themselves naming the dead
-- worker or server within their deadline); the exit code is still the first failure's.
-- When all workers have ended, the servers and the scheduler get max(--grace, 10) seconds
-- to shut down by themselves (they do once every worker said goodbye or died).
-- ssh: the scheduler runs here; servers and workers on the hosts of the hostfile (one per
-- line, round robin) through `ssh HOST 'cd DIR && env DMLC_...=... COMMAND'`.
-- mpi: the scheduler runs here; `mpirun -n S` the servers and `mpirun -n W` the workers,
-- with -x for each variable (and --hostfile when given). --dry-run prints the commands.
local ffi = require("ffi")

local M = {}

local function shell_quote(s)
  if s:match("^[%w%-%./_=:,@+]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end
M.shell_quote = shell_quote

local USAGE = "usage: tools/launch.lua -n WORKERS -s SERVERS [--launcher local|ssh|mpi] "
  .. "[-H hostfile] [--port P] [--root-uri HOST] [--grace S] [--keep-going] [--dry-run] "
  .. "COMMAND [ARGS...]"

-- parse(argv) -> options table, or nil + message
function M.parse(argv)
  local o = { launcher = "local", grace = 2, command = {} }
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local function val()
      i = i + 1
      if argv[i] == nil then error({ msg = a .. " needs a value" }) end
      return argv[i]
    end
    if a == "-n" or a == "--num-workers" then o.workers = tonumber(val())
    elseif a == "-s" or a == "--num-servers" then o.servers = tonumber(val())
    elseif a == "--launcher" then o.launcher = val()
    elseif a == "-H" or a == "--hostfile" then o.hostfile = val()
    elseif a == "--port" then o.port = tonumber(val())
    elseif a == "--root-uri" then o.root_uri = val()
    elseif a == "--grace" then o.grace = tonumber(val())
    elseif a == "--dry-run" then o.dry_run = true
    elseif a == "--keep-going" then o.keep_going = true
    elseif a == "--" then
      for j = i + 1, #argv do o.command[#o.command + 1] = argv[j] end
      break
    elseif a:sub(1, 1) == "-" and #o.command == 0 then error({ msg = "unknown option " .. a })
    else
      for j = i, #argv do o.command[#o.command + 1] = argv[j] end
      break
    end
    i = i + 1
  end
  if not o.workers or o.workers < 1 or o.workers % 1 ~= 0 then
    error({ msg = "-n WORKERS: a positive integer" })
  end
  if o.servers == nil then o.servers = 1 end
  if not o.servers or o.servers < 1 or o.servers % 1 ~= 0 then
    error({ msg = "-s SERVERS: a positive integer" })
  end
  if o.launcher ~= "local" and o.launcher ~= "ssh" and o.launcher ~= "mpi" then
    error({ msg = "--launcher must be local, ssh or mpi, not " .. o.launcher })
  end
  if o.launcher == "ssh" and not o.hostfile then error({ msg = "--launcher ssh needs -H hostfile" }) end
  if not o.grace or o.grace < 0 then error({ msg = "--grace: seconds" }) end
  if #o.command == 0 then error({ msg = "no COMMAND to run" }) end
  return o
end

function M.read_hosts(path)
  local f, err = io.open(path, "r")
  if not f then error({ msg = "cannot read hostfile " .. path .. ": " .. tostring(err) }) end
  local hosts = {}
  for line in f:lines() do
    local h = line:gsub("#.*", ""):match("^%s*(%S+)")
    if h then hosts[#hosts + 1] = h end
  end
  f:close()
  if #hosts == 0 then error({ msg = "hostfile " .. path .. " lists no host" }) end
  return hosts
end

-- the checkout's root (tools/..), for the server entry
local function root_dir()
  local src = debug.getinfo(1, "S").source:sub(2)
  local dir = src:match("^(.*)/tools/[^/]*$") or "."
  if dir:sub(1, 1) ~= "/" then
    local p = io.popen("pwd")
    local cwd = p:read("*l")
    p:close()
    dir = dir == "." and cwd or (cwd .. "/" .. dir)
  end
  return (dir:gsub("/%.$", ""))
end
M.root_dir = root_dir

function M.server_command(root)
  return { root .. "/bin/mx", "-e", 'os.exit(require("mx.kvstore.ps_main").main())' }
end

-- plan(o): the processes to start: list of {role=, name=, env={K=V}, argv={...}, host=}
-- (the ssh/mpi ones are argv lists of ssh / mpirun commands)
function M.plan(o, root, cwd)
  root = root or root_dir()
  cwd = cwd or root
  local uri = o.root_uri
  if not uri and o.launcher == "local" then uri = "127.0.0.1" end
  if not uri then -- ssh/mpi: this host, where the scheduler runs, as the others reach it
    local p = io.popen("hostname -f 2>/dev/null || hostname")
    uri = p:read("*l") or "127.0.0.1"
    p:close()
  end
  local base = { DMLC_PS_ROOT_URI = uri, DMLC_PS_ROOT_PORT = tostring(o.port),
    DMLC_NUM_WORKER = tostring(o.workers), DMLC_NUM_SERVER = tostring(o.servers) }
  local function env(extra)
    local e = {}
    for k, v in pairs(base) do e[k] = v end
    for k, v in pairs(extra) do e[k] = v end
    return e
  end
  local srv = M.server_command(root)
  local procs = { { role = "scheduler", name = "scheduler", env = env { DMLC_ROLE = "scheduler" },
    argv = srv } }
  local function envlist(e)
    local keys = {}
    for k in pairs(e) do keys[#keys + 1] = k end
    table.sort(keys)
    return keys
  end
  if o.launcher == "local" then
    for i = 0, o.servers - 1 do
      procs[#procs + 1] = { role = "server", name = "server " .. i,
        env = env { DMLC_ROLE = "server", DMLC_SERVER_ID = tostring(i) }, argv = srv }
    end
    for i = 0, o.workers - 1 do
      procs[#procs + 1] = { role = "worker", name = "worker " .. i,
        env = env { DMLC_ROLE = "worker", DMLC_WORKER_ID = tostring(i) }, argv = o.command }
    end
  elseif o.launcher == "ssh" then
    local hosts = o.hosts or M.read_hosts(o.hostfile)
    local n = 0
    local function remote(role, i, argv)
      n = n + 1
      local host = hosts[(n - 1) % #hosts + 1]
      local e = env { DMLC_ROLE = role, DMLC_NODE_HOST = host,
        [role == "server" and "DMLC_SERVER_ID" or "DMLC_WORKER_ID"] = tostring(i) }
      local words = { "cd", shell_quote(cwd), "&&", "env" }
      for _, k in ipairs(envlist(e)) do words[#words + 1] = k .. "=" .. shell_quote(e[k]) end
      for _, a in ipairs(argv) do words[#words + 1] = shell_quote(a) end
      procs[#procs + 1] = { role = role, name = role .. " " .. i, host = host, env = {},
        argv = { "ssh", "-o", "StrictHostKeyChecking=no", "-o", "BatchMode=yes", host,
          table.concat(words, " ") } }
    end
    for i = 0, o.servers - 1 do remote("server", i, srv) end
    for i = 0, o.workers - 1 do remote("worker", i, o.command) end
  else -- mpi
    local function mpi(role, count, argv)
      local e = env { DMLC_ROLE = role }
      local a = { "mpirun", "-n", tostring(count) }
      if o.hostfile then a[#a + 1] = "--hostfile" a[#a + 1] = o.hostfile end
      for _, k in ipairs(envlist(e)) do
        a[#a + 1] = "-x" a[#a + 1] = k .. "=" .. e[k]
      end
      for _, w in ipairs(argv) do a[#a + 1] = w end
      procs[#procs + 1] = { role = role, name = role .. "s", env = {}, argv = a }
    end
    mpi("server", o.servers, srv)
    mpi("worker", o.workers, o.command)
  end
  return procs
end

---------------------------------------------------------------- local processes (POSIX)
ffi.cdef [[
typedef struct { unsigned long val[16]; } mx_l_sigset_t;
struct mx_l_pollfd { int fd; short events; short revents; };
struct mx_l_siginfo { uint32_t ssi_signo; int32_t ssi_errno; int32_t ssi_code; uint32_t ssi_pid;
  uint8_t pad[112]; };
struct mx_l_timespec { long tv_sec; long tv_nsec; };
int mx_l_fork(void) __asm__("fork");
int mx_l_execvp(const char *file, char *const argv[]) __asm__("execvp");
int mx_l_pipe(int fds[2]) __asm__("pipe");
int mx_l_dup2(int a, int b) __asm__("dup2");
int mx_l_close(int fd) __asm__("close");
int mx_l_setenv(const char *k, const char *v, int overwrite) __asm__("setenv");
int mx_l_kill(int pid, int sig) __asm__("kill");
int mx_l_waitpid(int pid, int *status, int options) __asm__("waitpid");
long mx_l_read(int fd, void *buf, size_t n) __asm__("read");
int mx_l_poll(struct mx_l_pollfd *fds, unsigned long n, int timeout) __asm__("poll");
void mx_l__exit(int code) __asm__("_exit");
int mx_l_setpgid(int pid, int pgid) __asm__("setpgid");
int mx_l_sigemptyset(mx_l_sigset_t *s) __asm__("sigemptyset");
int mx_l_sigaddset(mx_l_sigset_t *s, int sig) __asm__("sigaddset");
int mx_l_sigprocmask(int how, const mx_l_sigset_t *set, mx_l_sigset_t *old) __asm__("sigprocmask");
int mx_l_signalfd(int fd, const mx_l_sigset_t *mask, int flags) __asm__("signalfd");
int mx_l_socket(int domain, int type, int protocol) __asm__("socket");
int mx_l_bind(int fd, const void *addr, unsigned int len) __asm__("bind");
int mx_l_getsockname(int fd, void *addr, unsigned int *len) __asm__("getsockname");
char *mx_l_strerror(int e) __asm__("strerror");
int mx_l_clock_gettime(int clk, struct mx_l_timespec *ts) __asm__("clock_gettime");
]]
local Cc = ffi.C
local SIGINT, SIGKILL, SIGTERM, SIGHUP = 2, 9, 15, 1
local WNOHANG = 1

-- a free TCP port on 127.0.0.1 (bind port 0, read it, close)
function M.free_port()
  local fd = Cc.mx_l_socket(2, 1, 0)
  local sa = ffi.new("uint8_t[16]")
  sa[0] = 2 -- AF_INET, port 0, 127.0.0.1
  sa[4], sa[5], sa[6], sa[7] = 127, 0, 0, 1
  if Cc.mx_l_bind(fd, sa, 16) ~= 0 then Cc.mx_l_close(fd) return nil end
  local len = ffi.new("unsigned int[1]", 16)
  Cc.mx_l_getsockname(fd, sa, len)
  local port = sa[2] * 256 + sa[3]
  Cc.mx_l_close(fd)
  return port
end

local tsb = ffi.new("struct mx_l_timespec")
local function now()
  Cc.mx_l_clock_gettime(1, tsb)
  return tonumber(tsb.tv_sec) + tonumber(tsb.tv_nsec) * 1e-9
end

local function decode_status(st)
  local sig = bit.band(st, 0x7f)
  if sig == 0 then return bit.band(bit.rshift(st, 8), 0xff), nil end
  return 128 + sig, sig
end

local function spawn(p, sigmask)
  local fds = ffi.new("int[2]")
  assert(Cc.mx_l_pipe(fds) == 0, "pipe")
  local argv = ffi.new("char*[?]", #p.argv + 1)
  local keep = {}
  for i, a in ipairs(p.argv) do
    keep[i] = ffi.new("char[?]", #a + 1, a)
    argv[i - 1] = keep[i]
  end
  argv[#p.argv] = nil
  local pid = Cc.mx_l_fork()
  if pid == 0 then
    Cc.mx_l_setpgid(0, 0)
    Cc.mx_l_sigprocmask(2, sigmask, nil) -- SIG_SETMASK: the empty mask
    Cc.mx_l_dup2(fds[1], 1)
    Cc.mx_l_dup2(fds[1], 2)
    Cc.mx_l_close(fds[0])
    Cc.mx_l_close(fds[1])
    for k, v in pairs(p.env) do Cc.mx_l_setenv(k, v, 1) end
    Cc.mx_l_execvp(argv[0], argv)
    local msg = "launch: cannot run " .. p.argv[1] .. ": "
      .. ffi.string(Cc.mx_l_strerror(ffi.errno())) .. "\n"
    io.stderr:write(msg)
    io.stderr:flush()
    Cc.mx_l__exit(127)
  end
  Cc.mx_l_close(fds[1])
  if pid < 0 then error("launch: fork failed") end
  Cc.mx_l_setpgid(pid, pid)
  p.pid, p.fd, p.buf, p.keep = pid, fds[0], "", keep
  return p
end

local function out_line(p, line)
  io.stdout:write("[" .. p.name .. "] " .. line .. "\n")
end

-- run(procs, o): the local launcher loop; returns the exit code
function M.run_local(procs, o)
  local block = ffi.new("mx_l_sigset_t")
  local empty = ffi.new("mx_l_sigset_t")
  Cc.mx_l_sigemptyset(block)
  Cc.mx_l_sigemptyset(empty)
  for _, s in ipairs { SIGINT, SIGTERM, SIGHUP } do Cc.mx_l_sigaddset(block, s) end
  Cc.mx_l_sigprocmask(0, block, nil) -- SIG_BLOCK: they arrive on the signalfd instead
  local sfd = Cc.mx_l_signalfd(-1, block, 0)
  for _, p in ipairs(procs) do spawn(p, empty) end
  local live = #procs
  local first_fail
  local killing_at, killed_hard
  local workers_left = 0
  for _, p in ipairs(procs) do if p.role == "worker" then workers_left = workers_left + 1 end end
  local wind_down -- when all workers succeeded: the moment to stop waiting for the others
  local pfds = ffi.new("struct mx_l_pollfd[?]", #procs + 1)
  local buf = ffi.new("uint8_t[65536]")
  local function kill_all(sig)
    for _, p in ipairs(procs) do
      if p.pid and not p.done then Cc.mx_l_kill(-p.pid, sig) end
    end
  end
  local function start_kill(reason)
    if killing_at then return end
    if reason then io.stderr:write("launch: " .. reason .. "; stopping every process\n") end
    killing_at = now()
    kill_all(SIGTERM)
  end
  while true do
    local n = 0
    for _, p in ipairs(procs) do
      if p.fd then pfds[n].fd, pfds[n].events, pfds[n].revents = p.fd, 1, 0 n = n + 1 end
    end
    pfds[n].fd, pfds[n].events, pfds[n].revents = sfd, 1, 0
    Cc.mx_l_poll(pfds, n + 1, 100)
    if pfds[n].revents ~= 0 then
      local si = ffi.new("struct mx_l_siginfo")
      Cc.mx_l_read(sfd, si, ffi.sizeof(si))
      first_fail = first_fail or 128 + si.ssi_signo
      start_kill("signal " .. si.ssi_signo .. " received")
    end
    -- output
    for _, p in ipairs(procs) do
      if p.fd then
        local k = 0
        for j = 0, n - 1 do if pfds[j].fd == p.fd then k = j break end end
        if pfds[k].revents ~= 0 then
          local got = tonumber(Cc.mx_l_read(p.fd, buf, 65536))
          if got and got > 0 then
            p.buf = p.buf .. ffi.string(buf, got)
            while true do
              local line, rest = p.buf:match("^([^\n]*)\n(.*)$")
              if not line then break end
              out_line(p, line)
              p.buf = rest
            end
          else
            if #p.buf > 0 then out_line(p, p.buf) p.buf = "" end
            Cc.mx_l_close(p.fd)
            p.fd = nil
          end
        end
      end
    end
    io.stdout:flush()
    -- exits
    local st = ffi.new("int[1]")
    for _, p in ipairs(procs) do
      if not p.done and Cc.mx_l_waitpid(p.pid, st, WNOHANG) == p.pid then
        p.done = true
        live = live - 1
        local code, sig = decode_status(st[0])
        p.code = code
        if code ~= 0 and not killing_at and o.keep_going then
          first_fail = first_fail or code
          io.stderr:write(string.format("launch: %s exited with %s; the others go on "
            .. "(--keep-going)\n", p.name, sig and ("signal " .. sig) or ("code " .. code)))
        elseif code ~= 0 and not killing_at then
          first_fail = first_fail or code
          start_kill(string.format("%s exited with %s", p.name,
            sig and ("signal " .. sig) or ("code " .. code)))
        end
            if p.role == "worker" then
          workers_left = workers_left - 1
          if workers_left == 0 and not killing_at then wind_down = now() + math.max(o.grace, 10) end
        end
        Cc.mx_l_kill(-p.pid, SIGKILL) -- anything it left in its group
      end
    end
    if live == 0 then
      -- drain what is left in the pipes
      local more = false
      for _, p in ipairs(procs) do if p.fd then more = true end end
      if not more then break end
    end
    if wind_down and now() > wind_down and not killing_at then
      start_kill("servers/scheduler still running " .. math.max(o.grace, 10) .. " s after the workers ended")
    end
    if killing_at and not killed_hard and now() > killing_at + o.grace then
      killed_hard = true
      kill_all(SIGKILL)
    end
  end
  Cc.mx_l_sigprocmask(1, block, nil) -- SIG_UNBLOCK
  return first_fail or 0
end

function M.main(argv)
  local ok, o = pcall(M.parse, argv)
  if not ok then
    io.stderr:write("launch: " .. (type(o) == "table" and o.msg or tostring(o)) .. "\n" .. USAGE .. "\n")
    return 2
  end
  if o.launcher == "local" then
    o.port = o.port or M.free_port()
  else
    o.port = o.port or 9091
  end
  local okp, procs = pcall(M.plan, o)
  if not okp then
    io.stderr:write("launch: " .. (type(procs) == "table" and procs.msg or tostring(procs)) .. "\n")
    return 2
  end
  if o.dry_run or o.launcher ~= "local" then
    for _, p in ipairs(procs) do
      local words = {}
      local keys = {}
      for k in pairs(p.env) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do words[#words + 1] = k .. "=" .. shell_quote(p.env[k]) end
      for _, a in ipairs(p.argv) do words[#words + 1] = shell_quote(a) end
      print(table.concat(words, " "))
    end
    if o.dry_run then return 0 end
    -- ssh/mpi: the scheduler runs here; the others through ssh/mpirun (all local children)
  end
  return M.run_local(procs, o)
end

-- run as a script (luajit tools/launch.lua ...); dofile/require just get the module
if arg and type(arg[0]) == "string" and arg[0]:match("launch%.lua$") and ... ~= "as-module" then
  os.exit(M.main(arg), true)
end
return M
