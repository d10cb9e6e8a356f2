-- mx.audio.silero_vad — Silero VAD (v6, 16 kHz) with its published weights: the
-- safetensors file PyPI silero-vad ships (silero_vad/data/silero_vad_16k.safetensors,
-- fetched into the cache by tools/setup.sh --weights), and its get_speech_timestamps.
--
--   local vad = require("mx.audio.silero_vad")
--   local model = vad.load()                        -- from the PyPI cache
--   local y, sr = require("mx.audio").load("talk.wav", { mono = true })
--   for _, s in ipairs(vad.get_speech_timestamps(y, model)) do print(s.start, s["end"]) end
--
-- The network reads 512-sample chunks with the previous chunk's last 64 samples in
-- front: a learned STFT (a 256-tap conv, stride 128, 129 magnitudes), four Conv1D + ReLU,
-- an LSTM cell (128) whose state carries over chunks, and a 1x1 conv + sigmoid: one
-- speech probability per chunk (32 ms). Parameter names are the file's.
local nd = require("mx.nd")
local block = require("mx.gluon.block")
local nn = require("mx.gluon.nn")
local Parameter = require("mx.gluon.parameter").Parameter
local cache = require("mx.gluonnlp._cache")

local Block, HybridBlock = block.Block, block.HybridBlock
local M = {}

M.PACKAGE = "silero_vad-6.2.3"
M.FILE = "silero_vad/data/silero_vad_16k.safetensors"
M.CHUNK, M.CONTEXT, M.SAMPLE_RATE = 512, 64, 16000

-- PyTorch's LSTMCell with its parameter names (weight_ih, weight_hh, bias_ih, bias_hh;
-- gates i, f, g, o)
local TorchLSTMCell = HybridBlock:extend("TorchLSTMCell")
M.TorchLSTMCell = TorchLSTMCell
function TorchLSTMCell:__init(input, hidden)
  Block.__init(self)
  self._h = hidden
  self.weight_ih = Parameter("weight_ih", { shape = { 4 * hidden, input } })
  self.weight_hh = Parameter("weight_hh", { shape = { 4 * hidden, hidden } })
  self.bias_ih = Parameter("bias_ih", { shape = { 4 * hidden } })
  self.bias_hh = Parameter("bias_hh", { shape = { 4 * hidden } })
end
function TorchLSTMCell:forward(x, h, c)
  local H = self._h
  local fc = { num_hidden = 4 * H }
  local g = nd.add(nd.fully_connected(x, self.weight_ih:data(), self.bias_ih:data(), fc),
    nd.fully_connected(h, self.weight_hh:data(), self.bias_hh:data(), fc))
  local i, f, gg, o = nd.split(g, { num_outputs = 4, axis = 2 })
  local c2 = nd.add(nd.mul(nd.sigmoid(f), c), nd.mul(nd.sigmoid(i), nd.tanh(gg)))
  local h2 = nd.mul(nd.sigmoid(o), nd.tanh(c2))
  return h2, c2
end

local SileroVAD = HybridBlock:extend("SileroVAD")
M.SileroVAD = SileroVAD
function SileroVAD:__init()
  Block.__init(self)
  self.stft_conv = nn.Conv1D(258, 256, { strides = 128, in_channels = 1, use_bias = false })
  self.conv1 = nn.Conv1D(128, 3, { padding = 1, in_channels = 129 })
  self.conv2 = nn.Conv1D(64, 3, { strides = 2, padding = 1, in_channels = 128 })
  self.conv3 = nn.Conv1D(64, 3, { strides = 2, padding = 1, in_channels = 64 })
  self.conv4 = nn.Conv1D(128, 3, { padding = 1, in_channels = 64 })
  self.lstm_cell = TorchLSTMCell(128, 128)
  self.final_conv = nn.Conv1D(1, 1, { in_channels = 128 })
end

-- features(x (B, 576): 64 samples of context + a 512-sample chunk) -> (B, 128): the
-- part before the LSTM, independent for every chunk
function SileroVAD:features(x)
  local s = x:shape()
  local L = s[2]
  -- reflect-pad 64 samples on the right (PyTorch's F.pad(..., 'reflect'))
  local tail = nd.flip(nd.slice_axis(x, { axis = 2, begin = L - 64, ["end"] = L - 1 }), { axis = 2 })
  local xp = nd.expand_dims(nd.concat(x, tail, { dim = 2 }), { axis = 2 })
  local spec = self.stft_conv(xp) -- (B, 258, 4)
  local re = nd.slice_axis(spec, { axis = 2, begin = 1, ["end"] = 129 })
  local im = nd.slice_axis(spec, { axis = 2, begin = 130, ["end"] = 258 })
  local mag = nd.sqrt(nd.add(nd.mul(re, re), nd.mul(im, im)))
  local y = nd.relu(self.conv1(mag))
  y = nd.relu(self.conv2(y))
  y = nd.relu(self.conv3(y))
  y = nd.relu(self.conv4(y)) -- (B, 128, 1)
  return nd.reshape(y, { s[1], 128 })
end

-- head(h (B, 128)) -> probability (B)
function SileroVAD:head(h)
  local p = nd.sigmoid(self.final_conv(nd.expand_dims(nd.relu(h), { axis = 3 })))
  return nd.reshape(nd.mean(p, { axis = 3 }), { h:shape()[1] })
end

-- forward(x (B, 576), h, c (B, 128)) -> probability (B), h, c: one chunk of a stream
function SileroVAD:forward(x, h, c)
  local h2, c2 = self.lstm_cell(self:features(x), h, c)
  return self:head(h2), h2, c2
end

-- load(path) -> a SileroVAD with the published weights (path: the safetensors file;
-- default: the PyPI cache's)
function M.load(path)
  if not path then
    local msg
    path, msg = cache.path(M.PACKAGE, M.FILE)
    if not path then error("silero_vad.load: " .. msg, 2) end
  end
  local model = SileroVAD()
  model:initialize()
  model:load_parameters(path)
  return model
end

-- speech_probs(y (L) at 16 kHz, model) -> Lua list of per-chunk probabilities, the last
-- chunk zero-padded, the state carried over (silero's model(chunk, 16000) loop). The
-- convolutional front end runs on all chunks at once; only the LSTM steps one by one.
function M.speech_probs(y, model)
  if not nd.is_tensor(y) or #y:shape() ~= 1 then
    error("silero_vad.speech_probs: y must be a 1-d tensor of 16 kHz samples", 2)
  end
  local n = y:shape()[1]
  local C, K = M.CHUNK, M.CONTEXT
  local nchunks = math.ceil(n / C)
  if nchunks == 0 then return {} end
  local padded = nd.zeros({ nchunks * C }, { dtype = "float32" })
  padded[{ { 1, n } }] = y:astype("float32")
  local chunks = nd.reshape(padded, { nchunks, C })
  -- chunk i's context: the last 64 samples of chunk i - 1 (zeros before the first)
  local prev = nd.concat(nd.zeros({ 1, K }), nd.slice_axis(chunks, { axis = 2, begin = C - K + 1,
    ["end"] = C }),
    { dim = 1 })
  local x = nd.concat(nd.slice_axis(prev, { axis = 1, begin = 1, ["end"] = nchunks }), chunks, { dim = 2 })
  local feats = model:features(x)
  local h, c = nd.zeros({ 1, 128 }), nd.zeros({ 1, 128 })
  local hs = nd.empty({ nchunks, 128 })
  for i = 1, nchunks do
    h, c = model.lstm_cell(feats[{ { i, i } }], h, c)
    hs[{ { i, i } }] = h
  end
  return model:head(hs):tolist()
end

-- timestamps_from_probs(probs, n_samples, opts) -> { {start=, ["end"]=}, ... } in samples
-- (silero-vad's get_speech_timestamps_from_probs, 16 kHz: threshold=0.5,
-- min_speech_duration_ms=250, max_speech_duration_s=inf, min_silence_duration_ms=100,
-- speech_pad_ms=30, neg_threshold=max(threshold - 0.15, 0.01),
-- min_silence_at_max_speech=98, use_max_poss_sil_at_max_speech=true)
function M.timestamps_from_probs(probs, n, o)
  o = o or {}
  local sr, W = M.SAMPLE_RATE, M.CHUNK
  local threshold = o.threshold or 0.5
  local neg = o.neg_threshold or math.max(threshold - 0.15, 0.01)
  local min_speech = sr * (o.min_speech_duration_ms or 250) / 1000
  local pad = sr * (o.speech_pad_ms or 30) / 1000
  local max_speech = sr * (o.max_speech_duration_s or math.huge) - W - 2 * pad
  local min_sil = sr * (o.min_silence_duration_ms or 100) / 1000
  local min_sil_max = sr * (o.min_silence_at_max_speech or 98) / 1000
  local use_max = o.use_max_poss_sil_at_max_speech ~= false
  local triggered, speeches, cur = false, {}, {}
  local temp_end, prev_end, next_start = 0, 0, 0
  local possible = {}
  for i, p in ipairs(probs) do
    local s = W * (i - 1)
    local skip = false
    if p >= threshold and temp_end ~= 0 then
      local sil = s - temp_end
      if sil > min_sil_max then possible[#possible + 1] = { temp_end, sil } end
      temp_end = 0
      if next_start < prev_end then next_start = s end
    end
    if p >= threshold and not triggered then
      triggered = true
      cur.start = s
      skip = true
    end
    if not skip and triggered and s - cur.start > max_speech then
      if use_max and #possible > 0 then
        local best = possible[1]
        for k = 2, #possible do if possible[k][2] > best[2] then best = possible[k] end end
        prev_end = best[1]
        cur["end"] = prev_end
        speeches[#speeches + 1] = cur
        cur = {}
        next_start = prev_end + best[2]
        if next_start < prev_end + s then cur.start = next_start else triggered = false end
        prev_end, next_start, temp_end, possible = 0, 0, 0, {}
      elseif prev_end ~= 0 then
        cur["end"] = prev_end
        speeches[#speeches + 1] = cur
        cur = {}
        if next_start < prev_end then triggered = false else cur.start = next_start end
        prev_end, next_start, temp_end, possible = 0, 0, 0, {}
      else
        cur["end"] = s
        speeches[#speeches + 1] = cur
        cur = {}
        prev_end, next_start, temp_end, possible = 0, 0, 0, {}
        triggered = false
        skip = true
      end
    end
    if not skip and p < neg and triggered then
      if temp_end == 0 then temp_end = s end
      local now = s - temp_end
      if not use_max and now > min_sil_max then prev_end = temp_end end
      if now >= min_sil then
        cur["end"] = temp_end
        if cur["end"] - cur.start > min_speech then speeches[#speeches + 1] = cur end
        cur = {}
        prev_end, next_start, temp_end, possible = 0, 0, 0, {}
        triggered = false
      end
    end
  end
  if cur.start ~= nil and n - cur.start > min_speech then
    cur["end"] = n
    speeches[#speeches + 1] = cur
  end
  for i, sp in ipairs(speeches) do
    if i == 1 then sp.start = math.floor(math.max(0, sp.start - pad)) end
    if i ~= #speeches then
      local nx = speeches[i + 1]
      local gap = nx.start - sp["end"]
      if gap < 2 * pad then
        sp["end"] = sp["end"] + math.floor(gap / 2)
        nx.start = math.floor(math.max(0, nx.start - math.floor(gap / 2)))
      else
        sp["end"] = math.floor(math.min(n, sp["end"] + pad))
        nx.start = math.floor(math.max(0, nx.start - pad))
      end
    else
      sp["end"] = math.floor(math.min(n, sp["end"] + pad))
    end
  end
  return speeches
end

-- get_speech_timestamps(y (L) at sample_rate, model, {sample_rate=16000, ...}) ->
-- segments in samples (or seconds with return_seconds); a sample_rate that is a
-- multiple of 16000 is decimated, as silero does; other rates: resample first
function M.get_speech_timestamps(y, model, o)
  o = o or {}
  local sr = o.sample_rate or 16000
  local step = 1
  if sr > 16000 and sr % 16000 == 0 then
    step = sr / 16000
    y = nd.slice(y, { step = { step } })
  elseif sr ~= 16000 then
    error("silero_vad: sample_rate must be 16000 or a multiple of it (mx.audio.resample others), got "
      .. tostring(sr), 2)
  end
  local probs = M.speech_probs(y, model)
  local segs = M.timestamps_from_probs(probs, y:shape()[1], o)
  for _, s in ipairs(segs) do
    s.start, s["end"] = s.start * step, s["end"] * step
    if o.return_seconds then
      s.start, s["end"] = s.start / sr, s["end"] / sr
    end
  end
  return segs, probs
end

return M
