-- examples/module_mnist.lua — MXNet 1.x's symbolic MNIST training (example/image-
-- classification/train_mnist.py) on Fashion-MNIST: an MLP or LeNet built from mx.sym,
-- fed by mx.io.MNISTIter, trained by mx.mod.Module.fit with the Speedometer and
-- do_checkpoint callbacks, then reloaded with mx.model.load_checkpoint and scored again.
--
--   bin/mx examples/module_mnist.lua                      # MLP, 10 epochs of SGD
--   bin/mx examples/module_mnist.lua --network lenet --epochs 5
--
-- The lines are MXNet's ("Epoch[0] Batch [0-100]\tSpeed: ... samples/sec\taccuracy=...",
-- "Epoch[0] Train-accuracy=...", "Epoch[0] Validation-accuracy=...", "Saved checkpoint
-- to ..."). The data are Debian's dataset-fashion-mnist (apt-get install
-- dataset-fashion-mnist); --root DIR reads the IDX files elsewhere.
--
-- Options: --network mlp|lenet (mlp)  --epochs N (10)  --batch-size N (64)  --lr X (0.05)
--   --momentum X (0.9)  --wd X (0.0001)  --lr-factor X (0.5: the rate times X every
--   --lr-step-epochs epochs, 5)  --num-batches N (all: an epoch is N batches, mx.io.ResizeIter)
--   --val-batches N (all: validation on the first N test batches)
--   --disp-batches N (100)  --prefix PATH (a temp file: the checkpoints PATH-symbol.json,
--   PATH-NNNN.params)  --seed N (42)  --threads N (libmx's default)  --root DIR
local mx = require("mx")
local progress = require("mx.progress")

local USAGE = [==[
usage: module_mnist.lua [--network mlp|lenet] [--epochs N] [--batch-size N] [--lr X] [--momentum X]
       [--wd X] [--lr-factor X] [--lr-step-epochs N] [--num-batches N] [--val-batches N]
       [--disp-batches N] [--prefix PATH] [--seed N] [--threads N] [--root DIR]]==]

local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { network = "mlp", epochs = 10, batch_size = 64, lr = 0.05, momentum = 0.9, wd = 1e-4,
    lr_factor = 0.5, lr_step_epochs = 5, disp_batches = 100, seed = 42,
    root = "/usr/share/datasets/fashion-mnist" },
  numeric = { epochs = true, batch_size = true, lr = true, momentum = true, wd = true,
    lr_factor = true, lr_step_epochs = true, num_batches = true, val_batches = true,
    disp_batches = true, seed = true, threads = true },
  string = { network = true, prefix = true, root = true },
  choices = { network = { "mlp", "lenet" } } })
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)

---------------------------------------------------------------- the networks (symbols/mlp.py, lenet.py)
local S = mx.sym

local function mlp(num_classes)
  local data = S.Flatten(S.Variable("data"))
  local fc1 = S.FullyConnected(data, { name = "fc1", num_hidden = 128 })
  local act1 = S.Activation(fc1, { name = "relu1", act_type = "relu" })
  local fc2 = S.FullyConnected(act1, { name = "fc2", num_hidden = 64 })
  local act2 = S.Activation(fc2, { name = "relu2", act_type = "relu" })
  local fc3 = S.FullyConnected(act2, { name = "fc3", num_hidden = num_classes })
  return S.SoftmaxOutput(fc3, { name = "softmax" })
end

local function lenet(num_classes)
  local data = S.Variable("data")
  local conv1 = S.Convolution(data, { kernel = { 5, 5 }, num_filter = 20 })
  local tanh1 = S.Activation(conv1, { act_type = "tanh" })
  local pool1 = S.Pooling(tanh1, { pool_type = "max", kernel = { 2, 2 }, stride = { 2, 2 } })
  local conv2 = S.Convolution(pool1, { kernel = { 5, 5 }, num_filter = 50 })
  local tanh2 = S.Activation(conv2, { act_type = "tanh" })
  local pool2 = S.Pooling(tanh2, { pool_type = "max", kernel = { 2, 2 }, stride = { 2, 2 } })
  local fc1 = S.FullyConnected(S.Flatten(pool2), { num_hidden = 500 })
  local tanh3 = S.Activation(fc1, { act_type = "tanh" })
  local fc2 = S.FullyConnected(tanh3, { num_hidden = num_classes })
  return S.SoftmaxOutput(fc2, { name = "softmax" })
end

---------------------------------------------------------------- data (common/data.py's get_mnist_iter)
local function path(name) return opts.root .. "/" .. name .. ".gz" end
local flat = opts.network == "mlp"
local train = mx.io.MNISTIter { image = path("train-images-idx3-ubyte"),
  label = path("train-labels-idx1-ubyte"), batch_size = opts.batch_size, shuffle = true,
  flat = flat, seed = opts.seed }
local val = mx.io.MNISTIter { image = path("t10k-images-idx3-ubyte"),
  label = path("t10k-labels-idx1-ubyte"), batch_size = opts.batch_size, flat = flat }
local epoch_size = opts.num_batches or math.floor(60000 / opts.batch_size)
if opts.num_batches then train = mx.io.ResizeIter(train, opts.num_batches) end
if opts.val_batches then val = mx.io.ResizeIter(val, opts.val_batches) end

---------------------------------------------------------------- fit (common/fit.py)
local net = opts.network == "mlp" and mlp(10) or lenet(10)
local tmpbase = not opts.prefix and os.tmpname() or nil
local prefix = opts.prefix or tmpbase
local steps = {}
for e = opts.lr_step_epochs, opts.epochs - 1, opts.lr_step_epochs do steps[#steps + 1] = e * epoch_size end
local scheduler = #steps > 0 and mx.lr_scheduler.MultiFactorScheduler(steps, opts.lr_factor) or nil

print(string.format("Fashion-MNIST through MNISTIter: %s, batch %d, %d batches an epoch, %d epochs, "
  .. "sgd lr=%g momentum=%g wd=%g", opts.network, opts.batch_size, epoch_size, opts.epochs, opts.lr,
  opts.momentum, opts.wd))
local log = function(line) print(line) end
mx.callback.log = log
local t0 = progress.now()
local mod = mx.mod.Module(net, { context = mx.cpu(), logger = log })
mod:fit(train, {
  eval_data = val,
  eval_metric = "acc",
  optimizer = "sgd",
  optimizer_params = { learning_rate = opts.lr, momentum = opts.momentum, wd = opts.wd,
    lr_scheduler = scheduler },
  initializer = mx.init.Xavier("gaussian", "in", 2),
  num_epoch = opts.epochs,
  batch_end_callback = mx.callback.Speedometer(opts.batch_size, opts.disp_batches),
  epoch_end_callback = mx.callback.do_checkpoint(prefix),
})
local train_time = progress.now() - t0
local acc = mod:score(val, "acc")[1][2]

---------------------------------------------------------------- reload the last checkpoint, score again
local sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, opts.epochs)
local back = mx.mod.Module(sym, { logger = log })
back:bind(val.provide_data, val.provide_label, false)
back:set_params(arg_params, aux_params)
local again = back:score(val, "acc")[1][2]

if tmpbase then
  os.remove(prefix .. "-symbol.json")
  for e = 1, opts.epochs do os.remove(string.format("%s-%04d.params", prefix, e)) end
  os.remove(tmpbase)
end
print(string.format("test accuracy %.4f; after load_checkpoint %.4f (%s)", acc, again,
  acc == again and "same" or "DIFFERENT"))
print(string.format("training %.1fs", train_time))
if acc ~= again then os.exit(1) end
