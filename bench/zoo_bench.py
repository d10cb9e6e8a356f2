"""bench/zoo_bench.py — MXNet 1.9.1 (hybridized) or PyTorch (torchvision, eval, no_grad)
peer of bench/zoo_bench.lua: the same networks, batch 1 and 8, random weights.
   /opt/mxvenv/bin/python bench/zoo_bench.py [--threads=2] [--nets=...]
   /opt/torchvenv/bin/python bench/zoo_bench.py --torch [--threads=2] [--nets=...]"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

A = H.args(sys.argv[1:])
threads = int(A.get("threads", 1))
os.environ.setdefault("OMP_NUM_THREADS", str(threads))
NETS = ["alexnet", "densenet121", "inceptionv3", "mobilenet1.0", "mobilenetv2_1.0",
        "mobilenetv3_large", "resnet18_v1", "resnet50_v1", "resnet50_v2", "resnext50_32x4d",
        "squeezenet1.1", "vgg16"]
if A.get("nets"):
    NETS = str(A["nets"]).split(",")
# torchvision's equivalents (None: no equivalent network there)
TV = {"alexnet": "alexnet", "densenet121": "densenet121", "inceptionv3": "inception_v3",
      "mobilenet1.0": None, "mobilenetv2_1.0": "mobilenet_v2",
      "mobilenetv3_large": "mobilenet_v3_large", "resnet18_v1": "resnet18",
      "resnet50_v1": "resnet50", "resnet50_v2": None, "resnext50_32x4d": "resnext50_32x4d",
      "squeezenet1.1": "squeezenet1_1", "vgg16": "vgg16"}
H.env_note()
note = "threads=%d" % threads

if A.get("torch"):
    import torch
    import torchvision
    torch.set_num_threads(threads)
    for name in NETS:
        if not TV.get(name):
            continue
        kw = {"aux_logits": False, "init_weights": False} if name == "inceptionv3" else {}
        net = getattr(torchvision.models, TV[name])(weights=None, **kw).eval()
        sz = 299 if name == "inceptionv3" else 224
        for b in (1, 8):
            x = torch.rand(b, 3, sz, sz)

            def run(k):
                with torch.no_grad():
                    for _ in range(k):
                        net(x)
            t = H.time(run, n=5 if b == 1 else 2, reps=5, warmup=1)
            H.report("%s_b%d" % (name, b), t["median"] / 1e6, "ms", note=note)
else:
    import mxnet as mx
    from mxnet.gluon.model_zoo import vision
    import gluoncv
    for name in NETS:
        try:
            net = vision.get_model(name)
        except ValueError:
            net = gluoncv.model_zoo.get_model(name)
        net.initialize()
        net.hybridize(static_alloc=True, static_shape=True)
        sz = 299 if name == "inceptionv3" else 224
        for b in (1, 8):
            x = mx.nd.random.uniform(shape=(b, 3, sz, sz))
            net(x).wait_to_read()

            def run(k):
                for _ in range(k):
                    net(x).wait_to_read()
            t = H.time(run, n=5 if b == 1 else 2, reps=5, warmup=1)
            H.report("%s_b%d" % (name, b), t["median"] / 1e6, "ms", "mxnet" + mx.__version__, note)
