-- core/ops/nn.lua — the neural-network layers (dropout, activation): the op table's nn family
-- (kernels/*/nn.c and spec/nn_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

-- oneDNN's eltwise (kernels/dnnl/nn.c) runs the forwards of the activations on tensors in
-- its blocked layout, so a chain of oneDNN ops keeps its layout; row-major calls stay on
-- the cpu kernels.
local DNNL_ELTWISE = { "eltwise", supports = true, out_layout = true, layouts = { "onednn" } }

---------------------------------------------------------------- nn
op { name = "dropout", family = "nn", inputs = { "data" }, outputs = { "out", "mask" },
  infer = "dropout", dtypes = "float", cpu = true, train_flag = "training",
  params = { { "p", "float", 0.5, doc = "drop probability" },
    { "mode", "enum", "training", values = { "training", "always" },
      doc = "training: drop only in train mode; always: also at inference" },
    { "axes", "axes", nil, doc = "axes along which the mask is shared (variational dropout)" },
    { "cudnn_off", "bool", false, doc = "accepted and ignored (MXNet's GPU switch; Gluon writes it)" },
    { "training", "bool", false, doc = "train mode (filled from mx.autograd's flag)" } },
  random = true,
  grad = function(F, x, y, g) return { F.mul(g[1], y[2]) } end,
  doc = "Inverted dropout: zeroes each element with probability p and scales the kept ones "
    .. "by 1/(1-p) in train mode; the identity otherwise. Second output: the mask (kept "
    .. "1/(1-p), dropped 0), reproducible under mx.random.seed." }
op { name = "activation", family = "nn",
  amp_fp32_if = { "act_type", { "softrelu" } }, inputs = { "data" }, infer = "same_float",
  dtypes = "float", cpu = true, dnnl = DNNL_ELTWISE, inplace = { { 1, 1 } },
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

---------------------------------------------------------------- activations
-- leaky_relu is MXNet's LeakyReLU; the unary activations below are elementwise float ops
-- with one backward op each (<name>_backward(ograd, data): ograd * f'(data), one pass).
local LEAKY_TYPES = { "leaky", "prelu", "elu", "selu", "gelu", "rrelu" }
op { name = "leaky_relu", family = "nn",
  amp_fp32_if = { "act_type", { "elu", "selu" } }, inputs = { "data", "gamma?" }, outputs = { "out", "mask" },
  infer = "leaky_relu", partial = true,
  dtypes = "float", cpu = true, dnnl = DNNL_ELTWISE, train_flag = "training", random = true,
  params = { { "act_type", "enum", "leaky", values = LEAKY_TYPES },
    { "slope", "float", 0.25, doc = "leaky: negative slope; elu: alpha" },
    { "lower_bound", "float", 0.125, doc = "rrelu: lowest random slope" },
    { "upper_bound", "float", 0.334, doc = "rrelu: highest random slope" },
    { "training", "bool", false, doc = "train mode (filled from mx.autograd's flag): rrelu "
      .. "draws its slopes only then" } },
  grad = function(F, x, y, g, p, need)
    local q = { act_type = p.act_type, slope = p.slope }
    if x[2] then
      local dx, dg = F.leaky_relu_backward(g[1], x[1], y[2], x[2], q)
      return { (not need or need[1]) and dx or nil, dg }
    end
    return { (F.leaky_relu_backward(g[1], x[1], y[2], q)) }
  end,
  doc = "MXNet's LeakyReLU: act_type leaky (x > 0 ? x : slope*x), prelu (slope from the "
    .. "input gamma, (C) along axis 2 or (1)), elu (x > 0 ? x : slope*(e^x - 1)), selu "
    .. "(scaled elu, fixed constants), gelu (erf form) or rrelu (negative slope drawn "
    .. "uniformly in [lower_bound, upper_bound] per element in train mode, reproducible "
    .. "under mx.random.seed; their mean at inference). NaN stays NaN. Second output: "
    .. "rrelu's slopes (data's shape) in train mode, else (1) holding the negative slope "
    .. "(leaky: slope, rrelu: (lower_bound+upper_bound)/2; 0 for the other types)." }
op { name = "leaky_relu_backward", family = "nn", inputs = { "ograd", "data", "mask", "gamma?" },
  outputs = { "ddata", "dgamma" }, infer = "leaky_relu_backward", dtypes = "float", cpu = true,
  nondiff = true,
  params = { { "act_type", "enum", "leaky", values = LEAKY_TYPES },
    { "slope", "float", 0.25, doc = "as the forward's" } },
  doc = "leaky_relu's gradient: ddata = ograd * f'(data) (rrelu: the forward's mask as the "
    .. "slope), dgamma (prelu) = ograd * min(data, 0) summed to gamma's shape; "
    .. "dgamma is (1) of zeros without gamma." }

-- an elementwise activation with its backward op `<name>_backward`
local function act(name, params, doc, dnnl)
  local bw = name .. "_backward"
  local names = {} -- the param names: the backward's options copied without pairs()
  for i, q in ipairs(params or {}) do names[i] = q[1] end
  op { name = name, family = "nn", inputs = { "data" }, infer = "same_float", dtypes = "float",
    cpu = true, dnnl = dnnl, params = params, inplace = { { 1, 1 } },
    grad = function(F, x, y, g, p, _, into)
      -- into (eager backward only): the gradient straight into the variable's buffer
      local dst = into and into[1]
      if dst then
        local q = { out = dst }
        for i = 1, #names do q[names[i]] = p[names[i]] end
        p = q
      end
      return { F[bw](g[1], x[1], p) }
    end,
    doc = doc .. " NaN stays NaN." }
  op { name = bw, family = "nn", inputs = { "ograd", "data" }, infer = "act_backward",
    dtypes = "float", cpu = true, params = params, nondiff = true,
    doc = name .. "'s gradient: ograd * " .. name .. "'(data)." }
end
act("hard_sigmoid", { { "alpha", "float", 0.2 }, { "beta", "float", 0.5 } },
  "MXNet's hard_sigmoid: max(0, min(1, alpha*x + beta)).")
act("silu", { { "beta", "float", 1, doc = "Swish's beta" } },
  "SiLU / Swish: x * sigmoid(beta*x) (beta = 1: SiLU).", DNNL_ELTWISE)
act("hard_swish", nil, "Hard swish (MobileNet v3): x * relu6(x + 3) / 6.", DNNL_ELTWISE)
act("gelu", { { "approximation", "enum", "erf", values = { "erf", "tanh" } } },
  "GELU: x * Phi(x) with the erf form (MXNet's LeakyReLU gelu, npx.gelu) or the tanh "
    .. "approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).", DNNL_ELTWISE)
act("log_sigmoid", nil, "log(sigmoid(x)), computed stably (min(x, 0) - log1p(e^-|x|)).",
  DNNL_ELTWISE)
act("mish", nil, "Mish: x * tanh(softplus(x)).", DNNL_ELTWISE)

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  dropout = { "Dropout" }, activation = { "Activation" }, leaky_relu = { "LeakyReLU" },
  hard_sigmoid = { "hard_sigmoid" },
}

return ops, MXNET
