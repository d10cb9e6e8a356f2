-- spec/helpers/serve.lua — what the mx-serve specs share: exported models and archives,
-- starting and stopping the server on loopback (ephemeral ports, bounded waits), HTTP
-- through curl (with a time limit), raw sockets (LuaJIT FFI) for what curl will not
-- send, the load client, metrics.
--
--   local S = require("helpers.serve")
--   local srv = S.start { "--model-store", dir, "--models", "mlp.tar" }
--   local st, body, hdr = S.http(srv, "POST", "/predictions/mlp", { body = "[1,2]" })
--   S.stop(srv)
local ffi = require("ffi")
local json = require("dkjson")
local sh = require("helpers.sh")

local M = { json = json }
M.build = "build"
M.bin = M.build .. "/mx-serve"
M.load_bin = M.build .. "/mx-serve-load"

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.q = q

function M.available()
  local f = io.open(M.bin, "rb")
  if f then f:close() return true end
  return false
end

function M.tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. q(d)) == 0)
  return d
end

function M.sleep(s) os.execute("sleep " .. s) end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end
M.read = read

function M.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- package paths made absolute (workers run in their model's directory)
local function absolute(paths)
  local cwd = os.getenv("PWD") or "."
  return (paths:gsub("[^;]+", function(e)
    if e:sub(1, 1) == "/" or e:sub(1, 1) == "?" then return e end
    return cwd .. "/" .. e:gsub("^%./", "")
  end))
end

-- An MLP (12 -> 32 -> 16 -> 5) exported to dir/name-symbol.json + -0000.params and to
-- dir/name.onnx (the batch axis symbolic); returns the two paths, a function computing
-- its outputs (nested tables) for inputs, and the ONNX path.
function M.export_mlp(dir, name, seed)
  local mx = require("mx")
  local nn = mx.gluon.nn
  mx.random.seed(seed or 11)
  local net = nn.HybridSequential()
  net:add(nn.Dense(32, { activation = "relu" }), nn.Dense(16), nn.Activation("tanh"), nn.Dense(5))
  net:initialize()
  net:hybridize()
  net(mx.nd.zeros { 1, 12 })
  net:export(dir .. "/" .. name)
  net:export_onnx(dir .. "/" .. name .. ".onnx", { input_shapes = { { 1, 12 } }, dynamic = true })
  local function ref(rows) return net(mx.nd.array(rows)):totable() end
  return dir .. "/" .. name .. "-symbol.json", dir .. "/" .. name .. "-0000.params", ref,
    dir .. "/" .. name .. ".onnx"
end

-- mx-serve archive with these arguments (a list); returns the exit status and output
function M.archive(args)
  local parts = {}
  for i, a in ipairs(args) do parts[i] = q(a) end
  return sh(q(M.bin) .. " archive " .. table.concat(parts, " "))
end

-- A directory archive (MANIFEST.json from a table + files {name = text}).
function M.dir_archive(dir, manifest, files)
  assert(os.execute("mkdir -p " .. q(dir)) == 0)
  M.write(dir .. "/MANIFEST.json", json.encode(manifest))
  for name, text in pairs(files or {}) do M.write(dir .. "/" .. name, text) end
  return dir
end

---------------------------------------------------------------- the server
-- start(args[, opts]): mx-serve on ephemeral loopback ports; waits (opts.wait seconds,
-- 60) until it listens and, unless opts.ready == false, every startup model is READY.
function M.start(args, opts)
  opts = opts or {}
  local dir = M.tmpdir()
  local ports, log, rcf = dir .. "/ports.json", dir .. "/server.log", dir .. "/rc"
  local parts = {}
  for i, a in ipairs(args or {}) do parts[i] = q(a) end
  local addr = opts.sagemaker and {} or { "--inference-address", "127.0.0.1:0" }
  local cmd = string.format("env LUA_PATH=%s LUA_CPATH=%s %s sh -c '\"$@\"; echo $? > %s' _ %s "
    .. "%s --management-address 127.0.0.1:0 --metrics-address 127.0.0.1:0 --port-file %s %s "
    .. "> %s 2>&1 &", q(absolute(package.path)), q(absolute(package.cpath)), opts.env or "",
    q(rcf), q(M.bin), table.concat(addr, " "), q(ports), table.concat(parts, " "), q(log))
  assert(os.execute(cmd) == 0)
  local srv = { dir = dir, log = log, rc = rcf }
  local until_ = os.time() + (opts.wait or 60)
  while os.time() <= until_ do
    local t = read(ports)
    if t then
      local p = json.decode(t)
      srv.port = { inference = p.inference, management = p.management, metrics = p.metrics }
      srv.pid = p.pid
      break
    end
    if read(rcf) then break end
    M.sleep(0.1)
  end
  assert(srv.pid, "mx-serve did not start:\n" .. (read(log) or ""))
  if opts.ready ~= false then
    while os.time() <= until_ do
      local st, body = M.http(srv, "GET", "/models", { api = "management", token = opts.token })
      local ok = st == 200
      if ok then
        for _, m in ipairs(json.decode(body).models) do
          local s2, b2 = M.http(srv, "GET", "/models/" .. m.modelName, { api = "management", token = opts.token })
          ok = ok and s2 == 200 and json.decode(b2)[1].status == "READY"
        end
      end
      if ok then break end
      M.sleep(0.2)
    end
  end
  return srv
end

function M.alive(srv) return os.execute("kill -0 " .. srv.pid .. " 2>/dev/null") == 0 end

-- stop(srv[, signal]): SIGTERM (or signal), then SIGKILL after 30 s; the exit status
-- (nil if it had to be killed).
function M.stop(srv, sig)
  if not srv or not srv.pid then return nil end
  os.execute("kill -" .. (sig or "TERM") .. " " .. srv.pid .. " 2>/dev/null")
  local until_ = os.time() + 30
  while M.alive(srv) and os.time() <= until_ do M.sleep(0.1) end
  local killed = false
  if M.alive(srv) then
    os.execute("kill -KILL " .. srv.pid .. " 2>/dev/null")
    killed = true
  end
  for _ = 1, 50 do
    if read(srv.rc) then break end
    M.sleep(0.1)
  end
  local rc = tonumber(read(srv.rc) or "")
  os.execute("rm -rf " .. q(srv.dir))
  srv.pid = nil
  return not killed and rc or nil
end

function M.url(srv, path, api) return "http://127.0.0.1:" .. srv.port[api or "inference"] .. path end

local seq = 0
-- the curl command line for a request; its answer goes to files under srv.dir
local function curl(srv, method, path, opts)
  seq = seq + 1
  local d = srv.dir
  local f = { body = d .. "/resp" .. seq .. ".body", head = d .. "/resp" .. seq .. ".head",
    code = d .. "/resp" .. seq .. ".code" }
  local c = { "curl -s -S -o", q(f.body), "-D", q(f.head), "-w '%{http_code}'", "--max-time",
    tostring(opts.timeout or 10), "-X", method }
  if opts.body then
    local rf = d .. "/req" .. seq .. ".body"
    M.write(rf, opts.body)
    c[#c + 1] = "--data-binary @" .. q(rf)
  elseif opts.file then
    c[#c + 1] = "--data-binary @" .. q(opts.file)
  end
  for name, file in pairs(opts.form or {}) do c[#c + 1] = "-F " .. q(name .. "=@" .. file) end
  if opts.type then c[#c + 1] = "-H " .. q("Content-Type: " .. opts.type)
  elseif opts.body or opts.file then c[#c + 1] = "-H 'Content-Type: application/octet-stream'" end
  for _, h in ipairs(opts.headers or {}) do c[#c + 1] = "-H " .. q(h) end
  if opts.token then c[#c + 1] = "-H " .. q("Authorization: Bearer " .. opts.token) end
  c[#c + 1] = q(M.url(srv, path, opts.api))
  return table.concat(c, " "), f
end

local function answer(f, code)
  local hdr = {}
  for line in (read(f.head) or ""):gmatch("[^\r\n]+") do
    local k, v = line:match("^([^:]+):%s*(.*)$")
    if k then hdr[k:lower()] = v end
  end
  local body = read(f.body) or ""
  os.remove(f.body)
  os.remove(f.head)
  os.remove(f.code)
  return tonumber(code) or 0, body, hdr
end

-- http(srv, method, path, {body=, file=, type=, headers={}, api=, timeout=10, token=,
-- form={name=file}}) -> status, body, headers (lower-case names)
function M.http(srv, method, path, opts)
  local cmd, f = curl(srv, method, path, opts or {})
  local p = io.popen(cmd .. " 2>/dev/null")
  local code = p:read("*a")
  p:close()
  return answer(f, code)
end

-- the same in the background: a handle for wait()
function M.http_async(srv, method, path, opts)
  local cmd, f = curl(srv, method, path, opts or {})
  os.execute("(" .. cmd .. " > " .. q(f.code) .. ".tmp 2>/dev/null; mv " .. q(f.code) .. ".tmp "
    .. q(f.code) .. ") &")
  return f
end

-- status, body, headers of a background request (waits up to secs, 30)
function M.wait(f, secs)
  local until_ = os.time() + (secs or 30)
  while os.time() <= until_ do
    local code = read(f.code)
    if code then return answer(f, code) end
    M.sleep(0.05)
  end
  error("a background request did not finish")
end

function M.decode(body) return json.decode(body) end

-- the metric's value (labels: a substring of its label set), nil if absent
function M.metric(srv, name, labels)
  local _, text = M.http(srv, "GET", "/metrics", { api = "metrics" })
  for line in text:gmatch("[^\n]+") do
    local n, l, v = line:match("^([%w_]+){(.-)} (%S+)$")
    if not n then n, v = line:match("^([%w_]+) (%S+)$") l = "" end
    if n == name and (not labels or l:find(labels, 1, true)) then return tonumber(v) end
  end
  return nil
end

-- mx-serve-load: returns its result table
function M.load(srv, path, opts)
  opts = opts or {}
  local c = { q(M.load_bin), "-u", q(M.url(srv, path, opts.api)), "-m", opts.method or "POST",
    "-c", tostring(opts.connections or 4), "-n", tostring(opts.requests or 100) }
  if opts.body then c[#c + 1] = "-b " .. q(opts.body) end
  if opts.file then c[#c + 1] = "-f " .. q(opts.file) end
  if opts.type then c[#c + 1] = "-t " .. q(opts.type) end
  if opts.duration then c[#c + 1] = "-d " .. opts.duration end
  if opts.background then
    local out = srv.dir .. "/load-" .. tostring(os.clock()):gsub("%.", "") .. ".json"
    os.execute(table.concat(c, " ") .. " > " .. q(out) .. " 2>&1 &")
    return out
  end
  local rc, out = sh(table.concat(c, " "))
  local r = json.decode(out:match("{.*}") or "")
  assert(r, "mx-serve-load failed (" .. tostring(rc) .. "): " .. out)
  return r
end

-- waits for a background load's result (seconds)
function M.load_result(file, secs)
  local until_ = os.time() + (secs or 120)
  while os.time() <= until_ do
    local t = read(file)
    if t and t:match("}%s*$") then return json.decode(t:match("{.*}")) end
    M.sleep(0.2)
  end
  error("the background load did not finish: " .. tostring(read(file)))
end

-- RSS in bytes of a process (/proc)
function M.rss(pid)
  local t = read("/proc/" .. pid .. "/status") or ""
  local kb = t:match("VmRSS:%s+(%d+) kB")
  return kb and tonumber(kb) * 1024 or 0
end

-- the worker processes of the server (its children)
function M.workers(srv)
  local p = io.popen("pgrep -P " .. srv.pid)
  local t = {}
  for l in p:read("*a"):gmatch("%d+") do t[#t + 1] = tonumber(l) end
  p:close()
  return t
end

---------------------------------------------------------------- raw sockets
pcall(ffi.cdef, [[
struct mxs_sockaddr_in { uint16_t family; uint16_t port; uint32_t addr; char zero[8]; };
int socket(int domain, int type, int protocol);
int connect(int fd, const void *addr, uint32_t len);
long send(int fd, const void *buf, size_t n, int flags);
long recv(int fd, void *buf, size_t n, int flags);
int close(int fd);
int shutdown(int fd, int how);
struct mxs_pollfd { int fd; short events; short revents; };
int poll(struct mxs_pollfd *fds, unsigned long n, int timeout);
]])

-- a connected TCP socket to the server's port (a number)
function M.connect(srv, api)
  local fd = ffi.C.socket(2, 1, 0)
  assert(fd >= 0)
  local a = ffi.new("struct mxs_sockaddr_in")
  a.family = 2
  local port = srv.port[api or "inference"]
  a.port = bit.bor(bit.lshift(bit.band(port, 0xff), 8), bit.rshift(port, 8))
  a.addr = 0x0100007f
  assert(ffi.C.connect(fd, a, ffi.sizeof(a)) == 0, "connect failed")
  return fd
end

function M.send(fd, s) return tonumber(ffi.C.send(fd, s, #s, 0x4000)) end

-- reads until the peer closes or secs pass: text, closed (true when the server closed)
function M.recv_all(fd, secs)
  local buf = ffi.new("char[65536]")
  local out = {}
  local deadline = os.time() + secs
  local pf = ffi.new("struct mxs_pollfd[1]")
  while os.time() <= deadline do
    pf[0].fd, pf[0].events = fd, 1
    if ffi.C.poll(pf, 1, 200) > 0 then
      local n = tonumber(ffi.C.recv(fd, buf, 65536, 0))
      if n <= 0 then return table.concat(out), true end
      out[#out + 1] = ffi.string(buf, n)
    end
  end
  return table.concat(out), false
end

-- reads until text holds count complete HTTP responses (Content-Length framed) or secs
function M.recv_responses(fd, count, secs)
  local buf = ffi.new("char[65536]")
  local data = ""
  local deadline = os.time() + secs
  local pf = ffi.new("struct mxs_pollfd[1]")
  local function parse()
    local res, pos = {}, 1
    while true do
      local e = data:find("\r\n\r\n", pos, true)
      if not e then break end
      local head = data:sub(pos, e - 1)
      local len = tonumber(head:match("[Cc]ontent%-[Ll]ength:%s*(%d+)") or "0")
      if #data < e + 3 + len then break end
      res[#res + 1] = { status = tonumber(head:match("^HTTP/1%.%d (%d+)")), body = data:sub(e + 4, e + 3 + len) }
      pos = e + 4 + len
    end
    return res
  end
  while os.time() <= deadline do
    local r = parse()
    if #r >= count then return r end
    pf[0].fd, pf[0].events = fd, 1
    if ffi.C.poll(pf, 1, 200) > 0 then
      local n = tonumber(ffi.C.recv(fd, buf, 65536, 0))
      if n <= 0 then break end
      data = data .. ffi.string(buf, n)
    end
  end
  return parse()
end

function M.close(fd) ffi.C.close(fd) end
-- no more requests from this side (the server sees end of file)
function M.shutdown_write(fd) ffi.C.shutdown(fd, 1) end

-- one raw request on a new connection: the first answer's status (nil when the server
-- closed without one) and its body
function M.raw(srv, bytes, secs)
  local fd = M.connect(srv)
  M.send(fd, bytes)
  M.shutdown_write(fd)
  local text = M.recv_all(fd, secs or 5)
  M.close(fd)
  local st = tonumber(text:match("^HTTP/1%.%d (%d+)"))
  return st, text:match("\r\n\r\n(.*)$") or "", text
end

return M
