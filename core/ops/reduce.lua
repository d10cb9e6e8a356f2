-- core/ops/reduce.lua — the reductions: the op table's reduce family
-- (kernels/*/reduce.c and spec/reduce_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- reductions
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
end, "Sum over axes. Integer inputs keep their dtype and wrap on overflow (accumulated "
  .. "exactly, as MXNet accumulates in the dtype).")
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
end, "L2 (ord=2, default) or L1 (ord=1) norm over axes; integer inputs give float32. NaN "
  .. "propagates, an infinite element gives inf; L2 is scaled by the largest |x| (as MXNet's "
  .. "nrm2), so huge or tiny float64 values neither overflow nor underflow.", nparams)
op { name = "reduce_to", family = "reduce", cpu = true, inputs = { "data", "like" }, infer = "reduce_to",
  dnnl = { supports = true, out_layout = true, layouts = { "onednn" } },
  shape_only = { 2 },
  dtypes = "numeric",
  params = { { "axis", "axes", nil, doc = "data's axes that like lacks; omitted: like is "
    .. "right-aligned" } },
  grad = function(F, x, y, g, p)
    return { F.broadcast_like(g[1], x[1], { axis = p and p.axis }), nil }
  end,
  doc = "Sums data over the axes along which like (shape-wise) was broadcast, giving like's "
    .. "shape: the gradient of a broadcasting op. Keeps data's dtype." }

---------------------------------------------------------------- nan-reductions, cumsum, moments
-- nansum/nanprod: x's non-NaN elements take sum's/prod's gradient, NaN ones zero
local function notnan(F, x) return F.equal(x, x) end
reduction("nansum", "reduce", function(F, x, y, g, p)
  return { F.mul(F.broadcast_like(g[1], x[1], rax(p)), notnan(F, x[1])) }
end, "Sum over axes treating NaN as 0 (MXNet's nansum); an all-NaN extent gives 0. Integer "
  .. "inputs (no NaN) sum like sum.")
reduction("nanprod", "reduce", function(F, x, y, g, p)
  local m = notnan(F, x[1])
  local q = F.div(F.broadcast_like(F.mul(g[1], y[1]), x[1], rax(p)), x[1])
  return { F.where(m, q, F.zeros_like(q)) }
end, "Product over axes treating NaN as 1 (MXNet's nanprod); an all-NaN extent gives 1. The "
  .. "gradient y/x assumes no zeros, as prod's; NaN elements get 0.")
op { name = "cumsum", family = "reduce", cpu = true, inputs = { "data" }, infer = "cumsum",
  dtypes = "numeric",
  params = { { "axis", "axis", nil, doc = "the axis (1-based, negative from the end); omitted: "
    .. "the flattened input" },
    { "dtype", "dtype", nil, doc = "result dtype (accumulated in it); omitted: data's" } },
  grad = function(F, x, y, g, p)
    -- the reverse cumulative sum along the axis (the flattened one without axis)
    local ax = p.axis or 1
    local r = F.flip(F.cumsum(F.flip(g[1], { axis = ax }), { axis = ax }), { axis = ax })
    if p.axis == nil then r = F.reshape_like(r, x[1]) end
    if p.dtype ~= nil then r = F.cast(r, { dtype = x[1]:dtype() }) end
    return { r }
  end,
  doc = "Cumulative sum along axis (MXNet's np-style cumsum): same shape as data, or 1-D over "
    .. "the flattened data without axis. dtype: the result's dtype (default data's); integer "
    .. "sums wrap like sum's." }
op { name = "moments", family = "reduce", inputs = { "data" }, outputs = { "mean", "var" },
  infer = "moments", dtypes = "float",
  params = { { "axes", "axes", nil, doc = "axes to reduce (1-based, negative from the end); "
    .. "omitted: all" }, { "keepdims", "bool", false, doc = "keep reduced axes as size 1" } },
  grad = function(F, x, y, g, p)
    local r = { axis = not p.keepdims and p.axes or nil }
    local n = x[1]:size() / math.max(y[1]:size(), 1)
    -- d mean = gm / n; d var = gv * 2 (x - mean) / n
    local d = F.sub(x[1], F.broadcast_like(y[1], x[1], r))
    local gv = F.mul(F.broadcast_like(g[2], x[1], r), F.mul_scalar(d, { scalar = 2 / n }))
    return { F.add(F.div_scalar(F.broadcast_like(g[1], x[1], r), { scalar = n }), gv) }
  end,
  doc = "Mean and (population) variance over axes (MXNet's moments): two outputs of the "
    .. "reduced shape and data's dtype; an empty extent gives NaN." }

---------------------------------------------------------------- any, all
-- MXNet np semantics (np.any/np.all): bool output, nonzero (NaN included) counts as true;
-- the empty extent gives any=false, all=true. No gradient (a boolean result).
local function logical_reduction(name, doc)
  op { name = name, family = "reduce", inputs = { "data" }, infer = "reduce_bool",
    dtypes = "all", cpu = true, params = raxes(), nondiff = true, doc = doc }
end
logical_reduction("any", "True where any element over axes is nonzero (NaN counts as "
  .. "nonzero), as MXNet's np.any: a bool result; an empty extent gives false.")
logical_reduction("all", "True where every element over axes is nonzero (NaN counts as "
  .. "nonzero), as MXNet's np.all: a bool result; an empty extent gives true.")

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  sum = { "sum" }, mean = { "mean" }, prod = { "prod" }, max = { "max" }, min = { "min" },
  norm = { "norm" }, nansum = { "nansum" }, nanprod = { "nanprod" },
  cumsum = { "_np_cumsum", "cumsum" }, moments = { "moments" },
  any = { "_np_any" }, all = { "_np_all" },
}

return ops, MXNET
