-- mx.gluonnlp.embedding.evaluation — intrinsic evaluation of word vectors.
--
-- GluonNLP 0.10's functions on id tensors: CosineSimilarity, ThreeCosAdd,
-- ThreeCosMul, WordEmbeddingSimilarity, WordEmbeddingAnalogy (ids are 0-based rows of
-- idx_to_vec). And the benchmark runners on the standard files (gensim's conventions:
-- case-insensitive, the first restrict_vocab tokens, out-of-vocabulary items skipped):
-- evaluate_word_pairs (WordSim-353 / SimLex-999 .tsv: Pearson and Spearman) and
-- evaluate_word_analogies (questions-words.txt: accuracy per section and in total).
local nd = require("mx.nd")
local U = require("mx.gluonnlp._util")

local M = {}

local function ids_tensor(ids)
  if nd.is_tensor(ids) then return ids end
  return nd.array(ids, { dtype = "int32" })
end

-- the rows of w for 0-based ids (the embedding op's lookup)
local function rows_of(w, ids)
  return nd.embedding(ids_tensor(ids), w)
end

local function normalize_rows(w, eps)
  return (nd.l2_normalization(w, { eps = eps or 1e-10 }))
end

-- CosineSimilarity{eps=1e-10}: sim(x, y) for (B, D) tensors -> (B,)
function M.CosineSimilarity(o)
  local eps = (o and o.eps) or 1e-10
  return function(x, y)
    local xy = nd.sum(x * y, { axis = -1 })
    local nx = nd.sqrt(nd.sum(x * x, { axis = -1 }))
    local ny = nd.sqrt(nd.sum(y * y, { axis = -1 }))
    return xy / (nx * ny + eps)
  end
end

-- WordEmbeddingSimilarity(idx_to_vec, {similarity_function="CosineSimilarity", eps=}):
-- sim(ids1, ids2) -> (B,) similarities of the rows
local WordEmbeddingSimilarity = U.class("WordEmbeddingSimilarity")
M.WordEmbeddingSimilarity = WordEmbeddingSimilarity
function WordEmbeddingSimilarity:__init(idx_to_vec, o)
  o = o or {}
  local fn = o.similarity_function or "CosineSimilarity"
  if fn ~= "CosineSimilarity" then
    error("WordEmbeddingSimilarity: unknown similarity_function '" .. tostring(fn)
      .. "' (valid: CosineSimilarity)", 3)
  end
  self.idx_to_vec = idx_to_vec
  self._sim = M.CosineSimilarity(o)
end
function WordEmbeddingSimilarity:__call(ids1, ids2)
  local a = rows_of(self.idx_to_vec, ids_tensor(ids1))
  local b = rows_of(self.idx_to_vec, ids_tensor(ids2))
  return self._sim(a, b)
end

-- analogy scores (B, N) for questions a : b :: c : ?, the question words excluded
local function exclude(scores, ...)
  local B = scores:shape()[1]
  local p = scores:data_ptr()
  local N = scores:shape()[2]
  for _, ids in ipairs({ ... }) do
    for i = 1, B do p[(i - 1) * N + ids[i]] = -math.huge end
  end
  return scores
end

local function as_list(ids)
  if nd.is_tensor(ids) then return ids:tolist() end
  return ids
end

-- ThreeCosAdd(idx_to_vec, {normalize=true, k=1, exclude_question_words=true}):
-- f(a, b, c) -> (B, k) ids maximising cos(d, b - a + c)
local ThreeCosAdd = U.class("ThreeCosAdd")
M.ThreeCosAdd = ThreeCosAdd
function ThreeCosAdd:__init(idx_to_vec, o)
  o = o or {}
  self.k = o.k or 1
  self.exclude = o.exclude_question_words ~= false
  self.weight = (o.normalize == false) and idx_to_vec or normalize_rows(idx_to_vec, o.eps)
end
function ThreeCosAdd:scores(a, b, c)
  local w = self.weight
  local ta, tb, tc = ids_tensor(a), ids_tensor(b), ids_tensor(c)
  local target = rows_of(w, tb) - rows_of(w, ta) + rows_of(w, tc)
  target = normalize_rows(target)
  local s = nd.dot(target, w, { transpose_b = true })
  if self.exclude then exclude(s, as_list(a), as_list(b), as_list(c)) end
  return s
end
-- topk's positions are 1-based: ids are one less
function ThreeCosAdd:__call(a, b, c)
  return nd.topk(self:scores(a, b, c), { k = self.k, axis = -1, dtype = "int32" }) - 1
end

-- ThreeCosMul(idx_to_vec, {normalize=true, k=1, eps=1e-10, exclude_question_words=true}):
-- f(a, b, c) -> (B, k) ids maximising s(d,b) s(d,c) / (s(d,a) + eps), s = (1 + cos) / 2
local ThreeCosMul = U.class("ThreeCosMul")
M.ThreeCosMul = ThreeCosMul
function ThreeCosMul:__init(idx_to_vec, o)
  o = o or {}
  self.k = o.k or 1
  self.eps = o.eps or 1e-10
  self.exclude = o.exclude_question_words ~= false
  self.weight = (o.normalize == false) and idx_to_vec or normalize_rows(idx_to_vec)
end
function ThreeCosMul:scores(a, b, c)
  local w = self.weight
  local function sim(ids) return (nd.dot(rows_of(w, ids_tensor(ids)), w, { transpose_b = true }) + 1) / 2 end
  local s = sim(b) * sim(c) / (sim(a) + self.eps)
  if self.exclude then exclude(s, as_list(a), as_list(b), as_list(c)) end
  return s
end
ThreeCosMul.__call = ThreeCosAdd.__call

-- WordEmbeddingAnalogy(idx_to_vec, {analogy_function="ThreeCosMul", k=1,
-- exclude_question_words=true}) (GluonNLP's default is ThreeCosMul)
function M.WordEmbeddingAnalogy(idx_to_vec, o)
  o = o or {}
  local fn = o.analogy_function or "ThreeCosMul"
  local cls = M[fn]
  if fn ~= "ThreeCosMul" and fn ~= "ThreeCosAdd" then
    error("WordEmbeddingAnalogy: unknown analogy_function '" .. tostring(fn)
      .. "' (valid: ThreeCosAdd, ThreeCosMul)", 2)
  end
  return cls(idx_to_vec, o)
end

---------------------------------------------------------------- statistics
function M.pearson(x, y)
  local n = #x
  local mx_, my = 0, 0
  for i = 1, n do mx_, my = mx_ + x[i], my + y[i] end
  mx_, my = mx_ / n, my / n
  local sxy, sxx, syy = 0, 0, 0
  for i = 1, n do
    local dx, dy = x[i] - mx_, y[i] - my
    sxy, sxx, syy = sxy + dx * dy, sxx + dx * dx, syy + dy * dy
  end
  return sxy / math.sqrt(sxx * syy)
end

-- ranks 1..n with ties given their average rank (SciPy's rankdata 'average')
local function ranks(x)
  local idx = {}
  for i = 1, #x do idx[i] = i end
  table.sort(idx, function(a, b) if x[a] ~= x[b] then return x[a] < x[b] end return a < b end)
  local r = {}
  local i = 1
  while i <= #idx do
    local j = i
    while j < #idx and x[idx[j + 1]] == x[idx[i]] do j = j + 1 end
    local avg = (i + j) / 2
    for k = i, j do r[idx[k]] = avg end
    i = j + 1
  end
  return r
end

function M.spearman(x, y) return M.pearson(ranks(x), ranks(y)) end

---------------------------------------------------------------- benchmark files
-- the uppercased-token -> id map over the first restrict_vocab tokens; for tokens
-- equal up to case, the earliest (most frequent) wins, as in gensim
local function ok_vocab(emb, restrict, case_insensitive)
  local itt = emb.idx_to_token
  local start = (emb.unknown_token and itt[1] == emb.unknown_token) and 2 or 1
  local last = math.min(#itt, start - 1 + restrict)
  local map = {}
  for i = last, start, -1 do
    local t = itt[i]
    map[case_insensitive and t:upper() or t] = i - 1
  end
  return map, start - 1, last
end

local EVAL_OPTS = { delimiter = true, case_insensitive = true, restrict_vocab = true,
  analogy_function = true, batch_size = true, eps = true }

-- evaluate_word_pairs(emb, path, opts) -> { pearson=, spearman=, pairs=, oov=,
-- oov_ratio= (percent) }: cosine similarity of each pair against the file's score
-- (lines "word1<TAB>word2<TAB>score", '#' comments)
function M.evaluate_word_pairs(emb, path, o)
  o = U.check_opts("evaluate_word_pairs", o, EVAL_OPTS, 2)
  local ci = o.case_insensitive ~= false
  local map = ok_vocab(emb, o.restrict_vocab or 300000, ci)
  local delim = o.delimiter or "\t"
  local f, err = io.open(path, "rb")
  if not f then error("evaluate_word_pairs: cannot open " .. tostring(path) .. ": " .. tostring(err), 2) end
  local gold, a_ids, b_ids, oov = {}, {}, {}, 0
  for line in f:lines() do
    if line ~= "" and line:sub(1, 1) ~= "#" then
      local parts = {}
      local pos = 1
      while true do
        local s, e = line:find(delim, pos, true)
        if not s then parts[#parts + 1] = line:sub(pos) break end
        parts[#parts + 1] = line:sub(pos, s - 1)
        pos = e + 1
      end
      local score = #parts == 3 and tonumber(parts[3]) or nil
      if score then
        local a, b = parts[1], parts[2]
        if ci then a, b = a:upper(), b:upper() end
        local ia, ib = map[a], map[b]
        if ia and ib then
          gold[#gold + 1] = score
          a_ids[#a_ids + 1] = ia
          b_ids[#b_ids + 1] = ib
        else
          oov = oov + 1
        end
      end
    end
  end
  f:close()
  if #gold == 0 then error("evaluate_word_pairs: no pair of " .. path .. " is in the embedding", 2) end
  local sims = M.WordEmbeddingSimilarity(emb.idx_to_vec)(a_ids, b_ids):tolist()
  return { pearson = M.pearson(gold, sims), spearman = M.spearman(gold, sims), pairs = #gold,
    oov = oov, oov_ratio = 100 * oov / (#gold + oov), similarities = sims, gold = gold }
end

-- evaluate_word_analogies(emb, path, opts) -> { accuracy=, correct=, incorrect=, oov=,
-- sections = { {section=, correct=, incorrect=}, ... } }: questions-words.txt
-- (": section" headers, "a b c d" lines), the answer the best-scoring token that is
-- not a question word (3CosAdd by default, as gensim; analogy_function="ThreeCosMul")
function M.evaluate_word_analogies(emb, path, o)
  o = U.check_opts("evaluate_word_analogies", o, EVAL_OPTS, 2)
  local ci = o.case_insensitive ~= false
  local map, first, last = ok_vocab(emb, o.restrict_vocab or 300000, ci)
  local f, err = io.open(path, "rb")
  if not f then error("evaluate_word_analogies: cannot open " .. tostring(path) .. ": " .. tostring(err),
    2) end
  local sections, cur = {}, nil
  local qs = {}
  local oov = 0
  for line in f:lines() do
    if line:sub(1, 2) == ": " then
      cur = { section = line:sub(3):gsub("^%s+", ""):gsub("%s+$", ""), correct = 0, incorrect = 0 }
      sections[#sections + 1] = cur
    elseif line:match("%S") then
      if not cur then error("evaluate_word_analogies: " .. path .. " has a question before any section",
        2) end
      local w = {}
      for word in line:gmatch("%S+") do w[#w + 1] = ci and word:upper() or word end
      if #w == 4 then
        local ia, ib, ic, id = map[w[1]], map[w[2]], map[w[3]], map[w[4]]
        if ia and ib and ic and id then
          qs[#qs + 1] = { ia, ib, ic, w, cur }
        else
          oov = oov + 1
        end
      end
    end
  end
  f:close()
  -- score against the restricted rows only
  local w = emb.idx_to_vec[{ { first + 1, last } }]
  local fn = M.WordEmbeddingAnalogy(w, { analogy_function = o.analogy_function or "ThreeCosAdd",
    exclude_question_words = true, eps = o.eps })
  local bs = o.batch_size or 256
  local itt = emb.idx_to_token
  local topn = 8
  for s = 1, #qs, bs do
    local a, b, c = {}, {}, {}
    local e = math.min(s + bs - 1, #qs)
    for i = s, e do
      a[#a + 1], b[#b + 1], c[#c + 1] = qs[i][1] - first, qs[i][2] - first, qs[i][3] - first
    end
    local top = nd.topk(fn:scores(a, b, c), { k = math.min(topn, last - first), axis = -1, dtype = "int32" })
    local tl = top:tolist()
    local k = top:shape()[2]
    for i = s, e do
      local q = qs[i]
      local words = q[4]
      local ignore = { [words[1]] = true, [words[2]] = true, [words[3]] = true }
      local predicted
      for j = 1, k do
        local t = itt[tl[(i - s) * k + j] + first] -- a 1-based position in the rows used
        predicted = ci and t:upper() or t
        if map[predicted] and not ignore[predicted] then break end
      end
      local sec = q[5]
      if predicted == words[4] then sec.correct = sec.correct + 1 else sec.incorrect = sec.incorrect + 1 end
    end
  end
  local correct, incorrect = 0, 0
  for _, sec in ipairs(sections) do correct, incorrect = correct + sec.correct, incorrect + sec.incorrect end
  return { accuracy = (correct + incorrect) > 0 and correct / (correct + incorrect) or 0,
    correct = correct, incorrect = incorrect, oov = oov, sections = sections }
end

return M
