-- Real ONNX models from PyPI packages, with their real weights, on real inputs, against
-- ONNX Runtime's outputs (tools/fixtures/make_onnx_model_fixtures.py): silero-vad's VAD
-- on a sentence spoken by espeak-ng, and rapidocr's PP-OCRv4 text detection and
-- recognition on a scanned page from opencv-doc. The models come from the PyPI cache
-- (tools/setup.sh --weights); each case skips with a message when its file is absent.
local mx = require("mx")
local onnx = require("mx.onnx")
local pypi = require("helpers.pypi")

local FIX = "spec/fixtures/"
local E = dofile(FIX .. "onnx_models_expected.lua")
local PAGE = "/usr/share/doc/opencv-doc/examples/data/imageTextN.png"
local OCR = "rapidocr_onnxruntime-1.4.4/rapidocr_onnxruntime/models/"

-- (H, W, 3) RGB uint8 -> (1, 3, H, W) float32 BGR, (x / 255 - mean) / std per channel
local function bgr_input(img, mean, std)
  local x = img:astype("float32") / 255
  local chans = {}
  for c = 1, 3 do
    local ch = x[{ {}, {}, { 4 - c, 4 - c } }] -- B, G, R
    chans[c] = (ch - mean[c]) / std[c]
  end
  local hwc = mx.nd.concat(chans[1], chans[2], chans[3], { dim = 3 })
  return mx.nd.transpose(hwc, { axes = { 3, 1, 2 } }):expand_dims { axis = 1 }
end

describe("real ONNX models against ONNX Runtime", function()
  it("silero-vad 6.2.3 on a spoken sentence: every chunk's speech probability", function()
    local path, why = pypi("silero_vad-6.2.3/silero_vad/data/silero_vad.onnx")
    if not path then pending(why) return end
    local audio = mx.nd.load(FIX .. "onnx_silero_audio.npy")[1]:astype("float32") / 32768
    local sr = mx.nd.array({ 16000 }, { dtype = "int64" }):reshape {}
    local S, CTX = E.silero.chunk, E.silero.context
    local sess = onnx.load_model(path, { input_shapes = { input = { 1, S + CTX }, state = { 2, 1, 128 } },
      constants = { sr = sr } })
    local state = mx.nd.zeros { 2, 1, 128 }
    local context = mx.nd.zeros { 1, CTX }
    local n = audio:shape()[1]
    local k, worst, same = 0, 0, 0
    for start = 1, n - S + 1, S do
      k = k + 1
      local chunk = audio[{ { start, start + S - 1 } }]:reshape { 1, S }
      local inp = mx.nd.concat(context, chunk, { dim = 2 })
      local out = sess:run({ input = inp, state = state })
      state = out[2]
      context = inp[{ {}, { S + 1, S + CTX } }]
      local p, want = out[1]:item(), E.silero.probs[k]
      worst = math.max(worst, math.abs(p - want))
      if (p > 0.5) == (want > 0.5) then same = same + 1 end
    end
    assert.equals(#E.silero.probs, k)
    assert.is_true(worst < 1e-4, "largest difference from ONNX Runtime: " .. worst)
    assert.equals(k, same) -- the same speech / silence decision for every chunk
  end)

  it("PP-OCRv4 text detection on a scanned page: the probability map", function()
    local path, why = pypi(OCR .. "ch_PP-OCRv4_det_infer.onnx")
    if not path then pending(why) return end
    local f = io.open(PAGE, "rb")
    if not f then pending("opencv-doc's " .. PAGE .. " is missing") return end
    f:close()
    local img = mx.image.imread(PAGE)[{ { 1, 256 }, { 1, 544 } }]
    local x = bgr_input(img, { 0.485, 0.456, 0.406 }, { 0.229, 0.224, 0.225 }) -- as rapidocr: in BGR order
    local sess = onnx.load_model(path, { input_shapes = { x = x:shape() } })
    local y = sess:run({ x = x })[1]
    assert.same(E.det.shape, y:shape())
    local sum = y:astype("float64"):sum():item()
    assert.is_true(math.abs(sum - E.det.sum) <= 1e-4 * math.abs(E.det.sum), sum .. " vs " .. E.det.sum)
    local above = mx.nd.greater(y, 0.3):sum():item()
    assert.is_true(math.abs(above - E.det.above) <= 0.002 * E.det.above, above .. " vs " .. E.det.above)
    local flat = y:reshape { -1 }
    local worst = 0
    for i, pos in ipairs(E.det.idx) do
      worst = math.max(worst, math.abs(flat[pos]:item() - E.det.vals[i]))
    end
    assert.is_true(worst < 1e-4, "largest sampled difference: " .. worst)
  end)

  it("PP-OCRv4 text recognition on a line of the page: the decoded characters", function()
    local path, why = pypi(OCR .. "ch_PP-OCRv4_rec_infer.onnx")
    if not path then pending(why) return end
    local img = mx.image.imread(FIX .. "onnx_ocr_line.png")
    local x = bgr_input(img, { 0.5, 0.5, 0.5 }, { 0.5, 0.5, 0.5 })
    local sess = onnx.load_model(path, { input_shapes = { x = x:shape() } })
    local y = sess:run({ x = x })[1]
    assert.same({ 1, E.rec.shape[1], E.rec.shape[2] }, y:shape())
    local am = mx.nd.argmax(y[1], { axis = 2 }):tolist()
    local mp = mx.nd.max(y[1], { axis = 2 }):tolist()
    local worst = 0
    for t = 1, #E.rec.argmax do
      assert.equals(E.rec.argmax[t], am[t], "time step " .. t)
      worst = math.max(worst, math.abs(mp[t] - E.rec.maxprob[t]))
    end
    assert.is_true(worst < 1e-4, "largest probability difference: " .. worst)
  end)
end)
