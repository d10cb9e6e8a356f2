-- spec/gluon_seq_layers_spec.lua — gluon.nn.Embedding: MXNet 2.0's options and parameter
-- names, values against the op, gradients through autograd, hybridize, training with a
-- Trainer, errors at the caller.
local mx = require("mx")
local oracle = require("helpers.oracle")
local err_at = require("helpers.err_at")("gluon_seq_layers_spec.lua")
local nn, nd, gluon = mx.gluon.nn, mx.nd, mx.gluon

local function close(a, b, tol)
  local ok, msg = oracle.close(a, b, tol or 1e-6, tol or 1e-6)
  assert(ok, msg)
end

describe("gluon.nn.Embedding", function()
  it("looks ids up in its weight (input_dim, output_dim), prints like MXNet", function()
    local e = nn.Embedding(10, 4)
    assert.are.equal("Embedding(10 -> 4, float32)", tostring(e))
    e:initialize()
    local ids = nd.array({ { 1, 9 }, { 0, 1 } })
    local y = e(ids)
    assert.are.same({ 2, 2, 4 }, y:shape())
    local w = e.weight:data()
    close(y[1][2], w[10])
    close(y[2][1], w[1])
    assert.are.same({ "weight" }, e:collect_params():keys())
    -- float64 tables and a given initializer
    local e2 = nn.Embedding(3, 2, { dtype = "float64", weight_initializer = "ones" })
    e2:initialize()
    assert.are.same({ { 1, 1 } }, e2(nd.array({ 2 })):totable())
    assert.are.equal("float64", e2.weight:data():dtype())
  end)

  it("trains: only looked-up rows change; hybridized equals eager", function()
    local e = nn.Embedding(6, 3, { sparse_grad = true })
    e:initialize()
    local before = e.weight:data():copy()
    local tr = gluon.Trainer(e:collect_params(), "sgd", { learning_rate = 1 })
    local ids = nd.array({ 1, 4, 4 })
    local y
    mx.autograd.record(function() y = e(ids) end)
    y:backward()
    tr:step(1)
    local after = e.weight:data()
    for r = 1, 6 do
      local d = (after[r] - before[r]):abs():max():item()
      if r == 2 then assert.is_near(1, d, 1e-6)
      elseif r == 5 then assert.is_near(2, d, 1e-6)
      else assert.are.equal(0, d) end
    end
    local h = nn.Embedding(6, 3)
    h:initialize()
    local ref = h(ids)
    h:hybridize()
    close(h(ids), ref)
    close(h(ids), ref)
  end)

  it("errors: bad dims, unknown options, ids out of range at the caller's line", function()
    local ok, err = pcall(nn.Embedding, 0, 3)
    assert.is_false(ok)
    assert.is_truthy(err:find("Embedding: input_dim must be a positive integer", 1, true), err)
    ok, err = pcall(nn.Embedding, 3, 2, { nope = 1 })
    assert.is_false(ok)
    assert.is_truthy(err:find("nope", 1, true), err)
    local e = nn.Embedding(3, 2)
    e:initialize()
    local ids = nd.array({ 3 })
    local line = debug.getinfo(1, "l").currentline + 1
    local msg = err_at(function() local r = e(ids):tolist() return r end, line)
    assert.is_truthy(msg:find("is not a token id in [0, 3)", 1, true), msg)
    line = debug.getinfo(1, "l").currentline + 1
    msg = err_at(function() local r = e("x") return r end, line)
    assert.is_truthy(msg:find("Embedding: input must be a tensor", 1, true), msg)
  end)
end)
