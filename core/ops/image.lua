-- core/ops/image.lua — the image ops: the op table's image family
-- (kernels/*/image.c and spec/image_spec.lua share the base name). core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- image
op { name = "to_tensor", family = "image", inputs = { "data" }, infer = "to_tensor",
  dtypes = { 0, 3 }, nondiff = true, cpu = true,
  doc = "MXNet's image.to_tensor: an image (H, W, C) or a batch (N, H, W, C) of uint8 in "
    .. "[0, 255] (or float32) to float32 (C, H, W) / (N, C, H, W) divided by 255 (each value "
    .. "the float32 nearest v / 255). gluon.data.vision.transforms.ToTensor runs it." }

---------------------------------------------------------------- image ops
-- HWC images (H, W, C) or NHWC batches (N, H, W, C), uint8 or float32; uint8 results are
-- rounded to nearest and saturated to 0..255, float32 results are not clamped.
local IMG = { 0, 3 }
op { name = "imresize", family = "image", inputs = { "data" }, infer = "imresize",
  dtypes = IMG, nondiff = true, cpu = true,
  params = { { "w", "int", nil, doc = "output width (> 0)" },
    { "h", "int", nil, doc = "output height (> 0)" },
    { "interp", "int", 1, doc = "0 nearest, 1 bilinear, 2 bicubic, 3 area (MXNet's = OpenCV's codes)" } },
  doc = "MXNet's image.imresize (OpenCV's cv2.resize): data resized to (h, w). OpenCV's "
    .. "conventions: nearest takes source pixel floor(x * W / w); bilinear and bicubic "
    .. "(a = -0.75) sample at (x + 0.5) * W / w - 0.5 with replicated edges; area averages "
    .. "the source cells each output pixel covers (bilinear-like weights when enlarging)." }
op { name = "copy_make_border", family = "image", inputs = { "data" },
  infer = "copy_make_border", dtypes = IMG, nondiff = true, cpu = true,
  params = { { "top", "int", 0, doc = "rows added above" },
    { "bot", "int", 0, doc = "rows added below" },
    { "left", "int", 0, doc = "columns added on the left" },
    { "right", "int", 0, doc = "columns added on the right" },
    { "type", "int", 0, doc = "OpenCV's border code: 0 constant, 1 replicate (aaa|abc), 2 reflect "
      .. "(cba|abc), 3 wrap (abc|abc), 4 reflect_101 (dcb|abcd)" },
    { "value", "float", 0, doc = "the constant border's value (type 0)" } },
  doc = "MXNet's image.copyMakeBorder (cv2.copyMakeBorder): data with a border of the given "
    .. "widths, filled per OpenCV's border type." }
op { name = "adjust_brightness", family = "image", inputs = { "data" }, infer = "image_same",
  dtypes = IMG, nondiff = true, cpu = true, params = { { "alpha", "float", 1, doc = "factor" } },
  doc = "MXNet's BrightnessJitterAug for a drawn alpha: data * alpha." }
op { name = "adjust_contrast", family = "image", inputs = { "data" }, infer = "image_rgb",
  dtypes = IMG, nondiff = true, cpu = true, params = { { "alpha", "float", 1, doc = "factor" } },
  doc = "MXNet's ContrastJitterAug for a drawn alpha: data * alpha + (1 - alpha) * the "
    .. "image's mean gray (0.299 R + 0.587 G + 0.114 B averaged over its pixels; per image "
    .. "of a batch)." }
op { name = "adjust_saturation", family = "image", inputs = { "data" }, infer = "image_rgb",
  dtypes = IMG, nondiff = true, cpu = true, params = { { "alpha", "float", 1, doc = "factor" } },
  doc = "MXNet's SaturationJitterAug for a drawn alpha: data * alpha + (1 - alpha) * the "
    .. "pixel's gray (0.299 R + 0.587 G + 0.114 B)." }
op { name = "adjust_hue", family = "image", inputs = { "data" }, infer = "image_rgb",
  dtypes = IMG, nondiff = true, cpu = true,
  params = { { "alpha", "float", 0, doc = "rotation in units of pi (MXNet draws it in [-hue, hue])" } },
  doc = "MXNet's HueJitterAug for a drawn alpha: each RGB pixel times the matrix "
    .. "(ityiq * [[1,0,0],[0,u,-w],[0,w,u]] * tyiq)^T, u = cos(alpha pi), w = sin(alpha pi), "
    .. "the YIQ rotation with MXNet's tyiq/ityiq coefficients." }
op { name = "adjust_lighting", family = "image", inputs = { "data" }, infer = "image_rgb",
  dtypes = IMG, nondiff = true, cpu = true,
  params = { { "alpha_r", "float", 0 }, { "alpha_g", "float", 0 }, { "alpha_b", "float", 0 } },
  doc = "MXNet's LightingAug (AlexNet PCA noise) for drawn alphas: data + eigvec * (alpha .* "
    .. "eigval) per pixel, eigval (55.46, 4.794, 1.148) and MXNet's eigvec; alpha_r/g/b are the "
    .. "three components of MXNet's alpha vector (drawn from N(0, alphastd))." }
op { name = "to_gray", family = "image", inputs = { "data" }, infer = "image_rgb",
  dtypes = IMG, nondiff = true, cpu = true,
  doc = "Gray with the 0.299/0.587/0.114 coefficients, kept as 3 equal channels (RandomGray)." }
op { name = "imrotate", family = "image", inputs = { "data" }, infer = "image_same",
  dtypes = IMG, nondiff = true, cpu = true,
  params = { { "angle", "float", 0, doc = "degrees (MXNet's rotation_degrees)" } },
  doc = "MXNet's image.imrotate without zoom, on HWC: output pixel (cx + dx, cy + dy), centre "
    .. "((W-1)/2, (H-1)/2), samples data bilinearly at (cx + dx cos a - dy sin a, cy + dx sin a "
    .. "+ dy cos a); taps outside the image count as 0. The output keeps data's size." }

-- MXNet 1.9's operator names of this family's ops whose semantics match (the ops'
-- `mxnet` field: mx_op_find takes them, symbol JSON maps both ways). core/ops/optable.lua
-- sets them on the ops and says which ops stay unmapped and why.
local MXNET = {
  to_tensor = { "_image_to_tensor" },
  imresize = { "_cvimresize" },
  copy_make_border = { "_cvcopyMakeBorder" },
}

return ops, MXNET
