-- examples/_bow.lua — bag-of-words features of real text for the sparse examples
-- (sparse_linear.lua, factorization_machine.lua, sparse_embedding.lua): the quotes of
-- Debian's `fortunes` categories (/usr/share/games/fortunes/<category>, one file per
-- class), split per class into training and held-out quotes, lower-case word tokens,
-- a vocabulary of the training words seen at least min_count times, and LibSVM files of
-- the quotes' L2-normalised word counts (what gluon.data.LibSVMDataset reads).
--
--   local bow = dofile(dir .. "_bow.lua")
--   local c = bow.load{ categories = "computers,food,love", per_class = 200, seed = 1 }
--   c.train, c.test         -- lists of {tokens = {...}, label = 0-based class}
--   c.vocab.ids[word]       -- 0-based feature ids; c.vocab.size; c.cats
--   local train_path, test_path = bow.write_libsvm(c, work_dir)
local M = {}

M.DIR = "/usr/share/games/fortunes"

local function quotes_of(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local out, cur = {}, {}
  for line in f:lines() do
    if line == "%" then
      if #cur > 0 then out[#out + 1] = table.concat(cur, " ") end
      cur = {}
    else
      cur[#cur + 1] = line
    end
  end
  if #cur > 0 then out[#out + 1] = table.concat(cur, " ") end
  f:close()
  return out
end

-- lower-case words of two or more letters (apostrophes kept inside: don't, it's)
function M.tokens(text)
  local t = {}
  for w in text:lower():gmatch("[a-z][a-z']*[a-z]") do t[#t + 1] = w end
  return t
end

local function shuffle(list)
  for i = #list, 2, -1 do
    local j = math.random(i)
    list[i], list[j] = list[j], list[i]
  end
end

-- load{categories=, per_class=, test_frac=0.2, min_count=2, seed=, all_words=false}:
-- up to per_class quotes of each category (shuffled with seed), test_frac of each held
-- out. The vocabulary: training words seen min_count times (all_words: every word of
-- training and held-out quotes, for a model whose unseen rows must stay untouched).
function M.load(o)
  math.randomseed(o.seed or 1)
  local cats = {}
  for c in o.categories:gmatch("[^,]+") do cats[#cats + 1] = c end
  local train, test = {}, {}
  for id, c in ipairs(cats) do
    local q = quotes_of(M.DIR .. "/" .. c)
    if q == nil or #q == 0 then
      return nil, "no quotes for category " .. c .. " under " .. M.DIR
        .. " (Debian package fortunes)"
    end
    shuffle(q)
    local n = math.min(#q, o.per_class or #q)
    local n_test = math.max(1, math.floor(n * (o.test_frac or 0.2)))
    for i = 1, n do
      local dst = i <= n_test and test or train
      dst[#dst + 1] = { tokens = M.tokens(q[i]), label = id - 1 }
    end
  end
  shuffle(train)
  local counts = {}
  local function count(list)
    for _, s in ipairs(list) do
      for _, w in ipairs(s.tokens) do counts[w] = (counts[w] or 0) + 1 end
    end
  end
  count(train)
  if o.all_words then count(test) end
  local words = {}
  for w, k in pairs(counts) do
    if o.all_words or k >= (o.min_count or 2) then words[#words + 1] = w end
  end
  table.sort(words)
  local ids = {}
  for i, w in ipairs(words) do ids[w] = i - 1 end
  return { train = train, test = test, cats = cats,
    vocab = { words = words, ids = ids, size = #words } }
end

-- One quote's features: {ids (ascending), values (L2-normalised counts)}.
function M.features(tokens, ids)
  local c = {}
  for _, w in ipairs(tokens) do
    local id = ids[w]
    if id then c[id] = (c[id] or 0) + 1 end
  end
  local keys, norm = {}, 0
  for id, k in pairs(c) do keys[#keys + 1] = id norm = norm + k * k end
  table.sort(keys)
  norm = math.sqrt(norm)
  local vals = {}
  for i, id in ipairs(keys) do vals[i] = c[id] / norm end
  return keys, vals
end

-- Write a list of samples as LibSVM text (label id:value ...), atomically.
local function write_file(path, list, ids)
  local tmp = path .. ".tmp"
  local f = assert(io.open(tmp, "w"))
  for _, s in ipairs(list) do
    local keys, vals = M.features(s.tokens, ids)
    local parts = { tostring(s.label) }
    for i, id in ipairs(keys) do parts[i + 1] = string.format("%d:%.6g", id, vals[i]) end
    f:write(table.concat(parts, " "), "\n")
  end
  f:flush()
  f:close()
  assert(os.rename(tmp, path))
end

-- write_libsvm(corpus, dir) -> train path, test path (dir is made when missing)
function M.write_libsvm(c, dir)
  os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  local tr, te = dir .. "/train.libsvm", dir .. "/test.libsvm"
  write_file(tr, c.train, c.vocab.ids)
  write_file(te, c.test, c.vocab.ids)
  return tr, te
end

-- load_or_exit(opts[, all_words]) -> the corpus of opts.categories / per_class / seed
-- (bow.load); an example's start: without the data it says why on stderr and exits with 2
function M.load_or_exit(opts, all_words)
  local c, why = M.load { categories = opts.categories, per_class = opts.per_class,
    seed = opts.seed, all_words = all_words }
  if not c then
    io.stderr:write(why, "\n")
    os.exit(2)
  end
  return c
end

return M
