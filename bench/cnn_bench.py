"""bench/cnn_bench.py — the PyTorch peer of bench/cnn_bench.lua (the CNN goals).

The same networks, shapes and batch sizes as the Lua side, random inputs (speed does not
depend on the values), float32, eager mode. Results (RESULT lines, bench/harness.py):
  lenet_train        LeNet-5 (ReLU, max pool) training samples/s, batch 64, SGD momentum
  resnet18_b1        ResNet-18 v1 (MXNet's resnet18_v1 layout) inference latency, 1x3x224x224, ms
  resnet18_b32       ResNet-18 inference images/s at batch 32 (the best of NCHW and
                     channels_last is reported as well, note "channels_last")
  resnet18_train16   one training step (forward, backward, SGD) at batch 16, ms

  /opt/torchvenv/bin/python bench/cnn_bench.py --threads=1 [--quick]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402


def lenet(nn):
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def resnet18(nn):
    """MXNet's resnet18_v1: BasicBlockV1 (conv-bn-relu-conv-bn, + shortcut, relu), a 1x1
    conv + bn downsample where the stride or width changes."""
    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))
            self.relu = nn.ReLU()

        def forward(self, x):
            r = x if self.down is None else self.down(x)
            return self.relu(self.body(x) + r)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def median_time(fn, reps, warmup=2):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    torch, a, threads = H.torch_setup(sys.argv[1:])
    quick = bool(a.get("quick"))
    nn = torch.nn
    torch.manual_seed(1)
    H.env_note()
    note = "%dT" % threads

    # LeNet training, batch 64: steps per rep over a fixed set of batches
    net = lenet(nn)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    xs = [torch.rand(64, 1, 28, 28) for _ in range(8)]
    ys = [torch.randint(0, 10, (64,)) for _ in range(8)]
    steps = 8 if quick else 64

    def lenet_steps():
        for i in range(steps):
            opt.zero_grad()
            loss = lossf(net(xs[i % 8]), ys[i % 8])
            loss.backward()
            opt.step()
    t = median_time(lenet_steps, 3 if quick else 7)
    H.report("lenet_train", steps * 64 / t, "samples/s", note=note + " bs64")

    # ResNet-18 inference
    net = resnet18(nn).eval()
    with torch.no_grad():
        x1 = torch.rand(1, 3, 224, 224)
        t = median_time(lambda: net(x1), 3 if quick else 11)
        H.report("resnet18_b1", t * 1e3, "ms", note=note)
        x32 = torch.rand(32, 3, 224, 224)
        t = median_time(lambda: net(x32), 1 if quick else 3, warmup=1)
        nchw = 32 / t
        H.report("resnet18_b32", nchw, "images/s", note=note + " NCHW")
        netcl = net.to(memory_format=torch.channels_last)
        x32cl = x32.to(memory_format=torch.channels_last)
        t = median_time(lambda: netcl(x32cl), 1 if quick else 3, warmup=1)
        H.report("resnet18_b32", 32 / t, "images/s", note=note + " channels_last")
        # the row luamx is compared with: PyTorch's better layout
        H.report("resnet18_b32", max(nchw, 32 / t), "images/s", note=note)

    # ResNet-18 training step, batch 16
    net = resnet18(nn).train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x16 = torch.rand(16, 3, 224, 224)
    y16 = torch.randint(0, 1000, (16,))

    def train_step():
        opt.zero_grad()
        loss = lossf(net(x16), y16)
        loss.backward()
        opt.step()
    t = median_time(train_step, 1 if quick else 3, warmup=1)
    H.report("resnet18_train16", t * 1e3, "ms", note=note)


if __name__ == "__main__":
    main()
