"""bench/engine_bench.py - PyTorch eager peer of bench/engine_bench.lua.

   /usr/bin/python3 bench/engine_bench.py [--quick]

PyTorch has no engine modes: each measurement is printed under both notes
("threaded", "naive") so bench/compare.py puts it beside each luamx mode.
Threads: torch.set_num_threads(2) (the machine's cores), like luamx's default budget.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import torch  # noqa: E402

A = H.args(sys.argv[1:])
Q = 0.1 if A.get("quick") else 1
torch.set_num_threads(int(os.environ.get("MX_NUM_THREADS", "2")))
H.env_note()


def report(bench, value, unit):
    for note in ("threaded", "threaded_2workers", "naive"):
        H.report(bench, value, unit, note=note)


a, b, c = torch.tensor([1.0]), torch.tensor([2.0]), torch.tensor([0.0])
add_new, add_out = H.plus(a, b), H.add_out(torch.add, a, b, c)

report("add1_new", H.time(add_new, n=int(2e5 * Q), reps=5)["median"], "ns/call")
report("add1_out", H.time(add_out, n=int(2e5 * Q), reps=5)["median"], "ns/call")


def chain(n):
    for _ in range(n):
        x = torch.tensor([0.0])
        for _ in range(1000):
            x = x + 1
        x.item()


report("chain1000", H.time(chain, n=max(1, int(50 * Q)), reps=5)["median"] / 1000, "ns/op")

ins = [torch.full((65536,), float(i + 1)) for i in range(8)]


def indep(n):
    for _ in range(n):
        for i in range(1000):
            torch.mul(ins[(i + 1) % 8], 2)


report("indep1000_64k", H.time(indep, n=max(1, int(5 * Q)), reps=5)["median"] / 1000, "ns/op")

for M in (65536, 1000000):
    L = max(10, int((1000 if M == 65536 else 100) * Q))
    xa, xb = torch.ones(M), torch.ones(M)

    def one(n):
        for _ in range(n):
            for _ in range(L):
                xa.mul_(1.0000001)

    def two(n):
        for _ in range(n):
            for _ in range(L):
                xa.mul_(1.0000001)
                xb.mul_(1.0000001)

    t1 = H.time(one, n=1, reps=5)["median"]
    t2 = H.time(two, n=1, reps=5)["median"]
    tag = "64k" if M == 65536 else "1M"
    report("two_chains_ratio_" + tag, t2 / t1, "ns/ns (2 chains / 1)")
    report("one_chain_op_" + tag, t1 / L, "ns/op")
