-- examples/dist_train.lua — data-parallel training of an MLP with the dist_sync kvstore.
--
--   bin/mx examples/dist_train.lua                           # 1 process, Fashion-MNIST
--   tools/dist/mxrun 2 examples/dist_train.lua --kvstore dist_sync
--   # (= mpirun --enable-recovery [--allow-run-as-root] --oversubscribe -np 2 bin/mx ...)
--
-- Every step takes one GLOBAL batch (--batch-size, the same for any number of
-- processes) in an order fixed by (seed, epoch); rank r of N computes the gradient of its
-- N-th of it, kv:pushpull sums the gradients over the ranks (MPI allreduce, bucketed,
-- through the engine), and every rank runs the same optimizer step with the global batch
-- size: the weights stay identical on every rank, and the result equals one process on
-- the whole batch up to float rounding (the sum is split differently).
-- --update-on-kvstore runs the optimizer in the store instead (MXNet's dist_sync server
-- semantics); the weights are then pulled back.
--
-- Checkpoints (mx.checkpoint): --checkpoint PREFIX --every N saves parameters, optimizer
-- states, the position and the random state every N steps; run again with the same
-- PREFIX and it resumes from the last checkpoint all ranks have. --crash-rank R
-- --crash-step K makes rank R SIGKILL itself at step K (spec/checkpoint_spec.lua).
--
-- Options: --kvstore local|dist_sync|dist_device_sync (local)  --epochs N (2)
--   --batch-size N (128, global)  --lr X (0.1, SGD momentum 0.9)  --seed N (42)
--   --data fashion|synthetic (fashion)  --train-subset N  --root DIR  --hidden N (256)
--   --features N (32) --train-size N (4096): the synthetic data's shape
--   --noise X (0: Gaussian input noise drawn from mx.random each step)
--   --out PATH (rank 0 saves the final parameters; a PATH with %d: every rank)  --quiet
local mx = require("mx")
local ffi = require("ffi")
local gluon = mx.gluon
local nn = gluon.nn
local nd = mx.nd
local progress = require("mx.progress")

local USAGE = [==[
usage: dist_train.lua [--kvstore local|dist_sync|dist_device_sync] [--epochs N]
       [--batch-size N] [--lr X] [--seed N] [--data fashion|synthetic] [--train-subset N]
       [--root DIR] [--hidden N] [--features N] [--train-size N] [--noise X]
       [--update-on-kvstore] [--checkpoint PREFIX]
       [--every N] [--crash-rank R] [--crash-step K] [--out PATH] [--quiet]]==]

local cli = dofile((arg[0]:match("^(.*[/\\])") or "./") .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { kvstore = "local", epochs = 2, batch_size = 128, lr = 0.1, seed = 42,
    data = "fashion", hidden = 256, noise = 0, every = 0, features = 32, train_size = 4096 },
  numeric = { epochs = true, batch_size = true, lr = true, seed = true, train_subset = true,
    hidden = true, noise = true, every = true, crash_rank = true, crash_step = true,
    features = true, train_size = true },
  string = { kvstore = true, data = true, root = true, checkpoint = true, out = true },
  flags = { quiet = true, update_on_kvstore = true },
  choices = { kvstore = { "local", "dist_sync", "dist_device_sync" },
    data = { "fashion", "synthetic" } } })

local kv = mx.kv.create(opts.kvstore)
local rank, nw = kv.rank, kv.num_workers
local say = (rank == 0 and not opts.quiet) and print or function() end
if opts.batch_size % nw ~= 0 then
  error(string.format("--batch-size %d is not a multiple of the %d workers", opts.batch_size, nw))
end
local local_batch = math.floor(opts.batch_size / nw)
mx.random.seed(opts.seed + rank) -- per-rank streams (input noise); restored by checkpoints

---------------------------------------------------------------- data
local X, Y, Xt, Yt
if opts.data == "fashion" then
  local vision = gluon.data.vision
  local tr = vision.FashionMNIST { train = true, root = opts.root }
  local te = vision.FashionMNIST { train = false, root = opts.root }
  local function flat(ds)
    local img, lab = ds._fields[1], ds._fields[2]
    local n = img:shape()[1]
    return (img:astype("float32") / 255):reshape({ n, 784 }), nd.array(lab):astype("float32")
  end
  X, Y = flat(tr)
  Xt, Yt = flat(te)
else -- a fixed random teacher: the same data on every rank
  mx.random.seed(1234)
  X = mx.random.normal(0, 1, { opts.train_size, opts.features })
  local teacher = mx.random.normal(0, 1, { opts.features, 10 })
  Y = nd.argmax(nd.dot(X, teacher), { axis = 2 }):astype("float32") - 1 -- 1-based ids
  Xt, Yt = X, Y
  mx.random.seed(opts.seed + rank)
end
if opts.train_subset then
  X = X:slice_axis({ axis = 1, begin = 1, ["end"] = opts.train_subset })
  Y = Y:slice_axis({ axis = 1, begin = 1, ["end"] = opts.train_subset })
end
local N = X:shape()[1]
local nbatch = math.floor(N / opts.batch_size)

-- The order of epoch e: a Fisher-Yates shuffle from an LCG seeded by (seed, e), so a
-- resumed run draws the same batches without any saved state.
local function epoch_order(e)
  local idx = {}
  for i = 1, N do idx[i] = i - 1 end
  local s = (opts.seed * 7919 + e * 104729) % 2147483647
  for i = N, 2, -1 do
    s = (s * 48271) % 2147483647
    local j = s % i + 1
    idx[i], idx[j] = idx[j], idx[i]
  end
  return idx
end

local function batch_of(order, b)
  local ids = {}
  local base = (b - 1) * opts.batch_size + rank * local_batch
  for i = 1, local_batch do ids[i] = order[base + i] end
  local t = nd.array(ids, { dtype = "int64" })
  return nd.take(X, t), nd.take(Y, t)
end

---------------------------------------------------------------- model
local net = nn.Sequential()
net:add(nn.Dense(opts.hidden, { activation = "relu" }), nn.Dense(opts.hidden, { activation = "relu" }),
  nn.Dense(10))
mx.random.seed(opts.seed) -- the same initial weights on every rank (init also broadcasts)
net:initialize(mx.init.Xavier())
net(X:slice_axis({ axis = 1, begin = 1, ["end"] = 2 })) -- finish deferred shapes
mx.random.seed(opts.seed + rank)
local params = net:collect_params()
local plist, keys = {}, {}
for name, p in params:items() do plist[#plist + 1] = p; keys[#keys + 1] = name end
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local opt_params = { learning_rate = opts.lr, momentum = 0.9 }
local trainer = gluon.Trainer(params, "sgd", opt_params)

local ck
if opts.checkpoint then
  ck = mx.checkpoint.Checkpointer(opts.checkpoint, { params = params, trainer = trainer, kv = kv,
    every = opts.every })
end
local start = ck and ck:restore()
if start then
  say(string.format("resumed from step %d (epoch %d, batch %d)", start.step, start.epoch, start.batch))
  io.stdout:write(string.format("RESULT %d resumed %d\n", rank, start.step))
end

-- the store starts from rank 0's (restored) weights
local weights = {}
for i, p in ipairs(plist) do weights[i] = p:data() end
kv:init(keys, weights)
kv:pull(keys, weights)
if opts.update_on_kvstore then
  local o = mx.optimizer.create("sgd", { learning_rate = opts.lr, momentum = 0.9,
    rescale_grad = 1 / opts.batch_size })
  kv:set_optimizer(o)
end

local function evaluate()
  local acc = gluon.metric.Accuracy()
  local n = Xt:shape()[1]
  for s = 1, n, 2000 do
    local e = math.min(s + 1999, n)
    local xb = Xt:slice_axis({ axis = 1, begin = s, ["end"] = e })
    acc:update(Yt:slice_axis({ axis = 1, begin = s, ["end"] = e }), net(xb))
  end
  local _, v = acc:get()
  return v
end

---------------------------------------------------------------- training
say(string.format("%s: %d workers, global batch %d (%d per worker), %d train samples, %d epochs",
  opts.kvstore, nw, opts.batch_size, local_batch, N, opts.epochs))
local step, t_train, comm0 = 0, 0, 0
local dist = opts.kvstore ~= "local"
if dist then comm0 = require("mx.kvstore.dist_sync").stats().seconds end
local acc
for epoch = 1, opts.epochs do
  local order = epoch_order(epoch)
  local t0 = progress.now()
  local loss_sum = 0
  for b = 1, nbatch do
    if start and (epoch < start.epoch or (epoch == start.epoch and b <= start.batch)) then
      goto continue
    end
    step = step + 1
    if opts.crash_rank == rank and not start and (epoch - 1) * nbatch + b == opts.crash_step then
      ffi.cdef("int kill(int pid, int sig); int getpid(void);")
      io.stdout:write("RESULT ", rank, " crashing at step ", opts.crash_step, "\n"); io.stdout:flush()
      ffi.C.kill(ffi.C.getpid(), 9)
    end
    do
      local data, label = batch_of(order, b)
      if opts.noise > 0 then data = data + mx.random.normal(0, opts.noise, data:shape()) end
      local loss
      mx.autograd.record(function() loss = loss_fn(net(data), label) end)
      loss:backward()
      local grads = {}
      for i, p in ipairs(plist) do grads[i] = p:grad() end
      if opts.update_on_kvstore then
        kv:push(keys, grads)
        kv:pull(keys, weights)
      else
        kv:pushpull(keys, grads)       -- the sum over the workers, in place
        trainer:step(opts.batch_size)  -- the same update on every rank
      end
      if not opts.quiet then loss_sum = loss_sum + loss:sum():item() end
      if ck then ck:step({ epoch = epoch, batch = b }) end
    end
    ::continue::
  end
  nd.waitall()
  t_train = t_train + (progress.now() - t0)
  acc = evaluate()
  say(string.format("epoch %d: loss %.4f  test-acc %.4f  (%.1fs)", epoch,
    loss_sum / (nbatch * local_batch), acc, progress.now() - t0))
end
local comm = dist and (require("mx.kvstore.dist_sync").stats().seconds - comm0) or 0
say(string.format("final test accuracy %.4f; %d steps, %.2f ms/step, communication %.2f ms/step",
  acc, step, 1000 * t_train / math.max(step, 1), 1000 * comm / math.max(step, 1)))
if opts.out and opts.out:find("%%d") then
  net:save_parameters(string.format(opts.out, rank)) -- every rank (a check that all agree)
elseif rank == 0 and opts.out then
  net:save_parameters(opts.out)
end
io.stdout:write(string.format("RESULT %d acc %.6f steps %d\n", rank, acc, step))
kv:barrier()
