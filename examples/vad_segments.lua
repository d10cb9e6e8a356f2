-- examples/vad_segments.lua — voice activity detection with Silero VAD's real weights
-- (PyPI silero-vad in the cache, tools/setup.sh --weights): prints the speech segments of
-- a recording and draws its waveform with them (an SVG).
--
--   bin/mx examples/vad_segments.lua --wav talk.wav          # any rate/format libsndfile reads
--   bin/mx examples/vad_segments.lua                         # espeak-ng speaks three sentences
--
-- Without --wav, Debian's espeak-ng says --text (sentences split at '|') into a WAV, with
-- --gap seconds of silence between them. The audio is mixed to mono and resampled to
-- 16 kHz (libsoxr) when needed; silero's probabilities (one per 32 ms) go through its
-- get_speech_timestamps rules. The SVG (--plot, default vad_segments.svg) shows the
-- waveform's envelope, the segments shaded, and the probability curve with the threshold.
--
-- Options: --wav PATH  --text TEXT  --gap X (1.0)  --threshold X (0.5)
--   --min-silence-ms N (100)  --speech-pad-ms N (30)  --plot PATH  --threads N
local mx = require("mx")
local nd = mx.nd
local audio = require("mx.audio")
local vad = require("mx.audio.silero_vad")
local file = require("mx.core.file")
local dir = arg[0]:match("^(.*[/\\])") or "./"

local USAGE = [==[
usage: vad_segments.lua [--wav PATH] [--text TEXT] [--gap X] [--threshold X] [--min-silence-ms N]
       [--speech-pad-ms N] [--plot PATH] [--threads N]]==]
local cli = dofile(dir .. "_cli.lua")
local opts = cli.parse(arg, { usage = USAGE,
  defaults = { text = "Voice activity detection finds the speech.|Silence is not speech.|This is the end.",
    gap = 1.0, threshold = 0.5, min_silence_ms = 100, speech_pad_ms = 30, plot = "vad_segments.svg" },
  numeric = { gap = true, threshold = true, min_silence_ms = true, speech_pad_ms = true, threads = true },
  string = { wav = true, text = true, plot = true } })
if opts.threads then mx.set_num_threads(opts.threads) end

local okm, model = pcall(vad.load)
if not okm then
  io.stderr:write(tostring(model), "\n")
  os.exit(2)
end

---------------------------------------------------------------- the recording
local y, sr
if opts.wav then
  y, sr = audio.load(opts.wav, { mono = true })
else
  local parts = {}
  local tmp = os.tmpname()
  for s in opts.text:gmatch("[^|]+") do
    local cmd = string.format("espeak-ng -v en-us -w %s %q >/dev/null 2>&1", tmp, s)
    if not os.execute(cmd) or not io.open(tmp, "rb") then
      io.stderr:write("espeak-ng failed (Debian package espeak-ng); give --wav PATH\n")
      os.exit(2)
    end
    local part, psr = audio.load(tmp, { mono = true })
    sr = psr
    parts[#parts + 1] = nd.zeros({ math.floor(opts.gap * sr) })
    parts[#parts + 1] = part
  end
  parts[#parts + 1] = nd.zeros({ math.floor(opts.gap * sr) })
  os.remove(tmp)
  parts[#parts + 1] = { dim = 1 }
  y = nd.concat(unpack(parts))
end
if sr ~= 16000 then y = audio.resample(y, sr, 16000) end
local n = y:shape()[1]
print(string.format("%.2f s of audio at 16 kHz%s", n / 16000, opts.wav and (" from " .. opts.wav) or
  " (espeak-ng)"))

---------------------------------------------------------------- detection
local segs, probs = vad.get_speech_timestamps(y, model, { threshold = opts.threshold,
  min_silence_duration_ms = opts.min_silence_ms, speech_pad_ms = opts.speech_pad_ms })
for i, s in ipairs(segs) do
  print(string.format("speech %d: %7.3f s - %7.3f s (%.2f s)", i, s.start / 16000, s["end"] / 16000,
    (s["end"] - s.start) / 16000))
end
if #segs == 0 then print("no speech found") end

---------------------------------------------------------------- the picture
local W, H, PH = 1000, 220, 90
local samples = y:tolist()
local cols = {}
local per = math.max(1, math.floor(n / W))
local peak = 1e-6
for c = 0, W - 1 do
  local lo, hi = 0, 0
  for i = c * per + 1, math.min(n, (c + 1) * per) do
    local v = samples[i]
    if v < lo then lo = v end
    if v > hi then hi = v end
  end
  cols[c + 1] = { lo, hi }
  peak = math.max(peak, -lo, hi)
end
local svg = { string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
  .. 'font-family="sans-serif" font-size="12">', W + 20, H + PH + 62),
  '<rect width="100%" height="100%" fill="white"/>',
  string.format('<text x="10" y="16">Silero VAD: %d speech segment%s over %.1f s</text>', #segs,
    #segs == 1 and "" or "s", n / 16000) }
local x0, y0 = 10, 25
for _, s in ipairs(segs) do
  svg[#svg + 1] = string.format('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#cde8cd"/>',
    x0 + s.start / n * W, y0, (s["end"] - s.start) / n * W, H)
end
local mid = y0 + H / 2
local path = {}
for c, p in ipairs(cols) do
  path[#path + 1] = string.format("M%d %.1f L%d %.1f", x0 + c - 1, mid - p[2] / peak * H / 2, x0 + c - 1,
    mid - p[1] / peak * H / 2)
end
svg[#svg + 1] = '<path stroke="#2b5797" stroke-width="1" d="' .. table.concat(path, " ") .. '"/>'
local py0 = y0 + H + 15
svg[#svg + 1] = string.format('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>',
  x0, py0,
  W, PH)
local pts = {}
for i, p in ipairs(probs) do
  pts[#pts + 1] = string.format("%.1f,%.1f", x0 + (i - 0.5) * 512 / n * W, py0 + PH - p * PH)
end
svg[#svg + 1] = '<polyline fill="none" stroke="#c0392b" stroke-width="1.2" points="' .. table.concat(pts, " ")
  .. '"/>'
svg[#svg + 1] = string.format('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#555" '
  .. 'stroke-dasharray="4 3"/>',
  x0, x0 + W, py0 + PH - opts.threshold * PH, py0 + PH - opts.threshold * PH)
svg[#svg + 1] = string.format('<text x="%d" y="%d">speech probability (threshold %.2f), one per 32 ms</text>',
  x0, py0 + PH + 16, opts.threshold)
svg[#svg + 1] = "</svg>\n"
file.write_atomic("vad_segments", opts.plot, table.concat(svg, "\n"), 1)
print("waveform and segments drawn to " .. opts.plot)
