-- bench/gnn_bench.lua — graph neural networks on WormNet v3 (python3-networkx's file:
-- 2445 genes, 78736 links both ways, plus self loops): one full-graph training epoch
-- (forward, backward, Adam step) of a 2-layer GCN (128 -> 16 -> 8, mx.dgl.nn.GraphConv) and
-- a 2-layer GAT (128 -> 8 x 8 heads -> 8, GATConv), and the SpMM alone (copy_u_sum and
-- u_mul_e_sum, 64 features): ms per epoch / call and GFLOP/s (2 E F flops for u_mul_e_sum,
-- E F for copy_u_sum). Features and labels come from a Park-Miller generator that
-- bench/gnn_bench.py repeats, so both sides train on the same numbers.
-- Peers: bench/gnn_bench.py (PyTorch Geometric, DGL, scipy.sparse and torch.sparse).
--   for t in 1 2; do luajit bench/gnn_bench.lua --threads=$t; \
--     /opt/gnnvenv/bin/python bench/gnn_bench.py --threads=$t; done > bench/out/gnn_raw.txt
--   python3 bench/compare.py bench/out/gnn_raw.txt
-- (MX_BUILD=build dir, default build; --quick for a smoke run.)
package.path = "bench/?.lua;lua/?.lua;lua/?/init.lua;" .. package.path
package.cpath = (os.getenv("MX_BUILD") or "build") .. "/lib/?.so;" .. package.cpath
local H = require("harness")
local mx, A, threads = H.mx_setup(arg)
local nd, dgl, gluon = mx.nd, mx.dgl, mx.gluon
local Q = A.quick and 0.1 or 1
H.env_note()

local g = assert(dgl.wormnet()):add_self_loop()
local n, E = g:num_nodes(), g:num_edges()
local note = string.format("threads=%d wormnet N=%d E=%d", threads, n, E)

-- Park-Miller minimal standard: x = 48271 x mod (2^31 - 1), exact in doubles
local state = 12345
local function uniform(k)
  local t = {}
  for i = 1, k do
    state = state * 48271 % 2147483647
    t[i] = state / 2147483647 * 2 - 1
  end
  return t
end
local X = nd.array(uniform(n * 128)):reshape { n, 128 }
local lab = {}
for i, v in ipairs(uniform(n)) do lab[i] = math.floor((v + 1) * 4) % 8 end
local Y = nd.array(lab)

local function epoch_bench(name, net)
  net:initialize()
  local tr = gluon.Trainer(net:collect_params(), "adam", { learning_rate = 0.01 })
  local loss = gluon.loss.SoftmaxCrossEntropyLoss()
  local t = H.time(function(k)
    for _ = 1, k do
      local L
      mx.autograd.record(function() L = loss(net(g, X), Y):mean() end)
      L:backward()
      tr:step(1)
      L:wait_to_read()
    end
  end, { n = math.max(1, math.floor(10 * Q)), reps = 5, warmup = 1 })
  H.report("gnn_" .. name .. "_epoch", t.median / 1e6, "ms", { note = note })
end

local GCN = gluon.Block:extend("BenchGCN")
function GCN:__init()
  gluon.Block.__init(self)
  self.c1 = dgl.nn.GraphConv(128, 16, { activation = "relu" })
  self.c2 = dgl.nn.GraphConv(16, 8)
end
function GCN:forward(gr, x) return self.c2(gr, self.c1(gr, x)) end
epoch_bench("gcn", GCN())

local GAT = gluon.Block:extend("BenchGAT")
function GAT:__init()
  gluon.Block.__init(self)
  self.a1 = dgl.nn.GATConv(128, 8, 8, { activation = "relu" })
  self.a2 = dgl.nn.GATConv(64, 8, 1)
end
function GAT:forward(gr, x) return self.a2(gr, self.a1(gr, x):reshape { n, 64 }):reshape { n, 8 } end
epoch_bench("gat", GAT())

local H64 = nd.array(uniform(n * 64)):reshape { n, 64 }
local W = nd.array(uniform(E)):reshape { E, 1 }
for _, c in ipairs({ { "copy_u_sum", 1, function() return dgl.ops.copy_u_sum(g, H64) end },
  { "u_mul_e_sum", 2, function() return dgl.ops.u_mul_e_sum(g, H64, W) end } }) do
  local t = H.time(function(k)
    for _ = 1, k do c[3]():wait_to_read() end
  end, { n = math.max(1, math.floor(50 * Q)), reps = 7 })
  H.report("gnn_spmm_" .. c[1], t.median / 1e6, "ms", { note = note })
  H.report("gnn_spmm_" .. c[1] .. "_gflops", c[2] * E * 64 / t.median, "GFLOP/s", { note = note })
end
