-- core/ops/norm.lua — the op table's norm family (issue 11: convolutional networks);
-- kernels/*/norm.c and spec/norm_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- batch_norm (owner: norm)
-- The gradient: batch_norm_backward from the saved batch mean and inverse std (outputs 2
-- and 3); in inference or with use_global_stats the statistics are constants.
local function bn_grad(F, x, y, g, p, need)
  if need and not need[1] and not need[2] and not need[3] then return {} end
  local glob = (p.use_global_stats == true) or not p.training
  local fix = p.fix_gamma
  if fix == nil then fix = true end
  local dx, dg, db = F.batch_norm_backward(g[1], x[1], x[2], y[2], y[3],
    { axis = p.axis or 2, fix_gamma = fix, global_stats = glob })
  return { dx, dg, db }
end

op { name = "batch_norm", family = "norm", cpu = true, infer = "batch_norm", partial = true,
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
    { "training", "bool", false, doc = "train mode (filled from mx.autograd's flag)" } },
  grad = bn_grad,
  doc = "Batch normalisation over every axis but `axis`: out = (x - mean) * invstd * gamma + "
    .. "beta. In training (and not use_global_stats) mean and the biased variance are the "
    .. "batch's, and moving_mean/moving_var (auxiliary inputs, written in place) become "
    .. "moving * momentum + batch * (1 - momentum); otherwise the moving statistics are "
    .. "used. Outputs 2 and 3 are the mean used and the inverse std 1/sqrt(var + eps), as "
    .. "MXNet's CPU kernel saves them." }

op { name = "batch_norm_backward", family = "norm", cpu = true, infer = "batch_norm_backward",
  inputs = { "ograd", "data", "gamma", "mean", "invstd" },
  outputs = { "ddata", "dgamma", "dbeta" }, dtypes = "f32f64", promote = { 1, 2, 3, 4, 5 }, amp = "fp32",
  nondiff = true,
  params = {
    { "axis", "axis", 2, doc = "the channel axis (1-based)" },
    { "fix_gamma", "bool", true, doc = "gamma taken as 1; dgamma is 0" },
    { "global_stats", "bool", false, doc = "mean/invstd are constants (inference or "
      .. "use_global_stats): ddata = ograd * gamma * invstd" } },
  doc = "The gradients of batch_norm for data, gamma and beta from the output gradient, the "
    .. "data and the saved mean and inverse std: with batch statistics ddata = gamma * invstd "
    .. "* (dy - mean(dy) - xhat * mean(dy * xhat)), dgamma = sum(dy * xhat), dbeta = sum(dy)." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
  batch_norm = { "BatchNorm" },
}

return ops, MXNET
