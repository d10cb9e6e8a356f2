-- examples/char_lstm.lua — a character-level LSTM language model on Debian's fortunes.
--
--   bin/mx examples/char_lstm.lua                               # train (a few minutes)
--   bin/mx examples/char_lstm.lua --sample "The meaning of life"  # ... then generate
--   bin/mx examples/char_lstm.lua --load lm.params --sample "Q:" # generate only
--
-- Data: the %-separated quotes of /usr/share/games/fortunes/<--files> (examples/_text.lua),
-- shuffled, 5% of the quotes held out for validation; the training text is cut at
-- --max-chars. Model: nn.Embedding(V, --embed) -> rnn.LSTM(--hidden, --layers, TNC,
-- dropout between layers) -> nn.Dense(V) over every step; truncated back-propagation
-- through time over --bptt steps of --batch-size parallel streams, the states carried
-- from batch to batch (detached); Adam, gradient norm clipped at --clip.
-- After every epoch: training and validation perplexity (exp of the mean cross-entropy
-- per character); the curves go to --plot (default docs/results/char_lstm.svg). The
-- script exits with status 1 when the final validation perplexity is not below
-- --max-ppl (default 7; the default configuration reaches 6.50).
-- --sample PROMPT: after training (or --load), continues PROMPT for --sample-len
-- characters, sampling at --temperature.
--
-- Options: --files LIST (fortunes,wisdom,literature,people,humorists,politics,science,
--   computers,work,love) | all  --max-chars N (250000)  --epochs N (4)  --bptt N (32)
--   --batch-size N (32)  --embed N (32)  --hidden N (128)  --layers N (1)  --dropout X (0)
--   --lr X (0.005)  --clip X (1)  --seed N (42)  --max-ppl X  --plot PATH  --params PATH
--   --load PATH  --sample PROMPT  --sample-len N (300)  --temperature X (0.7)
--   --max-batches N (per epoch; for smoke tests)  --threads N  --quiet
local mx = require("mx")
local gluon = mx.gluon
local nn, rnn = gluon.nn, gluon.rnn
local nd = mx.nd
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"
local text = dofile(dir .. "_text.lua")

local USAGE = [==[
usage: char_lstm.lua [--files LIST|all] [--max-chars N] [--epochs N] [--bptt N]
       [--batch-size N] [--embed N] [--hidden N] [--layers N] [--dropout X] [--lr X]
       [--clip X] [--seed N] [--max-ppl X] [--plot PATH] [--params PATH] [--load PATH]
       [--sample PROMPT] [--sample-len N] [--temperature X] [--max-batches N]
       [--threads N] [--quiet]]==]

local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { files = "fortunes,wisdom,literature,people,humorists,politics,science,"
    .. "computers,work,love", max_chars = 250000, epochs = 4, bptt = 32, batch_size = 32,
    embed = 32, hidden = 128, layers = 1, dropout = 0, lr = 0.005, clip = 1, seed = 42,
    max_ppl = 7, plot = "docs/results/char_lstm.svg", sample_len = 300, temperature = 0.7 },
  numeric = { max_chars = true, epochs = true, bptt = true, batch_size = true, embed = true,
    hidden = true, layers = true, dropout = true, lr = true, clip = true, seed = true,
    max_ppl = true, sample_len = true, temperature = true, max_batches = true, threads = true },
  string = { files = true, plot = true, params = true, load = true, sample = true },
  flags = { quiet = true } })
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)
local t_start = progress.now()

---------------------------------------------------------------- data
local corpus = text.load { files = opts.files, max_chars = opts.max_chars, seed = opts.seed }
local V = corpus.vocab.size

---------------------------------------------------------------- model
local CharLM = nn.HybridBlock:extend("CharLM")
function CharLM:__init(o)
  nn.HybridBlock.__init(self)
  self.embedding = nn.Embedding(V, o.embed)
  self.lstm = rnn.LSTM(o.hidden, o.layers, { dropout = o.dropout, input_size = o.embed })
  self.decoder = nn.Dense(V, { flatten = false, in_units = o.hidden })
end
-- x (T, N) character ids, states {h, c} -> logits (T, N, V), states
function CharLM:forward(x, states)
  local out, s = self.lstm(self.embedding(x), states)
  return self.decoder(out), s
end

local net = CharLM(opts)
net:initialize(mx.init.Xavier())
if opts.load then net:load_parameters(opts.load) end
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

local function detach_all(states)
  local r = {}
  for i = 1, #states do r[i] = states[i]:detach() end
  return r
end

-- mean cross-entropy per character over a stream batchified into n columns
local function evaluate(ids, n)
  local rows, L = text.batchify(ids, n)
  local states = net.lstm:begin_state(n)
  local sum, count = 0, 0
  for t = 1, L - 1, opts.bptt do
    local k = math.min(opts.bptt, L - t)
    local xs, ys = {}, {}
    for i = 1, k do xs[i], ys[i] = rows[t + i - 1], rows[t + i] end
    local logits
    logits, states = net(nd.array(xs), states)
    local loss = loss_fn(nd.reshape(logits, { -1, V }), nd.reshape(nd.array(ys), { -1 }))
    sum = sum + loss:sum():item()
    count = count + k * n
  end
  return sum / count
end

---------------------------------------------------------------- training
local curves = { train = {}, valid = {} }
local valid_ppl
if not opts.load then
  print(string.format("fortunes: %d quotes from %d files; %d training / %d validation "
    .. "characters, vocabulary %d", corpus.quotes, corpus.files, #corpus.train, #corpus.valid, V))
  print(string.format("LSTM LM: embed %d, hidden %d x %d layer(s), dropout %g; bptt %d, "
    .. "batch %d, Adam lr=%g, clip %g, %d epochs", opts.embed, opts.hidden, opts.layers,
    opts.dropout, opts.bptt, opts.batch_size, opts.lr, opts.clip, opts.epochs))
  local trainer = gluon.Trainer(net:collect_params(), "adam", { learning_rate = opts.lr })
  local params = {}
  for _, p in net:collect_params():items() do params[#params + 1] = p end
  local rows, L = text.batchify(corpus.train, opts.batch_size)
  local nb = math.floor((L - 1) / opts.bptt)
  if opts.max_batches then nb = math.min(nb, opts.max_batches) end
  local train_time, chars = 0, 0
  for epoch = 1, opts.epochs do
    local bar = progress.Bar { total = nb, title = string.format("epoch %d/%d", epoch, opts.epochs) }
    if opts.quiet then bar.out = { write = function() end, flush = function() end } end
    local states = net.lstm:begin_state(opts.batch_size)
    local sum, count = 0, 0
    for b = 1, nb do
      local t = (b - 1) * opts.bptt + 1
      local xs, ys = {}, {}
      for i = 1, opts.bptt do xs[i], ys[i] = rows[t + i - 1], rows[t + i] end
      local x, y = nd.array(xs), nd.reshape(nd.array(ys), { -1 })
      states = detach_all(states)
      local loss
      mx.autograd.record(function()
        local logits
        logits, states = net(x, states)
        loss = loss_fn(nd.reshape(logits, { -1, V }), y)
      end)
      loss:backward()
      local grads = {}
      for i = 1, #params do grads[i] = params[i]:grad() end
      -- the loss is summed over bptt*batch characters: clip the per-character gradient
      gluon.utils.clip_global_norm(grads, opts.clip * opts.bptt * opts.batch_size)
      trainer:step(opts.bptt * opts.batch_size)
      local n = opts.bptt * opts.batch_size
      sum = sum + loss:sum():item()
      count = count + n
      bar:update(1, { { "ppl", math.exp(sum / count) } }, n)
    end
    train_time = train_time + bar:busy()
    chars = chars + count
    local vl = evaluate(corpus.valid, 8)
    valid_ppl = math.exp(vl)
    curves.train[epoch], curves.valid[epoch] = math.exp(sum / count), valid_ppl
    bar:finish { { "ppl", math.exp(sum / count) }, { "valid-ppl", valid_ppl } }
  end
  mx.viz.plot_curves(opts.plot, {
    title = string.format("char LSTM on fortunes (hidden %d x %d, bptt %d)", opts.hidden,
      opts.layers, opts.bptt),
    ylabel = "perplexity per character", xlabel = "epoch",
    series = { { name = "train", values = curves.train }, { name = "validation", values = curves.valid } } })
  if opts.params then net:save_parameters(opts.params) end
  print(string.format("validation perplexity %.3f (bound %g: %s); training %.1fs (%.0f chars/s), "
    .. "total %.1fs; curves: %s", valid_ppl, opts.max_ppl, valid_ppl < opts.max_ppl and "met"
    or "NOT met", train_time, chars / train_time, progress.now() - t_start, opts.plot))
end

---------------------------------------------------------------- sampling
-- sample(prompt, n, temperature): feed the prompt, then draw n characters one at a time
local function sample(prompt, n, temperature)
  local ids = corpus.encode(prompt)
  if #ids == 0 then ids = { corpus.vocab.ids[text.EOQ] or 0 } end
  local states = net.lstm:begin_state(1)
  local xs = {}
  for i = 1, #ids do xs[i] = { ids[i] } end
  local logits
  logits, states = net(nd.array(xs), states)
  local out = {}
  local last = logits[#ids] -- (1, V)
  for k = 1, n do
    local p = nd.softmax(nd.mul_scalar(last, { scalar = 1 / temperature })):totable()[1]
    local r, acc, pick = math.random(), 0, #p
    for j = 1, #p do
      acc = acc + p[j]
      if r <= acc then pick = j break end
    end
    out[k] = pick - 1
    logits, states = net(nd.array({ { pick - 1 } }), states)
    last = logits[1]
  end
  return prompt .. corpus.decode(out)
end

if opts.sample then
  print("---- sample (temperature " .. opts.temperature .. ")")
  print(sample(opts.sample, opts.sample_len, opts.temperature))
  print("----")
end
if valid_ppl and valid_ppl >= opts.max_ppl then os.exit(1) end
