"""bench/gnn_bench.py — the peers of bench/gnn_bench.lua on the same WormNet graph, features,
labels and sizes: PyTorch Geometric (GCNConv, GATConv) and DGL (GraphConv, GATConv) epochs,
and the SpMM through scipy.sparse and torch.sparse (u_mul_e_sum: the weighted adjacency
times the features). Run in a dev venv from PyPI alone. DGL's newest PyPI wheel for
CPython 3.11 on Linux is 2.1.0; its libraries are built for torch 2.0.0 .. 2.2.1 (graphbolt,
imported by `import dgl`, needs torchdata's datapipes, gone after 0.7, and pandas, pyyaml,
pydantic), and torch 2.2 wants numpy < 2:
    python3 -m venv /opt/gnnvenv
    /opt/gnnvenv/bin/pip install torch==2.2.1 "numpy<2" "pandas<2.3" dgl==2.1.0 \
        torchdata==0.7.1 pyyaml pydantic torch_geometric scipy
    /opt/gnnvenv/bin/python bench/gnn_bench.py --threads=1 [--quick] [--impl=pyg,dgl,sparse]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
Q = 0.1 if A.get("quick") else 1
impls = str(A.get("impl", "pyg,dgl,sparse")).split(",")

PATHS = ["/usr/share/doc/python3-networkx/examples/algorithms/WormNet.v3.benchmark.txt",
         "/usr/share/doc/networkx-2.8.8/examples/algorithms/WormNet.v3.benchmark.txt"]
path = next(p for p in PATHS if os.path.exists(p))
ids, src, dst, seen = {}, [], [], set()
for line in open(path):
    a, b = line.split()[:2]
    u, v = ids.setdefault(a, len(ids)), ids.setdefault(b, len(ids))
    k = (min(u, v), max(u, v))
    if u != v and k not in seen:  # mx.dgl.wormnet: one undirected edge per pair
        seen.add(k)
        src += [u, v]
        dst += [v, u]
n = len(ids)
src += list(range(n))  # add_self_loop
dst += list(range(n))
E = len(src)
note = "threads=%d wormnet N=%d E=%d" % (threads, n, E)

state = 12345


def uniform(k):  # bench/gnn_bench.lua's Park-Miller generator
    global state
    out = []
    for _ in range(k):
        state = state * 48271 % 2147483647
        out.append(state / 2147483647 * 2 - 1)
    return out


X = torch.tensor(uniform(n * 128), dtype=torch.float32).reshape(n, 128)
Y = torch.tensor([int((v + 1) * 4) % 8 for v in uniform(n)])
H64 = torch.tensor(uniform(n * 64), dtype=torch.float32).reshape(n, 64)
W = torch.tensor(uniform(E), dtype=torch.float32)
ei = torch.tensor([src, dst])


def epoch_bench(name, impl, net, call):
    opt = torch.optim.Adam(net.parameters(), lr=0.01)

    def run(k):
        for _ in range(k):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(call(net), Y)
            loss.backward()
            opt.step()
    t = H.time(run, n=max(1, int(10 * Q)), reps=5, warmup=1)
    H.report("gnn_%s_epoch" % name, t["median"] / 1e6, "ms", impl=impl, note=note)


if "pyg" in impls:
    from torch_geometric.nn import GATConv, GCNConv

    class PGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # the self loops are in the graph already, as on the luamx side
            self.c1, self.c2 = GCNConv(128, 16, add_self_loops=False), GCNConv(16, 8, add_self_loops=False)

        def forward(self, x, e):
            return self.c2(torch.relu(self.c1(x, e)), e)

    class PGAT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a1 = GATConv(128, 8, heads=8, add_self_loops=False)
            self.a2 = GATConv(64, 8, heads=1, add_self_loops=False)

        def forward(self, x, e):
            return self.a2(torch.relu(self.a1(x, e)), e)

    epoch_bench("gcn", "pyg", PGCN(), lambda m: m(X, ei))
    epoch_bench("gat", "pyg", PGAT(), lambda m: m(X, ei))

if "dgl" in impls:
    import dgl
    from dgl.nn.pytorch import GATConv as DGAT, GraphConv as DGC
    g = dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=n)

    class DGCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = DGC(128, 16, activation=torch.relu), DGC(16, 8)

        def forward(self, gr, x):
            return self.c2(gr, self.c1(gr, x))

    class DGATN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a1, self.a2 = DGAT(128, 8, 8, activation=torch.relu), DGAT(64, 8, 1)

        def forward(self, gr, x):
            return self.a2(gr, self.a1(gr, x).reshape(n, 64)).reshape(n, 8)

    epoch_bench("gcn", "dgl", DGCN(), lambda m: m(g, X))
    epoch_bench("gat", "dgl", DGATN(), lambda m: m(g, X))

if "sparse" in impls:
    import numpy as np
    import scipy.sparse as sp
    # rows: destinations, columns: sources (out[v] = sum_u A[v, u] h[u])
    ones = sp.csr_matrix((np.ones(E, np.float32), (dst, src)), shape=(n, n))
    wtd = sp.csr_matrix((W.numpy(), (dst, src)), shape=(n, n))
    h = H64.numpy()
    tw = torch.sparse_coo_tensor(torch.tensor([dst, src]), W, (n, n)).coalesce().to_sparse_csr()
    for name, flops, impl, fn in [
            ("copy_u_sum", 1, "scipy", lambda: ones @ h),
            ("u_mul_e_sum", 2, "scipy", lambda: wtd @ h),
            ("u_mul_e_sum", 2, "torch.sparse", lambda: tw @ H64)]:
        def run(k, fn=fn):
            for _ in range(k):
                fn()
        t = H.time(run, n=max(1, int(50 * Q)), reps=7)
        H.report("gnn_spmm_" + name, t["median"] / 1e6, "ms", impl=impl, note=note)
        H.report("gnn_spmm_%s_gflops" % name, flops * E * 64 / t["median"], "GFLOP/s", impl=impl,
                 note=note)
