"""bench/onnx_bench.py — the peer of bench/onnx_bench.lua: ONNX Runtime (CPU provider,
intra-op threads = --threads, inter-op 1, all graph optimisations) on the same files:
session creation time of ResNet-50 and batch-1 latency of ResNet-50 and MobileNet v2."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

A = H.args(sys.argv[1:])
threads = int(A.get("threads", 1))
os.environ["OMP_NUM_THREADS"] = str(threads)
import onnxruntime as ort  # noqa: E402

IMPL = "ort" + ort.__version__
H.env_note()
x = np.random.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)


def session(path):
    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])


for name in ("resnet50", "mobilenet_v2"):
    path = os.path.join("bench", "out", name + ".onnx")
    if not os.path.exists(path):
        sys.exit(0)
    if name == "resnet50" and threads == 1:
        r = H.time(lambda n: session(path), n=1, reps=int(A.get("reps", 5)), warmup=1)
        H.report("onnx_load_resnet50", r["median"] / 1e6, "ms", impl=IMPL, note="InferenceSession")
    s = session(path)

    def run(n, s=s):
        for _ in range(n):
            s.run(None, {"data": x})

    r = H.time(run, n=10, reps=int(A.get("reps", 7)), warmup=2)
    H.report("onnx_%s_b1_t%d" % (name, threads), r["median"] / 1e6, "ms", impl=IMPL, note="batch 1")
