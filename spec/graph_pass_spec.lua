-- The graph passes (core/src/graph_pass.c, graph_fuse.c, graph_fuse_act.c): each on its own, a graph in
-- and a graph out, and the optimised graph gives the unoptimised graph's values.
local mx = require("mx")
local G = require("spec.helpers.graphs")
local nd = mx.nd
local lib = require("mx.core.lib")
local C = lib.C

local function close(a, b, tol)
  a, b = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  assert.equal(#a, #b)
  for i = 1, #a do assert.near(a[i], b[i], tol or 1e-5 * math.max(1, math.abs(a[i]))) end
end

local function count(list, name)
  local n = 0
  for _, v in ipairs(list) do if v == name then n = n + 1 end end
  return n
end

-- same values from g and from pass(g)
local function same_values(g, g2, inputs, nout, tol)
  local e1 = assert(G.compile(g, inputs))
  local e2 = assert(G.compile(g2, inputs))
  local a, b = assert(G.run(e1, inputs, nout)), assert(G.run(e2, inputs, nout))
  for k = 1, nout do close(a[k], b[k], tol) end
end

describe("graph passes", function()
  it("dce drops ops no output needs and keeps the variables", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local y = G.var(g, "unused_input")
    local a = G.op(g, "a", "exp", { x })
    G.op(g, "dead", "sin", { a })
    G.op(g, "dead2", "cos", { y })
    local r = G.op(g, "r", "relu", { a })
    G.heads(g, { r })
    local g2 = assert(G.pass(g, "dce"))
    assert.same({ "var", "var", "exp", "relu" }, G.ops(g2))
    same_values(g, g2, { nd.array({ -1, 0.5 }), nd.ones({ 2 }) }, 1)
  end)

  it("cse merges equal ops on equal inputs, never random draws", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local a = G.op(g, "a", "exp", { x })
    local b = G.op(g, "b", "exp", { x })
    local s = G.op(g, "s", "elemwise_add", { a, b })
    local c1 = G.op(g, "c1", "_plus_scalar", { s }, { scalar = 1 })
    local c2 = G.op(g, "c2", "_plus_scalar", { s }, { scalar = 2 })
    local d1 = G.op(g, "d1", "Dropout", { c1 }, { p = 0.5, mode = "always" })
    local d2 = G.op(g, "d2", "Dropout", { c1 }, { p = 0.5, mode = "always" })
    G.heads(g, { c2, d1, d2 })
    local g2 = assert(G.pass(g, "cse"))
    local ops = G.ops(g2)
    assert.equal(1, count(ops, "exp"))
    assert.equal(2, count(ops, "add_scalar")) -- different scalars stay apart
    assert.equal(2, count(ops, "dropout"))
    local x1 = nd.array({ 0.1, 0.2 })
    local e = assert(G.compile(g2, { x1 }))
    close(assert(G.run(e, { x1 }, 3))[1], nd.exp(x1) * 2 + 2)
  end)

  it("fold evaluates what depends only on constants", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local c = G.var(g, "c", nd.array({ -2, 3 }))
    local r = G.op(g, "r", "relu", { c })
    local s = G.op(g, "s", "_mul_scalar", { r }, { scalar = 10 })
    local o = G.op(g, "o", "elemwise_add", { x, s })
    G.heads(g, { o })
    local g2 = assert(G.pass(g, "fold"))
    assert.same({ "var", "var", "var", "var", "add" }, G.ops(g2))
    local x1 = nd.array({ 1, 1 })
    same_values(g, g2, { x1 }, 1)
    close(assert(G.run(assert(G.compile(g2, { x1 })), { x1 }, 1))[1], nd.array({ 1, 31 }))
  end)

  it("fuse turns a chain of elementwise ops (broadcasting included) into one node", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local bias = G.var(g, "bias")
    local a = G.op(g, "a", "broadcast_add", { x, bias })
    local b = G.op(g, "b", "tanh", { a })
    local c = G.op(g, "c", "_mul_scalar", { b }, { scalar = 3 })
    local d = G.op(g, "d", "sigmoid", { c })
    local e_ = G.op(g, "e", "broadcast_mul", { d, x })
    local f = G.op(g, "f", "_rminus_scalar", { e_ }, { scalar = 1 })
    G.heads(g, { f })
    mx.random.seed(3)
    local xs, bs = nd.random.normal(0, 1, { 3, 5 }), nd.random.normal(0, 1, { 1, 5 })
    local g2 = assert(G.pass(g, "fuse", G.infer(g, { xs, bs })))
    assert.same({ "var", "var", "fused" }, G.ops(g2))
    assert.equal(6, C.mx_graph_node_fused_size(g2, 2))
    same_values(g, g2, { xs, bs }, 1, 1e-5)
  end)

  it("fuse keeps an intermediate that something else reads", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local a = G.op(g, "a", "exp", { x })
    local b = G.op(g, "b", "negative", { a })
    local c = G.op(g, "c", "sum", { a }) -- not elementwise: a is needed outside
    local d = G.op(g, "d", "relu", { b })
    G.heads(g, { c, d })
    local xs = nd.array({ 0.5, -1, 2 })
    local g2 = assert(G.pass(g, "fuse", G.infer(g, { xs })))
    assert.same({ "var", "exp", "sum", "fused" }, G.ops(g2))
    same_values(g, g2, { xs }, 2)
  end)

  it("fold_bn folds an inference BatchNorm into the convolution before it", function()
    mx.random.seed(4)
    for _, no_bias in ipairs({ false, true }) do
      for _, fix_gamma in ipairs({ false, true }) do
        local g = G.graph()
        local x = G.var(g, "data")
        local w = G.var(g, "w")
        local ins = { x, w }
        if not no_bias then ins[3] = G.var(g, "b") end
        local cv = G.op(g, "conv", "Convolution", ins, { kernel = "(3, 3)", num_filter = 4,
          pad = "(1, 1)", no_bias = no_bias and "True" or "False" })
        local gm, bt = G.var(g, "gamma"), G.var(g, "beta")
        local mm, mv = G.var(g, "mean"), G.var(g, "var")
        local bn = G.op(g, "bn", "BatchNorm", { cv, gm, bt, mm, mv },
          { eps = 0.001, fix_gamma = fix_gamma and "True" or "False" })
        local r = G.op(g, "relu", "relu", { bn })
        G.heads(g, { r })
        local inputs = { nd.random.normal(0, 1, { 2, 3, 6, 6 }), nd.random.normal(0, 0.3, { 4, 3, 3, 3 }) }
        if not no_bias then inputs[3] = nd.random.normal(0, 1, { 4 }) end
        for _, t in ipairs({ nd.random.uniform(0.5, 1.5, { 4 }), nd.random.normal(0, 1, { 4 }),
            nd.random.normal(0, 1, { 4 }), nd.random.uniform(0.5, 2, { 4 }) }) do
          inputs[#inputs + 1] = t
        end
        local g2 = assert(G.pass(g, "fold_bn", G.infer(g, inputs)))
        local ops = G.ops(g2)
        assert.equal(0, count(ops, "batch_norm"))
        assert.equal(1, count(ops, "convolution"))
        same_values(g, g2, inputs, 1, 1e-4)
      end
    end
  end)

  it("fold_bn leaves a BatchNorm in train mode and one whose convolution is read elsewhere", function()
    local g = G.graph()
    local x, w = G.var(g, "data"), G.var(g, "w")
    local cv = G.op(g, "conv", "Convolution", { x, w },
      { kernel = "(1, 1)", num_filter = 2, no_bias = "True" })
    local vs = { G.var(g, "gamma"), G.var(g, "beta"), G.var(g, "mean"), G.var(g, "var") }
    local bn = G.op(g, "bn", "BatchNorm", { cv, vs[1], vs[2], vs[3], vs[4] })
    G.heads(g, { bn, cv })
    local inputs = { nd.ones({ 1, 2, 2, 2 }), nd.ones({ 2, 2, 1, 1 }), nd.ones({ 2 }), nd.zeros({ 2 }),
      nd.zeros({ 2 }), nd.ones({ 2 }) }
    local g2 = assert(G.pass(g, "fold_bn", G.infer(g, inputs)))
    assert.equal(1, count(G.ops(g2), "batch_norm"))
  end)

  it("fuse_act gives convolutions their relu / clip(0, 6) and residual add (convolution_sum)", function()
    mx.random.seed(8)
    local conv = { kernel = "(3, 3)", num_filter = 4, pad = "(1, 1)", no_bias = "False" }
    local g = G.graph()
    local x, w1, b1 = G.var(g, "data"), G.var(g, "w1"), G.var(g, "b1")
    local w2, b2, w3 = G.var(g, "w2"), G.var(g, "b2"), G.var(g, "w3")
    local c1 = G.op(g, "c1", "Convolution", { x, w1, b1 }, conv)
    local r1 = G.op(g, "r1", "Activation", { c1 }, { act_type = "relu" })
    local c2 = G.op(g, "c2", "Convolution", { r1, w2, b2 }, conv)
    local s = G.op(g, "s", "elemwise_add", { r1, c2 }) -- the residual first: either side fuses
    local r2 = G.op(g, "r2", "relu", { s })
    local c3 = G.op(g, "c3", "Convolution", { r2, w3 },
      { kernel = "(1, 1)", num_filter = 4, no_bias = "True" })
    local r3 = G.op(g, "r3", "clip", { c3 }, { a_min = 0, a_max = 6 })
    G.heads(g, { r3 })
    local inputs = { nd.random.normal(0, 1, { 2, 4, 5, 5 }), nd.random.normal(0, 0.5, { 4, 4, 3, 3 }),
      nd.random.normal(0, 1, { 4 }), nd.random.normal(0, 0.5, { 4, 4, 3, 3 }),
      nd.random.normal(0, 1, { 4 }), nd.random.normal(0, 3, { 4, 4, 1, 1 }) }
    local g2 = assert(G.pass(g, "fuse_act", G.infer(g, inputs)))
    assert.same({ "var", "var", "var", "var", "var", "var", "convolution", "convolution_sum",
      "convolution" }, G.ops(g2))
    same_values(g, g2, inputs, 1, 1e-4)
  end)

  it("fuse_act gives an inference BatchNorm its relu, and leaves what it must", function()
    mx.random.seed(9)
    local g = G.graph()
    local x = G.var(g, "data")
    local vs = { G.var(g, "gamma"), G.var(g, "beta"), G.var(g, "mean"), G.var(g, "var") }
    local bn = G.op(g, "bn", "BatchNorm", { x, vs[1], vs[2], vs[3], vs[4] }, { fix_gamma = "False" })
    local r = G.op(g, "r", "Activation", { bn }, { act_type = "relu" })
    -- a convolution whose output is also a head keeps its relu apart
    local w = G.var(g, "w")
    local cv = G.op(g, "cv", "Convolution", { r, w }, { kernel = "(1, 1)", num_filter = 3, no_bias = "True" })
    local r2 = G.op(g, "r2", "relu", { cv })
    G.heads(g, { r2, cv })
    local inputs = { nd.random.normal(0, 1, { 2, 3, 4, 4 }), nd.random.uniform(0.5, 1.5, { 3 }),
      nd.random.normal(0, 1, { 3 }), nd.random.normal(0, 1, { 3 }), nd.random.uniform(0.5, 2, { 3 }),
      nd.random.normal(0, 1, { 3, 3, 1, 1 }) }
    local g2 = assert(G.pass(g, "fuse_act", G.infer(g, inputs)))
    local ops = G.ops(g2)
    assert.equal(1, count(ops, "batch_norm"))
    assert.equal(0, count(ops, "activation"))
    assert.equal(1, count(ops, "relu"))
    same_values(g, g2, inputs, 2, 1e-4)
  end)

  it("the executor's optimised graph gives the plain graph's values (MLP with a constant)", function()
    local g = G.graph()
    local x = G.var(g, "data")
    local w1, b1 = G.var(g, "w1"), G.var(g, "b1")
    local fc = G.op(g, "fc", "FullyConnected", { x, w1, b1 }, { num_hidden = 8 })
    local a = G.op(g, "a", "tanh", { fc })
    local k = G.var(g, "k", nd.array({ 2 }))
    local kk = G.op(g, "kk", "_plus_scalar", { k }, { scalar = 1 })
    local m = G.op(g, "m", "broadcast_mul", { a, kk })
    local s = G.op(g, "s", "sigmoid", { m })
    G.heads(g, { s })
    mx.random.seed(6)
    local inputs = { nd.random.normal(0, 1, { 4, 5 }), nd.random.normal(0, 1, { 8, 5 }),
      nd.random.normal(0, 1, { 8 }) }
    local plain = assert(G.run(assert(G.compile(g, inputs)), inputs, 1))[1]
    local opt = assert(G.run(assert(G.compile(g, inputs, C.MX_GRAPH_OPTIMIZE)), inputs, 1))[1]
    close(plain, opt)
  end)

  it("names unknown passes and the passes that need descriptors", function()
    local g = G.graph()
    G.heads(g, { G.var(g, "x") })
    local r, err = G.pass(g, "inline")
    assert.is_nil(r)
    assert.matches("unknown graph pass 'inline'", err)
    r, err = G.pass(g, "fuse")
    assert.is_nil(r)
    assert.matches("fuse: needs the graph's inferred descriptors", err)
  end)
end)
