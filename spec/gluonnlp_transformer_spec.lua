-- mx.gluonnlp.model.transformer: the encoder-decoder's parameter names, the one-step
-- decoder (with its input cache) against teacher forcing, the translator's beam search;
-- and (#slow) examples/transformer_reverse.lua learning to reverse real words.
local mx = require("mx")
local T = require("mx.gluonnlp.model.transformer")
local nd = mx.nd

local function model(dropout)
  local m = T.NMTModel({ src_vocab_size = 11, tgt_vocab_size = 13, units = 16, hidden_size = 32,
    num_layers = 2, num_heads = 4, dropout = dropout or 0, max_src_length = 12, max_tgt_length = 12 })
  m:initialize(mx.init.Xavier())
  return m
end

describe("gluonnlp.model.transformer", function()
  it("names its parameters as GluonNLP and shapes its outputs", function()
    local m = model()
    local set = {}
    for n in m:collect_params():items() do set[n] = true end
    for _, n in ipairs({ "src_embed.weight", "tgt_embed.weight",
      "encoder.transformer_cells.0.attention_cell.proj_query.weight",
      "decoder.transformer_cells.1.attention_cell_in.proj_key.weight",
      "decoder.transformer_cells.1.attention_cell_inter.proj_value.bias",
      "decoder.transformer_cells.0.proj_inter.weight", "decoder.transformer_cells.0.layer_norm_in.gamma",
      "decoder.transformer_cells.0.ffn.ffn_1.weight" }) do
      assert.is_true(set[n], n)
    end
    local src = nd.array({ { 1, 2, 3, 0 }, { 4, 5, 0, 0 } }, { dtype = "int32" })
    local tgt = nd.array({ { 1, 6, 7 }, { 1, 8, 9 } }, { dtype = "int32" })
    local logits = m(src, tgt, nd.array({ 3, 2 }, { dtype = "int32" }))
    assert.same({ 2, 3, 13 }, logits:shape())
  end)

  it("decodes one step at a time as teacher forcing does", function()
    local m = model()
    local src = nd.array({ { 1, 2, 3, 4 }, { 5, 6, 7, 0 } }, { dtype = "int32" })
    local len = nd.array({ 4, 3 }, { dtype = "int32" })
    local tgt = { { 1, 6, 7, 3, 2 }, { 1, 8, 9, 10, 5 } }
    local full = nd.log_softmax(m(src, nd.array(tgt, { dtype = "int32" }), len), { axis = -1 }):tolist()
    local dec = m:decoder_fn()
    local st = m:init_states(src, len)
    for t = 1, 5 do
      local lp
      lp, st = dec(nd.array({ tgt[1][t], tgt[2][t] }, { dtype = "int32" }), st)
      local got = lp:tolist()
      for b = 1, 2 do
        for v = 1, 13 do
          assert.near(full[((b - 1) * 5 + (t - 1)) * 13 + v], got[(b - 1) * 13 + v], 1e-4)
        end
      end
    end
  end)

  it("translates with beam search (best beam first, bos first)", function()
    local m = model()
    local tr = T.BeamSearchTranslator(m, { beam_size = 3, max_length = 6, bos_id = 1, eos_id = 2 })
    local src = nd.array({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "int32" })
    local samples, scores, valid = tr:translate(src, nd.array({ 3, 3 }, { dtype = "int32" }))
    assert.equal(2, samples:shape()[1])
    assert.equal(3, samples:shape()[2])
    local sc = scores:tolist()
    assert.is_true(sc[1] >= sc[2] and sc[2] >= sc[3])
    assert.equal(1, samples:tolist()[1])
    assert.is_true(valid:tolist()[1] <= 8)
    assert.has_error(function() T.BeamSearchTranslator(m, { beam_size = 2 }) end,
      "BeamSearchTranslator: bos_id and eos_id are required")
  end)
end)

describe("examples/transformer_reverse.lua #slow", function()
  it("learns to reverse held-out real words", function()
    local p = io.popen("MX_BUILD_DIR='" .. (os.getenv("MX_BUILD_DIR") or "build")
      .. "' bin/mx examples/transformer_reverse.lua --quiet 2>&1")
    local out = p:read("*a")
    local ok = p:close()
    assert.is_true(ok == true or ok == 0, out)
    local acc = tonumber(out:match("exact match: beam %d+ ([%d.]+)"))
    assert.is_true(acc and acc >= 0.9, out)
  end)
end)
