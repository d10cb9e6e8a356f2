-- core/ops/conv.lua — the op table's conv family;
-- kernels/*/conv.c and spec/conv_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

-- The parameters of MXNet's Convolution (shared by its backward ops, which take the
-- forward's params as they are: the grad formula hands them over unchanged).
local CONV_PARAMS = {
  { "kernel", "shape", nil, doc = "kernel size per spatial dim (1 to 3 dims; required)" },
  { "stride", "shape", {}, doc = "stride per spatial dim (default 1)" },
  { "dilate", "shape", {}, doc = "dilation per spatial dim (default 1)" },
  { "pad", "shape", {}, doc = "zero padding on both sides per spatial dim (default 0)" },
  { "num_filter", "int", nil, doc = "output channels (checked against weight)" },
  { "num_group", "int", 1, doc = "groups: input and output channels split into this many" },
  { "no_bias", "bool", false, doc = "no bias input" },
  { "layout", "enum", "None", values = { "None", "NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC" },
    doc = "data layout; None: NCW/NCHW/NCDHW by the kernel's dims. Channel-last layouts "
      .. "take the weight as (num_filter, k..., C/num_group), as MXNet" },
  { "cudnn_tune", "enum", "None", values = { "None", "off", "limited_workspace", "fastest" },
    doc = "accepted and ignored (cuDNN only)" },
  { "cudnn_off", "bool", false, doc = "accepted and ignored (cuDNN only)" },
  { "workspace", "int", 1024, doc = "accepted and ignored (MXNet's workspace limit, MB)" },
  { "act_type", "enum", "none", values = { "none", "relu", "relu6" },
    doc = "activation applied in the same pass (a oneDNN post-op; Conv2D's activation='relu'; "
      .. "relu6 = clip(x, 0, 6), what inference graphs fuse of MobileNet v2)" },
}

-- the output gradient through act_type, from the output y
local function act_grad(F, G, y, p)
  if p.act_type == "relu" then return F.relu_backward(G, y) end
  if p.act_type == "relu6" then
    return F.mul(F.relu_backward(G, y), F.lesser_scalar(y, { scalar = 6 }))
  end
  return G
end

-- the axes of the output's non-channel dims (bias gradient), 1-based
local function bias_axes(nd, last)
  local ax = {}
  for i = 1, nd do
    if i ~= (last and nd or 2) then ax[#ax + 1] = i end
  end
  return ax
end

-- float32, float64 and bfloat16 (oneDNN's bf16 primitives where the CPU has AVX-512 BF16
-- or AMX; the reference loops elsewhere)
local CONV_DT = { 0, 1, 12 }

local function channel_last(p)
  local l = p.layout
  return l == "NWC" or l == "NHWC" or l == "NDHWC"
end

-- convolution's data, weight and bias gradients from G (the output's gradient after
-- act_type's), into r[1], r[2] and r[ib] (the bias input's index), honouring need
local function conv_grads(F, X, W, G, p, need, r, ib)
  if not need or need[1] then r[1] = F.convolution_backward_data(G, W, X, p) end
  if not need or need[2] then r[2] = F.convolution_backward_weight(G, X, p) end
  if not p.no_bias and (not need or need[ib]) then
    r[ib] = F.sum(G, { axis = bias_axes(#p.kernel + 2, channel_last(p)) })
  end
  return r
end

-- oneDNN (kernels/dnnl/conv.c): every input's layout is bound by the kernel; the forward
-- picks its output's layout (starting oneDNN's blocked chain), the data gradient keeps the
-- output gradient's; a compiled graph's constant weights are reordered once into the
-- forward primitive's layout (prepack), or, for the 3x3 convolutions that run on Winograd's
-- F(2x2, 3x3) (kernels/dnnl/conv_winograd.c), transformed once into its layout
local DNNL_LAYOUTS = { "onednn" }
local DNNL_FWD_LAYOUTS = { "onednn", "winograd" }
op { name = "convolution", family = "conv", amp = "target", inputs = { "data", "weight", "bias?" },
  dnnl = { supports = "conv", out_layout = true, layouts = DNNL_FWD_LAYOUTS, choose_out = true,
    prepack = "convolution" },
  infer = "convolution", partial = true, dtypes = CONV_DT,
  params = CONV_PARAMS,
  grad = function(F, x, y, g, p, need)
    local G = g[1]
    G = act_grad(F, G, y[1], p)
    return conv_grads(F, x[1], x[2], G, p, need, {}, 3)
  end,
  doc = "MXNet's Convolution, 1-D/2-D/3-D: data (N, C, spatial...) convolved with weight "
    .. "(num_filter, C/num_group, kernel...) plus bias (num_filter) unless no_bias. Output "
    .. "spatial size floor((in + 2 pad - dilate (kernel - 1) - 1) / stride) + 1. num_group "
    .. "= C is depthwise. Weight and bias dims are inferred from data (partial inference). "
    .. "act_type='relu' applies relu in the same pass (an extension: MXNet fuses it in its "
    .. "oneDNN subgraph backend). float32 and bfloat16 run on oneDNN when built with it "
    .. "(bfloat16 accumulates in float32 inside oneDNN)." }

op { name = "convolution_backward_data", family = "conv", inputs = { "ograd", "weight", "data" },
  dnnl = { supports = "conv", out_layout = true, layouts = DNNL_LAYOUTS },
  infer = "convolution_backward_data", dtypes = CONV_DT, nondiff = true,
  params = CONV_PARAMS,
  doc = "The gradient of convolution with respect to its data: ograd (the output's "
    .. "gradient, before any act_type) through the transposed convolution with weight. "
    .. "data gives only the shape. Takes convolution's params (act_type ignored)." }

op { name = "convolution_backward_weight", family = "conv", inputs = { "ograd", "data" },
  dnnl = { supports = "conv", layouts = DNNL_LAYOUTS },
  infer = "convolution_backward_weight", dtypes = CONV_DT, nondiff = true,
  params = CONV_PARAMS,
  doc = "The gradient of convolution with respect to its weight: the correlation of data "
    .. "with ograd (the output's gradient, before any act_type), shaped like the weight. "
    .. "Takes convolution's params (act_type ignored)." }

-- Deconvolution's params: convolution's, with MXNet's adj/target_shape, and no_bias
-- true by default (as MXNet's).
local DECONV_PARAMS = {}
for _, q in ipairs(CONV_PARAMS) do
  if q[1] ~= "act_type" then
    DECONV_PARAMS[#DECONV_PARAMS + 1] = q[1] == "no_bias"
      and { "no_bias", "bool", true, doc = "no bias input (MXNet's default for Deconvolution)" }
      or q
  end
  if q[1] == "pad" then
    DECONV_PARAMS[#DECONV_PARAMS + 1] = { "adj", "shape", {},
      doc = "extra size added at the end of each spatial dim (each < stride)" }
    DECONV_PARAMS[#DECONV_PARAMS + 1] = { "target_shape", "shape", {},
      doc = "output spatial size; when given, pad and adj are derived from it (as MXNet)" }
  end
end

-- the convolution whose data gradient a deconvolution is: same kernel/stride/dilate/
-- groups, the pad that target_shape implies, and no bias
local function deconv_as_conv(p, x)
  local k, n = p.kernel, #p.kernel
  local pad = p.pad
  if p.target_shape and #p.target_shape > 0 then
    pad = {}
    local sh = x:shape()
    local last = channel_last(p)
    for i = 1, n do
      local s = p.stride and p.stride[i] or 1
      local d = p.dilate and p.dilate[i] or 1
      local total = s * (sh[last and 1 + i or 2 + i] - 1) + (k[i] - 1) * d + 1 - p.target_shape[i]
      pad[i] = math.floor((total + 1) / 2)
    end
  end
  return { kernel = k, stride = p.stride, dilate = p.dilate, pad = pad, num_group = p.num_group,
    no_bias = true, layout = p.layout }
end

op { name = "deconvolution", family = "conv", amp = "target", inputs = { "data", "weight", "bias?" },
  dnnl = { supports = "conv", layouts = DNNL_LAYOUTS },
  infer = "deconvolution", partial = true, dtypes = { 0, 1 },
  params = DECONV_PARAMS,
  grad = function(F, x, y, g, p, need)
    local X, W, G = x[1], x[2], g[1]
    local q = deconv_as_conv(p, X)
    local r = {}
    if not need or need[1] then r[1] = F.convolution(G, W, q) end
    if not need or need[2] then r[2] = F.convolution_backward_weight(X, G, q) end
    if p.no_bias == false and (not need or need[3]) then
      r[3] = F.sum(G, { axis = bias_axes(#p.kernel + 2, channel_last(p)) })
    end
    return r
  end,
  doc = "MXNet's Deconvolution (transposed convolution), 1-D/2-D/3-D: data (N, C, "
    .. "spatial...) with weight (C, num_filter/num_group, kernel...) plus bias (num_filter) "
    .. "unless no_bias (true by default, as MXNet). Output spatial size (in - 1) stride - 2 pad "
    .. "+ dilate (kernel - 1) + 1 + adj, or target_shape (pad and adj then derived). It is "
    .. "the data gradient of the convolution with the same params; float32 runs on oneDNN." }

op { name = "convolution_sum", family = "conv", inputs = { "data", "weight", "residual", "bias?" },
  dnnl = { supports = "conv", out_layout = true, layouts = DNNL_FWD_LAYOUTS, choose_out = true,
    prepack = "convolution" },
  infer = "convolution_sum", partial = true, dtypes = CONV_DT, inplace = { { 1, 3 } },
  params = CONV_PARAMS,
  grad = function(F, x, y, g, p, need)
    local G = g[1]
    G = act_grad(F, G, y[1], p)
    local r = {}
    if not need or need[3] then r[3] = G end
    return conv_grads(F, x[1], x[2], G, p, need, r, 4)
  end,
  doc = "act(convolution(data, weight, bias) + residual): a convolution with a residual "
    .. "add (ResNet's shortcut) and act_type='none'|'relu' in one pass (an extension: "
    .. "oneDNN's sum and eltwise post-ops, as MXNet's oneDNN subgraph backend fuses it; "
    .. "no MXNet operator of its own). Takes convolution's params; residual has the "
    .. "output's shape and dtype. float32 and bfloat16 run on oneDNN when built with it." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
  convolution = { "Convolution" }, deconvolution = { "Deconvolution" },
}

return ops, MXNET
