-- core/ops/sparse.lua — sparse storage (row_sparse, csr): the op table's sparse family
-- (kernels/*/sparse*.c and spec/sparse_spec.lua share the base name). Its own ops
-- (cast_storage, sparse_retain, square_sum) and, in STYPES, the storage-type kernels it
-- gives ops of other families (dot, add, sum, the optimizer updates...): how dispatch
-- picks them, and the fallback to dense, are in core/ops/optable.lua's header and
-- docs/sparse.md. core/ops/optable.lua joins the families in op order.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- sparse
local STYPE = { "stype", "enum", "default", values = { "default", "row_sparse", "csr" },
  doc = "the storage type of the result" }
op { name = "cast_storage", family = "sparse", inputs = { "data" }, infer = "same",
  params = { STYPE },
  stypes = {
    { "dns -> rsp", kernel = "cast_storage_dns_rsp", applies = "to_rsp" },
    { "dns -> csr", kernel = "cast_storage_dns_csr", applies = "to_csr" },
    { "rsp -> dns", kernel = "cast_storage_rsp_dns", applies = "to_dns", cpu = { supports = true } },
    { "csr -> dns", kernel = "cast_storage_csr_dns", applies = "to_dns" },
    { "rsp -> rsp", kernel = "sparse_copy", applies = "to_rsp" },
    { "csr -> csr", kernel = "sparse_copy", applies = "to_csr" } },
  grad = function(F, x, y, g) return { F.copy(g[1]) } end,
  doc = "MXNet's cast_storage: the data in another storage type (default, row_sparse, csr). "
    .. "To row_sparse keeps the rows with a nonzero, to csr the nonzero entries (a NaN is "
    .. "nonzero); row_sparse <-> csr goes through dense." }
op { name = "sparse_retain", family = "sparse", inputs = { "data", "indices" },
  infer = "sparse_retain", promote = {},
  stypes = { { "rsp, dns -> rsp", kernel = "sparse_retain_rsp" } },
  grad = function(F, x, y, g) return { F.sparse_retain(g[1], x[2]) } end,
  doc = "MXNet's _sparse_retain: the rows of data whose 0-based ids are listed in indices "
    .. "(a 1-d integer tensor; ids outside the rows are an error), the others zero. A "
    .. "row_sparse data gives row_sparse." }
op { name = "square_sum", family = "sparse", inputs = { "data" }, infer = "reduce",
  dtypes = "numeric",
  params = { { "axis", "axes", nil, doc = "axes to reduce (1-based); omitted: all" },
    { "keepdims", "bool", false, doc = "keep reduced axes as size 1" } },
  stypes = { { "rsp -> rsp", kernel = "square_sum_rsp_rsp", applies = "square_sum_rows" },
    { "rsp -> dns", kernel = "square_sum_rsp_dns" } },
  grad = function(F, x, y, g, p)
    local ax = { axis = p and not p.keepdims and p.axis or nil }
    local gd = F.cast_storage(g[1]) -- a row_sparse head (axis 2, keepdims) broadcast dense
    return { F.mul(F.mul_scalar(x[1], { scalar = 2 }), F.broadcast_like(gd, x[1], ax)) }
  end,
  doc = "MXNet's _square_sum: sum(data^2) over axes. A row_sparse data summed along its "
    .. "second axis with keepdims (2-d) gives row_sparse (the stored rows' sums), otherwise "
    .. "dense." }

-- Storage-type kernels of other families' ops (core/ops/optable.lua joins them).
local SAME = "same_shape"
local function elemwise(name, mul)
  local e = {
    { "rsp, rsp -> rsp", kernel = name .. "_rsp_rsp", applies = SAME, cpu = { supports = true } },
    { "csr, csr -> csr", kernel = name .. "_csr_csr", applies = SAME, cpu = { supports = true } } }
  if mul then
    for _, s in ipairs { "csr, dns -> csr", "dns, csr -> csr", "rsp, dns -> rsp",
      "dns, rsp -> rsp" } do
      local a, b = s:match("^(%a+), (%a+)")
      e[#e + 1] = { s, kernel = name .. "_" .. a .. "_" .. b, applies = SAME }
    end
  else
    for _, s in ipairs { "rsp, dns -> dns", "dns, rsp -> dns", "csr, dns -> dns",
      "dns, csr -> dns" } do
      local a, b = s:match("^(%a+), (%a+)")
      e[#e + 1] = { s, kernel = name .. "_" .. a .. "_" .. b, applies = SAME }
    end
  end
  return e
end
local function keep(name)
  return { { "rsp -> rsp", kernel = name .. "_rsp" }, { "csr -> csr", kernel = name .. "_csr" } }
end
local function lazy(name, n)
  local ins, outs = { "dns", "rsp" }, { "dns" }
  for _ = 3, n do
    ins[#ins + 1] = "dns"
    outs[#outs + 1] = "dns"
  end
  return { { table.concat(ins, ", ") .. " -> " .. table.concat(outs, ", "),
    kernel = name .. "_lazy", cpu = { supports = true } } }
end
local STYPES = {
  dot = {
    { "csr, dns -> dns", kernel = "dot_csr_dns", applies = "dot_nn", cpu = { supports = true } },
    { "csr, dns -> rsp", kernel = "dot_csrt_dns", applies = "dot_tn", cpu = { supports = true } },
    { "csr, dns -> dns", kernel = "dot_csrt_dns_dns", applies = "dot_tn" },
    { "csr, rsp -> dns", kernel = "dot_csr_rsp", applies = "dot_nn" },
    { "dns, csr -> csr", kernel = "dot_dns_csr_csr", applies = "dot_nn" },
    { "dns, csr -> dns", kernel = "dot_dns_csr", applies = "dot_nn" } },
  add = elemwise("add"), sub = elemwise("sub"), mul = elemwise("mul", true),
  mul_scalar = keep("mul_scalar"), div_scalar = keep("div_scalar"), neg = keep("neg"),
  zeros_like = keep("zeros_like"),
  cast = { { "rsp -> rsp", kernel = "cast_rsp" }, { "csr -> csr", kernel = "cast_csr" } },
  copy = { { "rsp -> rsp", kernel = "sparse_copy" }, { "csr -> csr", kernel = "sparse_copy" },
    { "rsp -> dns", kernel = "cast_storage_rsp_dns", cpu = { supports = true } },
    { "csr -> dns", kernel = "cast_storage_csr_dns" } },
  sum = { { "csr -> dns", kernel = "sum_csr" }, { "rsp -> dns", kernel = "sum_rsp" } },
  mean = { { "csr -> dns", kernel = "mean_csr" }, { "rsp -> dns", kernel = "mean_rsp" } },
  where = { { "csr, dns, dns -> dns", kernel = "where_csr", applies = "where_same" } },
  -- the elementwise gradients' reduction to an operand's shape: nothing to reduce when
  -- the shapes agree (a sparse gradient of mul stays sparse)
  reduce_to = { { "rsp, rsp -> rsp", kernel = "sparse_copy", applies = SAME },
    { "rsp, dns -> rsp", kernel = "sparse_copy", applies = SAME },
    { "csr, csr -> csr", kernel = "sparse_copy", applies = SAME },
    { "csr, dns -> csr", kernel = "sparse_copy", applies = SAME } },
  slice = { { "csr -> csr", kernel = "slice_csr", applies = "slice_unit_step" } },
  embedding_backward = { { "dns, dns, dns -> rsp", kernel = "embedding_backward_rsp",
    applies = "sparse_grad", cpu = { supports = true } } },
  sgd_update = lazy("sgd_update", 2), sgd_mom_update = lazy("sgd_mom_update", 3),
  adam_update = lazy("adam_update", 4), adagrad_update = lazy("adagrad_update", 3),
}

local MXNET = { cast_storage = { "cast_storage" }, sparse_retain = { "_sparse_retain" },
  square_sum = { "_square_sum" } }

return ops, MXNET, STYPES
