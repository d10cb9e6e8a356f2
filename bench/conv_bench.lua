-- bench/conv_bench.lua — 3x3 convolution N32 C64->64 56x56 pad 1 (f32) GFLOP/s of
-- luamx, forward and backward (peers: bench/conv_bench.py, PyTorch; bench/conv_onednn.c,
-- oneDNN called directly on the same problem).
--   luajit bench/conv_bench.lua [--threads=1] [--quick] [--batch=32]
-- Benches (2 N K C H W 9 flops per forward; backward = data + weights, twice that):
--   conv3x3_fwd          data already in oneDNN's layout (a chain of oneDNN ops; the
--                        output stays in it), weights reordered per call
--   conv3x3_fwd_nchw     row-major NCHW data and output (reordered in and out per call)
--   conv3x3_bwd          convolution_backward_data + convolution_backward_weight with
--                        data in the forward's layout, ograd in nChw16c (a chain's)
--   conv3x3_fwd_bf16     (when bf16 runs) data and weights bfloat16
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C
H.env_note()

local N, K, Cc, S = tonumber(A.batch or 32), 64, 64, 56
local flops = 2 * N * K * Cc * S * S * 9
local note = string.format("threads=%d N%d C%d K%d %dx%d", threads, N, Cc, K, S, S)
local o = { kernel = { 3, 3 }, pad = { 1, 1 }, num_filter = K, no_bias = true }

local out = ffi.new("mx_tensor*[1]")
local function blocked(x, fmt)
  assert(C.mx_tensor_to_layout(x.h, C.MX_LAYOUT_ONEDNN, fmt, out) == 0, ffi.string(C.mx_last_error()))
  return nd._wrap(out[0])
end

local x = nd.random.uniform(-1, 1, { N, Cc, S, S })
local w = nd.random.uniform(-1, 1, { K, Cc, 3, 3 })
local g = nd.random.uniform(-1, 1, { N, K, S, S })
-- the layout oneDNN's primitive picks on this machine: that of a conv's output on a
-- blocked input (nhwc with brgconv on AVX-512)
local y0 = nd.convolution(blocked(x, "nhwc"), w, o)
local fmt = "nhwc"
nd.waitall()
-- the backward's ograd in nChw16c: the layout the backward-data primitive (jit:avx512_core)
-- keeps its result in, so what the next layer's backward hands over in a chain
local xb, gb = blocked(x, fmt), blocked(g, "nChw16c")
local reps = A.quick and 2 or 7

local function bench(name, f, fl)
  local t = H.time(function(k)
    for _ = 1, k do f() end
    nd.waitall()
  end, { n = 1, reps = reps, warmup = 2 })
  H.report(name, fl / t.median, "GFLOP/s", { note = note })
end
assert(C.mx_tensor_layout(y0.h) == 1)

bench("conv3x3_fwd", function() return nd.convolution(xb, w, o) end, flops)
bench("conv3x3_fwd_nchw", function() return nd.convolution(x, w, o) end, flops)
bench("conv3x3_bwd", function()
  nd.convolution_backward_data(gb, w, xb, o)
  return nd.convolution_backward_weight(gb, xb, o)
end, 2 * flops)
bench("conv3x3_bwd_nchw", function()
  nd.convolution_backward_data(g, w, x, o)
  return nd.convolution_backward_weight(g, x, o)
end, 2 * flops)

-- bfloat16 (row-major NCHW in and out, like conv3x3_fwd_nchw; oneDNN's bf16 primitive
-- where the CPU has AVX-512 BF16), and its error against float64 on the same rounded inputs
local xh, wh, gh = x:astype("bfloat16"), w:astype("bfloat16"), g:astype("bfloat16")
bench("conv3x3_fwd_bf16_nchw", function() return nd.convolution(xh, wh, o) end, flops)
bench("conv3x3_bwd_bf16_nchw", function()
  nd.convolution_backward_data(gh, wh, xh, o)
  return nd.convolution_backward_weight(gh, xh, o)
end, 2 * flops)
if not A.quick then
  -- the accuracy lost: bf16 (inputs rounded, output rounded) against f32 on the f32 inputs
  local ref = nd.convolution(x, w, o)
  local function rel(a) return (nd.max(nd.abs(a:astype("float32") - ref)) / nd.max(nd.abs(ref))):item() end
  io.write(string.format("# bf16 vs f32: max |error| / max |out| %.2e (f32 on bf16-rounded inputs: "
    .. "%.2e)\n", rel(nd.convolution(xh, wh, o)),
    rel(nd.convolution(xh:astype("float32"), wh:astype("float32"), o))))
end
