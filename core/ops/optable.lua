-- core/ops/optable.lua — THE op table. Each op is declared once here; the C
-- registry and param structs (tools/gen_ops.lua), the FFI declarations and the
-- mx.nd functions/methods (lua/mx/nd.lua), docs/ops.md (tools/gen_docs.lua) and the
-- coverage checks in spec/optable_spec.lua all derive from it.
--
-- Fields:
--   name      op name: C kernels are mx_ref_<ref or name>, mx_cpu_<cpu or name>
--   family    base name of its files: kernels/{ref,cpu}/<family>.c,
--             kernels/cuda/<family>.cu, spec/<family>_spec.lua
--   inputs    input names (tensors); variadic = true: any number >= 1 (concat)
--   outputs   output names (default {"out"})
--   params    { {name, type, default, doc=, values= (enum)} ... }; types: int,
--             float, bool, dtype, axis, axes, shape, ints, enum. A nil default
--             makes the param optional (has_<name> flag / tuple n = -1 in C).
--             Axis-typed params are 1-based in Lua and converted once, in the
--             generic wrapper, to 0-based for C.
--   ctx       true: a creation op; params start with the device (ctx= option)
--   infer     shape/dtype inference: C function mx_infer_<infer> (core/ops/)
--   dtypes    accepted input dtypes: "all", "numeric", "float", "int", ... or a list
--   cpu       true: an optimised kernel mx_cpu_<name> exists (or a string: its name);
--             otherwise the CPU runs the ref kernel
--   cuda      true: libmx_cuda registers a kernel for it
--   view      Lua may serve the call as a view instead of a copy (reshape...)
--   scalar    for binary ops: { op = "<name>_scalar", rop = "<r-name>_scalar" } used
--             when the left/right operand is a Lua number
--   grad      function(F, inputs, outputs, ograds, p, need, into) -> { dinput1, ... } written in
--             terms of other ops through F (mx.nd eagerly, mx.sym symbolically);
--             p holds the op's params as the Lua caller gave them (1-based axes),
--             never nil (an empty table when none were given), without out=, and
--             with the train_flag param set as the forward saw it. need (nil: all
--             needed) has need[j] false when input j takes no gradient (data,
--             labels): a formula may skip that
--             work (the data gradient of fully_connected costs as much as the weight's)
--             and return nil for it. Return nil (or
--             leave out) entries for inputs that take no gradient. into (usually nil):
--             into[j] is a tensor of input j's shape and dtype that the formula may
--             compute input j's gradient into (out=) and return, sparing autograd a
--             copy into a variable's buffer; formulas are free to ignore it. Return shapes must
--             equal the inputs' (autograd checks). Every grad op needs a case in
--             spec/helpers/gradcases.lua (spec/gradcheck_spec.lua fails otherwise)
--   nondiff   true instead of grad: the op has no gradient (argmax, comparisons...);
--             autograd records nothing for it, so its outputs stop the gradient
--   train_flag true (a bool param named `training`) or the name of a bool param: the
--             wrappers fill it from the train-mode flag (mx.autograd.record/train_mode/
--             predict_mode) unless the caller passes it (dropout, batchnorm)
--   random    true: draws random numbers (the one random resource): dispatch reserves
--             the call's counters (inference says how many) from the session's stream
--             in program order and hands them to the kernel in its context
--   aux       names of auxiliary inputs, after the inputs, that the op updates in place
--             (BatchNorm's moving mean/var): autograd, graphs and export know them
--   num_outputs  name of an int param giving the output count (split's num_outputs)
--   inplace   { {k, i}, ... }: output k may reuse input i's memory (1-based); out= on
--             exactly input i then runs in place, any other overlap between an out=
--             and an input computes through a temporary (dispatch.c)
--   promote   input positions promoted to one dtype before the kernel ({1, 2}; float =
--             true: at least float32); defaults by infer kind (_opgen.lua PROMOTE)
--   partial   true: inference handles unknown dims (fills parameter inputs' dims)
--   mxnet     MXNet operator names of the op ({"FullyConnected"}): mx_op_find takes
--             them; params may carry `mxnet = "attr_name"` when MXNet's name differs
--   amp       safe | fp32 | widest: the AMP cast policy (default by family)
--   Input names ending in "?" are optional (fully_connected's "bias?").
--   doc       one paragraph, shown by mx.help and docs/ops.md
local ops = {}
local function op(t) ops[#ops + 1] = t end

local CREATION = { { "shape", "shape", {} }, { "dtype", "dtype", 0 } }

---------------------------------------------------------------- creation
op { name = "zeros", family = "creation", ctx = true, params = CREATION, infer = "creation",
  nondiff = true, cuda = true, cpu = true, doc = "A new tensor filled with zeros." }
op { name = "ones", family = "creation", ctx = true, params = CREATION, infer = "creation",
  nondiff = true, cuda = true, cpu = true, doc = "A new tensor filled with ones." }
op { name = "full", family = "creation", ctx = true, infer = "creation", nondiff = true, cuda = true,
  cpu = true,
  params = { { "shape", "shape", {} }, { "dtype", "dtype", 0 }, { "value", "float", 0 } },
  doc = "A new tensor filled with `value`." }
-- (owner la) creation ops whose values come from params; `positional` lists the
-- params mx.nd's wrapper fills from leading numbers: mx.nd.arange(0, 10, 2).
op { name = "arange", family = "creation", ctx = true, infer = "arange", nondiff = true,
  positional = { "start", "stop", "step" },
  params = { { "start", "float", 0 }, { "stop", "float", nil }, { "step", "float", 1 },
    { "repeat", "int", 1 }, { "dtype", "dtype", 0 } },
  doc = "Evenly spaced values in [start, stop) (MXNet's values: stop excluded, ceil((stop-start)"
    .. "/step) of them); with one number n: 0, 1, ..., n-1. repeat repeats each value." }
op { name = "linspace", family = "creation", ctx = true, infer = "linspace", nondiff = true,
  positional = { "start", "stop", "num" },
  params = { { "start", "float", 0 }, { "stop", "float", 1 }, { "num", "int", 50 },
    { "endpoint", "bool", true }, { "dtype", "dtype", 0 } },
  doc = "num evenly spaced values from start to stop (included when endpoint)." }
op { name = "eye", family = "creation", ctx = true, infer = "eye", nondiff = true,
  positional = { "N", "M", "k" },
  params = { { "N", "int", 0 }, { "M", "int", 0, doc = "columns (0: N)" },
    { "k", "int", 0, doc = "diagonal offset (> 0 above the main diagonal)" },
    { "dtype", "dtype", 0 } },
  doc = "An N x M matrix with ones on diagonal k and zeros elsewhere." }
local function like_op(name, params, doc, extra)
  local t = { name = name, family = "creation", inputs = { "data" }, infer = "same",
    cpu = true, nondiff = true, params = params, doc = doc }
  for k, v in pairs(extra or {}) do t[k] = v end
  op(t)
end
like_op("zeros_like", nil, "Zeros with data's shape, dtype and device.")
like_op("ones_like", nil, "Ones with data's shape, dtype and device.")
like_op("full_like", { { "value", "float", 0 } }, "`value` with data's shape, dtype and device.")
-- random draws: counter-based (seed, counter) -> value, reproducible after
-- mx.random.seed(n) whatever the thread count; normal uses Box-Muller. `random = true`
-- declares the one random resource: dispatch reserves the call's counters from the
-- session's stream in program order (not the engine's schedule) and hands them to the
-- kernel in its context.
local function rand_op(name, params, doc, dtypes, dtype)
  local ps = { { "shape", "shape", {} }, { "dtype", "dtype", dtype or 0 } }
  for _, p in ipairs(params) do ps[#ps + 1] = p end
  op { name = name, family = "random", ctx = true, infer = "creation", cpu = true,
    nondiff = true, params = ps, doc = doc, random = true }
  local lp = {}
  for _, p in ipairs(params) do lp[#lp + 1] = p end
  if dtypes then
    op { name = name .. "_like", family = "random", inputs = { "data" }, infer = "same",
      cpu = true, nondiff = true, params = lp, dtypes = dtypes, random = true,
      doc = doc .. " Shape, dtype and device from data." }
  end
end
rand_op("random_uniform", { { "low", "float", 0 }, { "high", "float", 1 } },
  "Uniform samples in [low, high).", "float")
rand_op("random_normal", { { "loc", "float", 0 }, { "scale", "float", 1 } },
  "Normal samples with mean loc and standard deviation scale.", "float")
rand_op("random_randint", { { "low", "int", 0 }, { "high", "int", 2 } },
  "Uniform integers in [low, high) (default dtype int32).", nil, 4)
rand_op("random_bernoulli", { { "prob", "float", 0.5 } }, "1 with probability prob, else 0.")

---------------------------------------------------------------- elementwise unary
-- unary/binary/scalar_op declare cpu = true: kernels/cpu/elemwise.c must define
-- mx_cpu_<name> for every op declared through them (owner: ew).
local function unary(name, infer, grad, doc, dtypes, cuda)
  op { name = name, family = "elemwise", inputs = { "data" }, infer = infer, cuda = cuda ~= false,
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
end, "Elementwise max(x, 0).")

---------------------------------------------------------------- elementwise binary
local function binary(name, scalar, grad, doc, infer)
  op { name = name, family = "elemwise", inputs = { "lhs", "rhs" }, infer = infer or "broadcast",
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

binary("add", { op = "add_scalar", rop = "add_scalar" }, function(F, x, y, g)
  return { F.reduce_to(g[1], x[1]), F.reduce_to(g[1], x[2]) }
end, "Elementwise lhs + rhs.")
binary("sub", { op = "sub_scalar", rop = "rsub_scalar" }, function(F, x, y, g)
  return { F.reduce_to(g[1], x[1]), F.reduce_to(F.neg(g[1]), x[2]) }
end, "Elementwise lhs - rhs.")
binary("mul", { op = "mul_scalar", rop = "mul_scalar" }, function(F, x, y, g)
  return { F.reduce_to(F.mul(g[1], x[2]), x[1]), F.reduce_to(F.mul(g[1], x[1]), x[2]) }
end, "Elementwise lhs * rhs.")
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
end, "Elementwise max(lhs, rhs); ties send the gradient to lhs.")
binary("minimum", { op = "minimum_scalar", rop = "minimum_scalar" }, function(F, x, y, g)
  local m = F.lesser_equal(x[1], x[2])
  return { F.reduce_to(F.mul(g[1], m), x[1]),
    F.reduce_to(F.mul(g[1], F.rsub_scalar(m, { scalar = 1 })), x[2]) }
end, "Elementwise min(lhs, rhs); ties send the gradient to lhs.")
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
  "relu's gradient: lhs * (rhs > 0) with lhs the output gradient and rhs relu's input.")

---------------------------------------------------------------- elementwise, more (owner: ew)
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
    local z = F.mul_scalar(g[1], { scalar = 0 })
    return { nil, F.reduce_to(F.where(x[1], g[1], z), x[2]),
      F.reduce_to(F.where(x[1], z, g[1]), x[3]) }
  end,
  doc = "Elementwise x where condition ~= 0, else y. The three inputs broadcast like NumPy; "
    .. "the result has the promoted dtype of x and y. No gradient flows to condition." }
op { name = "broadcast_to", family = "elemwise", cpu = true, inputs = { "data" }, infer = "broadcast_to",
  dtypes = "all", params = { { "shape", "shape", {}, doc = "target shape; 0 keeps data's dim" } },
  grad = function(F, x, y, g) return { F.reduce_to(g[1], x[1]) } end,
  doc = "Broadcasts data (right-aligned, NumPy rules) to `shape`." }
op { name = "broadcast_like", family = "elemwise", cpu = true, inputs = { "data", "like" },
  infer = "broadcast_like", dtypes = "all",
  params = { { "axis", "axes", nil, doc = "like's axes that data lacks (as after a reduction "
    .. "without keepdims); omitted: right-aligned" } },
  grad = function(F, x, y, g, p)
    return { F.reduce_to(g[1], x[1], { axis = p and p.axis }), nil }
  end,
  doc = "Broadcasts data to like's shape (keeping data's dtype). With `axis`, data's dims "
    .. "map to like's other axes: how a reduction's gradient expands back." }

---------------------------------------------------------------- reductions (owner: ew)
local function raxes(doc)
  return { { "axis", "axes", nil, doc = doc or "axes to reduce (1-based, negative from the end); "
    .. "omitted: all" }, { "keepdims", "bool", false, doc = "keep reduced axes as size 1" } }
end
-- the axis option to expand a reduced gradient back to x's shape
local function rax(p) return { axis = p and not p.keepdims and p.axis or nil } end
local function reduction(name, infer, grad, doc, params)
  op { name = name, family = "reduce", inputs = { "data" }, infer = infer, dtypes = "numeric",
    cpu = true,
    params = params or raxes(), grad = grad, nondiff = grad == nil or nil, doc = doc }
end
reduction("sum", "reduce", function(F, x, y, g, p)
  return { F.broadcast_like(g[1], x[1], rax(p)) }
end, "Sum over axes. Integer inputs accumulate in float64 and keep their dtype.")
reduction("mean", "reduce_float", function(F, x, y, g, p)
  local n = x[1]:size() / math.max(y[1]:size(), 1)
  return { F.div_scalar(F.broadcast_like(g[1], x[1], rax(p)), { scalar = n }) }
end, "Mean over axes; integer inputs give float32. The mean of nothing is NaN.")
reduction("prod", "reduce", function(F, x, y, g, p)
  return { F.div(F.broadcast_like(F.mul(g[1], y[1]), x[1], rax(p)), x[1]) }
end, "Product over axes (the gradient y/x assumes no zeros, as MXNet's).")
reduction("max", "reduce_minmax", function(F, x, y, g, p)
  local r = rax(p)
  return { F.mul(F.broadcast_like(g[1], x[1], r), F.equal(x[1], F.broadcast_like(y[1], x[1], r))) }
end, "Maximum over axes; NaN propagates. Empty extents are an error. Ties all get the gradient.")
reduction("min", "reduce_minmax", function(F, x, y, g, p)
  local r = rax(p)
  return { F.mul(F.broadcast_like(g[1], x[1], r), F.equal(x[1], F.broadcast_like(y[1], x[1], r))) }
end, "Minimum over axes; NaN propagates. Empty extents are an error. Ties all get the gradient.")
local aparams = { { "axis", "axis", nil, doc = "the axis (1-based); omitted: the flattened input" },
  { "keepdims", "bool", false, doc = "keep the reduced axis as size 1" } }
reduction("argmax", "argreduce", nil, "1-based int64 index of the maximum along axis (of the "
  .. "flattened input without axis); the first one on ties, NaN counts as the maximum. "
  .. "See docs/ops-notes.md.", aparams)
reduction("argmin", "argreduce", nil, "1-based int64 index of the minimum along axis (of the "
  .. "flattened input without axis); the first one on ties, NaN counts as the minimum. "
  .. "See docs/ops-notes.md.", aparams)
local nparams = raxes()
nparams[3] = { "ord", "int", 2, doc = "2: sqrt(sum x^2), 1: sum |x|" }
reduction("norm", "norm", function(F, x, y, g, p)
  local r = rax(p)
  if p and p.ord == 1 then return { F.mul(F.broadcast_like(g[1], x[1], r), F.sign(x[1])) } end
  return { F.mul(F.broadcast_like(F.div(g[1], y[1]), x[1], r), x[1]) }
end, "L2 (ord=2, default) or L1 (ord=1) norm over axes; integer inputs give float32.", nparams)
op { name = "reduce_to", family = "reduce", cpu = true, inputs = { "data", "like" }, infer = "reduce_to",
  dtypes = "numeric",
  params = { { "axis", "axes", nil, doc = "data's axes that like lacks; omitted: like is "
    .. "right-aligned" } },
  grad = function(F, x, y, g, p)
    return { F.broadcast_like(g[1], x[1], { axis = p and p.axis }), nil }
  end,
  doc = "Sums data over the axes along which like (shape-wise) was broadcast, giving like's "
    .. "shape: the gradient of a broadcasting op. Keeps data's dtype." }

---------------------------------------------------------------- softmax (owner: ew)
local sparams = { { "axis", "axis", -1, doc = "the axis (1-based; -1 the last)" },
  { "temperature", "float", 1, doc = "divides the input first" } }
op { name = "softmax", family = "softmax", cpu = true, inputs = { "data" }, infer = "softmax",
  dtypes = "numeric", params = sparams,
  grad = function(F, x, y, g, p)
    local ax, t = p and p.axis or -1, p and p.temperature or 1
    local s = F.sum(F.mul(g[1], y[1]), { axis = ax, keepdims = true })
    local d = F.mul(y[1], F.sub(g[1], s))
    if t ~= 1 then d = F.div_scalar(d, { scalar = t }) end
    return { d }
  end,
  doc = "exp(x/T) / sum(exp(x/T)) along axis, computed stably (max subtracted). Integer "
    .. "inputs give float32." }
op { name = "log_softmax", family = "softmax", cpu = true, inputs = { "data" }, infer = "softmax",
  dtypes = "numeric", params = sparams,
  grad = function(F, x, y, g, p)
    local ax, t = p and p.axis or -1, p and p.temperature or 1
    local s = F.sum(g[1], { axis = ax, keepdims = true })
    local d = F.sub(g[1], F.mul(F.exp(y[1]), s))
    if t ~= 1 then d = F.div_scalar(d, { scalar = t }) end
    return { d }
  end,
  doc = "log(softmax(x)) along axis: x/T - max - log(sum(exp(x/T - max))), stable." }

---------------------------------------------------------------- autograd (owner: ag)
op { name = "stop_gradient", family = "autograd", inputs = { "data" }, infer = "same",
  dtypes = "all", nondiff = true,
  doc = "The identity (a copy) that blocks gradients: autograd records nothing for it, so "
    .. "inputs reached only through it get no gradient (MXNet's BlockGrad)." }

---------------------------------------------------------------- linalg (owner: la)
-- Shapes of an NDArray operand (eager F); the formulas reshape N-d operands to the
-- matrices the kernel sees and reshape the gradients back with reshape_like.
local function mat(F, t, rows, cols) return F.reshape(t, { shape = { rows, cols } }) end
local function prod(s, i, j)
  local n = 1
  for k = i, j do n = n * s[k] end
  return n
end
-- dot on the stored matrices A2 (M, K) or (K, M), B2 (K, N) or (N, K), G2 (M, N)
local function dot_grads(F, A2, B2, G2, ta, tb, name)
  local dA, dB
  if not ta and not tb then
    dA = F[name](G2, B2, { transpose_b = true }); dB = F[name](A2, G2, { transpose_a = true })
  elseif ta and not tb then
    dA = F[name](B2, G2, { transpose_b = true }); dB = F[name](A2, G2)
  elseif tb and not ta then
    dA = F[name](G2, B2); dB = F[name](G2, A2, { transpose_a = true })
  else
    dA = F[name](B2, G2, { transpose_a = true, transpose_b = true })
    dB = F[name](G2, A2, { transpose_a = true, transpose_b = true })
  end
  return dA, dB
end
local TRANSPOSE_FLAGS = { { "transpose_a", "bool", false, doc = "use lhs transposed" },
  { "transpose_b", "bool", false, doc = "use rhs transposed" } }

op { name = "dot", family = "linalg", inputs = { "lhs", "rhs" }, infer = "dot", cpu = true,
  dtypes = "numeric", params = TRANSPOSE_FLAGS,
  grad = function(F, x, y, g, p)
    p = p or {}
    local A, B, G = x[1], x[2], g[1]
    local ta, tb = p.transpose_a or false, p.transpose_b or false
    if A:ndim() == 2 and B:ndim() == 2 then
      local dA, dB = dot_grads(F, A, B, G, ta, tb, "dot")
      return { dA, dB }
    end
    local sa, sb = A:shape(), B:shape()
    local K = ta and sa[1] or sa[#sa]
    local M, N = prod(sa, 1, #sa) / K, prod(sb, 1, #sb) / K
    local A2 = ta and mat(F, A, K, M) or mat(F, A, M, K)
    local B2 = tb and mat(F, B, N, K) or mat(F, B, K, N)
    local dA, dB = dot_grads(F, A2, B2, mat(F, G, M, N), ta, tb, "dot")
    return { F.reshape_like(dA, A), F.reshape_like(dB, B) }
  end,
  doc = "MXNet's dot: contracts lhs's last axis (first with transpose_a) with rhs's first "
    .. "axis (last with transpose_b); N-d operands act as matrices of their other dims. "
    .. "Two 1-d operands give a (1,) tensor." }
op { name = "batch_dot", family = "linalg", inputs = { "lhs", "rhs" }, infer = "batch_dot",
  cpu = true, dtypes = "numeric", params = TRANSPOSE_FLAGS,
  grad = function(F, x, y, g, p)
    p = p or {}
    local dA, dB = dot_grads(F, x[1], x[2], g[1], p.transpose_a or false, p.transpose_b or false,
      "batch_dot")
    return { dA, dB }
  end,
  doc = "Batched matrix product: (B..., M, K) x (B..., K, N) -> (B..., M, N); the flags "
    .. "transpose the last two axes of an operand. Batch dims must be equal." }
op { name = "matmul", family = "linalg", inputs = { "lhs", "rhs" }, infer = "matmul", cpu = true,
  dtypes = "numeric",
  grad = function(F, x, y, g)
    local A, B, G = x[1], x[2], g[1]
    local a1, b1 = A:ndim() == 1, B:ndim() == 1
    local A2 = a1 and F.expand_dims(A, { axis = 1 }) or A
    local B2 = b1 and F.expand_dims(B, { axis = 2 }) or B
    local G2 = G
    if a1 and b1 then G2 = F.reshape(G, { shape = { 1, 1 } })
    elseif a1 then G2 = F.expand_dims(G, { axis = -2 })
    elseif b1 then G2 = F.expand_dims(G, { axis = -1 }) end
    local dA = F.reduce_to(F.matmul(G2, F.swapaxes(B2, { dim1 = -1, dim2 = -2 })), A2)
    local dB = F.reduce_to(F.matmul(F.swapaxes(A2, { dim1 = -1, dim2 = -2 }), G2), B2)
    if a1 then dA = F.reshape_like(dA, A) end
    if b1 then dB = F.reshape_like(dB, B) end
    return { dA, dB }
  end,
  doc = "NumPy's matmul: (..., M, K) x (..., K, N) -> (..., M, N) with broadcast batch dims; "
    .. "a 1-d operand gains a unit axis that the result drops again." }
op { name = "fully_connected", family = "linalg", inputs = { "data", "weight", "bias?" },
  infer = "fully_connected", partial = true, cpu = true, dtypes = "numeric",
  params = { { "num_hidden", "int", nil, doc = "output units (checked against weight)" },
    { "no_bias", "bool", false, doc = "no bias input" },
    { "flatten", "bool", true, doc = "collapse all but the first axis of data" },
    { "act_type", "enum", "none", values = { "none", "relu" },
      doc = "activation applied in the same pass (Dense's activation='relu')" } },
  grad = function(F, x, y, g, p, need, into)
    local X, W, G = x[1], x[2], g[1]
    -- relu(z) > 0 exactly where z > 0: the output masks the gradient
    if p.act_type == "relu" then G = F.relu_backward(G, y[1]) end
    local X2, G2
    -- a 2-d eager input is already the matrix: no reshape copies (Dense's case)
    local plain = type(X.ndim) == "function" and X:ndim() == 2
    if plain then
      X2, G2 = X, G
    elseif p.flatten == false then
      X2 = F.reshape(X, { shape = { -1, 0 }, reverse = true })
      G2 = F.reshape(G, { shape = { -1, 0 }, reverse = true })
    else
      X2, G2 = F.flatten(X), G
    end
    local dX -- the first layer's data gradient is as costly as the weight's: skip it
    if not need or need[1] then
      dX = F.dot(G2, W)
      if not plain then dX = F.reshape_like(dX, X) end
    end
    -- into (eager backward only): write the parameters' gradients straight into
    -- their buffers, sparing autograd a copy of each
    local dW, db = into and into[2], into and into[3]
    local r = { dX, F.dot(G2, X2, { transpose_a = true, out = dW }) }
    if not p.no_bias then r[3] = F.sum(G2, { axis = 1, out = db }) end
    return r
  end,
  doc = "MXNet's FullyConnected: out = data . weight^T + bias with weight (num_hidden, "
    .. "in_units). flatten=true reshapes data to (batch, -1) first; flatten=false applies "
    .. "to the last axis. Inputs: data, weight[, bias] (no bias with no_bias=true). "
    .. "act_type='relu' applies relu to the result in the same pass (an extension: MXNet "
    .. "fuses it in its oneDNN subgraph backend)." }

---------------------------------------------------------------- optimizer (owner: gl)
-- Fused update ops (MXNet's *_update): one pass over each parameter. Inputs weight,
-- grad, states...; outputs the new weight and states. Pass out={weight, states...} to
-- update in place (gluon.Trainer does). g' below is the preprocessed gradient.
local UPD = { { "lr", "float", 0.01, doc = "learning rate" },
  { "wd", "float", 0, doc = "weight decay" },
  { "rescale_grad", "float", 1, doc = "gradient scale (1/batch_size in Trainer)" },
  { "clip_gradient", "float", -1, doc = "clip the rescaled gradient to [-c, c]; < 0: off" } }
local function upd_params(extra)
  local t = {}
  for _, p in ipairs(UPD) do t[#t + 1] = p end
  for _, p in ipairs(extra or {}) do t[#t + 1] = p end
  return t
end
local function update_op(name, inputs, extra, doc)
  local outputs, inplace = { "weight_out" }, { { 1, 1 } }
  for i = 3, #inputs do
    outputs[#outputs + 1] = inputs[i] .. "_out"
    inplace[#inplace + 1] = { #outputs, i } -- each state is updated where it is
  end
  op { name = name, family = "optimizer", inputs = inputs, outputs = outputs, infer = "update",
    dtypes = "float", cpu = true, nondiff = true, params = upd_params(extra), doc = doc,
    inplace = inplace }
end
update_op("sgd_update", { "weight", "grad" }, nil,
  "SGD step: w -= lr * (clip(rescale_grad*grad) + wd*w).")
update_op("sgd_mom_update", { "weight", "grad", "mom" },
  { { "momentum", "float", 0, doc = "momentum" } },
  "SGD with momentum: mom = momentum*mom - lr*(clip(rescale_grad*grad) + wd*w); w += mom.")
update_op("nag_mom_update", { "weight", "grad", "mom" },
  { { "momentum", "float", 0, doc = "momentum" } },
  "Nesterov momentum: g' = clip(rescale_grad*grad) + wd*w; mom = momentum*mom - lr*g'; "
    .. "w += momentum*mom - lr*g'.")
update_op("adam_update", { "weight", "grad", "mean", "var" },
  { { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "epsilon", "float", 1e-8 } },
  "Adam step (lr already bias-corrected by the caller): g' = clip(rescale_grad*grad + wd*w); "
    .. "mean = beta1*mean + (1-beta1)*g'; var = beta2*var + (1-beta2)*g'^2; "
    .. "w -= lr*mean/(sqrt(var) + epsilon).")
update_op("adamw_update", { "weight", "grad", "mean", "var" },
  { { "beta1", "float", 0.9 }, { "beta2", "float", 0.999 }, { "epsilon", "float", 1e-8 },
    { "eta", "float", 1, doc = "schedule multiplier" } },
  "AdamW step (decoupled weight decay): g' = clip(rescale_grad*grad); mean, var as Adam; "
    .. "w -= eta*(lr*mean/(sqrt(var) + epsilon) + wd*w).")
update_op("rmsprop_update", { "weight", "grad", "n" },
  { { "rho", "float", 0.95 }, { "epsilon", "float", 1e-8 },
    { "clip_weights", "float", -1, doc = "clip weights to [-c, c]; < 0: off" } },
  "RMSProp (Tieleman & Hinton): g' = clip(rescale_grad*grad + wd*w); n = rho*n + (1-rho)*g'^2; "
    .. "w -= lr*g'/sqrt(n + epsilon).")
update_op("rmspropalex_update", { "weight", "grad", "n", "g", "delta" },
  { { "rho", "float", 0.95 }, { "momentum", "float", 0.9 }, { "epsilon", "float", 1e-8 },
    { "clip_weights", "float", -1, doc = "clip weights to [-c, c]; < 0: off" } },
  "Centered RMSProp (Graves 2013): g' = clip(rescale_grad*grad + wd*w); n = rho*n + "
    .. "(1-rho)*g'^2; g = rho*g + (1-rho)*g'; delta = momentum*delta - lr*g'/sqrt(n - g^2 + "
    .. "epsilon); w += delta.")
update_op("adagrad_update", { "weight", "grad", "history" },
  { { "epsilon", "float", 1e-7 } },
  "AdaGrad: g' = clip(rescale_grad*grad) + wd*w; history += g'^2; "
    .. "w -= lr*g'/(sqrt(history) + epsilon).")

---------------------------------------------------------------- nn (owner: gl)
op { name = "dropout", family = "nn", inputs = { "data" }, outputs = { "out", "mask" },
  infer = "dropout", dtypes = "float", cpu = true, train_flag = "training",
  params = { { "p", "float", 0.5, doc = "drop probability" },
    { "mode", "enum", "training", values = { "training", "always" },
      doc = "training: drop only in train mode; always: also at inference" },
    { "axes", "axes", nil, doc = "axes along which the mask is shared (variational dropout)" },
    { "training", "bool", false, doc = "train mode (filled from mx.autograd's flag)" } },
  random = true,
  grad = function(F, x, y, g) return { F.mul(g[1], y[2]) } end,
  doc = "Inverted dropout: zeroes each element with probability p and scales the kept ones "
    .. "by 1/(1-p) in train mode; the identity otherwise. Second output: the mask (kept "
    .. "1/(1-p), dropped 0), reproducible under mx.random.seed." }
op { name = "activation", family = "nn", inputs = { "data" }, infer = "same_float",
  dtypes = "float",
  params = { { "act_type", "enum", "relu",
    values = { "relu", "sigmoid", "tanh", "softrelu", "softsign" } } },
  grad = function(F, x, y, g, p)
    local t = p and p.act_type or "relu"
    if t == "relu" then return { F.relu_backward(g[1], x[1]) } end
    local d
    if t == "sigmoid" then d = F.mul(y[1], F.rsub_scalar(y[1], { scalar = 1 }))
    elseif t == "tanh" then d = F.rsub_scalar(F.square(y[1]), { scalar = 1 })
    elseif t == "softrelu" then d = F.sigmoid(x[1])
    else d = F.rdiv_scalar(F.square(F.add_scalar(F.abs(x[1]), { scalar = 1 })), { scalar = 1 })
    end
    return { F.mul(g[1], d) }
  end,
  doc = "MXNet's Activation: act_type relu, sigmoid, tanh, softrelu (log(1+e^x), stable) "
    .. "or softsign (x/(1+|x|))." }

---------------------------------------------------------------- shape (owner: la)
-- Slice bounds are `index` params: 1-based inclusive in Lua, converted once in
-- nd.lua (fill_params) to C's 0-based exclusive form, where -2^63 stands for a
-- bound left out (MXNet's None). Lists may be shorter than ndim: later axes whole.
local SLICE = { { "begin", "ints", nil, index = "begin", doc = "first index per axis (1-based)" },
  { "end", "ints", nil, index = "end", doc = "last index per axis, inclusive" },
  { "step", "ints", nil, index = "step", doc = "step per axis (default 1; may be negative)" } }
local function layout(name, infer, params, grad, doc, extra)
  local t = { name = name, family = "shape", inputs = { "data" }, infer = infer, cpu = true,
    params = params, grad = grad, nondiff = grad == nil or nil, doc = doc }
  for k, v in pairs(extra or {}) do t[k] = v end
  op(t)
end
local function like(F, x, y, g) return { F.reshape_like(g[1], x[1]) } end

layout("reshape", "reshape", { { "shape", "shape", {}, doc = "new shape; MXNet codes 0 -1 -2 -3 -4" },
  { "reverse", "bool", false, doc = "match the special codes from the right" } }, like,
  "The data with a new shape (same size). MXNet's codes: 0 copies a dim, -1 infers one, -2 "
  .. "copies the rest, -3 merges two dims, -4 splits one. Eager calls are views when possible.",
  { view = true })
op { name = "reshape_like", family = "shape", inputs = { "lhs", "rhs" }, infer = "reshape_like",
  cpu = true, grad = function(F, x, y, g) return { F.reshape_like(g[1], x[1]), F.zeros_like(x[2]) } end,
  doc = "lhs's data with rhs's shape (same number of elements)." }
layout("transpose", "transpose", { { "axes", "axes", nil, doc = "permutation (default: reverse)" } },
  function(F, x, y, g, p)
    local axes = p and p.axes
    if axes == nil or #axes == 0 then return { F.transpose(g[1]) } end
    local n, inv = #axes, {}
    for i = 1, n do
      local a = axes[i] < 0 and axes[i] + n + 1 or axes[i]
      inv[a] = i
    end
    return { F.transpose(g[1], { axes = inv }) }
  end, "Permutes the axes (default: reverses them). Copies.")
layout("swapaxes", "swapaxes", { { "dim1", "axis", 1 }, { "dim2", "axis", 1 } },
  function(F, x, y, g, p) return { F.swapaxes(g[1], p) } end, "Swaps two axes. Copies.")
layout("expand_dims", "expand_dims", { { "axis", "axis", nil, doc = "position of the new axis" } },
  like, "Inserts a size-1 axis at position axis of the result (negative: from the end).")
layout("squeeze", "squeeze", { { "axis", "axes", nil, doc = "axes to drop (default: all size-1)" } },
  like, "Removes size-1 axes (the given ones, which must have size 1, or all).")
layout("flatten", "flatten", {}, like, "MXNet's Flatten: (d1, d2*...*dk).")
op { name = "concat", family = "shape", inputs = { "data" }, variadic = true, infer = "concat",
  cpu = true, params = { { "dim", "axis", 2, doc = "axis to join along (MXNet's default 1 -> 2)" } },
  grad = function(F, x, y, g, p)
    local dim = (p and p.dim) or 2
    local r, off = {}, 0
    for i = 1, #x do
      local n = x[i]:shape()[dim < 0 and x[i]:ndim() + dim + 1 or dim]
      r[i] = F.slice_axis(g[1], { axis = dim, begin = off + 1, ["end"] = off + n })
      off = off + n
    end
    return r
  end, doc = "Joins tensors along an existing axis (other dims must match)." }
op { name = "stack", family = "shape", inputs = { "data" }, variadic = true, infer = "stack",
  cpu = true, params = { { "axis", "axis", 1, doc = "position of the new axis" } },
  grad = function(F, x, y, g, p)
    local axis = (p and p.axis) or 1
    local r = {}
    for i = 1, #x do
      r[i] = F.squeeze(F.slice_axis(g[1], { axis = axis, begin = i, ["end"] = i }), { axis = axis })
    end
    return r
  end, doc = "Joins same-shaped tensors along a new axis." }
-- split: as many outputs as num_outputs says (the op table's `num_outputs`); the pieces'
-- gradients join back through concat (backward gives outputs without a gradient zeros).
op { name = "split", family = "shape", inputs = { "data" }, infer = "split", cpu = true,
  num_outputs = "num_outputs", mxnet = { "split", "SliceChannel" },
  params = { { "num_outputs", "int", nil, doc = "number of equal pieces (required, 1..64)" },
    { "axis", "axis", 2, doc = "axis to cut (MXNet's default 1 -> 2)" },
    { "squeeze_axis", "bool", false, doc = "drop the axis from the pieces (which must have size 1 there)" } },
  grad = function(F, x, y, g, p)
    local axis = p.axis or 2
    if axis < 0 then axis = x[1]:ndim() + axis + 1 end
    local parts = {}
    for k = 1, #y do
      parts[k] = p.squeeze_axis and F.expand_dims(g[k], { axis = axis }) or g[k]
    end
    return { F.concat(parts, { dim = axis }) }
  end,
  doc = "MXNet's split/SliceChannel: num_outputs equal pieces of data along axis (its size must "
    .. "divide evenly); squeeze_axis drops the axis when the pieces have size 1 there. Returns "
    .. "num_outputs tensors (out= takes a list of them)." }
layout("slice", "slice", SLICE, function(F, x, y, g, p)
  p = p or {}
  return { F.slice_assign(F.zeros_like(x[1]), g[1], { begin = p.begin, ["end"] = p["end"],
    step = p.step }) }
end, "A copy of a box: begin/end are 1-based inclusive per axis (negative from the end, false "
  .. "or a shorter list: the whole axis), step may be negative. Out-of-range bounds clamp.")
layout("slice_axis", "slice_axis", { { "axis", "axis", 1 },
  { "begin", "int", 1, index = "begin", doc = "first index (1-based)" },
  { "end", "int", nil, index = "end", doc = "last index, inclusive (default: the last)" } },
  function(F, x, y, g, p)
    p = p or {}
    local n, axis = x[1]:ndim(), p.axis or 1
    if axis < 0 then axis = n + axis + 1 end
    local b, e = {}, {}
    for d = 1, axis - 1 do b[d], e[d] = false, false end
    b[axis], e[axis] = p.begin or 1, p["end"] or -1
    return { F.slice_assign(F.zeros_like(x[1]), g[1], { begin = b, ["end"] = e }) }
  end, "The range begin..end (1-based, inclusive) of one axis.")
op { name = "slice_assign", family = "shape", inputs = { "data", "value" }, infer = "slice_assign",
  cpu = true, params = SLICE,
  grad = function(F, x, y, g, p)
    p = p or {}
    local box = { begin = p.begin, ["end"] = p["end"], step = p.step }
    local gd = F.slice_assign_scalar(g[1], { scalar = 0, begin = p.begin, ["end"] = p["end"],
      step = p.step })
    return { gd, F.reduce_to(F.slice(g[1], box), x[2]) }
  end,
  doc = "A copy of data with the box (as in slice) replaced by value, broadcast to the box. "
    .. "With out=data it updates data in place (x[{...}] = v)." }
op { name = "slice_assign_scalar", family = "shape", inputs = { "data" },
  infer = "slice_assign_scalar", cpu = true,
  params = { { "scalar", "float", 0 }, SLICE[1], SLICE[2], SLICE[3] },
  grad = function(F, x, y, g, p)
    p = p or {}
    return { F.slice_assign_scalar(g[1], { scalar = 0, begin = p.begin, ["end"] = p["end"],
      step = p.step }) }
  end, doc = "A copy of data with the box (as in slice) set to scalar." }
layout("tile", "tile", { { "reps", "ints", {}, doc = "repetitions per axis (NumPy alignment)" } },
  function(F, x, y, g, p)
    local xs, reps = x[1]:shape(), (p and p.reps) or {}
    if type(reps) == "number" then reps = { reps } end
    local n = math.max(#xs, #reps)
    local split, axes = {}, {}
    for i = 1, n do
      local ix, ir = i - (n - #xs), i - (n - #reps)
      split[#split + 1] = ir >= 1 and reps[ir] or 1
      axes[#axes + 1] = #split
      split[#split + 1] = ix >= 1 and xs[ix] or 1
    end
    local s = F.sum(F.reshape(g[1], { shape = split }), { axis = axes })
    return { F.reshape_like(s, x[1]) }
  end, "Repeats the whole tensor reps[i] times along axis i (NumPy's tile).")
layout("repeat", "repeat", { { "repeats", "int", 1 }, { "axis", "axis", nil } },
  function(F, x, y, g, p)
    p = p or {}
    local r, xs = p.repeats or 1, x[1]:shape()
    local split, axis = {}, nil
    if p.axis == nil then
      split, axis = { x[1]:size(), r }, 2
    else
      local a = p.axis < 0 and #xs + p.axis + 1 or p.axis
      for d = 1, #xs do
        split[#split + 1] = xs[d]
        if d == a then split[#split + 1] = r axis = #split end
      end
    end
    local s = F.sum(F.reshape(g[1], { shape = split }), { axis = axis })
    return { F.reshape_like(s, x[1]) }
  end, "Repeats each element `repeats` times along axis (no axis: of the flattened data). "
  .. "`repeat` is a Lua keyword: call it as mx.nd[\"repeat\"](x, {...}) or x:repeat_(...).")
layout("flip", "flip", { { "axis", "axes", nil, doc = "axes to reverse (default: all)" } },
  function(F, x, y, g, p) return { F.flip(g[1], p) } end, "Reverses the order along axes.")
layout("cast", "cast", { { "dtype", "dtype", nil, doc = "target dtype (required)" } },
  function(F, x, y, g) return { F.cast(g[1], { dtype = x[1]:dtype() }) } end,
  "The data converted to dtype (x:astype(dtype)); float->int truncates toward zero.",
  { dtypes = "all" })
layout("copy", "same", {}, function(F, x, y, g) return { g[1] } end, "A new copy of the data.")

---------------------------------------------------------------- indexing (owner: la)
-- Index tensors hold 1-based positions (docs/ops-notes.md), any numeric dtype.
op { name = "pick", family = "indexing", inputs = { "data", "index" }, infer = "pick",
  dtypes = "numeric",
  params = { { "axis", "axis", -1 }, { "keepdims", "bool", false },
    { "mode", "enum", "clip", values = { "clip", "wrap" } } },
  grad = function(F, x, y, g, p)
    return { F.pick_backward(x[1], x[2], g[1], p), F.zeros_like(x[2]) }
  end,
  doc = "Picks one element along axis per position: out[..] = data[.., index[..], ..] with "
    .. "1-based index values (index has data's shape without axis). mode clip clamps, wrap "
    .. "wraps out-of-range positions." }
op { name = "pick_backward", family = "indexing", inputs = { "data", "index", "ograd" },
  infer = "pick_backward", dtypes = "numeric",
  params = { { "axis", "axis", -1 }, { "keepdims", "bool", false },
    { "mode", "enum", "clip", values = { "clip", "wrap" } } },
  nondiff = true, doc = "pick's gradient: zeros of data's shape with ograd at the picked positions." }
op { name = "take", family = "indexing", inputs = { "data", "indices" }, infer = "take",
  dtypes = "numeric", cpu = true,
  params = { { "axis", "axis", 1 }, { "mode", "enum", "clip", values = { "clip", "wrap", "raise" } } },
  grad = function(F, x, y, g, p)
    return { F.take_backward(x[1], x[2], g[1], p), F.zeros_like(x[2]) }
  end,
  doc = "Takes slices along axis at 1-based positions: shape data[:axis] + indices + "
    .. "data[axis+1:] (Embedding's lookup). mode clip/wrap/raise for out-of-range positions." }
op { name = "take_backward", family = "indexing", inputs = { "data", "indices", "ograd" },
  infer = "take_backward", dtypes = "numeric", cpu = true,
  params = { { "axis", "axis", 1 }, { "mode", "enum", "clip", values = { "clip", "wrap", "raise" } } },
  nondiff = true, doc = "take's gradient: ograd slices summed into zeros of data's shape." }
op { name = "one_hot", family = "indexing", inputs = { "indices" }, infer = "one_hot",
  dtypes = "numeric", nondiff = true,
  params = { { "depth", "int", 0 }, { "on_value", "float", 1 }, { "off_value", "float", 0 },
    { "dtype", "dtype", 0 } },
  doc = "indices.shape + (depth): on_value at the 1-based position each index names, "
    .. "off_value elsewhere (out-of-range positions: all off)." }

---------------------------------------------------------------- image (owner: data)
op { name = "to_tensor", family = "image", inputs = { "data" }, infer = "to_tensor",
  dtypes = { 0, 3 }, nondiff = true, cpu = true,
  doc = "MXNet's image.to_tensor: an image (H, W, C) or a batch (N, H, W, C) of uint8 in "
    .. "[0, 255] (or float32) to float32 (C, H, W) / (N, C, H, W) divided by 255 (each value "
    .. "the float32 nearest v / 255). gluon.data.vision.transforms.ToTensor runs it." }

---------------------------------------------------------------- MXNet names
-- MXNet 1.9's operator names of each op whose semantics match (symbol JSON maps both
-- ways; mx_op_find takes them). Kept in one place so the list can be read against MXNet's
-- registry. Every param's MXNet attribute name equals its luamx name (num_hidden, act_type,
-- dim, dim1/dim2, a_min/a_max, repeats, reps, begin/end/step, keepdims, ...), so no param
-- carries `mxnet = "..."` today; MXNet's axis values are 0-based, which is what the C
-- structs hold. Not mapped because the semantics differ (docs/c-api.md): argmax, argmin,
-- pick, take, one_hot (1-based index values here), broadcast_like (axis vs lhs_axes/
-- rhs_axes), reduce_to, matmul, softrelu, relu_backward, pick_backward, take_backward,
-- full_like, random_bernoulli and the optimizer updates (input order and state layout
-- are luamx's own).
local MXNET = {
  zeros = { "_zeros" }, ones = { "_ones" }, full = { "_full" }, arange = { "_arange" },
  linspace = { "_linspace" }, eye = { "_eye" },
  random_uniform = { "_random_uniform", "uniform" }, random_normal = { "_random_normal", "normal" },
  random_randint = { "_random_randint" }, random_uniform_like = { "_random_uniform_like" },
  random_normal_like = { "_random_normal_like" },
  neg = { "negative" }, abs = { "abs" }, sign = { "sign" }, exp = { "exp" }, log = { "log" },
  sqrt = { "sqrt" }, square = { "square" }, tanh = { "tanh" }, sigmoid = { "sigmoid" },
  relu = { "relu" }, sin = { "sin" }, cos = { "cos" }, log1p = { "log1p" }, expm1 = { "expm1" },
  reciprocal = { "reciprocal" }, rsqrt = { "rsqrt" }, softsign = { "softsign" }, erf = { "erf" },
  floor = { "floor" }, ceil = { "ceil" }, round = { "round" }, trunc = { "trunc" },
  logical_not = { "logical_not" },
  add = { "elemwise_add", "broadcast_add", "broadcast_plus", "_plus", "_add" },
  sub = { "elemwise_sub", "broadcast_sub", "broadcast_minus", "_minus", "_sub" },
  mul = { "elemwise_mul", "broadcast_mul", "_mul" },
  div = { "elemwise_div", "broadcast_div", "_div" },
  pow = { "broadcast_power", "_power" },
  maximum = { "broadcast_maximum", "_maximum" }, minimum = { "broadcast_minimum", "_minimum" },
  equal = { "broadcast_equal", "_equal" }, not_equal = { "broadcast_not_equal", "_not_equal" },
  greater = { "broadcast_greater", "_greater" },
  greater_equal = { "broadcast_greater_equal", "_greater_equal" },
  lesser = { "broadcast_lesser", "_lesser" }, lesser_equal = { "broadcast_lesser_equal", "_lesser_equal" },
  add_scalar = { "_plus_scalar" }, sub_scalar = { "_minus_scalar" }, rsub_scalar = { "_rminus_scalar" },
  mul_scalar = { "_mul_scalar" }, div_scalar = { "_div_scalar" }, rdiv_scalar = { "_rdiv_scalar" },
  pow_scalar = { "_power_scalar" }, rpow_scalar = { "_rpower_scalar" },
  maximum_scalar = { "_maximum_scalar" }, minimum_scalar = { "_minimum_scalar" },
  equal_scalar = { "_equal_scalar" }, not_equal_scalar = { "_not_equal_scalar" },
  greater_scalar = { "_greater_scalar" }, greater_equal_scalar = { "_greater_equal_scalar" },
  lesser_scalar = { "_lesser_scalar" }, lesser_equal_scalar = { "_lesser_equal_scalar" },
  clip = { "clip" }, where = { "where" }, broadcast_to = { "broadcast_to" },
  sum = { "sum" }, mean = { "mean" }, prod = { "prod" }, max = { "max" }, min = { "min" },
  norm = { "norm" },
  softmax = { "softmax" }, log_softmax = { "log_softmax" },
  stop_gradient = { "BlockGrad" },
  dot = { "dot" }, batch_dot = { "batch_dot" },
  fully_connected = { "FullyConnected" },
  dropout = { "Dropout" }, activation = { "Activation" },
  reshape = { "Reshape" }, reshape_like = { "reshape_like" }, transpose = { "transpose" },
  swapaxes = { "SwapAxis" }, expand_dims = { "expand_dims" }, squeeze = { "squeeze" },
  flatten = { "Flatten" }, concat = { "Concat", "concatenate" }, stack = { "stack" },
  slice = { "slice", "crop" }, slice_axis = { "slice_axis" },
  slice_assign = { "_slice_assign" }, slice_assign_scalar = { "_slice_assign_scalar" },
  tile = { "tile" }, ["repeat"] = { "repeat" }, flip = { "reverse" }, cast = { "Cast" },
  copy = { "_copy", "identity" }, to_tensor = { "_image_to_tensor" },
}
for _, o in ipairs(ops) do
  if MXNET[o.name] then
    assert(not o.mxnet, "op " .. o.name .. ": MXNet names given twice")
    o.mxnet = MXNET[o.name]
  end
end

return ops
