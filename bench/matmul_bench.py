"""bench/matmul_bench.py — torch.mm peer of bench/matmul_bench.lua (GFLOP/s).
   python3 bench/matmul_bench.py [--threads=1] [--sizes=256,1024,2048] [--quick]"""
import os
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
sizes = [int(s) for s in str(A.get("sizes", "256,1024,2048")).split(",")]
ct = os.environ.get("OPENBLAS_CORETYPE")
note = "threads=%d coretype=%s" % (threads, ct or "unset")
H.env_note()

with torch.no_grad():
    for n in sizes:
        a = torch.full((n, n), 0.5)
        b = torch.full((n, n), 0.25)
        c = torch.zeros((n, n))
        iters = max(1, int(2e9 / (2 * n ** 3) * (1 if threads == 1 else 2)))
        if A.get("quick"):
            iters = 1

        def run(k):
            for _ in range(k):
                torch.mm(a, b, out=c)

        t = H.time(run, iters, reps=2 if A.get("quick") else 5, warmup=1)
        H.report("mm%d" % n, 2 * n ** 3 / t["median"], "GFLOP/s", note=note)
