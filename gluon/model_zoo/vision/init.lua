-- mx.gluon.model_zoo.vision — MXNet 1.9's vision model zoo (AlexNet, DenseNet-121/161/
-- 169/201, Inception v3, MobileNet v1/v2 at 1.0/0.75/0.5/0.25, ResNet v1/v2 18-152,
-- SqueezeNet 1.0/1.1, VGG 11-19 with and without BN) plus GluonCV's MobileNetV3
-- small/large, ResNeXt/SE-ResNeXt and SE-ResNet, each with its source's structure and
-- structural parameter names, so .params files saved by MXNet/GluonCV load.
--
--   local vision = mx.gluon.model_zoo.vision
--   local net = vision.get_model("mobilenetv2_0.5", { classes = 10 })
--   local net = vision.get_model("resnet50_v1", { pretrained = true })  -- ~/.mxnet/models
--
-- get_model(name, {classes=, pretrained=, root=, ctx=, ...}) takes MXNet's and GluonCV's
-- names; pretrained=true loads <root>/<name>-<hash>.params (model_store.lua) and never
-- downloads.
local M = {}

local FILES = { "resnet", "alexnet", "vgg", "squeezenet", "densenet", "inception", "mobilenet",
  "mobilenetv3", "resnext" }
for _, f in ipairs(FILES) do
  for k, v in pairs(require("mx.gluon.model_zoo.vision." .. f)) do M[k] = v end
end

-- name -> constructor: MXNet's vision.get_model table, then GluonCV's classification names
local MODELS = {
  alexnet = M.alexnet, inceptionv3 = M.inception_v3,
  ["squeezenet1.0"] = M.squeezenet1_0, ["squeezenet1.1"] = M.squeezenet1_1,
  ["mobilenet1.0"] = M.mobilenet1_0, ["mobilenet0.75"] = M.mobilenet0_75,
  ["mobilenet0.5"] = M.mobilenet0_5, ["mobilenet0.25"] = M.mobilenet0_25,
  ["mobilenetv2_1.0"] = M.mobilenet_v2_1_0, ["mobilenetv2_0.75"] = M.mobilenet_v2_0_75,
  ["mobilenetv2_0.5"] = M.mobilenet_v2_0_5, ["mobilenetv2_0.25"] = M.mobilenet_v2_0_25,
  mobilenetv3_large = M.mobilenet_v3_large, mobilenetv3_small = M.mobilenet_v3_small,
  resnext101e_64x4d = M.resnext101e_64x4d, se_resnext101e_64x4d = M.se_resnext101e_64x4d,
}
for _, n in ipairs { 18, 34, 50, 101, 152 } do
  for v = 1, 2 do
    local k = string.format("resnet%d_v%d", n, v)
    MODELS[k], MODELS["se_" .. k] = M[k], M["se_" .. k]
  end
end
for _, n in ipairs { 11, 13, 16, 19 } do
  MODELS["vgg" .. n], MODELS["vgg" .. n .. "_bn"] = M["vgg" .. n], M["vgg" .. n .. "_bn"]
end
for _, n in ipairs { 121, 161, 169, 201 } do MODELS["densenet" .. n] = M["densenet" .. n] end
for _, k in ipairs { "resnext50_32x4d", "resnext101_32x4d", "resnext101_64x4d" } do
  MODELS[k], MODELS["se_" .. k] = M[k], M["se_" .. k]
end
M.MODELS = MODELS

-- get_model(name, opts): the network MXNet's vision.get_model(name, **kwargs) (or
-- GluonCV's model_zoo.get_model, for its names) gives.
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
