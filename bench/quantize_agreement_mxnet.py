"""bench/quantize_agreement_mxnet.py: MXNet 1.9.1's own int8 flow on the network and crops of
spec/quantize_zoo_spec.lua: EfficientNet-Lite0 with its ImageNet checkpoint as an MXNet
Gluon HybridBlock, mx.contrib.quantization.quantize_net_v2 (oneDNN, channel-wise, auto
dtype; naive and entropy calibration) on the very calibration crops luamx uses, top-1
agreement with float32 on the very test crops. bench/quantize_crops.lua writes the crops and
the checkpoint's arrays in MXNet's .params format (np-shape semantics).

    luajit bench/quantize_crops.lua /tmp/crops.safetensors /tmp/lite0.params
    /opt/mxvenv/bin/python bench/quantize_agreement_mxnet.py /tmp/lite0.params
"""
import sys

import mxnet as mx
from mxnet.contrib import quantization as Q
from mxnet.gluon import nn

STAGES = [(1, 3, 1, 1, 32, 16), (2, 3, 2, 6, 16, 24), (2, 5, 2, 6, 24, 40),
          (3, 3, 2, 6, 40, 80), (3, 5, 1, 6, 80, 112), (4, 5, 2, 6, 112, 192),
          (1, 3, 1, 6, 192, 320)]


class CBR(nn.HybridBlock):
    """TF SAME padding (stride 2 pads one more after), conv, BatchNorm, ReLU6."""

    def __init__(self, cin, cout, k, s, groups=1, act=True):
        super().__init__()
        t = k - 2 if s == 2 else k - 1
        self.before, self.after = t // 2, t - t // 2
        sym = self.before == self.after
        self.sym = sym
        self.conv = nn.Conv2D(cout, k, s, self.before if sym else 0, groups=groups,
                              use_bias=False, in_channels=cin)
        self.bn = nn.BatchNorm(epsilon=1e-3, in_channels=cout)
        self.act = act

    def hybrid_forward(self, F, x):
        if not self.sym:
            x = F.pad(x, mode="constant", pad_width=(0, 0, 0, 0, self.before, self.after,
                                                      self.before, self.after))
        x = self.bn(self.conv(x))
        return F.clip(x, 0, 6) if self.act else x


class Block(nn.HybridBlock):
    def __init__(self, k, s, e, cin, cout):
        super().__init__()
        mid = cin * e
        self.expand = CBR(cin, mid, 1, 1) if e != 1 else None
        self.dw = CBR(mid, mid, k, s, groups=mid)
        self.project = CBR(mid, cout, 1, 1, act=False)
        self.skip = s == 1 and cin == cout

    def hybrid_forward(self, F, x):
        y = self.expand(x) if self.expand is not None else x
        y = self.project(self.dw(y))
        return y + x if self.skip else y


class Lite0(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.stem = CBR(3, 32, 3, 2)
        self.blocks = nn.HybridSequential()
        for reps, k, s, e, cin, cout in STAGES:
            for j in range(reps):
                self.blocks.add(Block(k, s if j == 0 else 1, e, cin if j == 0 else cout, cout))
        self.head = CBR(320, 1280, 1, 1)
        self.pool = nn.GlobalAvgPool2D()
        self.fc = nn.Dense(1000, in_units=1280)

    def hybrid_forward(self, F, x):
        return self.fc(F.flatten(self.pool(self.head(self.blocks(self.stem(x))))))


def load(net, d):
    def cbr(m, w, bn):
        m.conv.weight.set_data(d[w])
        m.bn.gamma.set_data(d[bn + ".weight"])
        m.bn.beta.set_data(d[bn + ".bias"])
        m.bn.running_mean.set_data(d[bn + ".running_mean"])
        m.bn.running_var.set_data(d[bn + ".running_var"])
    cbr(net.stem, "_conv_stem.weight", "_bn0")
    for i, b in enumerate(net.blocks):
        p = "_blocks.%d." % i
        if b.expand is not None:
            cbr(b.expand, p + "_expand_conv.weight", p + "_bn0")
        cbr(b.dw, p + "_depthwise_conv.weight", p + "_bn1")
        cbr(b.project, p + "_project_conv.weight", p + "_bn2")
    cbr(net.head, "_conv_head.weight", "_bn1")
    net.fc.weight.set_data(d["_fc.weight"])
    net.fc.bias.set_data(d["_fc.bias"])


def top1(net, x):
    return mx.nd.concat(*[net(x[i:i + 16]).argmax(axis=1) for i in range(0, x.shape[0], 16)],
                        dim=0).asnumpy()


def main():
    with mx.util.np_shape(True):
        d = mx.nd.load(sys.argv[1])
    d = {k: mx.nd.array(v.asnumpy()) for k, v in d.items()}
    calib, test = d["crops_calib"], d["crops_test"]
    net = Lite0()
    net.initialize()
    load(net, d)
    net.hybridize(static_alloc=True, static_shape=True)
    f = top1(net, test)
    print("f32 top-1 of the first crops:", [int(v) + 1 for v in f[:16]])
    loader = mx.gluon.data.DataLoader(
        mx.gluon.data.ArrayDataset(calib, mx.nd.zeros((calib.shape[0],))), batch_size=12)
    for mode in ["naive", "entropy"]:
        qn = Q.quantize_net_v2(net, quantized_dtype="auto", quantize_granularity="channel-wise",
                               calib_mode=mode, calib_data=loader,
                               num_calib_examples=calib.shape[0], ctx=mx.cpu())
        qn.hybridize(static_alloc=True, static_shape=True)
        t = top1(qn, test)
        same = int((f == t).sum())
        print("# MXNet %s int8 (quantize_net_v2, %s): augmented %d/%d (%.1f %%) top-1 as float32"
              % (mx.__version__, mode, same, len(f), 100.0 * same / len(f)))


if __name__ == "__main__":
    main()
