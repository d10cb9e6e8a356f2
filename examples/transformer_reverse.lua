-- examples/transformer_reverse.lua — a transformer encoder-decoder (mx.gluonnlp's NMTModel)
-- learns to spell real English words backwards (Debian's wamerican word list), decoded
-- with beam search: a task whose answer is known for every word.
--
--   bin/mx examples/transformer_reverse.lua             # train, then report exact-match
--   bin/mx examples/transformer_reverse.lua --steps 300 --max-words 2000   # a quick run
--
-- Words of 3..--max-len lowercase letters, shuffled with --seed; 500 held out. Source:
-- the letters; target: bos, the letters reversed, eos. Adam with warm-up and cosine
-- decay, padded positions masked out of the loss. Reports the held-out exact-match
-- accuracy with beam search (--beam) and greedy decoding, prints examples, and exits
-- with status 1 when the beam accuracy is below --min-acc (default 0.9).
--
-- Options: --steps N (2500)  --batch-size N (64)  --units N (64)  --ffn N (256)
--   --heads N (4)  --layers N (2)  --dropout X (0.1)  --lr X (0.002)  --beam N (4)
--   --max-len N (10)  --max-words N  --seed N (7)  --min-acc X (0.9)  --threads N  --quiet
local mx = require("mx")
local gluon = mx.gluon
local nd = mx.nd
local T = require("mx.gluonnlp.model.transformer")
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: transformer_reverse.lua [--steps N] [--batch-size N] [--units N] [--ffn N] [--heads N]
       [--layers N] [--dropout X] [--lr X] [--beam N] [--max-len N] [--max-words N]
       [--seed N] [--min-acc X] [--threads N] [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { steps = 2500, batch_size = 64, units = 64, ffn = 256, heads = 4, layers = 2,
    dropout = 0.1, lr = 0.002, beam = 4, max_len = 10, seed = 7, min_acc = 0.9 },
  numeric = { steps = true, batch_size = true, units = true, ffn = true, heads = true, layers = true,
    dropout = true, lr = true, beam = true, max_len = true, max_words = true, seed = true,
    min_acc = true, threads = true },
  flags = { quiet = true } })
if opts.threads then mx.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)
math.randomseed(opts.seed)

---------------------------------------------------------------- data
local PAD, BOS, EOS = 0, 1, 2
local V = 3 + 26
local DICT = "/usr/share/dict/american-english"
local f = io.open(DICT, "rb")
if not f then
  io.stderr:write("no word list at ", DICT, " (Debian package wamerican)\n")
  os.exit(2)
end
local words, seen = {}, {}
for w in f:lines() do
  if #w >= 3 and #w <= opts.max_len and w:match("^[a-z]+$") and not seen[w] then
    seen[w] = true
    words[#words + 1] = w
  end
end
f:close()
for i = #words, 2, -1 do
  local j = math.random(i)
  words[i], words[j] = words[j], words[i]
end
if opts.max_words and #words > opts.max_words then
  for i = #words, opts.max_words + 1, -1 do words[i] = nil end
end
local held = {}
for i = 1, 500 do held[i] = table.remove(words) end

local function ids(w) local t = {} for i = 1, #w do t[i] = w:byte(i) - 94 end return t end -- 'a' -> 3
local function word(t) local c = {} for i = 1,
  #t do c[i] = string.char(t[i] + 94) end return table.concat(c) end

-- a batch: src (N, S), src_len (N), tgt_in (N, T) = bos + reversed, tgt_out = reversed +
-- eos, weights (N, T): 1 on real positions
local function batch(list)
  local S, Tn = 0, 0
  for _, w in ipairs(list) do S = math.max(S, #w) Tn = math.max(Tn, #w + 1) end
  local src, len, tin, tout, wt = {}, {}, {}, {}, {}
  for b, w in ipairs(list) do
    local c = ids(w)
    len[b] = #c
    for i = 1, S do src[(b - 1) * S + i] = c[i] or PAD end
    for i = 1, Tn do
      local r = c[#c - i + 2] -- reversed, shifted by bos
      tin[(b - 1) * Tn + i] = i == 1 and BOS or (r or PAD)
      local o = c[#c - i + 1]
      tout[(b - 1) * Tn + i] = o or (i == #c + 1 and EOS or PAD)
      wt[(b - 1) * Tn + i] = i <= #c + 1 and 1 or 0
    end
  end
  local n = #list
  return nd.array(src, { dtype = "int32" }):reshape({ n, S }), nd.array(len, { dtype = "int32" }),
    nd.array(tin, { dtype = "int32" }):reshape({ n, Tn }), nd.array(tout):reshape({ n * Tn }),
    nd.array(wt):reshape({ n * Tn, 1 })
end

---------------------------------------------------------------- model and training
local model = T.NMTModel({ src_vocab_size = V, tgt_vocab_size = V, units = opts.units,
  hidden_size = opts.ffn, num_layers = opts.layers, num_heads = opts.heads, dropout = opts.dropout,
  max_src_length = opts.max_len + 2, max_tgt_length = opts.max_len + 2 })
model:initialize(mx.init.Xavier())
local loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
local trainer = gluon.Trainer(model:collect_params(), "adam", { learning_rate = opts.lr })
print(string.format("reversing %d words (%d held out), letters a-z; transformer %d+%d layers, units %d, "
  .. "%d heads, FFN %d; batch %d, %d steps", #words, #held, opts.layers, opts.layers, opts.units,
  opts.heads, opts.ffn, opts.batch_size, opts.steps))
local warm = math.max(1, math.floor(opts.steps / 10))
local bar = progress.Bar { total = opts.steps, title = "training" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
local sum, cnt = 0, 0
for step = 1, opts.steps do
  local lr = step <= warm and opts.lr * step / warm
    or opts.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / (opts.steps - warm + 1)))
  trainer:set_learning_rate(lr)
  local list = {}
  for b = 1, opts.batch_size do list[b] = words[math.random(#words)] end
  local src, len, tin, tout, wt = batch(list)
  local ntok = wt:sum():item()
  local loss = mx.autograd.record(function()
    local logits = model(src, tin, len)
    return loss_fn(nd.reshape(logits, { -1, V }), tout, wt)
  end)
  loss:backward()
  trainer:step(ntok)
  sum, cnt = sum + loss:sum():item(), cnt + ntok
  if step % 50 == 0 or step == opts.steps then
    bar:update(step, { { "loss", sum / cnt } })
    sum, cnt = 0, 0
  end
end
bar:finish()
local train_time = progress.now() - t0

---------------------------------------------------------------- evaluation
local function decode(beam)
  local tr = T.BeamSearchTranslator(model, { beam_size = beam, max_length = opts.max_len + 2, bos_id = BOS,
    eos_id = EOS })
  local right, shown = 0, 0
  for a = 1, #held, 100 do
    local list = {}
    for i = a, math.min(a + 99, #held) do list[#list + 1] = held[i] end
    local src, len = batch(list)
    local samples, _, valid = tr:translate(src, len)
    local sl, vl = samples:tolist(), valid:tolist()
    local L, K = samples:shape()[3], samples:shape()[2]
    for b, w in ipairs(list) do
      local out = {}
      for t = 2, vl[(b - 1) * K + 1] - 1 do out[#out + 1] = sl[((b - 1) * K) * L + t] end
      local got = word(out)
      if got == w:reverse() then right = right + 1 end
      if beam > 1 and shown < 8 then
        print(string.format("  %-12s -> %-12s %s", w, got, got == w:reverse() and "" or "(wrong)"))
        shown = shown + 1
      end
    end
  end
  return right / #held
end
mx.autograd.set_training(false)
local acc_beam = decode(opts.beam)
local acc_greedy = decode(1)
print(string.format("held-out exact match: beam %d %.3f, greedy %.3f (training %.1f s, %.1f ms a step)",
  opts.beam, acc_beam, acc_greedy, train_time, 1000 * train_time / opts.steps))
if acc_beam < opts.min_acc then
  print(string.format("exact-match goal %.2f NOT met", opts.min_acc))
  os.exit(1)
end
