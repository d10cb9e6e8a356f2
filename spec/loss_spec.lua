-- spec/loss_spec.lua — MXNet 1.x's loss heads (core/ops/loss.lua): SoftmaxOutput in every
-- mode, Linear/Logistic/MAERegressionOutput and MakeLoss against MXNet 1.9.1's outputs and
-- gradients (spec/fixtures/loss_mxnet.lua, tools/fixtures/make_loss_fixture.py; the head
-- gradient 3s is ignored as MXNet ignores it), label inference in symbols, the JSON names,
-- and errors. Their gradients are also checked against the losses they stand for in
-- spec/gradcheck_spec.lua (spec/helpers/gradcases.lua).
local mx = require("mx")
local nd = mx.nd
local FIX = dofile("spec/fixtures/loss_mxnet.lua")

local function arr(t) return nd.array(t[1]):reshape(t.shape) end
local by_name = {}
for _, c in ipairs(FIX) do by_name[c.name] = c end
-- MXNet 1.9.1's out_grad multiplies by the op's output instead of the head gradient (its
-- FGradient never passes the head gradient on: softmax_output.cc SoftmaxOutputGrad); luamx
-- multiplies by the head gradient, as the parameter's doc says (docs/mxnet-differences.md)
local OWN = { softmax_out_grad = function()
  local g, d = {}, by_name.softmax_default.grad
  for i = 1, #d do g[i] = d[i] * 3 end
  return g
end }
local function close(got, want, tol, what)
  local g = got:tolist()
  assert.equal(#want, #g, what)
  for i = 1, #want do
    assert.is_true(math.abs(g[i] - want[i]) <= tol * (1 + math.abs(want[i])),
      string.format("%s element %d: %.7g, MXNet %.7g", what, i, g[i], want[i]))
  end
end

describe("loss heads against MXNet 1.9.1", function()
  for _, c in ipairs(FIX) do
    it(c.name .. " (" .. c.op .. ")", function()
      local x = arr(c.data)
      x:attach_grad()
      local y = mx.autograd.record(function()
        if c.label then return nd[c.op](x, arr(c.label), c.params) end
        return nd[c.op](x, c.params)
      end)
      y:backward(nd.full(y:shape(), 3))
      close(y, c.out, 1e-5, "out")
      close(x:grad(), OWN[c.name] and OWN[c.name](c) or c.grad, 1e-5, "grad")
    end)
  end
end)

describe("loss heads", function()
  it("are mx.nd functions under luamx's and MXNet's names; the backward is an op too", function()
    local x = nd.array { { 1, 2, 3 }, { 0, 0, 0 } }
    -- the MXNet names take MXNet's positional params too (mx.core.opargs)
    assert.same(nd.softmax_output(x, nd.array { 2, 1 }):tolist(),
      nd.SoftmaxOutput(x, nd.array { 2, 1 }):tolist())
    for luamx, mxnet in pairs { linear_regression_output = "LinearRegressionOutput",
        logistic_regression_output = "LogisticRegressionOutput",
        mae_regression_output = "MAERegressionOutput" } do
      assert.same(nd[luamx](x, x):tolist(), nd[mxnet](x, x):tolist())
    end
    assert.same(nd.make_loss(x):tolist(), nd.MakeLoss(x):tolist())
    assert.same(nd.softmax_output(x, nd.array { 2, 1 }, { grad_scale = 2 }):tolist(),
      nd.SoftmaxOutput(x, nd.array { 2, 1 }, 2):tolist())
    local y = nd.softmax_output(x, nd.array { 2, 1 })
    local g = nd.softmax_output_backward(y, nd.array { 2, 1 }, nd.ones { 2, 3 })
    local want = nd.sub(y, nd.array { { 0, 0, 1 }, { 0, 1, 0 } })
    assert.is_true(nd.abs(nd.sub(g, want)):max():item() < 1e-6)
    assert.is_true(nd.abs(nd.sub(nd.logistic_regression_output(x, x), nd.sigmoid(x))):max():item()
      < 1e-6)
    assert.same(x:tolist(), nd.linear_regression_output(x, x):tolist())
    assert.same(x:tolist(), nd.mae_regression_output(x, x):tolist())
    assert.same(x:tolist(), nd.make_loss(x):tolist())
  end)

  it("are MXNet's operators in symbols: names, label inference, JSON", function()
    local S = mx.sym
    S._reset_names()
    local net = S.SoftmaxOutput(S.FullyConnected(S.var("data"), { num_hidden = 10, name = "fc" }),
      { name = "softmax" })
    assert.same({ "data", "fc_weight", "fc_bias", "softmax_label" }, net:list_arguments())
    local a, o = net:infer_shape { data = { 4, 20 } }
    assert.same({ { 4, 20 }, { 10, 20 }, { 10 }, { 4 } }, a)
    assert.same({ { 4, 10 } }, o)
    local multi = S.SoftmaxOutput(S.var("d"), { multi_output = true, name = "sm" })
    a = multi:infer_shape { d = { 2, 3, 5, 5 } }
    assert.same({ 2, 25 }, a[2])
    local reg = S.LinearRegressionOutput(S.var("x"), { name = "lro" })
    a = reg:infer_shape { x = { 8, 1 } }
    assert.same({ 8 }, a[2])
    local back = S.fromjson(net:tojson())
    assert.equal(net:tojson(), back:tojson())
    assert.is_truthy(net:tojson():find('"op": "SoftmaxOutput"', 1, true) or
      net:tojson():find('"op":"SoftmaxOutput"', 1, true))
    local ml = S.MakeLoss(S.var("z"), { normalization = "batch" })
    assert.is_truthy(ml:tojson():find("MakeLoss", 1, true))
  end)

  it("refuse bad labels and data at the caller's line", function()
    local x = nd.array { { 1, 2, 3 }, { 1, 1, 1 } }
    x:attach_grad()
    assert.has_error(function() nd.SoftmaxOutput(x, nd.array { 1, 2, 3 }) end,
      "softmax_output: label (3,) must hold one class id per sample (2 of them) or be "
        .. "probabilities of data's shape (2, 3)")
    local y = mx.autograd.record(function() return nd.SoftmaxOutput(x, nd.array { 5, 0 }) end)
    assert.has_error(function() y:backward() mx.nd.waitall() local _ = x:grad():tolist() end)
    y = mx.autograd.record(function()
      return nd.SoftmaxOutput(x, nd.array { -1, 0 }, { use_ignore = true })
    end)
    y:backward()
    assert.same({ 0, 0, 0 }, x:grad()[1]:tolist()) -- the ignored row
    assert.has_error(function() nd.LinearRegressionOutput(x, nd.zeros { 3, 2 }) end,
      "linear_regression_output: label (3, 2) must have data (2, 3)'s size and first dim")
    assert.has_error(function() nd.SoftmaxOutput(nd.array({ { 1, 2 } }, { dtype = "int32" }),
      nd.array { 0 }) end, "softmax_output: data must be floating-point, got int32")
  end)
end)
