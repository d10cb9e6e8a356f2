-- examples/word2vec_sgns.lua — word vectors by skip-gram with negative sampling
-- (mx.gluonnlp.model.train.SG) on a real corpus: the Lee background corpus (300 news
-- articles) that gensim ships in its test data (PyPI gensim in the cache, tools/setup.sh
-- --weights), evaluated on WordSim-353 and Google's analogies with
-- nlp.embedding.evaluation, the numbers gensim's Word2Vec gets on the same corpus with
-- the same settings printed beside them (spec/fixtures/sgns_gensim.lua).
--
--   bin/mx examples/word2vec_sgns.lua                  # 40 epochs (gensim's test setting)
--   bin/mx examples/word2vec_sgns.lua --epochs 5
--
-- Tokens: lowercased runs of letters of 2..15 characters (gensim's simple_preprocess);
-- words seen fewer than --min-count times dropped; windows of up to --window words each
-- side (word2vec's random shrinking), frequent words subsampled (--sample), --negatives
-- noise words from the unigram^0.75 distribution. AdaGrad on the mean loss of batches of
-- --batch-size pairs. Writes the vectors as GloVe-style text with --save PATH.
--
-- Options: --epochs N (40)  --dim N (100)  --window N (5)  --negatives N (5)  --min-count N (5)
--   --sample X (1e-3)  --batch-size N (1024)  --lr X (0.1)  --seed N (1)  --save PATH  --threads N
--   --min-spearman X (0.1: exit 1 below it)  --quiet
local mx = require("mx")
local nd = mx.nd
local gluon = mx.gluon
local nlp = require("mx.gluonnlp")
local train = require("mx.gluonnlp.model.train")
local cache = require("mx.gluonnlp._cache")
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: word2vec_sgns.lua [--epochs N] [--dim N] [--window N] [--negatives N] [--min-count N]
       [--sample X] [--batch-size N] [--lr X] [--seed N] [--save PATH] [--min-spearman X]
       [--threads N] [--quiet]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { epochs = 40, dim = 100, window = 5, negatives = 5, min_count = 5, sample = 1e-3,
    batch_size = 1024, lr = 0.1, seed = 1, min_spearman = 0.1 },
  numeric = { epochs = true, dim = true, window = true, negatives = true, min_count = true, sample = true,
    batch_size = true, lr = true, seed = true, min_spearman = true, threads = true },
  string = { save = true }, flags = { quiet = true } })
if opts.threads then mx.set_num_threads(opts.threads) end
mx.random.seed(opts.seed)

local D, why = cache.path("gensim-4.4.0", "gensim/test/test_data/lee_background.cor")
if not D then
  io.stderr:write(why, "\n")
  os.exit(2)
end
local TD = D:gsub("lee_background.cor$", "")

---------------------------------------------------------------- corpus and vocabulary
local docs = {}
for line in io.lines(D) do
  local toks = {}
  for w in line:lower():gmatch("%a+") do if #w >= 2 and #w <= 15 then toks[#toks + 1] = w end end
  docs[#docs + 1] = toks
end
local flat = {}
for _, d in ipairs(docs) do for _, w in ipairs(d) do flat[#flat + 1] = w end end
local counter = nlp.data.count_tokens(flat)
local vocab = nlp.Vocab(counter, { min_freq = opts.min_count, unknown_token = false, padding_token = false,
  bos_token = false, eos_token = false })
local counts = {}
for i, w in ipairs(vocab.idx_to_token) do counts[i] = counter[w] end
local sentences, n_tok = {}, 0
for _, d in ipairs(docs) do
  local s = {}
  for _, w in ipairs(d) do
    local id = vocab.token_to_idx[w]
    if id then s[#s + 1] = id end
  end
  sentences[#sentences + 1] = s
  n_tok = n_tok + #s
end
print(string.format("Lee corpus: %d documents, %d tokens in a vocabulary of %d (min count %d)", #docs, n_tok,
  vocab:size(), opts.min_count))

---------------------------------------------------------------- training
local sg = train.SG(vocab:size(), opts.dim)
sg:initialize()
local sampler = train.UnigramCandidateSampler(counts, { seed = opts.seed })
local trainer = gluon.Trainer(sg:collect_params(), "adagrad", { learning_rate = opts.lr })
local bar = progress.Bar { total = opts.epochs, title = "skip-gram" }
if opts.quiet then bar.out = { write = function() end, flush = function() end } end
local t0 = progress.now()
local pairs_seen = 0
for epoch = 1, opts.epochs do
  local sum, n = 0, 0
  for centers, contexts in train.skipgram_batches(sentences, counts, { window = opts.window,
      subsample = opts.sample, batch_size = opts.batch_size, seed = opts.seed * 1000 + epoch }) do
    local c = nd.array(centers, { dtype = "int32" })
    local x = nd.array(contexts, { dtype = "int32" })
    local neg = nd.reshape(sampler:draw(#centers * opts.negatives), { #centers, opts.negatives })
    local loss = mx.autograd.record(function() return sg(c, x, neg) end)
    loss:backward()
    trainer:step(#centers)
    sum, n = sum + loss:sum():item(), n + #centers
  end
  pairs_seen = pairs_seen + n
  bar:update(epoch, { { "loss", sum / n } })
end
bar:finish()
local secs = progress.now() - t0

---------------------------------------------------------------- evaluation
local emb = nlp.embedding.TokenEmbedding({ idx_to_token = vocab.idx_to_token,
  idx_to_vec = sg.embedding.weight:data(), unknown_token = false })
local ev = nlp.embedding.evaluation
local sim = ev.evaluate_word_pairs(emb, TD .. "wordsim353.tsv")
local ana = ev.evaluate_word_analogies(emb, TD .. "questions-words.txt")
print(string.format("trained %d epochs in %.1f s (%.0f pairs/s)", opts.epochs, secs, pairs_seen / secs))
print(string.format("WordSim-353: Spearman %.3f, Pearson %.3f over %d pairs (%.0f%% out of vocabulary)",
  sim.spearman, sim.pearson, sim.pairs, sim.oov_ratio))
print(string.format("analogies: %d / %d right (%.3f)", ana.correct, ana.correct + ana.incorrect,
  ana.accuracy))
local okr, ref = pcall(dofile, "spec/fixtures/sgns_gensim.lua")
if okr and ref[opts.epochs] then
  local r = ref[opts.epochs]
  print(string.format("gensim Word2Vec, same corpus and settings (%d epochs): Spearman %.3f, Pearson %.3f, "
    .. "analogies %.3f", opts.epochs, r.spearman, r.pearson, r.accuracy))
end
for _, w in ipairs({ "government", "australia", "police", "fire" }) do
  local id = vocab.token_to_idx[w]
  if id then
    local v = emb.idx_to_vec
    local s = nd.dot(nd.l2_normalization(v), nd.reshape(nd.l2_normalization(v[id + 1]:reshape({ 1,
      -1 })), { -1 }))
    local sc = s:tolist()
    local order = {}
    for i = 1, #sc do order[i] = i end
    table.sort(order, function(a, b) return sc[a] > sc[b] end)
    local near = {}
    for r = 2, 6 do near[#near + 1] = vocab.idx_to_token[order[r]] end
    print(string.format("  nearest to %-11s %s", w .. ":", table.concat(near, ", ")))
  end
end
if opts.save then emb:save_text(opts.save) end
if sim.spearman < opts.min_spearman then
  print(string.format("Spearman goal %.2f NOT met", opts.min_spearman))
  os.exit(1)
end
