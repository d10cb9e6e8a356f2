"""bench/transformer_bench.py — the PyTorch peer of bench/transformer_bench.lua:
torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0, batch_first=True)
(post-norm, ReLU, as GluonNLP's cell) on (16, 128, 256), forward + backward, ms per step.
    /opt/torchvenv/bin/python bench/transformer_bench.py --threads=1
"""
import sys

sys.path.insert(0, "bench")
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
H.env_note()
torch.manual_seed(1)
layer = torch.nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0, batch_first=True)
x = torch.randn(16, 128, 256, requires_grad=True)


def run(n):
    for _ in range(n):
        layer(x).sum().backward()


t = H.time(run, n=int(A.get("steps", 5)), reps=5)
H.report("transformer_layer_fwd_bwd", t["median"] * 1e-6, "ms", None,
         "%dT d256 h4 ffn1024 b16 t128" % threads)
