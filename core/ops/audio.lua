-- core/ops/audio.lua — audio ops: the short-time Fourier transform and its inverse, the
-- op table's audio family (kernels/*/audio.c and spec/audio_spec.lua share the base
-- name). core/ops/optable.lua joins the families in op order and documents every field.
--
-- Complex values are a trailing axis of 2 (real, imaginary), as torch.view_as_real
-- lays them out: stft's (N, F, T, 2) is torch.stft(..., return_complex=True) viewed
-- as real. Signals are (L) or (N, L).
local ops = {}
local function op(t) ops[#ops + 1] = t end

local N_FFT = { "n_fft", "int", nil, doc = "FFT size (required): frames of n_fft samples" }
local HOP = { "hop_length", "int", nil, doc = "samples between frames (default n_fft / 4, floored)" }
local CENTER = { "center", "bool", true, doc = "pad n_fft / 2 on both sides so frame t is centred on "
  .. "sample t * hop_length" }
local NORM = { "normalized", "bool", false, doc = "scale the transform by 1 / sqrt(n_fft)" }
local ONESIDED = { "onesided", "bool", true, doc = "keep the n_fft / 2 + 1 non-negative frequencies "
  .. "(false: all n_fft)" }
local PAD = { "pad_mode", "enum", "reflect", values = { "reflect", "constant" },
  doc = "how center pads: mirror the signal (reflect, without repeating the edge sample) or zeros" }
local LENGTH = { "length", "int", nil, doc = "the output's length (default: what the frames span, less "
  .. "the centre padding); cut or zero-padded to it" }

local function stft_opts(p)
  return { n_fft = p.n_fft, hop_length = p.hop_length, center = p.center, pad_mode = p.pad_mode,
    normalized = p.normalized, onesided = p.onesided }
end
local function istft_opts(p)
  return { n_fft = p.n_fft, hop_length = p.hop_length, center = p.center, normalized = p.normalized,
    onesided = p.onesided, length = p.length }
end

op { name = "stft", family = "audio", cpu = true, infer = "stft", inputs = { "data", "window" },
  dtypes = "f32f64", params = { N_FFT, HOP, CENTER, PAD, NORM, ONESIDED },
  grad = function(F, x, _, g, p)
    return { F.stft_backward(g[1], x[1], x[2], stft_opts(p)) }
  end,
  doc = "Short-time Fourier transform (torch.stft): out[n, f, t] = sum_k window[k] * "
    .. "x[n, t * hop_length + k] * exp(-2 pi i f k / n_fft) over the (centre-padded) signal, as "
    .. "(N, F, T, 2) real/imaginary pairs ((F, T, 2) for a 1-d signal). window (W <= n_fft) is "
    .. "zero-padded on both sides to n_fft as torch does. Gradient: data only (the window "
    .. "takes none)." }
op { name = "stft_backward", family = "audio", cpu = true, infer = "stft_backward",
  inputs = { "ograd", "data", "window" }, dtypes = "f32f64", shape_only = { 2 }, nondiff = true,
  params = { N_FFT, HOP, CENTER, PAD, NORM, ONESIDED },
  doc = "stft's data gradient: each frame's ograd through the adjoint DFT, times the window, "
    .. "overlap-added, with the centre padding folded back (reflect) or dropped (constant)." }

op { name = "istft", family = "audio", cpu = true, infer = "istft", inputs = { "data", "window" },
  dtypes = "f32f64", params = { N_FFT, HOP, CENTER, NORM, ONESIDED, LENGTH },
  grad = function(F, x, _, g, p)
    return { F.istft_backward(g[1], x[1], x[2], istft_opts(p)) }
  end,
  doc = "Inverse short-time Fourier transform (torch.istft): data (N, F, T, 2) or (F, T, 2) "
    .. "real/imaginary pairs; each frame's inverse DFT (the real part; onesided: the Hermitian "
    .. "spectrum, the imaginary parts of the 0 and n_fft / 2 bins ignored) times the window, "
    .. "overlap-added and divided by the overlap-added squared window, the centre padding cut. "
    .. "An envelope below 1e-11 inside the output is an error (the window does not overlap "
    .. "enough: torch's NOLA check). Out (N, L) or (L). Gradient: data only." }
op { name = "istft_backward", family = "audio", cpu = true, infer = "istft_backward",
  inputs = { "ograd", "data", "window" }, dtypes = "f32f64", shape_only = { 2 }, nondiff = true,
  params = { N_FFT, HOP, CENTER, NORM, ONESIDED, LENGTH },
  doc = "istft's data gradient: ograd divided by the envelope, per frame times the window, "
    .. "through the adjoint of the inverse DFT." }

return ops, {}
