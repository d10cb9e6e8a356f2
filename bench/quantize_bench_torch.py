"""bench/quantize_bench_torch.py: the PyTorch peer of bench/quantize_bench.lua: torchvision's
resnet50 and mobilenet_v2 (random weights: speed does not depend on them), float32 in eval
mode vs torch.ao's FX post-training static int8 quantization (x86 backend: the default
qconfig, per-channel weights, conv+bn(+relu) fused), calibrated on one random batch of 16,
batch 1 and 16, 3x224x224 random input, ms per batch (median). Float32 runs channels_last
as well (PyTorch's fastest CPU layout for these nets); the better of the two is reported.

    /opt/torchvenv/bin/python bench/quantize_bench_torch.py --threads=2 [--reps=5]
"""
import copy
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(__file__))
import harness as H  # noqa: E402

torch, a, threads = H.torch_setup(sys.argv[1:])
import torchvision  # noqa: E402
from torch.ao.quantization import get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx  # noqa: E402

warnings.filterwarnings("ignore")
H.env_note()
torch.manual_seed(1)
reps = int(a.get("reps", 5))
torch.backends.quantized.engine = "x86"


def ms(fn):
    def loop(n):
        with torch.no_grad():
            for _ in range(n):
                fn()
    return H.time(loop, n=1, reps=reps, warmup=2)["median"] / 1e6


for name, make in [("resnet50_v1", torchvision.models.resnet50),
                   ("mobilenetv2_1.0", torchvision.models.mobilenet_v2)]:
    net = make().eval()
    calib = torch.rand(16, 3, 224, 224) * 2 - 1
    q = prepare_fx(copy.deepcopy(net), get_default_qconfig_mapping("x86"), (calib[:1],))
    with torch.no_grad():
        q(calib)
    q = convert_fx(q)
    cl = copy.deepcopy(net).to(memory_format=torch.channels_last)
    for b in [1, 16]:
        x = torch.rand(b, 3, 224, 224) * 2 - 1
        xc = x.contiguous(memory_format=torch.channels_last)
        tf = min(ms(lambda: net(x)), ms(lambda: cl(xc)))
        tq = ms(lambda: q(x))
        H.report("%s_f32_b%d_t%d" % (name, b, threads), tf, "ms", impl="torch")
        H.report("%s_int8_b%d_t%d" % (name, b, threads), tq, "ms", impl="torch",
                 note="%.2fx f32" % (tf / tq))
