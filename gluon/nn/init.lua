-- mx.gluon.nn — neural-network layers.
local basic = require("mx.gluon.nn.basic_layers")
local block = require("mx.gluon.block")

local nn = {
  Block = block.Block,
  HybridBlock = block.HybridBlock,
}
for _, k in ipairs { "Sequential", "HybridSequential", "Dense", "Dropout", "Activation", "Flatten",
  "Lambda", "HybridLambda" } do
  nn[k] = basic[k]
end
return nn
