-- the audio family: stft / istft (and their gradients, through spec/gradcheck_spec.lua
-- and spec/helpers/gradcases.lua) against torch.stft / torch.istft
-- (spec/fixtures/audio_torch.lua, made by tools/fixtures/make_audio_fixture.py), the
-- cpu kernels (kissfft, float32; table DFT, float64) against the reference kernels.
local mx = require("mx")
local nd = mx.nd
local REF = dofile("spec/fixtures/audio_torch.lua")

local function signal(n, len, dtype)
  local t = {}
  for k = 0, n - 1 do
    for i = 0, len - 1 do
      t[#t + 1] = math.sin(0.05 * i + k) + 0.3 * math.sin(0.31 * i + 1) + 0.1 * math.cos(1.7 * i)
    end
  end
  return nd.array(t, { dtype = dtype or "float64" }):reshape({ n, len })
end

local function window(kind, w, dtype)
  local t = {}
  for i = 0, w - 1 do
    local c = math.cos(2 * math.pi * i / w)
    t[i + 1] = kind == "hamming" and (0.54 - 0.46 * c) or (0.5 - 0.5 * c)
  end
  return nd.array(t, { dtype = dtype or "float64" })
end

local function close(a, b, tol, what)
  assert.equal(#a, #b, what .. ": lengths")
  local worst = 0
  for i = 1, #a do worst = math.max(worst, math.abs(a[i] - b[i])) end
  assert.is_true(worst <= tol, string.format("%s: max |diff| %g > %g", what, worst, tol))
end

local function opts(c)
  return { n_fft = c.n_fft, hop_length = c.hop, center = c.center, pad_mode = c.pad,
    normalized = c.normalized, onesided = c.onesided }
end
local function iopts(c)
  return { n_fft = c.n_fft, hop_length = c.hop, center = c.center, normalized = c.normalized,
    onesided = c.onesided, length = c.center and c.L or nil }
end

describe("audio ops: stft / istft", function()
  for name, c in pairs(REF) do
    it("equal torch.stft / torch.istft: " .. name, function()
      for _, dtype in ipairs({ "float64", "float32" }) do
        local tol = dtype == "float64" and 1e-9 or 2e-4
        local x, w = signal(c.N, c.L, dtype), window(c.window, c.win, dtype)
        for _, ns in ipairs({ nd, nd._ref }) do
          local s = ns.stft(x, w, opts(c))
          assert.same(c.shape, s:shape())
          close(c.stft, s:tolist(), tol * 10, name .. " stft " .. dtype)
          local y = ns.istft(nd.array(c.stft, { dtype = dtype }):reshape(c.shape), w, iopts(c))
          close(c.istft, y:tolist(), tol, name .. " istft " .. dtype)
        end
      end
    end)
  end

  it("round-trips a 1-d signal and matches the reference kernels' gradients", function()
    local x = signal(1, 257)[1]
    local w = window("hann", 48)
    local o = { n_fft = 64, hop_length = 16 }
    local s = nd.stft(x, w, o)
    assert.same({ 33, 17, 2 }, s:shape())
    close(x:tolist(), nd.istft(s, w, { n_fft = 64, hop_length = 16, length = 257 }):tolist(), 1e-9,
      "round trip")
    for _, f32 in ipairs({ false, true }) do
      local dt = f32 and "float32" or "float64"
      local xx, ww = x:astype(dt), w:astype(dt)
      local g = nd.random_uniform({ 33, 17, 2 }, { low = -1, high = 1, dtype = dt })
      close(nd._ref.stft_backward(g, xx, ww, o):tolist(), nd.stft_backward(g, xx, ww, o):tolist(),
        f32 and 1e-3 or 1e-9, "stft_backward " .. dt)
      local io = { n_fft = 64, hop_length = 16, length = 250 }
      local gi = nd.random_uniform({ 250 }, { low = -1, high = 1, dtype = dt })
      local ss = s:astype(dt)
      close(nd._ref.istft_backward(gi, ss, ww, io):tolist(), nd.istft_backward(gi, ss, ww, io):tolist(),
        f32 and 1e-4 or 1e-9, "istft_backward " .. dt)
    end
  end)

  it("refuses bad shapes and parameters with clear messages", function()
    local x, w = signal(1, 40), window("hann", 16)
    assert.has_error(function() nd.stft(x, w) end,
      "stft: n_fft must be given, a positive integer (got 0)")
    assert.has_error(function() nd.stft(x, window("hann", 20), { n_fft = 16 }) end,
      "stft: window must be 1-d with 1..n_fft (16) samples, got shape (20,)")
    assert.has_error(function() nd.stft(signal(1, 6), window("hann", 16), { n_fft = 16 }) end,
      "stft: reflect padding of 8 needs a signal longer than that, got 6 samples (use "
      .. "pad_mode='constant' or a shorter n_fft)")
    assert.has_error(function() nd.stft(x, w:astype("float32"), { n_fft = 16 }) end,
      "stft: the window's dtype (float32) must be data's (float64)")
    local s = nd.stft(x, w, { n_fft = 16, hop_length = 4 })
    assert.has_error(function() nd.istft(s, w, { n_fft = 20, hop_length = 4 }) end,
      "istft: data has 9 frequency bins, n_fft 20 (onesided) needs 11")
    assert.has_error(function() nd.istft(s, w, { n_fft = 16, hop_length = 4, center = false }) end)
    assert.has_error(function() nd.istft(s, w, { n_fft = 16, hop_length = 16 }) end)
  end)
end)
