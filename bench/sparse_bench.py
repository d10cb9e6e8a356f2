"""bench/sparse_bench.py — MXNet 1.9.1 and scipy.sparse peers of bench/sparse_bench.lua (same
data: run the Lua bench first, it writes /tmp/luamx_sparse_bench.params).
   /opt/mxvenv/bin/python bench/sparse_bench.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")
import mxnet as mx  # noqa: E402

H.env_note()
d = mx.nd.load("/tmp/luamx_sparse_bench.params")
a, b = d["a"], d["b"]
flops = 2 * a.data.shape[0] * b.shape[1]
impl = "mxnet" + mx.__version__


def run(f):
    def go(k):
        for _ in range(k):
            f()
    return go


for name, f, note in [
        ("spmm_csr_dense", lambda: mx.nd.dot(a, b).wait_to_read(), ""),
        ("spmm_csrT_dense", lambda: mx.nd.dot(a, b, transpose_a=True).wait_to_read(),
         "row_sparse result")]:
    t = H.time(run(f), n=10, reps=7)
    H.report(name, t["median"] / 1e6, "ms", impl,
             "%.2f GFLOP/s %s" % (flops / t["median"], note))

sa, sb = a.asscipy(), b.asnumpy()
sat = sa.T.tocsr()
import scipy  # noqa: E402
for name, f in [("spmm_csr_dense", lambda: sa @ sb), ("spmm_csrT_dense", lambda: sa.T @ sb)]:
    t = H.time(run(f), n=10, reps=7)
    H.report(name, t["median"] / 1e6, "ms", "scipy" + scipy.__version__,
             "%.2f GFLOP/s" % (flops / t["median"]))
del sat
