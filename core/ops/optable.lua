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
--   grad      function(F, inputs, outputs, ograds, p) -> { dinput1, ... } written in
--             terms of other ops through F (mx.nd eagerly, mx.sym symbolically);
--             p holds the op's params as the Lua caller gave them (1-based axes)
--   nondiff   true instead of grad: the op has no gradient (argmax, comparisons...)
--   doc       one paragraph, shown by mx.help and docs/ops.md
local ops = {}
local function op(t) ops[#ops + 1] = t end

local CREATION = { { "shape", "shape", {} }, { "dtype", "dtype", 0 } }

---------------------------------------------------------------- creation
op { name = "zeros", family = "creation", ctx = true, params = CREATION, infer = "creation",
  nondiff = true, cuda = true, doc = "A new tensor filled with zeros." }
op { name = "ones", family = "creation", ctx = true, params = CREATION, infer = "creation",
  nondiff = true, cuda = true, doc = "A new tensor filled with ones." }
op { name = "full", family = "creation", ctx = true, infer = "creation", nondiff = true, cuda = true,
  params = { { "shape", "shape", {} }, { "dtype", "dtype", 0 }, { "value", "float", 0 } },
  doc = "A new tensor filled with `value`." }

---------------------------------------------------------------- elementwise unary
local function unary(name, infer, grad, doc, dtypes)
  op { name = name, family = "elemwise", inputs = { "data" }, infer = infer, cuda = true,
    dtypes = dtypes or "numeric", grad = grad, nondiff = grad == nil or nil, doc = doc }
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
  return { F.mul(g[1], F.greater_scalar(x[1], { scalar = 0 })) }
end, "Elementwise max(x, 0).")

---------------------------------------------------------------- elementwise binary
local function binary(name, scalar, grad, doc, infer)
  op { name = name, family = "elemwise", inputs = { "lhs", "rhs" }, infer = infer or "broadcast",
    dtypes = "numeric", cuda = true, scalar = scalar, grad = grad, nondiff = grad == nil or nil,
    doc = doc .. " Broadcasts like NumPy; dtypes promote." }
end
local function scalar_op(name, grad, doc)
  op { name = name, family = "elemwise", inputs = { "data" }, infer = "same", dtypes = "numeric",
    cuda = true, params = { { "scalar", "float", 0 } }, grad = grad,
    nondiff = grad == nil or nil, doc = doc .. " The result keeps the tensor's dtype." }
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

return ops
