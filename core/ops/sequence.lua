-- core/ops/sequence.lua — sequence ops: masks, last elements and reversal over padded
-- batches, CTC loss: the op table's sequence family (kernels/*/sequence.c and
-- spec/sequence_spec.lua share the base name). core/ops/optable.lua joins the families in
-- op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end -- luacheck: ignore 211

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {}

return ops, MXNET
