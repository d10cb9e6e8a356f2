-- core/ops/softmax.lua — softmax and log_softmax: the op table's softmax family
-- (kernels/*/softmax.c and spec/softmax_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- softmax
local sparams = { { "axis", "axis", -1, doc = "the axis (1-based; -1 the last)" },
  { "temperature", "float", 1, doc = "divides the input first" } }
-- softmax and log_softmax take MXNet 1.9's optional `length` (data's shape without the
-- axis, read with use_length = true): the steps at and past a row's length are 0.
local lparams = { sparams[1], sparams[2], { "use_length", "bool", false, doc = "read the "
  .. "length input: each row's valid steps along the axis (integral values 0..n); the steps "
  .. "at and after it are 0" },
  { "dtype", "dtype", nil, doc = "the output's float dtype (MXNet's): mx.nd and mx.sym compute "
    .. "in it when it is at least as wide as the data's, else in the data's and cast (the "
    .. "kernels themselves take the data's dtype)" } }
op { name = "softmax", family = "softmax", cpu = true, inputs = { "data", "length?" },
  infer = "softmax_length", promote = { 1, float = true }, dtypes = "numeric", params = lparams,
  grad = function(F, x, y, g, p)
    -- y is 0 past a row's length, so the length needs nothing more here
    local ax, t = p and p.axis or -1, p and p.temperature or 1
    local s = F.sum(F.mul(g[1], y[1]), { axis = ax, keepdims = true })
    local d = F.mul(y[1], F.sub(g[1], s))
    if t ~= 1 then d = F.div_scalar(d, { scalar = t }) end
    return { d }
  end,
  doc = "exp(x/T) / sum(exp(x/T)) along axis, computed stably (max subtracted). Integer "
    .. "inputs give float32. With use_length and length (data's shape without the axis) "
    .. "only the first length steps of each row count; the rest are 0 (MXNet 1.9)." }
op { name = "log_softmax", family = "softmax", cpu = true, inputs = { "data", "length?" },
  infer = "softmax_length", promote = { 1, float = true }, dtypes = "numeric", params = lparams,
  grad = function(F, x, y, g, p)
    local ax, t = p and p.axis or -1, p and p.temperature or 1
    if x[2] then
      return { F.log_softmax_length_backward(g[1], y[1], x[2], { axis = ax, temperature = t }) }
    end
    local s = F.sum(g[1], { axis = ax, keepdims = true })
    local d = F.sub(g[1], F.mul(F.exp(y[1]), s))
    if t ~= 1 then d = F.div_scalar(d, { scalar = t }) end
    return { d }
  end,
  doc = "log(softmax(x)) along axis: x/T - max - log(sum(exp(x/T - max))), stable. With "
    .. "use_length and length, as softmax's: the steps past each row's length are 0 (MXNet's "
    .. "kernel writes 0 there; MXNet 1.9.1's log_softmax itself has no length input)." }

---------------------------------------------------------------- softmin
op { name = "softmin", family = "softmax", cpu = true, inputs = { "data" }, infer = "softmax",
  dtypes = "numeric", params = sparams,
  grad = function(F, x, y, g, p)
    -- y = softmax(-x / T): dx = -y (g - sum(g y)) / T
    local ax, t = p and p.axis or -1, p and p.temperature or 1
    local s = F.sum(F.mul(g[1], y[1]), { axis = ax, keepdims = true })
    return { F.mul(y[1], F.div_scalar(F.sub(s, g[1]), { scalar = t })) }
  end,
  doc = "softmax(-x) along axis: exp(-x/T) / sum(exp(-x/T)), computed stably (the minimum "
    .. "subtracted). Integer inputs give float32." }

---------------------------------------------------------------- lengths and masks
op { name = "log_softmax_length_backward", family = "softmax", inputs = { "ograd", "out", "length" },
  infer = "log_softmax_length_backward", dtypes = "numeric", promote = { 1, 2, float = true },
  nondiff = true, params = { sparams[1], sparams[2] },
  doc = "log_softmax's gradient with a length: (ograd - exp(out) * sum(ograd)) / T over each "
    .. "row's first length steps (the sum too), 0 after them." }

local mparams = { sparams[1], { "temperature", "float", 1, doc = "divides the input first" },
  { "normalize", "bool", true, doc = "MXNet's: subtract the row maximum first; accepted, "
    .. "the maximum is always subtracted here (same values, never overflows)" } }
op { name = "masked_softmax", family = "softmax", cpu = true, inputs = { "data", "mask" },
  infer = "masked_softmax", promote = { 1, float = true }, dtypes = "all", params = mparams,
  grad = function(F, x, y, g, p)
    -- y is 0 at the masked positions: softmax's formula as it is; the mask takes none
    local ax, t = p.axis or -1, p.temperature or 1
    local s = F.sum(F.mul(g[1], y[1]), { axis = ax, keepdims = true })
    local d = F.mul(y[1], F.sub(g[1], s))
    if t ~= 1 then d = F.div_scalar(d, { scalar = t }) end
    return { d }
  end,
  doc = "MXNet's masked_softmax: softmax of data / T along axis over the positions where "
    .. "mask (broadcast to data: same rank, dims equal or 1; nonzero = kept) is set; masked "
    .. "positions are 0, a fully masked row is all 0. Integer data gives float32." }
op { name = "masked_log_softmax", family = "softmax", cpu = true, inputs = { "data", "mask" },
  infer = "masked_softmax", promote = { 1, float = true }, dtypes = "all", params = mparams,
  grad = function(F, x, y, g, p)
    return { F.masked_log_softmax_backward(g[1], y[1], x[2],
      { axis = p.axis or -1, temperature = p.temperature or 1 }) }
  end,
  doc = "MXNet's masked_log_softmax: log of masked_softmax; masked positions are -inf." }
op { name = "masked_log_softmax_backward", family = "softmax", inputs = { "ograd", "out", "mask" },
  infer = "masked_log_softmax_backward", dtypes = "all", promote = { 1, 2, float = true },
  nondiff = true, params = { sparams[1], sparams[2] },
  doc = "masked_log_softmax's gradient: (ograd - exp(out) * sum(ograd)) / T over the kept "
    .. "positions of each row (the sum too), 0 at the masked ones." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  softmax = { "softmax" }, log_softmax = { "log_softmax" }, softmin = { "softmin" },
  -- MXNet 2.0's (1.9.1 has neither; the semantics are 2.0's)
  masked_softmax = { "masked_softmax" }, masked_log_softmax = { "masked_log_softmax" },
}

return ops, MXNET
