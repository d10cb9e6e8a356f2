-- mx.gluonnlp: Vocab, count_tokens, FixedBucketSampler (+ schemes), batchify and
-- streams, against GluonNLP 0.10 itself (spec/fixtures/gluonnlp_data_ref.lua, made by
-- tools/fixtures/make_gluonnlp_data_fixture.py) on Debian's fortunes.
local mx = require("mx")
local nlp = require("mx.gluonnlp")
local U = require("mx.gluonnlp.data.utils")
local REF = dofile("spec/fixtures/gluonnlp_data_ref.lua")

local f = assert(io.open("/usr/share/games/fortunes/wisdom", "rb"))
local quotes = U.split(f:read("*a"), "\n%\n")
f:close()
local tokens, lengths, pairs_ = {}, {}, {}
for _, q in ipairs(quotes) do
  local n = 0
  for w in q:gmatch("%S+") do tokens[#tokens + 1] = w n = n + 1 end
  lengths[#lengths + 1] = math.max(n, 1)
  local chars = select(2, q:gsub("[^\128-\191]", ""))
  pairs_[#pairs_ + 1] = { math.max(n, 1), math.max(chars, 1) }
end

local function collect(s)
  local r = {}
  for b in s:iter() do r[#r + 1] = b end
  return r
end

describe("gluonnlp.Vocab", function()
  it("orders tokens as GluonNLP 0.10 does", function()
    assert.equal(REF.n_tokens, #tokens)
    local counter = nlp.data.count_tokens(tokens)
    assert.equal(REF.count_the, counter.the)
    local v1 = nlp.Vocab(counter, { max_size = 500, min_freq = 2 })
    assert.same(REF.vocab1, v1.idx_to_token)
    local v2 = nlp.Vocab(counter, { min_freq = 5, padding_token = false, bos_token = false,
      reserved_tokens = { "<mask>", "<sep>" } })
    assert.same(REF.vocab2, v2.idx_to_token)
    assert.same(REF.vocab2_reserved, v2.reserved_tokens)
    assert.equal(#REF.vocab2, v2:size())
  end)

  it("maps tokens and ids both ways, unknown to <unk>", function()
    local v = nlp.Vocab(nlp.data.count_tokens({ "a", "b", "b", "c", "c", "c" }))
    assert.same({ "<unk>", "<pad>", "<bos>", "<eos>", "c", "b", "a" }, v.idx_to_token)
    assert.equal(4, v("c"))
    assert.same({ 4, 0, 6 }, v:to_indices({ "c", "zzz", "a" }))
    assert.same({ "c", "a" }, v:to_tokens({ 4, 6 }))
    assert.equal("<pad>", v.padding_token)
    assert.is_true(v:contains("b"))
    assert.has_error(function() v:to_tokens(7) end, "Vocab:to_tokens: id 7 is out of range 0..6")
    local strict = nlp.Vocab(nlp.data.count_tokens({ "x" }), { unknown_token = false })
    assert.has_error(function() strict("y") end,
      "Vocab: token 'y' is not in the vocabulary (and it has no unknown token)")
    assert.has_error(function() nlp.Vocab({}, { bogus = 1 }) end)
    local cls = nlp.Vocab(nil, { cls_token = "[CLS]" })
    assert.equal("[CLS]", cls.cls_token)
    assert.equal(4, cls("[CLS]"))
    local moved = nlp.Vocab(nlp.data.count_tokens({ "a", "b", "b" }), { token_to_idx = { a = 0 } })
    assert.equal(0, moved("a"))
    assert.equal(5, moved("<unk>"))
  end)

  it("round-trips through GluonNLP's JSON and reads GluonNLP's own", function()
    local counter = nlp.data.count_tokens(tokens)
    local v2 = nlp.Vocab(counter, { min_freq = 5, padding_token = false, bos_token = false,
      reserved_tokens = { "<mask>", "<sep>" } })
    local back = nlp.Vocab.from_json(v2:to_json())
    assert.same(v2.idx_to_token, back.idx_to_token)
    assert.same(v2.token_to_idx, back.token_to_idx)
    assert.equal("<eos>", back.eos_token)
    assert.is_nil(back.padding_token)
    local json = require("mx.gluonnlp._json")
    local theirs = nlp.Vocab.from_json(json.encode(REF.vocab2_json))
    assert.same(REF.vocab2, theirs.idx_to_token)
    assert.equal("<unk>", theirs.unknown_token)
    local path = os.tmpname()
    v2:save(path)
    assert.same(v2.idx_to_token, nlp.Vocab.load(path).idx_to_token)
    os.remove(path)
  end)
end)

describe("gluonnlp.data.FixedBucketSampler", function()
  it("builds GluonNLP's buckets, batch sizes and batch order", function()
    local s = nlp.data.FixedBucketSampler(lengths, 16, { num_buckets = 8, ratio = 0.5 })
    assert.same(REF.fixed_keys, s.bucket_keys)
    assert.same(REF.fixed_sizes, s.bucket_batch_sizes)
    assert.same(REF.fixed_batches, collect(s))
    assert.equal(#REF.fixed_batches, s:len())
    assert.truthy(s:stats():find("sample_num=" .. #lengths, 1, true))
  end)

  it("matches the linear and exponential schemes and average-length sizes", function()
    local lin = nlp.data.FixedBucketSampler(lengths, 64,
      { num_buckets = 6, bucket_scheme = nlp.data.LinearWidthBucket() })
    assert.same(REF.linear_keys, lin.bucket_keys)
    local exp = nlp.data.FixedBucketSampler(lengths, 64,
      { num_buckets = 6, bucket_scheme = nlp.data.ExpWidthBucket(1.2) })
    assert.same(REF.exp_keys, exp.bucket_keys)
    local avg = nlp.data.FixedBucketSampler(lengths, 200, { num_buckets = 5, use_average_length = true })
    assert.same(REF.avg_sizes, avg.bucket_batch_sizes)
  end)

  it("buckets pairs of lengths and shards batches", function()
    local p = nlp.data.FixedBucketSampler(pairs_, 32, { num_buckets = 4 })
    assert.same(REF.pair_keys, p.bucket_keys)
    assert.same(REF.pair_batches, collect(p))
    local sh = nlp.data.FixedBucketSampler(lengths, 16, { num_buckets = 8, num_shards = 3 })
    assert.equal(REF.shard_len, sh:len())
    assert.same(REF.shard_batches, collect(sh))
  end)

  it("shuffles reproducibly with a seed and visits every sample once", function()
    local a = collect(nlp.data.FixedBucketSampler(lengths, 16, { shuffle = true, seed = 7 }))
    local b = collect(nlp.data.FixedBucketSampler(lengths, 16, { shuffle = true, seed = 7 }))
    assert.same(a, b)
    local seen, n = {}, 0
    for _, batch in ipairs(a) do
      for _, i in ipairs(batch) do
        assert.is_nil(seen[i])
        seen[i] = true
        n = n + 1
      end
    end
    assert.equal(#lengths, n)
  end)

  it("refuses bad input with clear messages", function()
    assert.has_error(function() nlp.data.FixedBucketSampler({}, 4) end,
      "FixedBucketSampler: lengths must be a non-empty list")
    assert.has_error(function() nlp.data.FixedBucketSampler({ 3, 0 }, 4) end,
      "FixedBucketSampler: sequence lengths must all be larger than 0")
    assert.has_error(function() nlp.data.FixedBucketSampler({ 3, 9 }, 4, { bucket_keys = { 5 } }) end)
  end)

  it("drives a DataLoader as its batch sampler", function()
    local ds = mx.gluon.data.SimpleDataset({ { 1, 2, 3 }, { 4 }, { 5, 6 }, { 7, 8, 9, 10 } })
    local lens = { 3, 1, 2, 4 }
    local s = nlp.data.FixedBucketSampler(lens, 2, { num_buckets = 2 })
    local loader = mx.gluon.data.DataLoader(ds, { batch_sampler = s,
      batchify_fn = nlp.data.batchify.Pad({ pad_val = 0 }) })
    local total = 0
    for x in loader:iter() do
      assert.equal(2, #x:shape())
      total = total + x:shape()[1]
    end
    assert.equal(4, total)
  end)
end)

describe("gluonnlp.data.batchify", function()
  it("Pad pads lists and tensors and returns valid lengths", function()
    local pad = nlp.data.batchify.Pad({ pad_val = -1, ret_length = true })
    local x, len = pad({ { 1, 2, 3 }, { 4 }, { 5, 6 } })
    assert.same({ { 1, 2, 3 }, { 4, -1, -1 }, { 5, 6, -1 } }, x:totable())
    assert.equal("int32", x:dtype())
    assert.same({ 3, 1, 2 }, len:tolist())
    local pad4 = nlp.data.batchify.Pad({ axis = 1, round_to = 4 })
    local t = pad4({ mx.nd.ones({ 2, 3 }), mx.nd.ones({ 3, 3 }) })
    assert.same({ 2, 4, 3 }, t:shape())
    assert.equal(6, t[1]:sum():item())
    local t2 = nlp.data.batchify.Pad({ axis = 2 })({ mx.nd.ones({ 2, 1 }), mx.nd.ones({ 2, 3 }) })
    assert.same({ 2, 2, 3 }, t2:shape())
    assert.equal(2, t2[1]:sum():item())
    assert.has_error(function() nlp.data.batchify.Pad({ axis = 3 })({ mx.nd.ones({ 2 }) }) end,
      "Pad: axis 3 is out of range for 1-d samples")
  end)

  it("Tuple, Stack and List combine fields", function()
    local B = nlp.data.batchify
    local fn = B.Tuple(B.Pad({ pad_val = 0, ret_length = true }), B.Stack(), B.List())
    local out = fn({ { { 1, 2 }, 0, "a" }, { { 3 }, 1, "b" } })
    assert.same({ { 1, 2 }, { 3, 0 } }, out[1][1]:totable())
    assert.same({ 2, 1 }, out[1][2]:tolist())
    assert.same({ 0, 1 }, out[2]:tolist())
    assert.same({ "a", "b" }, out[3])
  end)
end)

describe("gluonnlp.data streams", function()
  it("SimpleDatasetStream yields one dataset per file in sampler order", function()
    local seen = {}
    local st = nlp.data.SimpleDatasetStream(function(path, kw)
      seen[#seen + 1] = path
      return { path = path, kw = kw }
    end, "/usr/share/games/fortunes/w*, /usr/share/games/fortunes/zippy",
      { file_sampler = "sequential", x = 1 })
    local got = {}
    for d in st:iter() do got[#got + 1] = d end
    assert.same({ "/usr/share/games/fortunes/wisdom", "/usr/share/games/fortunes/wisdom.dat",
      "/usr/share/games/fortunes/wisdom.u8", "/usr/share/games/fortunes/work",
      "/usr/share/games/fortunes/work.dat", "/usr/share/games/fortunes/work.u8",
      "/usr/share/games/fortunes/zippy" }, seen)
    assert.equal(1, got[1].kw.x)
    local r = nlp.data.SimpleDatasetStream(function(p) return p end, "/usr/share/games/fortunes/w*",
      { seed = 3 })
    local n = 0
    for _ in r:iter() do n = n + 1 end
    assert.equal(6, n)
    assert.has_error(function() nlp.data.SimpleDatasetStream(print, "/nonexistent/*") end,
      'SimpleDatasetStream: cannot find any file with path "/nonexistent/*"')
    local s = nlp.data.SimpleDataStream({ 1, 2, 3 }):transform(function(v) return v * 2 end)
    local vals = {}
    for v in s:iter() do vals[#vals + 1] = v end
    assert.same({ 2, 4, 6 }, vals)
  end)
end)
