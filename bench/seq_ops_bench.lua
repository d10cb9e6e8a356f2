-- bench/seq_ops_bench.lua — the sequence ops, per call (float32): Embedding lookup
-- and lookup + backward of a 50k x 256 table with 4096 ids; layer_norm of (4096, 256)
-- forward and forward + backward; a self-attention block of d_model 256, 4 heads, seq 128,
-- batch 16 (interleaved qk + softmax + valatt) forward and forward + backward; batch_dot
-- (64 x 128 x 64 heads) with each transpose flag. Peer: bench/seq_ops_bench.py (PyTorch).
-- Runner: bench/seq_ops_run.sh. (MX_BUILD=build dir, default build; --quick: a smoke run.)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx = require("mx")
local nd, ag = mx.nd, mx.autograd

local A = H.args(arg)
local threads = A.threads or 1
local Q = A.quick and 0.1 or 1
require("mx.core.lib").C.mx_set_num_threads(threads)
local note = "threads=" .. threads .. " f32"
H.env_note()
local function N(k) return math.max(1, math.floor(k * Q)) end

---------------------------------------------------------------- embedding
do
  local V, E, B = 50000, 256, 4096
  local w = nd.random.normal(0, 1, { V, E })
  local ids = nd.random.randint(0, V, { B }):astype("int64")
  local g = nd.ones({ B, E })
  w:attach_grad()
  local fw = H.time(function(n)
    for _ = 1, n do nd.embedding(ids, w):wait_to_read() end
  end, { n = N(200) })
  H.report("embedding_fwd", fw.median / 1e3, "us/call", { note = note .. " 50000x256 4096 ids" })
  local fb = H.time(function(n)
    for _ = 1, n do
      local y
      ag.record(function() y = nd.embedding(ids, w) end)
      y:backward(g)
      w:grad():wait_to_read()
    end
  end, { n = N(30) })
  H.report("embedding_fwd_bwd", fb.median / 1e3, "us/call", { note = note .. " 50000x256 4096 ids" })
end

---------------------------------------------------------------- layer_norm
do
  local x = nd.random.normal(0, 1, { 4096, 256 })
  local gm, bt = nd.ones({ 256 }), nd.zeros({ 256 })
  local g = nd.random.normal(0, 1, { 4096, 256 })
  x:attach_grad(); gm:attach_grad(); bt:attach_grad()
  local fw = H.time(function(n)
    for _ = 1, n do local y = nd.layer_norm(x, gm, bt) y:wait_to_read() end
  end, { n = N(200) })
  H.report("layer_norm_fwd", fw.median / 1e3, "us/call", { note = note .. " (4096,256)" })
  local fb = H.time(function(n)
    for _ = 1, n do
      local y
      ag.record(function() y = nd.layer_norm(x, gm, bt) end)
      y:backward(g)
      x:grad():wait_to_read(); gm:grad():wait_to_read()
    end
  end, { n = N(100) })
  H.report("layer_norm_fwd_bwd", fb.median / 1e3, "us/call", { note = note .. " (4096,256)" })
end

---------------------------------------------------------------- self-attention block
do
  local T, Bn, Hh, Dm = 128, 16, 4, 256
  local qkv = nd.random.normal(0, 1, { T, Bn, 3 * Dm })
  local g = nd.random.normal(0, 1, { T, Bn, Dm })
  qkv:attach_grad()
  local o = { heads = Hh }
  local function block(x)
    local s = nd.interleaved_matmul_selfatt_qk(x, o)
    return nd.interleaved_matmul_selfatt_valatt(x, nd.softmax(s, { axis = -1 }), o)
  end
  local fw = H.time(function(n)
    for _ = 1, n do block(qkv):wait_to_read() end
  end, { n = N(50) })
  H.report("selfatt_fwd", fw.median / 1e3, "us/call", { note = note .. " T128 N16 H4 d256" })
  local fb = H.time(function(n)
    for _ = 1, n do
      local y
      ag.record(function() y = block(qkv) end)
      y:backward(g)
      qkv:grad():wait_to_read()
    end
  end, { n = N(30) })
  H.report("selfatt_fwd_bwd", fb.median / 1e3, "us/call", { note = note .. " T128 N16 H4 d256" })
end

---------------------------------------------------------------- batch_dot flags
do
  local Bn, M, K = 64, 128, 64
  local a, b = nd.random.normal(0, 1, { Bn, M, K }), nd.random.normal(0, 1, { Bn, M, K })
  local at, bt = nd.random.normal(0, 1, { Bn, K, M }), nd.random.normal(0, 1, { Bn, K, M })
  local cases = { { "nn", a, bt, false, false }, { "nt", a, b, false, true },
    { "tn", at, bt, true, false }, { "tt", at, b, true, true } }
  for _, c in ipairs(cases) do
    local lhs, rhs, oo = c[2], c[3], { transpose_a = c[4], transpose_b = c[5] }
    local t = H.time(function(n)
      for _ = 1, n do nd.batch_dot(lhs, rhs, oo):wait_to_read() end
    end, { n = N(50) })
    H.report("batch_dot_" .. c[1], t.median / 1e3, "us/call", { note = note .. " 64x128x64x128" })
  end
end
