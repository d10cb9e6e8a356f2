-- examples/sparse_linear.lua — a linear classifier over bag-of-words features of real
-- text, trained on sparse storage end to end: the quotes of Debian's fortunes categories
-- (one file per class) as LibSVM rows (examples/_bow.lua), read by
-- gluon.data.LibSVMDataset into csr batches; the weight a row_sparse Parameter
-- (MXNet's sparse linear classification recipe): each step pulls only the rows of the
-- words in the batch (row_sparse_data), dot(csr, w) gives the logits, the gradient is
-- row_sparse and the Trainer's store updates those rows only. Reports held-out accuracy.
--
--   bin/mx examples/sparse_linear.lua
--   bin/mx examples/sparse_linear.lua --categories computers,food,love --devices 2
--
-- Options: --categories LIST (computers,food,love,science,politics,education)
--   --per-class N (200)  --epochs N (20)  --batch-size N (32)  --lr X (0.5)
--   --optimizer sgd|adagrad|adam (adagrad)  --devices N (1: cpu(0); 2: the batch split over
--   cpu(0) and cpu(1), the rows pulled on each)  --workers N (0: DataLoader threads)
--   --seed N (1)  --work DIR (a temporary directory: the LibSVM files)  --min-acc X (0)
--   --quiet
-- Exits with status 1 when the held-out accuracy is below --min-acc.
local mx = require("mx")
local nd, gluon = mx.nd, mx.gluon
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: sparse_linear.lua [--categories LIST] [--per-class N] [--epochs N] [--batch-size N] [--lr X]
       [--optimizer sgd|adagrad|adam] [--devices N] [--workers N] [--seed N] [--work DIR]
       [--min-acc X] [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local bow = dofile(dir .. "_bow.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { categories = "computers,food,love,science,politics,education", per_class = 200,
    epochs = 20, batch_size = 32, lr = 0.5, optimizer = "adagrad", devices = 1, workers = 0,
    seed = 1, min_acc = 0 },
  numeric = { per_class = true, epochs = true, batch_size = true, lr = true, devices = true,
    workers = true, seed = true, min_acc = true },
  string = { categories = true, optimizer = true, work = true }, flags = { quiet = true },
  choices = { optimizer = { "sgd", "adagrad", "adam" } } })
if opts.devices ~= 1 and opts.devices ~= 2 then cli.die("--devices must be 1 or 2", USAGE) end
mx.random.seed(opts.seed)

local corpus = bow.load_or_exit(opts)
local work = opts.work or os.tmpname() .. ".d"
local train_path, test_path = bow.write_libsvm(corpus, work)
local F, K = corpus.vocab.size, #corpus.cats
local train = gluon.data.LibSVMDataset(train_path, { num_features = F })
local test = gluon.data.LibSVMDataset(test_path, { num_features = F })
print(string.format("fortunes %s: %d training / %d held-out quotes, %d words (LibSVM in %s)",
  table.concat(corpus.cats, ","), train:len(), test:len(), F, work))

---------------------------------------------------------------- model
local ctx = opts.devices == 2 and { mx.cpu(0), mx.cpu(1) } or { mx.cpu(0) }
local w = gluon.Parameter("weight", { shape = { F, K }, stype = "row_sparse",
  grad_stype = "row_sparse", init = mx.init.Normal(0.01) })
local b = gluon.Parameter("bias", { shape = { K }, init = mx.init.Zero() })
w:initialize(nil, ctx)
b:initialize(nil, ctx)
local trainer = gluon.Trainer({ w, b }, opts.optimizer, { learning_rate = opts.lr })
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

-- logits of a csr batch on device d: only the rows of its words are pulled
local function forward(x, d)
  local wd = w:row_sparse_data(x:indices())
  return nd.broadcast_add(nd.dot(x, wd), b:data(ctx[d]):reshape({ 1, K }))
end

local function split(x, y)
  local n = x:shape()[1]
  if #ctx == 1 or n < 2 then return { x }, { y } end
  local h = math.floor(n / 2)
  return { x[{ { 1, h } }], x[{ { h + 1, n } }]:to(ctx[2]) },
    { y[{ { 1, h } }], y[{ { h + 1, n } }]:to(ctx[2]) }
end

local function accuracy(ds)
  local right = 0
  for x, y in gluon.data.DataLoader(ds, { batch_size = 256 }):iter() do
    local pred = nd.argmax(forward(x, 1), { axis = 2 }):tolist()
    for i, l in ipairs(y:tolist()) do if pred[i] - 1 == l then right = right + 1 end end
  end
  return right / ds:len()
end

local loader = gluon.data.DataLoader(train, { batch_size = opts.batch_size, shuffle = true,
  num_workers = opts.workers })
local steps = opts.epochs * loader:len()
local bar = progress.Bar { total = steps, title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
for _ = 1, opts.epochs do
  for x, y in loader:iter() do
    local xs, ys = split(x, y)
    local losses, ls = {}, 0
    mx.autograd.record(function()
      for d = 1, #xs do losses[d] = loss_fn(forward(xs[d], d), ys[d]) end
    end)
    mx.autograd.backward(losses)
    trainer:step(x:shape()[1])
    for d = 1, #losses do ls = ls + losses[d]:sum():item() end
    bar:update(1, { { "loss", ls / x:shape()[1] } })
  end
end
bar:finish()
local secs = progress.now() - t0
local acc = accuracy(test)
print(string.format("held-out accuracy %.3f over %d quotes (chance %.3f); training accuracy %.3f; "
  .. "%d epochs in %.1f s on %d device(s)", acc, test:len(), 1 / K, accuracy(train), opts.epochs,
  secs, #ctx))
if not opts.work then os.execute("rm -rf '" .. work .. "'") end
if acc < opts.min_acc then
  print(string.format("accuracy goal %.2f NOT met", opts.min_acc))
  os.exit(1)
end
