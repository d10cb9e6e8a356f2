"""bench/box_bench.py — MXNet 1.9.1 peer of bench/box_bench.lua (same data: run the Lua
bench first, it writes /tmp/luamx_box_bench.params).
   /opt/mxvenv/bin/python bench/box_bench.py"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")
import mxnet as mx  # noqa: E402

H.env_note()
d = mx.nd.load("/tmp/luamx_box_bench.params")
data, boxes = d["data"], d["boxes"]
impl = "mxnet" + mx.__version__


def nms(opts):
    def run(k):
        for _ in range(k):
            mx.nd.contrib.box_nms(data, **opts).wait_to_read()
    return run


t = H.time(nms(dict(overlap_thresh=0.5, valid_thresh=0.01, id_index=0, score_index=1,
                    coord_start=2)), n=5, reps=7)
H.report("box_nms_10k", t["median"] / 1e6, "ms", impl, "3 classes, overlap 0.5")
t = H.time(nms(dict(overlap_thresh=0.5, score_index=1, coord_start=2)), n=5, reps=7)
H.report("box_nms_10k_noclass", t["median"] / 1e6, "ms", impl, "id_index none")


def iou(k):
    for _ in range(k):
        mx.nd.contrib.box_iou(boxes, boxes).wait_to_read()


t = H.time(iou, n=10, reps=7)
H.report("box_iou_1k_1k", t["median"] / 1e6, "ms", impl)
