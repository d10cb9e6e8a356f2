-- core/ops/softmax.lua — softmax and log_softmax: the op table's softmax family
-- (kernels/*/softmax.c and spec/softmax_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

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

---------------------------------------------------------------- softmin, issue 14 (owner: u14)
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

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  softmax = { "softmax" }, log_softmax = { "log_softmax" }, softmin = { "softmin" },
}

return ops, MXNET
