"""bench/ops_bench.py — PyTorch eager and numpy peers of bench/ops_bench.lua.
   python3 bench/ops_bench.py [--threads=1] [--quick]
Same bench names as the Lua side; impl is torch or numpy."""
import os
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
import numpy as np  # noqa: E402

quick = A.get("quick", False)
note = "threads=%d" % threads


def N(n):
    return max(1, n // 20) if quick else n


H.env_note()
sys.stdout.write("# torch %s, numpy %s\n" % (torch.__version__, np.__version__))

with torch.no_grad():
    a, b, c = torch.ones(1), torch.ones(1), torch.zeros(1)

    def new(n):
        for _ in range(n):
            r = torch.add(a, b)
        return r

    meta, out = H.plus(a, b), H.add_out(torch.add, a, b, c)
    H.report("add1_new", H.time(new, N(100000))["median"], "ns/call", note=note)
    H.report("add1_meta", H.time(meta, N(100000))["median"], "ns/call", note=note)
    H.report("add1_out", H.time(out, N(100000))["median"], "ns/call", note=note)

    na, nb, nc = np.ones(1, np.float32), np.ones(1, np.float32), np.zeros(1, np.float32)
    np_new, np_out = H.plus(na, nb), H.add_out(np.add, na, nb, nc)
    H.report("add1_new", H.time(np_new, N(100000))["median"], "ns/call", impl="numpy", note=note)
    H.report("add1_out", H.time(np_out, N(100000))["median"], "ns/call", impl="numpy", note=note)

    a, b, c = torch.ones(64, 64), torch.ones(64, 64), torch.zeros(64, 64)
    out = H.add_out(torch.add, a, b, c)
    H.report("add4k_new", H.time(new, N(20000))["median"], "ns/call", note=note)
    H.report("add4k_scope", H.time(new, N(20000))["median"], "ns/call", note=note)
    H.report("add4k_out", H.time(out, N(20000))["median"], "ns/call", note=note)

    M = 1000000
    nbytes = 3 * 4 * M
    a, b, c = torch.ones(M), torch.ones(M), torch.zeros(M)
    out = H.add_out(torch.add, a, b, c)
    H.report("add1M_new", nbytes / H.time(new, N(200), reps=9)["median"], "GB/s", note=note)
    H.report("add1M_scope", nbytes / H.time(new, N(200), reps=9)["median"], "GB/s", note=note)
    H.report("add1M_out", nbytes / H.time(out, N(200), reps=9)["median"], "GB/s", note=note)
    na, nb, nc = np.ones(M, np.float32), np.ones(M, np.float32), np.zeros(M, np.float32)
    np_new, np_out = H.plus(na, nb), H.add_out(np.add, na, nb, nc)
    H.report("add1M_new", nbytes / H.time(np_new, N(200), reps=9)["median"], "GB/s",
             impl="numpy", note=note)
    H.report("add1M_out", nbytes / H.time(np_out, N(200), reps=9)["median"], "GB/s",
             impl="numpy", note=note)
