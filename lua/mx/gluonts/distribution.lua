-- mx.gluonts.distribution — GluonTS's distribution heads: a DistributionOutput maps a
-- network's features to the arguments of a distribution (one Dense per argument, then
-- domain_map onto the valid domain), builds that distribution with the target's scale
-- applied, and gives the loss (negative log-likelihood).
--
--   local out = distribution.StudentTOutput()
--   local proj = out:get_args_proj(hidden)        -- a HybridBlock: features -> args list
--   local d = out:distribution(proj(h), nil, scale)   -- an mx.gluon.probability distribution
--   local nll = out:loss(target, proj(h), nil, scale)
--
-- Outputs (GluonTS's torch heads): NormalOutput, StudentTOutput (df = 2 + softplus),
-- GammaOutput (concentration, rate), BetaOutput, PoissonOutput (rate * scale),
-- NegativeBinomialOutput (total_count, logits + log scale). The scale multiplies a
-- location-scale family's loc and scale (GluonTS's AffineTransformed; the same law), the
-- Poisson rate, the negative binomial's mean through its logits, and the Gamma's scale.
local mx = require("mx")
local nd = mx.nd
local nn = mx.gluon.nn
local prob = mx.gluon.probability
local D = require("mx.gluon.probability.distribution")

local ipairs, error = ipairs, error

local M = {}

local EPS32 = 1.1920929e-07

---------------------------------------------------------------- AffineTransformed
-- y = loc + scale * x for x ~ base (loc, scale tensors broadcastable to the batch shape)
local Affine = D.define("AffineTransformed")
M.AffineTransformed = Affine
function Affine.new(base, loc, scale)
  return setmetatable({ base = base, loc = loc, scale = scale, batch_shape = base.batch_shape,
    dtype = base.dtype }, Affine)
end
local function fwd(self, x)
  if self.loc then x = x + self.loc end
  return x
end
function Affine:_inv(y)
  if self.loc then y = y - self.loc end
  if self.scale then y = y / self.scale end
  return y
end
function Affine:log_prob(y)
  local lp = self.base:log_prob(self:_inv(y))
  if self.scale then lp = lp - nd.log(nd.broadcast_like(self.scale, lp)) end
  return lp
end
function Affine:cdf(y) return self.base:cdf(self:_inv(y)) end
function Affine:sample(size)
  local s = self.base:sample(size)
  if self.scale then s = s * self.scale end
  return fwd(self, s)
end
function Affine:mean()
  local m = self.base:mean()
  if self.scale then m = m * self.scale end
  return fwd(self, m)
end
function Affine:variance()
  local v = self.base:variance()
  if self.scale then v = v * self.scale * self.scale end
  return v
end

---------------------------------------------------------------- ArgProj
local ArgProj = nn.HybridBlock:extend("ArgProj")
M.ArgProj = ArgProj
function ArgProj:__init(in_units, output)
  nn.HybridBlock.__init(self)
  self._output = output
  self._n = #output.args_dim
  for i, a in ipairs(output.args_dim) do
    self["proj" .. i] = nn.Dense(a[2], { flatten = false, in_units = in_units })
  end
end
function ArgProj:forward(x)
  local raw = {}
  for i = 1, self._n do raw[i] = self["proj" .. i](x) end
  return self._output:domain_map(raw)
end

---------------------------------------------------------------- outputs
local Output = {}
Output.__index = Output
M.DistributionOutput = Output
Output.value_in_support = 0
Output.event_shape = {}

local function define(name, args_dim, fields)
  local c = setmetatable({}, { __index = Output, __call = function(cls, opts)
    local o = setmetatable({}, cls)
    for k, v in pairs(opts or {}) do o[k] = v end
    return o
  end })
  c.__index = c
  c.__name = name
  c.args_dim = args_dim
  for k, v in pairs(fields or {}) do c[k] = v end
  M[name] = c
  return c
end

function Output:get_args_proj(in_units) return ArgProj(in_units, self) end
-- args: the projections' outputs (..., 1) each; returns the squeezed, mapped list
local function sq(x) return nd.squeeze(x, { axis = -1 }) end
function Output:loss(target, args, loc, scale)
  return -self:distribution(args, loc, scale):log_prob(target)
end
function Output:__tostring() return self.__name .. "()" end
-- the arguments as a plain table for serialisation
function Output:config() return { name = self.__name } end

local NormalOutput = define("NormalOutput", { { "loc", 1 }, { "scale", 1 } })
function NormalOutput.domain_map(_, r)
  return { sq(r[1]), sq(nd.softrelu(r[2])) }
end
function NormalOutput.distribution(_, a, loc, scale)
  local l, s = a[1], a[2]
  if scale then l, s = l * scale, s * scale end
  if loc then l = l + loc end
  return prob.Normal(l, s)
end

local StudentTOutput = define("StudentTOutput", { { "df", 1 }, { "loc", 1 }, { "scale", 1 } })
function StudentTOutput.domain_map(_, r)
  return { sq(nd.softrelu(r[1]) + 2), sq(r[2]), sq(nd.maximum_scalar(nd.softrelu(r[3]),
    { scalar = EPS32 })) }
end
function StudentTOutput.distribution(_, a, loc, scale)
  local l, s = a[2], a[3]
  if scale then l, s = l * scale, s * scale end
  if loc then l = l + loc end
  return prob.StudentT(a[1], l, s)
end

local GammaOutput = define("GammaOutput", { { "concentration", 1 }, { "rate", 1 } },
  { value_in_support = 0.5 })
function GammaOutput.domain_map(_, r)
  return { sq(nd.softrelu(r[1]) + EPS32), sq(nd.softrelu(r[2]) + EPS32) }
end
function GammaOutput.distribution(_, a, loc, scale)
  local th = 1 / a[2]
  if scale then th = th * scale end
  local g = prob.Gamma(a[1], th)
  if loc then return Affine.new(g, loc, nil) end
  return g
end

local BetaOutput = define("BetaOutput", { { "concentration1", 1 }, { "concentration0", 1 } },
  { value_in_support = 0.5 })
function BetaOutput.domain_map(_, r)
  return { sq(nd.softrelu(r[1]) + EPS32), sq(nd.softrelu(r[2]) + EPS32) }
end
function BetaOutput.distribution(_, a, loc, scale)
  local b = prob.Beta(a[1], a[2])
  if loc or scale then return Affine.new(b, loc, scale) end
  return b
end

local PoissonOutput = define("PoissonOutput", { { "rate", 1 } })
function PoissonOutput.domain_map(_, r) return { sq(nd.softrelu(r[1])) } end
function PoissonOutput.distribution(_, a, _, scale)
  local rate = a[1]
  if scale then rate = rate * scale end
  return prob.Poisson(rate)
end

local NegativeBinomialOutput = define("NegativeBinomialOutput",
  { { "total_count", 1 }, { "logits", 1 } })
function NegativeBinomialOutput.domain_map(_, r) return { sq(nd.softrelu(r[1])), sq(r[2]) } end
function NegativeBinomialOutput.distribution(_, a, _, scale)
  local logits = a[2]
  if scale then logits = logits + nd.log(scale) end
  return prob.NegativeBinomial(a[1], nil, logits)
end

-- by_name("StudentTOutput") -> a new output (for loading predictors)
function M.by_name(name)
  local c = M[name]
  if type(c) ~= "table" or c.args_dim == nil then
    error("gluonts: unknown distribution output '" .. tostring(name) .. "'", 2)
  end
  return c()
end

return M
