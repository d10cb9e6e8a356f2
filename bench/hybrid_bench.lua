-- bench/hybrid_bench.lua — hybridize (peer: bench/hybrid_bench.py): eager vs
-- hybridized luamx on
--   hyb_mlp_train     784-256-256-10 MLP training step (SGD, batch 64, synthetic data
--                     fixed before timing), samples/s
--   hyb_dense_b1      Dense(64 -> 64) forward at batch 1, us/call
--   hyb_chain_arith   6 elementwise ops (x*2+1, relu, *0.5, -0.25, square) on 1 M floats, ms
--   hyb_chain_trans   6 elementwise ops with tanh/sigmoid/exp on 1 M floats, ms
--   hyb_resnet_mem    ResNet-18 inference (batch 1, 224x224): peak bytes of eager vs the
--                     planned buffers of the static_alloc graph (MB)
--   MX_BUILD=build luajit bench/hybrid_bench.lua --threads=1
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nn, nd = mx.gluon.nn, mx.nd
local note = threads .. "T"
H.env_note()

local function impl(hyb) return hyb and "luamx-hybrid" or "luamx" end

-- MLP training
local x = nd.random.normal(0, 1, { 64, 784 })
local labels = {}
for i = 1, 64 do labels[i] = (i - 1) % 10 end
local y = nd.array(labels)
local loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
for _, hyb in ipairs({ false, true }) do
  mx.random.seed(1)
  local net = nn.HybridSequential()
  net:add(nn.Dense(256, { activation = "relu" }), nn.Dense(256, { activation = "relu" }), nn.Dense(10))
  net:initialize(mx.init.Xavier())
  if hyb then net:hybridize({ static_alloc = true }) end
  local tr = mx.gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.01 })
  local t = H.time(function(n)
    for _ = 1, n do
      local l = mx.autograd.record(function() return loss_fn(net(x), y) end)
      l:backward()
      tr:step(64)
    end
    nd.waitall()
  end, { n = A.steps or 200, reps = 5 })
  H.report("hyb_mlp_train", 64 / (t.median * 1e-9), "samples/s", { impl = impl(hyb), note = note })
end

-- Dense(64 -> 64) at batch 1
for _, hyb in ipairs({ false, true }) do
  local d = nn.Dense(64, { in_units = 64 })
  d:initialize()
  if hyb then d:hybridize() end
  local x1 = nd.ones({ 1, 64 })
  local t = H.time(function(n)
    for _ = 1, n do d(x1) end
    nd.waitall()
  end, { n = 2e4 })
  H.report("hyb_dense_b1", t.median * 1e-3, "us/call", { impl = impl(hyb), note = note })
end

-- elementwise chains on 1 M floats
local Arith = mx.gluon.HybridBlock:extend("Arith")
function Arith.forward(_, v) return nd.square(nd.relu(v * 2 + 1) * 0.5 - 0.25) end
local Trans = mx.gluon.HybridBlock:extend("Trans")
function Trans.forward(_, v) return nd.exp(nd.sigmoid(nd.tanh(v * 2 + 1) * 0.5 - 0.25)) end
local big = nd.random.normal(0, 1, { 1000000 })
for name, cls in pairs({ hyb_chain_arith = Arith, hyb_chain_trans = Trans }) do
  for _, hyb in ipairs({ false, true }) do
    local b = cls()
    if hyb then b:hybridize() end
    local t = H.time(function(n)
      for _ = 1, n do b(big):wait_to_read() end
    end, { n = 20 })
    H.report(name, t.median * 1e-6, "ms", { impl = impl(hyb), note = note })
  end
end

-- ResNet-18 inference memory: the pool's peak bytes in use during one forward above
-- what was in use before it (parameters, input), median of 5 forwards; for the graph the
-- planned buffers (kept between calls by static_alloc) count in full.
if not A.no_resnet then
  mx.random.seed(2)
  local net = mx.gluon.model_zoo.vision.resnet18_v1()
  net:initialize(mx.init.Xavier())
  local img = nd.random.normal(0, 1, { 1, 3, 224, 224 })
  local function peak()
    local ps = {}
    for r = 1, 5 do
      collectgarbage("collect")
      nd.waitall()
      local base = mx.memory_stats().bytes_in_use
      mx.memory.reset_peak()
      net(img):wait_to_read()
      ps[r] = mx.memory_stats().peak_bytes - base
    end
    return H.median(ps)
  end
  net(img):wait_to_read()
  local eager = peak()
  net:hybridize({ static_alloc = true })
  net(img):wait_to_read()
  net(img):wait_to_read()
  local v = require("mx.gluon._hybrid").last_variant(net)
  local planned = tonumber(require("mx.core.lib").C.mx_graph_exec_planned_bytes(v.fexec))
  local per_run = peak()
  local mnote = "batch 1 224x224 " .. note
  H.report("hyb_resnet_mem", eager / 1e6, "MB", { impl = "luamx", note = mnote })
  H.report("hyb_resnet_mem", (planned + per_run) / 1e6, "MB", { impl = "luamx-hybrid", note = mnote })
  H.report("hyb_resnet_planned", planned / 1e6, "MB", { impl = "luamx-hybrid", note = mnote })
end
