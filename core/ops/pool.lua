-- core/ops/pool.lua — the op table's pool family:
-- pooling, adaptive average pooling, upsampling and bilinear resizing, and their backward
-- ops. kernels/*/pool.c and spec/pool_spec.lua share the base name. core/ops/optable.lua
-- joins the families in op order and documents every field.
local ops = {}
local function op(t) ops[#ops + 1] = t end

---------------------------------------------------------------- pooling
local LAYOUTS = { "NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC" }
local POOL = {
  { "kernel", "ints", {}, doc = "window size per spatial dim (1 to 3 dims)" },
  { "pool_type", "enum", "max", values = { "max", "avg", "sum", "lp" } },
  { "global_pool", "bool", false, doc = "pool over the whole spatial extent (kernel ignored)" },
  { "cudnn_off", "bool", false, doc = "accepted and ignored (MXNet's cuDNN switch)" },
  { "pooling_convention", "enum", "valid", values = { "valid", "full", "same" },
    doc = "output size: valid floor((x+2p-k)/s)+1, full ceil((x+2p-k)/s)+1, same ceil(x/s) (1-D)" },
  { "stride", "ints", {}, doc = "stride per spatial dim (default 1)" },
  { "pad", "ints", {}, doc = "zero padding per spatial dim (default 0)" },
  { "p_value", "int", nil, doc = "lp pooling's p (1, 2 or 3)" },
  { "count_include_pad", "bool", true, doc = "avg: the divisor counts padded cells" },
  { "layout", "enum", nil, values = LAYOUTS, doc = "data layout (default NCW/NCHW/NCDHW)" },
}
-- oneDNN (kernels/dnnl/pool.c): max/avg in float32; a blocked input keeps its layout
local DNNL_POOL = { supports = "pool", out_layout = true, layouts = { "onednn" } }
op { name = "pooling", family = "pool", inputs = { "data" }, infer = "pooling", dtypes = "float",
  dnnl = DNNL_POOL,
  params = POOL,
  grad = function(F, x, y, g, p) return { F.pooling_backward(g[1], x[1], y[1], p) } end,
  doc = "MXNet's Pooling over 1 to 3 spatial dims: max, avg (count_include_pad), sum or lp "
    .. "(p_value) over windows of `kernel` with `stride` and zero `pad`; global_pool pools "
    .. "the whole extent. Output sizes follow pooling_convention exactly as MXNet (full = "
    .. "ceil mode; windows past the padded input are clipped). oneDNN runs max/avg in float32 and bfloat16." }
op { name = "pooling_backward", family = "pool", inputs = { "ograd", "data", "out" },
  dnnl = DNNL_POOL,
  outputs = { "ddata" }, infer = "pooling_backward", dtypes = "float",
  params = POOL, nondiff = true,
  doc = "The gradient of pooling with respect to its data, from the output gradient, the "
    .. "data and pooling's output. max sends each gradient to the window's first maximum." }

op { name = "adaptive_avg_pooling2d", family = "pool", inputs = { "data" },
  infer = "adaptive_avg_pooling2d", dtypes = "float",
  params = { { "output_size", "ints", {}, doc = "(height, width) or one size for both (default 1)" } },
  grad = function(F, x, y, g, p) return { F.adaptive_avg_pooling2d_backward(g[1], x[1], p) } end,
  doc = "MXNet's contrib AdaptiveAvgPooling2D on NCHW data: output cell i averages input rows "
    .. "floor(i*H/O) to ceil((i+1)*H/O)-1 (and the same for columns)." }
op { name = "adaptive_avg_pooling2d_backward", family = "pool", inputs = { "ograd", "data" },
  outputs = { "ddata" }, infer = "adaptive_avg_pooling2d_backward", dtypes = "float",
  params = { { "output_size", "ints", {} } }, nondiff = true,
  doc = "The data gradient of adaptive_avg_pooling2d." }

-- nearest upsampling's gradient: each input's share of g (its channels in concat mode),
-- summed over the scale x scale blocks by sum pooling
local function nearest_grad(F, x, g, p, need)
  local s0, r, off = x[1]:shape()[3] * p.scale, {}, 0
  for i = 1, #x do
    local sh = x[i]:shape()
    local gi = g[1]
    if (p.multi_input_mode or "concat") == "concat" and #x > 1 then
      gi = F.slice_axis(g[1], { axis = 2, begin = off + 1, ["end"] = off + sh[2] })
    end
    off = off + sh[2]
    if need == nil or need[i] ~= false then
      local k = math.floor(s0 / sh[3])
      r[i] = k == 1 and F.copy(gi) or F.pooling(gi, { kernel = { k, k }, stride = { k, k },
        pool_type = "sum" })
    end
  end
  return r
end
op { name = "upsampling", family = "pool", inputs = { "data" }, variadic = true,
  infer = "upsampling", dtypes = "float",
  params = { { "scale", "int", nil, doc = "upsampling factor (required)" },
    { "num_filter", "int", 0, doc = "bilinear: the channels (0: data's)" },
    { "sample_type", "enum", "nearest", values = { "nearest", "bilinear" } },
    { "multi_input_mode", "enum", "concat", values = { "concat", "sum" },
      doc = "nearest with several inputs: join along channels or add" },
    { "num_args", "int", 1, doc = "number of inputs (bilinear: 2, data and weight)" },
    { "workspace", "int", 512, doc = "accepted and ignored (MXNet's workspace limit)" } },
  grad = function(F, x, y, g, p, need)
    if (p.sample_type or "nearest") == "nearest" then return nearest_grad(F, x, g, p, need) end
    local dd, dw = F.upsampling_backward(g[1], x[1], x[2], { scale = p.scale })
    return { dd, dw }
  end,
  doc = "MXNet's UpSampling on NCHW data. nearest: each input (num_args of them) repeated to "
    .. "scale times the first input's size, then joined along channels (concat) or added "
    .. "(sum). bilinear: data and a weight (C, 1, k, k), k = 2*scale - scale%2: a depthwise "
    .. "transposed convolution with stride scale and pad ceil((scale-1)/2), as MXNet." }
op { name = "upsampling_backward", family = "pool", inputs = { "ograd", "data", "weight" },
  outputs = { "ddata", "dweight" }, infer = "upsampling_backward", dtypes = "float",
  params = { { "scale", "int", 1 } }, nondiff = true,
  doc = "The data and weight gradients of bilinear upsampling." }

local RESIZE = { { "height", "int", 1, doc = "output height (mode size without scale_height)" },
  { "width", "int", 1, doc = "output width (mode size without scale_width)" },
  { "scale_height", "float", nil, doc = "height factor (modes size and odd_scale)" },
  { "scale_width", "float", nil, doc = "width factor (modes size and odd_scale)" },
  { "mode", "enum", "size", values = { "size", "odd_scale", "like", "to_even_down",
    "to_even_up", "to_odd_down", "to_odd_up" } },
  { "align_corners", "bool", true, doc = "corner pixel centres map onto each other" } }
-- variadic (data, or data and like) so that bilinear_resize2d(x, opts) reads naturally
op { name = "bilinear_resize2d", family = "pool", inputs = { "data" }, variadic = true,
  infer = "bilinear_resize2d", dtypes = "float", params = RESIZE,
  grad = function(F, x, y, g, p)
    local d = F.bilinear_resize2d_backward(g[1], x[1], p)
    if x[2] then return { d, F.zeros_like(x[2]) } end
    return { d }
  end,
  doc = "MXNet's contrib BilinearResize2D on NCHW data: bilinear interpolation to the size "
    .. "the mode gives (size: height/width or the input times scale_height/scale_width; "
    .. "like: a second input's H and W; odd_scale, to_even_down/up, to_odd_down/up), source "
    .. "coordinates as MXNet 1.9 (align_corners: x*(in-1)/(out-1), else (x+0.5)*in/out-0.5 "
    .. "clamped at 0)." }
op { name = "bilinear_resize2d_backward", family = "pool", inputs = { "ograd", "data" },
  outputs = { "ddata" }, infer = "bilinear_resize2d_backward", dtypes = "float",
  params = RESIZE, nondiff = true,
  doc = "The data gradient of bilinear_resize2d." }

-- MXNet 1.9's operator names of this family's ops whose semantics match.
local MXNET = {
  pooling = { "Pooling" }, pooling_backward = { "_backward_Pooling" },
  adaptive_avg_pooling2d = { "_contrib_AdaptiveAvgPooling2D" },
  upsampling = { "UpSampling" },
  bilinear_resize2d = { "_contrib_BilinearResize2D" },
}

return ops, MXNET
