-- core/ops/conv.lua — the op table's conv family (issue 11: convolutional networks);
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
  { "act_type", "enum", "none", values = { "none", "relu" },
    doc = "activation applied in the same pass (a oneDNN post-op; Conv2D's activation='relu')" },
}

-- the axes of the output's non-channel dims (bias gradient), 1-based
local function bias_axes(nd, last)
  local ax = {}
  for i = 1, nd do
    if i ~= (last and nd or 2) then ax[#ax + 1] = i end
  end
  return ax
end

local function channel_last(p)
  local l = p.layout
  return l == "NWC" or l == "NHWC" or l == "NDHWC"
end

op { name = "convolution", family = "conv", inputs = { "data", "weight", "bias?" },
  infer = "convolution", partial = true, dtypes = { 0, 1 },
  params = CONV_PARAMS,
  grad = function(F, x, y, g, p, need)
    local X, W, G = x[1], x[2], g[1]
    if p.act_type == "relu" then G = F.relu_backward(G, y[1]) end
    local r = {}
    if not need or need[1] then r[1] = F.convolution_backward_data(G, W, X, p) end
    if not need or need[2] then r[2] = F.convolution_backward_weight(G, X, p) end
    if not p.no_bias and (not need or need[3]) then
      r[3] = F.sum(G, { axis = bias_axes(G:ndim(), channel_last(p)) })
    end
    return r
  end,
  doc = "MXNet's Convolution, 1-D/2-D/3-D: data (N, C, spatial...) convolved with weight "
    .. "(num_filter, C/num_group, kernel...) plus bias (num_filter) unless no_bias. Output "
    .. "spatial size floor((in + 2 pad - dilate (kernel - 1) - 1) / stride) + 1. num_group "
    .. "= C is depthwise. Weight and bias dims are inferred from data (partial inference). "
    .. "act_type='relu' applies relu in the same pass (an extension: MXNet fuses it in its "
    .. "oneDNN subgraph backend). float32 runs on oneDNN when built with it." }

op { name = "convolution_backward_data", family = "conv", inputs = { "ograd", "weight", "data" },
  infer = "convolution_backward_data", dtypes = { 0, 1 }, nondiff = true,
  params = CONV_PARAMS,
  doc = "The gradient of convolution with respect to its data: ograd (the output's "
    .. "gradient, before any act_type) through the transposed convolution with weight. "
    .. "data gives only the shape. Takes convolution's params (act_type ignored)." }

op { name = "convolution_backward_weight", family = "conv", inputs = { "ograd", "data" },
  infer = "convolution_backward_weight", dtypes = { 0, 1 }, nondiff = true,
  params = CONV_PARAMS,
  doc = "The gradient of convolution with respect to its weight: the correlation of data "
    .. "with ograd (the output's gradient, before any act_type), shaped like the weight. "
    .. "Takes convolution's params (act_type ignored)." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
  convolution = { "Convolution" },
}

return ops, MXNET
