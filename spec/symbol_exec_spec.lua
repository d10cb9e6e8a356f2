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
    local ex2 = ex:reshape({ data = { 7, 5 } })
    assert.same({ 7, 5 }, ex2.arg_dict.data:shape())
    assert.equal(ex.arg_dict.fc1_weight, ex2.arg_dict.fc1_weight)
    assert.same({ 7, 3 }, ex2:forward()[1]:shape())
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
