-- bench/mlp_step.lua — where a training step of bench/mlp_bench.lua's MLP goes.
--
--   luajit bench/mlp_step.lua [--threads=1] [--steps=2000] [--optimizer=adam] [--real]
--
-- Default: synthetic data (one fixed batch), the median step time over `steps`, then
-- mx.profiler's per-op table over 200 more steps. --real: one epoch of real
-- Fashion-MNIST through the DataLoader with each phase timed (data, forward, backward,
-- trainer, the loss sync) and Lua's full collections counted and timed.
-- MX_BUILD=dir picks the build (default build).
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local A = H.args(arg)

-- count and time the full collections mx.nd runs (it calls the global)
local cg, ncoll, tcoll = collectgarbage, 0, 0
collectgarbage = function(what, ...) -- luacheck: ignore 121
  if what == "collect" then
    local t = os.clock()
    local r = cg(what, ...)
    ncoll, tcoll = ncoll + 1, tcoll + os.clock() - t
    return r
  end
  return cg(what, ...)
end

local mx = require("mx")
local gluon, nn = mx.gluon, mx.gluon.nn
mx.engine.set_num_threads(A.threads or 1)
mx.random.seed(1)
local net = nn.Sequential()
net:add(nn.Dense(256, { activation = "relu" }), nn.Dense(256, { activation = "relu" }), nn.Dense(10))
net:initialize(mx.init.Xavier())
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local opt = A.optimizer or "adam"
local trainer = gluon.Trainer(net:collect_params(), opt,
  { learning_rate = opt == "adam" and 1e-3 or 0.1, momentum = opt == "sgd" and 0.9 or nil })
local clock = os.clock

if not A.real then
  local x = mx.nd.random.uniform(0, 1, { 64, 784 })
  local labels = {}
  for i = 1, 64 do labels[i] = i % 10 end
  local y = mx.nd.array(labels)
  local function step()
    local loss = mx.autograd.record(function() return loss_fn(net(x), y) end)
    loss:backward()
    trainer:step(64)
    return loss:sum():item()
  end
  for _ = 1, 200 do step() end
  local n = A.steps or 2000
  local ts = {}
  for r = 1, 5 do
    local t0 = clock()
    for _ = 1, n / 5 do step() end
    ts[r] = (clock() - t0) / (n / 5)
  end
  print(string.format("step %.1f us (median of 5 x %d steps, synthetic data)", H.median(ts) * 1e6, n / 5))
  mx.profiler.set_state("run")
  for _ = 1, 200 do step() end
  mx.profiler.set_state("stop")
  print("per 200 steps:")
  print(mx.profiler.dumps(true))
  return
end

local vision = gluon.data.vision
local train = vision.FashionMNIST { train = true }
local loader = gluon.data.DataLoader(train:transform_first(vision.transforms.ToTensor()),
  { batch_size = 64, shuffle = true })
for epoch = 1, 2 do -- the first epoch warms up (JIT, pool, GC threshold)
  ncoll, tcoll = 0, 0
  local td, tf, tb, tt, ts, n = 0, 0, 0, 0, 0, 0
  local it = loader:iter()
  local t0 = clock()
  local tstart = t0
  while true do
    local x, y = it()
    if not x then break end
    local t1 = clock()
    local loss = mx.autograd.record(function() return loss_fn(net(x), y) end)
    local t2 = clock()
    loss:backward()
    local t3 = clock()
    trainer:step(64)
    local t4 = clock()
    local _ = loss:sum():item()
    local t5 = clock()
    td, tf, tb, tt, ts = td + t1 - t0, tf + t2 - t1, tb + t3 - t2, tt + t4 - t3, ts + t5 - t4
    n = n + 1
    t0 = t5
  end
  local tot = clock() - tstart
  local us = function(v) return v / n * 1e6 end
  print(string.format("epoch %d: %.1f us/step = data %.1f + forward %.1f + backward %.1f + "
    .. "trainer %.1f + loss sync %.1f; %d full collections, %.2f ms each, %.1f us/step; "
    .. "%.0f samples/s", epoch, us(tot), us(td), us(tf), us(tb), us(tt), us(ts), ncoll,
    tcoll / math.max(ncoll, 1) * 1e3, us(tcoll), n * 64 / tot))
end
