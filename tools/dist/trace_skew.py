"""tools/dist/trace_skew.py TRACE.txt — where the time of dist_sync allreduces goes, from
the stderr of a run with MX_KV_TRACE=1 (libmx_mpi prints one line per allreduce with its
start and end on CLOCK_MONOTONIC, which all processes of a host share).

  MX_KV_TRACE=1 tools/dist/mxrun 2 examples/dist_train.lua ... 2>trace.txt
  python3 tools/dist/trace_skew.py trace.txt

Per collective i: skew = |start_r - start_s| (one rank waiting for a slower one),
both-in = last end - last start (time once every rank has arrived: the transfer plus
scheduling delays), dur = end - start on each rank (what the 'communication' of
examples/dist_train.lua sums), gap = start of i - end of i-1 on rank 0 (compute).
"""
import statistics
import sys


def main():
    runs = {}
    for line in open(sys.argv[1]):
        if line.startswith("mx dist_sync trace:"):
            f = line.split()
            runs.setdefault(int(f[4]), []).append((float(f[8]), float(f[9])))
    ranks = sorted(runs)
    n = min(len(runs[r]) for r in ranks)
    rows = {"skew": [], "both-in": [], "dur": [], "gap": []}
    for i in range(n):
        starts = [runs[r][i][0] for r in ranks]
        ends = [runs[r][i][1] for r in ranks]
        rows["skew"].append(max(starts) - min(starts))
        rows["both-in"].append(max(ends) - max(starts))
        rows["dur"] += [e - s for s, e in zip(starts, ends)]
        if i:
            rows["gap"].append(runs[ranks[0]][i][0] - runs[ranks[0]][i - 1][1])
    print("%d collectives, %d ranks (ms)" % (n, len(ranks)))
    for k, v in rows.items():
        if v:
            v = sorted(x * 1000 for x in v)
            print("%-8s mean %7.3f  median %7.3f  p90 %7.3f" % (k, statistics.mean(v),
                  statistics.median(v), v[len(v) * 9 // 10]))


if __name__ == "__main__":
    main()
