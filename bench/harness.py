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


def torch_setup(argv):
    """The common start of a torch peer run with --threads: parses argv (args()), pins
    torch's OpenBLAS and OpenMP pools to --threads (default 1) before torch loads, then
    imports torch and sets its intra-op pool. Returns (torch, args, threads)."""
    a = args(argv)
    # torch.set_num_threads sets only torch's intra-op pool: the OpenBLAS inside torch has
    # its own (2 threads here by default), so pin it too before torch loads.
    os.environ["OPENBLAS_NUM_THREADS"] = str(a.get("threads", 1))
    os.environ["OMP_NUM_THREADS"] = str(a.get("threads", 1))
    import torch
    threads = int(a.get("threads", 1))
    torch.set_num_threads(threads)
    return torch, a, threads


# fn(n) loops for time(): the operation stays inline in the loop (no call per iteration
# beyond the operation itself), so the peers' ns/call numbers measure only the op.
def plus(x, y):
    """fn(n): n times r = x + y (a new result each time); returns the last."""
    def run(n):
        r = None
        for _ in range(n):
            r = x + y
        return r
    return run


def add_out(add, x, y, out):
    """fn(n): n times add(x, y, out=out) (torch.add or np.add)."""
    def run(n):
        for _ in range(n):
            add(x, y, out=out)
    return run


def default_impl():
    """torch<version> (the PyPI wheel and Debian's 1.13 get their own columns)."""
    t = sys.modules.get("torch")
    return "torch" + t.__version__.split("+")[0] if t else "torch"


def report(bench, value, unit, impl=None, note=""):
    impl = impl or default_impl()
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
