-- mx.gluon.probability — probability distributions (MXNet 2.0's gluon.probability):
--
--   local P = mx.gluon.probability
--   local d = P.Normal(loc, scale)          -- NDArrays or numbers, broadcast together
--   d:log_prob(x)  d:cdf(x)  d:icdf(p)  d:sample()  d:sample_n(100)  d:mean()  d:variance()
--
-- Normal, StudentT, Gamma, Beta (continuous.lua), Poisson, NegativeBinomial, Categorical
-- (discrete.lua), Mixture (mixture.lua); the base class Distribution (distribution.lua).
-- docs/probability.md lists the methods each defines.
local D = require("mx.gluon.probability.distribution")
local C = require("mx.gluon.probability.continuous")
local K = require("mx.gluon.probability.discrete")
local X = require("mx.gluon.probability.mixture")

return {
  Distribution = D.Distribution,
  Normal = C.Normal, StudentT = C.StudentT, Gamma = C.Gamma, Beta = C.Beta,
  Poisson = K.Poisson, NegativeBinomial = K.NegativeBinomial, Categorical = K.Categorical,
  Mixture = X.Mixture,
}
