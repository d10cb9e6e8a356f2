"""bench/pool_bench.py — PyTorch peer of bench/pool_bench.lua (same benches, same names;
see that file for what each measures).
   /opt/torchvenv/bin/python bench/pool_bench.py [--threads=1] [--quick]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

_A = H.args(sys.argv[1:])
os.environ.setdefault("OMP_NUM_THREADS", str(_A.get("threads", 1)))
import torch  # noqa: E402
import torch.nn.functional as Fn  # noqa: E402

threads = int(_A.get("threads", 1))
Q = 0.2 if _A.get("quick") else 1
torch.set_num_threads(threads)
note = "threads=%d" % threads
H.env_note()

torch.manual_seed(1)
x = torch.rand(32, 64, 112, 112) * 2 - 1
CASES = [("pool2x2", dict(kernel_size=2, stride=2)),
         ("pool3x3s2", dict(kernel_size=3, stride=2, padding=1))]
# "_blocked": torch's channels_last, its nearest to oneDNN's blocked layout
for (name, o), variant in [(c, v) for c in CASES for v in ("", "_blocked")]:
    fmt = torch.channels_last if variant else torch.contiguous_format
    xv = x.contiguous(memory_format=fmt)
    xg = xv.clone().requires_grad_()
    g = (torch.rand_like(Fn.max_pool2d(x, **o)) * 2 - 1).contiguous(memory_format=fmt)
    n = max(1, int(10 * Q))

    def fwd(k):
        with torch.no_grad():
            for _ in range(k):
                Fn.max_pool2d(xv, **o)

    def fwdbwd(k):
        for _ in range(k):
            xg.grad = None
            Fn.max_pool2d(xg, **o).backward(g)

    t = H.time(fwd, n=n, reps=7, warmup=1)
    H.report(name + "_fwd" + variant, t["median"] / 1e6, "ms", note=note)
    t = H.time(fwdbwd, n=n, reps=7, warmup=1)
    H.report(name + "_fwdbwd" + variant, t["median"] / 1e6, "ms", note=note)
