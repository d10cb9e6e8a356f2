-- core/ops/rnn.lua — MXNet's fused recurrent op (rnn_relu, rnn_tanh, lstm, gru over a
-- packed parameter vector) and its backward: the op table's rnn family
-- (kernels/*/rnn.c and spec/rnn_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end -- luacheck: ignore 211

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {}

return ops, MXNET
