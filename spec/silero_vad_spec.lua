-- mx.audio.silero_vad with the published weights (PyPI silero-vad 6.2.3, tools/setup.sh
-- --weights) against silero's own code for those weights (TinySileroVAD in the same
-- package; spec/fixtures/vad_ref.lua, made by tools/fixtures/make_vad_fixture.py) on
-- espeak-ng sentences with silences between them. The package's JIT/ONNX model carries
-- other weights: its segments are checked to agree within a 64 ms chunk pair.
local audio = require("mx.audio")
local vad = require("mx.audio.silero_vad")
local cache = require("mx.gluonnlp._cache")
local REF = dofile("spec/fixtures/vad_ref.lua")

local WEIGHTS = cache.path(vad.PACKAGE, vad.FILE)

describe("mx.audio.silero_vad", function()
  it("gives silero's probabilities and segments within 30 ms", function()
    if not WEIGHTS then
      return pending("silero-vad's weights not in the PyPI cache (tools/setup.sh --weights)")
    end
    local model = vad.load()
    local y, sr = audio.load("spec/fixtures/vad_speech16k.wav", { mono = true })
    assert.equal(16000, sr)
    assert.equal(REF.n, y:shape()[1])
    local segs, probs = vad.get_speech_timestamps(y, model)
    assert.equal(#REF.probs, #probs)
    local worst = 0
    for i = 1, #probs do worst = math.max(worst, math.abs(probs[i] - REF.probs[i])) end
    assert.is_true(worst < 1e-3, "max |p - silero's p| = " .. worst)
    assert.equal(#REF.segments, #segs)
    for i, s in ipairs(REF.segments) do
      assert.is_true(math.abs(segs[i].start - s[1]) <= 480, "segment " .. i .. " start")
      assert.is_true(math.abs(segs[i]["end"] - s[2]) <= 480, "segment " .. i .. " end")
    end
    -- silero's JIT model (other weights) finds the same three sentences
    assert.equal(#REF.jit_segments, #segs)
    for i, s in ipairs(REF.jit_segments) do
      assert.is_true(math.abs(segs[i].start - s[1]) <= 1024 and math.abs(segs[i]["end"] - s[2]) <= 1024,
        "segment " .. i .. " against the JIT model's")
    end
    local sec = vad.get_speech_timestamps(y, model, { return_seconds = true })
    assert.near(REF.segments[1][1] / 16000, sec[1].start, 0.03)
  end)

  it("turns probabilities into segments as silero does", function()
    local p = {}
    for i = 1, 100 do p[i] = (i > 10 and i <= 40) and 0.9 or ((i > 60 and i <= 62) and 0.8 or 0.05) end
    local s = vad.timestamps_from_probs(p, 100 * 512)
    -- the short burst (3 chunks, 96 ms < 250 ms) is dropped; 30 ms padding both sides
    assert.equal(1, #s)
    assert.equal(10 * 512 - 480, s[1].start)
    assert.equal(40 * 512 + 480, s[1]["end"])
    assert.has_error(function() vad.get_speech_timestamps(require("mx").nd.zeros({ 100 }), nil,
      { sample_rate = 22050 }) end)
  end)
end)
