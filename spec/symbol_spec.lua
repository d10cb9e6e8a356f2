-- mx.sym: variables, ops under luamx and MXNet names (auto-named as MXNet, missing inputs
-- created as variables), arithmetic, groups and outputs, listing, attributes, inference
-- (complete, partial, conflicts naming the node), 1-based options to 0-based JSON, the
-- helper API (_graph, _topo, node tables) and mx_op_params_format.
local mx = require("mx")
local lib = require("mx.core.lib")
local SP = require("mx.graph.symbol_params")
local ffi, C = lib.ffi, lib.C
local S = mx.sym

local function attrs_of(js, name)
  for line in js:gmatch("[^\n]+") do
    if line:find('"name":"' .. name .. '"', 1, true) then return line end
  end
end

describe("mx.sym", function()
  before_each(function() S._reset_names() end)

  it("is mx.symbol too, and has every op under its luamx and MXNet names", function()
    assert.equal(mx.sym, mx.symbol)
    for _, op in ipairs(lib.ops) do
      assert.is_function(S[op.name], op.name)
      for _, m in ipairs(op.mxnet) do assert.is_function(S[m], m) end
    end
  end)

  it("variables keep shape, dtype, init, lr_mult, wd_mult and user attrs as MXNet", function()
    local w = S.var("w", { shape = { 3, 4 }, dtype = "float64", init = "zeros", lr_mult = 2,
      wd_mult = 0.5, attr = { mood = "calm" } })
    assert.equal("(3, 4)", w:attr("__shape__"))
    assert.equal("1", w:attr("__dtype__"))
    assert.equal("zeros", w:attr("__init__"))
    assert.equal("2.0", w:attr("__lr_mult__"))
    assert.equal("0.5", w:attr("__wd_mult__"))
    assert.equal("calm", w:attr("mood"))
    assert.equal("w", w:name())
    assert.equal(S.var, S.Variable)
    assert.has_error(function() S.var("x", { shapes = { 1 } }) end,
      "sym.var: unknown option 'shapes' (valid: shape, dtype, init, lr_mult, wd_mult, attr, stype)")
    assert.has_error(function() S.var("") end)
    assert.equal("(5,)", S.var("v", { shape = { 5 } }):attr("__shape__"))
  end)

  it("names nodes as MXNet and creates the variables of missing inputs", function()
    local x = S.var("x")
    local fc = S.FullyConnected(x, { num_hidden = 10 })
    assert.equal("fullyconnected0", fc:name())
    assert.same({ "x", "fullyconnected0_weight", "fullyconnected0_bias" }, fc:list_arguments())
    local fc1 = S.fully_connected(x, { num_hidden = 10, name = "fc1", no_bias = true })
    assert.same({ "x", "fc1_weight" }, fc1:list_arguments())
    assert.equal("fullyconnected1", S.fully_connected(x, { num_hidden = 2 }):name())
    local w = S.var("my_w")
    local fc2 = S.FullyConnected({ data = x, weight = w, num_hidden = 3, name = "fc2" })
    assert.same({ "x", "my_w", "fc2_bias" }, fc2:list_arguments())
    assert.same({ "fc2_output" }, fc2:list_outputs())
    local act = S.Activation(fc2, { act_type = "tanh" })
    assert.equal("activation0", act:name())
    assert.same({ "fc2" }, { act:get_children():name() })
    assert.is_nil(x:get_children())
  end)

  it("puts batch_norm's moving statistics in the auxiliary states, one output visible", function()
    local bn = S.BatchNorm(S.var("data"), { name = "bn" })
    assert.same({ "data", "bn_gamma", "bn_beta" }, bn:list_arguments())
    assert.same({ "bn_moving_mean", "bn_moving_var" }, bn:list_auxiliary_states())
    assert.same({ "data", "bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var" }, bn:list_inputs())
    assert.same({ "bn_output" }, bn:list_outputs())
    local bn3 = S.BatchNorm(S.var("data"), { name = "bn3", output_mean_var = true })
    assert.same({ "bn3_output", "bn3_mean", "bn3_var" }, bn3:list_outputs())
  end)

  it("has multi-output ops, s[i] (1-based), s[name], Group and get_internals", function()
    local x = S.var("x")
    local sp = S.split(x, { num_outputs = 3, axis = 2 })
    assert.same({ "split0_output0", "split0_output1", "split0_output2" }, sp:list_outputs())
    assert.equal(3, sp:num_outputs())
    assert.same({ "split0_output1" }, sp[2]:list_outputs())
    assert.has_error(function() return sp[4] end, "Symbol: output 4 out of range 1..3")
    local g = S.Group { sp[1], x }
    assert.same({ "split0_output0", "x" }, g:list_outputs())
    assert.is_nil(g:name())
    local net = S.relu(S.FullyConnected(x, { num_hidden = 4, name = "fc" }))
    local int = net:get_internals()
    assert.same({ "x", "fc_weight", "fc_bias", "fc_output", "relu0_output" }, int:list_outputs())
    assert.same({ "x", "fc_weight", "fc_bias" }, int["fc_output"]:list_arguments())
    assert.matches("<Symbol group", tostring(g))
    assert.equal("<Symbol fc>", tostring(int["fc_output"]))
    assert.has_error(function() S.relu(sp) end,
      "relu: input 1 (data) is a symbol with 3 outputs: pick one with s[i]")
  end)

  it("has arithmetic with symbols and numbers, named as MXNet's operators", function()
    local x, y = S.var("x"), S.var("y")
    assert.equal("_plus0", (x + y):name())
    assert.equal("_minus0", (x - y):name())
    assert.equal("_mul0", (x * y):name())
    assert.equal("_div0", (x / y):name())
    assert.equal("_power0", (x ^ y):name())
    assert.equal("_plusscalar0", (x + 1):name())
    assert.equal("_plusscalar1", (1 + x):name())
    assert.equal("_rminusscalar0", (2 - x):name())
    assert.equal("_rdivscalar0", (2 / x):name())
    assert.equal("_mulscalar0", (-x):name())
    local js = (2 - x):tojson()
    assert.matches('"op":"_rminus_scalar"', js)
    assert.matches('"scalar":"2"', js)
    assert.matches('"op":"broadcast_add"', (x + y):tojson())
    local _, out = (x * 2 + y):infer_shape { x = { 2, 3 }, y = { 1, 3 } }
    assert.same({ { 2, 3 } }, out)
    assert.has_error(function() return x + "a" end)
  end)

  it("converts 1-based Lua axes to MXNet's 0-based attributes and back", function()
    local x = S.var("x")
    local s = S.sum(x, { axis = { 2, -1 }, keepdims = true, name = "s" })
    local line = attrs_of(s:tojson(), "s")
    assert.matches('"axis":"%(1, %-1%)"', line)
    assert.matches('"keepdims":"True"', line)
    local bn = S.BatchNorm(x, { axis = -1, name = "bn" })
    assert.matches('"axis":"%-1"', attrs_of(bn:tojson(), "bn"))
    assert.is_nil(attrs_of(S.BatchNorm(x, { name = "bn2" }):tojson(), "bn2"):find('"axis"'))
    local back = S.fromjson(s:tojson())
    assert.same({ 2, -1 }, back.outputs[1][1].opts.axis)
    assert.is_true(back.outputs[1][1].opts.keepdims)
    assert.equal("(1, -1)", back:attr("axis"))
    assert.same({ s = { axis = "(1, -1)", keepdims = "True" } }, s:attr_dict())
  end)

  it("turns params structs back into the options that fill them", function()
    local cases = {
      { "slice", { begin = { 2, false }, ["end"] = { -2, 3 }, step = { 1, 2 } } },
      { "slice", { begin = { -3 }, ["end"] = { 1 }, step = { -1 } } },
      { "slice_axis", { axis = 2, begin = 2, ["end"] = 4 } },
      { "transpose", { axes = { 2, 1, 3 } } },
      { "batch_norm", { axis = -1, eps = 1e-4, fix_gamma = false } },
      { "pooling", { kernel = { 2, 2 }, pool_type = "avg" } },
      { "cast", { dtype = "int64" } },
      { "expand_dims", { axis = 1 } },
    }
    for _, c in ipairs(cases) do
      local op = lib.ops_by_name[c[1]]
      local P = SP.copy(op, (mx.nd._fill_params(op, c[2])))
      local again = SP.copy(op, (mx.nd._fill_params(op, SP.opts(op, P))))
      assert.equal(ffi.string(P, op.size), ffi.string(again, op.size), c[1])
    end
  end)

  it("infers shapes by name or position, partially, and names the conflicting node", function()
    local x = S.var("data")
    local net = S.FullyConnected(S.relu(S.FullyConnected(x, { num_hidden = 8, name = "fc1" })),
      { num_hidden = 2, name = "fc2" })
    local a, o, aux = net:infer_shape { data = { 4, 5 } }
    assert.same({ { 4, 5 }, { 8, 5 }, { 8 }, { 2, 8 }, { 2 } }, a)
    assert.same({ { 4, 2 } }, o)
    assert.same({}, aux)
    assert.same(a, (net:infer_shape({ 4, 5 })))
    assert.is_nil(net:infer_shape())
    local pa, po = net:infer_shape_partial { fc2_weight = { 2, 8 } }
    assert.same({}, pa[1])
    assert.same({ 2, 8 }, pa[4])
    assert.same({ {} }, po)
    local pa2 = net:infer_shape_partial { data = { 0, 5 } }
    assert.same({ 0, 5 }, pa2[1]) -- 0: an unknown dim, as MXNet 1.x
    local ok, err = pcall(function() net:infer_shape { data = { 4, 5 }, fc1_weight = { 8, 6 } } end)
    assert.is_false(ok)
    assert.matches("infer_shape: node 'fc1'", err)
    assert.matches("symbol_spec.lua", err) -- blames the caller's line
    assert.has_error(function() net:infer_shape { nodata = { 1 } } end,
      "infer_shape: no input named 'nodata' (inputs: data, fc1_weight, fc1_bias, fc2_weight, fc2_bias)")
    local v = S.var("v", { shape = { 3, 7 } })
    local _, vo = S.FullyConnected(v, { num_hidden = 2 }):infer_shape()
    assert.same({ { 3, 2 } }, vo)
  end)

  it("infers dtypes", function()
    local x = S.var("x")
    local net = S.BatchNorm(S.Convolution(x, { kernel = { 3, 3 }, num_filter = 2, name = "c" }),
      { name = "bn" })
    local a, o, aux = net:infer_type { x = "float64" }
    assert.same({ "float64", "float64", "float64", "float64", "float64" }, a)
    assert.same({ "float64" }, o)
    assert.same({ "float64", "float64" }, aux)
    assert.is_nil(net:infer_type())
    local _, co = S.cast(x, { dtype = "int32" }):infer_type { x = "float32" }
    assert.same({ "int32" }, co)
    assert.has_error(function() net:infer_type { x = "float99" } end)
  end)

  it("has variadic ops taking a list or positional symbols", function()
    local a, b = S.var("a"), S.var("b")
    local c1 = S.Concat({ a, b }, { dim = 2 })
    local c2 = S.concat(a, b, { dim = 2 })
    local _, o1 = c1:infer_shape { a = { 2, 3 }, b = { 2, 4 } }
    local _, o2 = c2:infer_shape { a = { 2, 3 }, b = { 2, 4 } }
    assert.same({ { 2, 7 } }, o1)
    assert.same(o1, o2)
    assert.matches('"num_args":"2"', c1:tojson())
    assert.has_error(function() S.concat({}) end)
  end)

  it("blames the user's line for bad options and inputs", function()
    local x = S.var("x")
    local ok, err = pcall(S.FullyConnected, x, { num_hiden = 3 })
    assert.is_false(ok)
    assert.matches("fully_connected: unknown option 'num_hiden'", err)
    assert.has_error(function() S.relu(3) end, "relu: input 1 (data) must be a Symbol, got number")
    assert.has_error(function() S.relu(x, { out = x }) end, "relu: out= has no meaning for symbols")
    assert.has_error(function() S.relu(x, { name = 5 }) end)
    assert.has_error(function() S.relu(x, { attr = { mood = "calm" } }) end,
      "relu: attr key 'mood' on an op must be of the form __mood__")
    assert.equal("dev1", S.relu(x, { attr = { __ctx_group__ = "dev1" } }):attr("__ctx_group__"))
  end)

  it("lowers to a C graph with a map for the executor (sym:_graph)", function()
    local x = S.var("x")
    local net = S.BatchNorm(S.FullyConnected(x, { num_hidden = 3, name = "fc" }), { name = "bn" })
    local g, map = net:_graph()
    assert.equal(C.mx_graph_num_nodes(g), #map.nodes)
    for id, n in ipairs(map.nodes) do
      assert.equal(id - 1, map.id[n])
      assert.equal(n.name, ffi.string(C.mx_graph_node_name(g, id - 1)))
    end
    local names = function(ids)
      local t = {}
      for i, id in ipairs(ids) do t[i] = map.nodes[id + 1].name end
      return t
    end
    assert.same(net:list_arguments(), names(map.args))
    assert.same(net:list_auxiliary_states(), names(map.aux))
    assert.same(net:list_inputs(), names(map.inputs))
    assert.same({ { map.id[net.outputs[1][1]], 0 } }, map.heads)
    assert.equal("bn", map.nodes[#map.nodes].name)
    assert.equal(#map.nodes, #net:_topo())
    local back = S._from_graph(g)
    assert.same(net:list_outputs(), back:list_outputs())
    assert.equal(net:tojson(), back:tojson())
  end)

  it("is a method namespace too: x:sum{axis=2}, and creation ops take a shape", function()
    local x = S.var("x")
    local _, o = x:sum({ axis = 2 }):infer_shape { x = { 3, 4, 5 } }
    assert.same({ { 3, 5 } }, o)
    local _, z = S.zeros({ 2, 3 }):infer_shape()
    assert.same({ { 2, 3 } }, z)
  end)
end)

describe("mx_op_params_format", function()
  local buf = ffi.new("char[512]")
  local key = ffi.new("const char*[1]")
  local function fmt(opname, opts, pname)
    local op = lib.ops_by_name[opname]
    local P = mx.nd._fill_params(op, opts)
    for k, p in ipairs(op.params) do
      if p.name == pname then
        local d = C.mx_op_params_format(op.id, P, k - 1, key, buf, 512)
        assert.is_true(d >= 0)
        return ffi.string(buf), d == 1, ffi.string(key[0])
      end
    end
  end

  it("writes values as MXNet does and says which differ from the default", function()
    local function is(want, ...) assert.same(want, { fmt(...) }) end
    local conv = { kernel = { 3, 3 }, num_filter = 1 }
    is({ "(3, 3)", true, "kernel" }, "convolution", conv, "kernel")
    is({ "()", false, "stride" }, "convolution", conv, "stride")
    is({ "(2, 2)", true, "stride" }, "convolution",
      { kernel = { 3, 3 }, stride = { 2, 2 }, num_filter = 1 }, "stride")
    is({ "True", true, "use_global_stats" }, "batch_norm", { use_global_stats = true },
      "use_global_stats")
    is({ "0.001", false, "eps" }, "batch_norm", {}, "eps")
    is({ "0.5", true, "eps" }, "batch_norm", { eps = 0.5 }, "eps")
    is({ "1", false, "axis" }, "batch_norm", {}, "axis")
    is({ "tanh", true, "act_type" }, "activation", { act_type = "tanh" }, "act_type")
    is({ "None", false, "axis" }, "sum", {}, "axis")
    is({ "(0,)", true, "axis" }, "sum", { axis = 1 }, "axis")
    is({ "int64", true, "dtype" }, "cast", { dtype = "int64" }, "dtype")
    is({ "(1, None)", true, "begin" }, "slice", { begin = { 2, false }, ["end"] = { 3, 4 } },
      "begin")
    local op = lib.ops_by_name.batch_norm
    assert.is_true(C.mx_op_params_format(op.id, nil, 0, key, buf, 512) < 0)
    assert.is_true(C.mx_op_params_format(op.id, op.defaults, 99, key, buf, 512) < 0)
    assert.equal(#op.params, C.mx_op_num_params(op.id))
  end)
end)
