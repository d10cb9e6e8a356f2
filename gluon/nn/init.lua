-- mx.gluon.nn — neural-network layers: every class each layer module exports.
local block = require("mx.gluon.block")

local nn = {
  Block = block.Block,
  HybridBlock = block.HybridBlock,
}
for _, mod in ipairs { "basic_layers", "conv_layers", "pool_layers", "norm_layers",
  "activations", "seq_layers", "transformer", "deformable_layers", "sync_batch_norm" } do
  for k, v in pairs(require("mx.gluon.nn." .. mod)) do
    if nn[k] then error("mx.gluon.nn: " .. k .. " exported twice (" .. mod .. ")", 0) end
    nn[k] = v
  end
end
return nn
