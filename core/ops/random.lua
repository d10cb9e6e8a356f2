-- core/ops/random.lua — the random draws: the op table's random family
-- (kernels/*/random.c and spec/random_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

-- random draws: counter-based (seed, counter) -> value, reproducible after
-- mx.random.seed(n) whatever the thread count; normal uses Box-Muller. `random = true`
-- declares the one random resource: dispatch reserves the call's counters from the
-- session's stream in program order (not the engine's schedule) and hands them to the
-- kernel in its context.
local function rand_op(name, params, doc, dtypes, dtype)
  local ps = { { "shape", "shape", {} }, { "dtype", "dtype", dtype or 0 } }
  for _, p in ipairs(params) do ps[#ps + 1] = p end
  op { name = name, family = "random", ctx = true, infer = "creation", cpu = true,
    nondiff = true, params = ps, doc = doc, random = true }
  local lp = {}
  for _, p in ipairs(params) do lp[#lp + 1] = p end
  if dtypes then
    op { name = name .. "_like", family = "random", inputs = { "data" }, infer = "same",
      cpu = true, nondiff = true, params = lp, dtypes = dtypes, random = true,
      doc = doc .. " Shape, dtype and device from data." }
  end
end
rand_op("random_uniform", { { "low", "float", 0 }, { "high", "float", 1 } },
  "Uniform samples in [low, high).", "float")
rand_op("random_normal", { { "loc", "float", 0 }, { "scale", "float", 1 } },
  "Normal samples with mean loc and standard deviation scale.", "float")
rand_op("random_randint", { { "low", "int", 0 }, { "high", "int", 2 } },
  "Uniform integers in [low, high) (default dtype int32).", nil, 4)
rand_op("random_bernoulli", { { "prob", "float", 0.5 } }, "1 with probability prob, else 0.")

-- exponential, gamma, poisson, negative binomial: rejection samplers own a fixed block
-- of counters per element (kernels/ref/random.h), so their inference reserves
-- size x block (mx_infer_random_block in core/ops/creation.c).
local function block_op(name, params, doc)
  local ps = { { "shape", "shape", {} }, { "dtype", "dtype", 0 } }
  for _, p in ipairs(params) do ps[#ps + 1] = p end
  op { name = name, family = "random", ctx = true, infer = "random_block", cpu = true,
    nondiff = true, params = ps, doc = doc, random = true }
end
block_op("random_exponential", { { "lam", "float", 1 } },
  "Exponential samples with rate lam (mean 1/lam); lam > 0.")
block_op("random_gamma", { { "alpha", "float", 1 }, { "beta", "float", 1 } },
  "Gamma samples with shape alpha and scale beta (mean alpha*beta); Marsaglia-Tsang with "
  .. "32 counters per element.")
block_op("random_poisson", { { "lam", "float", 1 } },
  "Poisson samples with mean lam >= 0 (inversion below 10, PTRS above; 16 counters per "
  .. "element).")
block_op("random_negative_binomial", { { "k", "int", 1 }, { "p", "float", 1 } },
  "Negative binomial samples: failures before k successes of probability p, drawn as "
  .. "Poisson(Gamma(k, (1-p)/p)) like MXNet (mean k(1-p)/p; 48 counters per element).")
op { name = "shuffle", family = "random", inputs = { "data" }, infer = "shuffle", cpu = true,
  nondiff = true, params = {}, random = true,
  doc = "The rows of data (its first axis) in a random order; one counter per row." }


-- ---- generalized negative binomial, the _like forms with counter blocks, the
-- sample_* ops (distribution parameters as tensors) and multinomial. Their inference is
-- in core/ops/random.c, the per-element formulas in kernels/ref/random.h.
op { name = "random_generalized_negative_binomial", family = "random", ctx = true,
  infer = "random_gnb", cpu = true, nondiff = true, random = true,
  params = { { "shape", "shape", {} }, { "dtype", "dtype", 0 }, { "mu", "float", 1 },
    { "alpha", "float", 1 } },
  doc = "Generalized negative binomial samples with mean mu >= 0 and dispersion alpha >= 0 "
  .. "(variance mu + alpha*mu^2), drawn as Poisson(Gamma(1/alpha, mu*alpha)) like MXNet; "
  .. "alpha = 0 is Poisson(mu). 48 counters per element." }

-- data-shaped draws of the counter-block distributions (MXNet 1.9's _random_*_like)
local function like_op(name, params, doc)
  op { name = name .. "_like", family = "random", inputs = { "data" }, infer = "random_like",
    cpu = "random_like", ref = "random_like", nondiff = true, params = params,
    dtypes = "float", random = true, doc = doc .. " Shape, dtype and device from data." }
end
like_op("random_exponential", { { "lam", "float", 1 } }, "Exponential samples with rate lam.")
like_op("random_gamma", { { "alpha", "float", 1 }, { "beta", "float", 1 } },
  "Gamma samples with shape alpha and scale beta.")
like_op("random_poisson", { { "lam", "float", 1 } }, "Poisson samples with mean lam.")
like_op("random_negative_binomial", { { "k", "int", 1 }, { "p", "float", 1 } },
  "Negative binomial samples (k successes of probability p).")
like_op("random_generalized_negative_binomial", { { "mu", "float", 1 }, { "alpha", "float", 1 } },
  "Generalized negative binomial samples (mean mu, dispersion alpha).")

-- sample_*: one distribution per element of the parameter tensors (all of one shape P);
-- the output is P + shape, output[i, ...] drawn from the parameters at i (MXNet's
-- _sample_* ops). dtype defaults to the parameters' dtype.
local SAMPLE_DTYPE = { "dtype", "dtype", nil, doc = "output dtype (default: the parameters')" }
local function sample_op(name, inputs, doc)
  op { name = name, family = "random", inputs = inputs, infer = "random_sample",
    cpu = "random_sample", ref = "random_sample", nondiff = true, dtypes = "float",
    params = { { "shape", "shape", {}, doc = "draws per parameter element" }, SAMPLE_DTYPE },
    random = true, doc = doc .. " Output shape: the parameters' shape + shape." }
end
sample_op("sample_uniform", { "low", "high" }, "Uniform samples in [low, high) per element.")
sample_op("sample_normal", { "mu", "sigma" }, "Normal samples with mean mu, deviation sigma.")
sample_op("sample_gamma", { "alpha", "beta" }, "Gamma samples with shape alpha and scale beta.")
sample_op("sample_exponential", { "lam" }, "Exponential samples with rate lam.")
sample_op("sample_poisson", { "lam" }, "Poisson samples with mean lam.")
sample_op("sample_negative_binomial", { "k", "p" },
  "Negative binomial samples: failures before k (an integer >= 1) successes of probability p.")
sample_op("sample_generalized_negative_binomial", { "mu", "alpha" },
  "Generalized negative binomial samples with mean mu and dispersion alpha.")
-- multinomial: data (..., K) holds probabilities over the last axis; the output is
-- data.shape[:-1] + shape of 1-based category indices (luamx's index rule), one counter
-- each; get_prob adds the log-probabilities of the drawn categories (mx_nout_multinomial).
op { name = "sample_multinomial", family = "random", inputs = { "data" },
  outputs = { "out", "prob" }, infer = "random_multinomial", cpu = false,
  grad = function(F, x, y, g, p) -- d log p[k] / d p[k] = 1/p[k] at each draw (MXNet's)
    if not p.get_prob or g[2] == nil then return { F.zeros_like(x[1]) } end
    return { F.sample_multinomial_backward(x[1], y[1], g[2]) }
  end,
  nout = "multinomial", nout_by = "get_prob", dtypes = "float", random = true,
  params = { { "shape", "shape", {}, doc = "draws per distribution" },
    { "get_prob", "bool", false, doc = "also return log p of each drawn category" },
    { "dtype", "dtype", 4, doc = "dtype of the indices (default int32)" } },
  doc = "Categories drawn from the distributions in data's last axis (probabilities that "
    .. "sum to 1), as 1-based indices (luamx's rule for index values; MXNet's are "
    .. "0-based); one uniform per draw, inverted through the "
    .. "running sum. get_prob: a second output with the log-probability of each draw; its "
    .. "gradient reaches data as ograd/p at the drawn categories (MXNet's)." }
op { name = "sample_multinomial_backward", family = "random", inputs = { "data", "out", "ograd" },
  infer = "multinomial_backward", dtypes = "numeric", nondiff = true, params = {},
  doc = "sample_multinomial's gradient: zeros of data's shape plus ograd/p summed at each "
    .. "draw's category (out holds the 1-based categories)." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  random_uniform = { "_random_uniform", "uniform" },
  random_normal = { "_random_normal", "normal" }, random_randint = { "_random_randint" },
  random_uniform_like = { "_random_uniform_like" },
  random_normal_like = { "_random_normal_like" },
  random_exponential = { "_random_exponential" }, random_gamma = { "_random_gamma" },
  random_poisson = { "_random_poisson" },
  random_negative_binomial = { "_random_negative_binomial" }, shuffle = { "_shuffle" },
  random_generalized_negative_binomial = { "_random_generalized_negative_binomial" },
  random_exponential_like = { "_random_exponential_like" },
  random_gamma_like = { "_random_gamma_like" }, random_poisson_like = { "_random_poisson_like" },
  random_negative_binomial_like = { "_random_negative_binomial_like" },
  random_generalized_negative_binomial_like = { "_random_generalized_negative_binomial_like" },
  sample_uniform = { "_sample_uniform" }, sample_normal = { "_sample_normal" },
  sample_gamma = { "_sample_gamma" }, sample_exponential = { "_sample_exponential" },
  sample_poisson = { "_sample_poisson" },
  sample_negative_binomial = { "_sample_negative_binomial" },
  sample_generalized_negative_binomial = { "_sample_generalized_negative_binomial" },
}

return ops, MXNET
