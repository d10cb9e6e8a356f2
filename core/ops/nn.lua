-- core/ops/nn.lua — the neural-network layers (dropout, activation): the op table's nn family
-- (kernels/*/nn.c and spec/nn_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- nn (owner: gl)
op { name = "dropout", family = "nn", inputs = { "data" }, outputs = { "out", "mask" },
  infer = "dropout", dtypes = "float", cpu = true, train_flag = "training",
  params = { { "p", "float", 0.5, doc = "drop probability" },
    { "mode", "enum", "training", values = { "training", "always" },
      doc = "training: drop only in train mode; always: also at inference" },
    { "axes", "axes", nil, doc = "axes along which the mask is shared (variational dropout)" },
    { "training", "bool", false, doc = "train mode (filled from mx.autograd's flag)" } },
  random = true,
  grad = function(F, x, y, g) return { F.mul(g[1], y[2]) } end,
  doc = "Inverted dropout: zeroes each element with probability p and scales the kept ones "
    .. "by 1/(1-p) in train mode; the identity otherwise. Second output: the mask (kept "
    .. "1/(1-p), dropped 0), reproducible under mx.random.seed." }
op { name = "activation", family = "nn", inputs = { "data" }, infer = "same_float",
  dtypes = "float",
  params = { { "act_type", "enum", "relu",
    values = { "relu", "sigmoid", "tanh", "softrelu", "softsign" } } },
  grad = function(F, x, y, g, p)
    local t = p and p.act_type or "relu"
    if t == "relu" then return { F.relu_backward(g[1], x[1]) } end
    local d
    if t == "sigmoid" then d = F.mul(y[1], F.rsub_scalar(y[1], { scalar = 1 }))
    elseif t == "tanh" then d = F.rsub_scalar(F.square(y[1]), { scalar = 1 })
    elseif t == "softrelu" then d = F.sigmoid(x[1])
    else d = F.rdiv_scalar(F.square(F.add_scalar(F.abs(x[1]), { scalar = 1 })), { scalar = 1 })
    end
    return { F.mul(g[1], d) }
  end,
  doc = "MXNet's Activation: act_type relu, sigmoid, tanh, softrelu (log(1+e^x), stable) "
    .. "or softsign (x/(1+|x|))." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  dropout = { "Dropout" }, activation = { "Activation" },
}

return ops, MXNET
