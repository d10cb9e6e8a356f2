-- examples/fashion_mnist_mlp.lua — a 784-256-256-10 MLP on Fashion-MNIST.
--
--   bin/mx examples/fashion_mnist_mlp.lua                 # 10 epochs of Adam
--   bin/mx examples/fashion_mnist_mlp.lua --optimizer sgd --lr 0.1 --epochs 5
--
-- Trains on the 60000 training images, reports accuracy on the 10000 test images
-- after every epoch, then saves the parameters, loads them into a fresh network
-- and checks that it scores the same. The data are Debian's dataset-fashion-mnist
-- (apt-get install dataset-fashion-mnist); --root DIR reads the IDX files elsewhere.
--
-- Options: --epochs N (10)  --batch-size N (64)  --optimizer adam|sgd (adam)
--   --lr X (adam 0.001, sgd 0.1)  --schedule cosine|constant (cosine: the rate falls
--   from lr to 0 over the epochs, set at the start of each one)  --momentum X (sgd,
--   0.9)  --wd X (0)
--   --seed N (42)  --train-subset N (all)  --params PATH (a temp file)
--   --threads N (libmx's default)  --root DIR  --quiet (no per-epoch lines)
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn
local vision = gluon.data.vision
local transforms = vision.transforms
local progress = require("mx.progress")

---------------------------------------------------------------- options
local USAGE = [==[
usage: fashion_mnist_mlp.lua [--epochs N] [--batch-size N] [--optimizer adam|sgd] [--lr X]
       [--schedule cosine|constant] [--momentum X] [--wd X] [--seed N] [--train-subset N]
       [--params PATH] [--threads N] [--root DIR] [--quiet]]==]

local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { epochs = 10, batch_size = 64, optimizer = "adam", seed = 42, momentum = 0.9, wd = 0,
    schedule = "cosine" },
  numeric = { epochs = true, batch_size = true, lr = true, momentum = true, wd = true, seed = true,
    train_subset = true, threads = true },
  string = { optimizer = true, params = true, root = true, schedule = true },
  flags = { quiet = true },
  choices = { optimizer = { "adam", "sgd" }, schedule = { "cosine", "constant" } } })
opts.lr = opts.lr or (opts.optimizer == "adam" and 1e-3 or 0.1)
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)

---------------------------------------------------------------- data
-- Samples are (28, 28, 1) uint8 images and labels 0..9. ToTensor makes (1, 28, 28)
-- float32 in [0, 1]; inside a DataLoader it runs once per batch, not per image.
local t_start = progress.now()
local train_raw = vision.FashionMNIST { train = true, root = opts.root }
local test_raw = vision.FashionMNIST { train = false, root = opts.root }
local train_ds = train_raw:transform_first(transforms.ToTensor())
local test_ds = test_raw:transform_first(transforms.ToTensor())
if opts.train_subset then train_ds = train_ds:take(opts.train_subset) end

local train_loader = gluon.data.DataLoader(train_ds, { batch_size = opts.batch_size, shuffle = true })
local test_loader = gluon.data.DataLoader(test_ds, { batch_size = 1000 })

---------------------------------------------------------------- model
local function build()
  local net = nn.Sequential()
  net:add(nn.Dense(256, { activation = "relu" }),
    nn.Dense(256, { activation = "relu" }),
    nn.Dense(10))
  return net
end

local net = build()
net:initialize(mx.init.Xavier())
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local opt_params = { learning_rate = opts.lr, wd = opts.wd }
if opts.optimizer == "sgd" then opt_params.momentum = opts.momentum end
local trainer = gluon.Trainer(net:collect_params(), opts.optimizer, opt_params)

local function evaluate(model)
  local acc = gluon.metric.Accuracy()
  for data, label in test_loader:iter() do
    acc:update(label, model(data))
  end
  local _, value = acc:get()
  return value
end

---------------------------------------------------------------- training
print(string.format("Fashion-MNIST: %d training / %d test images; MLP 784-256-256-10, %s lr=%g (%s), "
  .. "batch %d, %d epochs", train_ds:len(), test_ds:len(), opts.optimizer, opts.lr, opts.schedule,
  opts.batch_size, opts.epochs))

local metric = gluon.metric.Accuracy()
local test_acc
local train_time, train_samples = 0, 0
for epoch = 1, opts.epochs do
  if opts.schedule == "cosine" then
    trainer:set_learning_rate(opts.lr * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / opts.epochs)))
  end
  metric:reset()
  local bar = progress.Bar { total = train_loader:len(),
    title = string.format("epoch %d/%d", epoch, opts.epochs) }
  local loss_sum, seen = 0, 0
  for data, label in train_loader:iter() do
    local n = data:shape()[1]
    local output, loss
    mx.autograd.record(function()
      output = net(data)
      loss = loss_fn(output, label)
    end)
    loss:backward()
    trainer:step(n)
    loss_sum = loss_sum + loss:sum():item()
    seen = seen + n
    metric:update(label, output)
    local _, acc = metric:get()
    bar:update(1, { { "loss", loss_sum / seen }, { "acc", acc } }, n)
  end
  train_time = train_time + bar:busy()
  train_samples = train_samples + seen
  test_acc = evaluate(net)
  local _, acc = metric:get()
  local line = { { "loss", loss_sum / seen }, { "acc", acc }, { "test-acc", test_acc } }
  if opts.quiet then bar.out = { write = function() end, flush = function() end } end
  bar:finish(line)
end

---------------------------------------------------------------- save, reload, check
local tmpbase = not opts.params and os.tmpname() or nil
local path = opts.params or (tmpbase .. ".params")
net:save_parameters(path)
local net2 = build()
net2:load_parameters(path)
local reloaded_acc = evaluate(net2)
if tmpbase then
  os.remove(path)
  os.remove(tmpbase)
end

print(string.format("test accuracy %.4f; after save_parameters/load_parameters %.4f (%s)", test_acc,
  reloaded_acc, reloaded_acc == test_acc and "same" or "DIFFERENT"))
print(string.format("training %.1fs (%.0f samples/s), total %.1fs", train_time,
  train_samples / train_time, progress.now() - t_start))
if reloaded_acc ~= test_acc then os.exit(1) end
