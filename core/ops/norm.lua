-- core/ops/norm.lua — the op table's norm family (issue 11: convolutional networks);
-- kernels/*/norm.c and spec/norm_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end -- luacheck: ignore

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
}

return ops, MXNET
