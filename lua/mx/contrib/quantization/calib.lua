-- mx.contrib.quantization.calib — the calibration statistics of quantize_net: per tensor
-- the min and max over the calibration batches (naive), or the KL-divergence-optimal
-- threshold of its |x| histogram (entropy: MXNet's _get_optimal_threshold, on 2048 bins
-- of |x| with 128 quantized levels as TensorRT does, where MXNet uses 8001 signed bins);
-- and the per-channel means bias correction takes.
local lib = require("mx.core.lib")
local nd = require("mx.nd")
local ffi = lib.ffi

local M = {}
local NBINS, NQ = 2048, 128

local function floats(x)
  local y = x:astype("float32")
  return ffi.cast("const float*", y:data_ptr()), y:size(), y
end

-- observe(st, x): min and max of x into st
function M.minmax(st, x)
  local p, n = floats(x)
  local mn, mx = st.min or math.huge, st.max or -math.huge
  for i = 0, n - 1 do
    local v = p[i]
    if v < mn then mn = v end
    if v > mx then mx = v end
  end
  st.min, st.max = mn, mx
end

-- mean(st, x, k): x's sums per channel into st (k "channel": axis 2 over the batch and the
-- spatial axes; otherwise k features, the last axis's elements or a flattened row's);
-- mean_of(st) the mean so far
function M.mean(st, x, k)
  local sh = x:shape()
  local s, n
  if k == "channel" then
    s = nd.sum(nd.reshape(x, { sh[1], sh[2], -1 }), { axis = { 1, 3 } })
    n = x:size() / sh[2]
  else
    s = nd.sum(nd.reshape(x, { -1, k }), { axis = 1 })
    n = x:size() / k
  end
  st.sum = st.sum and nd.add(st.sum, s) or s
  st.count = (st.count or 0) + n
end
function M.mean_of(st) return nd.div_scalar(st.sum, { scalar = st.count }) end

-- hist(st, x): x's |values| into st.hist over [0, st.amax) (amax from the min/max pass)
function M.hist(st, x)
  local p, n = floats(x)
  local h = st.hist
  if not h then
    h = ffi.new("double[?]", NBINS)
    st.hist = h
  end
  local amax = math.max(math.abs(st.min), math.abs(st.max))
  if amax == 0 then return end
  local k = NBINS / amax
  for i = 0, n - 1 do
    local b = math.floor(math.abs(p[i]) * k)
    if b >= NBINS then b = NBINS - 1 end
    h[b] = h[b] + 1
  end
end

local function kl(p, q, n)
  local s = 0
  for i = 0, n - 1 do
    if p[i] > 0 then
      if q[i] == 0 then return math.huge end
      s = s + p[i] * math.log(p[i] / q[i])
    end
  end
  return s
end

-- threshold(st) -> the |x| threshold minimising KL(P || Q): P the histogram clipped at i
-- bins (outliers folded into the last), Q it quantized to NQ levels and expanded back
function M.threshold(st)
  local amax = math.max(math.abs(st.min), math.abs(st.max))
  local h0 = st.hist
  if not h0 or amax == 0 then return amax end
  -- the zero bin as its neighbour (TensorRT's calibrator does so): a ReLU's exact zeros
  -- would otherwise dominate P and favour thresholds that clip most of the range
  local h = ffi.new("double[?]", NBINS)
  ffi.copy(h, h0, NBINS * ffi.sizeof("double"))
  h[0] = h[1]
  local best, best_i = math.huge, NBINS
  local P = ffi.new("double[?]", NBINS)
  local Q = ffi.new("double[?]", NBINS)
  for i = NQ, NBINS, 16 do
    local tail = 0
    for j = i, NBINS - 1 do tail = tail + h[j] end
    local total = 0
    for j = 0, i - 1 do
      P[j] = h[j]
      total = total + h[j]
    end
    P[i - 1] = P[i - 1] + tail
    total = total + tail
    if total > 0 then
      local per = i / NQ
      for q = 0, NQ - 1 do
        local lo, hi = math.floor(q * per), math.floor((q + 1) * per) - 1
        if q == NQ - 1 then hi = i - 1 end
        -- Q from the unclipped slice (the outliers are in P only: clipping costs)
        local sum, nz = 0, 0
        for j = lo, hi do
          sum = sum + h[j]
          if h[j] > 0 then nz = nz + 1 end
        end
        for j = lo, hi do Q[j] = (h[j] > 0 and nz > 0) and sum / nz or 0 end
      end
      for j = 0, i - 1 do P[j] = P[j] / total end
      local qs = 0
      for j = 0, i - 1 do qs = qs + Q[j] end
      if qs > 0 then for j = 0, i - 1 do Q[j] = Q[j] / qs end end
      -- MXNet's _smooth_distribution: zeros of Q get eps, taken from its non-zeros
      local zeros = 0
      for j = 0, i - 1 do if Q[j] == 0 then zeros = zeros + 1 end end
      if zeros > 0 and zeros < i then
        local eps1 = 1e-4 * zeros / (i - zeros)
        for j = 0, i - 1 do Q[j] = Q[j] == 0 and 1e-4 or Q[j] - eps1 end
      end
      local d = kl(P, Q, i)
      if d < best then best, best_i = d, i end
    end
  end
  return best_i * amax / NBINS -- the upper edge of the last bin kept
end

return M
