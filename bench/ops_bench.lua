-- bench/ops_bench.lua — per-op overhead and elementwise throughput of luamx.
-- Peer: bench/ops_bench.py (PyTorch eager and numpy), same benches, same names.
--   luajit bench/ops_bench.lua [--threads=1] [--quick]
-- Benches (ns/call unless noted):
--   add1_new    c = mx.nd.add(a, b) on 1-element f32 tensors (a new result each call)
--   add1_meta   c = a + b (the metamethod), same
--   add1_out    mx.nd.add(a, b, {out = c}) (options table hoisted out of the loop)
--   add4k_new   64x64 f32 add, new result            (ns/call)
--   add4k_out   64x64 f32 add into out=              (ns/call)
--   add4k_scope the 64x64 new-result add inside mx.nd.scope: the result is released
--               (hot) when the scope returns, as PyTorch frees its previous result
--   add1M_new   1 M-element f32 add, new result     (GB/s: 12 MB moved per call)
--   add1M_scope the same inside mx.nd.scope        (GB/s)
--   add1M_out   1 M-element f32 add into out=       (GB/s)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local quick = A.quick
local function N(n) return quick and math.max(1, math.floor(n / 20)) or n end
local sync = nd.waitall or function() end
local note = "threads=" .. threads
H.env_note()

local add = nd.add
do -- 1-element
  local a, b = nd.ones { 1 }, nd.ones { 1 }
  local c = nd.zeros { 1 }
  local t = H.time(function(n)
    local r
    for _ = 1, n do r = add(a, b) end
    sync()
    return r
  end, { n = N(2e5) })
  H.report("add1_new", t.median, "ns/call", { note = note })
  t = H.time(function(n)
    local r
    for _ = 1, n do r = a + b end
    sync()
    return r
  end, { n = N(2e5) })
  H.report("add1_meta", t.median, "ns/call", { note = note })
  local o = { out = c }
  t = H.time(function(n)
    for _ = 1, n do add(a, b, o) end
    sync()
  end, { n = N(5e5) })
  H.report("add1_out", t.median, "ns/call", { note = note })
end

do -- 64 x 64
  local a, b = nd.ones { 64, 64 }, nd.ones { 64, 64 }
  local c = nd.zeros { 64, 64 }
  local t = H.time(function(n)
    local r
    for _ = 1, n do r = add(a, b) end
    sync()
    return r
  end, { n = N(2e4) })
  H.report("add4k_new", t.median, "ns/call", { note = note })
  local o = { out = c }
  t = H.time(function(n)
    for _ = 1, n do add(a, b, o) end
    sync()
  end, { n = N(2e4) })
  H.report("add4k_out", t.median, "ns/call", { note = note })
  local scope = nd.scope -- (absent from older trees: the row is left out)
  local function body() local _ = add(a, b) end
  if scope then
    t = H.time(function(n)
      for _ = 1, n do scope(body) end
      sync()
    end, { n = N(2e4) })
    H.report("add4k_scope", t.median, "ns/call", { note = note })
  end
end

do -- 1 M elements
  local M = 1000000
  local a, b = nd.ones { M }, nd.ones { M }
  local c = nd.zeros { M }
  local bytes = 3 * 4 * M
  local t = H.time(function(n)
    local r
    for _ = 1, n do r = add(a, b) end
    sync()
    return r
  end, { n = N(200), reps = 9 })
  H.report("add1M_new", bytes / t.median, "GB/s", { note = note })
  local scope = nd.scope
  local function body() local _ = add(a, b) end
  if scope then
    t = H.time(function(n)
      for _ = 1, n do scope(body) end
      sync()
    end, { n = N(200), reps = 9 })
    H.report("add1M_scope", bytes / t.median, "GB/s", { note = note })
  end
  local o = { out = c }
  t = H.time(function(n)
    for _ = 1, n do add(a, b, o) end
    sync()
  end, { n = N(200), reps = 9 })
  H.report("add1M_out", bytes / t.median, "GB/s", { note = note })
end
