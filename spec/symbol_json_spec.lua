-- Symbol JSON both ways against real MXNet 1.9.1 (spec/fixtures/sym_*, made by
-- tools/fixtures/make_symbol_fixture.py): files MXNet wrote load here with MXNet's
-- arguments, outputs, auxiliary states, internals and inferred shapes/dtypes; files
-- luamx writes (tools/fixtures/symbol_nets.lua) are byte for byte the ones MXNet loaded
-- with the answers recorded; malformed files fail with a clear message.
local mx = require("mx")
local expect = dofile("spec/fixtures/sym_expect.lua")
local nets = dofile("tools/fixtures/symbol_nets.lua")

local FIX = "spec/fixtures/"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- Compares every answer of MXNet's with ours for symbol s.
local function same_as_mxnet(s, e)
  assert.same(e.arguments, s:list_arguments())
  assert.same(e.outputs, s:list_outputs())
  assert.same(e.aux, s:list_auxiliary_states())
  assert.same(e.inputs, s:list_inputs())
  assert.same(e.internals, s:get_internals():list_outputs())
  local a, o, x = s:infer_shape(e.in_shapes)
  assert.same(e.arg_shapes, a)
  assert.same(e.out_shapes, o)
  assert.same(e.aux_shapes, x)
  local types = {}
  for k in pairs(e.in_shapes) do types[k] = "float32" end
  local ta, tout = s:infer_type(types)
  assert.same(e.arg_types, ta)
  assert.same(e.out_types, tout)
end

describe("symbol JSON written by MXNet 1.9.1", function()
  for _, name in ipairs { "mlp", "cnn", "misc", "var", "resnet18" } do
    it("loads " .. name .. " with MXNet's lists and inferred shapes and types", function()
      local s = mx.sym.load(FIX .. "sym_" .. name .. "-symbol.json")
      same_as_mxnet(s, expect[name])
    end)
  end

  it("reads the pre-1.0 form (param / attr, backward_source_id) as the same graph", function()
    local old = mx.sym.load(FIX .. "sym_legacy-symbol.json")
    assert.is_truthy(read(FIX .. "sym_legacy-symbol.json"):find('"param"', 1, true))
    same_as_mxnet(old, expect.mlp)
    assert.equal(mx.sym.load(FIX .. "sym_mlp-symbol.json"):tojson(), old:tojson())
  end)

  it("keeps variable attributes and turns params into 1-based Lua options", function()
    local s = mx.sym.load(FIX .. "sym_var-symbol.json")
    local w = s:get_internals()[1]
    assert.equal("w", w:name())
    assert.equal("(3, 4)", w:attr("__shape__"))
    assert.equal("2.0", w:attr("__lr_mult__"))
    assert.equal("calm", w:attr("mood"))
    local bn = mx.sym.load(FIX .. "sym_cnn-symbol.json"):get_internals()["bn1_output"]
    local node = bn.outputs[1][1]
    assert.equal("batch_norm", node.op.name)
    assert.equal(2, node.opts.axis) -- MXNet's axis 1
    assert.is_false(node.opts.fix_gamma)
    assert.near(1e-5, node.opts.eps, 1e-12)
    local tr = mx.sym.load(FIX .. "sym_misc-symbol.json"):get_internals()["tr_output"]
    assert.same({ 1, 3, 2 }, tr.outputs[1][1].opts.axes) -- MXNet's (0, 2, 1)
  end)

  it("writes what it read: a second round trip gives the same text", function()
    for _, name in ipairs { "mlp", "cnn", "misc", "var", "legacy", "resnet18" } do
      local once = mx.sym.load(FIX .. "sym_" .. name .. "-symbol.json"):tojson()
      assert.equal(once, mx.sym.fromjson(once):tojson())
    end
  end)
end)

describe("symbol JSON written by luamx", function()
  local built = nets.build(mx)
  for _, name in ipairs { "mlp", "cnn", "misc" } do
    it(name .. ": the text MXNet 1.9.1 loaded, and MXNet's answers", function()
      local s = built[name].sym
      assert.equal(read(FIX .. "sym_luamx_" .. name .. "-symbol.json"), s:tojson())
      same_as_mxnet(s, expect["luamx_" .. name])
      same_as_mxnet(mx.sym.fromjson(s:tojson()), expect["luamx_" .. name])
    end)
  end

  it("saves atomically and loads back", function()
    local path = os.tmpname()
    built.mlp.sym:save(path)
    assert.same(built.mlp.sym:list_arguments(), mx.sym.load(path):list_arguments())
    os.remove(path)
    assert.has_error(function() built.mlp.sym:save("/nonexistent-dir/x.json") end)
  end)
end)

describe("symbol JSON reader", function()
  local good = read(FIX .. "sym_mlp-symbol.json")
  local function fails(js, pattern)
    local ok, err = pcall(mx.sym.fromjson, js)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
  end

  it("names malformed JSON's line", function()
    fails(good:sub(1, 200), "symbol JSON: malformed at line")
    fails("", "malformed")
    fails("[1, 2]", "top level must be an object")
    fails("{}", "\"nodes\" must be an array")
  end)

  it("names an unknown op and its node", function()
    fails(good:gsub('"Activation"', '"NoSuchOp"', 1), "unknown op 'NoSuchOp'")
    fails(good:gsub('"Activation"', '"NoSuchOp"', 1), "'relu1'")
  end)

  it("rejects references forward, out of range outputs and bad heads", function()
    fails(good:gsub("%[%[0, 0, 0%], %[1, 0, 0%], %[2, 0, 0%]%]", "[[9, 0, 0], [1, 0, 0], [2, 0, 0]]", 1),
      "node index must be an integer in 0..2")
    fails(good:gsub("%[%[0, 0, 0%], %[1, 0, 0%], %[2, 0, 0%]%]", "[[0, 3, 0], [1, 0, 0], [2, 0, 0]]", 1),
      "output index")
    fails(good:gsub('"heads": %[%[(%d+)', '"heads": [[99', 1), "heads[0]")
    fails(good:gsub('"heads": %[%[[^%]]*%]%]', '"heads": []', 1), "\"heads\" must be a non-empty")
    fails(good:gsub('"arg_nodes": %[0', '"arg_nodes": [3', 1), "arg_nodes[0]")
    fails(good:gsub('"node_row_ptr": %[%s*0', '"node_row_ptr": [5', 1), "node_row_ptr[0]")
  end)

  it("checks field types and op attributes", function()
    fails(good:gsub('"name": "fc1"', '"name": 7', 1), "\"name\" must be a string")
    fails(good:gsub('"num_hidden": "16"', '"num_hidden": 16', 1), "attrs.num_hidden must be a string")
    fails(good:gsub('"num_hidden": "16"', '"num_hidden": "many"'), "num_hidden=\"many\"")
    fails(good:gsub('"act_type": "relu"', '"act_type": "relu", "bogus": "1"', 1), "unknown attribute bogus")
    fails(good:gsub('"inputs": %[%]', '"inputs": [[0, 0, 0]]', 1), "has no inputs")
    fails('{"nodes": [{"op": "null", "name": "x"}], "heads": [[0, 0, 0]], '
      .. '"attrs": {"mxnet_version": 5}}', "mxnet_version")
  end)
end)

describe("symbol JSON details", function()
  it("gives old-style attr keys their underscores and keeps user attributes", function()
    local js = [==[{"nodes": [
      {"op": "null", "name": "w", "attr": {"lr_mult": "2", "ctx_group": "dev1", "mine": "x"},
       "inputs": [], "backward_source_id": -1},
      {"op": "null", "name": "d", "param": {}, "inputs": []},
      {"op": "FullyConnected", "name": "fc", "param": {"num_hidden": "3", "no_bias": "True"},
       "attr": {"wd_mult": "0", "note": "n"}, "inputs": [[1, 0], [0, 0]],
       "backward_source_id": -1}],
      "arg_nodes": [0, 1], "heads": [[2, 0]]}]==]
    local s = mx.sym.fromjson(js)
    local w = s:get_internals()["w"]
    assert.equal("2", w:attr("__lr_mult__"))
    assert.equal("dev1", w:attr("__ctx_group__"))
    assert.equal("x", w:attr("mine"))
    assert.equal("0", s:attr("__wd_mult__"))
    assert.equal("n", s:attr("__note__")) -- op nodes keep only __x__ keys (MXNet refuses others)
    assert.equal(s:tojson(), mx.sym.fromjson(s:tojson()):tojson())
    assert.same({ "d", "w" }, s:list_arguments())
    local _, o = s:infer_shape { d = { 2, 5 } }
    assert.same({ { 2, 3 } }, o)
  end)

  it("accepts and drops the attributes MXNet writes that change nothing here", function()
    local js = [==[{"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "Dropout", "name": "d", "attrs": {"p": "0.3", "cudnn_off": "False"},
       "inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]}]==]
    local s = mx.sym.fromjson(js)
    assert.equal("0.3", s:attr("p"))
    assert.is_nil(s:tojson():find("cudnn_off", 1, true))
  end)

  it("keeps heads on hidden outputs and counted outputs", function()
    local x = mx.sym.var("x")
    local t = mx.sym.topk(x, { k = 2, ret_typ = "both", name = "t" })
    assert.same({ "t_output0", "t_output1" }, t:list_outputs())
    local back = mx.sym.fromjson(t:tojson())
    assert.same(t:list_outputs(), back:list_outputs())
    local bn = mx.sym.BatchNorm(x, { name = "bn" }).outputs[1][1]
    local mean = mx.sym._node_symbol(bn, 2)
    assert.same({ "bn_mean" }, mean:list_outputs())
    local js = mean:tojson()
    assert.matches('"heads": %[%[5,1,0%]%]', js)
    assert.same({ "bn_mean" }, mx.sym.fromjson(js):list_outputs())
  end)
end)
