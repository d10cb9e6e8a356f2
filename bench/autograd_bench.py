"""bench/autograd_bench.py — PyTorch peer of bench/autograd_bench.lua (same benches,
same names; see that file for what each measures).
   /usr/bin/python3 bench/autograd_bench.py [--threads=1] [--quick]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

# OpenBLAS (torch's GEMM here) starts one thread per core unless told: without this
# "1 thread" torch would multiply matrices on 2 cores against luamx's 1.
_A = H.args(sys.argv[1:])
os.environ.setdefault("OPENBLAS_NUM_THREADS", str(_A.get("threads", 1)))
os.environ.setdefault("OMP_NUM_THREADS", str(_A.get("threads", 1)))
import torch  # noqa: E402
import torch.nn.functional as Fn  # noqa: E402

A = H.args(sys.argv[1:])
threads = int(A.get("threads", 1))
Q = 0.05 if A.get("quick") else 1
torch.set_num_threads(threads)
note = "threads=%d" % threads
H.env_note()

torch.manual_seed(1)
W1 = ((torch.rand(256, 784) * 2 - 1) * 0.05).requires_grad_()
b1 = torch.zeros(256, requires_grad=True)
W2 = ((torch.rand(10, 256) * 2 - 1) * 0.05).requires_grad_()
b2 = torch.zeros(10, requires_grad=True)
params = [W1, b1, W2, b2]

for bs in (1, 64):
    x = torch.rand(bs, 784) * 2 - 1

    def step(n):
        for _ in range(n):
            for p in params:
                p.grad = None  # grad_req "write", as luamx's default
            h = torch.relu(Fn.linear(x, W1, b1))
            loss = Fn.linear(h, W2, b2).square().sum()
            loss.backward()

    t = H.time(step, n=max(1, int((2000 if bs == 1 else 300) * Q)), reps=5)
    H.report("mlp_fwd_bwd", t["median"] / 1e6, "ms/iter", note="%s batch=%d" % (note, bs))

a = torch.tensor([1.0], requires_grad=True)
b = torch.tensor([2.0])
N = int(3e5 * Q)


def plain(n):
    with torch.no_grad():
        for _ in range(n):
            a + b


def recorded(n):
    for _ in range(n):
        a + b


H.report("add1_plain", H.time(plain, n=N, reps=5)["median"], "ns/call", note=note)
H.report("add1_record", H.time(recorded, n=N, reps=5)["median"], "ns/call", note=note)

K, R = 100, max(1, int(2000 * Q))
samples = []
for rep in range(5):
    tr = 0.0
    for _ in range(R):
        t0 = H.now()
        c = a
        for _ in range(K):
            c = c + b
        tr += H.now() - t0
        c.backward()
    samples.append(tr * 1e9 / (R * K))
samples.sort()
H.report("add1_record_chain", samples[len(samples) // 2], "ns/add", note=note)
