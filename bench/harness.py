"""bench/harness.py — the Python side of the luamx benchmark harness.

Same method and output as bench/harness.lua: fn(n) runs n iterations itself,
time() returns per-iteration ns (median over reps, after warm-up), report()
prints `RESULT\tbench\timpl\tvalue\tunit\tnote` lines for bench/compare.py.
"""
import gc
import os
import statistics
import sys
import time as _time


def now():
    return _time.perf_counter()


def time(fn, n=10000, reps=7, warmup=2, setup=None, collect=True):
    for _ in range(warmup):
        if setup:
            setup()
        fn(n)
    samples = []
    for _ in range(reps):
        if setup:
            setup()
        if collect:
            gc.collect()
        t0 = _time.perf_counter()
        fn(n)
        samples.append((_time.perf_counter() - t0) * 1e9 / n)
    return {"median": statistics.median(samples), "min": min(samples), "samples": samples}


def report(bench, value, unit, impl="torch", note=""):
    sys.stdout.write("RESULT\t%s\t%s\t%.6g\t%s\t%s\n" % (bench, impl, value, unit, note))
    sys.stdout.flush()


def env_note():
    try:
        with open("/proc/loadavg") as f:
            load = f.read().strip()
    except OSError:
        load = "?"
    sys.stdout.write("# python %s, OPENBLAS_CORETYPE=%s, loadavg %s\n" % (
        sys.version.split()[0], os.environ.get("OPENBLAS_CORETYPE", "(unset)"), load))


def args(argv):
    out = {}
    pos = []
    for s in argv:
        if s.startswith("--"):
            k, _, v = s[2:].partition("=")
            if not v:
                out[k] = True
            else:
                try:
                    out[k] = float(v) if "." in v or "e" in v else int(v)
                except ValueError:
                    out[k] = v
        else:
            pos.append(s)
    out["_"] = pos
    return out
