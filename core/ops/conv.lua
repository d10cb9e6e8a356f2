-- core/ops/conv.lua — the op table's conv family (issue 11: convolutional networks);
-- kernels/*/conv.c and spec/conv_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end -- luacheck: ignore

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
}

return ops, MXNET
