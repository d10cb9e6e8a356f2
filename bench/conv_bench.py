"""bench/conv_bench.py — PyTorch peer of bench/conv_bench.lua: 3x3 convolution N32
C64->64 56x56 pad 1 (f32) GFLOP/s, forward (torch.conv2d, no grad) and backward (data +
weights: aten.convolution_backward), NCHW and channels_last; best of the two reported
as conv3x3_fwd / conv3x3_bwd, each also under its own name.
   /opt/torchvenv/bin/python bench/conv_bench.py [--threads=1] [--quick] [--batch=32]"""
import os
import sys

sys.dont_write_bytecode = True  # no bench/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
H.env_note()
N, K, C, S = int(A.get("batch", 32)), 64, 64, 56
flops = 2 * N * K * C * S * S * 9
note = "threads=%d N%d C%d K%d %dx%d" % (threads, N, C, K, S, S)
reps = 2 if A.get("quick") else 7
aten = torch.ops.aten

best = {}
for mf in ("nchw", "channels_last"):
    fmt = torch.channels_last if mf == "channels_last" else torch.contiguous_format
    x = torch.rand(N, C, S, S).mul_(2).sub_(1).contiguous(memory_format=fmt)
    w = torch.rand(K, C, 3, 3).mul_(2).sub_(1).contiguous(memory_format=fmt)
    g = torch.rand(N, K, S, S).mul_(2).sub_(1).contiguous(memory_format=fmt)

    def fwd(k):
        with torch.no_grad():
            for _ in range(k):
                torch.conv2d(x, w, None, 1, 1)

    def bwd(k):
        for _ in range(k):
            aten.convolution_backward(g, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
                                      [True, True, False])

    for name, fn, fl in (("fwd", fwd, flops), ("bwd", bwd, 2 * flops)):
        t = H.time(fn, 1, reps=reps, warmup=2)
        v = fl / t["median"]
        H.report("conv3x3_%s_%s" % (name, mf), v, "GFLOP/s", note=note)
        best[name] = max(best.get(name, 0), v)
for name in ("fwd", "bwd"):
    H.report("conv3x3_" + name, best[name], "GFLOP/s", note=note)  # its better layout
