-- examples/factorization_machine.lua — a factorization machine (Rendle 2010; MXNet's
-- example/sparse/factorization_machine) over bag-of-words features of real text: two
-- of Debian's fortunes categories as the classes, the quotes' L2-normalised word counts
-- as LibSVM rows (examples/_bow.lua) read by gluon.data.LibSVMDataset into csr batches.
--
--   y(x) = w0 + <w, x> + 1/2 sum_f ((x V)_f^2 - (x^2 V^2)_f)
--
-- w (features, 1) and V (features, factors) are row_sparse Parameters: each step pulls
-- the rows of the batch's words only (row_sparse_data), x^2 is csr * csr, V^2 row_sparse
-- * row_sparse, both products dot(csr, row_sparse); the gradients are row_sparse and the
-- Trainer's store updates those rows lazily. Logistic loss; reports held-out accuracy.
--
--   bin/mx examples/factorization_machine.lua
--   bin/mx examples/factorization_machine.lua --categories food,love --factors 16
--
-- Options: --categories A,B (computers,politics)  --per-class N (300)  --epochs N (15)
--   --batch-size N (32)  --factors N (8)  --lr X (0.1)  --optimizer adagrad|adam|sgd
--   (adagrad)  --seed N (1)  --work DIR (a temporary directory: the LibSVM files)
--   --min-acc X (0)  --quiet
-- Exits with status 1 when the held-out accuracy is below --min-acc.
local mx = require("mx")
local nd, gluon = mx.nd, mx.gluon
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: factorization_machine.lua [--categories A,B] [--per-class N] [--epochs N] [--batch-size N]
       [--factors N] [--lr X] [--optimizer adagrad|adam|sgd] [--seed N] [--work DIR] [--min-acc X]
       [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local bow = dofile(dir .. "_bow.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { categories = "computers,politics", per_class = 300, epochs = 15, batch_size = 32,
    factors = 8, lr = 0.1, optimizer = "adagrad", seed = 1, min_acc = 0 },
  numeric = { per_class = true, epochs = true, batch_size = true, factors = true, lr = true,
    seed = true, min_acc = true },
  string = { categories = true, optimizer = true, work = true }, flags = { quiet = true },
  choices = { optimizer = { "adagrad", "adam", "sgd" } } })
local ncat = select(2, opts.categories:gsub(",", ",")) + 1
if ncat ~= 2 then cli.die("--categories must name two categories (the two classes)", USAGE) end
mx.random.seed(opts.seed)

local corpus = bow.load_or_exit(opts)
local work = opts.work or os.tmpname() .. ".d"
local train_path, test_path = bow.write_libsvm(corpus, work)
local F, K = corpus.vocab.size, opts.factors
local train = gluon.data.LibSVMDataset(train_path, { num_features = F })
local test = gluon.data.LibSVMDataset(test_path, { num_features = F })
print(string.format("fortunes %s: %d training / %d held-out quotes, %d words, %d factors",
  table.concat(corpus.cats, " vs "), train:len(), test:len(), F, K))

---------------------------------------------------------------- model
local function sparse_param(name, shape, init)
  local p = gluon.Parameter(name, { shape = shape, stype = "row_sparse",
    grad_stype = "row_sparse", init = init })
  p:initialize()
  return p
end
local w = sparse_param("w", { F, 1 }, mx.init.Zero())
local V = sparse_param("v", { F, K }, mx.init.Normal(0.1))
local w0 = gluon.Parameter("w0", { shape = { 1 }, init = mx.init.Zero() })
w0:initialize()
local trainer = gluon.Trainer({ w0, w, V }, opts.optimizer, { learning_rate = opts.lr })
local loss_fn = gluon.loss.SigmoidBinaryCrossEntropyLoss()

-- the FM score of a csr batch (B, 1): the rows of its words pulled first
local function forward(x)
  local ids = x:indices()
  local wd, vd = w:row_sparse_data(ids), V:row_sparse_data(ids)
  local xv = nd.dot(x, vd)
  local pair = (xv * xv - nd.dot(x * x, vd * vd)):sum({ axis = 2, keepdims = true }) * 0.5
  return nd.broadcast_add(nd.dot(x, wd) + pair, w0:data():reshape({ 1, 1 }))
end

local function accuracy(ds)
  local right = 0
  for x, y in gluon.data.DataLoader(ds, { batch_size = 256 }):iter() do
    local s = forward(x):reshape({ -1 }):tolist()
    for i, l in ipairs(y:tolist()) do if (s[i] > 0 and 1 or 0) == l then right = right + 1 end end
  end
  return right / ds:len()
end

local loader = gluon.data.DataLoader(train, { batch_size = opts.batch_size, shuffle = true })
local bar = progress.Bar { total = opts.epochs * loader:len(), title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
for _ = 1, opts.epochs do
  for x, y in loader:iter() do
    local loss = mx.autograd.record(function() return loss_fn(forward(x), y:reshape({ -1, 1 })) end)
    loss:backward()
    trainer:step(x:shape()[1])
    bar:update(1, { { "loss", loss:mean():item() } })
  end
end
bar:finish()
local secs = progress.now() - t0
local ones = 0
for i = 1, test:len() do ones = ones + select(2, test:get(i)) end
local acc = accuracy(test)
print(string.format("held-out accuracy %.3f over %d quotes (majority class %.3f); training "
  .. "accuracy %.3f; %d epochs in %.1f s", acc, test:len(),
  math.max(ones, test:len() - ones) / test:len(), accuracy(train), opts.epochs, secs))
if not opts.work then os.execute("rm -rf '" .. work .. "'") end
if acc < opts.min_acc then
  print(string.format("accuracy goal %.2f NOT met", opts.min_acc))
  os.exit(1)
end
