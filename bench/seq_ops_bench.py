"""bench/seq_ops_bench.py — PyTorch peer of bench/seq_ops_bench.lua (float32): F.embedding
of a 50k x 256 table with 4096 ids (forward; forward + dense backward, grad set to None
each step as zero_grad does); F.layer_norm (4096, 256); a self-attention block (d_model
256, 4 heads, seq 128, batch 16) from an interleaved qkv (T, N, 3*d) written with
torch.bmm as MXNet's ops compute it (and F.scaled_dot_product_attention, PyTorch's fused
kernel, as extra information); torch.bmm with transposed views."""
import sys

sys.path.insert(0, "bench")
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
import torch.nn.functional as F  # noqa: E402

Q = 0.1 if A.get("quick") else 1
note = "threads=%d f32" % threads


def N(k):
    return max(1, int(k * Q))


# ---- embedding
V, E, B = 50000, 256, 4096
w = torch.randn(V, E, requires_grad=True)
ids = torch.randint(0, V, (B,))
g = torch.ones(B, E)


def emb_fwd(n):
    with torch.no_grad():
        for _ in range(n):
            F.embedding(ids, w)


def emb_fwd_bwd(n):
    for _ in range(n):
        w.grad = None
        F.embedding(ids, w).backward(g)


H.report("embedding_fwd", H.time(emb_fwd, n=N(200))["median"] / 1e3, "us/call",
         note=note + " 50000x256 4096 ids")
H.report("embedding_fwd_bwd", H.time(emb_fwd_bwd, n=N(30))["median"] / 1e3, "us/call",
         note=note + " 50000x256 4096 ids")

# ---- layer_norm
x = torch.randn(4096, 256, requires_grad=True)
gm = torch.ones(256, requires_grad=True)
bt = torch.zeros(256, requires_grad=True)
gy = torch.randn(4096, 256)


def ln_fwd(n):
    with torch.no_grad():
        for _ in range(n):
            F.layer_norm(x, (256,), gm, bt)


def ln_fwd_bwd(n):
    for _ in range(n):
        x.grad = gm.grad = bt.grad = None
        F.layer_norm(x, (256,), gm, bt).backward(gy)


H.report("layer_norm_fwd", H.time(ln_fwd, n=N(200))["median"] / 1e3, "us/call",
         note=note + " (4096,256)")
H.report("layer_norm_fwd_bwd", H.time(ln_fwd_bwd, n=N(100))["median"] / 1e3, "us/call",
         note=note + " (4096,256)")

# ---- self-attention block
T, Bn, Hh, Dm = 128, 16, 4, 256
D = Dm // Hh
qkv = torch.randn(T, Bn, 3 * Dm, requires_grad=True)
go = torch.randn(T, Bn, Dm)


def block(t):
    v5 = t.view(T, Bn, Hh, 3, D)
    q, k, v = (v5[:, :, :, i, :].permute(1, 2, 0, 3).reshape(Bn * Hh, T, D) for i in range(3))
    s = torch.bmm(q, k.transpose(1, 2)) / D ** 0.5
    o = torch.bmm(torch.softmax(s, dim=-1), v)
    return o.view(Bn, Hh, T, D).permute(2, 0, 1, 3).reshape(T, Bn, Dm)


def block_sdpa(t):
    v5 = t.view(T, Bn, Hh, 3, D)
    q, k, v = (v5[:, :, :, i, :].permute(1, 2, 0, 3) for i in range(3))
    o = F.scaled_dot_product_attention(q, k, v)
    return o.permute(2, 0, 1, 3).reshape(T, Bn, Dm)


for name, f in (("selfatt", block), ("selfatt_sdpa", block_sdpa)):
    def fwd(n):
        with torch.no_grad():
            for _ in range(n):
                f(qkv)

    def fwd_bwd(n):
        for _ in range(n):
            qkv.grad = None
            f(qkv).backward(go)

    H.report(name + "_fwd", H.time(fwd, n=N(50))["median"] / 1e3, "us/call",
             note=note + " T128 N16 H4 d256")
    H.report(name + "_fwd_bwd", H.time(fwd_bwd, n=N(30))["median"] / 1e3, "us/call",
             note=note + " T128 N16 H4 d256")

# ---- bmm with transposed views
Bn, M, K = 64, 128, 64
a, b = torch.randn(Bn, M, K), torch.randn(Bn, M, K)
at, bt2 = torch.randn(Bn, K, M), torch.randn(Bn, K, M)
cases = (("nn", a, bt2, False, False), ("nt", a, b, False, True),
         ("tn", at, bt2, True, False), ("tt", at, b, True, True))
for name, lhs, rhs, ta, tb in cases:
    lhs2 = lhs.transpose(1, 2) if ta else lhs
    rhs2 = rhs.transpose(1, 2) if tb else rhs

    def mm(n, lhs2=lhs2, rhs2=rhs2):
        with torch.no_grad():
            for _ in range(n):
                torch.bmm(lhs2, rhs2)

    H.report("batch_dot_" + name, H.time(mm, n=N(50))["median"] / 1e3, "us/call",
             note=note + " 64x128x64x128")
