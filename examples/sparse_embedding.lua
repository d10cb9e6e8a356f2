-- examples/sparse_embedding.lua — a bag-of-embeddings text classifier (fastText's shape:
-- the mean of a quote's word vectors through one Dense layer) whose embedding gets
-- row_sparse gradients (nn.Embedding with sparse_grad), so each step updates only the
-- rows of the words in the batch. The classes are Debian's fortunes categories
-- (examples/_bow.lua); the vocabulary holds every word of the training and the held-out
-- quotes, so the rows of words seen only in held-out quotes are never looked up during
-- training. After training the script checks, row by row, that exactly those rows are
-- bitwise what initialisation gave them (lazy Adam: no step where no gradient came) and
-- that the rows the training looked up moved; then it reports held-out accuracy.
--
--   bin/mx examples/sparse_embedding.lua
--   bin/mx examples/sparse_embedding.lua --devices 2     # the batch split over cpu(0), cpu(1)
--
-- Options: --categories LIST (computers,food,love,science,politics,education)
--   --per-class N (200)  --epochs N (10)  --batch-size N (32)  --dim N (32)  --lr X (0.02)
--   --max-len N (64 words)  --devices N (1 or 2)  --seed N (1)  --min-acc X (0)  --quiet
-- Exits with status 1 when a row never looked up changed (or a looked-up one did not
-- move), or the held-out accuracy is below --min-acc.
local mx = require("mx")
local nd, gluon, nn = mx.nd, mx.gluon, mx.gluon.nn
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: sparse_embedding.lua [--categories LIST] [--per-class N] [--epochs N] [--batch-size N]
       [--dim N] [--lr X] [--max-len N] [--devices N] [--seed N] [--min-acc X] [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local bow = dofile(dir .. "_bow.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { categories = "computers,food,love,science,politics,education", per_class = 200,
    epochs = 10, batch_size = 32, dim = 32, lr = 0.02, max_len = 64, devices = 1, seed = 1,
    min_acc = 0 },
  numeric = { per_class = true, epochs = true, batch_size = true, dim = true, lr = true,
    max_len = true, devices = true, seed = true, min_acc = true },
  string = { categories = true }, flags = { quiet = true } })
if opts.devices ~= 1 and opts.devices ~= 2 then cli.die("--devices must be 1 or 2", USAGE) end
mx.random.seed(opts.seed)

local corpus = bow.load_or_exit(opts, true)
local V, C, T = corpus.vocab.size, #corpus.cats, opts.max_len
local PAD = V -- one more row: padding, masked out of the mean

-- a list of samples -> (n, T) ids, (n, T) mask, (n) labels
local function encode(list, a, b)
  local ids, mask, labels = {}, {}, {}
  for i = a, b do
    local row, m = {}, {}
    local toks = list[i].tokens
    for t = 1, T do
      local id = toks[t] and corpus.vocab.ids[toks[t]]
      row[t], m[t] = id or PAD, id and 1 or 0
    end
    ids[#ids + 1], mask[#mask + 1], labels[#labels + 1] = row, m, list[i].label
  end
  return nd.array(ids), nd.array(mask), nd.array(labels)
end

---------------------------------------------------------------- model
local Model = nn.Block:extend("BagOfEmbeddings")
function Model:__init()
  nn.Block.__init(self)
  self.embed = nn.Embedding(V + 1, opts.dim, { sparse_grad = true })
  self.out = nn.Dense(C, { in_units = opts.dim })
end
function Model:forward(ids, mask)
  local e = self.embed(ids) * mask:expand_dims({ axis = 3 })                     -- (n, T, dim)
  local len = nd.maximum(mask:sum({ axis = 2, keepdims = true }), 1)    -- (n, 1)
  return self.out(nd.broadcast_div(e:sum({ axis = 2 }), len))
end

local ctx = opts.devices == 2 and { mx.cpu(0), mx.cpu(1) } or { mx.cpu(0) }
local net = Model()
net:initialize(mx.init.Normal(0.1), ctx)
local w0 = net.embed.weight:data(ctx[1]):copy()
local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr })
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
print(string.format("fortunes %s: %d training / %d held-out quotes, %d words; embedding %d x %d "
  .. "(sparse_grad) on %d device(s)", table.concat(corpus.cats, ","), #corpus.train,
  #corpus.test, V, V + 1, opts.dim, #ctx))

local seen = {} -- the rows any training batch looked up
local nb = math.ceil(#corpus.train / opts.batch_size)
local bar = progress.Bar { total = opts.epochs * nb, title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
for _ = 1, opts.epochs do
  for a = 1, #corpus.train, opts.batch_size do
    local b = math.min(a + opts.batch_size - 1, #corpus.train)
    local ids, mask, y = encode(corpus.train, a, b)
    for _, v in ipairs(ids:reshape({ -1 }):tolist()) do seen[v] = true end
    local xs = gluon.utils.split_and_load(ids, ctx, 1, false)
    local ms = gluon.utils.split_and_load(mask, ctx, 1, false)
    local ys = gluon.utils.split_and_load(y, ctx, 1, false)
    local losses = {}
    mx.autograd.record(function()
      for d = 1, #xs do losses[d] = loss_fn(net(xs[d], ms[d]), ys[d]) end
    end)
    mx.autograd.backward(losses)
    trainer:step(b - a + 1)
    bar:update(1, { { "loss", losses[1]:mean():item() } })
  end
end
bar:finish()
local secs = progress.now() - t0

---------------------------------------------------------------- which rows moved
local w1 = net.embed.weight:data(ctx[1])
local before, after = w0:totable(), w1:totable()
local unseen, unseen_moved, seen_n, seen_moved = 0, 0, 0, 0
for r = 0, V do
  local moved = false
  for j = 1, opts.dim do
    if before[r + 1][j] ~= after[r + 1][j] then moved = true break end
  end
  if seen[r] then
    if r ~= PAD then
      seen_n = seen_n + 1
      if moved then seen_moved = seen_moved + 1 end
    end
  else
    unseen = unseen + 1
    if moved then unseen_moved = unseen_moved + 1 end
  end
end
local same = true
if #ctx == 2 then same = (net.embed.weight:data(ctx[2]):to(ctx[1]) - w1):abs():max():item() == 0 end
print(string.format("rows looked up in training: %d, moved %d; rows never looked up: %d, moved %d%s",
  seen_n, seen_moved, unseen, unseen_moved, #ctx == 2 and (same and "; both devices' copies equal"
  or "; the devices' copies DIFFER") or ""))

local right = 0
for a = 1, #corpus.test, 256 do
  local b = math.min(a + 255, #corpus.test)
  local ids, mask, y = encode(corpus.test, a, b)
  local pred = nd.argmax(net(ids, mask), { axis = 2 }):tolist()
  for i, l in ipairs(y:tolist()) do if pred[i] - 1 == l then right = right + 1 end end
end
local acc = right / #corpus.test
print(string.format("held-out accuracy %.3f over %d quotes (chance %.3f); %d epochs in %.1f s", acc,
  #corpus.test, 1 / C, opts.epochs, secs))
if unseen_moved > 0 or seen_moved < seen_n or not same or unseen == 0 then
  print("sparse update check FAILED")
  os.exit(1)
end
if acc < opts.min_acc then
  print(string.format("accuracy goal %.2f NOT met", opts.min_acc))
  os.exit(1)
end
