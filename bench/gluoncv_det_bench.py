"""bench/gluoncv_det_bench.py — GluonCV 0.11's ssd_512_resnet50_v1_voc (512x512) or
yolo3_darknet53_voc (416x416) on MXNet 1.9.1, batch-1 inference images/s (random weights,
nothing downloaded, hybridized): the peer of bench/gluoncv_det_bench.lua.
    /opt/mxvenv/bin/python bench/gluoncv_det_bench.py MODEL [--size=S] [--runs=5] [--threads=1]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ARGS = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--"))
THREADS = int(ARGS.get("threads", 1))
os.environ["OMP_NUM_THREADS"] = str(THREADS)
os.environ.setdefault("MXNET_CPU_WORKER_NTHREADS", "1")
import harness as H  # noqa: E402
import mxnet as mx  # noqa: E402
from gluoncv import model_zoo  # noqa: E402

SIZES = {"ssd_512_resnet50_v1_voc": 512, "yolo3_darknet53_voc": 416}
pos = [a for a in sys.argv[1:] if not a.startswith("--")]
name = pos[0] if pos else "ssd_512_resnet50_v1_voc"
size, runs = int(ARGS.get("size", SIZES[name])), int(ARGS.get("runs", 5))
H.env_note()
mx.random.seed(7)
net = model_zoo.get_model(name, pretrained=False, pretrained_base=False)
net.initialize()
net.hybridize()
x = mx.nd.random.uniform(0, 1, shape=(1, 3, size, size))


def run():
    net(x)
    mx.nd.waitall()


for _ in range(2):
    run()
t = []
for i in range(runs):
    t0 = H.now()
    run()
    t.append(H.now() - t0)
    print("mxnet %s run %d: %.3f s" % (name, i + 1, t[-1]))
t.sort()
med = t[(runs - 1) // 2] if runs % 2 else (t[runs // 2 - 1] + t[runs // 2]) / 2
H.report(name, 1 / med, "images/s", "mxnet" + mx.__version__,
         "batch 1, %dx%d, %d thread(s), median of %d: %.3f s" % (size, size, THREADS, runs, med))
