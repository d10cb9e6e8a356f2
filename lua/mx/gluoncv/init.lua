-- mx.gluoncv — GluonCV's module names over luamx (local gcv = require("mx.gluoncv")):
-- model_zoo (get_model, get_model_list, get_fcn, get_deeplab), nn (ReLU6, HardSigmoid,
-- HardSwish), utils (metrics: VOC/VOC07 mAP, COCO mAP, segmentation pixAcc/mIoU; cocoeval;
-- viz: mx.viz's pictures). The classification networks are mx.gluon.model_zoo.vision's;
-- pretrained weights come from GluonCV's model store (~/.mxnet/models/<name>-<hash>.params,
-- never downloaded); data (transforms: bbox, image, experimental, presets.ssd / presets.yolo
-- transform_test, load_test and the training transforms; PasteDetection, MixupDetection), loss
-- (SSDMultiBoxLoss, YOLOV3Loss, SoftmaxCrossEntropyLoss, MixSoftmaxCrossEntropyLoss).
return require("mx.core.lazy")({ data = require("mx.core.lazy")({},
  { transforms = "mx.gluoncv.data.transforms",
    PasteDetection = "mx.gluoncv.data.paste_detection",
    MixupDetection = "mx.gluoncv.data.mixup" }) }, { model_zoo = "mx.gluoncv.model_zoo",
  nn = "mx.gluoncv.nn", utils = "mx.gluoncv.utils", loss = "mx.gluoncv.loss" })
