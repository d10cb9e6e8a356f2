-- mx.gluon.probability's continuous distributions (MXNet 2.0's names and parameters):
--   Normal(loc, scale)            reparameterised sample; cdf (erf), icdf (erfinv)
--   StudentT(df, loc, scale)      reparameterised in loc and scale; cdf (betainc)
--   Gamma(shape, scale)           cdf (gammainc)
--   Beta(alpha, beta)             cdf (betainc)
-- Parameters: NDArrays or numbers, broadcast together (distribution.lua).
local nd = require("mx.nd")
local D = require("mx.gluon.probability.distribution")

local math = math
local LOG_2PI = math.log(2 * math.pi)
local SQRT2 = math.sqrt(2)

local M = {}

local function lbeta(a, b)
  return nd.gammaln(a) + nd.gammaln(b) - nd.gammaln(a + b)
end
M._lbeta = lbeta

---------------------------------------------------------------- Normal
local Normal = D.define("Normal")
M.Normal = Normal
Normal.has_grad = true

function Normal.new(loc, scale)
  local p, shape, dtype = D.params("Normal", { "loc", "scale" }, loc or 0, scale or 1)
  return setmetatable({ loc = p[1], scale = p[2], batch_shape = shape, dtype = dtype }, Normal)
end
function Normal:log_prob(x)
  x = self:_value(x, "log_prob")
  local z = (x - self.loc) / self.scale
  return z * z * -0.5 - nd.log(self.scale) - 0.5 * LOG_2PI
end
function Normal:sample(size)
  size = self:_size(size, "sample")
  local eps = nd.random_normal_like(nd.zeros(size, { dtype = self.dtype }))
  return D.expand(self.loc, size) + D.expand(self.scale, size) * eps
end
function Normal:mean() return self.loc end
function Normal:variance() return self.scale * self.scale end
function Normal:stddev() return self.scale end
function Normal:cdf(x)
  x = self:_value(x, "cdf")
  return (nd.erf((x - self.loc) / (self.scale * SQRT2)) + 1) * 0.5
end
function Normal:icdf(q)
  q = self:_value(q, "icdf")
  return self.loc + self.scale * SQRT2 * nd.erfinv(q * 2 - 1)
end
function Normal:entropy() return nd.log(self.scale) + 0.5 * (1 + LOG_2PI) end
function Normal:broadcast_to(shape)
  return Normal.new(nd.broadcast_to(self.loc, { shape = shape }),
    nd.broadcast_to(self.scale, { shape = shape }))
end

---------------------------------------------------------------- StudentT
local StudentT = D.define("StudentT")
M.StudentT = StudentT
StudentT.has_grad = true -- in loc and scale (df enters through a gamma draw)

function StudentT.new(df, loc, scale)
  local p, shape, dtype = D.params("StudentT", { "df", "loc", "scale" }, df, loc or 0, scale or 1)
  return setmetatable({ df = p[1], loc = p[2], scale = p[3], batch_shape = shape, dtype = dtype },
    StudentT)
end
function StudentT:log_prob(x)
  x = self:_value(x, "log_prob")
  local df = self.df
  local z = (x - self.loc) / self.scale
  local half = (df + 1) * 0.5
  return nd.gammaln(half) - nd.gammaln(df * 0.5) - 0.5 * nd.log(df * math.pi)
    - nd.log(self.scale) - half * nd.log1p(z * z / df)
end
function StudentT:sample(size)
  size = self:_size(size, "sample")
  local df = D.expand(self.df, size)
  local z = nd.random_normal_like(nd.zeros(size, { dtype = self.dtype }))
  -- chi2(df) / df = Gamma(df/2, scale 2/df)
  local g = nd.sample_gamma(nd.stop_gradient(df * 0.5), nd.stop_gradient(2 / df))
  return D.expand(self.loc, size) + D.expand(self.scale, size) * z * nd.rsqrt(g)
end
function StudentT:mean()
  -- defined for df > 1
  return nd.where(nd.greater_scalar(self.df, { scalar = 1 }), self.loc,
    nd.full(self.batch_shape, 0 / 0, { dtype = self.dtype }))
end
function StudentT:variance()
  local df = self.df
  local v = self.scale * self.scale * df / (df - 2)
  local inf = nd.full(self.batch_shape, math.huge, { dtype = self.dtype })
  local nan = nd.full(self.batch_shape, 0 / 0, { dtype = self.dtype })
  return nd.where(nd.greater_scalar(df, { scalar = 2 }), v,
    nd.where(nd.greater_scalar(df, { scalar = 1 }), inf, nan))
end
function StudentT:cdf(x)
  x = self:_value(x, "cdf")
  local df = self.df
  local z = (x - self.loc) / self.scale
  -- P(|T| > |z|) / 2 = I_(df/(df+z^2))(df/2, 1/2) / 2
  local zz = z * z
  local tail = nd.betainc(df * 0.5, nd.full({}, 0.5, { dtype = self.dtype }), df / (df + zz)) * 0.5
  return nd.where(nd.greater_scalar(z, { scalar = 0 }), 1 - tail, tail)
end
function StudentT:entropy()
  local df = self.df
  local h = (df + 1) * 0.5
  return h * (nd.digamma(h) - nd.digamma(df * 0.5)) + 0.5 * nd.log(df)
    + lbeta(df * 0.5, nd.full({}, 0.5, { dtype = self.dtype })) + nd.log(self.scale)
end
function StudentT:broadcast_to(shape)
  local b = function(t) return nd.broadcast_to(t, { shape = shape }) end
  return StudentT.new(b(self.df), b(self.loc), b(self.scale))
end

---------------------------------------------------------------- Gamma
local Gamma = D.define("Gamma")
M.Gamma = Gamma

function Gamma.new(shape, scale)
  local p, bshape, dtype = D.params("Gamma", { "shape", "scale" }, shape or 1, scale or 1)
  return setmetatable({ shape = p[1], scale = p[2], batch_shape = bshape, dtype = dtype }, Gamma)
end
function Gamma:log_prob(x)
  x = self:_value(x, "log_prob")
  local k, th = self.shape, self.scale
  return (k - 1) * nd.log(x) - x / th - nd.gammaln(k) - k * nd.log(th)
end
function Gamma:sample(size)
  size = self:_size(size, "sample")
  return nd.sample_gamma(nd.stop_gradient(D.expand(self.shape, size)),
    nd.stop_gradient(D.expand(self.scale, size)))
end
function Gamma:mean() return self.shape * self.scale end
function Gamma:variance() return self.shape * self.scale * self.scale end
function Gamma:cdf(x)
  x = self:_value(x, "cdf")
  return nd.gammainc(self.shape, x / self.scale)
end
function Gamma:entropy()
  local k = self.shape
  return k + nd.log(self.scale) + nd.gammaln(k) + (1 - k) * nd.digamma(k)
end
function Gamma:broadcast_to(shape)
  return Gamma.new(nd.broadcast_to(self.shape, { shape = shape }),
    nd.broadcast_to(self.scale, { shape = shape }))
end

---------------------------------------------------------------- Beta
local Beta = D.define("Beta")
M.Beta = Beta

function Beta.new(alpha, beta)
  local p, shape, dtype = D.params("Beta", { "alpha", "beta" }, alpha or 1, beta or 1)
  return setmetatable({ alpha = p[1], beta = p[2], batch_shape = shape, dtype = dtype }, Beta)
end
function Beta:log_prob(x)
  x = self:_value(x, "log_prob")
  local a, b = self.alpha, self.beta
  return (a - 1) * nd.log(x) + (b - 1) * nd.log1p(-x) - lbeta(a, b)
end
function Beta:sample(size)
  size = self:_size(size, "sample")
  local one = nd.ones(size, { dtype = self.dtype })
  local x = nd.sample_gamma(nd.stop_gradient(D.expand(self.alpha, size)), one)
  local y = nd.sample_gamma(nd.stop_gradient(D.expand(self.beta, size)), one)
  return x / (x + y)
end
function Beta:mean() return self.alpha / (self.alpha + self.beta) end
function Beta:variance()
  local a, b = self.alpha, self.beta
  local s = a + b
  return a * b / (s * s * (s + 1))
end
function Beta:cdf(x)
  x = self:_value(x, "cdf")
  return nd.betainc(self.alpha, self.beta, x)
end
function Beta:entropy()
  local a, b = self.alpha, self.beta
  return lbeta(a, b) - (a - 1) * nd.digamma(a) - (b - 1) * nd.digamma(b)
    + (a + b - 2) * nd.digamma(a + b)
end
function Beta:broadcast_to(shape)
  return Beta.new(nd.broadcast_to(self.alpha, { shape = shape }),
    nd.broadcast_to(self.beta, { shape = shape }))
end

return M
