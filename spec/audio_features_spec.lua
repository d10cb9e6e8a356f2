-- mx.audio: WAV through libsndfile, mel filterbanks, log-mel spectrograms, MFCC and
-- soxr resampling against librosa on real speech (spec/fixtures/speech.wav, espeak-ng;
-- spec/fixtures/audio_librosa.lua, made by tools/fixtures/make_audio_features_fixture.py).
local mx = require("mx")
local audio = require("mx.audio")
local nd = mx.nd
local REF = dofile("spec/fixtures/audio_librosa.lua")
local WAV = "spec/fixtures/speech.wav"

local function close(ref, got, atol, rtol, what)
  assert.equal(#ref, #got, what .. ": lengths")
  local worst, at = 0, 0
  for i = 1, #ref do
    local e = math.abs(ref[i] - got[i]) - rtol * math.abs(ref[i])
    if e > worst then worst, at = e, i end
  end
  assert.is_true(worst <= atol, string.format("%s: element %d: %g vs %g", what, at, ref[at] or 0, got[at]
    or 0))
end

describe("mx.audio", function()
  it("reads a WAV file with libsndfile", function()
    local y, sr = audio.load(WAV)
    assert.equal(REF.sr, sr)
    assert.same({ 1, REF.n }, y:shape())
    close(REF.first, y[1][{ { 1, 50 } }]:tolist(), 1e-7, 0, "samples")
    local info = audio.info(WAV)
    assert.equal(REF.n, info.frames)
    assert.has_error(function() audio.load("/nonexistent.wav") end)
  end)

  it("writes WAV atomically and reads it back", function()
    local y = audio.load(WAV, { mono = true })
    local path = os.tmpname() .. ".wav"
    audio.save(path, y, REF.sr)
    local back, sr = audio.load(path, { mono = true })
    assert.equal(REF.sr, sr)
    close(y:tolist(), back:tolist(), 1 / 32768 + 1e-7, 0, "16-bit round trip")
    local stereo = nd.stack(y, nd.mul_scalar(y, { scalar = 0.5 }))
    audio.save(path, stereo, 8000, { subtype = "FLOAT" })
    local s2, sr2 = audio.load(path)
    assert.equal(8000, sr2)
    assert.same({ 2, REF.n }, s2:shape())
    close(stereo:tolist(), s2:tolist(), 0, 0, "float round trip")
    os.remove(path)
    assert.has_error(function() audio.save(path, y, 0) end,
      "audio.save: sample_rate must be a positive integer, got 0")
  end)

  it("builds librosa's mel filterbanks (slaney and htk)", function()
    local fb = audio.mel_filterbank({ sr = 16000, n_fft = 512, n_mels = 40 })
    assert.same(REF.fb_shape, fb:shape())
    close(REF.fb, fb:tolist(), 1e-7, 1e-5, "slaney")
    local h = audio.mel_filterbank({ sr = 22050, n_fft = 400, n_mels = 23, fmin = 50, fmax = 7000, htk = true,
      norm = false })
    assert.same(REF.fb_htk_shape, h:shape())
    close(REF.fb_htk, h:tolist(), 1e-6, 1e-5, "htk")
  end)

  it("computes librosa's mel spectrogram, log-mel and MFCC", function()
    local y = audio.load(WAV, { mono = true })
    local o = { sr = REF.sr, n_fft = 1024, hop_length = 256, n_mels = 40 }
    local mel = audio.melspectrogram(y, o)
    assert.same(REF.mel_shape, mel:shape())
    local part = nd.slice_axis(mel, { axis = 2, begin = REF.mel_frames[1], ["end"] = REF.mel_frames[2] })
    close(REF.mel, part:tolist(), 1e-6, 1e-3, "mel power")
    close(REF.db, audio.power_to_db(mel):tolist(), 2e-3, 0, "log-mel dB")
    o.n_mfcc = 13
    local m = audio.mfcc(y, o)
    assert.same(REF.mfcc_shape, m:shape())
    close(REF.mfcc, m:tolist(), 2e-2, 1e-4, "mfcc")
    -- a batch gives each row's own features
    local b = audio.mfcc(nd.stack(y, y), o)
    assert.same({ 2, 13, REF.mfcc_shape[2] }, b:shape())
  end)

  it("resamples with soxr as librosa's soxr_hq does", function()
    local y = audio.load(WAV, { mono = true })
    local y16 = audio.resample(y, REF.sr, 16000)
    assert.equal(REF.y16_n, y16:shape()[1])
    local seg = y16[{ { REF.y16_from, REF.y16_from + #REF.y16 - 1 } }]
    close(REF.y16, seg:tolist(), 1e-6, 0, "resampled")
    local e = nd.sum(nd.mul(y16:astype("float64"), y16:astype("float64"))):item()
    assert.near(REF.y16_energy, e, 1e-6 * REF.y16_energy)
    assert.has_error(function() audio.resample(y, REF.sr, 16000, { res_type = "fancy" }) end)
  end)

  it("round-trips through stft / istft with librosa's defaults", function()
    local y = audio.load(WAV, { mono = true })
    local S = audio.stft(y, { n_fft = 512 })
    local back = audio.istft(S, { n_fft = 512, length = y:shape()[1] })
    close(y:tolist(), back:tolist(), 1e-5, 0, "round trip")
  end)
end)
