-- bench/kvstore_bench.lua — data parallelism on CPU devices in one process.
--
--   luajit bench/kvstore_bench.lua [--threads=1] [--workers=2] [--batch=256] [--steps=40]
--
-- Benches:
--   mlp_step_1dev    a Trainer step (forward, backward, step) of the 784-256-256-10 MLP
--                    on cpu(0) with the global batch                     (ms/step)
--   mlp_step_2dev    the same batch split over cpu(0) and cpu(1) (split_and_load, the
--                    gradients reduced by kvstore='device', updated on the store) (ms/step)
--   mlp_step_2dev_ar the same with update_on_kvstore=false (allreduce, per-device update)
--   kv_pushpull_4MB  kv:pushpull of a 1 M-element f32 key from 2 devices    (us/call)
-- --workers sets the engine's worker threads (independent ops of the two devices run
-- concurrently only with >= 2). The machine is shared: the numbers are noisy.
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local gluon, nn, nd = mx.gluon, mx.gluon.nn, mx.nd
local workers = A.workers or 2
mx.engine.set_num_workers(workers)
local B = A.batch or 256
local steps = A.steps or 40
local note = string.format("threads=%d workers=%d batch=%d", threads, workers, B)
H.env_note()

local function mlp()
  local net = nn.Sequential()
  net:add(nn.Dense(256, { activation = "relu", in_units = 784 }),
    nn.Dense(256, { activation = "relu", in_units = 256 }), nn.Dense(10, { in_units = 256 }))
  return net
end
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
mx.random.seed(1)
local x = nd.random.uniform(0, 1, { B, 784 })
local labels = {}
for i = 1, B do labels[i] = i % 10 end
local y = nd.array(labels)

local function bench(name, ctxs, topts)
  local net = mlp()
  net:initialize(mx.init.Xavier(), { ctx = ctxs })
  local tr = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.05, momentum = 0.9 },
    topts)
  local xs = gluon.utils.split_and_load(x, ctxs)
  local ys = gluon.utils.split_and_load(y, ctxs)
  local ls = {}
  local function step()
    mx.autograd.record(function()
      for i = 1, #xs do ls[i] = loss_fn(net(xs[i]), ys[i]) end
    end)
    mx.autograd.backward(ls)
    tr:step(B)
  end
  local t = H.time(function(n)
    for _ = 1, n do step() end
    nd.waitall()
  end, { n = steps, reps = 5, warmup = 1 })
  H.report(name, t.median / 1e6, "ms/step", { note = note })
end

bench("mlp_step_1dev", { mx.cpu(0) })
bench("mlp_step_2dev", { mx.cpu(0), mx.cpu(1) })
bench("mlp_step_2dev_ar", { mx.cpu(0), mx.cpu(1) }, { update_on_kvstore = false })

do
  local kv = mx.kv.create("device")
  local n = 1024 * 1024
  kv:init(1, nd.zeros({ n }))
  local g = { nd.ones({ n }), nd.ones({ n }, { ctx = mx.cpu(1) }) }
  local t = H.time(function(k)
    for _ = 1, k do kv:pushpull(1, g) end
    nd.waitall()
  end, { n = 20, reps = 5 })
  H.report("kv_pushpull_4MB", t.median / 1e3, "us/call", { note = note })
end
