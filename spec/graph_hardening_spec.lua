-- Adversarial graphs through the C API (core/src/graph*.c, kernels/cpu/fused.c): odd
-- heads, long and wide elementwise chains, broadcasting and size-0 fusion, non-float32
-- graphs, out= aliasing inputs, queued runs, failing nodes. Every case checks values.
local mx = require("mx")
local G = require("spec.helpers.graphs")
local nd = mx.nd
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

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

-- heads given as {node, out} pairs
local function heads2(g, list)
  local nodes, outs = {}, {}
  for i, h in ipairs(list) do nodes[i], outs[i] = h, 0 end
  assert(C.mx_graph_set_heads(g, #list, G.ints(nodes), G.ints(outs)) == 0, G.last_error())
end

-- runs e with explicit out= slots (nil entries: new tensors); returns the outputs
local function run_into(e, inputs, outs_given, nout)
  local ins = ffi.new("mx_tensor*[?]", math.max(#inputs, 1))
  for i = 1, #inputs do ins[i - 1] = inputs[i].h end
  local outs = ffi.new("mx_tensor*[?]", nout)
  for k = 1, nout do
    if outs_given[k] then outs[k - 1] = outs_given[k].h end
  end
  local rc = C.mx_graph_exec_run(e, #inputs, ins, nout, outs)
  if rc ~= 0 then return nil, G.last_error() end
  local r = {}
  for k = 1, nout do
    if outs_given[k] then r[k] = outs_given[k]
    else r[k] = nd._wrap(outs[k - 1]) end
  end
  return r
end

local FLAGS = { 0, C.MX_GRAPH_OPTIMIZE, C.MX_GRAPH_OPTIMIZE + C.MX_GRAPH_STATIC_ALLOC }

describe("graph hardening: heads", function()
  it("a graph with no heads: the passes keep its variables, the executor refuses it", function()
    local g = G.graph()
    local x = G.var(g, "x")
    G.op(g, "a", "exp", { x })
    for _, p in ipairs({ "dce", "cse", "fold" }) do
      local g2, err = G.pass(g, p)
      assert(g2, err)
      assert.equal(0, C.mx_graph_num_heads(g2))
      assert.equal(1, count(G.ops(g2), "var"))
    end
    assert(G.pass(g, "fuse", G.infer(g, { nd.ones({ 2 }) })))
    for _, f in ipairs(FLAGS) do
      local e, err = G.compile(g, { nd.ones({ 2 }) }, f)
      assert.is_nil(e)
      assert.matches("the graph has no outputs", err)
    end
  end)

  it("heads that are variables are copies of the inputs", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local y = G.var(g, "y")
    local a = G.op(g, "a", "elemwise_mul", { x, y })
    heads2(g, { x, a, y })
    local xv, yv = nd.array({ 1, 2, 3 }), nd.array({ 4, 5, 6 })
    for _, f in ipairs(FLAGS) do
      local e = assert(G.compile(g, { xv, yv }, f))
      local r = assert(G.run(e, { xv, yv }, 3))
      assert.same({ 1, 2, 3 }, r[1]:tolist())
      assert.same({ 4, 10, 18 }, r[2]:tolist())
      assert.same({ 4, 5, 6 }, r[3]:tolist())
      r[1][1] = 100 -- a copy: the input stays
      assert.same({ 1, 2, 3 }, xv:tolist())
    end
    -- only a variable as the head
    local g2 = G.graph()
    G.heads(g2, { G.var(g2, "x") })
    local e = assert(G.compile(g2, { xv }, C.MX_GRAPH_OPTIMIZE))
    assert.same({ 1, 2, 3 }, assert(G.run(e, { xv }, 1))[1]:tolist())
  end)

  it("the same entry as two heads (an op's and a fused node's), with out= or not", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local a = G.op(g, "a", "exp", { x })
    local b = G.op(g, "b", "negative", { a })
    local c = G.op(g, "c", "sin", { b })
    local s = G.op(g, "s", "sum", { x })
    heads2(g, { c, s, c, s })
    local xv = nd.array({ 0.1, -0.4, 2 })
    local want = nd.sin(nd.neg(nd.exp(xv)))
    local wsum = xv:sum()
    for _, f in ipairs(FLAGS) do
      local e = assert(G.compile(g, { xv }, f))
      for _, given in ipairs({ {}, { nd.zeros({ 3 }), nil, nd.zeros({ 3 }) } }) do
        local r = assert(run_into(e, { xv }, given, 4))
        close(want, r[1])
        close(want, r[3])
        close(wsum, r[2])
        close(wsum, r[4])
      end
    end
  end)

  it("a fused chain whose input is also a head keeps that entry", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local a = G.op(g, "a", "exp", { x })
    local b = G.op(g, "b", "negative", { a })
    local c = G.op(g, "c", "relu", { b })
    local d = G.op(g, "d", "_plus_scalar", { c }, { scalar = 2 })
    heads2(g, { a, d })
    local xv = nd.array({ -1, 0, 1 })
    local g2 = assert(G.pass(g, "fuse", G.infer(g, { xv })))
    assert.same({ "var", "exp", "fused" }, G.ops(g2))
    assert.equal(3, C.mx_graph_node_fused_size(g2, 2))
    for _, f in ipairs(FLAGS) do
      local e = assert(G.compile(g, { xv }, f))
      local r = assert(G.run(e, { xv }, 2))
      close(nd.exp(xv), r[1])
      close(nd.relu(nd.neg(nd.exp(xv))) + 2, r[2])
    end
  end)

  it("more than 256 heads go through every pass", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local a = G.op(g, "a", "exp", { x })
    local list = {}
    for i = 1, 300 do list[i] = i % 2 == 0 and a or x end
    heads2(g, list)
    local xv = nd.array({ 0.5 })
    local e, err = G.compile(g, { xv }, C.MX_GRAPH_OPTIMIZE)
    assert(e, err)
    local r = assert(G.run(e, { xv }, 300))
    assert.near(math.exp(0.5), r[300]:tolist()[1], 1e-6)
    assert.near(0.5, r[299]:tolist()[1], 1e-7)
  end)
end)

describe("graph hardening: fusion", function()
  it("a chain of 100 elementwise ops splits into fused nodes of at most 32", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local prev = x
    for i = 1, 100 do
      prev = G.op(g, "n" .. i, i % 3 == 0 and "_mul_scalar" or "_plus_scalar", { prev },
        { scalar = i % 3 == 0 and 0.5 or 1 })
    end
    G.heads(g, { prev })
    local xv = nd.array({ 1, -2, 3.5 })
    local g2 = assert(G.pass(g, "fuse", G.infer(g, { xv })))
    local ops, total = G.ops(g2), 0
    assert.is_true(count(ops, "fused") >= 4)
    for i = 0, #ops - 1 do
      local n = C.mx_graph_node_fused_size(g2, i)
      assert.is_true(n <= 32)
      total = total + n
    end
    assert.equal(100, total)
    local want = xv
    for i = 1, 100 do want = i % 3 == 0 and want * 0.5 or want + 1 end
    for _, f in ipairs(FLAGS) do
      close(want, assert(G.run(assert(G.compile(g, { xv }, f)), { xv }, 1))[1])
    end
  end)

  it("a chain of 39 adds over 40 variables splits instead of overflowing the inputs", function()
    local g = G.graph()
    local vars, ins = {}, {}
    for i = 1, 40 do
      vars[i] = G.var(g, "x" .. i)
      ins[i] = nd.array({ i, 2 * i })
    end
    local prev = G.op(g, "a2", "elemwise_add", { vars[1], vars[2] })
    for i = 3, 40 do prev = G.op(g, "a" .. i, "elemwise_add", { prev, vars[i] }) end
    G.heads(g, { prev })
    local g2, err = G.pass(g, "fuse", G.infer(g, ins))
    assert(g2, err)
    assert.is_true(count(G.ops(g2), "fused") >= 2)
    for _, f in ipairs(FLAGS) do
      local e, cerr = G.compile(g, ins, f)
      assert(e, cerr)
      assert.same({ 820, 1640 }, assert(G.run(e, ins, 1))[1]:tolist())
    end
  end)

  it("fuses broadcast inputs of lower rank, and size-0 dims, to eager values", function()
    local function build()
      local g = G.graph()
      local x = G.var(g, "x")
      local b = G.var(g, "b")
      local a = G.op(g, "a", "broadcast_add", { x, b })
      local t = G.op(g, "t", "tanh", { a })
      local m = G.op(g, "m", "broadcast_mul", { t, b })
      local s = G.op(g, "s", "_rminus_scalar", { m }, { scalar = 1 })
      G.heads(g, { s })
      return g
    end
    mx.random.seed(11)
    local cases = {
      { { 2, 3, 4 }, { 4 } }, { { 2, 3, 4 }, { 3, 1 } }, { { 5, 1 }, { 1, 6 } },
      { { 0, 3 }, { 3 } }, { { 2, 0, 4 }, { 4 } }, { { 3, 0 }, { 1 } },
    }
    for _, cs in ipairs(cases) do
      local xv, bv = nd.random.normal(0, 1, cs[1]), nd.random.normal(0, 1, cs[2])
      local want = 1 - nd.mul(nd.tanh(nd.add(xv, bv)), bv)
      local g = build()
      local g2 = assert(G.pass(g, "fuse", G.infer(g, { xv, bv })))
      assert.equal(1, count(G.ops(g2), "fused"))
      for _, f in ipairs(FLAGS) do
        local r = assert(G.run(assert(G.compile(g, { xv, bv }, f)), { xv, bv }, 1))[1]
        assert.same(want:shape(), r:shape())
        close(want, r)
      end
    end
  end)

  it("int32 and float64 chains are not fused and keep exact values", function()
    for _, dt in ipairs({ "int32", "float64", "int64" }) do
      local g = G.graph()
      local x = G.var(g, "x")
      local a = G.op(g, "a", "_plus_scalar", { x }, { scalar = 3 })
      local b = G.op(g, "b", "_mul_scalar", { a }, { scalar = 2 })
      local c = G.op(g, "c", "elemwise_mul", { b, x })
      local d = G.op(g, "d", "negative", { c })
      G.heads(g, { d })
      local xv = nd.array({ 1, -7, 4000 }, { dtype = dt })
      local g2 = assert(G.pass(g, "fuse", G.infer(g, { xv })))
      assert.equal(0, count(G.ops(g2), "fused"))
      for _, f in ipairs(FLAGS) do
        local r = assert(G.run(assert(G.compile(g, { xv }, f)), { xv }, 1))[1]
        assert.equal(dt, r:dtype())
        local want = {}
        for i, v in ipairs({ 1, -7, 4000 }) do want[i] = -((v + 3) * 2 * v) end
        assert.same(want, r:tolist())
      end
    end
    -- float64 through transcendental ops: float64 precision, not float32's
    local g = G.graph()
    local x = G.var(g, "x")
    G.heads(g, { G.op(g, "b", "sin", { G.op(g, "a", "exp", { x }) }) })
    local xv = nd.array({ 0.3, 1.7 }, { dtype = "float64" })
    local r = assert(G.run(assert(G.compile(g, { xv }, C.MX_GRAPH_OPTIMIZE)), { xv }, 1))[1]
    assert.near(math.sin(math.exp(0.3)), r:tolist()[1], 1e-14)
    assert.near(math.sin(math.exp(1.7)), r:tolist()[2], 1e-14)
  end)
end)

describe("graph hardening: runs", function()
  local function two_heads()
    local g = G.graph()
    local x = G.var(g, "x")
    local a = G.op(g, "a", "negative", { x })
    local b = G.op(g, "b", "exp", { G.op(g, "b0", "_plus_scalar", { x }, { scalar = 1 }) })
    heads2(g, { a, b })
    return g
  end

  it("out= aliasing an input (or another out=) gives the values of fresh outputs", function()
    for _, imax in ipairs({ mx.engine.get_inline_max(), 0 }) do
      local prev = mx.engine.get_inline_max()
      mx.engine.set_inline_max(imax)
      for _, f in ipairs(FLAGS) do
        local xv = nd.array({ 1, 2, 3 })
        local e = assert(G.compile(two_heads(), { xv }, f))
        local r = assert(run_into(e, { xv }, { xv }, 2)) -- out 1 is the input itself
        assert.same({ -1, -2, -3 }, r[1]:tolist())
        close(nd.exp(nd.array({ 2, 3, 4 })), r[2])
        local yv = nd.array({ 0, 1, 2 })
        r = assert(run_into(e, { yv }, { nil, yv }, 2)) -- out 2 is the input
        assert.same({ 0, -1, -2 }, r[1]:tolist())
        close(nd.exp(nd.array({ 1, 2, 3 })), yv)
        local zv, o = nd.array({ 0, 0.5, 1 }), nd.zeros({ 3 })
        assert(run_into(e, { zv }, { o, o }, 2)) -- both outs one tensor: the last wins
        close(nd.exp(nd.array({ 1, 1.5, 2 })), o)
        assert.same({ 0, 0.5, 1 }, zv:tolist())
      end
      mx.engine.set_inline_max(prev)
    end
  end)

  it("runs one executor again while its previous run is still queued", function()
    local g = G.graph()
    local x = G.var(g, "x")
    local prev = x
    for i = 1, 12 do
      if i % 2 == 0 then prev = G.op(g, "n" .. i, "sin", { prev })
      else prev = G.op(g, "n" .. i, "_plus_scalar", { prev }, { scalar = 0.25 }) end
    end
    local s = G.op(g, "s", "sum", { prev })
    heads2(g, { prev, s })
    local imax = mx.engine.get_inline_max()
    for _, f in ipairs(FLAGS) do
      local inputs = {}
      for k = 1, 6 do inputs[k] = nd.ones({ 5000 }) * (k / 3) end
      nd.waitall()
      local e = assert(G.compile(g, { inputs[1] }, f))
      mx.engine.set_inline_max(0)
      local outs = {}
      for k = 1, 6 do outs[k] = assert(G.run(e, { inputs[k] }, 2)) end
      mx.engine.set_inline_max(imax)
      for k = 1, 6 do
        local want = k / 3
        for i = 1, 12 do want = i % 2 == 0 and math.sin(want) or want + 0.25 end
        local v = outs[k][1]:tolist()
        assert.near(want, v[1], 1e-5)
        assert.near(want, v[5000], 1e-5)
        assert.near(want * 5000, outs[k][2]:tolist()[1], 5e-2)
      end
    end
  end)

  it("a failing node raises at the sync point naming the node; the executor runs again", function()
    local g = G.graph()
    local a = G.var(g, "a")
    local i = G.var(g, "i")
    local t = G.op(g, "pick_bad", "take", { G.op(g, "e", "exp", { a }), i }, { mode = "raise" })
    G.heads(g, { G.op(g, "n", "negative", { t }) })
    local av = nd.zeros({ 3, 2 })
    local imax = mx.engine.get_inline_max()
    for _, f in ipairs(FLAGS) do
      local e = assert(G.compile(g, { av, nd.array({ 1 }) }, f))
      for _, inline in ipairs({ imax, 0 }) do
        mx.engine.set_inline_max(inline)
        local ok, err = pcall(function()
          local r, msg = G.run(e, { av, nd.array({ 7 }) }, 1)
          if not r then error(msg) end
          r[1]:wait_to_read()
        end)
        mx.engine.set_inline_max(imax)
        assert.is_false(ok)
        assert.matches("pick_bad", tostring(err))
        assert.matches("take", tostring(err))
        local r = assert(G.run(e, { av, nd.array({ 2 }) }, 1))
        assert.same({ { -1, -1 } }, r[1]:totable())
      end
    end
  end)

  it("refuses bad run arguments with clear messages", function()
    local g = two_heads()
    local xv = nd.array({ 1, 2, 3 })
    local e = assert(G.compile(g, { xv }))
    local ins = ffi.new("mx_tensor*[1]")
    local outs = ffi.new("mx_tensor*[2]")
    assert.is_true(C.mx_graph_exec_run(e, 1, ins, 2, outs) ~= 0)
    assert.matches("input 1 is NULL", G.last_error())
    ins[0] = xv.h
    assert.is_true(C.mx_graph_exec_run(e, 1, ins, 1, outs) ~= 0)
    assert.matches("1 output slots given, the graph has 2", G.last_error())
    local _, err = run_into(e, { xv }, { nd.zeros({ 4 }) }, 2)
    assert.matches("out= 1 is %(4,%), the output is %(3,%)", err)
    assert.same({ 1, 2, 3 }, xv:tolist())
  end)

  it("a node of more than 64 inputs is a clear error of fold and of the executor", function()
    local g = G.graph()
    local vars, ins = {}, {}
    for i = 1, 70 do vars[i] = G.var(g, "c" .. i, nd.array({ i })) end
    G.heads(g, { G.op(g, "s", "add_n", vars) })
    local g2, err = G.pass(g, "fold") -- its 70 constants once overflowed a 64-slot array
    assert.is_nil(g2)
    assert.matches("node 's' has too many inputs", err)
    local g3 = G.graph()
    for i = 1, 70 do
      vars[i] = G.var(g3, "x" .. i)
      ins[i] = nd.array({ i })
    end
    G.heads(g3, { G.op(g3, "s", "add_n", vars) })
    for _, f in ipairs(FLAGS) do
      local e, cerr = G.compile(g3, ins, f)
      assert.is_nil(e)
      assert.matches("'s'", cerr)
    end
  end)
end)

describe("graph hardening: mx.sym's Executor arguments", function()
  local THIS = "graph_hardening_spec.lua:"
  local function fc()
    local y = mx.sym.FullyConnected(mx.sym.var("data"), { num_hidden = 3, name = "fc" })
    return y, y:simple_bind(mx.cpu(), { data = { 2, 4 } })
  end

  it("forward names the argument whose shape or type is wrong, at the caller's line", function()
    local _, ex = fc()
    local ok, err = pcall(function() ex:forward({ data = nd.ones({ 5, 4 }) }) end)
    assert.is_false(ok)
    assert.matches(THIS, err, 1, true)
    assert.matches("'data' is (5, 4), the executor was bound for (2, 4)", err, 1, true)
    ok, err = pcall(function() ex:forward({ data = "x" }) end)
    assert.is_false(ok)
    assert.matches(THIS, err, 1, true)
    assert.matches("'data' must be an NDArray or a number, got string", err, 1, true)
    ex:forward({ data = 2 }) -- a number fills the argument
    assert.same({ 2, 2, 2, 2 }, ex.arg_dict.data:totable()[2])
  end)

  it("backward refuses a wrong number of out_grads; eval refuses non-arrays", function()
    local y, ex = fc()
    ex:forward({ is_train = true, data = nd.ones({ 2, 4 }) })
    local ok, err = pcall(function() ex:backward({ nd.ones({ 2, 3 }), nd.ones({ 2, 3 }) }) end)
    assert.is_false(ok)
    assert.matches(THIS, err, 1, true)
    assert.matches("2 out_grads for 1 outputs", err, 1, true)
    ex:backward({ nd.ones({ 2, 3 }) }) -- the recorded forward is still usable
    assert.same({ 2, 2, 2, 2 }, ex.grad_dict.fc_weight:totable()[3]) -- ones through a batch of 2
    ok, err = pcall(function()
      local r = y:eval(mx.cpu(), { data = 3, fc_weight = nd.ones({ 3, 4 }), fc_bias = nd.ones({ 3 }) })
      return r
    end)
    assert.is_false(ok)
    assert.matches(THIS, err, 1, true)
    assert.matches("the input 'data' must be an NDArray, got number", err, 1, true)
  end)
end)

describe("graph hardening: malformed symbol JSON", function()
  it("mutated files parse or fail with a message; what parses infers, passes and runs", function()
    local sym = mx.sym
    local x, z = sym.var("data"), sym.var("z")
    local base = sym.Group({ sym.sum(sym.relu(sym.exp(x * 2 + z) - z)), sym.tanh(x) * z,
      sym.sin(z) / 3 }):tojson()
    local toks = { "-1", "1e30", "null", "[]", "{}", '""', "99999999999", "0", '"x"',
      "[[0,0,0]]", "true", "2147483648", "[0,5,0]", "[1,0]" }
    local state = 12345 -- a private LCG: the cases do not depend on other specs' draws
    local function rand(n)
      state = (state * 1103515245 + 12345) % 2147483648
      return state % n + 1
    end
    local parsed, failed, ran = 0, 0, 0
    local ones = { nd.ones({ 2, 3 }), nd.ones({ 2, 3 }) }
    for _ = 1, 400 do
      local s = base
      for _ = 1, rand(3) do
        local p = rand(#s)
        local r = rand(3)
        if r == 1 then
          s = s:sub(1, p - 1) .. s:sub(p + rand(8))
        elseif r == 2 then
          local a, b = s:find("[%-%d%.e]+", p)
          if a then s = s:sub(1, a - 1) .. toks[rand(#toks)] .. s:sub(b + 1) end
        else
          s = s:sub(1, p) .. toks[rand(#toks)] .. s:sub(p + 1)
        end
      end
      local po = ffi.new("mx_graph*[1]")
      if C.mx_graph_from_json(s, po) ~= 0 then
        failed = failed + 1
        assert.is_true(#G.last_error() > 10)
      else
        parsed = parsed + 1
        local g = ffi.gc(po[0], C.mx_graph_free)
        for _, pn in ipairs({ "dce", "cse", "fold" }) do G.pass(g, pn) end
        local nvar = 0
        for i = 0, C.mx_graph_num_nodes(g) - 1 do
          if C.mx_graph_node_op(g, i) == -1 and C.mx_graph_node_value(g, i) == nil then
            nvar = nvar + 1
          end
        end
        if nvar == 2 and C.mx_graph_num_heads(g) > 0 then
          local e = G.compile(g, ones, C.MX_GRAPH_OPTIMIZE)
          if e then
            local r = G.run(e, ones, C.mx_graph_exec_num_outputs(e))
            if r then
              ran = ran + 1
              for _, t in ipairs(r) do t:wait_to_read() end
            end
          end
        end
      end
    end
    assert.equal(400, parsed + failed)
    assert.is_true(failed > 100 and parsed > 10 and ran > 0)
  end)
end)

describe("graph hardening: the fused interpreter", function()
  it("gives the unfused values for every fusible op on Inf, NaN, -0, denormals", function()
    local vals = { -2, -0.5, -0.0, 0, 0.5, 2, 1e30, -1e30, math.huge, -math.huge, 0 / 0, 1e-40,
      88, -88, 100 }
    local xv = nd.array(vals)
    local yv = nd.array({ 3, 0, -1, 0.5, -2, 0 / 0, 2, math.huge, 1, -math.huge, 1, 2, 0.5, -3, 0 })
    local cases = {}
    for _, u in ipairs({ "negative", "abs", "square", "relu", "sqrt", "rsqrt", "reciprocal", "exp",
      "log", "tanh", "sigmoid", "sin", "cos", "erf", "log1p", "expm1", "softrelu", "softsign" }) do
      cases[#cases + 1] = { u, { 1 } }
    end
    for _, b in ipairs({ "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div",
      "broadcast_maximum", "broadcast_minimum", "broadcast_power" }) do
      cases[#cases + 1] = { b, { 1, 2 } }
    end
    for _, s in ipairs({ "_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar",
      "_div_scalar", "_rdiv_scalar", "_maximum_scalar", "_minimum_scalar", "_power_scalar",
      "_rpower_scalar" }) do
      for _, sv in ipairs({ 2, -0.5, 0 }) do cases[#cases + 1] = { s, { 1 }, sv } end
    end
    local function same(a, b)
      if a ~= a then return b ~= b end
      return a == b or math.abs(a - b) <= 2e-6 * math.max(math.abs(a), math.abs(b))
    end
    for _, c in ipairs(cases) do
      local g = G.graph()
      local v = { G.var(g, "x"), G.var(g, "y") }
      local ins = {}
      for k, j in ipairs(c[2]) do ins[k] = v[j] end
      local o = G.op(g, "o", c[1], ins, c[3] and { scalar = c[3] } or nil)
      G.heads(g, { G.op(g, "z", "_mul_scalar", { o }, { scalar = 1 }) })
      local inputs = { xv, yv }
      local g2 = assert(G.pass(g, "fuse", G.infer(g, inputs)))
      assert.equal(1, count(G.ops(g2), "fused"), c[1])
      local a = assert(G.run(assert(G.compile(g, inputs)), inputs, 1))[1]:tolist()
      local b = assert(G.run(assert(G.compile(g, inputs, C.MX_GRAPH_OPTIMIZE)), inputs, 1))[1]:tolist()
      for i = 1, #a do
        assert(same(a[i], b[i]), ("%s(%s): unfused %s, fused %s"):format(c[1], vals[i], a[i], b[i]))
      end
    end
  end)
end)
