# bench/runtime_bench.py — PyTorch's side of bench/runtime_run.sh: batch-1 latency of the
# torchvision counterparts of the MXNet vision zoo in eager mode under
# torch.inference_mode(), one thread, random weights (latency does not depend on them).
#   /opt/torchvenv/bin/python bench/runtime_bench.py NAME [iters]
import sys, time, statistics
import torch, torchvision.models as tv
torch.set_num_threads(1)
name, iters = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 50
nets = {"resnet18_v1": tv.resnet18, "resnet50_v1": tv.resnet50, "mobilenet1.0": None,
        "mobilenetv2_1.0": tv.mobilenet_v2, "squeezenet1.0": tv.squeezenet1_0,
        "squeezenet1.1": tv.squeezenet1_1,
        "densenet121": tv.densenet121, "inceptionv3": tv.inception_v3}
if name == "mobilenet1.0":
    # torchvision has no MobileNet v1: the same layers (depthwise-separable stack)
    def dw(i, o, s):
        return torch.nn.Sequential(
            torch.nn.Conv2d(i, i, 3, s, 1, groups=i, bias=False), torch.nn.BatchNorm2d(i), torch.nn.ReLU(True),
            torch.nn.Conv2d(i, o, 1, bias=False), torch.nn.BatchNorm2d(o), torch.nn.ReLU(True))
    cfg = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2)] + \
          [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)]
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(32),
                              torch.nn.ReLU(True), *[dw(*c) for c in cfg], torch.nn.AdaptiveAvgPool2d(1),
                              torch.nn.Flatten(), torch.nn.Linear(1024, 1000))
else:
    net = nets[name](**({"aux_logits": False, "init_weights": False} if name == "inceptionv3" else {}))
net.eval()
size = 299 if name == "inceptionv3" else 224
x = torch.rand(1, 3, size, size)
with torch.inference_mode():
    for _ in range(5): net(x)
    ts = []
    c0 = time.process_time()
    for _ in range(iters):
        t0 = time.perf_counter(); net(x); ts.append((time.perf_counter() - t0) * 1e3)
    cpu = (time.process_time() - c0) * 1e3 / iters
print("median_ms %.3f min_ms %.3f cpu_ms %.3f" % (statistics.median(ts), min(ts), cpu))
