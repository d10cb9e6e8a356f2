"""bench/norm_bench.py — PyTorch peer of bench/norm_bench.lua (same benches and names).
   /opt/torchvenv/bin/python bench/norm_bench.py [--threads=1] [--quick]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

_A = H.args(sys.argv[1:])
os.environ.setdefault("OMP_NUM_THREADS", str(_A.get("threads", 1)))
import torch  # noqa: E402
import torch.nn.functional as Fn  # noqa: E402

threads = int(_A.get("threads", 1))
Q = 0.1 if _A.get("quick") else 1
torch.set_num_threads(threads)
note = "threads=%d N32 C64 56x56" % threads
H.env_note()

x = torch.rand(32, 64, 56, 56) * 2 - 1
g, b = torch.ones(64), torch.zeros(64)
rm, rv = torch.zeros(64), torch.ones(64)
dy = torch.rand(32, 64, 56, 56) * 2 - 1
N = max(1, int(20 * Q))


def fwd(training):
    def run(n):
        with torch.no_grad():
            for _ in range(n):
                Fn.batch_norm(x, rm, rv, g, b, training, 0.1, 1e-5)
    return run


t = H.time(fwd(True), n=N, reps=5)
H.report("bn_fwd_train", t["median"] / 1e6, "ms/call", note=note)
t = H.time(fwd(False), n=N, reps=5)
H.report("bn_fwd_infer", t["median"] / 1e6, "ms/call", note=note)

xg, gg, bg = x.clone().requires_grad_(), g.clone().requires_grad_(), b.clone().requires_grad_()


def fb(n):
    for _ in range(n):
        xg.grad = gg.grad = bg.grad = None
        y = Fn.batch_norm(xg, rm, rv, gg, bg, True, 0.1, 1e-5)
        y.backward(dy)


t = H.time(fb, n=N, reps=5)
H.report("bn_fwd_bwd", t["median"] / 1e6, "ms/call", note=note)
