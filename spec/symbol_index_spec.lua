-- The index-valued ops in symbol JSON against real MXNet 1.9.1 (mx.graph.index_ops):
-- MXNet's file of pick, take, topk, argmax, argmax_channel, argsort, gather_nd, one_hot,
-- shape_array, size_array (spec/fixtures/index_ops_mxnet*, made by
-- tools/fixtures/make_index_ops_fixture.py) runs here to MXNet's 0-based outputs; luamx's
-- sym:save of the same ops (tools/fixtures/index_ops_nets.lua) is the very text MXNet
-- loaded and ran to luamx's 1-based outputs (spec/fixtures/index_ops_check.lua); a luamx
-- file reads back to the graph that wrote it; mx.sym's shape_array, size_array and
-- argmax_channel infer, bind, hybridize and export.
local mx = require("mx")
local nd, sym, gluon = mx.nd, mx.sym, mx.gluon

local FIX = "spec/fixtures/"

local function same(a, b)
  assert.equal(b:dtype(), a:dtype())
  assert.same(b:shape(), a:shape())
  assert.same(b:astype("float64"):tolist(), a:astype("float64"):tolist())
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local tmp = os.tmpname()
teardown(function()
  os.remove(tmp)
  os.remove(tmp .. "-symbol.json")
  os.remove(tmp .. "-0000.params")
end)

describe("index ops in symbol JSON", function()
  it("MXNet 1.9.1's file runs to MXNet's outputs (0-based positions, its dtypes)", function()
    local s = sym.load(FIX .. "index_ops_mxnet-symbol.json")
    local io = nd.load(FIX .. "index_ops_mxnet.params")
    local args = {}
    for _, n in ipairs(s:list_arguments()) do args[n] = io[n] end
    local ex = s:bind(mx.cpu(), args)
    ex:forward()
    assert.equal(15, #ex.outputs)
    for k, o in ipairs(ex.outputs) do same(o, io["o" .. k]) end
    -- MXNet's output names (topk's second output of two: topk1_indices_output)
    assert.equal("argmax1_output", s:list_outputs()[6])
    -- and the inferred dtypes are MXNet's (float32 positions of argmax, topk, argsort)
    local _, types = s:infer_type { x = "float32", i = "int64", j = "int64", g = "int64" }
    assert.equal("float32", types[6])
    assert.equal("float32", types[9])
    assert.equal("int64", types[14])
  end)

  it("luamx's file is the one MXNet 1.9.1 ran to luamx's 1-based outputs", function()
    local verdict = dofile(FIX .. "index_ops_check.lua")
    assert.is_true(verdict.ok)
    local net = dofile("tools/fixtures/index_ops_nets.lua").build(mx)
    -- (rerun make_index_ops_fixture.py when the writer changes on purpose)
    assert.equal(verdict.json, net:tojson())
    assert.equal(verdict.outputs, #net.outputs)
    -- the conversions are there: MXNet's ops on positions - 1, and + 1 after
    assert.truthy(verdict.json:find('"op":"_minus_scalar","name":"pick0_index0"', 1, true))
    assert.truthy(verdict.json:find('"op":"argmax","name":"argmax1_0based"', 1, true))
    assert.truthy(verdict.json:find(
      '"op":"topk","name":"topk0_0based","attrs":{"axis":"1","k":"2","dtype":"int64"}', 1, true))
  end)

  it("a luamx file reads back to the graph that wrote it", function()
    local net, args = dofile("tools/fixtures/index_ops_nets.lua").build(mx)
    net:save(tmp)
    local back = sym.load(tmp)
    assert.same(net:list_outputs(), back:list_outputs())
    assert.equal(#net:_topo(), #back:_topo())
    local names, bnames = {}, {}
    for _, n in ipairs(net:_topo()) do names[#names + 1] = n.name end
    for _, n in ipairs(back:_topo()) do bnames[#bnames + 1] = n.name end
    assert.same(names, bnames)
    local e1, e2 = net:bind(mx.cpu(), args), back:bind(mx.cpu(), args)
    e1:forward()
    e2:forward()
    for k, o in ipairs(e1.outputs) do same(e2.outputs[k], o) end
    -- a second write is the first one
    assert.equal(net:tojson(), back:tojson())
  end)

  it("an index op read from MXNet's file writes back as MXNet's", function()
    local s = sym.load(FIX .. "index_ops_mxnet-symbol.json")
    local back = sym.fromjson(s:tojson())
    local io = nd.load(FIX .. "index_ops_mxnet.params")
    local args = {}
    for _, n in ipairs(back:list_arguments()) do args[n] = io[n] end
    local ex = back:bind(mx.cpu(), args)
    ex:forward()
    for k, o in ipairs(ex.outputs) do same(o, io["o" .. k]) end
  end)
end)

describe("the C runtime and index ops", function()
  local RT = require("mx.serve.runtime")
  local INPUTS = { { name = "x", shape = { 3, 4 } }, { name = "i", shape = { 3 }, dtype = "int64" },
    { name = "j", shape = { 2, 2 }, dtype = "int64" }, { name = "g", shape = { 2, 3 }, dtype = "int64" } }

  it("runs MXNet's file to MXNet's outputs (the same conversions as mx.sym's reader)", function()
    local m = RT.load { symbol = FIX .. "index_ops_mxnet-symbol.json", inputs = INPUTS }
    local io = nd.load(FIX .. "index_ops_mxnet.params")
    local outs = m:forward { x = io.x, i = io.i, j = io.j, g = io.g }
    assert.equal(15, #outs)
    for k = 1, 15 do same(outs[k], io["o" .. k]) end
  end)

  it("runs luamx's file to luamx's outputs", function()
    local net, args = dofile("tools/fixtures/index_ops_nets.lua").build(mx)
    net:save(tmp)
    local ex = net:bind(mx.cpu(), args)
    ex:forward()
    local m = RT.load { symbol = tmp, inputs = {
      { name = "x", shape = { 3, 4 } }, { name = "i", shape = { 3 }, dtype = "int64" },
      { name = "j", shape = { 2, 2 }, dtype = "int64" }, { name = "g", shape = { 2, 3 }, dtype = "int64" } } }
    local outs = m:forward(args)
    assert.equal(#ex.outputs, #outs)
    for k, o in ipairs(ex.outputs) do same(outs[k], o) end
  end)
end)

describe("mx.sym shape_array, size_array, argmax_channel", function()
  local x = sym.var("x")
  local g = sym.Group { sym.shape_array(x), sym.size_array(x), sym.argmax_channel(x),
    x:shape_array(), x:argmax_channel() }

  it("infer shapes and dtypes", function()
    local _, o = g:infer_shape { x = { 2, 3, 4 } }
    assert.same({ { 3 }, { 1 }, { 2, 3 }, { 3 }, { 2, 3 } }, o)
    local _, t = g:infer_type { x = "float32" }
    assert.same({ "int64", "int64", "int64", "int64", "int64" }, t)
    local _, t16 = g:infer_type { x = "float16" }
    assert.same({ "int64", "int64", "int64", "int64", "int64" }, t16)
  end)

  it("bind and eval as mx.nd's", function()
    local X = nd.array({ { 1, 5, 2 }, { 7, 0, 3 } })
    local ex = g:bind(mx.cpu(), { x = X })
    ex:forward()
    same(ex.outputs[1], nd.shape_array(X))
    assert.same({ 2, 3 }, ex.outputs[1]:tolist())
    same(ex.outputs[2], nd.size_array(X))
    assert.same({ 6 }, ex.outputs[2]:tolist())
    same(ex.outputs[3], nd.argmax_channel(X))
    assert.same({ 2, 1 }, ex.outputs[3]:tolist())
    assert.truthy(g:list_outputs()[3]:match("^argmax_channel%d+_output$"))
  end)

  it("hybridize and export (MXNet's shape_array and size_array ops)", function()
    local B = gluon.HybridBlock:extend("ShapeOps")
    function B.forward(_, y)
      return nd.concat({ nd.shape_array(y), nd.size_array(y), nd.argmax_channel(y) }, { dim = 1 })
    end
    local b = B()
    b:hybridize()
    local X = nd.array({ { 1, 5, 2 }, { 7, 0, 3 } })
    local want = b(X)
    assert.same({ 2, 3, 6, 2, 1 }, want:tolist())
    local sf, pf = b:export(tmp)
    local js = read(sf)
    assert.truthy(js:find('"op":"shape_array"', 1, true) and js:find('"op":"size_array"', 1, true))
    local twin = gluon.SymbolBlock.imports(sf, { "data" }, pf)
    same(twin(X), want)
  end)

  it("argmax_channel: errors name it", function()
    assert.has_error(function() sym.argmax_channel(x, { axis = 1 }) end,
      "argmax_channel: unknown option 'axis' (valid: name, attr)")
    assert.has_error(function() sym.argmax_channel(5) end,
      "argmax_channel: data must be a Symbol, got number")
  end)
end)
