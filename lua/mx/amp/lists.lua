-- mx.amp.lists — the AMP policy of every op, read from the op table's `amp` column
-- (core/ops/optable.lua): MXNet 1.9's lists (mxnet/contrib/amp/lists/symbol_bf16.py and
-- symbol_fp16.py) by category. docs/ops.md shows each op's policy (tools/gen_docs.lua).
--   target       TARGET_DTYPE_OPS: run in the target dtype (bfloat16 or float16)
--   fp32         FP32_OPS: run in float32
--   widest       WIDEST_TYPE_CASTS: inputs cast to the widest float dtype among them
--   safe         FP16_FP32 / BF16_FP32: run in the dtype they get (float32 when the op's
--                kernels do not take that dtype)
--   conditional  CONDITIONAL_FP32_OPS: {op, param, values}: float32 for those values
local lib = require("mx.core.lib")

local M = {}

-- lists() -> { target = {names}, fp32 = {...}, widest = {...}, safe = {...},
-- conditional = { {name, param, {values}}, ... } }, luamx op names in table order
function M.lists()
  local r = { target = {}, fp32 = {}, widest = {}, safe = {}, conditional = {} }
  for _, op in ipairs(lib.ops) do
    if op.family ~= "amp" and op.family ~= "optimizer" and #op.inputs > 0 then
      local l = r[op.amp]
      l[#l + 1] = op.name
      if op.amp_fp32_if then
        r.conditional[#r.conditional + 1] = { op.name, op.amp_fp32_if[1], op.amp_fp32_if[2] }
      end
    end
  end
  return r
end

return M
