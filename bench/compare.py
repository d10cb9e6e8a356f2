"""bench/compare.py — turn RESULT lines (bench/harness.{lua,py}) into markdown.
   python3 bench/compare.py raw.txt [more.txt ...] > table.md
Each (bench, note, unit) becomes a row; each impl a column holding the median over all
passes found. The ratio column compares luamx with torch (and numpy where present):
for times (ns/us/ms/s units, and cpu_ms-like ones) it is peer/luamx, for rates (GB/s,
GFLOP/s, .../s) luamx/peer, so > 1 always means luamx is faster."""
import statistics
import sys
from collections import OrderedDict


def main(paths):
    vals = OrderedDict()
    units = {}
    impls = []
    for p in paths:
        with open(p) as f:
            for line in f:
                if not line.startswith("RESULT\t"):
                    continue
                parts = line.rstrip("\n").split("\t")
                parts += [""] * (6 - len(parts))
                _, bench, impl, value, unit, note = parts[:6]
                key = (bench, note, unit)
                vals.setdefault(key, {}).setdefault(impl, []).append(float(value))
                units[key] = unit
                if impl not in impls:
                    impls.append(impl)
    order = [i for i in ("luamx", "torch", "numpy") if i in impls]
    order += [i for i in impls if i not in order]
    peers = [i for i in order if i != "luamx"]
    head = ["bench", "setting", "unit"] + order + ["luamx vs " + p for p in peers]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key, by in vals.items():
        unit = units[key]
        higher = not unit.startswith(("ns", "us", "ms")) and unit != "s" and \
            not unit.endswith(("_ns", "_us", "_ms"))
        row = [key[0], key[1], unit]
        med = {}
        for i in order:
            if i in by:
                med[i] = statistics.median(by[i])
                row.append("%.4g" % med[i])
            else:
                row.append("")
        for p in peers:
            if "luamx" in med and p in med and med["luamx"] > 0 and med[p] > 0:
                r = med["luamx"] / med[p] if higher else med[p] / med["luamx"]
                row.append("%.2f×" % r)
            else:
                row.append("")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
