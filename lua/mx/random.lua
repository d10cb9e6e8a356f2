-- mx.random — seeding and sampling (MXNet's mx.random / mx.nd.random).
--
-- Every draw is counter-based: value i of a draw is a pure function of (seed,
-- counter + i), so mx.random.seed(n) makes a program's tensors reproducible for
-- any thread count. Forms (low/high etc. positional or by name):
--   mx.random.uniform(low, high, shape, {dtype=, ctx=, out=})
--   mx.random.uniform{low=-1, high=1, shape={2, 3}}
--   mx.random.normal(loc, scale, shape, opts)    mx.random.randint(low, high, shape, opts)
--   mx.random.bernoulli(prob, shape, opts)
--   mx.random.exponential(scale, shape, opts)   mx.random.gamma(alpha, beta, shape, opts)
--   mx.random.poisson(lam, shape, opts)   mx.random.negative_binomial(k, p, shape, opts)
--   mx.random.generalized_negative_binomial(mu, alpha, shape, opts)
--   mx.random.multinomial(data, shape, {get_prob=, dtype=})
--   mx.random.randn(d1, d2, ..., opts)    mx.random.shuffle(data)
--   mx.random.<dist>_like(x, {params}) for uniform, normal, exponential, gamma, poisson,
--   negative_binomial, generalized_negative_binomial
-- Tensor distribution parameters (all of them, one shape P) draw P + shape per call
-- through the sample_* ops: mx.random.normal(mu_t, sigma_t, {2}).
-- shape is a table of dims or a number; it defaults to {} (one value, 0-d) like
-- MXNet's scalar draw is (1,): pass {1} for that.
local lib = require("mx.core.lib")
local nd = require("mx.nd")

local C = lib.C
local type, pcall, error, tostring, unpack = type, pcall, error, tostring, unpack

local M = {}

-- mx.random.seed(n): reseeds the global generator; same seed, same stream.
function M.seed(n)
  if type(n) ~= "number" or n % 1 ~= 0 then
    error("random.seed: seed must be an integer, got " .. tostring(n), 2)
  end
  C.mx_random_seed(n < 0 and n + 2 ^ 64 or n)
end

-- Call f(...) and re-raise its error at the caller of the public function
-- (level 3 from here: our frame, the public function, the user's line).
local function call(f, ...)
  local ok, r = pcall(f, ...)
  if not ok then
    error((tostring(r):gsub("^[^\n]-:%d+: ", "")), 3)
  end
  return r
end

-- params: names of the distribution's params in positional order; map (optional)
-- rewrites the gathered options into the op's params (exponential: scale -> lam)
local function sampler(name, opname, params, map)
  local f = nd[opname]
  return function(...)
    local args = { ... }
    local nargs = select("#", ...)
    local opts = {}
    if nargs == 1 and type(args[1]) == "table" and not nd.is_tensor(args[1]) then
      for k, v in pairs(args[1]) do opts[k] = v end
    else
      for i, p in ipairs(params) do
        if args[i] ~= nil then opts[p] = args[i] end
      end
      local shape = args[#params + 1]
      if shape ~= nil then opts.shape = shape end
      local extra = args[#params + 2]
      if extra ~= nil then
        if type(extra) ~= "table" then
          error("random." .. name .. ": options must be a table, got " .. type(extra), 2)
        end
        for k, v in pairs(extra) do opts[k] = v end
      end
      if nargs > #params + 2 then
        error("random." .. name .. ": too many arguments (" .. table.concat(params, ", ")
          .. ", shape, options)", 2)
      end
    end
    local shape = opts.shape
    if type(shape) == "number" then shape = { shape } end
    if shape ~= nil and type(shape) ~= "table" then
      error("random." .. name .. ": shape must be a table of dims or a number, got " .. type(shape), 2)
    end
    opts.shape = nil
    local ntensor = 0
    for _, p in ipairs(params) do
      if nd.is_tensor(opts[p]) then ntensor = ntensor + 1 end
    end
    if ntensor > 0 then -- MXNet: tensor parameters draw through _sample_<name>
      if ntensor < #params or not nd["sample_" .. name] then
        error("random." .. name .. ": distribution parameters must be all tensors or all "
          .. "numbers (" .. table.concat(params, ", ") .. ")", 2)
      end
      local ins = {}
      for i, p in ipairs(params) do ins[i] = opts[p] opts[p] = nil end
      if name == "exponential" then -- scale -> rate
        local dt = ins[1]:dtype()
        if dt ~= "float32" and dt ~= "float64" and dt ~= "float16" and dt ~= "bfloat16" then
          error("random.exponential: scale must be a float tensor, got dtype " .. dt, 2)
        end
        ins[1] = call(nd.reciprocal, ins[1])
      end
      opts.shape = shape or {}
      ins[#ins + 1] = opts
      local r = call(nd["sample_" .. name], unpack(ins))
      return r
    end
    for _, p in ipairs(params) do
      if opts[p] ~= nil and type(opts[p]) ~= "number" then
        error("random." .. name .. ": " .. p .. " must be a number or a tensor, got "
          .. type(opts[p]), 2)
      end
    end
    if map then
      local msg = map(opts)
      if msg then error("random." .. name .. ": " .. msg, 2) end
    end
    local r = call(f, shape or {}, opts)
    return r
  end
end

M.uniform = sampler("uniform", "random_uniform", { "low", "high" })
M.normal = sampler("normal", "random_normal", { "loc", "scale" })
M.randint = sampler("randint", "random_randint", { "low", "high" })
M.bernoulli = sampler("bernoulli", "random_bernoulli", { "prob" })

-- x-shaped draws: mx.random.uniform_like(x, {low=, high=}) (float x)
function M.uniform_like(x, opts)
  local r = call(nd.random_uniform_like, x, opts)
  return r
end
function M.normal_like(x, opts)
  local r = call(nd.random_normal_like, x, opts)
  return r
end

-- exponential(scale, shape, opts) like MXNet's mx.nd.random.exponential: scale is
-- 1/lam (the op random_exponential takes the rate lam). gamma(alpha, beta) (beta the
-- scale), poisson(lam), negative_binomial(k, p): the ops' params.
M.exponential = sampler("exponential", "random_exponential", { "scale" }, function(o)
  local s = o.scale
  o.scale = nil
  if s ~= nil then
    if s ~= s or s <= 0 or s == math.huge then return "scale must be finite and > 0, got " .. tostring(s) end
    o.lam = 1 / s
  end
end)
M.gamma = sampler("gamma", "random_gamma", { "alpha", "beta" })
M.poisson = sampler("poisson", "random_poisson", { "lam" })
M.negative_binomial = sampler("negative_binomial", "random_negative_binomial", { "k", "p" })

-- generalized_negative_binomial(mu, alpha, shape, opts): mean mu, dispersion alpha
M.generalized_negative_binomial = sampler("generalized_negative_binomial",
  "random_generalized_negative_binomial", { "mu", "alpha" })
-- Any of the samplers above takes tensors for its distribution parameters (all of them
-- tensors of one shape P, MXNet's rule): uniform(lo, hi, {3}) is then P + (3,), drawn
-- by the sample_* op (MXNet's _sample_*). normal's tensor parameters are mu and sigma.

-- x-shaped draws of the counter-block distributions (MXNet's _random_*_like)
for _, n in ipairs { "exponential", "gamma", "poisson", "negative_binomial",
  "generalized_negative_binomial" } do
  local f = nd["random_" .. n .. "_like"]
  M[n .. "_like"] = function(x, opts)
    local r = call(f, x, opts)
    return r
  end
end

-- multinomial(data, shape, {get_prob=, dtype=, out=}) like mx.nd.random.multinomial:
-- data (..., K) holds probabilities over its last axis; the result, data.shape[:-1] +
-- shape, holds 1-based category indices (luamx's index rule; MXNet's are 0-based;
-- int32 by default); get_prob=true also returns the log-probability of each draw.
function M.multinomial(data, shape, opts)
  if not nd.is_tensor(data) then
    error("random.multinomial: data must be a tensor of probabilities, got " .. type(data), 2)
  end
  if type(shape) == "table" and not shape[1] and next(shape) ~= nil and opts == nil then
    shape, opts = nil, shape -- multinomial(data, {get_prob=true})
  end
  if type(shape) == "number" then shape = { shape } end
  if shape ~= nil and type(shape) ~= "table" then
    error("random.multinomial: shape must be a table of dims or a number, got " .. type(shape), 2)
  end
  local o = {}
  if opts ~= nil then
    if type(opts) ~= "table" then
      error("random.multinomial: options must be a table, got " .. type(opts), 2)
    end
    for k, v in pairs(opts) do o[k] = v end
  end
  o.shape = shape or o.shape or {}
  local ok, a, b = pcall(nd.sample_multinomial, data, o)
  if not ok then error((tostring(a):gsub("^[^\n]-:%d+: ", "")), 2) end
  return a, b
end

-- mx.random.randn(d1, d2, ..., {loc=, scale=, dtype=, ctx=}): normal samples of shape
-- (d1, d2, ...) like MXNet's randn(*shape); no dims gives one 0-d value.
function M.randn(...)
  local n = select("#", ...)
  local shape, opts = {}, nil
  for i = 1, n do
    local v = select(i, ...)
    if i == n and type(v) == "table" and not nd.is_tensor(v) then
      opts = v
    elseif type(v) ~= "number" or v % 1 ~= 0 or v < 0 then
      error("random.randn: dimension " .. i .. " must be a non-negative integer, got "
        .. tostring(v), 2)
    else
      shape[#shape + 1] = v
    end
  end
  local o = {}
  if opts then for k, v in pairs(opts) do o[k] = v end end
  if o.shape ~= nil then
    error("random.randn: give the dims as arguments (randn(2, 3)), not a shape option", 2)
  end
  local ok, r = pcall(nd.random_normal, shape, o)
  if not ok then -- the message names randn, the function the user called
    error((tostring(r):gsub("^[^\n]-:%d+: ", ""):gsub("^random_normal:", "random.randn:")), 2)
  end
  return r
end

-- mx.random.shuffle(data): data's rows (first axis) in a random order, as a new
-- tensor (MXNet's mx.nd.random.shuffle / _shuffle); shuffle(data, {out=data}) in place.
function M.shuffle(data, opts)
  if not nd.is_tensor(data) then
    error("random.shuffle: data must be a tensor, got " .. type(data), 2)
  end
  local r = call(nd.shuffle, data, opts)
  return r
end

return M
