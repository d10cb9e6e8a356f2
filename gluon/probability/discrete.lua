-- mx.gluon.probability's discrete distributions (MXNet 2.0's names):
--   Poisson(rate)                              cdf Q(floor(k) + 1, rate) (gammaincc)
--   NegativeBinomial(n, prob=, logit=)         the number of successes before n failures,
--       each trial a success with probability prob (MXNet 2.0's and PyTorch's convention):
--       mean n p / (1 - p); cdf I_(1-p)(n, floor(k) + 1) (betainc)
--   Categorical(num_events, {prob=, logit=})   categories 1..num_events (1-based, the Lua
--       convention; MXNet counts from 0); the probabilities on the last axis
local nd = require("mx.nd")
local D = require("mx.gluon.probability.distribution")

local type, error, tostring = type, error, tostring

local M = {}

---------------------------------------------------------------- Poisson
local Poisson = D.define("Poisson")
M.Poisson = Poisson

function Poisson.new(rate)
  local p, shape, dtype = D.params("Poisson", { "rate" }, rate or 1)
  return setmetatable({ rate = p[1], batch_shape = shape, dtype = dtype }, Poisson)
end
function Poisson:log_prob(x)
  x = self:_value(x, "log_prob")
  return x * nd.log(self.rate) - self.rate - nd.gammaln(x + 1)
end
function Poisson:sample(size)
  size = self:_size(size, "sample")
  return nd.sample_poisson(nd.stop_gradient(D.expand(self.rate, size)))
end
function Poisson:mean() return self.rate end
function Poisson:variance() return self.rate end
function Poisson:cdf(x)
  x = self:_value(x, "cdf")
  local k = nd.floor(x)
  local c = nd.gammaincc(nd.maximum_scalar(k + 1, { scalar = 1 }), self.rate)
  return nd.where(nd.lesser_scalar(k, { scalar = 0 }), nd.zeros_like(c), c)
end
function Poisson:broadcast_to(shape)
  return Poisson.new(nd.broadcast_to(self.rate, { shape = shape }))
end

---------------------------------------------------------------- NegativeBinomial
local NegativeBinomial = D.define("NegativeBinomial")
M.NegativeBinomial = NegativeBinomial

function NegativeBinomial.new(n, prob, logit)
  if (prob == nil) == (logit == nil) then
    error("NegativeBinomial: give exactly one of prob and logit", 2)
  end
  local p, shape, dtype = D.params("NegativeBinomial", { "n", prob and "prob" or "logit" }, n,
    prob or logit)
  local self = setmetatable({ n = p[1], batch_shape = shape, dtype = dtype }, NegativeBinomial)
  if prob then
    self.prob = p[2]
    self.logit = nd.log(p[2]) - nd.log1p(-p[2])
  else
    self.logit = p[2]
    self.prob = nd.sigmoid(p[2])
  end
  return self
end
function NegativeBinomial:log_prob(x)
  x = self:_value(x, "log_prob")
  local n, l = self.n, self.logit
  -- n log(1 - p) + x log p through log-sigmoids (no log(0) for extreme logits)
  return nd.gammaln(x + n) - nd.gammaln(x + 1) - nd.gammaln(n)
    + n * nd.log_sigmoid(-l) + x * nd.log_sigmoid(l)
end
function NegativeBinomial:sample(size)
  size = self:_size(size, "sample")
  -- a gamma-Poisson mixture: rate ~ Gamma(n, p / (1 - p))
  local n = nd.stop_gradient(D.expand(self.n, size))
  local odds = nd.stop_gradient(D.expand(nd.exp(self.logit), size))
  return nd.sample_poisson(nd.sample_gamma(n, odds))
end
function NegativeBinomial:mean() return self.n * nd.exp(self.logit) end
function NegativeBinomial:variance()
  return self.n * nd.exp(self.logit) / (1 - self.prob)
end
function NegativeBinomial:cdf(x)
  x = self:_value(x, "cdf")
  local k = nd.floor(x)
  local c = nd.betainc(self.n, nd.maximum_scalar(k + 1, { scalar = 1 }), 1 - self.prob)
  return nd.where(nd.lesser_scalar(k, { scalar = 0 }), nd.zeros_like(c), c)
end
function NegativeBinomial:broadcast_to(shape)
  return NegativeBinomial.new(nd.broadcast_to(self.n, { shape = shape }), nil,
    nd.broadcast_to(self.logit, { shape = shape }))
end

---------------------------------------------------------------- Categorical
local Categorical = D.define("Categorical")
M.Categorical = Categorical

function Categorical.new(num_events, opts)
  if type(num_events) ~= "number" or num_events < 1 or num_events % 1 ~= 0 then
    error("Categorical: num_events must be a positive integer, got " .. tostring(num_events), 2)
  end
  opts = opts or {}
  local prob, logit = opts.prob, opts.logit
  if (prob == nil) == (logit == nil) then
    error("Categorical: give exactly one of prob and logit", 2)
  end
  local t = prob or logit
  if not nd.is_tensor(t) then error("Categorical: prob/logit must be an NDArray", 2) end
  local s = t:shape()
  if #s == 0 or s[#s] ~= num_events then
    error(string.format("Categorical: prob/logit of shape %s must have num_events (%d) on its "
      .. "last axis", D.shape_str(s), num_events), 2)
  end
  local self = setmetatable({ num_events = num_events, dtype = t:dtype() }, Categorical)
  if prob then
    self.prob = prob
    self.logit = nd.log(prob)
  else
    self.logit = nd.log_softmax(logit, { axis = -1 })
    self.prob = nd.exp(self.logit)
  end
  local b = {}
  for i = 1, #s - 1 do b[i] = s[i] end
  self.batch_shape = b
  return self
end
-- x holds categories 1..num_events of the batch shape
function Categorical:log_prob(x)
  x = self:_value(x, "log_prob")
  return nd.pick(self.logit, x, { axis = -1 })
end
function Categorical:sample(size)
  size = self:_size(size, "sample")
  local p = self.prob
  local ps = {}
  for i, d in ipairs(size) do ps[i] = d end
  ps[#ps + 1] = self.num_events
  p = D.expand(p, ps)
  return nd.sample_multinomial(nd.stop_gradient(p), { dtype = self.dtype })
end
function Categorical:cdf(x)
  x = self:_value(x, "cdf")
  local c = nd.cumsum(self.prob, { axis = -1 })
  local k = nd.minimum_scalar(nd.maximum_scalar(nd.floor(x), { scalar = 1 }),
    { scalar = self.num_events })
  local v = nd.pick(c, k, { axis = -1 })
  return nd.where(nd.lesser_scalar(x, { scalar = 1 }), nd.zeros_like(v), v)
end
function Categorical:entropy()
  return -nd.sum(self.prob * self.logit, { axis = -1 })
end
function Categorical:broadcast_to(shape)
  local s = {}
  for i, d in ipairs(shape) do s[i] = d end
  s[#s + 1] = self.num_events
  return Categorical.new(self.num_events, { logit = nd.broadcast_to(self.logit, { shape = s }) })
end

return M
