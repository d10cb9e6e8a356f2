-- mx.audio — audio features on the stft/istft ops: windows, spectrograms, mel
-- filterbanks, log scaling, MFCC (librosa's definitions and defaults), resampling
-- (Debian's libsoxr, librosa's default 'soxr_hq') and audio files (mx.audio.io, through
-- libsndfile).
--
--   local audio = require("mx.audio")
--   local y, sr = audio.load("speech.wav", { mono = true })
--   local m = audio.mfcc(y, { sr = sr, n_mfcc = 13 })
--
-- Signals are (L) or (N, L) tensors; spectra (..., F, T).
local ffi = require("ffi")
local nd = require("mx.nd")
local io_ = require("mx.audio.io")

local M = {}
M.load, M.save, M.info = io_.load, io_.save, io_.info

local function check_opts(who, o, valid, level)
  o = o or {}
  if type(o) ~= "table" then error(who .. ": options must be a table, got " .. type(o), level + 1) end
  for k in pairs(o) do
    if not valid[k] then
      local names = {}
      for n in pairs(valid) do names[#names + 1] = n end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (valid: %s)", who, tostring(k), table.concat(names, ", ")),
        level + 1)
    end
  end
  return o
end

-- the arguments every function checks first: a tensor, a count, a frequency (errors at
-- the user's line: a frequency may come from an option another function passes on)
local caller = require("mx.core.caller")
local function tensor(who, what, x)
  if not nd.is_tensor(x) then
    error(string.format("%s: %s must be a tensor, got %s", who, what, type(x)), caller.level())
  end
end
local function count(who, what, n)
  if type(n) ~= "number" or n < 1 or n % 1 ~= 0 or n > 2 ^ 31 then
    error(string.format("%s: %s must be a whole number >= 1, got %s", who, what, tostring(n)),
      caller.level())
  end
end
local function hz(who, what, f)
  if type(f) ~= "number" or f ~= f or f < 0 or f == math.huge then
    error(string.format("%s: %s must be a finite number >= 0, got %s", who, what, tostring(f)),
      caller.level())
  end
end

---------------------------------------------------------------- windows
-- hann_window(n, {periodic=true, dtype=}) and hamming_window: scipy's get_window(...,
-- fftbins=periodic) / torch's *_window
local function cosine_window(who, n, a, o)
  count(who, "n", n)
  o = check_opts(who, o, { periodic = true, dtype = true }, 3)
  local periodic = o.periodic ~= false
  local d = periodic and n or (n - 1)
  local t = {}
  for i = 0, n - 1 do t[i + 1] = d == 0 and 1 or (a - (1 - a) * math.cos(2 * math.pi * i / d)) end
  return nd.array(t, { dtype = o.dtype or "float32" })
end
function M.hann_window(n, o)
  local w = cosine_window("audio.hann_window", n, 0.5, o)
  return w
end
function M.hamming_window(n, o)
  local w = cosine_window("audio.hamming_window", n, 0.54, o)
  return w
end

local function window_of(w, win_length, dtype)
  if nd.is_tensor(w) then return w:astype(dtype) end
  if w == nil or w == "hann" then return M.hann_window(win_length, { dtype = dtype }) end
  if w == "hamming" then return M.hamming_window(win_length, { dtype = dtype }) end
  error("unknown window '" .. tostring(w) .. "' (hann, hamming or a tensor)", 3)
end

---------------------------------------------------------------- spectrograms
local STFT_OPTS = { n_fft = true, hop_length = true, win_length = true, window = true, center = true,
  pad_mode = true, normalized = true, onesided = true, power = true }

-- stft(y, {n_fft=2048, hop_length=win_length/4, win_length=n_fft, window="hann",
-- center=true, pad_mode="constant", normalized=false}) -> (..., F, T, 2): librosa's
-- defaults (torch's pad_mode default is "reflect": pass it for torch.stft's results)
function M.stft(y, o)
  tensor("audio.stft", "y", y)
  o = check_opts("audio.stft", o, STFT_OPTS, 2)
  local n_fft = o.n_fft or 2048
  local wl = o.win_length or n_fft
  local w = window_of(o.window, wl, y:dtype())
  return nd.stft(y, w, { n_fft = n_fft, hop_length = o.hop_length or math.floor(wl / 4),
    center = o.center ~= false, pad_mode = o.pad_mode or "constant", normalized = o.normalized,
    onesided = o.onesided })
end

-- istft(S, {n_fft=, hop_length=, win_length=, window=, center=true, length=})
function M.istft(S, o)
  tensor("audio.istft", "S", S)
  if S:ndim() < 3 then
    error("audio.istft: S must be (..., F, T, 2), got " .. S:ndim() .. " dims", 2)
  end
  o = check_opts("audio.istft", o, { n_fft = true, hop_length = true, win_length = true, window = true,
    center = true, normalized = true, onesided = true, length = true }, 2)
  local F = S:shape()[#S:shape() - 2]
  local n_fft = o.n_fft or 2 * (F - 1)
  local wl = o.win_length or n_fft
  return nd.istft(S, window_of(o.window, wl, S:dtype()), { n_fft = n_fft,
    hop_length = o.hop_length or math.floor(wl / 4), center = o.center ~= false,
    normalized = o.normalized, onesided = o.onesided, length = o.length })
end

-- spectrogram(y, {power=2, stft options}) -> |stft|^power (..., F, T)
function M.spectrogram(y, o)
  tensor("audio.spectrogram", "y", y)
  if o ~= nil and type(o) ~= "table" then
    error("audio.spectrogram: options must be a table, got " .. type(o), 2)
  end
  o = check_opts("audio.spectrogram", o, STFT_OPTS, 2)
  local power = o.power or 2
  local so = {}
  for k, v in pairs(o) do if k ~= "power" then so[k] = v end end
  local S = M.stft(y, so)
  local sq = nd.sum(nd.mul(S, S), { axis = -1 })
  if power == 2 then return sq end
  if power == 1 then return nd.sqrt(sq) end
  return nd.power(sq, power / 2)
end

---------------------------------------------------------------- mel scale
local function hz_to_mel(f, htk)
  hz("audio.hz_to_mel", "f", f)
  if htk then return 2595 * math.log10(1 + f / 700) end
  local f_sp = 200 / 3
  local mels = f / f_sp
  local min_log_hz, min_log_mel, logstep = 1000, 1000 / f_sp, math.log(6.4) / 27
  if f >= min_log_hz then mels = min_log_mel + math.log(f / min_log_hz) / logstep end
  return mels
end
local function mel_to_hz(m, htk)
  hz("audio.mel_to_hz", "m", m)
  if htk then return 700 * (10 ^ (m / 2595) - 1) end
  local f_sp = 200 / 3
  local f = f_sp * m
  local min_log_hz, min_log_mel, logstep = 1000, 1000 / f_sp, math.log(6.4) / 27
  if m >= min_log_mel then f = min_log_hz * math.exp(logstep * (m - min_log_mel)) end
  return f
end
M.hz_to_mel, M.mel_to_hz = hz_to_mel, mel_to_hz

-- mel_frequencies(n_mels=128, {fmin=0, fmax=11025, htk=false}) -> Lua list of Hz
function M.mel_frequencies(n, o)
  count("audio.mel_frequencies", "n", n)
  o = check_opts("audio.mel_frequencies", o, { fmin = true, fmax = true, htk = true }, 2)
  local lo, hi = hz_to_mel(o.fmin or 0, o.htk), hz_to_mel(o.fmax or 11025, o.htk)
  local r = {}
  for i = 0, n - 1 do r[i + 1] = mel_to_hz(lo + (hi - lo) * i / (n - 1), o.htk) end
  return r
end

-- mel_filterbank{sr=22050, n_fft=2048, n_mels=128, fmin=0, fmax=sr/2, htk=false,
-- norm="slaney"} -> (n_mels, 1 + n_fft/2) float32: librosa.filters.mel's triangles
function M.mel_filterbank(o)
  o = check_opts("audio.mel_filterbank", o, { sr = true, n_fft = true, n_mels = true, fmin = true,
    fmax = true, htk = true, norm = true, dtype = true }, 2)
  local sr, n_fft, n_mels = o.sr or 22050, o.n_fft or 2048, o.n_mels or 128
  local fmax = o.fmax or sr / 2
  local nf = 1 + math.floor(n_fft / 2)
  local fft = {}
  for i = 0, nf - 1 do fft[i + 1] = (sr / 2) * i / (nf - 1) end
  local mel_f = M.mel_frequencies(n_mels + 2, { fmin = o.fmin or 0, fmax = fmax, htk = o.htk })
  local w = {}
  local norm = o.norm == nil and "slaney" or o.norm
  for i = 1, n_mels do
    local fd1, fd2 = mel_f[i + 1] - mel_f[i], mel_f[i + 2] - mel_f[i + 1]
    local enorm = norm == "slaney" and 2 / (mel_f[i + 2] - mel_f[i]) or 1
    for j = 1, nf do
      local lower = (fft[j] - mel_f[i]) / fd1
      local upper = (mel_f[i + 2] - fft[j]) / fd2
      local v = math.max(0, math.min(lower, upper))
      w[(i - 1) * nf + j] = v * enorm
    end
  end
  return nd.array(w, { dtype = o.dtype or "float32" }):reshape({ n_mels, nf })
end

-- apply a (M, F) matrix to spectra (..., F, T) -> (..., M, T)
local function apply_fb(fb, S)
  local s = S:shape()
  local F, T = s[#s - 1], s[#s]
  if #s == 2 then return nd.dot(fb, S) end
  local lead = 1
  for i = 1, #s - 2 do lead = lead * s[i] end
  local flat = nd.reshape(nd.transpose(nd.reshape(S, { lead, F, T }), { axes = { 2, 1, 3 } }), { F,
    lead * T })
  local out = nd.reshape(nd.dot(fb, flat), { fb:shape()[1], lead, T })
  local shape = {}
  for i = 1, #s - 2 do shape[i] = s[i] end
  shape[#shape + 1], shape[#shape + 2] = fb:shape()[1], T
  return nd.reshape(nd.transpose(out, { axes = { 2, 1, 3 } }), shape)
end

local MEL_OPTS = { sr = true, n_mels = true, fmin = true, fmax = true, htk = true, norm = true }
for k in pairs(STFT_OPTS) do MEL_OPTS[k] = true end
local MFCC_OPTS = { n_mfcc = true, top_db = true }
for k in pairs(MEL_OPTS) do MFCC_OPTS[k] = true end

-- melspectrogram(y, {sr=22050, n_fft=2048, hop_length=512, n_mels=128, power=2, ...})
function M.melspectrogram(y, o)
  tensor("audio.melspectrogram", "y", y)
  o = check_opts("audio.melspectrogram", o, MEL_OPTS, 2)
  local so = { power = o.power }
  for k in pairs(STFT_OPTS) do if o[k] ~= nil then so[k] = o[k] end end
  so.hop_length = o.hop_length or 512
  local S = M.spectrogram(y, so)
  local fb = M.mel_filterbank({ sr = o.sr, n_fft = o.n_fft or 2048, n_mels = o.n_mels, fmin = o.fmin,
    fmax = o.fmax, htk = o.htk, norm = o.norm, dtype = y:dtype() })
  return apply_fb(fb, S)
end

-- power_to_db(S, {ref=1, amin=1e-10, top_db=80}): 10 log10(max(amin, S) / ref), floored at
-- its maximum less top_db (over the whole tensor, as librosa)
function M.power_to_db(S, o)
  tensor("audio.power_to_db", "S", S)
  o = check_opts("audio.power_to_db", o, { ref = true, amin = true, top_db = true }, 2)
  local amin, ref = o.amin or 1e-10, o.ref or 1.0
  local db = nd.mul_scalar(nd.log10(nd.maximum(S, amin)), { scalar = 10 })
  db = nd.sub_scalar(db, { scalar = 10 * math.log10(math.max(amin, ref)) })
  local top = o.top_db == nil and 80 or o.top_db
  if top then db = nd.maximum(db, nd.max(db):item() - top) end
  return db
end
function M.amplitude_to_db(S, o)
  tensor("audio.amplitude_to_db", "S", S)
  o = check_opts("audio.amplitude_to_db", o, { ref = true, amin = true, top_db = true }, 2)
  local p = {}
  for k, v in pairs(o) do p[k] = v end
  p.ref = (o.ref or 1) ^ 2
  p.amin = (o.amin or 1e-5) ^ 2
  return M.power_to_db(nd.mul(S, S), p)
end

-- dct_matrix(n_out, n_in) -> (n_out, n_in): the orthonormal DCT-II (scipy's norm='ortho')
function M.dct_matrix(n_out, n_in, dtype)
  count("audio.dct_matrix", "n_out", n_out)
  count("audio.dct_matrix", "n_in", n_in)
  if n_out * n_in > 2 ^ 26 then
    error("audio.dct_matrix: " .. n_out .. " x " .. n_in .. " is more than 2^26 elements", 2)
  end
  local t = {}
  for k = 0, n_out - 1 do
    local s = k == 0 and math.sqrt(1 / n_in) or math.sqrt(2 / n_in)
    for n = 0, n_in - 1 do t[k * n_in + n + 1] = s * math.cos(math.pi * k * (2 * n + 1) / (2 * n_in)) end
  end
  if dtype ~= nil and not nd.dtype_code(dtype) then
    error("audio.dct_matrix: unknown dtype " .. tostring(dtype), 2)
  end
  return nd.array(t, { dtype = dtype or "float32" }):reshape({ n_out, n_in })
end

-- mfcc(y, {sr=22050, n_mfcc=20, top_db=80, melspectrogram options}) -> (..., n_mfcc, T):
-- the DCT-II (ortho) of power_to_db(melspectrogram(y))
function M.mfcc(y, o)
  tensor("audio.mfcc", "y", y)
  if o ~= nil and type(o) ~= "table" then error("audio.mfcc: options must be a table, got " .. type(o), 2) end
  o = check_opts("audio.mfcc", o, MFCC_OPTS, 2)
  local mo = {}
  for k, v in pairs(o) do if k ~= "n_mfcc" and k ~= "top_db" then mo[k] = v end end
  local db = M.power_to_db(M.melspectrogram(y, mo), { top_db = o.top_db })
  local n_mels = db:shape()[#db:shape() - 1]
  return apply_fb(M.dct_matrix(o.n_mfcc or 20, n_mels, y:dtype()), db)
end

---------------------------------------------------------------- resampling
ffi.cdef [[
typedef struct soxr_io_spec { int itype; int otype; double scale; void *e;
  unsigned long flags; } soxr_io_spec_t;
typedef struct soxr_quality_spec { double precision; double phase_response; double passband_end;
  double stopband_begin; void *e; unsigned long flags; } soxr_quality_spec_t;
typedef struct soxr_runtime_spec { unsigned log2_min_dft_size; unsigned log2_large_dft_size;
  unsigned coef_size_kbytes; unsigned num_threads; void *e; unsigned long flags; } soxr_runtime_spec_t;
const char *soxr_oneshot(double input_rate, double output_rate, unsigned num_channels,
  const void *in, size_t ilen, size_t *idone, void *out, size_t olen, size_t *odone,
  const soxr_io_spec_t *, const soxr_quality_spec_t *, const soxr_runtime_spec_t *);
soxr_io_spec_t soxr_io_spec(int itype, int otype);
soxr_quality_spec_t soxr_quality_spec(unsigned long recipe, unsigned long flags);
soxr_runtime_spec_t soxr_runtime_spec(unsigned num_threads);
]]
local okx, SOXR = pcall(ffi.load, "soxr")
if not okx then okx, SOXR = pcall(ffi.load, "libsoxr.so.0") end
local QUALITY = { soxr_qq = 0, soxr_lq = 1, soxr_mq = 2, soxr_hq = 4, soxr_vhq = 6 }

-- resample(y (L) or (C, L), orig_sr, target_sr, {res_type="soxr_hq"}) -> the signal at
-- target_sr, ceil(L * target_sr / orig_sr) samples per channel (librosa.resample: what soxr
-- does not fill at the end is zero)
function M.resample(y, orig_sr, target_sr, o)
  if o ~= nil and type(o) ~= "table" then
    error("audio.resample: options must be a table, got " .. type(o), 2)
  end
  o = o or {}
  if not okx then error("audio.resample: libsoxr not found (Debian package libsoxr0, tools/setup.sh)", 2) end
  if type(orig_sr) ~= "number" or type(target_sr) ~= "number" or orig_sr ~= orig_sr
      or target_sr ~= target_sr or orig_sr <= 0 or target_sr <= 0 or orig_sr == math.huge
      or target_sr == math.huge then
    error("audio.resample: sample rates must be positive numbers", 2)
  end
  local q = QUALITY[o.res_type or "soxr_hq"]
  if not q then error("audio.resample: unknown res_type '" .. tostring(o.res_type)
    .. "' (soxr_hq, soxr_vhq, soxr_mq, soxr_lq, soxr_qq)", 2) end
  tensor("audio.resample", "y", y)
  local s = y:shape()
  if #s ~= 1 and #s ~= 2 then error("audio.resample: y must be (L) or (channels, L)", 2) end
  if orig_sr == target_sr then return y end
  local C = #s == 2 and s[1] or 1
  local L = s[#s]
  local olen = math.ceil(L * (target_sr / orig_sr))
  local f64 = y:dtype() == "float64"
  local dt = f64 and "float64" or "float32"
  local inter = (#s == 2 and nd.transpose(y) or y):astype(dt) + 0
  local out = nd.empty(#s == 2 and { olen, C } or { olen }, { dtype = dt })
  local io = SOXR.soxr_io_spec(f64 and 1 or 0, f64 and 1 or 0)
  local qs = SOXR.soxr_quality_spec(q, 0)
  local rs = SOXR.soxr_runtime_spec(1)
  local done = ffi.new("size_t[1]")
  local err = SOXR.soxr_oneshot(orig_sr, target_sr, C, inter:data_ptr(), L, nil, out:data_ptr(), olen, done,
    io, qs, rs)
  if err ~= nil then error("audio.resample: " .. ffi.string(err), 2) end
  if tonumber(done[0]) < olen then
    local p = out:data_ptr()
    for i = tonumber(done[0]) * C, olen * C - 1 do p[i] = 0 end
  end
  if #s == 2 then return nd.transpose(out) end
  return out
end

return M
