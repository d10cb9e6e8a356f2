-- core/ops/optimizer.lua — the fused optimizer updates: the op table's optimizer family
-- (kernels/*/optimizer.c and spec/optimizer_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- optimizer
-- Fused update ops (MXNet's *_update): one pass over each parameter. Inputs weight,
-- grad, states...; outputs the new weight and states. Pass out={weight, states...} to
-- update in place (gluon.Trainer does). g' below is the preprocessed gradient.
local UPD = { { "lr", "float", 0.01, doc = "learning rate" },
  { "wd", "float", 0, doc = "weight decay" },
  { "rescale_grad", "float", 1, doc = "gradient scale (1/batch_size in Trainer)" },
  { "clip_gradient", "float", -1, doc = "clip the rescaled gradient to [-c, c]; < 0: off" } }
local function upd_params(extra)
  local t = {}
  for _, p in ipairs(UPD) do t[#t + 1] = p end
  for _, p in ipairs(extra or {}) do t[#t + 1] = p end
  return t
end
local function update_op(name, inputs, extra, doc)
  local outputs, inplace = { "weight_out" }, { { 1, 1 } }
  for i = 3, #inputs do
    outputs[#outputs + 1] = inputs[i] .. "_out"
    inplace[#inplace + 1] = { #outputs, i } -- each state is updated where it is
  end
  op { name = name, family = "optimizer", inputs = inputs, outputs = outputs, infer = "update",
    dtypes = "float", cpu = true, nondiff = true, params = upd_params(extra), doc = doc,
    inplace = inplace }
end
update_op("sgd_update", { "weight", "grad" }, nil,
  "SGD step: w -= lr * (clip(rescale_grad*grad) + wd*w).")
update_op("sgd_mom_update", { "weight", "grad", "mom" },
  { { "momentum", "float", 0, doc = "momentum" } },
  "SGD with momentum: mom = momentum*mom - lr*(clip(rescale_grad*grad) + wd*w); w += mom.")
update_op("nag_mom_update", { "weight", "grad", "mom" },
  { { "momentum", "float", 0, doc = "momentum" } },
  "Nesterov momentum: g' = clip(rescale_grad*grad) + wd*w; mom = momentum*mom - lr*g'; "
    .. "w += momentum*mom - lr*g'.")
update_op("adam_update", { "weight", "grad", "mean", "var" },
  { { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "epsilon", "float", 1e-8 } },
  "Adam step (lr already bias-corrected by the caller): g' = clip(rescale_grad*grad + wd*w); "
    .. "mean = beta1*mean + (1-beta1)*g'; var = beta2*var + (1-beta2)*g'^2; "
    .. "w -= lr*mean/(sqrt(var) + epsilon).")
update_op("adamw_update", { "weight", "grad", "mean", "var" },
  { { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "epsilon", "float", 1e-8 },
    { "eta", "float", 1, doc = "schedule multiplier" } },
  "AdamW step (decoupled weight decay): g' = clip(rescale_grad*grad); mean, var as Adam; "
    .. "w -= eta*(lr*mean/(sqrt(var) + epsilon) + wd*w).")
update_op("rmsprop_update", { "weight", "grad", "n" },
  { { "rho", "float", 0.95 }, { "epsilon", "float", 1e-8 },
    { "clip_weights", "float", -1, doc = "clip weights to [-c, c]; < 0: off" } },
  "RMSProp (Tieleman & Hinton): g' = clip(rescale_grad*grad + wd*w); n = rho*n + (1-rho)*g'^2; "
    .. "w -= lr*g'/sqrt(n + epsilon).")
update_op("rmspropalex_update", { "weight", "grad", "n", "g", "delta" },
  { { "rho", "float", 0.95 }, { "momentum", "float", 0.9 }, { "epsilon", "float", 1e-8 },
    { "clip_weights", "float", -1, doc = "clip weights to [-c, c]; < 0: off" } },
  "Centered RMSProp (Graves 2013): g' = clip(rescale_grad*grad + wd*w); n = rho*n + "
    .. "(1-rho)*g'^2; g = rho*g + (1-rho)*g'; delta = momentum*delta - lr*g'/sqrt(n - g^2 + "
    .. "epsilon); w += delta.")
update_op("adagrad_update", { "weight", "grad", "history" },
  { { "epsilon", "float", 1e-7 } },
  "AdaGrad: g' = clip(rescale_grad*grad) + wd*w; history += g'^2; "
    .. "w -= lr*g'/(sqrt(history) + epsilon).")

---------------------------------------------------------------- optimizer
-- MXNet 1.9's signsgd_update, signum_update and ftrl_update; adamax_update, nadam_update and
-- adadelta_update fuse the steps MXNet 1.9 writes in Python (no MXNet op of that name).
update_op("signsgd_update", { "weight", "grad" }, nil,
  "signSGD (MXNet's: rescale_grad and clip_gradient have no effect on a sign): "
    .. "w = (1 - lr*wd)*w - lr*sign(grad).")
update_op("signum_update", { "weight", "grad", "mom" },
  { { "momentum", "float", 0, doc = "momentum" },
    { "wd_lh", "float", 0, doc = "decoupled weight decay (Loshchilov & Hutter)" } },
  "Signum: mom = momentum*mom - (1-momentum)*(wd*w + clip(rescale_grad*grad)); "
    .. "w = (1 - lr*wd_lh)*w + lr*sign(mom).")
update_op("ftrl_update", { "weight", "grad", "z", "n" },
  { { "lamda1", "float", 0.01, doc = "L1 regularization strength" },
    { "beta", "float", 1, doc = "per-coordinate learning rate offset" } },
  "FTRL-Proximal: g' = clip(rescale_grad*grad); z += g' - (sqrt(n + g'^2) - sqrt(n))*w/lr; "
    .. "n += g'^2; w = (sign(z)*lamda1 - z) / ((beta + sqrt(n))/lr + wd) where |z| > lamda1, "
    .. "else 0.")
update_op("adamax_update", { "weight", "grad", "mean", "u" },
  { { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 } },
  "Adamax (lr already bias-corrected by the caller: lr/(1 - beta1^t)): g' = clip(rescale_grad*"
    .. "grad + wd*w); mean = beta1*mean + (1-beta1)*g'; u = max(beta2*u, |g'|); w -= lr*mean/u.")
update_op("nadam_update", { "weight", "grad", "mean", "var" },
  { { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "epsilon", "float", 1e-8 },
    { "g_coef", "float", 1, doc = "(1 - momentum_t)/(1 - m_schedule)" },
    { "m_coef", "float", 1, doc = "momentum_t_1/(1 - m_schedule_next)" },
    { "v_coef", "float", 1, doc = "1/(1 - beta2^t)" } },
  "Nadam (the schedule's coefficients from the caller): g' = clip(rescale_grad*grad + wd*w); "
    .. "mean, var as Adam; w -= lr*(g_coef*g' + m_coef*mean)/(sqrt(v_coef*var) + epsilon).")
update_op("adadelta_update", { "weight", "grad", "acc_g", "acc_delta" },
  { { "rho", "float", 0.9 }, { "epsilon", "float", 1e-5 } },
  "AdaDelta: g' = clip(rescale_grad*grad); acc_g = rho*acc_g + (1-rho)*g'^2; "
    .. "d = sqrt(acc_delta + epsilon)/sqrt(acc_g + epsilon)*g'; acc_delta = rho*acc_delta + "
    .. "(1-rho)*d^2; w -= lr*(d + wd*w) (lr = 1 is MXNet 1.9's step).")

-- LAMB's first phase (MXNet's lamb_update_phase1): outputs the step direction g, and the
-- states in place; the trust ratio (phase 2) is applied by mx.optimizer.LAMB.
op { name = "lamb_update_phase1", family = "optimizer", inputs = { "weight", "grad", "mean", "var" },
  outputs = { "g", "mean_out", "var_out" }, infer = "update", dtypes = "float", cpu = true,
  nondiff = true, inplace = { { 2, 3 }, { 3, 4 } },
  params = { UPD[2], UPD[3], UPD[4], { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 },
    { "epsilon", "float", 1e-6 }, { "t", "int", 1, doc = "update count (bias correction)" },
    { "bias_correction", "bool", true } }, -- no lr: phase 2 applies it
  doc = "LAMB phase 1: g' = clip(rescale_grad*grad); mean = beta1*mean + (1-beta1)*g'; var = "
    .. "beta2*var + (1-beta2)*g'^2; g = mean^/(sqrt(var^) + epsilon) + wd*w, with mean^ = "
    .. "mean/(1-beta1^t), var^ = var/(1-beta2^t) under bias_correction (else mean, var)." }

-- Multi-precision SGD (MXNet's mp_sgd_update, mp_sgd_mom_update): a float16/bfloat16
-- weight and gradient with float32 states and a float32 master copy weight32; the step
-- runs on weight32 (and mom) in float32, weight gets weight32 cast back. Outputs the new
-- weight and every state (out={weight, [mom,] weight32} updates in place).
local function mp_op(name, inputs, extra, doc)
  local outputs, inplace = { "weight_out" }, { { 1, 1 } }
  for i = 3, #inputs do
    outputs[#outputs + 1] = inputs[i] .. "_out"
    inplace[#inplace + 1] = { #outputs, i }
  end
  op { name = name, family = "optimizer", inputs = inputs, outputs = outputs,
    infer = "mp_update", dtypes = "float", cpu = true, nondiff = true,
    params = upd_params(extra), doc = doc, inplace = inplace, promote = {} }
end
mp_op("mp_sgd_update", { "weight", "grad", "weight32" }, nil,
  "Multi-precision SGD: w32 -= lr * (clip(rescale_grad*grad) + wd*w32) in float32; "
    .. "weight = w32 cast to weight's dtype.")
mp_op("mp_sgd_mom_update", { "weight", "grad", "mom", "weight32" },
  { { "momentum", "float", 0, doc = "momentum" } },
  "Multi-precision SGD with momentum: mom = momentum*mom - lr*(clip(rescale_grad*grad) + "
    .. "wd*w32); w32 += mom (float32); weight = w32 cast to weight's dtype.")

-- MXNet 1.9's ftml_update (FTML, Zheng & Kwok 2017): states d, v, z; t the update count
op { name = "ftml_update", family = "optimizer", inputs = { "weight", "grad", "d", "v", "z" },
  outputs = { "weight_out", "d_out", "v_out", "z_out" }, infer = "ftml_update",
  dtypes = "float", nondiff = true, inplace = { { 1, 1 }, { 2, 3 }, { 3, 4 }, { 4, 5 } },
  params = upd_params({ { "beta1", "float", 0.6 }, { "beta2", "float", 0.999 },
    { "epsilon", "float", 1e-8 }, { "t", "int", 1, doc = "update count (>= 1)" } }),
  doc = "FTML: g' = clip(rescale_grad*grad + wd*w); v = beta2*v + (1-beta2)*g'^2; d' = "
    .. "(1 - beta1^t)/lr * (sqrt(v/(1 - beta2^t)) + epsilon); z = beta1*z + (1-beta1)*g' - "
    .. "(d' - beta1*d)*w; d = d'; w = -z/d' (MXNet's kernel). lr must be > 0." }

return ops
