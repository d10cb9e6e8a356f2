-- examples/fashion_mnist_cnn.lua — convolutional networks on Fashion-MNIST.
--
--   bin/mx examples/fashion_mnist_cnn.lua                  # LeNet-5, 5 epochs of Adam
--   bin/mx examples/fashion_mnist_cnn.lua --model resnet   # a small ResNet, SGD, crops/flips
--
-- Models:
--   lenet   LeNet-5 with ReLU and max pooling: conv 6@5x5 (pad 2) - pool - conv 16@5x5 -
--           pool - dense 120 - 84 - 10.
--   resnet  a ResNet in the manner of He et al.'s CIFAR networks: a 3x3 stem, three
--           stages of two basic residual blocks (conv-BN-ReLU-conv-BN + shortcut) at
--           widths 16/32/64, the second and third stage starting with a stride-2
--           block (1x1 conv + BN shortcut), global average pooling, dense 10. Trained
--           with random crops (2-pixel zero padding) and horizontal flips.
-- After every epoch: loss and accuracy on the training set (as trained) and on the 10000
-- test images; at the end the curves go to an SVG plot (--plot PATH, default
-- fashion_mnist_<model>.svg in the current directory) and the parameters are saved,
-- reloaded into a fresh network and checked to score the same.
--
-- Options: --model lenet|resnet  --epochs N (lenet 5, resnet 15)  --batch-size N (64)
--   --optimizer adam|sgd (lenet adam, resnet sgd)  --lr X (adam 0.003, sgd 0.1)
--   --momentum X (0.9)  --wd X (lenet 0, resnet 5e-4)  --augment / --no-augment
--   --seed N (42)  --train-subset N  --test-subset N  --plot PATH  --params PATH
--   --threads N  --root DIR  --quiet
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn
local nd = mx.nd
local vision = gluon.data.vision
local transforms = vision.transforms
local progress = require("mx.progress")

---------------------------------------------------------------- options
local USAGE = [==[
usage: fashion_mnist_cnn.lua [--model lenet|resnet] [--epochs N] [--batch-size N]
       [--optimizer adam|sgd] [--lr X] [--momentum X] [--wd X] [--augment|--no-augment]
       [--seed N] [--train-subset N] [--test-subset N] [--plot PATH] [--params PATH]
       [--threads N] [--root DIR] [--quiet]]==]

local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { model = "lenet", batch_size = 64, seed = 42, momentum = 0.9 },
  numeric = { epochs = true, batch_size = true, lr = true, momentum = true, wd = true, seed = true,
    train_subset = true, test_subset = true, threads = true },
  string = { model = true, optimizer = true, params = true, root = true, plot = true },
  flags = { quiet = true, augment = true, no_augment = true },
  choices = { model = { "lenet", "resnet" }, optimizer = { "adam", "sgd" } } })
local resnet = opts.model == "resnet"
opts.epochs = opts.epochs or (resnet and 15 or 5)
opts.optimizer = opts.optimizer or (resnet and "sgd" or "adam")
opts.lr = opts.lr or (opts.optimizer == "adam" and 3e-3 or 0.1)
opts.wd = opts.wd or (resnet and 5e-4 or 0)
local augment = resnet
if opts.augment then augment = true end
if opts.no_augment then augment = false end
opts.plot = opts.plot or ("fashion_mnist_" .. opts.model .. ".svg")
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)

---------------------------------------------------------------- data
-- ToTensor: (28, 28, 1) uint8 -> (1, 28, 28) float32 in [0, 1], once per batch.
local t_start = progress.now()
local norm = transforms.Compose { transforms.ToTensor(), transforms.Normalize(0.286, 0.353) }
local train_ds = vision.FashionMNIST { train = true, root = opts.root }:transform_first(norm)
local test_ds = vision.FashionMNIST { train = false, root = opts.root }:transform_first(norm)
if opts.train_subset then train_ds = train_ds:take(opts.train_subset) end
if opts.test_subset then test_ds = test_ds:take(opts.test_subset) end
local train_loader = gluon.data.DataLoader(train_ds, { batch_size = opts.batch_size, shuffle = true,
  last_batch = "discard" })
local test_loader = gluon.data.DataLoader(test_ds, { batch_size = 500 })

-- Random crops and flips of a (N, 1, 28, 28) batch: each image is cut at a random offset
-- out of its 2-pixel zero-padded copy, and half of them (at random) are mirrored.
local PAD = 2
local function augment_batch(x)
  local n = x:shape()[1]
  local padded = nd.pad(x, { mode = "constant", pad_width = { 0, 0, 0, 0, PAD, PAD, PAD, PAD } })
  local out = nd.empty(x:shape())
  for i = 1, n do
    local dy, dx = math.random(0, 2 * PAD), math.random(0, 2 * PAD)
    out[i] = padded[{ i, {}, { dy + 1, dy + 28 }, { dx + 1, dx + 28 } }]
  end
  local flip = {}
  for i = 1, n do flip[i] = math.random() < 0.5 and 1 or 0 end
  return nd.where(nd.array(flip), nd.flip(out, { axis = 4 }), out)
end

---------------------------------------------------------------- models
local function lenet()
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(6, 5, { padding = 2, activation = "relu" }), nn.MaxPool2D(2),
    nn.Conv2D(16, 5, { activation = "relu" }), nn.MaxPool2D(2),
    nn.Dense(120, { activation = "relu" }), nn.Dense(84, { activation = "relu" }), nn.Dense(10))
  return net
end

-- conv-BN-ReLU-conv-BN plus the shortcut (a 1x1 conv + BN where the shape changes), ReLU
local Residual = nn.HybridBlock:extend("Residual")
function Residual:__init(channels, stride)
  nn.HybridBlock.__init(self)
  self.body = nn.HybridSequential()
  self.body:add(nn.Conv2D(channels, 3, { strides = stride, padding = 1, use_bias = false }),
    nn.BatchNorm(), nn.Activation("relu"),
    nn.Conv2D(channels, 3, { padding = 1, use_bias = false }), nn.BatchNorm())
  if stride ~= 1 then
    self.down = nn.HybridSequential()
    self.down:add(nn.Conv2D(channels, 1, { strides = stride, use_bias = false }), nn.BatchNorm())
  end
end
function Residual:forward(x)
  local down = self.down
  return nd.relu(nd.add(self.body(x), down and down(x) or x))
end

local function small_resnet()
  local net = nn.HybridSequential()
  net:add(nn.Conv2D(16, 3, { padding = 1, use_bias = false }), nn.BatchNorm(), nn.Activation("relu"))
  local widths = { 16, 32, 64 }
  for stage, c in ipairs(widths) do
    net:add(Residual(c, stage == 1 and 1 or 2), Residual(c, 1))
  end
  net:add(nn.GlobalAvgPool2D(), nn.Dense(10))
  return net
end

local build = resnet and small_resnet or lenet
local net = build()
net:initialize(mx.init.Xavier({ magnitude = 2.24 }))
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local opt_params = { learning_rate = opts.lr, wd = opts.wd }
if opts.optimizer == "sgd" then opt_params.momentum = opts.momentum end
local trainer = gluon.Trainer(net:collect_params(), opts.optimizer, opt_params)

local function evaluate(model)
  local acc = gluon.metric.Accuracy()
  local loss_sum, seen = 0, 0
  for data, label in test_loader:iter() do
    local out = model(data)
    acc:update(label, out)
    loss_sum = loss_sum + loss_fn(out, label):sum():item()
    seen = seen + data:shape()[1]
  end
  local _, value = acc:get()
  return value, loss_sum / seen
end

---------------------------------------------------------------- training
print(string.format("Fashion-MNIST: %d training / %d test images; %s, %s lr=%g (cosine), wd %g, "
  .. "batch %d, %d epochs%s", train_ds:len(), test_ds:len(), opts.model, opts.optimizer, opts.lr,
  opts.wd, opts.batch_size, opts.epochs, augment and ", random crops + flips" or ""))

local curves = { train_loss = {}, test_loss = {}, train_acc = {}, test_acc = {} }
local metric = gluon.metric.Accuracy()
local test_acc
local train_time, train_samples = 0, 0
for epoch = 1, opts.epochs do
  trainer:set_learning_rate(opts.lr * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / opts.epochs)))
  metric:reset()
  local bar = progress.Bar { total = train_loader:len(),
    title = string.format("epoch %d/%d", epoch, opts.epochs) }
  if opts.quiet then bar.out = { write = function() end, flush = function() end } end
  local loss_sum, seen = 0, 0
  for data, label in train_loader:iter() do
    local n = data:shape()[1]
    if augment then data = augment_batch(data) end
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
  local test_loss
  test_acc, test_loss = evaluate(net)
  local _, acc = metric:get()
  local e = #curves.train_loss + 1
  curves.train_loss[e], curves.test_loss[e] = loss_sum / seen, test_loss
  curves.train_acc[e], curves.test_acc[e] = acc, test_acc
  bar:finish { { "loss", loss_sum / seen }, { "acc", acc }, { "test-loss", test_loss },
    { "test-acc", test_acc } }
end

-- counted now: in_channels=0 layers got their shapes at the first forward
local nparams = 0
for _, p in net:collect_params():items() do
  if p.shape then
    local k = 1
    for _, d in ipairs(p.shape) do k = k * d end
    nparams = nparams + k
  end
end

---------------------------------------------------------------- plot, save, reload, check
mx.viz.plot_curves(opts.plot, {
  title = string.format("Fashion-MNIST %s (%s, batch %d)", opts.model, opts.optimizer,
    opts.batch_size),
  panels = {
    { ylabel = "loss", series = { { name = "train", values = curves.train_loss },
      { name = "test", values = curves.test_loss } } },
    { ylabel = "accuracy", series = { { name = "train", values = curves.train_acc },
      { name = "test", values = curves.test_acc } } },
  },
  xlabel = "epoch" })

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

print(string.format("%s: %d parameters; test accuracy %.4f; after save_parameters/"
  .. "load_parameters %.4f (%s)", opts.model, nparams, test_acc, reloaded_acc,
  reloaded_acc == test_acc and "same" or "DIFFERENT"))
print(string.format("training %.1fs (%.0f images/s), total %.1fs; curves: %s", train_time,
  train_samples / train_time, progress.now() - t_start, opts.plot))
if reloaded_acc ~= test_acc then os.exit(1) end
