-- core/ops/quantize.lua — INT8 inference (mx.contrib.quantization): quantize, dequantize,
-- requantize and the quantized layers: the op table's quantize family (kernels/ref/
-- quantize.c, kernels/cpu/quantize.c, kernels/dnnl/quantize.c and spec/quantize_spec.lua
-- share the base name). core/ops/optable.lua joins the families and documents every field.
--
-- Quantized values are symmetric with no zero point (oneDNN's, and MXNet's oneDNN
-- backend): an int8 tensor q with range (min, max) means q * R / 127, R = max(|min|, |max|);
-- a uint8 tensor means q * max / 255 (its min is 0). Ranges travel as float32 tensors of
-- shape (1) beside the data (MXNet's min/max outputs). The quantized layers take int8
-- weights with one float32 scale per output channel (`wscale`: weight = q * wscale) and
-- float32 biases; given a calibrated output range (min/max_calib_range) they write int8
-- (uint8 when the range is non-negative) requantized in the same pass, else float32.
-- The oneDNN kernels (kernels/dnnl/quantize.c) round halves to even where the reference
-- rounds them away from zero, and saturate int8 outputs at -128 where it stops at -127:
-- they agree with it within one unit.
local ops = {}
local function op(t) ops[#ops + 1] = t end

local dir = (debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "")
local function params_of(family, name)
  for _, o in ipairs((dofile(dir .. family .. ".lua"))) do
    if o.name == name then return o.params end
  end
  error("quantize.lua: no op " .. name .. " in " .. family)
end

-- fully_connected's params with its int8 activations only (relu)
local function fc_params()
  local r = {}
  for i, p in ipairs(params_of("linalg", "fully_connected")) do
    if p[1] == "act_type" then
      p = { "act_type", "enum", "none", values = { "none", "relu" }, doc = "relu applied in the same pass" }
    end
    r[i] = p
  end
  return r
end

local CALIB = {
  { "min_calib_range", "float", nil, doc = "calibrated minimum of the output (real value)" },
  { "max_calib_range", "float", nil, doc = "calibrated maximum of the output (real value)" },
}
local function with(list, extra)
  local r = {}
  for _, p in ipairs(list) do r[#r + 1] = p end
  for _, p in ipairs(extra) do r[#r + 1] = p end
  return r
end
local OUT_Q = { "out_type", "enum", "int8", values = { "int8", "uint8", "auto" },
  doc = "int8, uint8, or auto (uint8 when the calibrated min is >= 0)" }
local OUT_L = { "out_type", "enum", "auto", values = { "auto", "int8", "uint8", "float32" },
  doc = "auto: int8/uint8 by the calibrated range when there is one, else float32" }
local RANGES = { "out", "min_range", "max_range" }

op { name = "quantize_v2", family = "quantize", inputs = { "data" }, outputs = RANGES,
  infer = "quantize_v2", cpu = true, dtypes = { 0 }, nondiff = true,
  params = with({ OUT_Q }, CALIB),
  doc = "MXNet's quantize_v2: float32 data to int8 (q = round(x * 127 / R), R = max(|min|, "
    .. "|max|)) or uint8 (q = round(x * 255 / max), negatives 0), the range from "
    .. "min/max_calib_range or, without them, from the data's min and max. Returns the "
    .. "quantized data and its range (min_range, max_range), shape (1) each." }
op { name = "dequantize", family = "quantize", inputs = { "data", "min_range", "max_range" },
  infer = "dequantize", cpu = true, dtypes = "all", nondiff = true,
  params = { { "out_type", "enum", "float32", values = { "float32" } } },
  doc = "MXNet's dequantize: int8 (q * R / 127), uint8 (q * max / 255) or int32 "
    .. "(q * R / 2147483647) data with its range back to float32." }
op { name = "requantize", family = "quantize", inputs = { "data", "min_range", "max_range" },
  outputs = RANGES, infer = "requantize", dtypes = "all", nondiff = true,
  params = with({ OUT_Q }, CALIB),
  doc = "MXNet's requantize: int32 data with its range (q * R / 2147483647) to int8/uint8 with "
    .. "the calibrated range, or (none given) the range of the data's actual values." }

local CONV_Q = with(params_of("conv", "convolution"), with({
  { "with_sum", "bool", false, doc = "add the quantized `sum` input (a residual) before postsum_act" },
  { "postsum_act", "enum", "none", values = { "none", "relu" }, doc = "activation after the sum" },
  OUT_L }, CALIB))
op { name = "quantized_conv", family = "quantize",
  inputs = { "data", "min_data", "max_data", "weight", "wscale", "bias?", "sum?", "min_sum?",
    "max_sum?" },
  outputs = RANGES, infer = "quantized_conv", dtypes = "all", nondiff = true,
  inplace_fn = "quantized_conv",
  dnnl = { supports = "quantize", out_layout = true, layouts = { "onednn" }, choose_out = true },
  params = CONV_Q,
  doc = "Convolution of int8/uint8 data (with its range) by int8 weight (num_filter, C/group, "
    .. "kernel...) scaled per output channel by wscale (num_filter), plus a float32 bias "
    .. "(unless no_bias), then act_type, then (with_sum) the int8/uint8 `sum` with its range, "
    .. "then postsum_act: MXNet's oneDNN quantized convolution (_sg_mkldnn_conv with "
    .. "quantized=true; batchnorm folded in by quantize_net). The inputs after wscale are, in "
    .. "order, bias (unless no_bias) and sum, min_sum, max_sum (with_sum). int32 accumulation; "
    .. "the output is int8/uint8 in the calibrated range, or float32 without one." }
op { name = "quantized_fully_connected", family = "quantize",
  inputs = { "data", "min_data", "max_data", "weight", "wscale", "bias?" }, outputs = RANGES,
  infer = "quantized_fully_connected", dtypes = "all", nondiff = true,
  dnnl = { supports = "quantize" },
  params = with(fc_params(), with({ OUT_L }, CALIB)),
  doc = "fully_connected of int8/uint8 data (with its range) by int8 weight (num_hidden, K) "
    .. "scaled per output unit by wscale, plus a float32 bias, then act_type: MXNet's "
    .. "oneDNN quantized FullyConnected (_sg_mkldnn_fully_connected). int8/uint8 output in "
    .. "the calibrated range, or float32 without one (MXNet's enable_float_output)." }
op { name = "quantized_pooling", family = "quantize", inputs = { "data", "min_data", "max_data" },
  outputs = RANGES, infer = "quantized_pooling", dtypes = "all", nondiff = true,
  dnnl = { supports = true, out_layout = true, layouts = { "onednn" } },
  params = params_of("pool", "pooling"),
  doc = "MXNet's quantized_pooling: max or avg pooling of int8/uint8 data (averages rounded "
    .. "to nearest); the range passes through." }
op { name = "quantized_act", family = "quantize", inputs = { "data", "min_data", "max_data" },
  outputs = RANGES, infer = "quantized_pass", cpu = true, dtypes = "all", nondiff = true,
  params = { { "act_type", "enum", "relu", values = { "relu" } } },
  doc = "MXNet's quantized_act: relu of int8/uint8 data (negatives to 0); the range passes." }
op { name = "quantized_flatten", family = "quantize", inputs = { "data", "min_data", "max_data" },
  outputs = RANGES, infer = "quantized_flatten", dtypes = "all", nondiff = true,
  doc = "MXNet's quantized_flatten: (N, ...) to (N, prod(...)); the range passes." }
op { name = "quantized_elemwise_add", family = "quantize",
  inputs = { "lhs", "rhs", "lhs_min", "lhs_max", "rhs_min", "rhs_max" }, outputs = RANGES,
  infer = "quantized_elemwise_add", dtypes = "all", nondiff = true,
  params = with({ { "act_type", "enum", "none", values = { "none", "relu" } }, OUT_L }, CALIB),
  doc = "MXNet's quantized_elemwise_add: the sum of two int8/uint8 tensors of one shape, each "
    .. "with its range, then act_type; int8/uint8 in the calibrated range or float32." }
op { name = "quantized_concat", family = "quantize", inputs = { "data" }, variadic = true,
  outputs = RANGES, infer = "quantized_concat", dtypes = "all", nondiff = true,
  params = { { "num_args", "int", nil, doc = "number of data inputs (required)" },
    { "dim", "axis", 2, doc = "axis to join along (MXNet's default 1 -> 2)" } },
  doc = "MXNet's quantized_concat: num_args int8/uint8 tensors, then each one's min and max "
    .. "(data1, ..., min1, max1, min2, max2, ...), joined along dim in the widest of their "
    .. "ranges (each input rescaled to it); int8 when any input is int8." }

local MXNET = {
  quantize_v2 = { "_contrib_quantize_v2" }, dequantize = { "_contrib_dequantize" },
  requantize = { "_contrib_requantize" }, quantized_pooling = { "_contrib_quantized_pooling" },
  quantized_act = { "_contrib_quantized_act" }, quantized_flatten = { "_contrib_quantized_flatten" },
  quantized_concat = { "_contrib_quantized_concat" },
}
return ops, MXNET
