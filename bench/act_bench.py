"""bench/act_bench.py — PyTorch peer of bench/act_bench.lua: leaky_relu (0.1), gelu (erf)
and silu on 1M float32 elements, forward and forward + backward (head gradient given)."""
import sys

sys.path.insert(0, "bench")
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
import torch.nn.functional as F  # noqa: E402

Q = 0.1 if A.get("quick") else 1
note = "threads=%d n=1M f32" % threads
N = 1000000
x = (torch.sin(torch.arange(0, N, dtype=torch.float32)) * 4).requires_grad_(True)
g = torch.cos(torch.arange(0, N, dtype=torch.float32))
CASES = [("leaky_relu", lambda t: F.leaky_relu(t, 0.1)), ("gelu", F.gelu), ("silu", F.silu)]
for name, f in CASES:
    def fwd(n):
        with torch.no_grad():
            for _ in range(n):
                f(x)

    def fwd_bwd(n):
        for _ in range(n):
            x.grad = None
            f(x).backward(g)

    H.report("act_%s_fwd" % name, H.time(fwd, n=max(1, int(50 * Q)))["median"] / 1e3, "us/call",
             note=note)
    H.report("act_%s_fwd_bwd" % name, H.time(fwd_bwd, n=max(1, int(30 * Q)))["median"] / 1e3,
             "us/call", note=note)
