-- mx.gluon.model_zoo.vision — MXNet's vision models: ResNet v1/v2 (18, 34, 50, 101,
-- 152 layers) so far; get_model(name, opts) finds one by MXNet's name ("resnet18_v1").
local resnet = require("mx.gluon.model_zoo.vision.resnet")

local M = {}
for k, v in pairs(resnet) do M[k] = v end

-- get_model(name, opts): the model MXNet's vision.get_model(name, **kwargs) gives.
local MODELS = {}
for k, v in pairs(resnet) do
  if type(v) == "function" and k:match("^resnet%d+_v%d$") then MODELS[k] = v end
end
function M.get_model(name, opts)
  local f = type(name) == "string" and MODELS[name:lower()]
  if not f then
    local names = {}
    for k in pairs(MODELS) do names[#names + 1] = k end
    table.sort(names)
    error("get_model: unknown model '" .. tostring(name) .. "' (available: "
      .. table.concat(names, ", ") .. ")", 2)
  end
  local net = f(opts, 3)
  return net
end

return M
