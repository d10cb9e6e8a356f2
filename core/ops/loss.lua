-- core/ops/loss.lua — MXNet 1.x's loss heads, the last ops of most 1.x symbol files:
-- SoftmaxOutput, LinearRegressionOutput, LogisticRegressionOutput, MAERegressionOutput and
-- MakeLoss (BlockGrad is stop_gradient, in the autograd family). Their forward is the
-- prediction (softmax, the identity, the sigmoid); their backward is the gradient of the
-- loss they stand for (cross-entropy, squared, logistic or absolute error), whatever head
-- gradient arrives (unless SoftmaxOutput's out_grad): MXNet's semantics, so `out:backward()`
-- on a Module's output trains it. The op table's loss family (kernels/ref/loss.c and
-- spec/loss_spec.lua share the base name); core/ops/optable.lua documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- SoftmaxOutput
local NORM = { "normalization", "enum", "null", values = { "null", "batch", "valid" },
  doc = "how the gradient is normalised: null (not), batch (by the batch size), valid (by "
    .. "the labels that are not ignore_label)" }
local SOFTMAX_OUT = {
  { "grad_scale", "float", 1, doc = "scales the gradient" },
  { "ignore_label", "float", -1, doc = "the label use_ignore skips" },
  { "multi_output", "bool", false, doc = "softmax along axis 2 (MXNet's 1) of (n, k, ...) "
    .. "data; labels (n, ...) without that axis" },
  { "use_ignore", "bool", false, doc = "labels equal to ignore_label get a zero gradient" },
  { "preserve_shape", "bool", false, doc = "softmax along the last axis (else over each "
    .. "sample's flattened values)" },
  NORM,
  { "out_grad", "bool", false, doc = "multiply the gradient by the head gradient" },
  { "smooth_alpha", "float", 0, doc = "label smoothing: alpha taken from the label's class "
    .. "and spread over the others" },
}
op { name = "softmax_output", family = "loss", inputs = { "data", "label" },
  infer = "softmax_output", dtypes = "numeric", params = SOFTMAX_OUT, partial = true,
  grad = function(F, x, y, g, p)
    return { F.softmax_output_backward(y[1], x[2], g[1], p) }
  end,
  doc = "MXNet's SoftmaxOutput: the softmax of each sample's flattened values (along axis 2 "
    .. "with multi_output, the last with preserve_shape); its gradient is that of the "
    .. "cross-entropy with the labels (0-based class ids, or probabilities of data's shape): "
    .. "(out - onehot(label)) * grad_scale / normalisation, zero at use_ignore's "
    .. "ignore_label, smoothed by smooth_alpha; the head gradient is ignored unless out_grad. "
    .. "Labels must be integral class ids in range (or ignore_label)." }
op { name = "softmax_output_backward", family = "loss", inputs = { "out", "label", "ograd" },
  infer = "softmax_output_backward", dtypes = "numeric", nondiff = true, params = SOFTMAX_OUT,
  doc = "softmax_output's gradient for data (out: its output; ograd read with out_grad): "
    .. "MXNet's SoftmaxOutput backward." }

---------------------------------------------------------------- regression outputs
local GS = { { "grad_scale", "float", 1, doc = "scales the gradient" } }
-- d loss / d data = (out - label) * grad_scale / m (m = label's size / its first dim):
-- the label reshaped to the output's shape (MXNet allows (n) for (n, 1) data)
local function regression_grad(sign)
  return function(F, x, y, _, p)
    local ls = x[2]:shape()
    local m = ls[1] and ls[1] > 0 and x[2]:size() / ls[1] or 1
    local d = F.sub(y[1], F.reshape_like(x[2], y[1]))
    if sign then d = F.sign(d) end
    return { F.mul_scalar(d, { scalar = (p.grad_scale or 1) / m }) }
  end
end
op { name = "linear_regression_output", family = "loss", inputs = { "data", "label" },
  infer = "regression_output", dtypes = "numeric", partial = true, params = GS, grad = regression_grad(false),
  doc = "MXNet's LinearRegressionOutput: the identity; its gradient is that of the squared "
    .. "error (out - label) * grad_scale / m, m = label's size / its first dim (labels of "
    .. "data's size, (n) for (n, 1) data)." }
op { name = "logistic_regression_output", family = "loss", inputs = { "data", "label" },
  infer = "regression_output", dtypes = "numeric", partial = true, params = GS, grad = regression_grad(false),
  doc = "MXNet's LogisticRegressionOutput: sigmoid(data); its gradient is that of the "
    .. "logistic loss (out - label) * grad_scale / m, as LinearRegressionOutput's." }
op { name = "mae_regression_output", family = "loss", inputs = { "data", "label" },
  infer = "regression_output", dtypes = "numeric", partial = true, params = GS, grad = regression_grad(true),
  doc = "MXNet's MAERegressionOutput: the identity; its gradient is that of the absolute "
    .. "error sign(out - label) * grad_scale / m, as LinearRegressionOutput's." }

---------------------------------------------------------------- MakeLoss
op { name = "make_loss", family = "loss", inputs = { "data" }, infer = "same", dtypes = "numeric",
  params = { GS[1], { "valid_thresh", "float", 0, doc = "with normalization valid: the "
      .. "elements above it count" }, NORM },
  grad = function(F, x, _, _, p)
    local s = p.grad_scale or 1
    local norm = p.normalization or "null"
    local d = F.full_like(x[1], { value = s })
    if norm == "batch" then
      local n = x[1]:shape()[1] or 1
      return { F.div_scalar(d, { scalar = n > 0 and n or 1 }) }
    elseif norm == "valid" then
      local cnt = F.sum(F.greater_scalar(x[1], { scalar = p.valid_thresh or 0 }))
      cnt = F.maximum_scalar(F.cast(cnt, { dtype = x[1]:dtype() }), { scalar = 1 })
      return { F.div(d, cnt) }
    end
    return { d }
  end,
  doc = "MXNet's MakeLoss (and make_loss): the identity; its gradient is grad_scale "
    .. "everywhere (divided by the batch size with normalization batch, by the count of "
    .. "elements > valid_thresh, at least 1, with valid), whatever the head gradient: a "
    .. "custom loss made from other ops." }

-- MXNet 1.9's operator names of this family's ops (the ops' `mxnet` field: mx_op_find takes
-- them, symbol JSON maps both ways). core/ops/optable.lua sets them on the ops.
local MXNET = {
  softmax_output = { "SoftmaxOutput", "Softmax" },
  linear_regression_output = { "LinearRegressionOutput" },
  logistic_regression_output = { "LogisticRegressionOutput" },
  mae_regression_output = { "MAERegressionOutput" },
  make_loss = { "MakeLoss", "make_loss" },
}

return ops, MXNET
