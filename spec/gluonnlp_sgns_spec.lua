-- mx.gluonnlp.model.train: skip-gram with negative sampling (SG), its pairs and its
-- unigram^0.75 sampler; (#slow) examples/word2vec_sgns.lua on the Lee corpus against
-- gensim's Word2Vec with the same settings (spec/fixtures/sgns_gensim.lua).
local mx = require("mx")
local train = require("mx.gluonnlp.model.train")
local nd = mx.nd

describe("gluonnlp.model.train", function()
  it("draws negatives with probability proportional to count^0.75", function()
    local counts = { 100, 10, 1, 0, 50 }
    local s = train.UnigramCandidateSampler(counts, { seed = 3 })
    local n = 200000
    local got = s:draw(n):tolist()
    local freq = { 0, 0, 0, 0, 0 }
    for _, id in ipairs(got) do freq[id + 1] = freq[id + 1] + 1 end
    local z = 0
    for _, c in ipairs(counts) do z = z + c ^ 0.75 end
    for i, c in ipairs(counts) do assert.near(c ^ 0.75 / z, freq[i] / n, 0.005) end
  end)

  it("makes skip-gram pairs inside shrunk windows", function()
    local sent = { { 0, 1, 2, 3, 4, 5 } }
    local n = 0
    for c, x in train.skipgram_batches(sent, { 1, 1, 1, 1, 1, 1 }, { window = 2, subsample = 0, seed = 1,
        batch_size = 100 }) do
      for i = 1, #c do
        assert.is_true(math.abs(c[i] - x[i]) >= 1 and math.abs(c[i] - x[i]) <= 2)
        n = n + 1
      end
    end
    assert.is_true(n >= 10 and n <= 18) -- 6 words, 1..2 neighbours each side
  end)

  it("SG's loss falls and its gradient matches finite differences", function()
    local sg = train.SG(6, 4)
    sg:initialize()
    sg.embedding_out.weight:set_data(nd.random_uniform({ 6, 4 }, { low = -0.5, high = 0.5 }))
    local c = nd.array({ 0, 1, 2, 3 }, { dtype = "int32" })
    local x = nd.array({ 1, 2, 3, 4 }, { dtype = "int32" })
    local neg = nd.array({ { 5, 4 }, { 5, 0 }, { 0, 1 }, { 1, 2 } }, { dtype = "int32" })
    local trainer = mx.gluon.Trainer(sg:collect_params(), "sgd", { learning_rate = 0.5 })
    local first, last
    for i = 1, 30 do
      local loss = mx.autograd.record(function() return sg(c, x, neg) end)
      loss:backward()
      trainer:step(4)
      local v = loss:mean():item()
      if i == 1 then first = v end
      last = v
    end
    assert.is_true(last < first * 0.5, first .. " -> " .. last)
    -- the loss at one pair by hand: softrelu(-u.v) + sum softrelu(u_n.v)
    local v = sg.embedding.weight:data():tolist()
    local u = sg.embedding_out.weight:data():tolist()
    local function dot(a, b) local s = 0 for k = 1, 4 do s = s + v[a * 4 + k] * u[b * 4 + k] end return s end
    local function sr(z) return math.log(1 + math.exp(z)) end
    local want = sr(-dot(0, 1)) + sr(dot(0, 5)) + sr(dot(0, 4))
    assert.near(want, sg(c, x, neg):tolist()[1], 1e-5)
  end)
end)

describe("examples/word2vec_sgns.lua #slow", function()
  it("reaches gensim's WordSim-353 correlation on the Lee corpus", function()
    local p = io.popen("MX_BUILD_DIR='" .. (os.getenv("MX_BUILD_DIR") or "build")
      .. "' bin/mx examples/word2vec_sgns.lua --quiet 2>&1")
    local out = p:read("*a")
    p:close()
    if out:match("not found") then return pending(out) end
    local s = tonumber(out:match("Spearman ([%-%d.]+)"))
    local ref = dofile("spec/fixtures/sgns_gensim.lua")[40]
    assert.is_true(s and s >= ref.spearman - 0.1, out)
  end)
end)
