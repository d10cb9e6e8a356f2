-- gluon.nn transformer layers: MultiHeadAttention with masks, PositionwiseFFN,
-- TransformerEncoderCell (GluonNLP names) against PyTorch's TransformerEncoderLayer with
-- the same weights, valid lengths, the causal mask, positional encoding, TransformerEncoder.
-- Fixture: tools/fixtures/make_gluon_rnn_fixture.py torch.
local mx = require("mx")
local H = require("helpers.la")
local nd, nn, ag = mx.nd, mx.gluon.nn, mx.autograd

local TF = dofile("spec/fixtures/gluon_rnn_transformer_torch.lua")

local function maxdiff(a, b) return nd.max(nd.abs(nd.sub(a, b))):item() end
local function rand(shape, seed) return H.rand(mx, shape, { seed = seed }):astype("float32") end
local function T(f, dtype) return nd.reshape(nd.array(f.data, { dtype = dtype or "float32" }), f.shape) end

-- attention of one head computed directly: softmax(q k^T / sqrt(d) masked) v
local function ref_attention(q, k, v, mask, d)
  local s = nd.mul_scalar(nd.batch_dot(q, k, { transpose_b = true }), { scalar = 1 / math.sqrt(d) })
  if mask then s = nd.where(mask, s, nd.full(s:shape(), -1e30)) end
  return nd.batch_dot(nd.softmax(s), v)
end

describe("nn.MultiHeadAttention", function()
  it("equals per-head scaled dot-product attention over the projections, with a mask", function()
    local att = nn.MultiHeadAttention({ units = 6, num_heads = 2 })
    att:initialize(mx.init.Xavier())
    local x = rand({ 2, 4, 6 }, 1)
    local mask = nd.array({ { { 1, 1, 0, 0 }, { 1, 1, 0, 0 }, { 1, 1, 0, 0 }, { 1, 1, 0, 0 } },
      { { 1, 0, 0, 0 }, { 1, 1, 0, 0 }, { 1, 1, 1, 0 }, { 1, 1, 1, 1 } } })
    local out, w = att(x, x, x, mask)
    assert.are.same({ 2, 4, 6 }, out:shape())
    assert.are.same({ 2, 2, 4, 4 }, w:shape())
    local q, k, v = att.proj_query(x), att.proj_key(x), att.proj_value(x)
    for h = 1, 2 do
      local cols = { (h - 1) * 3 + 1, h * 3 }
      local want = ref_attention(q[{ {}, {}, cols }], k[{ {}, {}, cols }], v[{ {}, {}, cols }], mask, 3)
      assert.is_true(maxdiff(out[{ {}, {}, cols }], want) < 1e-5)
    end
    -- masked keys get no weight; rows sum to 1
    local masked = nd.expand_dims(nd.rsub_scalar(mask, { scalar = 1 }), { axis = 2 })
    assert.equal(0, nd.sum(nd.abs(nd.mul(w, masked))):item())
    assert.is_true(maxdiff(nd.sum(w, { axis = -1 }), nd.ones({ 2, 2, 4 })) < 1e-5)
  end)

  it("errors: units not divisible by heads, a wrong mask shape", function()
    assert.has_error(function() nn.MultiHeadAttention({ units = 5, num_heads = 2 }) end,
      "MultiHeadAttention: units (5) must be divisible by num_heads (2)")
    local att = nn.MultiHeadAttention({ units = 4, num_heads = 2 })
    att:initialize()
    assert.has_error(function() att(rand({ 2, 3, 4 }, 1), nil, nil, nd.ones({ 2, 3, 4 })) end,
      "MultiHeadAttention: mask must be (2, 3, 3) (or (3, 3)), got (2, 3, 4)")
  end)
end)

describe("nn.TransformerEncoderCell", function()
  it("GluonNLP's parameter names", function()
    local c = nn.TransformerEncoderCell({ units = 8, hidden_size = 16, num_heads = 2 })
    assert.are.same({ "attention_cell.proj_query.weight", "attention_cell.proj_query.bias",
      "attention_cell.proj_key.weight", "attention_cell.proj_key.bias",
      "attention_cell.proj_value.weight", "attention_cell.proj_value.bias", "proj.weight",
      "layer_norm.gamma", "layer_norm.beta", "ffn.ffn_1.weight", "ffn.ffn_1.bias",
      "ffn.ffn_2.weight", "ffn.ffn_2.bias", "ffn.layer_norm.gamma", "ffn.layer_norm.beta" },
      c:collect_params():keys())
  end)

  it("equals torch's TransformerEncoderLayer (post-norm, key padding): value, input gradient", function()
    local f = TF.cell
    local c = nn.TransformerEncoderCell({ units = f.units, hidden_size = f.hidden_size,
      num_heads = f.num_heads })
    c:initialize()
    c:cast("float64")
    local params = c:collect_params()
    local x = T(f.x, "float64")
    c(x) -- finish deferred shapes
    for name, w in pairs(f.weights) do params[name]:set_data(T(w, "float64")) end
    x:attach_grad()
    local y
    local loss = ag.record(function()
      y = c(x, nil, T(f.valid_length, "float64"))
      return nd.sum(nd.mul(y, T(f.r, "float64")))
    end)
    loss:backward()
    -- torch leaves padded query rows computed as well: compare everything
    assert.is_true(maxdiff(y, T(f.y, "float64")) < 1e-9)
    assert.is_true(maxdiff(x:grad(), T(f.dx, "float64")) < 1e-9)
  end)

  it("valid_length: padding does not change the valid positions", function()
    local c = nn.TransformerEncoderCell({ units = 8, hidden_size = 16, num_heads = 2 })
    c:initialize(mx.init.Xavier())
    local x = rand({ 1, 5, 8 }, 2)
    local y = c(x, nil, nd.array({ 3 }))
    local x2 = nd.concat(x[{ {}, { 1, 3 } }], rand({ 1, 2, 8 }, 3), { dim = 2 })
    local y2 = c(x2, nil, nd.array({ 3 }))
    assert.is_true(maxdiff(y[{ {}, { 1, 3 } }], y2[{ {}, { 1, 3 } }]) < 1e-5)
    local y3 = c(x[{ {}, { 1, 3 } }])
    assert.is_true(maxdiff(y[{ {}, { 1, 3 } }], y3) < 1e-5)
  end)

  it("the causal mask: a position never sees later ones", function()
    local c = nn.TransformerEncoderCell({ units = 8, hidden_size = 16, num_heads = 4 })
    c:initialize(mx.init.Xavier())
    local x = rand({ 2, 6, 8 }, 4)
    local m = nn.causal_mask(6)
    local y = c(x, m)
    local x2 = nd.concat(x[{ {}, { 1, 4 } }], rand({ 2, 2, 8 }, 5), { dim = 2 })
    local y2 = c(x2, m)
    assert.is_true(maxdiff(y[{ {}, { 1, 4 } }], y2[{ {}, { 1, 4 } }]) < 1e-5)
    assert.is_true(maxdiff(y[{ {}, 6 }], y2[{ {}, 6 }]) > 1e-3)
  end)
end)

describe("transformer errors", function()
  it("an error inside a child layer names the layer and blames the caller's line", function()
    local c = nn.TransformerEncoderCell({ units = 8, hidden_size = 16, num_heads = 2 })
    c:initialize()
    local ok, err = pcall(function()
      local y = c(rand({ 2, 3, 8 }, 1):astype("float64")) -- float32 parameters
      return y
    end)
    assert.is_false(ok)
    assert.truthy(err:find("^spec/gluon_transformer_spec%.lua:%d+: TransformerEncoderCell: "), err)
    assert.truthy(err:find("float64", 1, true), err)
    local f = nn.PositionwiseFFN({ units = 4, hidden_size = 8 })
    f:initialize()
    ok, err = pcall(function()
      local y = f(nd.ones({ 2, 5 }))
      return y
    end)
    assert.is_false(ok)
    assert.truthy(err:find("^spec/gluon_transformer_spec%.lua:%d+: PositionwiseFFN: "), err)
  end)
end)

describe("positional encoding and TransformerEncoder", function()
  it("position_encoding: sin in the first half, cos in the second", function()
    local pe = nn.position_encoding(7, 6)
    assert.are.same({ 7, 6 }, pe:shape())
    local t = pe:totable()
    assert.is_true(math.abs(t[4][1] - math.sin(3)) < 1e-6)
    assert.is_true(math.abs(t[4][2] - math.sin(3 / 10000 ^ (2 / 6))) < 1e-6)
    assert.is_true(math.abs(t[4][4] - math.cos(3)) < 1e-6)
    assert.is_true(math.abs(t[1][5] - 1) < 1e-6)
  end)

  it("TransformerEncoder stacks cells; gradients reach every parameter", function()
    local enc = nn.TransformerEncoder({ num_layers = 2, units = 8, hidden_size = 16,
      num_heads = 2, max_length = 10, dropout = 0.1 })
    enc:initialize(mx.init.Xavier())
    local x = rand({ 2, 5, 8 }, 6)
    local loss = ag.record(function() return nd.sum(enc(x, nil, nd.array({ 5, 2 }))) end)
    loss:backward()
    local n = 0
    for name, p in enc:collect_params():items() do
      n = n + 1
      assert.is_true(nd.max(nd.abs(p:grad())):item() > 0 or name:find("bias"), name)
    end
    assert.equal(30, n)
    assert.are.same({ 2, 5, 8 }, enc(x):shape())
    assert.has_error(function() enc(rand({ 2, 11, 8 }, 1)) end,
      "TransformerEncoder: PositionalEncoding: input must be (N, T <= 10, 8), got (2, 11, 8)")
  end)
end)
