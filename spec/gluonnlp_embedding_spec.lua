-- mx.gluonnlp.embedding: TokenEmbedding from word2vec/fastText text, word2vec binary
-- and GloVe files (gensim's test data, PyPI gensim via tools/setup.sh --weights), and
-- evaluation on WordSim-353 / questions-words against gensim's KeyedVectors
-- (spec/fixtures/embedding_ref.lua, made by tools/fixtures/make_embedding_fixture.py).
local mx = require("mx")
local nlp = require("mx.gluonnlp")
local cache = require("mx.gluonnlp._cache")
local REF = dofile("spec/fixtures/embedding_ref.lua")

local D = cache.path("gensim-4.4.0", "gensim/test/test_data/wordsim353.tsv")
D = D and D:gsub("wordsim353.tsv$", "")
local TE = nlp.embedding.TokenEmbedding
local ev = nlp.embedding.evaluation

local function have()
  if D then return true end
  pending("gensim's test data not in the PyPI cache (tools/setup.sh --weights)")
  return false
end

local function check_vectors(emb, ref)
  assert.equal(ref.n + 1, emb:size()) -- + <unk> at id 0
  assert.equal(ref.dim, emb:dim())
  assert.equal("<unk>", emb.idx_to_token[1])
  for i, w in ipairs(ref.first) do assert.equal(w, emb.idx_to_token[i + 1]) end
  local v = emb:get_vecs_by_tokens(ref.first[1]):tolist()
  for k = 1, #ref.vec1 do assert.near(ref.vec1[k], v[k], 1e-7) end
  local last = emb:get_vecs_by_tokens(emb.idx_to_token[emb:size()]):tolist()
  for k = 1, #ref.vec_last do assert.near(ref.vec_last[k], last[k], 1e-7) end
  assert.same(mx.nd.zeros({ ref.dim }):tolist(), emb:get_vecs_by_tokens("no-such-word-here"):tolist())
end

local function check_bench(emb, ref)
  local p = ev.evaluate_word_pairs(emb, D .. "wordsim353.tsv")
  assert.near(ref.pearson, p.pearson, 1e-5)
  assert.near(ref.spearman, p.spearman, 1e-5)
  assert.near(ref.oov_ratio, p.oov_ratio, 1e-9)
  local a = ev.evaluate_word_analogies(emb, D .. "questions-words.txt")
  assert.equal(ref.correct, a.correct)
  assert.equal(ref.incorrect, a.incorrect)
  for i, s in ipairs(ref.sections) do
    assert.same(s, { a.sections[i].section, a.sections[i].correct, a.sections[i].incorrect })
  end
  -- 3CosMul answers, gensim's most_similar_cosmul (eps 1e-6)
  local mul = ev.ThreeCosMul(emb.idx_to_vec, { eps = 1e-6 })
  local A, B, Cc = {}, {}, {}
  for i, q in ipairs(ref.cosmul) do
    A[i], B[i], Cc[i] = emb.token_to_idx[q[1]], emb.token_to_idx[q[2]], emb.token_to_idx[q[3]]
  end
  if #A > 0 then
    local top = mul(A, B, Cc):tolist()
    for i, q in ipairs(ref.cosmul) do assert.equal(q[4], emb.idx_to_token[top[i] + 1], table.concat(q,
      " ")) end
  end
end

describe("gluonnlp.embedding.TokenEmbedding", function()
  it("reads a fastText .vec file and evaluates as gensim does", function()
    if not have() then return end
    local emb = TE.from_file(D .. "lee_fasttext.vec")
    check_vectors(emb, REF.fasttext_vec)
    check_bench(emb, REF.fasttext_vec)
  end)

  it("reads a word2vec binary file and evaluates as gensim does", function()
    if not have() then return end
    local emb = TE.from_w2v_binary(D .. "euclidean_vectors.bin")
    check_vectors(emb, REF.w2v_bin)
    check_bench(emb, REF.w2v_bin)
  end)

  it("reads GloVe text (no header), attaches to a Vocab, round-trips as text", function()
    if not have() then return end
    local emb = TE.from_file(D .. "test_glove.txt")
    check_vectors(emb, REF.glove)
    local vocab = nlp.Vocab(nlp.data.count_tokens({ "the", "the", "of", "zzzz" }))
    local ve = vocab:set_embedding(emb)
    assert.same({ vocab:size(), 50 }, ve.idx_to_vec:shape())
    assert.same(emb:get_vecs_by_tokens("the"):tolist(), ve:get_vecs_by_tokens("the"):tolist())
    assert.same(mx.nd.zeros({ 50 }):tolist(), ve:get_vecs_by_tokens("zzzz"):tolist())
    local two = vocab:set_embedding(emb, emb)
    assert.equal(100, two:dim())
    local path = os.tmpname()
    emb:save_text(path)
    local back = TE.from_file(path)
    assert.same(emb.idx_to_token, back.idx_to_token)
    assert.same(emb.idx_to_vec:tolist(), back.idx_to_vec:tolist())
    os.remove(path)
  end)

  it("sets and extends vectors, and refuses malformed files", function()
    local e = TE({ allow_extend = true })
    e:set_vecs({ "a", "b" }, mx.nd.array({ { 1, 2 }, { 3, 4 } }))
    assert.same({ "<unk>", "a", "b" }, e.idx_to_token)
    assert.same({ 3, 4 }, e:get_vecs_by_tokens("b"):tolist())
    e:set_vecs("a", mx.nd.array({ 5, 6 }))
    assert.same({ 5, 6 }, e:get_vecs_by_tokens("a"):tolist())
    local fixed = TE({ idx_to_token = { "x" }, idx_to_vec = mx.nd.ones({ 1, 2 }), unknown_token = false })
    assert.has_error(function() fixed:set_vecs("y", mx.nd.ones({ 2 })) end,
      "TokenEmbedding:set_vecs: 'y' is not in the embedding (allow_extend is false)")
    assert.has_error(function() fixed:get_vecs_by_tokens("y") end,
      "TokenEmbedding: 'y' is not in the embedding (and it has no unknown token)")
    local path = os.tmpname()
    local f = io.open(path, "wb")
    f:write("a 1 2 3\nb 1 2\n")
    f:close()
    assert.has_error(function() TE.from_file(path) end,
      "TokenEmbedding.from_file: " .. path .. " line 2 has 2 numbers where line 1 of the vectors has 3")
    f = io.open(path, "wb")
    f:write("3 2\nab \0\0\128\63")
    f:close()
    assert.has_error(function() TE.from_w2v_binary(path) end)
    os.remove(path)
  end)
end)

describe("gluonnlp.embedding.evaluation", function()
  it("computes cosine similarity, 3CosAdd and Spearman with ties", function()
    local w = mx.nd.array({ { 1, 0 }, { 0, 1 }, { 1, 1 }, { -1, 0 }, { 2, 1 } })
    local sim = ev.WordEmbeddingSimilarity(w)({ 0, 0 }, { 2, 3 }):tolist()
    assert.near(math.sqrt(0.5), sim[1], 1e-6)
    assert.near(-1, sim[2], 1e-6)
    -- 0 : 2 :: 1 : ?  -> target (0,1)+(1,1)-(1,0) = (0,2): best non-question word
    local add = ev.ThreeCosAdd(w)
    assert.same({ 4 }, add({ 0 }, { 2 }, { 1 }):tolist())
    assert.near(1, ev.spearman({ 1, 2, 3 }, { 10, 20, 30 }), 1e-12)
    assert.near(0.5, ev.spearman({ 1, 2, 2, 3 }, { 1, 3, 2, 2 }), 1e-12)
  end)
end)
