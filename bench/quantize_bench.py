"""bench/quantize_bench.py — the MXNet 1.9.1 peer of bench/quantize_bench.lua: the same
networks (gluon.model_zoo.vision resnet50_v1, mobilenetv2_1.0, random weights), float32
hybridized vs mx.contrib.quantization.quantize_net_v2 (naive calibration on one random
batch of 16, quantized_dtype auto, channel-wise weight scales as luamx's, oneDNN), batch 1
and 16. Run with /opt/mxvenv/bin/python,
--threads=N (OMP_NUM_THREADS is set before mxnet loads)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import harness as H  # noqa: E402

a = H.args(sys.argv[1:])
threads = int(a.get("threads", 1))
os.environ["OMP_NUM_THREADS"] = str(threads)
import mxnet as mx  # noqa: E402
from mxnet.contrib import quantization as Q  # noqa: E402
from mxnet.gluon.model_zoo import vision  # noqa: E402

H.env_note()
mx.random.seed(1)
reps = int(a.get("reps", 5))


def ms(fn):
    def loop(n):
        for _ in range(n):
            fn().wait_to_read()
    return H.time(loop, n=1, reps=reps, warmup=2)["median"] / 1e6


for name in ["resnet50_v1", "mobilenetv2_1.0"]:
    net = vision.get_model(name)
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    calib = mx.nd.random.uniform(-1, 1, (16, 3, 224, 224))
    net(calib).wait_to_read()
    data = mx.gluon.data.DataLoader(mx.gluon.data.ArrayDataset(calib, mx.nd.zeros((16,))),
                                    batch_size=16)
    qn = Q.quantize_net_v2(net, quantized_dtype="auto", quantize_granularity="channel-wise",
                           calib_mode="naive", calib_data=data, num_calib_examples=16,
                           ctx=mx.cpu())
    qn.hybridize(static_alloc=True, static_shape=True)
    for b in [1, 16]:
        x = mx.nd.random.uniform(-1, 1, (b, 3, 224, 224))
        tf = ms(lambda: net(x))
        tq = ms(lambda: qn(x))
        H.report("%s_f32_b%d_t%d" % (name, b, threads), tf, "ms", impl="mxnet")
        H.report("%s_int8_b%d_t%d" % (name, b, threads), tq, "ms", impl="mxnet",
                 note="%.2fx f32" % (tf / tq))
