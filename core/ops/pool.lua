-- core/ops/pool.lua — the op table's pool family (issue 11: convolutional networks);
-- kernels/*/pool.c and spec/pool_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end -- luacheck: ignore

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
}

return ops, MXNET
