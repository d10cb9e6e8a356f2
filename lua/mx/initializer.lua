-- mx.init — parameter initializers (MXNet's semantics and defaults).
--
--   net:initialize(mx.init.Xavier())            -- the default for every parameter
--   nn.Dense(10, {weight_initializer=mx.init.Normal(0.02)})
--
-- An initializer is callable: init(name, arr) fills the tensor arr in place (name is
-- the parameter's name, used in messages). A parameter's own init wins over the one
-- given to Block:initialize, as in Gluon. Random draws come from mx.nd's random ops,
-- so mx.random.seed makes them reproducible.
local nd = require("mx.nd")
local class = require("mx.core.class")

local type, error, tostring, sqrt = type, error, tostring, math.sqrt

local M = {}

local Initializer = class.base("Initializer")
Initializer.__call = function(self, name, arr) return self:_init_weight(name, arr) end
M.Initializer = Initializer

local registry = {}
-- init_class(name, aliases): a subclass, found by create() under its lower-case name
-- and the aliases.
local function init_class(name, aliases)
  local c = class.extend(Initializer, name)
  c.__tostring = function() return name end
  registry[name:lower()] = c
  for _, a in ipairs(aliases or {}) do registry[a] = c end
  return c
end

local function ctx_dtype(arr) return { dtype = arr:dtype(), ctx = arr:context() } end

-- Fill arr with U(low, high) / N(mean, sigma) through the op table's random ops.
local function uniform(arr, low, high)
  local o = ctx_dtype(arr)
  o.low, o.high, o.shape, o.out = low, high, arr:shape(), arr
  nd.random_uniform(o)
end
local function normal(arr, mean, sigma)
  local o = ctx_dtype(arr)
  o.loc, o.scale, o.shape, o.out = mean, sigma, arr:shape(), arr
  nd.random_normal(o)
end
local function fill(arr, v)
  nd.full(arr:shape(), v, { dtype = arr:dtype(), ctx = arr:context(), out = arr })
end
M._uniform, M._normal, M._fill = uniform, normal, fill

---------------------------------------------------------------- constants
local Zero = init_class("Zero", { "zeros" })
function Zero._init_weight(_, _, arr) fill(arr, 0) end
M.Zero = function() return setmetatable({}, Zero) end

local One = init_class("One", { "ones" })
function One._init_weight(_, _, arr) fill(arr, 1) end
M.One = function() return setmetatable({}, One) end

-- Constant(value): a number (or a tensor broadcast to the parameter's shape).
local Constant = init_class("Constant")
function Constant:_init_weight(_, arr)
  if type(self.value) == "number" then
    fill(arr, self.value)
  else
    nd.broadcast_to(self.value, { shape = arr:shape(), out = arr })
  end
end
M.Constant = function(value)
  if type(value) ~= "number" and not nd.is_tensor(value) then
    error("mx.init.Constant: value must be a number or a tensor, got " .. type(value), 2)
  end
  return setmetatable({ value = value }, Constant)
end

---------------------------------------------------------------- random
-- Uniform(scale=0.07): U(-scale, scale).
local Uniform = init_class("Uniform")
function Uniform:_init_weight(_, arr) uniform(arr, -self.scale, self.scale) end
M.Uniform = function(scale) return setmetatable({ scale = scale or 0.07 }, Uniform) end

-- Normal(sigma=0.01): N(0, sigma^2).
local Normal = init_class("Normal")
function Normal:_init_weight(_, arr) normal(arr, 0, self.sigma) end
M.Normal = function(sigma) return setmetatable({ sigma = sigma or 0.01 }, Normal) end

local function fans(name, arr, who)
  local shape = arr:shape()
  if #shape < 2 then
    error(string.format("%s initializer cannot be applied to vector %s (shape (%s)): it "
      .. "requires at least 2D", who, tostring(name), table.concat(shape, ", ")), 0)
  end
  local hw = 1
  for i = 3, #shape do hw = hw * shape[i] end
  return shape[2] * hw, shape[1] * hw
end

-- Xavier(rnd_type="uniform", factor_type="avg", magnitude=3): scale =
-- sqrt(magnitude / factor) with factor fan_in, fan_out or their mean; "uniform" draws
-- U(-scale, scale), "gaussian" N(0, scale^2). fan_in = shape[2]*prod(shape[3..]),
-- fan_out = shape[1]*prod(shape[3..]).
local Xavier = init_class("Xavier")
function Xavier:_init_weight(name, arr)
  local fan_in, fan_out = fans(name, arr, "Xavier")
  local factor
  if self.factor_type == "avg" then factor = (fan_in + fan_out) / 2
  elseif self.factor_type == "in" then factor = fan_in
  else factor = fan_out end
  local scale = sqrt(self.magnitude / factor)
  if self.rnd_type == "uniform" then uniform(arr, -scale, scale) else normal(arr, 0, scale) end
end
local function xavier(rnd_type, factor_type, magnitude, level)
  rnd_type = rnd_type or "uniform"
  factor_type = factor_type or "avg"
  if rnd_type ~= "uniform" and rnd_type ~= "gaussian" then
    error("mx.init.Xavier: rnd_type must be 'uniform' or 'gaussian', got " .. tostring(rnd_type),
      level + 1)
  end
  if factor_type ~= "avg" and factor_type ~= "in" and factor_type ~= "out" then
    error("mx.init.Xavier: factor_type must be 'avg', 'in' or 'out', got "
      .. tostring(factor_type), level + 1)
  end
  return setmetatable({ rnd_type = rnd_type, factor_type = factor_type,
    magnitude = magnitude or 3 }, Xavier)
end
-- Xavier(rnd_type, factor_type, magnitude) or Xavier{rnd_type=, factor_type=, magnitude=}
M.Xavier = function(a, b, c)
  local r
  if type(a) == "table" then r = xavier(a.rnd_type, a.factor_type, a.magnitude, 2)
  else r = xavier(a, b, c, 2) end
  return r
end

-- MSRAPrelu(factor_type="avg", slope=0.25): Xavier("gaussian", factor_type,
-- 2 / (1 + slope^2)) (He et al.).
M.MSRAPrelu = function(factor_type, slope)
  if type(factor_type) == "table" then factor_type, slope = factor_type.factor_type, factor_type.slope end
  slope = slope or 0.25
  local r = xavier("gaussian", factor_type or "avg", 2 / (1 + slope * slope), 2)
  r.slope = slope
  return r
end

-- Orthogonal(scale=1.414, rand_type="uniform"): a random (nout, nin) matrix
-- (nin = prod(shape[2..])) made orthonormal (rows if nout <= nin, else columns) by
-- modified Gram-Schmidt in double precision, times scale.
local Orthogonal = init_class("Orthogonal")
function Orthogonal:_init_weight(name, arr)
  local shape = arr:shape()
  if #shape < 2 then
    error("Orthogonal initializer cannot be applied to vector " .. tostring(name), 0)
  end
  local nout, nin = shape[1], 1
  for i = 2, #shape do nin = nin * shape[i] end
  local tmp = nd.zeros({ nout, nin }, { dtype = "float64" })
  if self.rand_type == "uniform" then uniform(tmp, -1, 1) else normal(tmp, 0, 1) end
  local v = tmp:tolist()
  -- vectors to orthonormalise: rows (nout <= nin) or columns
  local rows = nout <= nin
  local nv, len = rows and nout or nin, rows and nin or nout
  local function get(k, i) if rows then return v[(k - 1) * nin + i] end return v[(i - 1) * nin + k] end
  local function set(k, i, x) if rows then v[(k - 1) * nin + i] = x else v[(i - 1) * nin + k] = x end end
  for k = 1, nv do
    for j = 1, k - 1 do
      local d = 0
      for i = 1, len do d = d + get(k, i) * get(j, i) end
      for i = 1, len do set(k, i, get(k, i) - d * get(j, i)) end
    end
    local n = 0
    for i = 1, len do n = n + get(k, i) ^ 2 end
    n = sqrt(n)
    if n < 1e-12 then n = 1 end
    for i = 1, len do set(k, i, get(k, i) / n) end
  end
  for i = 1, #v do v[i] = v[i] * self.scale end
  local res = nd.array(v, { dtype = "float64" }):reshape(shape)
  res:copyto(arr)
end
M.Orthogonal = function(scale, rand_type)
  if type(scale) == "table" then scale, rand_type = scale.scale, scale.rand_type end
  rand_type = rand_type or "uniform"
  if rand_type ~= "uniform" and rand_type ~= "normal" then
    error("mx.init.Orthogonal: rand_type must be 'uniform' or 'normal'", 2)
  end
  return setmetatable({ scale = scale or 1.414, rand_type = rand_type }, Orthogonal)
end

-- create(x): an initializer from an initializer, a name ("zeros", "xavier", ...) or nil.
function M.create(x)
  if x == nil then return nil end
  if type(x) == "table" and getmetatable(x) and getmetatable(x)._init_weight then return x end
  if type(x) == "string" then
    local c = registry[x:lower()]
    if c then
      local ctor = M[c.__name]
      local r = ctor()
      return r
    end
  end
  error("mx.init: unknown initializer " .. tostring(x), 2)
end

return M
