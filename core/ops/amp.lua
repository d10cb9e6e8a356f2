-- core/ops/amp.lua — the casts automatic mixed precision inserts (mx.amp): the op table's
-- amp family (kernels/ref/amp.c, kernels/cpu/amp.c, spec/amp_spec.lua share the base
-- name). core/ops/optable.lua joins the families in op order and documents every field.
-- Both are MXNet 1.9's operators of the same names (symbol JSON maps them both ways).
local ops = {}
local function op(t) ops[#ops + 1] = t end

op { name = "amp_cast", family = "amp", inputs = { "data" }, infer = "amp_cast", cpu = true,
  dtypes = "all", amp = "safe",
  params = { { "dtype", "dtype", nil, doc = "target float dtype (required)" } },
  grad = function(F, x, y, g) return { F.amp_cast(g[1], { dtype = x[1]:dtype() }) } end,
  doc = "MXNet's amp_cast: a float input converted to dtype (round to nearest even); "
    .. "integer and bool inputs pass through unchanged. The gradient is cast back to the "
    .. "input's dtype. mx.amp inserts it in front of the ops its lists name." }
op { name = "amp_multicast", family = "amp", inputs = { "data" }, variadic = true,
  infer = "amp_multicast", cpu = true, dtypes = "all", amp = "safe",
  num_outputs = "num_outputs",
  params = { { "num_outputs", "int", nil, doc = "number of inputs (and outputs; required)" },
    { "cast_narrow", "bool", false, doc = "cast to the narrowest float dtype instead" } },
  grad = function(F, x, y, g)
    local r = {}
    for i = 1, #x do r[i] = F.amp_cast(g[i], { dtype = x[i]:dtype() }) end
    return r
  end,
  doc = "MXNet's amp_multicast: every float input cast to the widest float dtype among them "
    .. "(the narrowest with cast_narrow); integer inputs pass through. One output per input." }

local MXNET = { amp_cast = { "amp_cast" }, amp_multicast = { "amp_multicast" } }
return ops, MXNET
