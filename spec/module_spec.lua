-- spec/module_spec.lua — mx.mod against MXNet 1.9.1 (spec/fixtures/module_mxnet.lua,
-- tools/fixtures/make_module_fixture.py): the same symbols, data and initial parameters
-- give MXNet's gradients after one forward_backward, its parameters after fit (SGD with
-- momentum and wd), its score and predictions; then the protocol: bind/init/update by
-- hand, checkpoints (mx.model, Module.load, optimizer states), several devices,
-- BucketingModule over mx.rnn cells, the callbacks, and errors.
local mx = require("mx")
local nd = mx.nd
local S = mx.sym
local FIX = dofile("spec/fixtures/module_mxnet.lua")

local function arr(t) return nd.array(t[1]):reshape(t.shape) end
local function close(got, want, tol, what)
  local g = got:reshape(-1):tolist()
  assert.equal(#want, #g, what)
  for i = 1, #want do
    assert.is_true(math.abs(g[i] - want[i]) <= tol * (1 + math.abs(want[i])),
      string.format("%s element %d: %.7g, MXNet %.7g", what, i, g[i], want[i]))
  end
end
local function params(t)
  local r = {}
  for k, v in pairs(t) do r[k] = arr(v) end
  return r
end

local SYMS = {
  mlp = function()
    local h = S.Activation(S.FullyConnected(S.var("data"), { num_hidden = 8, name = "fc1" }),
      { act_type = "relu", name = "relu1" })
    return S.SoftmaxOutput(S.FullyConnected(h, { num_hidden = 3, name = "fc2" }), { name = "softmax" })
  end,
  regression = function()
    local h = S.Activation(S.FullyConnected(S.var("data"), { num_hidden = 6, name = "fc1" }),
      { act_type = "tanh" })
    return S.LinearRegressionOutput(S.FullyConnected(h, { num_hidden = 1, name = "fc2" }),
      { name = "lro" })
  end,
  batchnorm = function()
    local h = S.FullyConnected(S.var("data"), { num_hidden = 5, name = "fc1" })
    h = S.BatchNorm(h, { name = "bn1", fix_gamma = false })
    return S.SoftmaxOutput(S.FullyConnected(S.Activation(h, { act_type = "relu" }),
      { num_hidden = 3, name = "fc2" }), { name = "softmax" })
  end,
}

local X = arr(FIX.X)
local quiet = function() end

describe("mx.mod.Module against MXNet 1.9.1", function()
  for _, c in ipairs(FIX.cases) do
    local label = nd.array(c.name == "regression" and FIX.YR or FIX.Y)
    local function iter() return mx.io.NDArrayIter(X, label, 5, false, nil, nil, c.label_name) end
    it(c.name .. ": gradients of one forward_backward", function()
      local it_ = iter()
      local mod = mx.mod.Module(SYMS[c.name](), nil, { c.label_name }, quiet)
      mod:bind(it_.provide_data, it_.provide_label)
      mod:init_params(nil, params(c.init_args), params(c.init_aux))
      mod:forward_backward(it_:next())
      local ex = mod._exec_group.execs[1]
      for name, want in pairs(c.grads) do close(ex.grad_dict[name], want[1], 1e-4, name .. " grad") end
    end)
    it(c.name .. ": parameters after fit, score, predict", function()
      local it_ = iter()
      local mod = mx.mod.Module { symbol = SYMS[c.name](), label_names = { c.label_name },
        logger = quiet }
      mod:fit(it_, { eval_metric = c.metric, optimizer = "sgd",
        optimizer_params = { learning_rate = 0.1, momentum = 0.9, wd = 0.001 },
        arg_params = params(c.init_args), aux_params = params(c.init_aux), num_epoch = 2 })
      local a, x = mod:get_params()
      for name, want in pairs(c.args) do close(a[name], want[1], 2e-4, name) end
      for name, want in pairs(c.aux) do close(x[name], want[1], 2e-4, name) end
      assert.is_true(math.abs(mod:score(it_, c.metric)[1][2] - c.score) < 1e-4)
      close(mod:predict(it_), c.pred[1], 2e-4, "predict")
    end)
  end
end)

describe("mx.mod.Module", function()
  local function net() return SYMS.mlp() end
  local label = nd.array(FIX.Y)

  it("runs bind / init_params / init_optimizer / forward / backward / update by hand", function()
    local it_ = mx.io.NDArrayIter(X, label, 5)
    local mod = mx.mod.Module(net(), { logger = quiet })
    assert.same({ "softmax_output" }, mod.output_names)
    mod:bind(it_.provide_data, it_.provide_label)
    mod:init_params(mx.init.Xavier())
    mod:init_optimizer("local", "sgd", { learning_rate = 0.5 })
    local m = mx.metric.Accuracy()
    for _ = 1, 30 do
      it_:reset()
      for b in it_:iter() do
        mod:forward(b, true)
        mod:backward()
        mod:update()
        mod:update_metric(m, b.label)
      end
    end
    assert.is_true(select(2, m:get()) > 0.6)
    assert.same({ 5, 3 }, mod:get_outputs()[1]:shape())
    assert.has_error(function() mx.mod.Module(net(), { "nodata" }) end,
      "Module: data name 'nodata' is not an argument of the symbol (arguments: data, fc1_weight, "
        .. "fc1_bias, fc2_weight, fc2_bias, softmax_label)")
  end)

  it("checkpoints: save_checkpoint, mx.model.load_checkpoint, Module.load with optimizer states", function()
    local prefix = os.tmpname()
    local it_ = mx.io.NDArrayIter(X, label, 5)
    local mod = mx.mod.Module(net(), { logger = quiet })
    local log = mx.callback.log
    mx.callback.log = quiet
    finally(function() mx.callback.log = log end)
    mod:fit(it_, { optimizer = "adam", optimizer_params = { learning_rate = 0.01 }, num_epoch = 1,
      epoch_end_callback = mx.callback.do_checkpoint(prefix) })
    local sym, args = mx.model.load_checkpoint(prefix, 1)
    assert.same(net():list_arguments(), sym:list_arguments())
    local a = mod:get_params()
    assert.same(a.fc1_weight:tolist(), args.fc1_weight:tolist())
    mod:save_checkpoint(prefix, 2, true)
    local back = mx.mod.Module.load(prefix, 2, true, { logger = quiet })
    back:bind(it_.provide_data, it_.provide_label)
    back:init_optimizer("local", "adam", { learning_rate = 0.01 })
    assert.same(a.fc2_bias:tolist(), back:get_params().fc2_bias:tolist())
    assert.equal(2, #back._states[1]) -- (adam's mean and var: two states per parameter)
    assert.is_truthy(back._states[1][1])
    for _, suffix in ipairs { "-symbol.json", "-0001.params", "-0002.params", "-0002.states" } do
      os.remove(prefix .. suffix)
    end
    os.remove(prefix)
  end)

  it("trains over two devices as over one (the batch split, gradients summed on a kvstore)", function()
    if require("mx.context").num_cpu_devices() < 2 then
      pending("one CPU device (MX_NUM_CPU_DEVICES)")
      return
    end
    local c = FIX.cases[1]
    local it_ = mx.io.NDArrayIter(X, label, 10)
    local mod = mx.mod.Module(net(), { context = { mx.cpu(0), mx.cpu(1) }, logger = quiet })
    mod:fit(it_, { optimizer = "sgd", optimizer_params = { learning_rate = 0.1 },
      arg_params = params(c.init_args), num_epoch = 1 })
    local one = mx.mod.Module(net(), { logger = quiet })
    it_:reset()
    one:fit(it_, { optimizer = "sgd", optimizer_params = { learning_rate = 0.1 },
      arg_params = params(c.init_args), num_epoch = 1 })
    local a, b = mod:get_params(), one:get_params()
    close(a.fc1_weight, b.fc1_weight:tolist(), 1e-5, "fc1_weight")
  end)

  it("BucketingModule trains an LSTM over mx.rnn cells and BucketSentenceIter", function()
    mx.random.seed(5)
    local sents = {}
    for i = 1, 96 do
      local s = {}
      for t = 1, 3 + i % 6 do s[t] = 1 + (i + t) % 7 end
      sents[i] = s
    end
    local it_ = mx.rnn.BucketSentenceIter(sents, 8, { buckets = { 5, 8 }, invalid_label = 0 })
    assert.equal(8, it_.default_bucket_key)
    local stack = mx.rnn.SequentialRNNCell()
    stack:add(mx.rnn.LSTMCell(8, { prefix = "lstm_l0_" }))
    local function sym_gen(len)
      local embed = S.Embedding(S.var("data"), { input_dim = 9, output_dim = 6, name = "embed" })
      stack:reset()
      local out = stack:unroll(len, embed, { merge_outputs = true })
      local pred = S.FullyConnected(S.Reshape(out, { shape = { -1, 8 } }), { num_hidden = 9, name = "pred" })
      return S.SoftmaxOutput(pred, S.Reshape(S.var("softmax_label"), { shape = { -1 } }),
        { name = "softmax" }), { "data" }, { "softmax_label" }
    end
    local mod = mx.mod.BucketingModule(sym_gen, it_.default_bucket_key, quiet)
    local ppl = mx.metric.Perplexity { ignore_label = 0 }
    mod:fit(it_, { eval_metric = ppl, optimizer = "adam", optimizer_params = { learning_rate = 0.02 },
      initializer = mx.init.Xavier { factor_type = "in", magnitude = 2.34 }, num_epoch = 8 })
    local res = mod:score(it_, ppl)
    assert.is_true(res[1][2] < 3, "perplexity " .. res[1][2]) -- the sequences are predictable
    assert.is_truthy(mod._buckets[5] and mod._buckets[8])
    assert.equal(mod._buckets[5]._exec_group.param_arrays[2][1],
      mod._buckets[8]._exec_group.param_arrays[2][1]) -- one parameter array for every bucket
  end)

  it("callbacks log MXNet's lines through the module's logger", function()
    local lines = {}
    local mod = mx.mod.Module(net(), { logger = function(l) lines[#lines + 1] = l end })
    local it_ = mx.io.NDArrayIter(X, label, 2)
    mod:fit(it_, { eval_data = it_, num_epoch = 1, batch_end_callback = {
      mx.callback.Speedometer(2, 5), mx.callback.log_train_metric(5) } })
    local text = table.concat(lines, "\n")
    local speed = "Epoch%[0%] Batch %[0%-5%]\tSpeed: [%d%.]+ samples/sec\taccuracy=[%d%.]+"
    assert.is_truthy(text:find(speed), text)
    assert.is_truthy(text:find("Iter[0] Batch[5] Train-accuracy=", 1, true), text)
    assert.is_truthy(text:find("Epoch[0] Train-accuracy=", 1, true), text)
    assert.is_truthy(text:find("Epoch%[0%] Time cost=[%d%.]+"), text)
    assert.is_truthy(text:find("Epoch[0] Validation-accuracy=", 1, true), text)
  end)
end)
