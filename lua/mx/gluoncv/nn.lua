-- mx.gluoncv.nn — GluonCV's activation blocks (gluoncv/nn/block.py): ReLU6 = clip(x, 0, 6),
-- HardSigmoid = ReLU6(x + 3) / 6, HardSwish = x * HardSigmoid(x). No parameters.
local v3 = require("mx.gluon.model_zoo.vision.mobilenetv3")

return { ReLU6 = v3.ReLU6, HardSigmoid = v3.HardSigmoid, HardSwish = v3.HardSwish }
