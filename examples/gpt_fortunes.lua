-- examples/gpt_fortunes.lua — a small GPT-2 (mx.gluonnlp's GPT2Model) trained on Debian's
-- fortunes, tokenized with GPT-2's byte-level BPE (openai-whisper's gpt2.tiktoken from
-- the PyPI cache, tools/setup.sh --weights); perplexity on held-out quotes, then samples
-- decoded with the key/value cache (top-p sampling, and beam search).
--
--   bin/mx examples/gpt_fortunes.lua                     # train (a few minutes), sample
--   bin/mx examples/gpt_fortunes.lua --steps 200 --files fortunes   # quicker
--
-- The output layer covers the BPE tokens that occur in the training quotes (ids remapped
-- to 0..K-1, <|endoftext|> ends each quote): the tokenization is GPT-2's, the softmax is
-- not 50257 wide. Windows of --context tokens at random offsets of the token stream;
-- Adam with warm-up and cosine decay. Reports validation perplexity per BPE token (and
-- per character) and exits with status 1 when it is not below --max-ppl.
--
-- Options: --files LIST|all (fortunes,wisdom,literature,people,humorists,science,work)
--   --steps N (1500)  --context N (64)  --batch-size N (16)  --units N (128)  --layers N (4)
--   --heads N (4)  --dropout X (0.1)  --lr X (0.003)  --seed N (42)  --max-ppl X (200)
--   --sample PROMPT ("The")  --sample-len N (40)  --top-p X (0.9)  --temperature X (0.8)
--   --threads N  --quiet
local mx = require("mx")
local nd = mx.nd
local gluon = mx.gluon
local nlp = require("mx.gluonnlp")
local gpt2 = require("mx.gluonnlp.model.gpt2")
local dutils = require("mx.gluonnlp.data.utils")
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: gpt_fortunes.lua [--files LIST|all] [--steps N] [--context N] [--batch-size N] [--units N]
       [--layers N] [--heads N] [--dropout X] [--lr X] [--seed N] [--max-ppl X] [--sample PROMPT]
       [--sample-len N] [--top-p X] [--temperature X] [--threads N] [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { files = "fortunes,wisdom,literature,people,humorists,science,work", steps = 1500,
    context = 64, batch_size = 16, units = 128, layers = 4, heads = 4, dropout = 0.1, lr = 0.003,
    seed = 42, max_ppl = 200, sample = "The", sample_len = 40, top_p = 0.9, temperature = 0.8 },
  numeric = { steps = true, context = true, batch_size = true, units = true, layers = true, heads = true,
    dropout = true, lr = true, seed = true, max_ppl = true, sample_len = true, top_p = true,
    temperature = true, threads = true },
  string = { files = true, sample = true }, flags = { quiet = true } })
if opts.threads then mx.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)

---------------------------------------------------------------- data
local ok, tok = pcall(nlp.data.GPT2BPETokenizer)
if not ok then
  io.stderr:write(tostring(tok), "\n")
  os.exit(2)
end
local all = assert(dutils.fortunes())
local want = {}
for n in opts.files:gmatch("[^,]+") do want[n] = true end
local quotes = {}
for _, q in ipairs(all) do
  if opts.files == "all" or want[q.category] then quotes[#quotes + 1] = q.text end
end
for i = #quotes, 2, -1 do
  local j = math.random(i)
  quotes[i], quotes[j] = quotes[j], quotes[i]
end
local n_valid = math.max(1, math.floor(#quotes / 20))
local EOT = tok.eos_id
-- the compact vocabulary: BPE ids seen in training, in first-seen order
local to_k, from_k = { [EOT] = 0 }, { [0] = EOT }
local function stream(list, a, b, grow)
  local s, chars = {}, 0
  for i = a, b do
    local ids = tok:encode(list[i])
    chars = chars + #list[i] + 1
    for _, id in ipairs(ids) do
      local k = to_k[id]
      if k == nil and grow then
        k = #from_k + 1
        to_k[id], from_k[k] = k, id
      end
      s[#s + 1] = k or -1 -- -1: a token unseen in training (scored as a miss below)
    end
    s[#s + 1] = 0
  end
  return s, chars
end
local train = stream(quotes, n_valid + 1, #quotes, true)
local valid, valid_chars = stream(quotes, 1, n_valid, false)
local K = #from_k + 1
local C = opts.context

local model = nlp.model.GPT2Model({ units = opts.units, vocab_size = K, max_length = C,
  num_layers = opts.layers, num_heads = opts.heads, dropout = opts.dropout })
model:initialize(mx.init.Normal(0.02))
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
print(string.format("fortunes: %d quotes (%d held out), %d training / %d validation BPE tokens, "
  .. "%d distinct tokens; GPT %d layers, units %d, %d heads, context %d", #quotes, n_valid, #train,
  #valid, K, opts.layers, opts.units, opts.heads, C))

local function windows(ids, starts)
  local xs, ys = {}, {}
  for b, s in ipairs(starts) do
    for i = 1, C do
      xs[(b - 1) * C + i] = math.max(ids[s + i - 1], 0)
      ys[(b - 1) * C + i] = ids[s + i]
    end
  end
  return nd.array(xs, { dtype = "int32" }):reshape({ #starts, C }), ys
end

-- validation: consecutive windows; a token unseen in training (the model cannot produce
-- it) is scored at probability 1/K, and read as <|endoftext|> when it is an input
local function evaluate()
  mx.autograd.set_training(false)
  local nll, n = 0, 0
  local starts = {}
  local function flush()
    if #starts == 0 then return end
    local x, ys = windows(valid, starts)
    local lp = nd.log_softmax(model(x), { axis = -1 }):tolist()
    for i, y in ipairs(ys) do
      nll = nll - (y >= 0 and lp[(i - 1) * K + y + 1] or math.log(1 / K))
      n = n + 1
    end
    starts = {}
  end
  for s = 1, #valid - C, C do
    starts[#starts + 1] = s
    if #starts == 32 then flush() end
  end
  flush()
  mx.autograd.set_training(true)
  return math.exp(nll / n), nll / valid_chars
end

---------------------------------------------------------------- training
local trainer = gluon.Trainer(model:collect_params(), "adam", { learning_rate = opts.lr })
local warm = math.max(1, math.floor(opts.steps / 10))
local bar = progress.Bar { total = opts.steps, title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
local sum, cnt = 0, 0
for step = 1, opts.steps do
  trainer:set_learning_rate(step <= warm and opts.lr * step / warm
    or opts.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / (opts.steps - warm + 1))))
  local starts = {}
  for b = 1, opts.batch_size do starts[b] = math.random(1, #train - C) end
  local x, ys = windows(train, starts)
  local y = nd.array(ys)
  local loss = mx.autograd.record(function()
    local logits = model(x)
    return loss_fn(nd.reshape(logits, { -1, K }), y)
  end)
  loss:backward()
  trainer:step(#ys)
  sum, cnt = sum + loss:sum():item(), cnt + #ys
  if step % 25 == 0 or step == opts.steps then
    bar:update(step, { { "ppl", math.exp(sum / cnt) } })
    sum, cnt = 0, 0
  end
end
bar:finish()
local secs = progress.now() - t0
local ppl, bpc = evaluate()
print(string.format("validation perplexity %.1f per BPE token (%.3f nats per character); "
  .. "training %.1f s, %.0f tokens/s", ppl, bpc, secs, opts.steps * opts.batch_size * C / secs))

---------------------------------------------------------------- samples
mx.autograd.set_training(false)
local prompt = {}
for _, id in ipairs(tok:encode(opts.sample)) do
  local k = to_k[id]
  if k then prompt[#prompt + 1] = k end
end
if #prompt == 0 then prompt = { 0 } end
local function text_of(ks)
  local ids = {}
  for _, k in ipairs(ks) do if k > 0 then ids[#ids + 1] = from_k[k] end end
  return tok:decode(ids)
end
for i = 1, 3 do
  local out = gpt2.generate(model, { prompt }, { max_new_tokens = math.min(opts.sample_len, C - #prompt),
    top_p = opts.top_p, temperature = opts.temperature, eos_id = 0, seed = opts.seed + i })
  print(string.format("sample %d (top-p %.2f, temperature %.2f): %s", i, opts.top_p, opts.temperature,
    text_of(out[1])))
end
local beam = gpt2.generate(model, { prompt }, { max_new_tokens = math.min(opts.sample_len, C - #prompt),
  beam_size = 4, eos_id = 0 })
print("beam search (4): " .. text_of(beam[1]))
if ppl >= opts.max_ppl then
  print(string.format("perplexity goal %.1f NOT met", opts.max_ppl))
  os.exit(1)
end
