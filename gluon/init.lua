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

local lazy = {
  nn = "mx.gluon.nn", loss = "mx.gluon.loss", metric = "mx.gluon.metric",
  data = "mx.gluon.data", rnn = "mx.gluon.rnn", model_zoo = "mx.gluon.model_zoo",
  utils = "mx.gluon.utils",
}
setmetatable(gluon, {
  __index = function(t, k)
    if k == "Trainer" then
      local T = require("mx.gluon.trainer").Trainer
      rawset(t, k, T)
      return T
    end
    local name = lazy[k]
    if not name then return nil end
    local m = require(name)
    rawset(t, k, m)
    return m
  end,
})

return gluon
