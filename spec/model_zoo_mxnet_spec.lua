-- gluon.model_zoo.vision against MXNet 1.9.1 and GluonCV 0.10 (spec/helpers/zoo_check.lua):
-- with deterministic weights (the same values as tools/fixtures/zoo_fill.py) every network
-- gives MXNet's committed output and parameter count. This file: six small networks by
-- default, MXNet's zoo under #slow; spec/model_zoo_gluoncv_spec.lua: GluonCV's networks and
-- the checks against a live MXNet.
local Z = require("helpers.zoo_check")

describe("model_zoo.vision vs MXNet 1.9.1 / GluonCV 0.10 (committed outputs)", function()
  for _, name in ipairs(Z.FAST) do
    it(name .. ": parameter count and output equal MXNet's", function() Z.check(name) end)
  end
end)

describe("#slow model_zoo.vision: MXNet's zoo vs its committed MXNet 1.9.1 outputs", function()
  for _, name in ipairs(Z.slow_names("mxnet")) do
    it(name, function()
      Z.check(name)
      collectgarbage()
    end)
  end
end)
