-- mx.gluon — Gluon in Lua: nn, loss, Trainer, Parameter, Block, metric, data.
-- Submodules load on first use (mx.gluon.data belongs to the data pipeline).
local block = require("mx.gluon.block")
local parameter = require("mx.gluon.parameter")

local gluon = {
  Block = block.Block,
  HybridBlock = block.HybridBlock,
  ParameterDict = block.ParameterDict,
  Parameter = parameter.Parameter,
  Constant = parameter.Constant,
}

return require("mx.core.lazy")(gluon, {
  nn = "mx.gluon.nn", loss = "mx.gluon.loss", metric = "mx.gluon.metric",
  data = "mx.gluon.data", rnn = "mx.gluon.rnn", model_zoo = "mx.gluon.model_zoo",
  utils = "mx.gluon.utils", Trainer = { "mx.gluon.trainer", "Trainer" },
  SymbolBlock = { "mx.gluon._export", "SymbolBlock" }, probability = "mx.gluon.probability",
})
