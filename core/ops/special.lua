-- core/ops/special.lua — special functions of more than one argument (the regularized
-- incomplete gamma and beta functions): the op table's special family (kernels/ref/special.c
-- and spec/special_spec.lua share the base name; the one-argument ones, gammaln, digamma,
-- erf, erfinv, live in elemwise). core/ops/optable.lua joins the families in op order and
-- documents every field. The distributions' cdfs (mx.gluon.probability) are built on them.
local ops = {}
local function op(t) ops[#ops + 1] = t end

local function sc(s) return { scalar = s } end

-- d/dx P(a, x) = x^(a-1) e^-x / Gamma(a): the density of Gamma(a, 1) at x. The gradient in a
-- has no closed form (a series of Meijer G functions): a takes none.
local function gamma_density(F, a, x)
  return F.exp(F.sub(F.sub(F.mul(F.sub_scalar(a, sc(1)), F.log(x)), x), F.gammaln(a)))
end

op { name = "gammainc", family = "special", inputs = { "a", "x" }, infer = "broadcast_float",
  promote = { 1, 2, float = true }, dtypes = "numeric",
  grad = function(F, x, y, g)
    return { nil, F.reduce_to(F.mul(g[1], gamma_density(F, x[1], x[2])), x[2]) }
  end,
  doc = "Elementwise regularized lower incomplete gamma function P(a, x) = gamma(a, x) / "
    .. "Gamma(a) (scipy.special.gammainc): the cdf of Gamma(a, 1) at x. a > 0, x >= 0 (NaN "
    .. "otherwise); broadcasts like the binary ops; integers give float32. Power series for "
    .. "x < a + 1, else a continued fraction for 1 - P. The gradient flows to x only." }
op { name = "gammaincc", family = "special", inputs = { "a", "x" }, infer = "broadcast_float",
  promote = { 1, 2, float = true }, dtypes = "numeric",
  grad = function(F, x, y, g)
    return { nil, F.reduce_to(F.neg(F.mul(g[1], gamma_density(F, x[1], x[2]))), x[2]) }
  end,
  doc = "Elementwise regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) "
    .. "(scipy.special.gammaincc), computed directly so the upper tail keeps its digits; "
    .. "the Poisson cdf is Q(k + 1, rate). Domain and gradient as gammainc's." }
op { name = "betainc", family = "special", inputs = { "a", "b", "x" }, infer = "broadcast3_float",
  promote = { 1, 2, 3, float = true }, dtypes = "numeric",
  grad = function(F, x, y, g)
    local a, b, v = x[1], x[2], x[3]
    -- d/dx I_x(a, b) = x^(a-1) (1-x)^(b-1) / B(a, b)
    local lbeta = F.sub(F.add(F.gammaln(a), F.gammaln(b)), F.gammaln(F.add(a, b)))
    local ld = F.add(F.mul(F.sub_scalar(a, sc(1)), F.log(v)),
      F.mul(F.sub_scalar(b, sc(1)), F.log1p(F.neg(v))))
    return { nil, nil, F.reduce_to(F.mul(g[1], F.exp(F.sub(ld, lbeta))), v) }
  end,
  doc = "Elementwise regularized incomplete beta function I_x(a, b) (scipy.special.betainc): "
    .. "the cdf of Beta(a, b) at x. a, b > 0, 0 <= x <= 1 (NaN otherwise); the three inputs "
    .. "broadcast together; integers give float32. A continued fraction (modified Lentz), "
    .. "on the side of the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) where it converges fast. "
    .. "The Student-t and negative binomial cdfs use it. The gradient flows to x only." }

-- MXNet 1.9 has none of these as operators (only inside its samplers' and distributions'
-- Python code), so none is mapped.
return ops, {}
