-- core/ops/elemwise.lua — the elementwise ops: the op table's elemwise family
-- (kernels/*/elemwise.c and spec/elemwise_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t; return t end

---------------------------------------------------------------- elementwise unary
-- unary/binary/scalar_op declare cpu = true: kernels/cpu/elemwise.c must define
-- mx_cpu_<name> for every op declared through them. They return the entry, so a caller
-- adds a backend (`.dnnl = ...`) where the op is declared.
-- oneDNN kernels (kernels/dnnl/) for tensors in its blocked layout: eltwise for the
-- activations, the cpu kernel over the flat buffers for same-shape binary ops.
local DNNL_ELTWISE = { "eltwise", supports = true, out_layout = true, layouts = { "onednn" } }
local DNNL_SAME = { "same_layout", supports = true, out_layout = true, layouts = { "onednn" } }
local function unary(name, infer, grad, doc, dtypes, cuda)
  return op { name = name, family = "elemwise", inputs = { "data" }, infer = infer, cuda = cuda ~= false,
    cpu = true, dtypes = dtypes or "numeric", grad = grad, nondiff = grad == nil or nil, doc = doc,
    inplace = { { 1, 1 } } }
end
unary("neg", "same", function(F, x, y, g) return { F.neg(g[1]) } end, "Elementwise -x.")
unary("abs", "same", function(F, x, y, g) return { F.mul(g[1], F.sign(x[1])) } end,
  "Elementwise |x|.")
unary("sign", "same", nil, "Elementwise sign: -1, 0 or 1.")
unary("exp", "same_float", function(F, x, y, g) return { F.mul(g[1], y[1]) } end,
  "Elementwise e^x.")
unary("log", "same_float", function(F, x, y, g) return { F.div(g[1], x[1]) } end,
  "Elementwise natural logarithm.")
unary("sqrt", "same_float", function(F, x, y, g)
  return { F.div(g[1], F.mul_scalar(y[1], { scalar = 2 })) }
end, "Elementwise square root.")
unary("square", "same", function(F, x, y, g)
  return { F.mul(g[1], F.mul_scalar(x[1], { scalar = 2 })) }
end, "Elementwise x^2.")
unary("tanh", "same_float", function(F, x, y, g)
  return { F.mul(g[1], F.rsub_scalar(F.square(y[1]), { scalar = 1 })) }
end, "Elementwise hyperbolic tangent.")
unary("sigmoid", "same_float", function(F, x, y, g)
  return { F.mul(g[1], F.mul(y[1], F.rsub_scalar(y[1], { scalar = 1 }))) }
end, "Elementwise logistic sigmoid 1/(1+e^-x).")
unary("relu", "same", function(F, x, y, g)
  return { F.relu_backward(g[1], x[1]) }
end, "Elementwise max(x, 0).").dnnl = DNNL_ELTWISE

---------------------------------------------------------------- elementwise binary
local function binary(name, scalar, grad, doc, infer)
  return op { name = name, family = "elemwise", inputs = { "lhs", "rhs" }, infer = infer or "broadcast",
    dtypes = "numeric", cuda = true, cpu = true, scalar = scalar, grad = grad,
    nondiff = grad == nil or nil, doc = doc .. " Broadcasts like NumPy; dtypes promote.",
    inplace = { { 1, 1 } } }
end
local function scalar_op(name, grad, doc)
  op { name = name, family = "elemwise", inputs = { "data" }, infer = "same", dtypes = "numeric",
    cuda = true, cpu = true, params = { { "scalar", "float", 0 } }, grad = grad,
    nondiff = grad == nil or nil, doc = doc .. " The result keeps the tensor's dtype.",
    inplace = { { 1, 1 } } }
end

-- need[j] false: input j takes no gradient (a constant operand), its work is skipped
binary("add", { op = "add_scalar", rop = "add_scalar" }, function(F, x, y, g, _, need)
  return { (not need or need[1]) and F.reduce_to(g[1], x[1]) or nil,
    (not need or need[2]) and F.reduce_to(g[1], x[2]) or nil }
end, "Elementwise lhs + rhs.").dnnl = DNNL_SAME
binary("sub", { op = "sub_scalar", rop = "rsub_scalar" }, function(F, x, y, g, _, need)
  return { (not need or need[1]) and F.reduce_to(g[1], x[1]) or nil,
    (not need or need[2]) and F.reduce_to(F.neg(g[1]), x[2]) or nil }
end, "Elementwise lhs - rhs.").dnnl = DNNL_SAME
binary("mul", { op = "mul_scalar", rop = "mul_scalar" }, function(F, x, y, g, _, need)
  return { (not need or need[1]) and F.reduce_to(F.mul(g[1], x[2]), x[1]) or nil,
    (not need or need[2]) and F.reduce_to(F.mul(g[1], x[1]), x[2]) or nil }
end, "Elementwise lhs * rhs.").dnnl = DNNL_SAME
binary("div", { op = "div_scalar", rop = "rdiv_scalar" }, function(F, x, y, g)
  local ga = F.div(g[1], x[2])
  return { F.reduce_to(ga, x[1]), F.reduce_to(F.neg(F.mul(ga, y[1])), x[2]) }
end, "Elementwise lhs / rhs.")
binary("pow", { op = "pow_scalar", rop = "rpow_scalar" }, function(F, x, y, g)
  -- d/da a^b = b a^(b-1); d/db a^b = a^b log a
  local ga = F.mul(g[1], F.mul(x[2], F.pow(x[1], F.sub_scalar(x[2], { scalar = 1 }))))
  local gb = F.mul(g[1], F.mul(y[1], F.log(x[1])))
  return { F.reduce_to(ga, x[1]), F.reduce_to(gb, x[2]) }
end, "Elementwise lhs ^ rhs.")
binary("maximum", { op = "maximum_scalar", rop = "maximum_scalar" }, function(F, x, y, g)
  local m = F.greater_equal(x[1], x[2])
  return { F.reduce_to(F.mul(g[1], m), x[1]),
    F.reduce_to(F.mul(g[1], F.rsub_scalar(m, { scalar = 1 })), x[2]) }
end, "Elementwise max(lhs, rhs); ties send the gradient to lhs.").dnnl = DNNL_SAME
binary("minimum", { op = "minimum_scalar", rop = "minimum_scalar" }, function(F, x, y, g)
  local m = F.lesser_equal(x[1], x[2])
  return { F.reduce_to(F.mul(g[1], m), x[1]),
    F.reduce_to(F.mul(g[1], F.rsub_scalar(m, { scalar = 1 })), x[2]) }
end, "Elementwise min(lhs, rhs); ties send the gradient to lhs.").dnnl = DNNL_SAME
for _, c in ipairs { { "equal", "equal", "==" }, { "not_equal", "not_equal", "~=" },
  { "greater", "lesser", ">" }, { "greater_equal", "lesser_equal", ">=" },
  { "lesser", "greater", "<" }, { "lesser_equal", "greater_equal", "<=" } } do
  binary(c[1], { op = c[1] .. "_scalar", rop = c[2] .. "_scalar" }, nil,
    "Elementwise lhs " .. c[3] .. " rhs as 1 or 0 in the promoted input dtype (MXNet's rule).")
end

scalar_op("add_scalar", function(F, x, y, g) return { g[1] } end, "x + scalar.")
scalar_op("sub_scalar", function(F, x, y, g) return { g[1] } end, "x - scalar.")
scalar_op("rsub_scalar", function(F, x, y, g) return { F.neg(g[1]) } end, "scalar - x.")
scalar_op("mul_scalar", function(F, x, y, g, p) return { F.mul_scalar(g[1], p) } end,
  "x * scalar.")
scalar_op("div_scalar", function(F, x, y, g, p) return { F.div_scalar(g[1], p) } end,
  "x / scalar.")
scalar_op("rdiv_scalar", function(F, x, y, g)
  return { F.neg(F.div(F.mul(g[1], y[1]), x[1])) }
end, "scalar / x.")
scalar_op("pow_scalar", function(F, x, y, g, p)
  local s = p.scalar or 0
  return { F.mul(g[1], F.mul_scalar(F.pow_scalar(x[1], { scalar = s - 1 }), { scalar = s })) }
end, "x ^ scalar.")
scalar_op("rpow_scalar", function(F, x, y, g, p)
  return { F.mul(g[1], F.mul_scalar(y[1], { scalar = math.log(p.scalar or 0) })) }
end, "scalar ^ x.")
scalar_op("maximum_scalar", function(F, x, y, g, p)
  return { F.mul(g[1], F.greater_equal_scalar(x[1], p)) }
end, "max(x, scalar).")
scalar_op("minimum_scalar", function(F, x, y, g, p)
  return { F.mul(g[1], F.lesser_equal_scalar(x[1], p)) }
end, "min(x, scalar).")
for _, c in ipairs { "equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal" } do
  scalar_op(c .. "_scalar", nil, "Comparison of x with scalar as 1 or 0.")
end
-- relu's gradient as one op: one pass and one result instead of greater_scalar's mask then
-- mul (the MLP's backward). Differentiable in ograd (higher order); zero in data.
binary("relu_backward", nil, function(F, x, y, g) return { F.relu_backward(g[1], x[2]) } end,
  "relu's gradient: lhs * (rhs > 0) with lhs the output gradient and rhs relu's input.").dnnl = DNNL_SAME

---------------------------------------------------------------- elementwise, more
unary("sin", "same_float", function(F, x, y, g) return { F.mul(g[1], F.cos(x[1])) } end,
  "Elementwise sine (radians).")
unary("cos", "same_float", function(F, x, y, g) return { F.neg(F.mul(g[1], F.sin(x[1]))) } end,
  "Elementwise cosine (radians).")
unary("log1p", "same_float", function(F, x, y, g)
  return { F.div(g[1], F.add_scalar(x[1], { scalar = 1 })) }
end, "Elementwise log(1 + x), accurate for small x.")
unary("expm1", "same_float", function(F, x, y, g) return { F.mul(g[1], F.exp(x[1])) } end,
  "Elementwise e^x - 1, accurate for small x.")
unary("reciprocal", "same_float", function(F, x, y, g)
  return { F.neg(F.mul(g[1], F.square(y[1]))) }
end, "Elementwise 1/x.")
unary("rsqrt", "same_float", function(F, x, y, g)
  return { F.mul(g[1], F.mul_scalar(F.div(y[1], x[1]), { scalar = -0.5 })) }
end, "Elementwise 1/sqrt(x).")
unary("softrelu", "same_float", function(F, x, y, g) return { F.mul(g[1], F.sigmoid(x[1])) } end,
  "Elementwise softplus log(1 + e^x), computed without overflow.")
unary("softsign", "same_float", function(F, x, y, g)
  return { F.div(g[1], F.square(F.add_scalar(F.abs(x[1]), { scalar = 1 }))) }
end, "Elementwise x / (1 + |x|).")
unary("erf", "same_float", function(F, x, y, g)
  return { F.mul(g[1], F.mul_scalar(F.exp(F.neg(F.square(x[1]))), { scalar = 2 / math.sqrt(math.pi) })) }
end, "Elementwise Gauss error function.")
unary("floor", "same", nil, "Elementwise floor (integers unchanged).")
unary("ceil", "same", nil, "Elementwise ceiling (integers unchanged).")
unary("round", "same", nil, "Elementwise rounding to nearest, halves away from zero (C round).")
unary("trunc", "same", nil, "Elementwise rounding toward zero.")
unary("logical_not", "same", nil, "Elementwise x == 0 as 1 or 0 in the input dtype.", "all")
-- no GPU kernels for these yet (the cpu runs them; x:to(mx.cpu()) first)
for _, o in ipairs(ops) do
  if o.family == "elemwise" and ({ sin = 1, cos = 1, log1p = 1, expm1 = 1, reciprocal = 1,
    rsqrt = 1, softrelu = 1, softsign = 1, erf = 1, floor = 1, ceil = 1, round = 1, trunc = 1,
    logical_not = 1 })[o.name] then o.cuda = nil end
end

---------------------------------------------------------------- elementwise
-- cpu and reference kernels only (cuda = false): kernels/*/elemwise.c, their last block.
local function u14(name, grad, doc, infer)
  unary(name, infer or "same_float", grad, doc, nil, false)
end
local function sc(s) return { scalar = s } end
u14("tan", function(F, x, y, g)
  return { F.mul(g[1], F.add_scalar(F.square(y[1]), sc(1))) }
end, "Elementwise tangent (radians).")
u14("arcsin", function(F, x, y, g)
  return { F.mul(g[1], F.rsqrt(F.rsub_scalar(F.square(x[1]), sc(1)))) }
end, "Elementwise inverse sine, in [-pi/2, pi/2]; NaN outside [-1, 1].")
u14("arccos", function(F, x, y, g)
  return { F.neg(F.mul(g[1], F.rsqrt(F.rsub_scalar(F.square(x[1]), sc(1))))) }
end, "Elementwise inverse cosine, in [0, pi]; NaN outside [-1, 1].")
u14("arctan", function(F, x, y, g)
  return { F.div(g[1], F.add_scalar(F.square(x[1]), sc(1))) }
end, "Elementwise inverse tangent, in (-pi/2, pi/2).")
u14("sinh", function(F, x, y, g) return { F.mul(g[1], F.cosh(x[1])) } end,
  "Elementwise hyperbolic sine.")
u14("cosh", function(F, x, y, g) return { F.mul(g[1], F.sinh(x[1])) } end,
  "Elementwise hyperbolic cosine.")
u14("arcsinh", function(F, x, y, g)
  return { F.mul(g[1], F.rsqrt(F.add_scalar(F.square(x[1]), sc(1)))) }
end, "Elementwise inverse hyperbolic sine.")
u14("arccosh", function(F, x, y, g)
  return { F.mul(g[1], F.rsqrt(F.sub_scalar(F.square(x[1]), sc(1)))) }
end, "Elementwise inverse hyperbolic cosine; NaN below 1.")
u14("arctanh", function(F, x, y, g)
  return { F.div(g[1], F.rsub_scalar(F.square(x[1]), sc(1))) }
end, "Elementwise inverse hyperbolic tangent; +-inf at +-1, NaN outside [-1, 1].")
u14("degrees", function(F, x, y, g) return { F.mul_scalar(g[1], sc(180 / math.pi)) } end,
  "Elementwise radians to degrees (x * 180 / pi).")
u14("radians", function(F, x, y, g) return { F.mul_scalar(g[1], sc(math.pi / 180)) } end,
  "Elementwise degrees to radians (x * pi / 180).")
u14("log2", function(F, x, y, g)
  return { F.div(g[1], F.mul_scalar(x[1], sc(math.log(2)))) }
end, "Elementwise base-2 logarithm.")
u14("log10", function(F, x, y, g)
  return { F.div(g[1], F.mul_scalar(x[1], sc(math.log(10)))) }
end, "Elementwise base-10 logarithm.")
u14("cbrt", function(F, x, y, g)
  return { F.div(g[1], F.mul_scalar(F.square(y[1]), sc(3))) }
end, "Elementwise cube root (negative for negative x).")
u14("rcbrt", function(F, x, y, g)
  return { F.mul(g[1], F.mul_scalar(F.div(y[1], x[1]), sc(-1 / 3))) }
end, "Elementwise 1 / cbrt(x).")
u14("isnan", nil, "Elementwise x is NaN, as 1 or 0 in the input dtype (0 for integers).", "same")
u14("isinf", nil, "Elementwise x is +-inf, as 1 or 0 in the input dtype (0 for integers).", "same")
u14("isfinite", nil, "Elementwise x is neither NaN nor +-inf, as 1 or 0 in the input dtype "
  .. "(1 for integers).", "same")

op { name = "clip", family = "elemwise", cpu = true, inputs = { "data" }, infer = "same", dtypes = "numeric",
  params = { { "a_min", "float", nil, doc = "lower bound (none if omitted)" },
    { "a_max", "float", nil, doc = "upper bound (none if omitted)" } },
  grad = function(F, x, y, g, p)
    local d = g[1]
    if p and p.a_min then d = F.mul(d, F.greater_equal_scalar(x[1], { scalar = p.a_min })) end
    if p and p.a_max then d = F.mul(d, F.lesser_equal_scalar(x[1], { scalar = p.a_max })) end
    return { d }
  end,
  doc = "Elementwise min(max(x, a_min), a_max); NaN stays NaN. The gradient passes where "
    .. "a_min <= x <= a_max." }
op { name = "where", family = "elemwise", cpu = true, inputs = { "condition", "x", "y" }, infer = "where",
  dtypes = "all",
  grad = function(F, x, y, g)
    -- x, y and the result share one shape (infer), so no reduction is needed
    local z = F.zeros_like(g[1]) -- not g * 0: a NaN or Inf in g must not leak through
    return { nil, F.where(x[1], g[1], z), F.where(x[1], z, g[1]) }
  end,
  doc = "Elementwise x where condition ~= 0, else y (MXNet's rule): x and y have the same "
    .. "shape; condition has that shape too, or is 1-D with length x's first dim and then "
    .. "picks whole rows (slices along the first axis). No other broadcasting. The result has "
    .. "the promoted dtype of x and y. No gradient flows to condition." }
op { name = "broadcast_to", family = "elemwise", cpu = true, inputs = { "data" }, infer = "broadcast_to",
  dtypes = "all", params = { { "shape", "shape", {}, doc = "target shape; 0 keeps data's dim" } },
  grad = function(F, x, y, g) return { F.reduce_to(g[1], x[1]) } end,
  doc = "Broadcasts data (right-aligned, NumPy rules) to `shape`. A 0 where data has a dim "
    .. "keeps that dim (MXNet 1.x's rule, which its symbol files rely on): shape {0, 3} of a "
    .. "(1, 3) tensor gives (1, 3), not an empty tensor; a 0 in a new leading dim gives an "
    .. "empty result ({0, 5} of a (5,) tensor is (0, 5)). For an empty result of data's rank, "
    .. "broadcast a 0-size tensor." }
op { name = "broadcast_like", family = "elemwise", cpu = true, inputs = { "data", "like" },
  shape_only = { 2 },
  infer = "broadcast_like", dtypes = "all",
  params = { { "axis", "axes", nil, doc = "like's axes that data lacks (as after a reduction "
    .. "without keepdims); omitted: right-aligned" },
    { "lhs_axes", "axes", nil, doc = "MXNet's: data's size-1 axes to broadcast (with rhs_axes)" },
    { "rhs_axes", "axes", nil, doc = "MXNet's: like's axes whose sizes they take, pairwise" } },
  grad = function(F, x, y, g, p)
    if p and p.lhs_axes then return { F.sum(g[1], { axis = p.lhs_axes, keepdims = true }), nil } end
    return { F.reduce_to(g[1], x[1], { axis = p and p.axis }), nil }
  end,
  doc = "Broadcasts data to like's shape (keeping data's dtype). With `axis`, data's dims "
    .. "map to like's other axes: how a reduction's gradient expands back. With MXNet's "
    .. "lhs_axes/rhs_axes, only data's axes lhs_axes[i] (size 1) grow, to like's size on "
    .. "rhs_axes[i]; the other axes keep data's sizes (the ranks may differ)." }

---------------------------------------------------------------- elementwise binary
-- cpu kernels for the float dtypes (integers, f16, bf16: the reference); no cuda kernels.
local function b14(name, scalar, grad, doc, infer)
  binary(name, scalar, grad, doc, infer)
  ops[#ops].cuda = nil
  if infer == "broadcast_float" then ops[#ops].promote = { 1, 2, float = true } end
end
local function s14(name, grad, doc)
  scalar_op(name, grad, doc)
  ops[#ops].cuda = nil
end
b14("mod", { op = "mod_scalar", rop = "rmod_scalar" }, function(F, x, y, g)
  -- d/da = 1, d/db = -floor(a / b) (MXNet's mod_grad / mod_rgrad)
  return { F.reduce_to(g[1], x[1]),
    F.reduce_to(F.neg(F.mul(g[1], F.floor(F.div(x[1], x[2])))), x[2]) }
end, "Elementwise lhs mod rhs with the sign of rhs (Python, NumPy, MXNet); a zero rhs gives 0 "
  .. "(MXNet's rule, floats included).")
b14("hypot", { op = "hypot_scalar", rop = "hypot_scalar" }, function(F, x, y, g)
  local gy = F.div(g[1], y[1])
  return { F.reduce_to(F.mul(gy, x[1]), x[1]), F.reduce_to(F.mul(gy, x[2]), x[2]) }
end, "Elementwise sqrt(lhs^2 + rhs^2) without overflow.")
b14("arctan2", nil, function(F, x, y, g)
  local gr = F.div(g[1], F.add(F.square(x[1]), F.square(x[2])))
  return { F.reduce_to(F.mul(gr, x[2]), x[1]), F.reduce_to(F.neg(F.mul(gr, x[1])), x[2]) }
end, "Elementwise angle of the point (rhs, lhs), in [-pi, pi] (C atan2); integers give "
  .. "float32.", "broadcast_float")
b14("ldexp", nil, function(F, x, y, g)
  -- y = a 2^b: d/da = 2^b, d/db = y log 2
  return { F.reduce_to(F.mul(g[1], F.rpow_scalar(x[2], sc(2))), x[1]),
    F.reduce_to(F.mul(g[1], F.mul_scalar(y[1], sc(math.log(2)))), x[2]) }
end, "Elementwise lhs * 2^rhs; integers give float32 (NumPy).", "broadcast_float")
for _, c in ipairs { { "logical_and", "both are nonzero" }, { "logical_or", "either is nonzero" },
  { "logical_xor", "exactly one is nonzero" } } do
  b14(c[1], { op = c[1] .. "_scalar", rop = c[1] .. "_scalar" }, nil,
    "Elementwise " .. c[2] .. " as 1 or 0 in the promoted input dtype.")
  s14(c[1] .. "_scalar", nil, "x and scalar: " .. c[2] .. ", as 1 or 0.")
end
s14("mod_scalar", function(F, x, y, g) return { g[1] } end, "x mod scalar, the sign of scalar's.")
s14("rmod_scalar", function(F, x, y, g, p)
  return { F.neg(F.mul(g[1], F.floor(F.rdiv_scalar(x[1], p)))) }
end, "scalar mod x, the sign of x's.")
s14("hypot_scalar", function(F, x, y, g) return { F.mul(g[1], F.div(x[1], y[1])) } end,
  "sqrt(x^2 + scalar^2).")
op { name = "smooth_l1", family = "elemwise", cpu = true, inputs = { "data" }, infer = "same",
  dtypes = "numeric", params = { { "scalar", "float", 1, doc = "sigma" } },
  grad = function(F, x, y, g, p)
    local s2 = (p.scalar or 1) ^ 2
    local m = F.lesser_scalar(F.abs(x[1]), sc(1 / s2))
    return { F.mul(g[1], F.where(m, F.mul_scalar(x[1], sc(s2)), F.sign(x[1]))) }
  end,
  doc = "MXNet's smooth_l1 with sigma = scalar: 0.5 (sigma x)^2 where |x| < 1/sigma^2, else "
    .. "|x| - 0.5/sigma^2.", inplace = { { 1, 1 } } }
op { name = "add_n", family = "elemwise", cpu = true, inputs = { "args" }, variadic = true,
  infer = "add_n", dtypes = "numeric",
  grad = function(F, x, y, g)
    local r = {}
    for i = 1, #x do r[i] = g[1] end
    return r
  end,
  doc = "Sum of any number of same-shaped tensors (MXNet's add_n / ElementWiseSum); the "
    .. "result has their promoted dtype; integers wrap like add." }

---------------------------------------------------------------- elementwise unary
-- cpu and reference kernels (no cuda): kernels/*/elemwise.c, their last blocks.
local SQRT_PI_2 = math.sqrt(math.pi) / 2
u14("rint", nil, "Elementwise rounding to nearest, halves toward -inf (MXNet's rint: "
  .. "floor(x) unless x is nearer ceil(x); 1.5 gives 1, -1.5 gives -2); integers unchanged.",
  "same")
u14("fix", nil, "Elementwise rounding toward zero (MXNet's fix, as trunc); integers unchanged.",
  "same")
u14("erfinv", function(F, x, y, g)
  return { F.mul(g[1], F.mul_scalar(F.exp(F.square(y[1])), sc(SQRT_PI_2))) }
end, "Elementwise inverse error function on [-1, 1] (+-inf at +-1, NaN outside).")
u14("gamma", function(F, x, y, g) return { F.mul(g[1], F.mul(y[1], F.digamma(x[1]))) } end,
  "Elementwise gamma function (C tgamma); NaN or inf at the poles 0, -1, -2, ...")
u14("gammaln", function(F, x, y, g) return { F.mul(g[1], F.digamma(x[1])) } end,
  "Elementwise log |gamma(x)| (C lgamma_r); inf at the poles.")
u14("digamma", function(F, x, y, g) return { F.mul(g[1], F.trigamma(x[1])) } end,
  "Elementwise digamma psi(x) = gamma'(x) / gamma(x) (recurrence and asymptotic series; "
  .. "reflection below 0); NaN at the poles. Its gradient is trigamma.")
op { name = "nan_to_num", family = "elemwise", cpu = true, inputs = { "data" }, infer = "same",
  dtypes = "numeric",
  params = { { "nan", "float", 0, doc = "the value for NaN" },
    { "posinf", "float", nil, doc = "the value for +inf (omitted: the dtype's largest finite)" },
    { "neginf", "float", nil, doc = "the value for -inf (omitted: the dtype's lowest finite)" } },
  grad = function(F, x, y, g)
    -- where, not g * isfinite(x): a NaN or Inf in g must not leak where x was not finite
    return { F.where(F.isfinite(x[1]), g[1], F.zeros_like(g[1])) }
  end,
  doc = "Elementwise NaN -> nan, +inf -> posinf, -inf -> neginf (NumPy's and MXNet's "
    .. "np.nan_to_num); the replacements are rounded to the dtype; integers unchanged. The "
    .. "gradient passes where x was finite.", inplace = { { 1, 1 } } }

---------------------------------------------------------------- trigamma
op { name = "trigamma", family = "elemwise", inputs = { "data" }, infer = "same_float",
  dtypes = "numeric", nondiff = true, inplace = { { 1, 1 } },
  doc = "Elementwise trigamma psi'(x) = sum 1/(x+k)^2, digamma's derivative (MXNet has it "
    .. "only inside digamma's backward); NaN at the poles 0, -1, ..., 0 at +inf. Its own "
    .. "gradient (tetragamma) is not implemented: nondifferentiable here." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  neg = { "negative" }, abs = { "abs" }, sign = { "sign" }, exp = { "exp" }, log = { "log" },
  sqrt = { "sqrt" }, square = { "square" }, tanh = { "tanh" }, sigmoid = { "sigmoid" },
  relu = { "relu" }, sin = { "sin" }, cos = { "cos" }, log1p = { "log1p" }, expm1 = { "expm1" },
  reciprocal = { "reciprocal" }, rsqrt = { "rsqrt" }, softsign = { "softsign" }, erf = { "erf" },
  floor = { "floor" }, ceil = { "ceil" }, round = { "round" }, trunc = { "trunc" },
  logical_not = { "logical_not" },
  add = { "elemwise_add", "broadcast_add", "broadcast_plus", "_plus", "_add" },
  sub = { "elemwise_sub", "broadcast_sub", "broadcast_minus", "_minus", "_sub" },
  mul = { "elemwise_mul", "broadcast_mul", "_mul" },
  div = { "elemwise_div", "broadcast_div", "_div" }, pow = { "broadcast_power", "_power" },
  maximum = { "broadcast_maximum", "_maximum" }, minimum = { "broadcast_minimum", "_minimum" },
  equal = { "broadcast_equal", "_equal" }, not_equal = { "broadcast_not_equal", "_not_equal" },
  greater = { "broadcast_greater", "_greater" },
  greater_equal = { "broadcast_greater_equal", "_greater_equal" },
  lesser = { "broadcast_lesser", "_lesser" },
  lesser_equal = { "broadcast_lesser_equal", "_lesser_equal" }, add_scalar = { "_plus_scalar" },
  sub_scalar = { "_minus_scalar" }, rsub_scalar = { "_rminus_scalar" },
  mul_scalar = { "_mul_scalar" }, div_scalar = { "_div_scalar" },
  rdiv_scalar = { "_rdiv_scalar" }, pow_scalar = { "_power_scalar" },
  rpow_scalar = { "_rpower_scalar" }, maximum_scalar = { "_maximum_scalar" },
  minimum_scalar = { "_minimum_scalar" }, equal_scalar = { "_equal_scalar" },
  not_equal_scalar = { "_not_equal_scalar" }, greater_scalar = { "_greater_scalar" },
  greater_equal_scalar = { "_greater_equal_scalar" }, lesser_scalar = { "_lesser_scalar" },
  lesser_equal_scalar = { "_lesser_equal_scalar" }, clip = { "clip" }, where = { "where" },
  broadcast_to = { "broadcast_to" }, broadcast_like = { "broadcast_like" },
  tan = { "tan" }, arcsin = { "arcsin" }, arccos = { "arccos" }, arctan = { "arctan" },
  sinh = { "sinh" }, cosh = { "cosh" }, arcsinh = { "arcsinh" }, arccosh = { "arccosh" },
  arctanh = { "arctanh" }, degrees = { "degrees" }, radians = { "radians" }, log2 = { "log2" },
  log10 = { "log10" }, cbrt = { "cbrt" }, rcbrt = { "rcbrt" },
  -- isnan/isinf/isfinite: MXNet 1.9 has no such operator (contrib.isnan is Python over ==)
  mod = { "broadcast_mod", "_mod" }, hypot = { "broadcast_hypot", "_hypot" },
  logical_and = { "broadcast_logical_and", "_logical_and" },
  logical_or = { "broadcast_logical_or", "_logical_or" },
  logical_xor = { "broadcast_logical_xor", "_logical_xor" }, mod_scalar = { "_mod_scalar" },
  rmod_scalar = { "_rmod_scalar" }, hypot_scalar = { "_hypot_scalar" },
  logical_and_scalar = { "_logical_and_scalar" }, logical_or_scalar = { "_logical_or_scalar" },
  logical_xor_scalar = { "_logical_xor_scalar" },
  smooth_l1 = { "smooth_l1" }, add_n = { "add_n", "ElementWiseSum" },
  -- arctan2, ldexp: only numpy's _npi_arctan2/_npi_ldexp, whose dtype rules differ
  rint = { "rint" }, fix = { "fix" }, erfinv = { "erfinv" }, gamma = { "gamma" },
  gammaln = { "gammaln" }, digamma = { "digamma" },
  -- nan_to_num: only numpy's _npi_nan_to_num (its copy= argument has no counterpart here)
}

return ops, MXNET
