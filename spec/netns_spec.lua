-- dist_async across two "hosts": two network namespaces joined by a veth pair (10.213.0.1
-- and 10.213.0.2). Namespace A runs the scheduler, a server and worker 0; namespace B runs
-- worker 1, which reaches the others only over the veth link. The spec creates and removes
-- the namespaces itself (also when it fails). Needs root and `ip netns`; skipped otherwise.
local J = require("mx.kvstore.ps_job")

local function sh(cmd)
  local ok = os.execute(cmd .. " >/dev/null 2>&1")
  return ok == true or ok == 0
end

local function netns_reason()
  local p = io.popen("id -u")
  local uid = p:read("*l")
  p:close()
  if uid ~= "0" then return "needs root (creates network namespaces)" end
  if not sh("command -v ip") then return "the ip command (iproute2) is not installed" end
  local probe = "mxpsprobe" .. os.time() % 100000
  if not sh("ip netns add " .. probe) then return "ip netns add is not permitted here" end
  sh("ip netns del " .. probe)
  return nil
end

local WORKER = [[
  io.stdout:setvbuf("line")
  local mx = require("mx")
  local kv = mx.kv.create("dist_async", { timeout = 20 })
  kv:init(5, mx.nd.zeros({64}))
  kv:set_optimizer(mx.optimizer.create("sgd", { learning_rate = 1 }))
  local w = mx.nd.zeros({64})
  for _ = 1, 5 do kv:pushpull(5, mx.nd.ones({64}) * (kv.rank + 1), w) end
  kv:barrier()
  kv:pull(5, w)
  print("W " .. kv.rank .. " " .. w:min():item() .. " " .. w:max():item())
  kv:close()
]]

describe("dist_async across network namespaces", function()
  it("trains over a veth pair between two namespaces (server + worker | worker)", function()
    local reason = netns_reason()
    if reason then
      pending("skipped: " .. reason)
      return
    end
    local tag = tostring(os.time() % 100000)
    local A, B = "mxpsA" .. tag, "mxpsB" .. tag
    local dir = os.tmpname()
    os.remove(dir)
    finally(function()
      sh("ip netns del " .. A)
      sh("ip netns del " .. B)
      os.execute("rm -rf " .. J.sh_quote(dir))
    end)
    assert.is_true(sh("mkdir -p " .. J.sh_quote(dir)))
    for _, c in ipairs {
      "ip netns add " .. A, "ip netns add " .. B,
      string.format("ip link add vA%s netns %s type veth peer name vB%s netns %s", tag, A, tag, B),
      string.format("ip -n %s addr add 10.213.0.1/24 dev vA%s", A, tag),
      string.format("ip -n %s addr add 10.213.0.2/24 dev vB%s", B, tag),
      string.format("ip -n %s link set vA%s up", A, tag), string.format("ip -n %s link set vB%s up", B, tag),
      "ip -n " .. A .. " link set lo up", "ip -n " .. B .. " link set lo up",
    } do
      assert.is_true(sh(c), c)
    end
    local f = io.open(dir .. "/worker.lua", "w")
    f:write(WORKER)
    f:close()
    local env = "DMLC_PS_ROOT_URI=10.213.0.1 DMLC_PS_ROOT_PORT=9199 DMLC_NUM_WORKER=2 DMLC_NUM_SERVER=1 "
      .. "MX_KV_TIMEOUT=20"
    local mx = J.sh_quote(J.root .. "/bin/mx")
    local srv = mx .. " -e 'os.exit(require(\"mx.kvstore.ps_main\").main())'"
    local script = table.concat({
      "cd " .. J.sh_quote(dir),
      string.format("ip netns exec %s env %s DMLC_ROLE=scheduler timeout 60 %s > sched.log 2>&1 & S=$!",
        A, env, srv),
      string.format("ip netns exec %s env %s DMLC_ROLE=server DMLC_NODE_HOST=10.213.0.1 timeout 60 %s "
        .. "> server.log 2>&1 & V=$!", A, env, srv),
      string.format("ip netns exec %s env %s DMLC_ROLE=worker DMLC_WORKER_ID=0 timeout 60 %s worker.lua "
        .. "> w0.log 2>&1 & W0=$!", A, env, mx),
      string.format("ip netns exec %s env %s DMLC_ROLE=worker DMLC_WORKER_ID=1 timeout 60 %s worker.lua "
        .. "> w1.log 2>&1 & W1=$!", B, env, mx),
      "wait $W0; R0=$?; wait $W1; R1=$?; wait $V; RV=$?; wait $S; RS=$?",
      "echo \"RC $R0 $R1 $RV $RS\"",
      "cat w0.log w1.log server.log sched.log",
    }, "\n")
    local p = io.popen("sh -c " .. J.sh_quote(script) .. " 2>&1")
    local out = p:read("*a")
    p:close()
    assert.truthy(out:find("RC 0 0 0 0"), out)
    -- every push of both workers applied: w = -(5 * 1 + 5 * 2)
    assert.truthy(out:find("W 0 %-15 %-15"), out)
    assert.truthy(out:find("W 1 %-15 %-15"), out)
    -- worker 1 (namespace B) reached the server at its advertised veth address
    assert.truthy(out:find("all 1 server%(s%) and 2 worker%(s%) registered"), out)
  end)
end)
