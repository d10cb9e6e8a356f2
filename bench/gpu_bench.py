"""bench/gpu_bench.py — PyTorch CUDA peer of bench/gpu_bench.lua (same bench names)."""
import os
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import torch  # noqa: E402

quick = "--quick" in sys.argv
dev = torch.device("cuda:0")
H.env_note()
sys.stdout.write("# torch %s, %s\n" % (torch.__version__, torch.cuda.get_device_name(0)))
with torch.no_grad():
    a = torch.ones(1, device=dev)
    b = torch.ones(1, device=dev)
    c = torch.zeros(1, device=dev)

    def new(n):
        for _ in range(n):
            r = torch.add(a, b)
        torch.cuda.synchronize()
        return r

    def out(n):
        for _ in range(n):
            torch.add(a, b, out=c)
        torch.cuda.synchronize()

    n = 1000 if quick else 20000
    H.report("gpu_add1_new", H.time(new, n)["median"], "ns/call", note="gpu(0)")
    H.report("gpu_add1_out", H.time(out, n)["median"], "ns/call", note="gpu(0)")
    for M in (1000000, 100000000):
        a = torch.ones(M, device=dev)
        b = torch.ones(M, device=dev)
        c = torch.zeros(M, device=dev)
        iters = 20 if M >= 1e8 else 2000
        if quick:
            iters = -(-iters // 10)
        t = H.time(out, iters, reps=5)
        label = "100M" if M >= 1e8 else "1M"
        H.report("gpu_add%s_out" % label, 12 * M / t["median"], "GB/s", note="gpu(0) f32")
