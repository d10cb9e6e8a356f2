-- examples/lstm_bucketing.lua — MXNet 1.x's bucketing LSTM language model
-- (example/rnn/bucketing/lstm_bucketing.py) on the words of Debian's fortunes: sentences
-- encoded by mx.rnn.encode_sentences, batched per length by mx.rnn.BucketSentenceIter,
-- a stack of mx.rnn.LSTMCell unrolled for each bucket length by sym_gen, trained by
-- mx.mod.BucketingModule.fit with Perplexity (padding ignored) and the Speedometer.
--
--   bin/mx examples/lstm_bucketing.lua                       # 2 layers of 200, 5 epochs
--   bin/mx examples/lstm_bucketing.lua --num-layers 1 --num-hidden 64 --epochs 2
--
-- Data: every line of the quotes under /usr/share/games/fortunes/<--files> is a sentence
-- of lower-case words (examples/_text.lua); 10% of them (at most --max-valid) for
-- validation; words not seen in training read as <unk>. The lines are MXNet's
-- ("Epoch[0] Batch [0-50]\tSpeed: ...\tperplexity=...", "Epoch[0] Train-perplexity=...",
-- "Epoch[0] Validation-perplexity=..."). The script exits with status 1 when the last
-- validation perplexity is not below --max-ppl (default: the vocabulary size, a uniform
-- guess).
--
-- Options: --files LIST|all (all)  --max-sentences N (20000)  --max-valid N (2000)
--   --buckets LIST (10,20,30,40,50,60)  --num-layers N (2)  --num-hidden N (200)
--   --num-embed N (200)  --epochs N (5)  --lr X (0.01)  --optimizer sgd|adam (sgd)
--   --mom X (0)  --wd X (0.00001)  --batch-size N (32)  --disp-batches N (50)
--   --max-ppl X  --seed N (42)  --threads N
local mx = require("mx")
local dir = arg[0]:match("^(.*[/\\])") or "./"
local text = dofile(dir .. "_text.lua")

local USAGE = [==[
usage: lstm_bucketing.lua [--files LIST|all] [--max-sentences N] [--max-valid N] [--buckets LIST]
       [--num-layers N] [--num-hidden N] [--num-embed N] [--epochs N] [--lr X]
       [--optimizer sgd|adam] [--mom X] [--wd X] [--batch-size N] [--disp-batches N]
       [--max-ppl X] [--seed N] [--threads N]]==]

local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { files = "all", max_sentences = 20000, max_valid = 2000, buckets = "10,20,30,40,50,60",
    num_layers = 2, num_hidden = 200, num_embed = 200, epochs = 5, lr = 0.01, optimizer = "sgd",
    mom = 0, wd = 1e-5, batch_size = 32, disp_batches = 50, seed = 42 },
  numeric = { max_sentences = true, max_valid = true, num_layers = true, num_hidden = true,
    num_embed = true, epochs = true, lr = true, mom = true, wd = true, batch_size = true,
    disp_batches = true, max_ppl = true, seed = true, threads = true },
  string = { files = true, buckets = true, optimizer = true },
  choices = { optimizer = { "sgd", "adam" } } })
if opts.threads then mx.engine.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)

local buckets = {}
for b in opts.buckets:gmatch("[^,]+") do
  local n = tonumber(b)
  if not n or n < 1 or n % 1 ~= 0 then cli.die("--buckets must be positive integers, got " .. b, USAGE) end
  buckets[#buckets + 1] = n
end

---------------------------------------------------------------- data (tokenize_text)
local invalid_label, start_label = 0, 1
local train_words, valid_words = text.word_sentences { files = opts.files,
  max_sentences = opts.max_sentences, max_valid = opts.max_valid, seed = opts.seed }
local train_sent, vocab = mx.rnn.encode_sentences(train_words, nil, invalid_label, "\n", start_label)
local vocab_size = 0
for _, id in pairs(vocab) do vocab_size = math.max(vocab_size, id) end
vocab["<unk>"] = vocab_size + 1
vocab_size = vocab_size + 2 -- the ids 0 (padding) .. the <unk> id
local val_sent = mx.rnn.encode_sentences(valid_words, vocab, invalid_label, "\n", start_label, "<unk>")

local data_train = mx.rnn.BucketSentenceIter(train_sent, opts.batch_size,
  { buckets = buckets, invalid_label = invalid_label })
local data_val = mx.rnn.BucketSentenceIter(val_sent, opts.batch_size,
  { buckets = buckets, invalid_label = invalid_label })

---------------------------------------------------------------- the model
local stack = mx.rnn.SequentialRNNCell()
for i = 0, opts.num_layers - 1 do
  stack:add(mx.rnn.LSTMCell(opts.num_hidden, { prefix = string.format("lstm_l%d_", i) }))
end

local function sym_gen(seq_len)
  local data = mx.sym.Variable("data")
  local label = mx.sym.Variable("softmax_label")
  local embed = mx.sym.Embedding(data, { input_dim = vocab_size, output_dim = opts.num_embed,
    name = "embed" })
  stack:reset()
  local outputs = stack:unroll(seq_len, embed, { merge_outputs = true })
  local pred = mx.sym.Reshape(outputs, { shape = { -1, opts.num_hidden } })
  pred = mx.sym.FullyConnected(pred, { num_hidden = vocab_size, name = "pred" })
  label = mx.sym.Reshape(label, { shape = { -1 } })
  pred = mx.sym.SoftmaxOutput(pred, label, { name = "softmax" })
  return pred, { "data" }, { "softmax_label" }
end

print(string.format("fortunes (%s): %d training / %d validation sentences, vocabulary %d; "
  .. "%d x LSTM(%d), embed %d, buckets %s, batch %d, %s lr=%g", opts.files, #train_sent, #val_sent,
  vocab_size, opts.num_layers, opts.num_hidden, opts.num_embed, opts.buckets, opts.batch_size,
  opts.optimizer, opts.lr))

local log = function(line) print(line) end
local model = mx.mod.BucketingModule(sym_gen, data_train.default_bucket_key, { context = mx.cpu(),
  logger = log })
local metric = mx.metric.Perplexity(invalid_label)
local optimizer_params = { learning_rate = opts.lr, wd = opts.wd }
if opts.optimizer == "sgd" then optimizer_params.momentum = opts.mom end
model:fit(data_train, {
  eval_data = data_val,
  eval_metric = metric,
  kvstore = "local",
  optimizer = opts.optimizer,
  optimizer_params = optimizer_params,
  initializer = mx.init.Xavier { factor_type = "in", magnitude = 2.34 },
  num_epoch = opts.epochs,
  batch_end_callback = mx.callback.Speedometer(opts.batch_size, opts.disp_batches, false),
})

local ppl = model:score(data_val, metric)[1][2]
local bound = opts.max_ppl or vocab_size
local met = ppl < bound -- (false for NaN)
print(string.format("validation perplexity %.2f (bound %g: %s)", ppl, bound, met and "met" or "NOT met"))
if not met then os.exit(1) end
