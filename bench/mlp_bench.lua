-- bench/mlp_bench.lua — MLP training on Fashion-MNIST (peer: bench/mlp_bench.py).
--
-- The same 784-256-256-10 MLP (ReLU, Xavier-uniform weights, zero biases), the same
-- hyper-parameters and the same data path as the PyTorch peer: images stay uint8;
-- each shuffled batch is gathered by the DataLoader and converted by ToTensor
-- (float32 / 255) once per batch. Reports (RESULT lines, bench/harness.lua):
--   mlp_train       samples/s over the training epochs (evaluation excluded)
--   mlp_test_acc    test accuracy after the last epoch
--   mlp_epoch       seconds per training epoch (median)
--   mlp_load        seconds to read the dataset
--
--   MX_BUILD=build luajit bench/mlp_bench.lua --threads=1 --epochs=5 --batch=64 \
--       --optimizer=adam --lr=0.001 --seed=1
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn
local vision = gluon.data.vision

local A = H.args(arg)
local threads = A.threads or 1
local epochs = A.epochs or 5
local bs = A.batch or 64
local opt_name = A.optimizer or "adam"
local lr = A.lr or (opt_name == "adam" and 1e-3 or 0.1)
local note = string.format("%dT bs%d %s", threads, bs, opt_name)
mx.engine.set_num_threads(threads)
mx.random.seed(A.seed or 1)
H.env_note()

local t0 = H.now()
local train = vision.FashionMNIST { train = true }
local test = vision.FashionMNIST { train = false }
H.report("mlp_load", H.now() - t0, "s", { note = note })
local T = vision.transforms.ToTensor()
local train_loader = gluon.data.DataLoader(train:transform_first(T), { batch_size = bs, shuffle = true })
local test_loader = gluon.data.DataLoader(test:transform_first(T), { batch_size = 1000 })

local net = nn.Sequential()
net:add(nn.Dense(256, { activation = "relu" }), nn.Dense(256, { activation = "relu" }), nn.Dense(10))
net:initialize(mx.init.Xavier())
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local params = { learning_rate = lr }
if opt_name == "sgd" then params.momentum = 0.9 end
local trainer = gluon.Trainer(net:collect_params(), opt_name, params)

local function evaluate()
  local acc = gluon.metric.Accuracy()
  for x, y in test_loader:iter() do acc:update(y, net(x)) end
  local _, v = acc:get()
  return v
end

local epoch_times, samples, train_time, acc = {}, 0, 0, 0
for epoch = 1, epochs do
  local t = H.now()
  local loss_sum, seen = 0, 0
  for x, y in train_loader:iter() do
    local n = x:shape()[1]
    local loss = mx.autograd.record(function() return loss_fn(net(x), y) end)
    loss:backward()
    trainer:step(n)
    loss_sum = loss_sum + loss:sum():item() -- the peer's loss.item(): one sync per batch
    seen = seen + n
  end
  local dt = H.now() - t
  epoch_times[epoch] = dt
  train_time = train_time + dt
  samples = samples + seen
  acc = evaluate()
  io.write(string.format("# epoch %d/%d loss %.4f test-acc %.4f %.1fs\n", epoch, epochs,
    loss_sum / seen, acc, dt))
end
H.report("mlp_train", samples / train_time, "samples/s", { note = note })
H.report("mlp_epoch", H.median(epoch_times), "s", { note = note })
H.report("mlp_test_acc", acc, "accuracy", { note = note .. " " .. epochs .. " epochs" })
