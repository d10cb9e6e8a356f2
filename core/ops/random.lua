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
}

return ops, MXNET
