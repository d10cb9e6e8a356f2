-- core/ops/deformable.lua — the op table's deformable family (MXNet's contrib
-- DeformableConvolution v1 and ModulatedDeformableConvolution v2);
-- kernels/*/deformable.c and spec/deformable_spec.lua share the base name.
-- core/ops/optable.lua joins the families in op order and documents every field. The cpu
-- kernels (float32: im2col rows in parallel, one GEMM per group) decline other dtypes to
-- the reference kernels.
local ops = {}
local function op(t) ops[#ops + 1] = t end

-- MXNet's DeformableConvolutionParam, in its order (the backward op takes the forward's
-- params as they are: the grad formula hands them over unchanged)
local DCN_PARAMS = {
  { "kernel", "shape", nil, doc = "kernel size (kh, kw) (required; 2-D only, as MXNet)" },
  { "stride", "shape", {}, doc = "stride (sh, sw) (default 1)" },
  { "dilate", "shape", {}, doc = "dilation (dh, dw) (default 1)" },
  { "pad", "shape", {}, doc = "zero padding on both sides (ph, pw) (default 0)" },
  { "num_filter", "int", nil, doc = "output channels (required)" },
  { "num_group", "int", 1, doc = "groups: input and output channels split into this many" },
  { "num_deformable_group", "int", 1,
    doc = "offset groups: the input channels split into this many, each with its own offsets" },
  { "workspace", "int", 1024, doc = "accepted and ignored (MXNet's workspace limit, MB)" },
  { "no_bias", "bool", false, doc = "no bias input" },
  { "layout", "enum", "None", values = { "None", "NCW", "NCHW", "NCDHW" },
    doc = "data layout: None or NCHW (MXNet's kernels are 2-D NCHW only)" },
}
-- ModulatedDeformableConvolutionParam: the same, and im2col_step (last here, so both
-- structs share their leading fields)
local MDCN_PARAMS = {}
for i, q in ipairs(DCN_PARAMS) do MDCN_PARAMS[i] = q end
MDCN_PARAMS[#MDCN_PARAMS + 1] = { "im2col_step", "int", 64,
  doc = "accepted for MXNet (images per im2col pass there: a batch larger than it must be a "
    .. "multiple of it); results do not depend on it" }

-- the bias gradient: the output gradient summed over batch and positions
local function bias_grad(F, G) return F.sum(G, { axis = { 1, 3, 4 } }) end

op { name = "deformable_convolution", family = "deformable", cpu = { supports = true }, amp = "fp32",
  inputs = { "data", "offset", "weight", "bias?" },
  infer = "deformable_convolution", partial = true, dtypes = "float",
  params = DCN_PARAMS,
  grad = function(F, x, _, g, p, need)
    local dx, doff, dw = F.deformable_convolution_backward(g[1], x[1], x[2], x[3], p)
    local r = { dx, doff, dw }
    if not p.no_bias and (not need or need[4]) then r[4] = bias_grad(F, g[1]) end
    return r
  end,
  doc = "MXNet's contrib DeformableConvolution (deformable convolution v1, Dai et al. "
    .. "2017): a 2-D convolution of data (N, C, H, W) with weight (num_filter, C/num_group, "
    .. "kh, kw) plus bias (num_filter) unless no_bias, whose sampling points are moved by "
    .. "offset (N, 2 num_deformable_group kh kw, Ho, Wo): channel 2 (g kh kw + i kw + j) "
    .. "(0-based) moves kernel tap (i, j) of offset group g down, the next one right, per "
    .. "output position. A moved point is read by bilinear interpolation as MXNet's "
    .. "deformable_im2col: 0 outside [0, H) x [0, W), the last row/column repeated in the "
    .. "last cell. Output (N, num_filter, Ho, Wo) as Convolution's. Gradients for data, "
    .. "offset, weight and bias (the exact derivative of that interpolation, as MXNet's)." }

op { name = "deformable_convolution_backward", family = "deformable", cpu = { supports = true },
  inputs = { "ograd", "data", "offset", "weight" },
  outputs = { "ddata", "doffset", "dweight" },
  infer = "deformable_convolution_backward", dtypes = "float", nondiff = true,
  params = DCN_PARAMS,
  doc = "The gradients of deformable_convolution for data, offset and weight from the "
    .. "output's gradient ograd (the bias's is ograd summed over batch and positions). "
    .. "Takes deformable_convolution's params (no_bias ignored)." }

op { name = "modulated_deformable_convolution", family = "deformable", cpu = { supports = true },
  amp = "fp32",
  inputs = { "data", "offset", "mask", "weight", "bias?" },
  infer = "deformable_convolution", partial = true, dtypes = "float",
  params = MDCN_PARAMS,
  grad = function(F, x, _, g, p, need)
    local dx, doff, dm, dw = F.modulated_deformable_convolution_backward(g[1], x[1], x[2], x[3],
      x[4], p)
    local r = { dx, doff, dm, dw }
    if not p.no_bias and (not need or need[5]) then r[5] = bias_grad(F, g[1]) end
    return r
  end,
  doc = "MXNet's contrib ModulatedDeformableConvolution (deformable convolution v2, Zhu et "
    .. "al. 2018): deformable_convolution with each sampled value multiplied by mask (N, "
    .. "num_deformable_group kh kw, Ho, Wo) (channel g kh kw + i kw + j for tap (i, j) of "
    .. "offset group g). The bilinear read is MXNet's modulated_deformable_im2col's: points "
    .. "in (-1, H) x (-1, W) read with the cells outside the map as 0, other points 0. "
    .. "num_filter must be a multiple of num_deformable_group (as MXNet). Gradients for "
    .. "data, offset, mask, weight and bias (MXNet computes its backward on GPUs only)." }

op { name = "modulated_deformable_convolution_backward", family = "deformable", cpu = { supports = true },
  inputs = { "ograd", "data", "offset", "mask", "weight" },
  outputs = { "ddata", "doffset", "dmask", "dweight" },
  infer = "deformable_convolution_backward", dtypes = "float", nondiff = true,
  params = MDCN_PARAMS,
  doc = "The gradients of modulated_deformable_convolution for data, offset, mask and "
    .. "weight from the output's gradient ograd (the bias's is ograd summed over batch and "
    .. "positions). Takes modulated_deformable_convolution's params (no_bias ignored)." }

-- MXNet 1.9's operator names of this family's ops.
local MXNET = {
  deformable_convolution = { "_contrib_DeformableConvolution" },
  modulated_deformable_convolution = { "_contrib_ModulatedDeformableConvolution" },
}

return ops, MXNET
