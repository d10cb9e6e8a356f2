-- bench/pool_bench.lua — max pooling forward and forward+backward; peer:
-- bench/pool_bench.py (PyTorch). Run both in one command, alternating:
--   for p in 1 2 3; do luajit bench/pool_bench.lua --threads=1; \
--     /opt/torchvenv/bin/python bench/pool_bench.py --threads=1; done > bench/out/pool_raw.txt
--   python3 bench/compare.py bench/out/pool_raw.txt
-- Data N32 C64 112x112 float32 (row-major, and luamx also on oneDNN's nChw16c blocked layout,
-- the one a preceding oneDNN convolution hands over). Results (ms per call, medians):
--   pool2x2_fwd / pool3x3s2_fwd          pooling(x): kernel 2 stride 2; kernel 3 stride 2 pad 1
--   pool2x2_fwdbwd / pool3x3s2_fwdbwd    forward, then the data gradient from an output gradient
--   *_blocked                            the same on a blocked input (luamx only)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd = mx.nd
local lib = require("mx.core.lib")
local ffi, C = lib.ffi, lib.C

local A = H.args(arg)
local threads = A.threads or 1
local Q = A.quick and 0.2 or 1
C.mx_set_num_threads(threads)
local note = "threads=" .. threads
H.env_note()
local sync = nd.waitall or function() end

local shape = { 32, 64, 112, 112 }
local x = nd.random_uniform { shape = shape, low = -1, high = 1 }
local function blocked(t)
  local out = ffi.new("mx_tensor*[1]")
  if C.mx_tensor_to_layout(t.h, C.MX_LAYOUT_ONEDNN, "nChw16c", out) ~= 0 then return nil end
  return nd._wrap(out[0])
end

local CASES = {
  { "pool2x2", { kernel = { 2, 2 }, stride = { 2, 2 } } },
  { "pool3x3s2", { kernel = { 3, 3 }, stride = { 2, 2 }, pad = { 1, 1 } } },
}
local pooling, backward = nd.pooling, nd.pooling_backward
for _, c in ipairs(CASES) do
  local name, o = c[1], c[2]
  for _, variant in ipairs({ "", "_blocked" }) do
    local xi = variant == "" and x or blocked(x)
    if xi then
      local y = pooling(xi, o)
      local g = nd.random_uniform { shape = y:shape(), low = -1, high = 1 }
      if variant ~= "" then g = blocked(g) end
      local n = math.max(1, math.floor(10 * Q))
      local t = H.time(function(k)
        for _ = 1, k do pooling(xi, o) end
        sync()
      end, { n = n, reps = 7, warmup = 1 })
      H.report(name .. "_fwd" .. variant, t.median / 1e6, "ms", { note = note })
      t = H.time(function(k)
        for _ = 1, k do backward(g, xi, pooling(xi, o), o) end
        sync()
      end, { n = n, reps = 7, warmup = 1 })
      H.report(name .. "_fwdbwd" .. variant, t.median / 1e6, "ms", { note = note })
    end
  end
end
