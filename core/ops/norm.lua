-- core/ops/norm.lua — the op table's norm family;
-- kernels/*/norm.c and spec/norm_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- batch_norm
-- The gradient: batch_norm_backward from the saved batch mean and inverse std (outputs 2
-- and 3); in inference or with use_global_stats the statistics are constants.
local function bn_grad(F, x, y, g, p, need)
  if need and not need[1] and not need[2] and not need[3] then return {} end
  if p.act_type == "relu" then g = { F.relu_backward(g[1], y[1]) } end
  local glob = (p.use_global_stats == true) or not p.training
  local fix = p.fix_gamma
  if fix == nil then fix = true end
  local dx, dg, db = F.batch_norm_backward(g[1], x[1], x[2], y[2], y[3],
    { axis = p.axis or 2, fix_gamma = fix, global_stats = glob })
  return { dx, dg, db }
end

-- oneDNN (kernels/dnnl/norm.c) for data in its blocked layout (channel axis 2)
local DNNL_BN = { supports = true, out_layout = true, layouts = { "onednn" } }
op { name = "batch_norm", family = "norm", half = "out", cpu = true, dnnl = DNNL_BN, infer = "batch_norm",
  partial = true,
  inputs = { "data", "gamma", "beta" }, aux = { "moving_mean", "moving_var" },
  outputs = { "out", "mean", "var" }, dtypes = "f32f64", promote = { 1, 2, 3 }, amp = "fp32",
  train_flag = "training",
  params = {
    { "eps", "float", 1e-3, doc = "added to the variance (MXNet's default 1e-3)" },
    { "momentum", "float", 0.9, doc = "moving = moving * momentum + batch * (1 - momentum)" },
    { "fix_gamma", "bool", true, doc = "treat gamma as 1 (its gradient is 0)" },
    { "use_global_stats", "bool", false, doc = "normalise with the moving statistics in "
      .. "training too (they are then not updated)" },
    { "output_mean_var", "bool", false, doc = "accepted for MXNet: the mean and var outputs "
      .. "always exist here" },
    { "axis", "axis", 2, doc = "the channel axis (1-based; 2: NCHW, -1: NHWC)" },
    { "cudnn_off", "bool", false, doc = "accepted and ignored" },
    { "training", "bool", false, doc = "train mode (filled from mx.autograd's flag)" },
    { "act_type", "enum", "none", values = { "none", "relu" }, doc = "activation applied in "
      .. "the same pass (an extension: what inference graphs fuse of BatchNorm -> relu)" } },
  grad = bn_grad,
  doc = "Batch normalisation over every axis but `axis`: out = (x - mean) * invstd * gamma + "
    .. "beta. In training (and not use_global_stats) mean and the biased variance are the "
    .. "batch's, and moving_mean/moving_var (auxiliary inputs, written in place) become "
    .. "moving * momentum + batch * (1 - momentum); otherwise the moving statistics are "
    .. "used. Outputs 2 and 3 are the mean used and the inverse std 1/sqrt(var + eps), as "
    .. "MXNet's CPU kernel saves them." }

op { name = "batch_norm_backward", family = "norm", cpu = true, dnnl = DNNL_BN,
  infer = "batch_norm_backward",
  inputs = { "ograd", "data", "gamma", "mean", "invstd" },
  outputs = { "ddata", "dgamma", "dbeta" }, dtypes = "f32f64", promote = { 1, 2, 3, 4, 5 },
  amp = "fp32", nondiff = true,
  params = {
    { "axis", "axis", 2, doc = "the channel axis (1-based)" },
    { "fix_gamma", "bool", true, doc = "gamma taken as 1; dgamma is 0" },
    { "global_stats", "bool", false, doc = "mean/invstd are constants (inference or "
      .. "use_global_stats): ddata = ograd * gamma * invstd" } },
  doc = "The gradients of batch_norm for data, gamma and beta from the output gradient, the "
    .. "data and the saved mean and inverse std: with batch statistics ddata = gamma * invstd "
    .. "* (dy - mean(dy) - xhat * mean(dy * xhat)), dgamma = sum(dy * xhat), dbeta = sum(dy)." }

---------------------------------------------------------------- group/instance norm
-- Statistics per (sample, group) over the group's channels and every spatial position;
-- group_norm's gamma/beta are per group (MXNet 1.9), instance_norm's per channel.
local function gn_grad(per_channel)
  return function(F, x, y, g, p, need)
    if need and not need[1] and not need[2] and not need[3] then return {} end
    local dx, dg, db = F.group_norm_backward(g[1], x[1], x[2], y[2], y[3],
      { num_groups = per_channel and 0 or (p.num_groups or 1) })
    return { dx, dg, db }
  end
end
op { name = "group_norm", family = "norm", half = "all", cpu = true, infer = "group_norm", partial = true,
  inputs = { "data", "gamma", "beta" }, outputs = { "out", "mean", "std" },
  dtypes = "f32f64", promote = { 1, 2, 3 }, amp = "fp32",
  params = {
    { "num_groups", "int", 1, doc = "channel groups (must divide the channel count)" },
    { "eps", "float", 1e-5, doc = "added to the variance" },
    { "output_mean_var", "bool", false, doc = "accepted for MXNet: mean and std always exist" } },
  grad = gn_grad(false),
  doc = "Group normalisation of data (N, C, ...): the channels split into num_groups groups, "
    .. "each (sample, group) normalised by its mean and biased variance, then scaled and "
    .. "shifted by gamma/beta of shape (num_groups) as MXNet 1.9. Outputs 2 and 3: mean and "
    .. "std = sqrt(var + eps), shape (N, num_groups)." }
op { name = "instance_norm", family = "norm", half = "all", cpu = true,
  infer = "instance_norm", partial = true,
  inputs = { "data", "gamma", "beta" }, outputs = { "out", "mean", "std" },
  dtypes = "f32f64", promote = { 1, 2, 3 }, amp = "fp32",
  params = { { "eps", "float", 1e-3, doc = "added to the variance (MXNet's default 1e-3)" } },
  grad = gn_grad(true),
  doc = "Instance normalisation of data (N, C, ...): each (sample, channel) normalised by its "
    .. "spatial mean and biased variance, then out * gamma[c] + beta[c]. Outputs 2 and 3: mean "
    .. "and std = sqrt(var + eps), shape (N, C)." }
op { name = "group_norm_backward", family = "norm", cpu = true, infer = "group_norm_backward",
  inputs = { "ograd", "data", "gamma", "mean", "std" }, outputs = { "ddata", "dgamma", "dbeta" },
  dtypes = "f32f64", promote = { 1, 2, 3, 4, 5 }, amp = "fp32", nondiff = true,
  params = { { "num_groups", "int", 1, doc = "the forward's groups; 0: instance_norm (one "
    .. "group per channel, gamma per channel)" } },
  doc = "The gradients of group_norm (num_groups >= 1) or instance_norm (num_groups = 0) for "
    .. "data, gamma and beta, from the output gradient, the data and the saved mean and std." }

---------------------------------------------------------------- lrn
op { name = "lrn", family = "norm", infer = "lrn", inputs = { "data" }, dtypes = "f32f64",
  amp = "fp32",
  params = {
    { "nsize", "int", nil, doc = "the window of channels (odd; required)" },
    { "alpha", "float", 1e-4, doc = "scale of the squared sum" },
    { "beta", "float", 0.75, doc = "exponent" },
    { "knorm", "float", 2, doc = "added constant" } },
  grad = function(F, x, _, g, p)
    return { F.lrn_backward(g[1], x[1], { nsize = p.nsize, alpha = p.alpha, beta = p.beta,
      knorm = p.knorm }) }
  end,
  doc = "Local response normalisation across channels (axis 2): out = x / (knorm + alpha / "
    .. "nsize * sum of x^2 over the nsize channels centred on it)^beta." }
op { name = "lrn_backward", family = "norm", infer = "lrn_backward", inputs = { "ograd", "data" },
  dtypes = "f32f64", promote = { 1, 2 }, amp = "fp32", nondiff = true,
  params = {
    { "nsize", "int", nil, doc = "as lrn" }, { "alpha", "float", 1e-4, doc = "as lrn" },
    { "beta", "float", 0.75, doc = "as lrn" }, { "knorm", "float", 2, doc = "as lrn" } },
  doc = "The data gradient of lrn from the output gradient and the data." }

---------------------------------------------------------------- l2_normalization
-- The reduction axes of each mode (1-based) for the gradient: norm (output 2) keeps dims.
local function l2_axes(mode, nd)
  local a = {}
  if mode == "channel" then a[1] = 2
  elseif mode == "spatial" then for d = 3, nd do a[#a + 1] = d end
  else for d = 2, nd do a[#a + 1] = d end end
  return a
end
op { name = "l2_normalization", family = "norm", infer = "l2_normalization",
  inputs = { "data" }, outputs = { "out", "norm" }, dtypes = "f32f64", amp = "fp32",
  params = {
    { "eps", "float", 1e-10, doc = "added to the squared sum" },
    { "mode", "enum", "instance", values = { "instance", "channel", "spatial" },
      doc = "instance: over all dims but the first; channel: over axis 2; spatial: over "
        .. "axes 3..n" } },
  grad = function(F, x, y, g, p)
    -- y = x / r: dx = (g - y * sum(g * y)) / r over the mode's axes
    local s = F.sum(F.mul(g[1], y[1]), { axis = l2_axes(p.mode or "instance", x[1]:ndim()),
      keepdims = true })
    return { F.div(F.sub(g[1], F.mul(y[1], s)), y[2]) }
  end,
  doc = "out = x / sqrt(sum(x^2) + eps), the sum per sample (instance), per sample and "
    .. "position over the channels (channel), or per sample and channel over the positions "
    .. "(spatial). Output 2: the norm, with the summed dims kept as size 1." }

---------------------------------------------------------------- layer_norm
op { name = "layer_norm", family = "norm", half = "all", cpu = { supports = true }, infer = "layer_norm",
  partial = true,
  inputs = { "data", "gamma", "beta" }, outputs = { "out", "mean", "std" },
  dtypes = "f32f64", promote = { 1, 2, 3 }, amp = "fp32",
  params = {
    { "axis", "axis", -1, doc = "the normalised axis (1-based; -1: the last)" },
    { "eps", "float", 1e-5, doc = "added to the variance" },
    { "output_mean_var", "bool", false, doc = "accepted for MXNet: mean and std always exist" } },
  grad = function(F, x, y, g, p, need)
    if need and not need[1] and not need[2] and not need[3] then return {} end
    local dx, dg, db = F.layer_norm_backward(g[1], x[1], x[2], y[2], y[3], { axis = p.axis or -1 })
    return { dx, dg, db }
  end,
  doc = "MXNet's LayerNorm: each vector along axis normalised by its mean and biased "
    .. "variance, then out = xhat * gamma + beta with gamma/beta of shape (C). Outputs 2 and "
    .. "3: mean and std = sqrt(var + eps), data's shape with axis cut to 1 (as MXNet)." }
op { name = "layer_norm_backward", family = "norm", cpu = { supports = true }, infer = "layer_norm_backward",
  inputs = { "ograd", "data", "gamma", "mean", "std" }, outputs = { "ddata", "dgamma", "dbeta" },
  dtypes = "f32f64", promote = { 1, 2, 3, 4, 5 }, amp = "fp32", nondiff = true,
  params = { { "axis", "axis", -1, doc = "the forward's axis (1-based)" } },
  doc = "The gradients of layer_norm for data, gamma and beta from the output gradient, the "
    .. "data and the saved mean and std, in one fused pass." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
  batch_norm = { "BatchNorm" }, group_norm = { "GroupNorm" }, instance_norm = { "InstanceNorm" },
  lrn = { "LRN" }, l2_normalization = { "L2Normalization" },
}
MXNET.layer_norm = { "LayerNorm" }

return ops, MXNET
