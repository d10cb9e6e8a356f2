-- mx.gluonnlp GPT-2 and decoding: a tiny random GPT-2 in Hugging Face's layout
-- (spec/fixtures/gpt2_tiny, made by tools/fixtures/make_gpt2_fixture.py) loaded by
-- name map and compared with transformers' logits and greedy generation; the KV cache
-- against full recomputation; beam search against exhaustive search; sampling.
local mx = require("mx")
local nlp = require("mx.gluonnlp")
local gpt2 = require("mx.gluonnlp.model.gpt2")
local S = require("mx.gluonnlp.model.sequence_sampler")
local REF = dofile("spec/fixtures/gpt2_tiny_ref.lua")
local nd = mx.nd

local function ids(t) return nd.array(t, { dtype = "int32" }) end

describe("gluonnlp.model.GPT2Model", function()
  local model = gpt2.from_hf("spec/fixtures/gpt2_tiny")

  it("loads a Hugging Face GPT-2 and gives transformers' logits", function()
    local logits = model(ids({ REF.ids }))
    assert.same({ 1, 12, 96 }, logits:shape())
    local got = logits:tolist()
    local worst = 0
    for i = 1, #REF.logits do worst = math.max(worst, math.abs(got[i] - REF.logits[i])) end
    assert.is_true(worst < 1e-4, "max |diff| " .. worst)
  end)

  it("the key/value cache gives the same logits one token at a time", function()
    local full = model(ids({ REF.ids })):tolist()
    local states
    local V = 96
    for t = 1, #REF.ids do
      local lg
      lg, states = model(ids({ { REF.ids[t] } }), states)
      assert.same({ 1, 4, t, 8 }, states[1]:shape())
      local step = lg:tolist()
      for v = 1, V do assert.near(full[(t - 1) * V + v], step[v], 1e-4) end
    end
    assert.has_error(function() model(ids({ { 1 } }), (function()
      local st = {}
      for i = 1, 4 do st[i] = nd.zeros({ 1, 4, 48, 8 }) end
      return st
    end)()) end, "GPT2Model: 48 cached + 1 new positions exceed max_length 48")
  end)

  it("greedy generation equals transformers' generate", function()
    local out = gpt2.generate(model, { REF.greedy_prompt }, { max_new_tokens = 10 })
    assert.same(REF.greedy, out[1])
    local two = gpt2.generate(model, { { 7, 7, 1 }, { 90, 12, 44 } }, { max_new_tokens = 6 })
    assert.same(REF.greedy2, two)
  end)

  it("has GluonNLP's parameter names; get_model builds the 124M config", function()
    local names = {}
    for n in model:collect_params():items() do names[#names + 1] = n end
    assert.equal("_pos_embed.weight", names[1])
    assert.equal("_embed.weight", names[2])
    local set = {}
    for _, n in ipairs(names) do set[n] = true end
    assert.is_true(set["_self_attention_layers.0._multi_head_qkv_proj.weight"])
    assert.is_true(set["_ffn_layers.1._out_map.bias"])
    assert.is_true(set["_final_ln.gamma"])
    local big = nlp.model.get_model("gpt2_117m")
    assert.equal(768, big.config.units)
    assert.equal(12, big.config.num_layers)
  end)
end)

describe("gluonnlp.model samplers", function()
  -- a fixed toy language model over V tokens: log p(next | prev) from a table
  local V = 5
  local T = {}
  do
    local seed = 3
    for a = 0, V - 1 do
      local row, z = {}, 0
      for b = 0, V - 1 do
        seed = (seed * 1103515245 + 12345) % 2147483648
        row[b] = 0.2 + seed / 2147483648
        z = z + row[b]
      end
      for b = 0, V - 1 do row[b] = math.log(row[b] / z) end
      T[a] = row
    end
  end
  local function decoder(step, states)
    local s = step:tolist()
    local flat = {}
    for i, a in ipairs(s) do for b = 0, V - 1 do flat[(i - 1) * V + b + 1] = T[a][b] end end
    local st = states and { states[1] + 1 } or nil
    return nd.array(flat):reshape({ #s, V }), st
  end

  local function penalty(len) return ((5 + len) / 6) end

  it("beam search finds the exhaustive best under the length penalty", function()
    local eos, maxlen = 4, 4
    -- every sequence of up to maxlen new tokens (ending at eos or at maxlen)
    local best, best_seq = -math.huge, nil
    local function walk(prev, seq, lp)
      local n = #seq
      if n > 0 and (seq[n] == eos or n == maxlen) then
        local sc = lp / penalty(n)
        if sc > best then best, best_seq = sc, { unpack(seq) } end
        return
      end
      for b = 0, V - 1 do
        seq[n + 1] = b
        walk(b, seq, lp + T[prev][b])
        seq[n + 1] = nil
      end
    end
    walk(2, {}, 0)
    local beam = S.BeamSearchSampler(V ^ 3, decoder, eos, { max_length = maxlen })
    local samples, scores, valid = beam({ 2 }, { nd.zeros({ 1, 1 }) })
    local top = {}
    local L = samples:shape()[3]
    local sl = samples:tolist()
    for t = 2, valid:tolist()[1] do top[#top + 1] = sl[t] end
    if best_seq[#best_seq] ~= eos then best_seq[#best_seq + 1] = eos end
    assert.same(best_seq, top)
    assert.near(best, scores:tolist()[1], 1e-5)
    assert.equal(L, samples:shape()[3])
  end)

  it("greedy is beam size 1; top_k=1 and tiny top_p sample the greedy path", function()
    local g = S.greedy(decoder, { 1, 3 }, nil, { max_length = 6 })
    local ref = {}
    for _, start in ipairs({ 1, 3 }) do
      local a, r = start, { start }
      for _ = 1, 6 do
        local bb, bv = 0, -math.huge
        for b = 0, V - 1 do if T[a][b] > bv then bb, bv = b, T[a][b] end end
        r[#r + 1] = bb
        a = bb
      end
      ref[#ref + 1] = r
    end
    assert.same({ 2, 1, 7 }, g:shape())
    local gl = g:tolist()
    for i = 1, 2 do for t = 1, 7 do assert.equal(ref[i][t], gl[(i - 1) * 7 + t]) end end
    for _, o in ipairs({ { top_k = 1 }, { top_p = 1e-6 } }) do
      o.max_length, o.seed = 6, 1
      local s = S.SequenceSampler(3, decoder, nil, o)({ 1 })
      local sl = s:tolist()
      for k = 1, 3 do for t = 1, 7 do assert.equal(ref[1][t], sl[(k - 1) * 7 + t]) end end
    end
  end)

  it("samples follow softmax(log_probs / temperature), top_k and top_p", function()
    local n = 4000
    local function freq(o)
      o.max_length, o.seed = 1, 7
      local s = S.SequenceSampler(n, decoder, nil, o)({ 0 }):tolist()
      local c = {}
      for b = 0, V - 1 do c[b] = 0 end
      for k = 1, n do c[s[(k - 1) * 2 + 2]] = c[s[(k - 1) * 2 + 2]] + 1 end
      return c
    end
    for _, temp in ipairs({ 1.0, 0.5 }) do
      local c = freq({ temperature = temp })
      local z = 0
      for b = 0, V - 1 do z = z + math.exp(T[0][b] / temp) end
      for b = 0, V - 1 do assert.near(math.exp(T[0][b] / temp) / z, c[b] / n, 0.03) end
    end
    local order = {}
    for b = 0, V - 1 do order[#order + 1] = b end
    table.sort(order, function(x, y) return T[0][x] > T[0][y] end)
    local c2 = freq({ top_k = 2 })
    for r = 3, V do assert.equal(0, c2[order[r]]) end
    local p1 = math.exp(T[0][order[1]])
    local c3 = freq({ top_p = p1 + 1e-3 })
    assert.is_true(c3[order[1]] > 0 and c3[order[2]] > 0)
    for r = 3, V do assert.equal(0, c3[order[r]]) end
  end)

  it("refuses bad options", function()
    assert.has_error(function() S.SequenceSampler(1, decoder, nil, { temperature = 0 }) end,
      "SequenceSampler: temperature must be a positive number, got 0")
    assert.has_error(function() S.SequenceSampler(1, decoder, nil, { top_p = 1.5 }) end,
      "SequenceSampler: top_p must be in (0, 1], got 1.5")
    assert.has_error(function() S.BeamSearchSampler(0, decoder, 1) end,
      "BeamSearchSampler: beam_size must be a positive integer, got 0")
    local bad = S.BeamSearchSampler(2, function() return nd.zeros({ 3, 3 }) end, 1)
    assert.has_error(function() bad({ 1 }) end,
      "BeamSearchSampler: the decoder returned (3, 3) log-probabilities for 2 rows (B, V expected)")
  end)
end)
