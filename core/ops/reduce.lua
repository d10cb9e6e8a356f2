-- core/ops/reduce.lua — the reductions: the op table's reduce family
-- (kernels/*/reduce.c and spec/reduce_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

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

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  sum = { "sum" }, mean = { "mean" }, prod = { "prod" }, max = { "max" }, min = { "min" },
  norm = { "norm" },
}

return ops, MXNET
