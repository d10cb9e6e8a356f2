-- bench/cnn_bench.lua — the CNN goals on luamx; the PyTorch peer is bench/cnn_bench.py
-- (same networks, shapes, batch sizes, random inputs, float32, eager mode).
--
--   luajit bench/cnn_bench.lua --threads=1 [--quick]      (MX_BUILD=dir, default build)
--
-- Results (RESULT lines, bench/harness.lua):
--   lenet_train        LeNet-5 (ReLU, max pool) training samples/s, batch 64, SGD momentum
--   resnet18_b1        gluon.model_zoo.vision.resnet18_v1 inference latency, 1x3x224x224, ms
--   resnet18_b32       the same at batch 32, images/s
--   resnet18_train16   one training step (forward, backward, SGD) at batch 16, ms
-- Every timed region ends with a wait for the results (the engine runs asynchronously).
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local gluon, nn, nd = mx.gluon, mx.gluon.nn, mx.nd
local quick = A.quick
local note = threads .. "T"
mx.random.seed(1)
H.env_note()

local function median_time(fn, reps, warmup)
  for _ = 1, warmup or 2 do fn() end
  local ts = {}
  for r = 1, reps do
    collectgarbage("collect")
    local t0 = H.now()
    fn()
    ts[r] = H.now() - t0
  end
  return H.median(ts)
end

local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

-- LeNet training, batch 64
do
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(6, 5, { padding = 2, activation = "relu" }), nn.MaxPool2D(2),
    nn.Conv2D(16, 5, { activation = "relu" }), nn.MaxPool2D(2),
    nn.Dense(120, { activation = "relu" }), nn.Dense(84, { activation = "relu" }), nn.Dense(10))
  net:initialize(mx.init.Xavier())
  local trainer = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.05, momentum = 0.9 })
  local xs, ys = {}, {}
  for i = 1, 8 do
    xs[i] = nd.random.uniform(0, 1, { 64, 1, 28, 28 })
    ys[i] = nd.random.randint(0, 10, { 64 }):astype("float32")
  end
  local steps = quick and 8 or 64
  local t = median_time(function()
    local loss
    for i = 1, steps do
      local k = (i - 1) % 8 + 1
      loss = mx.autograd.record(function() return loss_fn(net(xs[k]), ys[k]) end)
      loss:backward()
      trainer:step(64)
    end
    loss:wait_to_read()
    mx.nd.waitall()
  end, quick and 3 or 7)
  H.report("lenet_train", steps * 64 / t, "samples/s", { note = note .. " bs64" })
end

-- ResNet-18 inference and one training step
do
  local vision = gluon.model_zoo.vision
  local net = vision.resnet18_v1()
  net:initialize(mx.init.Xavier())
  local x1 = nd.random.uniform(0, 1, { 1, 3, 224, 224 })
  local t = median_time(function() net(x1):wait_to_read() end, quick and 3 or 11)
  H.report("resnet18_b1", t * 1e3, "ms", { note = note })
  local x32 = nd.random.uniform(0, 1, { 32, 3, 224, 224 })
  t = median_time(function() net(x32):wait_to_read() end, quick and 1 or 3, 1)
  H.report("resnet18_b32", 32 / t, "images/s", { note = note })

  local trainer = gluon.Trainer(net:collect_params(), "sgd", { learning_rate = 0.01, momentum = 0.9 })
  local x16 = nd.random.uniform(0, 1, { 16, 3, 224, 224 })
  local y16 = nd.random.randint(0, 1000, { 16 }):astype("float32")
  t = median_time(function()
    local loss = mx.autograd.record(function() return loss_fn(net(x16), y16) end)
    loss:backward()
    trainer:step(16)
    mx.nd.waitall()
  end, quick and 1 or 3, 1)
  H.report("resnet18_train16", t * 1e3, "ms", { note = note })
end
