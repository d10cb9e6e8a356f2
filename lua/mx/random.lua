-- mx.random — seeding and sampling (MXNet's mx.random / mx.nd.random).
--
-- Every draw is counter-based: value i of a draw is a pure function of (seed,
-- counter + i), so mx.random.seed(n) makes a program's tensors reproducible for
-- any thread count. Forms (low/high etc. positional or by name):
--   mx.random.uniform(low, high, shape, {dtype=, ctx=, out=})
--   mx.random.uniform{low=-1, high=1, shape={2, 3}}
--   mx.random.normal(loc, scale, shape, opts)    mx.random.randint(low, high, shape, opts)
--   mx.random.bernoulli(prob, shape, opts)
-- shape is a table of dims or a number; it defaults to {} (one value, 0-d) like
-- MXNet's scalar draw is (1,): pass {1} for that.
local lib = require("mx._lib")
local nd = require("mx.nd")

local C = lib.C
local type, pcall, error, tostring = type, pcall, error, tostring

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

-- params: names of the distribution's params in positional order
local function sampler(name, opname, params)
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
    for _, p in ipairs(params) do
      if opts[p] ~= nil and type(opts[p]) ~= "number" then
        error("random." .. name .. ": " .. p .. " must be a number, got " .. type(opts[p]), 2)
      end
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

return M
