-- The graph executor's constants (core/src/graph_exec_const.c): inputs frozen into
-- constants, runs that see every write into a constant, hybridized inference on it.
local mx = require("mx")
local G = require("spec.helpers.graphs")
local nd = mx.nd
local nn = mx.gluon.nn
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

local function maxdiff(a, b) -- relative to the largest |b|
  local fa, fb = a:reshape({ -1 }):totable(), b:reshape({ -1 }):totable()
  assert.equal(#fa, #fb)
  local m, s = 0, 1e-30
  for i = 1, #fa do m, s = math.max(m, math.abs(fa[i] - fb[i])), math.max(s, math.abs(fb[i])) end
  return m / s
end

local function frozen_exec(g, inputs, frozen, flags)
  local n = #inputs
  local ins = ffi.new("mx_tensor*[?]", n)
  local fz = ffi.new("uint8_t[?]", n)
  for i = 1, n do ins[i - 1], fz[i - 1] = inputs[i].h, frozen[i] and 1 or 0 end
  local pe = ffi.new("mx_graph_exec*[1]")
  if C.mx_graph_exec_new_frozen(g, n, ins, fz, flags or 0, pe) ~= 0 then
    return nil, G.last_error()
  end
  return ffi.gc(pe[0], C.mx_graph_exec_free)
end

describe("graph executor constants", function()
  it("a frozen input is a constant every run sees as it is now", function()
    local g = G.graph()
    local x, w = G.var(g, "x"), G.var(g, "w")
    G.heads(g, { G.op(g, "y", "elemwise_mul", { x, w }) })
    local xv, wv = nd.array({ 1, 2, 3 }), nd.array({ 10, 20, 30 })
    local e = assert(frozen_exec(g, { xv, wv }, { false, true }, C.MX_GRAPH_OPTIMIZE))
    assert.equal(1, C.mx_graph_exec_num_inputs(e)) -- w is a constant now
    assert.same({ 10, 40, 90 }, G.run(e, { xv, wv }, 1)[1]:totable())
    nd.add(wv, nd.ones({ 3 }), { out = wv }) -- an op writing into it
    assert.same({ 11, 42, 93 }, G.run(e, { xv, wv }, 1)[1]:totable())
    nd.array({ 1, 1, 1 }):copyto(wv) -- a copy into it
    assert.same({ 1, 2, 3 }, G.run(e, { xv, wv }, 1)[1]:totable())
    -- another tensor in the frozen input's place becomes the constant
    local w2 = nd.array({ 2, 2, 2 })
    assert.same({ 2, 4, 6 }, G.run(e, { xv, w2 }, 1)[1]:totable())
    assert.same({ 4, 8, 12 }, G.run(e, { nd.array({ 2, 4, 6 }), w2 }, 1)[1]:totable())
  end)

  it("refuses bad arguments naming them", function()
    local g = G.graph()
    local x, w = G.var(g, "x"), G.var(g, "w")
    G.heads(g, { G.op(g, "y", "elemwise_mul", { x, w }) })
    local xv, wv = nd.array({ 1, 2 }), nd.array({ 3, 4 })
    local e0, err = frozen_exec(g, { xv }, { true })
    assert.is_nil(e0)
    assert.matches("more than the 1 inputs given", err)
    local e = assert(frozen_exec(g, { xv, wv }, { false, true }))
    local r, msg = G.run(e, { xv }, 1)
    assert.is_nil(r)
    assert.matches("1 inputs given, expects 2", msg)
    r, msg = G.run(e, { nd.array({ 1, 2, 3 }), wv }, 1)
    assert.is_nil(r)
    assert.matches("input 'x' is %(3,%) float32, compiled for %(2,%)", msg)
  end)

  -- a hybridized net against a plain one holding copies of its parameters
  local function pair()
    mx.random.seed(11)
    local function build()
      local net = nn.HybridSequential()
      net:add(nn.Conv2D(6, 3, { padding = 1 }), nn.BatchNorm(), nn.Activation("relu"),
        nn.Conv2D(4, 1), nn.BatchNorm(), nn.Dense(3))
      return net
    end
    local a, b = build(), build()
    a:initialize(mx.init.Xavier())
    local x = nd.random.uniform(0, 1, { 2, 3, 6, 6 })
    a(x)
    b:initialize()
    b(x)
    local function sync()
      local pb = b:collect_params()
      for name, p in a:collect_params():items() do pb:get(name):set_data(p:data()) end
    end
    -- BatchNorm statistics that are not the identity (a folded one must match too)
    for name, p in a:collect_params():items() do
      if name:match("running_var") or name:match("gamma") then
        p:set_data(nd.random.uniform(0.5, 2, p:data():shape()))
      elseif name:match("running_mean") or name:match("beta") then
        p:set_data(nd.random.uniform(-1, 1, p:data():shape()))
      end
    end
    a:hybridize({ static_alloc = true })
    a(x) -- (the tracing call's results are the eager ones: the comparisons are replays)
    return a, b, x, sync
  end

  it("hybridized inference matches the eager block after each kind of parameter write", function()
    local a, b, x, sync = pair()
    sync()
    assert.is_true(maxdiff(a(x), b(x)) < 1e-5) -- BatchNorm folded into the convolutions
    for name, p in a:collect_params():items() do
      if name:match("^0%.weight") then p:set_data(p:data() * 2) end
    end
    sync()
    assert.is_true(maxdiff(a(x), b(x)) < 1e-5)
    -- a training step: the optimizer's in-place updates and BatchNorm's moving statistics
    local trainer = mx.gluon.Trainer(a:collect_params(), "sgd", { learning_rate = 0.05 })
    local y0 = a(x):copy()
    mx.autograd.record(function()
      local l = a(x):square():sum()
      l:backward()
    end)
    trainer:step(2)
    sync()
    local y1 = a(x)
    assert.is_true(maxdiff(y1, b(x)) < 1e-5)
    assert.is_true(maxdiff(y1, y0) > 1e-3) -- (the step changed the result)
  end)
end)
