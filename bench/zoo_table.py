"""bench/zoo_table.py — the table of bench/zoo_run.sh from its RESULT lines: per network
and batch, medians over the rounds of process CPU ms and wall ms per forward for luamx,
MXNet 1.9.1 and PyTorch, with the ratios (peer / luamx: > 1 means luamx is faster) and
the goal (>= 1.2x both) counted.
   python3 bench/zoo_table.py bench/out/zoo_raw.txt"""
import statistics
import sys
from collections import OrderedDict

vals = OrderedDict()
for path in sys.argv[1:]:
    with open(path) as f:
        for line in f:
            if not line.startswith("RESULT\t"):
                continue
            _, bench, impl, value, unit, _note = line.rstrip("\n").split("\t")[:6]
            impl = "mxnet" if impl.startswith("mxnet") else impl
            vals.setdefault(bench, {}).setdefault((impl, unit), []).append(float(value))


def med(by, impl, unit):
    v = by.get((impl, unit))
    return statistics.median(v) if v else None


def fmt(x):
    return "" if x is None else ("%.1f" % x if x < 100 else "%.0f" % x)


def ratio(peer, ours):
    return "" if peer is None or ours is None else "%.2f×" % (peer / ours)


print("| network | batch | CPU ms luamx / MXNet / PyTorch | CPU vs MXNet | CPU vs PyTorch "
      "| wall ms luamx / MXNet / PyTorch | wall vs MXNet | wall vs PyTorch |")
print("|---|---|---|---|---|---|---|---|")
met = {"mxnet": [0, 0], "torch": [0, 0]}
rs = {"mxnet": [], "torch": []}
for bench, by in vals.items():
    net, b = bench.rsplit("_b", 1)
    c = [med(by, i, "cpu_ms") for i in ("luamx", "mxnet", "torch")]
    w = [med(by, i, "ms") for i in ("luamx", "mxnet", "torch")]
    for k, p in ((1, "mxnet"), (2, "torch")):
        if c[0] and c[k]:
            met[p][1] += 1
            met[p][0] += c[k] / c[0] >= 1.2
            rs[p].append(c[k] / c[0])
    print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
        net, b, " / ".join(fmt(x) or "-" for x in c), ratio(c[1], c[0]), ratio(c[2], c[0]),
        " / ".join(fmt(x) or "-" for x in w), ratio(w[1], w[0]), ratio(w[2], w[0])))
print()
for p, name in (("mxnet", "MXNet"), ("torch", "PyTorch")):
    if rs[p]:
        print("CPU-time ratio vs %s: median %.2f×, min %.2f×, max %.2f×; >= 1.2× in %d of %d "
              "settings." % (name, statistics.median(rs[p]), min(rs[p]), max(rs[p]),
                             met[p][0], met[p][1]))
