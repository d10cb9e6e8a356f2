"""bench/gluoncv_frcnn_bench.py — GluonCV 0.11's faster_rcnn_resnet50_v1b_voc on MXNet 1.9.1,
batch-1 inference (random weights, hybridized) on a 1x3xHxW input: the peer of
bench/gluoncv_frcnn_bench.lua. Prints each timed run and the median, in seconds.
    /opt/mxvenv/bin/python bench/gluoncv_frcnn_bench.py [H W runs]
"""
import sys
import time

import mxnet as mx
from gluoncv import model_zoo

H, W, runs = (int(v) for v in (sys.argv[1:4] + ["320", "320", "5"][len(sys.argv[1:4]):]))
net = model_zoo.get_model("faster_rcnn_resnet50_v1b_voc", pretrained_base=False)
net.initialize()
x = mx.nd.random.uniform(0, 1, shape=(1, 3, H, W))
net.hybridize()


def run():
    ids, scores, bboxes = net(x)
    mx.nd.waitall()


for _ in range(2):
    run()
t = []
for i in range(runs):
    t0 = time.perf_counter()
    run()
    t.append(time.perf_counter() - t0)
    print("mxnet run %d: %.3f s" % (i + 1, t[-1]))
t.sort()
print("mxnet median %.3f s (%dx%d)" % (t[(runs - 1) // 2], H, W))
