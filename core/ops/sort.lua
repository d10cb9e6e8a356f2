-- core/ops/sort.lua — sorting: sort, argsort, topk (+ sort_backward, their value
-- gradient): the op table's sort family (kernels/*/sort.c and spec/sort_spec.lua share
-- the base name). core/ops/optable.lua joins the families in op order and documents every
-- field. Order: stable in both directions (ties keep their input order, as MXNet's CPU
-- std::stable_sort); NaN counts as larger than every number (last ascending, as NumPy's
-- sort; first descending). Index outputs are 1-based like argmax (docs/ops-notes.md) and
-- int64 by default (MXNet: 0-based float32).
local ops = {}
local function op(t) ops[#ops + 1] = t end

local AXIS = { "axis", "axis", -1, doc = "the axis to sort along (1-based; -1 the last)" }
local IDX_DTYPES = "index dtype: int64 (default), int32, float32 or float64; values are 1-based"

-- The gradient of a value output: ograd scattered back to the positions the values came
-- from (sort_backward); idx: those positions (1-based, along p.axis).
local function scatter(F, x, idx, g, p)
  return F.sort_backward(x, idx, g, { axis = p.axis })
end

op { name = "sort", family = "sort", inputs = { "data" }, infer = "sort", dtypes = "numeric",
  cpu = true,
  params = { AXIS, { "is_ascend", "bool", true, doc = "ascending (default) or descending" } },
  grad = function(F, x, _, g, p)
    local idx = F.argsort(x[1], { axis = p.axis, is_ascend = p.is_ascend })
    return { scatter(F, x[1], idx, g[1], p) }
  end,
  doc = "Sorts data along axis (stable; NaN last ascending, first descending)." }
op { name = "argsort", family = "sort", inputs = { "data" }, infer = "argsort",
  dtypes = "numeric", cpu = true, nondiff = true,
  params = { AXIS, { "is_ascend", "bool", true, doc = "ascending (default) or descending" },
    { "dtype", "dtype", 6, doc = IDX_DTYPES } },
  doc = "1-based positions that sort data along axis (stable; NaN last ascending, first "
    .. "descending); int64 by default (MXNet: 0-based float32). See docs/ops-notes.md." }
-- topk's output count depends on ret_typ ("both": value and indices): mx_nout_topk
-- (core/ops/sort.c), the op table's `nout`.
op { name = "topk", family = "sort", inputs = { "data" }, outputs = { "out", "indices" },
  infer = "topk", dtypes = "numeric", cpu = true, nout = "topk", nout_by = "ret_typ",
  params = { AXIS, { "k", "int", 1, doc = "how many; k < 1: all of the axis (MXNet's rule)" },
    { "ret_typ", "enum", "indices", values = { "value", "indices", "mask", "both" },
      doc = "value: the k values; indices: their 1-based positions; mask: data's shape, 1 at "
        .. "the picked positions; both: value and indices (two outputs)" },
    { "is_ascend", "bool", false, doc = "false (default): the k largest; true: the k smallest" },
    { "dtype", "dtype", 6, doc = IDX_DTYPES } },
  grad = function(F, x, y, g, p)
    local rt = p.ret_typ or "indices"
    if rt ~= "value" and rt ~= "both" then return {} end -- indices and mask: constants
    local idx = rt == "both" and y[2] or F.topk(x[1], { axis = p.axis, k = p.k,
      ret_typ = "indices", is_ascend = p.is_ascend })
    return { scatter(F, x[1], idx, g[1], p) }
  end,
  doc = "The k largest (is_ascend=false, default) or smallest values along axis, in that "
    .. "order (ties: the earlier first; NaN is the largest). ret_typ indices (default, "
    .. "1-based, int64 by default), value, mask or both (value, indices)." }
op { name = "sort_backward", family = "sort", inputs = { "data", "indices", "ograd" },
  infer = "sort_backward", dtypes = "numeric", nondiff = true,
  params = { AXIS },
  doc = "sort/topk's gradient: zeros of data's shape with ograd added at the 1-based "
    .. "positions indices gives along axis (indices and ograd: data's shape but the axis)." }

-- MXNet 1.9's operator names whose semantics match: only sort (argsort and topk give
-- 0-based float32 indices there, 1-based int64 here).
local MXNET = { sort = { "sort" } }

return ops, MXNET
