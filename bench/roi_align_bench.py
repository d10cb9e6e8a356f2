"""bench/roi_align_bench.py — MXNet 1.9.1 peer of bench/roi_align_bench.lua (same data: run
the Lua bench first, it writes /tmp/luamx_roi_align_bench.params): _contrib_ROIAlign forward,
and forward + backward under autograd (MXNet has no separate backward call), medians in ms.
    /opt/mxvenv/bin/python bench/roi_align_bench.py [--threads=1]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
THREADS = int(dict(a[2:].split("=", 1) for a in sys.argv[1:] if "=" in a).get("threads", 1))
os.environ["OMP_NUM_THREADS"] = str(THREADS)
import harness as H  # noqa: E402
import mxnet as mx  # noqa: E402

H.env_note()
d = mx.nd.load("/tmp/luamx_roi_align_bench.params")
data, rois, og = d["data"], d["rois"], d["ograd"]
impl = "mxnet" + mx.__version__
O = dict(pooled_size=(14, 14), spatial_scale=1 / 16, sample_ratio=2)
note = "300 ROIs, 1x1024x20x20, 14x14, %d thread(s)" % THREADS


def fwd(k):
    for _ in range(k):
        mx.nd.contrib.ROIAlign(data, rois, **O).wait_to_read()


x = data.copy()
x.attach_grad()


def fwd_bwd(k):
    for _ in range(k):
        with mx.autograd.record():
            y = mx.nd.contrib.ROIAlign(x, rois, **O)
        y.backward(og)
        x.grad.wait_to_read()


t = H.time(fwd, n=1, reps=5, warmup=1)
H.report("roi_align_fwd", t["median"] / 1e6, "ms", impl, note)
t = H.time(fwd_bwd, n=1, reps=5, warmup=1)
H.report("roi_align_fwd_bwd", t["median"] / 1e6, "ms", impl, note)
