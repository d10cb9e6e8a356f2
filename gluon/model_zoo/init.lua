-- mx.gluon.model_zoo — MXNet's predefined networks (gluon.model_zoo): vision.
-- No pretrained weights can be downloaded here: pretrained=true is an error; load an
-- MXNet .params file with net:load_parameters(path) instead (the parameter names are
-- MXNet's structural ones).
return require("mx.core.lazy")({}, { vision = "mx.gluon.model_zoo.vision" })
