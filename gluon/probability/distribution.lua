-- mx.gluon.probability.Distribution — the base of the distributions (MXNet 2.0's
-- gluon.probability.distributions.Distribution): parameters are NDArrays (or Lua numbers)
-- that broadcast together to the batch shape; every method is built from mx.nd ops, so
-- autograd differentiates log_prob, cdf, mean, ... in the parameters, and sample() of a
-- reparameterisable distribution (has_grad = true) in them too.
--
--   d:log_prob(x)  d:prob(x)  d:cdf(x)  d:icdf(p)  d:sample(size)  d:sample_n(n)
--   d:mean()  d:variance()  d:stddev()  d:entropy()  d:broadcast_to(shape)
--   d.batch_shape  d.event_shape ({} for the scalar distributions)
--
-- sample(size): size (a shape, default the batch shape) broadcastable from the batch
-- shape (MXNet's rule: the batch dims are the trailing ones); sample_n(n): n draws stacked
-- on a new first axis. A method a distribution does not define raises an error naming it.
local nd = require("mx.nd")
local class = require("mx.core.class")

local type, error, tostring, ipairs, select = type, error, tostring, ipairs, select
local is_tensor = nd.is_tensor

local M = {}

local Distribution = class.base("Distribution")
M.Distribution = Distribution
Distribution.has_grad = false
Distribution.event_shape = {}

local function shape_str(s) return "(" .. table.concat(s, ", ") .. ")" end
M.shape_str = shape_str

-- the broadcast of shapes a and b (NumPy rules), or nil
local function broadcast2(a, b)
  local n = math.max(#a, #b)
  local out = {}
  for i = 1, n do
    local da = a[#a - n + i] or 1
    local db = b[#b - n + i] or 1
    if da ~= db and da ~= 1 and db ~= 1 then return nil end
    out[i] = da == 1 and db or da
  end
  return out
end
M.broadcast_shape = broadcast2

local function same_shape(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end
M.same_shape = same_shape

-- params(who, names, values...) -> list of tensors of one dtype, broadcast to one shape,
-- and that shape. Lua numbers become tensors of the tensors' dtype (float32 if none).
function M.params(who, names, ...)
  local n = select("#", ...)
  local vals, dtype = { ... }, nil
  for i = 1, n do
    local v = vals[i]
    if is_tensor(v) then
      dtype = dtype or v:dtype()
    elseif type(v) ~= "number" then
      error(who .. ": " .. names[i] .. " must be an NDArray or a number, got " .. type(v), 4)
    end
  end
  dtype = dtype or "float32"
  local shape = {}
  for i = 1, n do
    local v = vals[i]
    if is_tensor(v) then
      if v:dtype() ~= dtype then v = v:astype(dtype) vals[i] = v end
      local s = broadcast2(shape, v:shape())
      if not s then
        error(string.format("%s: %s of shape %s does not broadcast with the other parameters "
          .. "(shape %s)", who, names[i], shape_str(v:shape()), shape_str(shape)), 4)
      end
      shape = s
    end
  end
  for i = 1, n do
    local v = vals[i]
    if type(v) == "number" then
      vals[i] = nd.full(#shape > 0 and shape or {}, v, { dtype = dtype })
    elseif not same_shape(v:shape(), shape) then
      vals[i] = nd.broadcast_to(v, { shape = shape })
    end
  end
  return vals, shape, dtype
end

-- x as a tensor of the distribution's dtype (a number: a 0-d tensor)
function Distribution:_value(x, who)
  if type(x) == "number" then return nd.full({}, x, { dtype = self.dtype }) end
  if not is_tensor(x) then
    error(self.__name .. ":" .. who .. ": value must be an NDArray or a number, got "
      .. type(x), 3)
  end
  if x:dtype() ~= self.dtype then x = x:astype(self.dtype) end
  return x
end

-- the shape a draw of `size` has; nil: the batch shape
function Distribution:_size(size, who)
  if size == nil then return self.batch_shape end
  if type(size) == "number" then size = { size } end
  if type(size) ~= "table" then
    error(self.__name .. ":" .. who .. ": size must be a shape (a table of dims) or a number", 3)
  end
  local b = broadcast2(size, self.batch_shape)
  if not b or not same_shape(b, size) then
    error(string.format("%s:%s: size %s cannot hold the batch shape %s (the batch dims are "
      .. "the trailing ones)", self.__name, who, shape_str(size), shape_str(self.batch_shape)), 3)
  end
  return size
end

-- the parameter p broadcast to shape (a no-op when it already has it)
function M.expand(p, shape)
  if same_shape(p:shape(), shape) then return p end
  return nd.broadcast_to(p, { shape = shape })
end

local function undefined(name)
  return function(self)
    error(self.__name .. ":" .. name .. " is not defined for this distribution", 2)
  end
end
for _, m in ipairs { "log_prob", "cdf", "icdf", "mean", "variance", "entropy", "sample" } do
  Distribution[m] = undefined(m)
end

function Distribution:prob(x) return nd.exp(self:log_prob(x)) end
function Distribution:stddev() return nd.sqrt(self:variance()) end

function Distribution:sample_n(n)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 then
    error(self.__name .. ":sample_n: n must be a positive integer, got " .. tostring(n), 2)
  end
  local size = { n }
  for i, d in ipairs(self.batch_shape) do size[i + 1] = d end
  return self:sample(size)
end

function Distribution:__tostring()
  return self.__name .. "(batch_shape=" .. shape_str(self.batch_shape) .. ")"
end

-- a subclass whose instances are made by Class(...) (MXNet's constructor call)
function M.define(name, parent)
  local cls = class.extend(parent or Distribution, name)
  setmetatable(cls, {
    __index = parent or Distribution,
    __call = function(c, ...) return c.new(...) end,
  })
  return cls
end

return M
