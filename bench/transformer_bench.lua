-- bench/transformer_bench.lua — one transformer encoder layer (peer:
-- bench/transformer_bench.py): gluon.nn.TransformerEncoderCell, d_model 256, 4 heads,
-- FFN 1024, dropout 0, input (batch 16, seq 128, 256), forward + backward (a sum of the
-- output as the loss), ms per step; eager and hybridized.
--   MX_BUILD=build luajit bench/transformer_bench.lua --threads=1
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd = mx.nd
H.env_note()
local note = threads .. "T d256 h4 ffn1024 b16 t128"
for _, hyb in ipairs({ false, true }) do
  mx.random.seed(1)
  local cell = mx.gluon.nn.TransformerEncoderCell({ units = 256, hidden_size = 1024, num_heads = 4,
    dropout = 0 })
  cell:initialize(mx.init.Xavier())
  local x = nd.random.normal(0, 1, { 16, 128, 256 })
  x:attach_grad()
  if hyb then cell:hybridize() end
  local t = H.time(function(n)
    for _ = 1, n do
      mx.autograd.record(function()
        local y = cell(x)
        return y:sum()
      end):backward()
    end
    nd.waitall()
  end, { n = A.steps or 5, reps = 5 })
  H.report("transformer_layer_fwd_bwd", t.median * 1e-6, "ms",
    { impl = hyb and "luamx-hybrid" or "luamx", note = note })
end
