"""bench/zoo_bench.py — the peers of bench/zoo_bench.lua: the same networks at batch 1 and
8, random weights, milliseconds per forward (medians of wall and of process CPU time).
   /opt/mxvenv/bin/python bench/zoo_bench.py [--threads=2] [--nets=...] [--batches=1,8]
       MXNet 1.9.1's gluon.model_zoo.vision, hybridized with static_alloc and static_shape
       (oneDNN), NaiveEngine
   /opt/torchvenv/bin/python bench/zoo_bench.py --torch [...]
       torchvision's counterparts (and the same layers where torchvision has none: MobileNet
       v1, pre-activation ResNet v2), eval, torch.inference_mode; both memory formats
       (NCHW, channels_last), the one of less CPU time reported (its name on a '#' line)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

A = H.args(sys.argv[1:])
threads = int(A.get("threads", 1))
os.environ["OMP_NUM_THREADS"] = str(threads)
os.environ.setdefault("MXNET_ENGINE_TYPE", "NaiveEngine")
NETS = ["resnet18_v1", "resnet50_v1", "resnet18_v2", "resnet50_v2", "vgg11_bn", "alexnet",
        "densenet121", "squeezenet1.0", "squeezenet1.1", "inceptionv3", "mobilenet1.0",
        "mobilenet0.25", "mobilenetv2_1.0", "mobilenetv2_0.25"]
if A.get("nets"):
    NETS = str(A["nets"]).split(",")
BATCHES = [int(b) for b in str(A.get("batches", "1,8")).split(",")]
REPS = int(A.get("reps", 5))
H.env_note()
note = "threads=%d" % threads


def iters(b):
    return 2 if b == 1 else 1


def timed(fn, k):
    """(median wall ms, median process CPU ms) per call of fn over REPS reps of k calls."""
    import gc
    import statistics
    import time
    for _ in range(2):
        fn()
    wall, cpu = [], []
    for _ in range(REPS):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(k):
            fn()
        wall.append((time.perf_counter() - w0) * 1e3 / k)
        cpu.append((time.process_time() - c0) * 1e3 / k)
    return statistics.median(wall), statistics.median(cpu)


def torch_net(name):
    import torch
    import torchvision.models as tv
    nn = torch.nn
    simple = {"resnet18_v1": tv.resnet18, "resnet50_v1": tv.resnet50, "vgg11_bn": tv.vgg11_bn,
              "alexnet": tv.alexnet, "densenet121": tv.densenet121,
              "squeezenet1.0": tv.squeezenet1_0, "squeezenet1.1": tv.squeezenet1_1}
    if name in simple:
        return simple[name]()
    if name == "inceptionv3":
        return tv.inception_v3(aux_logits=False, init_weights=False)
    if name.startswith("mobilenetv2_"):
        return tv.mobilenet_v2(width_mult=float(name.split("_")[1]))
    if name.startswith("mobilenet"):  # v1: the depthwise-separable stack of MXNet's zoo
        m = float(name[len("mobilenet"):])

        def c(v):
            return int(v * m)

        def dw(i, o, s):
            return [nn.Conv2d(c(i), c(i), 3, s, 1, groups=c(i), bias=False),
                    nn.BatchNorm2d(c(i)), nn.ReLU(True),
                    nn.Conv2d(c(i), c(o), 1, bias=False), nn.BatchNorm2d(c(o)), nn.ReLU(True)]
        cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1),
               (256, 512, 2)] + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
        layers = [nn.Conv2d(3, c(32), 3, 2, 1, bias=False), nn.BatchNorm2d(c(32)), nn.ReLU(True)]
        for k in cfg:
            layers += dw(*k)
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c(1024), 1000)]
        return nn.Sequential(*layers)
    if name.startswith("resnet") and name.endswith("_v2"):  # pre-activation, as MXNet's
        depth = int(name[len("resnet"):-3])

        class Basic(nn.Module):
            def __init__(s, i, o, st, bottle):
                super().__init__()
                s.bn1 = nn.BatchNorm2d(i)
                if bottle:
                    s.c1 = nn.Conv2d(i, o // 4, 1, bias=False)
                    s.bn2 = nn.BatchNorm2d(o // 4)
                    s.c2 = nn.Conv2d(o // 4, o // 4, 3, st, 1, bias=False)
                    s.bn3 = nn.BatchNorm2d(o // 4)
                    s.c3 = nn.Conv2d(o // 4, o, 1, bias=False)
                else:
                    s.c1 = nn.Conv2d(i, o, 3, st, 1, bias=False)
                    s.bn2 = nn.BatchNorm2d(o)
                    s.c2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
                    s.c3 = None
                s.down = nn.Conv2d(i, o, 1, st, bias=False) if (i != o or st != 1) else None

            def forward(s, x):
                r = x
                x = torch.relu(s.bn1(x))
                if s.down is not None:
                    r = s.down(x)
                x = s.c1(x)
                x = s.c2(torch.relu(s.bn2(x)))
                if s.c3 is not None:
                    x = s.c3(torch.relu(s.bn3(x)))
                return x + r
        bottle = depth >= 50
        units = {18: [2, 2, 2, 2], 50: [3, 4, 6, 3]}[depth]
        chans = [64, 256, 512, 1024, 2048] if bottle else [64, 64, 128, 256, 512]
        layers = [nn.BatchNorm2d(3), nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                  nn.ReLU(True), nn.MaxPool2d(3, 2, 1)]
        i = 64
        for st, (u, o) in enumerate(zip(units, chans[1:])):
            for k in range(u):
                layers.append(Basic(i, o, 2 if (k == 0 and st > 0) else 1, bottle))
                i = o
        layers += [nn.BatchNorm2d(i), nn.ReLU(True), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                   nn.Linear(i, 1000)]
        return nn.Sequential(*layers)
    return None


if A.get("torch"):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(7)
    for name in NETS:
        net = torch_net(name)
        if net is None:
            continue
        net = net.eval()
        sz = 299 if name == "inceptionv3" else 224
        for b in BATCHES:
            best = None
            for fmt in (torch.contiguous_format, torch.channels_last):
                m = net.to(memory_format=fmt)
                x = torch.rand(b, 3, sz, sz).contiguous(memory_format=fmt)

                def run():
                    with torch.inference_mode():
                        m(x)
                w, c = timed(run, iters(b))
                fname = "nchw" if fmt is torch.contiguous_format else "channels_last"
                if best is None or c < best[1]:
                    best = (w, c, fname)
            sys.stdout.write("# %s_b%d torch best format: %s\n" % (name, b, best[2]))
            H.report("%s_b%d" % (name, b), best[0], "ms", "torch", note)
            H.report("%s_b%d" % (name, b), best[1], "cpu_ms", "torch", note)
else:
    import mxnet as mx
    from mxnet.gluon.model_zoo import vision
    for name in NETS:
        mx.random.seed(7)
        net = vision.get_model(name)
        net.initialize(mx.init.Xavier(magnitude=2.0))
        net.hybridize(static_alloc=True, static_shape=True)
        sz = 299 if name == "inceptionv3" else 224
        for b in BATCHES:
            x = mx.nd.random.uniform(shape=(b, 3, sz, sz))

            w, c = timed(lambda: net(x).wait_to_read(), iters(b))
            H.report("%s_b%d" % (name, b), w, "ms", "mxnet" + mx.__version__, note)
            H.report("%s_b%d" % (name, b), c, "cpu_ms", "mxnet" + mx.__version__, note)
