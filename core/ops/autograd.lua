-- core/ops/autograd.lua — the autograd ops: the op table's autograd family
-- (kernels/*/autograd.c and spec/autograd_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- autograd
op { name = "stop_gradient", family = "autograd", inputs = { "data" }, infer = "same",
  dtypes = "all", nondiff = true,
  doc = "The identity (a copy) that blocks gradients: autograd records nothing for it, so "
    .. "inputs reached only through it get no gradient (MXNet's BlockGrad)." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  stop_gradient = { "BlockGrad" },
}

return ops, MXNET
