-- mx.gluoncv — GluonCV's module names over luamx (local gcv = require("mx.gluoncv")):
-- model_zoo (get_model, get_model_list), nn (ReLU6, HardSigmoid, HardSwish), utils
-- (metrics: VOC/VOC07 mAP, segmentation pixAcc/mIoU; viz: mx.viz's pictures). The
-- classification networks are mx.gluon.model_zoo.vision's; pretrained weights come from
-- GluonCV's model store (~/.mxnet/models/<name>-<hash>.params, never downloaded).
return require("mx.core.lazy")({}, { model_zoo = "mx.gluoncv.model_zoo", nn = "mx.gluoncv.nn",
  utils = "mx.gluoncv.utils" })
