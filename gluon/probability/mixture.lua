-- mx.gluon.probability.Mixture(mixture_probs, components): a finite mixture of K
-- distributions of one batch shape (GluonTS's MixtureDistribution). mixture_probs holds the
-- weights on its last axis (batch shape + (K,)), summing to 1. log_prob is a log-sum-exp
-- over the components; mean and variance by the laws of total expectation and variance;
-- cdf the weighted cdfs; icdf by bisection on the cdf (the mixture's cdf has no inverse in
-- closed form); sample draws a component per element, then that component's value.
local nd = require("mx.nd")
local D = require("mx.gluon.probability.distribution")

local type, error, ipairs = type, error, ipairs

local M = {}

local Mixture = D.define("Mixture")
M.Mixture = Mixture

function Mixture.new(mixture_probs, components)
  if not nd.is_tensor(mixture_probs) then
    error("Mixture: mixture_probs must be an NDArray (batch shape + (K,))", 2)
  end
  if type(components) ~= "table" or #components < 1 then
    error("Mixture: components must be a list of distributions", 2)
  end
  local s = mixture_probs:shape()
  if s[#s] ~= #components then
    error(string.format("Mixture: mixture_probs of shape %s must have %d (the number of "
      .. "components) on its last axis", D.shape_str(s), #components), 2)
  end
  local b = {}
  for i = 1, #s - 1 do b[i] = s[i] end
  for i, c in ipairs(components) do
    if not D.same_shape(c.batch_shape, b) then
      error(string.format("Mixture: component %d has batch shape %s, mixture_probs gives %s",
        i, D.shape_str(c.batch_shape), D.shape_str(b)), 2)
    end
  end
  return setmetatable({ mixture_probs = mixture_probs, components = components,
    batch_shape = b, dtype = mixture_probs:dtype() }, Mixture)
end

-- the weights of component k (batch shape)
function Mixture:_weight(k)
  return nd.squeeze(nd.slice_axis(self.mixture_probs, { axis = -1, begin = k, ["end"] = k }),
    { axis = -1 })
end

local function weighted_sum(self, f)
  local acc
  for k, c in ipairs(self.components) do
    local v = self:_weight(k) * f(c)
    acc = acc and acc + v or v
  end
  return acc
end

function Mixture:log_prob(x)
  local parts = {}
  for k, c in ipairs(self.components) do
    parts[k] = nd.expand_dims(c:log_prob(x), { axis = -1 })
  end
  local lp = nd.concat(parts, { dim = -1 }) + nd.log(self.mixture_probs)
  local m = nd.stop_gradient(nd.max(lp, { axis = -1, keepdims = true }))
  return nd.squeeze(m, { axis = -1 }) + nd.log(nd.sum(nd.exp(lp - m), { axis = -1 }))
end
function Mixture:mean()
  return weighted_sum(self, function(c) return c:mean() end)
end
function Mixture:variance()
  local m = self:mean()
  local second = weighted_sum(self, function(c)
    local mc = c:mean()
    return c:variance() + mc * mc
  end)
  return second - m * m
end
function Mixture:cdf(x)
  return weighted_sum(self, function(c) return c:cdf(x) end)
end
-- bisection on the cdf between bounds from the components' means and spreads; 64 halvings
-- take the bracket to the float64 resolution
function Mixture:icdf(q)
  q = self:_value(q, "icdf")
  local lo, hi
  for _, c in ipairs(self.components) do
    local m, s = c:mean(), c:stddev()
    local l, h = m - s * 40, m + s * 40
    lo = lo and nd.minimum(lo, l) or l
    hi = hi and nd.maximum(hi, h) or h
  end
  lo, hi = nd.stop_gradient(lo), nd.stop_gradient(hi)
  for _ = 1, 64 do
    local mid = (lo + hi) * 0.5
    local below = nd.lesser(self:cdf(mid), q)
    lo = nd.where(below, mid, lo)
    hi = nd.where(below, hi, mid)
  end
  return (lo + hi) * 0.5
end
function Mixture:sample(size)
  size = self:_size(size, "sample")
  local ps = {}
  for i, d in ipairs(size) do ps[i] = d end
  ps[#ps + 1] = #self.components
  local pick = nd.sample_multinomial(nd.stop_gradient(D.expand(self.mixture_probs, ps)),
    { dtype = self.dtype })
  local out
  for k, c in ipairs(self.components) do
    local v = c:sample(size)
    local sel = nd.equal_scalar(pick, { scalar = k })
    out = out and nd.where(sel, v, out) or v
  end
  return out
end

return M
