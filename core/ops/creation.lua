-- core/ops/creation.lua — the creation ops (zeros, arange, eye, *_like...): the op table's creation family
-- (kernels/*/creation.c and spec/creation_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
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
-- creation ops whose values come from params; `positional` lists the
-- params mx.nd's wrapper fills from leading numbers: mx.nd.arange(0, 10, 2).
op { name = "arange", family = "creation", ctx = true, infer = "arange", nondiff = true,
  positional = { "start", "stop", "step" },
  params = { { "start", "float", 0 }, { "stop", "float", nil }, { "step", "float", 1 },
    { "repeat", "int", 1 }, { "dtype", "dtype", 0 },
    { "infer_range", "bool", false, doc = "MXNet's attribute, accepted when false (its "
      .. "deprecated true takes stop from the graph)" } },
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
    cpu = true, nondiff = true, params = params, doc = doc, shape_only = { 1 } }
  for k, v in pairs(extra or {}) do t[k] = v end
  op(t)
end
like_op("zeros_like", nil, "Zeros with data's shape, dtype and device.")
like_op("ones_like", nil, "Ones with data's shape, dtype and device.")
like_op("full_like", { { "value", "float", 0 } }, "`value` with data's shape, dtype and device.")

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  zeros = { "_zeros" }, ones = { "_ones" }, full = { "_full" }, arange = { "_arange" },
  linspace = { "_linspace" }, eye = { "_eye" },
}

return ops, MXNET
