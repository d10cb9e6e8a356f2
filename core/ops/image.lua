-- core/ops/image.lua — the image ops: the op table's image family
-- (kernels/*/image.c and spec/image_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- image (owner: data)
op { name = "to_tensor", family = "image", inputs = { "data" }, infer = "to_tensor",
  dtypes = { 0, 3 }, nondiff = true, cpu = true,
  doc = "MXNet's image.to_tensor: an image (H, W, C) or a batch (N, H, W, C) of uint8 in "
    .. "[0, 255] (or float32) to float32 (C, H, W) / (N, C, H, W) divided by 255 (each value "
    .. "the float32 nearest v / 255). gluon.data.vision.transforms.ToTensor runs it." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  to_tensor = { "_image_to_tensor" },
}

return ops, MXNET
