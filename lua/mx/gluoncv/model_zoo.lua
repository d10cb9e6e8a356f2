-- mx.gluoncv.model_zoo — GluonCV's get_model for its classification networks, YOLOv3
-- (yolo3_darknet53_voc, yolo3_mobilenet1.0_voc: mx.gluoncv.model_zoo.yolo3) and SSD
-- (ssd_300_vgg16_atrous_voc, ssd_512_resnet50_v1_voc, ...: mx.gluoncv.model_zoo.ssd), FCN and
-- DeepLabV3 (fcn_resnet50_voc, deeplab_resnet101_voc: mx.gluoncv.model_zoo.segmentation),
-- Faster R-CNN (faster_rcnn_resnet50_v1b_voc/_coco: mx.gluoncv.model_zoo.rcnn), the
-- structures of mx.gluon.model_zoo.vision (MXNet's zoo plus MobileNetV3, ResNeXt,
-- SE-ResNet/ResNeXt), with pretrained=true loading GluonCV's model-store file
-- <root>/<name>-<hash>.params (GluonCV's hashes: its weights differ from MXNet's).
--
--   local gcv = require("mx.gluoncv")
--   local net = gcv.model_zoo.get_model("mobilenetv3_large", { pretrained = true })
local vision = require("mx.gluon.model_zoo.vision")
local store = require("mx.gluon.model_zoo.model_store")
local check_opts = require("mx.core.class").check_opts

local type, error, tostring = type, error, tostring

local M = {}

-- GluonCV's detection networks by name: module, constructor
local DETECTION = {
  ["yolo3_darknet53_voc"] = { "yolo3", "yolo3_darknet53_voc" },
  ["yolo3_mobilenet1.0_voc"] = { "yolo3", "yolo3_mobilenet1_0_voc" },
  ["ssd_300_vgg16_atrous_voc"] = { "ssd", "ssd_300_vgg16_atrous_voc" },
  ["ssd_512_vgg16_atrous_voc"] = { "ssd", "ssd_512_vgg16_atrous_voc" },
  ["ssd_512_resnet50_v1_voc"] = { "ssd", "ssd_512_resnet50_v1_voc" },
  ["ssd_512_mobilenet1.0_voc"] = { "ssd", "ssd_512_mobilenet1_0_voc" },
  ["faster_rcnn_resnet50_v1b_voc"] = { "rcnn", "faster_rcnn_resnet50_v1b_voc" },
  ["faster_rcnn_resnet50_v1b_coco"] = { "rcnn", "faster_rcnn_resnet50_v1b_coco" },
}

-- GluonCV's segmentation networks by name (fcn_resnet50_voc, deeplab_resnet101_ade, ...)
local function segmentation() return require("mx.gluoncv.model_zoo.segmentation").MODELS end

-- get_fcn(opts), get_deeplab(opts): mx.gluoncv.model_zoo.segmentation's
function M.get_fcn(opts)
  local ok, net = pcall(require("mx.gluoncv.model_zoo.segmentation").get_fcn, opts, 1)
  if not ok then error(tostring(net):gsub("^[^:]*:%d+: ", ""), 2) end
  return net
end
function M.get_deeplab(opts)
  local ok, net = pcall(require("mx.gluoncv.model_zoo.segmentation").get_deeplab, opts, 1)
  if not ok then error(tostring(net):gsub("^[^:]*:%d+: ", ""), 2) end
  return net
end

-- get_model_list(): the names get_model takes, sorted
function M.get_model_list()
  local names = {}
  for k in pairs(vision.MODELS) do names[#names + 1] = k end
  for k in pairs(DETECTION) do names[#names + 1] = k end
  for k in pairs(segmentation()) do names[#names + 1] = k end
  table.sort(names)
  return names
end

local OPTS = { classes = true, pretrained = true, ctx = true, root = true, thumbnail = true,
  multiplier = true, last_gamma = true }

-- get_model(name, {classes=, pretrained=false, ctx=, root=, ...})
function M.get_model(name, opts)
  local det = type(name) == "string" and DETECTION[name:lower()]
  if det then
    local ok, net = pcall(require("mx.gluoncv.model_zoo." .. det[1])[det[2]], opts)
    if not ok then error(tostring(net):gsub("^[^:]*:%d+: ", ""), 2) end
    return net
  end
  local seg = type(name) == "string" and segmentation()[name:lower()]
  if seg then
    local ok, net = pcall(seg, opts, 1)
    if not ok then error(tostring(net):gsub("^[^:]*:%d+: ", ""), 2) end
    return net
  end
  local f = type(name) == "string" and vision.MODELS[name:lower()]
  if not f then
    error("get_model: unknown model '" .. tostring(name) .. "' (mx.gluoncv.model_zoo."
      .. "get_model_list() names them)", 2)
  end
  local o = check_opts("get_model", opts, OPTS, 2)
  if o.pretrained ~= nil and type(o.pretrained) ~= "boolean" then
    error("get_model: pretrained must be a boolean, got " .. type(o.pretrained), 2)
  end
  local build = {}
  for k, v in pairs(o) do
    if k ~= "pretrained" and k ~= "root" and k ~= "ctx" then build[k] = v end
  end
  local ok, net = pcall(f, build, 1)
  if not ok then error(tostring(net):gsub("^[^:]*:%d+: ", ""), 2) end
  if o.pretrained then
    local path = store.get_model_file(name:lower(), { root = o.root, store = "gluoncv" }, 2)
    local ok2, err = pcall(net.load_parameters, net, path, { ctx = o.ctx })
    if not ok2 then error(tostring(err):gsub("^[^:]*:%d+: ", ""), 2) end
  end
  return net
end

return M
