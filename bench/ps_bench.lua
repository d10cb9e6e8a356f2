-- bench/ps_bench.lua — dist_async push+pull throughput of one 4 MB key (1M float32)
-- through one server on loopback, against a raw libzmq round trip of the same 4 MB
-- (DEALER -> ROUTER echo), side by side in one run. Medians of N rounds.
--
--   luajit bench/ps_bench.lua [ROUNDS]        (from the checkout's root; needs build/)
--
-- MB/s counts the bytes moved per round: 4 MB pushed + 4 MB pulled (and 4 MB each way for
-- the raw echo). The machine is shared: numbers are noisy.
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local J = require("mx.kvstore.ps_job")
local rounds = tonumber(arg and arg[1]) or 40

local WORKER = [=[
  local mx = require("mx")
  local Z = require("mx.kvstore.ps_zmq")
  local rounds = tonumber(os.getenv("ROUNDS"))
  local N = 1024 * 1024
  local MB = N * 4 / 2 ^ 20 -- 4
  local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
  local kv = mx.kv.create("dist_async")
  local g, w = mx.nd.ones({ N }), mx.nd.zeros({ N })
  kv:init(0, w)
  local function bench(label)
    for _ = 1, 5 do kv:push(0, g) kv:pull(0, w) end
    local t = {}
    for i = 1, rounds do
      local t0 = Z.now()
      kv:push(0, g)
      kv:pull(0, w)
      t[i] = Z.now() - t0
    end
    local m = median(t)
    print(string.format("RESULT %-34s %7.2f ms  %8.1f MB/s", label, m * 1e3, 2 * MB / m))
  end
  bench("dist_async push+pull (assign)")
  kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 0.1 }))
  bench("dist_async push+pull (sgd)")
  kv:close()
]=]

local job = J.start { workers = 1, servers = 1, script = WORKER, env = { ROUNDS = tostring(rounds) } }
local rc = job:wait(300)
local out = job:output()
job:stop()
if rc ~= 0 then io.stderr:write(out) os.exit(1) end

-- raw libzmq: the same bytes through a DEALER/ROUTER echo in another process
local Z = require("mx.kvstore.ps_zmq")
local ffi = require("ffi")
local N = 1024 * 1024
local r = Z.socket(Z.ROUTER)
Z.bind(r, "tcp://127.0.0.1:0")
local echo = os.tmpname()
local f = assert(io.open(echo, "w"))
f:write(string.format([[
package.path = "lua/?.lua;" .. package.path
local Z = require("mx.kvstore.ps_zmq")
local d = Z.socket(Z.DEALER)
Z.connect(d, %q)
Z.send_parts(d, { "hi" })
while true do
  local p = Z.recv_parts(d, 0)
  if Z.part_size(p[1]) == 0 then break end
  Z.send_parts(d, { { Z.part_data(p[1]), Z.part_size(p[1]) } })
  Z.free_parts(p)
end
]], Z.last_endpoint(r)))
f:close()
os.execute("luajit " .. echo .. " &")
local hello = Z.recv_parts(r, 0)
local id = Z.part_string(hello[1])
Z.free_parts(hello)
local buf = ffi.new("float[?]", N)
local t = {}
for i = 1, rounds + 5 do
  local t0 = Z.now()
  Z.send_parts(r, { id, { buf, N * 4 } })
  local p = Z.recv_parts(r, 0)
  ffi.copy(buf, Z.part_data(p[2]), N * 4)
  Z.free_parts(p)
  if i > 5 then t[i - 5] = Z.now() - t0 end
end
Z.send_parts(r, { id, "" })
Z.close(r)
os.remove(echo)
table.sort(t)
local m = t[math.floor((#t + 1) / 2)]
print(string.format("4 MB key, 1 worker, 1 server, loopback, median of %d rounds", rounds))
for line in out:gmatch("RESULT ([^\n]*)") do print(line) end
print(string.format("%-34s %7.2f ms  %8.1f MB/s", "raw libzmq 4 MB round trip", m * 1e3, 2 * 4 / m))
