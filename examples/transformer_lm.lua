-- examples/transformer_lm.lua — a small character-level transformer language model on
-- Debian's fortunes (the corpus of char_lstm.lua, examples/_text.lua).
--
--   bin/mx examples/transformer_lm.lua                       # train (a few minutes)
--   bin/mx examples/transformer_lm.lua --sample "Q: Why"     # ... then generate
--
-- Model: nn.Embedding(V, --units) -> nn.TransformerEncoder (--layers post-norm
-- TransformerEncoderCells, --heads heads, FFN --ffn, sinusoidal positions, a causal mask:
-- position t attends to positions <= t) -> nn.Dense(V) at every position. Training
-- windows of --context characters start at random offsets of the training text; the
-- loss is the cross-entropy of every next character. Validation: consecutive
-- non-overlapping windows of the held-out text (each predicts its characters from at
-- most --context - 1 before them inside the window). Adam with a linear warm-up over the
-- first 10% of the steps and a cosine decay; gradient norm clipped at --clip.
-- Reports training and validation perplexity per character, writes the curves to --plot
-- (default docs/results/transformer_lm.svg) and exits with status 1 when the final
-- validation perplexity is not below --max-ppl (default 9; the default run reaches 8.03).
--
-- Options: --files LIST|all  --max-chars N (250000)  --steps N (1500)  --eval-every N (250)
--   --context N (64)  --batch-size N (32)  --units N (64)  --ffn N (256)  --heads N (4)
--   --layers N (2)  --dropout X (0.1)  --lr X (0.002)  --clip X (1)  --seed N (42)
--   --max-ppl X  --plot PATH  --params PATH  --sample PROMPT  --sample-len N (200)
--   --temperature X (0.7)  --threads N  --quiet
local mx = require("mx")
local gluon = mx.gluon
local nn = gluon.nn
local nd = mx.nd
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"
local text = dofile(dir .. "_text.lua")

local USAGE = [==[
usage: transformer_lm.lua [--files LIST|all] [--max-chars N] [--steps N] [--eval-every N]
       [--context N] [--batch-size N] [--units N] [--ffn N] [--heads N] [--layers N]
       [--dropout X] [--lr X] [--clip X] [--seed N] [--max-ppl X] [--plot PATH]
       [--params PATH] [--sample PROMPT] [--sample-len N] [--temperature X]
       [--threads N] [--quiet]]==]

local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { files = "fortunes,wisdom,literature,people,humorists,politics,science,"
    .. "computers,work,love", max_chars = 250000, steps = 1500, eval_every = 250, context = 64,
    batch_size = 32, units = 64, ffn = 256, heads = 4, layers = 2, dropout = 0.1, lr = 0.002,
    clip = 1, seed = 42, max_ppl = 9, plot = "docs/results/transformer_lm.svg",
    sample_len = 200, temperature = 0.7 },
  numeric = { max_chars = true, steps = true, eval_every = true, context = true,
    batch_size = true, units = true, ffn = true, heads = true, layers = true, dropout = true,
    lr = true, clip = true, seed = true, max_ppl = true, sample_len = true, temperature = true,
    threads = true },
  string = { files = true, plot = true, params = true, sample = true },
  flags = { quiet = true } })
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)
local t_start = progress.now()

local corpus = text.load { files = opts.files, max_chars = opts.max_chars, seed = opts.seed }
local V = corpus.vocab.size
local C = opts.context

---------------------------------------------------------------- model
local TransformerLM = nn.HybridBlock:extend("TransformerLM")
function TransformerLM:__init(o)
  nn.HybridBlock.__init(self)
  self.embedding = nn.Embedding(V, o.units)
  self.encoder = nn.TransformerEncoder({ num_layers = o.layers, units = o.units,
    hidden_size = o.ffn, num_heads = o.heads, max_length = o.context, dropout = o.dropout })
  self.decoder = nn.Dense(V, { flatten = false, in_units = o.units })
end
-- x (N, T) ids -> logits (N, T, V); each position sees itself and the ones before it
function TransformerLM:forward(x)
  local t = x:shape()[2]
  return self.decoder(self.encoder(self.embedding(x), nn.causal_mask(t)))
end

local net = TransformerLM(opts)
net:initialize(mx.init.Xavier())
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

-- a batch of windows starting at the given (1-based) offsets: inputs and next characters
local function windows(ids, starts)
  local xs, ys = {}, {}
  for b, s in ipairs(starts) do
    local xr, yr = {}, {}
    for i = 1, C do xr[i], yr[i] = ids[s + i - 1], ids[s + i] end
    xs[b], ys[b] = xr, yr
  end
  return nd.array(xs), nd.reshape(nd.array(ys), { -1 })
end

local function evaluate()
  local ids = corpus.valid
  local sum, count = 0, 0
  local starts = {}
  local function flush()
    if #starts == 0 then return end
    local x, y = windows(ids, starts)
    local loss = loss_fn(nd.reshape(net(x), { -1, V }), y)
    sum = sum + loss:sum():item()
    count = count + #starts * C
    starts = {}
  end
  for s = 1, #ids - C, C do
    starts[#starts + 1] = s
    if #starts == 64 then flush() end
  end
  flush()
  return math.exp(sum / count)
end

---------------------------------------------------------------- training
print(string.format("fortunes: %d training / %d validation characters, vocabulary %d",
  #corpus.train, #corpus.valid, V))
print(string.format("transformer LM: %d layers, units %d, %d heads, FFN %d, context %d, "
  .. "dropout %g; batch %d, Adam lr=%g (warm-up + cosine), %d steps", opts.layers, opts.units,
  opts.heads, opts.ffn, C, opts.dropout, opts.batch_size, opts.lr, opts.steps))
local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr })
local params = {}
for _, p in net:collect_params():items() do params[#params + 1] = p end
local warm = math.max(1, math.floor(opts.steps / 10))
local curves = { step = {}, train = {}, valid = {} }
local bar = progress.Bar { total = opts.steps, title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local sum, count, valid_ppl = 0, 0, nil
local n_train = #corpus.train
local per_step = opts.batch_size * C
for step = 1, opts.steps do
  local lr = step <= warm and opts.lr * step / warm
    or opts.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / (opts.steps - warm + 1)))
  trainer:set_learning_rate(lr)
  local starts = {}
  for b = 1, opts.batch_size do starts[b] = math.random(1, n_train - C) end
  local x, y = windows(corpus.train, starts)
  local loss = mx.autograd.record(function()
    return loss_fn(nd.reshape(net(x), { -1, V }), y)
  end)
  loss:backward()
  local grads = {}
  for i = 1, #params do grads[i] = params[i]:grad() end
  gluon.utils.clip_global_norm(grads, opts.clip * per_step)
  trainer:step(per_step)
  sum = sum + loss:sum():item()
  count = count + per_step
  local info = { { "ppl", math.exp(sum / count) } }
  if step % opts.eval_every == 0 or step == opts.steps then
    valid_ppl = evaluate()
    local k = #curves.step + 1
    curves.step[k], curves.train[k], curves.valid[k] = step, math.exp(sum / count), valid_ppl
    sum, count = 0, 0
    info[2] = { "valid-ppl", valid_ppl }
  end
  bar:update(1, info, per_step)
end
local train_time = bar:busy()
bar:finish { { "valid-ppl", valid_ppl } }
mx.viz.plot_curves(opts.plot, {
  title = string.format("char transformer LM on fortunes (%d layers, units %d, context %d)",
    opts.layers, opts.units, C),
  ylabel = "perplexity per character", xlabel = "step",
  series = { { name = "train", values = curves.train, x = curves.step },
    { name = "validation", values = curves.valid, x = curves.step } } })
if opts.params then net:save_parameters(opts.params) end
print(string.format("validation perplexity %.3f (bound %g: %s); training %.1fs (%.0f chars/s), "
  .. "total %.1fs; curves: %s", valid_ppl, opts.max_ppl, valid_ppl < opts.max_ppl and "met"
  or "NOT met", train_time, opts.steps * per_step / train_time, progress.now() - t_start,
  opts.plot))

---------------------------------------------------------------- sampling
if opts.sample then
  local ids = corpus.encode(opts.sample)
  if #ids == 0 then ids = { 0 } end
  local out = {}
  for k = 1, opts.sample_len do
    local from = math.max(1, #ids - C + 1)
    local ctx = {}
    for i = from, #ids do ctx[#ctx + 1] = ids[i] end
    local logits = net(nd.array({ ctx }))
    local last = logits[{ 1, #ctx }]
    local p = nd.softmax(nd.mul_scalar(last, { scalar = 1 / opts.temperature })):totable()
    local r, acc, pick = math.random(), 0, #p
    for j = 1, #p do
      acc = acc + p[j]
      if r <= acc then pick = j break end
    end
    ids[#ids + 1] = pick - 1
    out[k] = pick - 1
  end
  print("---- sample (temperature " .. opts.temperature .. ")")
  print(opts.sample .. corpus.decode(out))
  print("----")
end
if valid_ppl >= opts.max_ppl then os.exit(1) end
