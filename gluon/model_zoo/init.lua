-- mx.gluon.model_zoo — MXNet's predefined networks (gluon.model_zoo): vision (MXNet 1.9's
-- whole vision zoo plus GluonCV's MobileNetV3, ResNeXt and SE-ResNet) and model_store
-- (pretrained weights found in MXNet's model-store layout, ~/.mxnet/models, never
-- downloaded). docs/gluoncv.md.
return require("mx.core.lazy")({}, { vision = "mx.gluon.model_zoo.vision",
  model_store = "mx.gluon.model_zoo.model_store" })
