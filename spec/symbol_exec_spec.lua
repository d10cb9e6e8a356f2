-- Running symbols (lua/mx/graph/executor.lua): bind / simple_bind / eval and the Executor's
-- forward, backward into grad arrays (write, add, null), aux states and reshape.
local mx = require("mx")
local sym, nd = mx.sym, mx.nd

local function close(a, b, tol)
  a, b = a:reshape({ -1 }):tolist(), b:reshape({ -1 }):tolist()
  assert.equal(#a, #b)
  for i = 1, #a do assert.near(a[i], b[i], tol or 1e-5) end
end

local function mlp()
  local data = sym.var("data")
  local fc1 = sym.FullyConnected(data, { num_hidden = 8, name = "fc1" })
  local act = sym.Activation(fc1, { act_type = "tanh", name = "act1" })
  return sym.FullyConnected(act, { num_hidden = 3, name = "fc2" })
end

local function eager(args, x)
  return nd.fully_connected(nd.tanh(nd.fully_connected(x, args.fc1_weight, args.fc1_bias,
    { num_hidden = 8 })), args.fc2_weight, args.fc2_bias, { num_hidden = 3 })
end

describe("symbol executor", function()
  it("simple_bind allocates from inferred shapes; forward equals eager", function()
    local s = mlp()
    local ex = s:simple_bind(mx.cpu(), { data = { 4, 5 } })
    assert.same({ 8, 5 }, ex.arg_dict.fc1_weight:shape())
    mx.random.seed(1)
    for _, n in ipairs(s:list_arguments()) do
      ex.arg_dict[n][{}] = nd.random.normal(0, 1, ex.arg_dict[n]:shape())
    end
    local out = ex:forward({ is_train = false })
    close(out[1], eager(ex.arg_dict, ex.arg_dict.data))
    assert.equal(out[1], ex.outputs[1])
  end)

  it("backward writes the gradients autograd computes (write, add, null)", function()
    local s = mlp()
    mx.random.seed(2)
    local shapes = { data = { 4, 5 }, fc1_weight = { 8, 5 }, fc1_bias = { 8 }, fc2_weight = { 3, 8 },
      fc2_bias = { 3 } }
    local args = {}
    for _, n in ipairs(s:list_arguments()) do args[n] = nd.random.normal(0, 1, shapes[n]) end
    -- the eager reference
    local ref = {}
    for n, v in pairs(args) do ref[n] = v:copy(); ref[n]:attach_grad() end
    local og = nd.random.normal(0, 1, { 4, 3 })
    mx.autograd.record(function() return eager(ref, ref.data) end):backward(og)
    local grads = { fc1_weight = nd.zeros({ 8, 5 }), fc2_bias = nd.ones({ 3 }) }
    local ex = s:bind(mx.cpu(), args, { args_grad = grads, grad_req = { data = "null",
      fc1_weight = "write", fc1_bias = "write", fc2_weight = "write", fc2_bias = "add" } })
    for _ = 1, 2 do
      ex:forward({ is_train = true })
      ex:backward(og)
    end
    close(grads.fc1_weight, ref.fc1_weight:grad())
    close(ex.grad_dict.fc1_bias, ref.fc1_bias:grad())
    close(grads.fc2_bias, ref.fc2_bias:grad() * 2 + 1) -- add: twice onto the ones
    assert.is_nil(ex.grad_dict.data)
  end)

  it("forward{is_train} updates BatchNorm's auxiliary states; predict mode uses them", function()
    local data = sym.var("data")
    local bn = sym.BatchNorm(data, { name = "bn", fix_gamma = false })
    assert.same({ "bn_moving_mean", "bn_moving_var" }, bn:list_auxiliary_states())
    local ex = bn:simple_bind(mx.cpu(), { data = { 16, 2 } })
    ex.arg_dict.bn_gamma[{}] = 1
    ex.aux_dict.bn_moving_var[{}] = 1
    mx.random.seed(3)
    ex:forward({ is_train = true, data = nd.random.normal(5, 1, { 16, 2 }) })
    local m = ex.aux_dict.bn_moving_mean:tolist()
    assert.is_true(m[1] > 0.3 and m[2] > 0.3)
    local out = ex:forward({ is_train = false })[1]
    local x = ex.arg_dict.data
    local mv = ex.aux_dict.bn_moving_var
    local mm = ex.aux_dict.bn_moving_mean:reshape({ 1, 2 })
    close(out, (x - mm) / nd.sqrt(mv:reshape({ 1, 2 }) + 1e-3), 1e-4)
  end)

  it("reshape makes an executor for another batch size sharing the parameters", function()
    local s = mlp()
    local ex = s:simple_bind(mx.cpu(), { data = { 4, 5 } })
    ex.arg_dict.fc1_weight[{}] = 0.5
    -- larger: MXNet's rule, only with allow_up_sizing (a new array then)
    assert.has_error(function() ex:reshape({ data = { 7, 5 } }) end,
      "Executor.reshape: the new shape (7, 5) of argument 'data' is larger than the original "
        .. "(4, 5); pass allow_up_sizing=true (the executor then gets a new array)")
    local ex2 = ex:reshape({ data = { 7, 5 } }, { allow_up_sizing = true })
    assert.same({ 7, 5 }, ex2.arg_dict.data:shape())
    assert.equal(ex.arg_dict.fc1_weight, ex2.arg_dict.fc1_weight)
    assert.same({ 7, 3 }, ex2:forward()[1]:shape())
    -- smaller: a view of the base's array (its first rows): the memory is shared
    local ex3 = ex:reshape({ data = { 2, 5 } })
    ex.arg_dict.data[{}] = 3
    assert.same({ 2, 5 }, ex3.arg_dict.data:shape())
    assert.equal(3, ex3.arg_dict.data[{ 2, 5 }]:item())
    ex3.arg_dict.data[{}] = 1
    assert.equal(1, ex.arg_dict.data[{ 2, 5 }]:item())
    assert.equal(3, ex.arg_dict.data[{ 3, 1 }]:item())
  end)

  it("allocates outputs at bind, keeps them across forwards, names them in output_dict", function()
    local s = mlp()
    local ex = s:simple_bind(mx.cpu(), { data = { 4, 5 } })
    local out = ex.outputs[1]
    assert.same({ 4, 3 }, out:shape())
    assert.equal(out, ex.output_dict[s:list_outputs()[1]])
    ex.arg_dict.data[{}] = 1
    ex.arg_dict.fc1_weight[{}] = 0.25
    ex:forward { is_train = false }
    assert.equal(out, ex.outputs[1]) -- the same array, now holding the forward's values
    local v = out:tolist()
    ex:forward(false, { data = nd.zeros { 4, 5 } })
    assert.is_false(v[1] == out:tolist()[1] and v[1] ~= 0)
  end)

  it("copy_params_from sets the named arguments and auxiliary states", function()
    local s = mlp()
    local ex = s:simple_bind(mx.cpu(), { data = { 4, 5 } })
    ex:copy_params_from({ fc1_weight = nd.full(ex.arg_dict.fc1_weight:shape(), 2) })
    assert.equal(2, ex.arg_dict.fc1_weight:mean():item())
    assert.has_error(function() ex:copy_params_from({ nope = nd.ones { 1 } }) end,
      "Executor.copy_params_from: 'nope' is not an argument of the executor "
        .. "(allow_extra_params=true ignores it)")
    ex:copy_params_from({ nope = nd.ones { 1 } }, nil, true)
    assert.has_error(function() ex:copy_params_from({ fc1_weight = nd.ones { 1 } }) end)
  end)

  it("eval runs a symbol on named arrays", function()
    local a, b = sym.var("a"), sym.var("b")
    local r = (a * b + 1):eval(mx.cpu(), { a = nd.array({ 1, 2 }), b = nd.array({ 3, 4 }) })
    close(r[1], nd.array({ 4, 9 }))
  end)

  it("says which argument is missing or unknown", function()
    local s = mlp()
    assert.has_error(function() s:bind(mx.cpu(), { data = nd.ones({ 2, 5 }) }) end,
      "bind: no array for the argument 'fc1_weight'")
    assert.has_error(function() s:bind(mx.cpu(), { dat = nd.ones({ 2, 5 }) }) end)
    local ex = s:simple_bind(mx.cpu(), { data = { 2, 5 } })
    assert.has_error(function() ex:forward({ nodata = nd.ones({ 2, 5 }) }) end,
      "Executor.forward: 'nodata' is not an argument")
    assert.has_error(function() ex:backward() end)
    assert.has_error(function() (sym.var("a") + 1):eval(mx.cpu(), {}) end, "eval: no array for the input 'a'")
  end)
end)

describe("a Gluon block called on Symbols", function()
  it("gives a Symbol: shapes inferred through the block, forward/backward as the block's, JSON after binding",
      function()
    local s = mlp()
    local L = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    local l = L(s, sym.var("label"))
    assert.is_true(sym.is_symbol(l))
    assert.same({ "data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "label" }, l:list_arguments())
    local _, outs = l:infer_shape({ data = { 4, 5 }, label = { 4 } })
    assert.same({ { 4 } }, outs)
    mx.random.seed(3)
    local ex = l:simple_bind(mx.cpu(), { data = { 4, 5 }, label = { 4 } })
    for _, n in ipairs(s:list_arguments()) do
      ex.arg_dict[n][{}] = nd.random.normal(0, 1, ex.arg_dict[n]:shape())
    end
    ex.arg_dict.label[{}] = nd.array { 0, 2, 1, 2 }
    local ref = {}
    for _, n in ipairs(l:list_arguments()) do ref[n] = ex.arg_dict[n]:copy(); ref[n]:attach_grad() end
    local want = mx.autograd.record(function() return L(eager(ref, ref.data), ref.label) end)
    want:backward()
    local got = ex:forward({ is_train = true })
    close(got[1], want)
    ex:backward(nd.ones({ 4 }))
    close(ex.grad_dict.fc1_weight, ref.fc1_weight:grad())
    close(ex.grad_dict.fc2_bias, ref.fc2_bias:grad())
    -- its graph form exists once the shapes are known
    local SG = require("mx.graph.symbol_graph")
    local flat = sym._new_symbol(SG.expand_blocks(l.outputs, "spec", { data = { 4, 5 }, label = { 4 } }, 1))
    local back = sym.load_json(flat:tojson())
    local ex2 = back:bind(mx.cpu(), ex.arg_dict)
    close(ex2:forward()[1], want)
  end)

  it("takes a block with Parameters: variables named as MXNet 1.x names them, the block's values",
      function()
    local nn = mx.gluon.nn
    local net = nn.HybridSequential()
    net:add(nn.Dense(4, { activation = "relu" }), nn.BatchNorm(), nn.Dense(2))
    local y = net(sym.var("data"))
    local p = net._sym_prefix
    assert.same({ "data", p .. "dense0_weight", p .. "dense0_bias", p .. "batchnorm0_gamma",
      p .. "batchnorm0_beta", p .. "dense1_weight", p .. "dense1_bias" }, y:list_arguments())
    assert.same({ p .. "batchnorm0_running_mean", p .. "batchnorm0_running_var" },
      y:list_auxiliary_states())
    local args, outs, aux = y:infer_shape({ data = { 3, 5 } })
    assert.same({ { 3, 5 }, { 4, 5 }, { 4 }, { 4 }, { 4 }, { 2, 4 }, { 2 } }, args)
    assert.same({ { 3, 2 } }, outs)
    assert.same({ { 4 }, { 4 } }, aux)
    assert.is_nil(net[1].weight._data) -- inference leaves the block's Parameters alone
    -- bound to the block's own values, the symbol computes what the block does
    net:initialize(mx.init.Xavier())
    local x = nd.random.normal(0, 1, { 3, 5 })
    local want = net(x)
    local dict = net:collect_params()
    local vals = { data = x }
    for _, k in ipairs { "0.weight", "0.bias", "1.gamma", "1.beta", "2.weight", "2.bias" } do
      local i, n = k:match("^(%d)%.(.*)$")
      vals[p .. (i == "1" and "batchnorm0_" or "dense" .. (i == "0" and 0 or 1) .. "_") .. n] =
        dict[k]:data()
    end
    local ex = y:bind(mx.cpu(), vals, { aux_states = {
      [p .. "batchnorm0_running_mean"] = dict["1.running_mean"]:data(),
      [p .. "batchnorm0_running_var"] = dict["1.running_var"]:data() } })
    close(ex:forward()[1], want)
    -- and the same Parameter is the same variable in every call
    local d = nn.Dense(3, { in_units = 3 })
    local z = d(d(sym.var("x")))
    assert.same({ "x", d._sym_prefix .. "weight", d._sym_prefix .. "bias" }, z:list_arguments())
  end)

  it("unrolls a cell: one node, MXNet's output names, the eager cell's outputs and gradients",
      function()
    local rnn = mx.gluon.rnn
    local cell = rnn.LSTMCell(4, { prefix = "rnn_" })
    local outs, states = cell:unroll(2, { sym.var("x0"), sym.var("x1") })
    local g = sym.Group({ outs[1], outs[2], states[2] })
    assert.same({ "rnn_t0_out_output", "rnn_t1_out_output", "rnn_t1_state1_output" }, g:list_outputs())
    assert.same({ "x0", "x1", "rnn_i2h_weight", "rnn_h2h_weight", "rnn_i2h_bias", "rnn_h2h_bias" },
      g:list_arguments())
    cell:initialize(mx.init.Xavier())
    local a = g:infer_shape({ x0 = { 3, 5 }, x1 = { 3, 5 } })
    assert.same({ 16, 5 }, a[3])
    -- (the cell's own deferred parameter is left waiting)
    assert.is_nil(cell.i2h_weight._data)
    assert.same({ 16, 0 }, cell.i2h_weight.shape)
    local x0, x1 = nd.random.normal(0, 1, { 3, 5 }), nd.random.normal(0, 1, { 3, 5 })
    cell:unroll(2, { x0, x1 })
    local vals, grads = { x0 = x0, x1 = x1 }, {}
    for n, p in cell:collect_params():items() do vals[n] = p:data() end
    for n, v in pairs(vals) do grads[n] = nd.zeros(v:shape()) end
    local ex = g:bind(mx.cpu(), vals, { args_grad = grads })
    local got = ex:forward({ is_train = true })
    local heads = { nd.random.normal(0, 1, { 3, 4 }), nd.random.normal(0, 1, { 3, 4 }),
      nd.random.normal(0, 1, { 3, 4 }) }
    ex:backward(heads)
    for _, p in cell:collect_params():items() do p:data():attach_grad() end
    local eo, es = mx.autograd.record(function()
      local o, s = cell:unroll(2, { x0, x1 })
      return o, s
    end)
    mx.autograd.backward({ eo[1], eo[2], es[2] }, heads)
    close(got[1], eo[1])
    close(got[2], eo[2])
    close(got[3], es[2])
    close(grads.rnn_i2h_weight, cell.i2h_weight:grad())
    close(grads.rnn_h2h_bias, cell.h2h_bias:grad())
  end)

  it("trains in a Module (a label outside the block)", function()
    mx.random.seed(11)
    local nn = mx.gluon.nn
    local net = nn.HybridSequential()
    net:add(nn.Dense(8, { activation = "relu" }), nn.Dense(3))
    local out = sym.SoftmaxOutput(net(sym.var("data")), sym.var("softmax_label"), { name = "softmax" })
    local X = nd.random.normal(0, 1, { 32, 5 })
    local Y = (nd.argmax(X[{ {}, { 1, 3 } }], { axis = 2 }) - 1):astype("float32")
    local mod = mx.mod.Module(out, { context = mx.cpu() })
    mod:bind { data_shapes = { { "data", { 32, 5 } } }, label_shapes = { { "softmax_label", { 32 } } } }
    mod:init_params { initializer = mx.init.Xavier() }
    mod:init_optimizer { optimizer = "sgd", optimizer_params = { learning_rate = 0.5 } }
    local batch = mx.io.DataBatch({ X }, { Y })
    local function acc()
      mod:forward(batch, false)
      local p = nd.argmax(mod:get_outputs()[1], { axis = 2 }) - 1
      return nd.equal(p:astype("float32"), Y):astype("float32"):mean():asscalar()
    end
    local before = acc()
    for _ = 1, 30 do
      mod:forward(batch, true)
      mod:backward()
      mod:update()
    end
    assert.is_true(acc() > before + 0.2)
  end)

  it("checkpoints an unrolled cell: its begin states zeros nodes, the file runs to the same outputs",
      function()
    local cell = mx.gluon.rnn.GRUCell(6, { prefix = "g_" })
    local outs = cell:unroll(3, sym.var("data"), { layout = "NTC", merge_outputs = true })
    local pred = sym.FullyConnected(sym.Reshape(outs, { shape = { -1, 6 } }), { num_hidden = 4,
      name = "pred" })
    local out = sym.SoftmaxOutput(pred, sym.Reshape(sym.var("softmax_label"), { shape = { -1 } }),
      { name = "softmax" })
    local mod = mx.mod.Module(out, { context = mx.cpu() })
    mod:bind { data_shapes = { { "data", { 2, 3, 5 } } }, label_shapes = { { "softmax_label", { 2, 3 } } } }
    mod:init_params { initializer = mx.init.Xavier() }
    local x = nd.random.normal(0, 1, { 2, 3, 5 })
    mod:forward(mx.io.DataBatch({ x }, { nd.zeros { 2, 3 } }), false)
    local want = mod:get_outputs()[1]
    local prefix = os.tmpname()
    mod:save_checkpoint(prefix, 1)
    local s, args = mx.model.load_checkpoint(prefix, 1)
    os.remove(prefix .. "-symbol.json")
    os.remove(prefix .. "-0001.params")
    os.remove(prefix)
    assert.same({ "data", "g_i2h_weight", "g_i2h_bias", "g_h2h_weight", "g_h2h_bias", "pred_weight",
      "pred_bias", "softmax_label" }, s:list_arguments())
    args.data, args.softmax_label = x, nd.zeros { 2, 3 }
    close(s:bind(mx.cpu(), args):forward()[1], want)
  end)

  it("takes the fused rnn.LSTM layer: MXNet 1.x's lstm<k>_l0_i2h_weight, the layer's outputs", function()
    local l = mx.gluon.rnn.LSTM(8, 2)
    local y = l(sym.var("data"))
    local p = l._sym_prefix
    assert.truthy(p:match("^lstm%d+_$"), p)
    assert.same({ "data", p .. "l0_i2h_weight", p .. "l0_h2h_weight", p .. "l0_i2h_bias",
      p .. "l0_h2h_bias", p .. "l1_i2h_weight", p .. "l1_h2h_weight", p .. "l1_i2h_bias",
      p .. "l1_h2h_bias" }, y:list_arguments())
    local a, o = y:infer_shape({ data = { 5, 3, 4 } })
    assert.same({ { 5, 3, 8 } }, o)
    assert.same({ 32, 4 }, a[2])
    l:initialize()
    local x = nd.random.normal(0, 1, { 5, 3, 4 })
    local want = l(x)
    local d = l:collect_params()
    local args = { data = x }
    for _, n in ipairs(y:list_arguments()) do
      if n ~= "data" then args[n] = d[n:sub(#p + 1)]:data() end
    end
    close(y:bind(mx.cpu(), args):forward()[1], want)
  end)

  it("refuses non-Symbol arguments, naming them", function()
    local ok, err = pcall(function() local r = mx.gluon.loss.L2Loss()(sym.var("p"), 3) return r end)
    assert.is_false(ok)
    assert.matches("symbol_exec_spec.lua:%d+: L2Loss: argument 2", err)
  end)
end)
