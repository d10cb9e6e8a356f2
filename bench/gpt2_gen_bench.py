"""bench/gpt2_gen_bench.py — the PyTorch + transformers peer of bench/gpt2_gen_bench.lua:
GPT2LMHeadModel with the 124M config (random weights), batch 1, a 16-token prompt, then
greedy tokens one at a time through past_key_values; tokens per second.
  /opt/torchvenv/bin/python bench/gpt2_gen_bench.py --threads=1
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv)
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

H.env_note()
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config()).eval()
N = int(A.get("tokens", 64))
prompt = torch.tensor([[(i * 1237) % 50257 for i in range(1, 17)]])


def generate():
    with torch.inference_mode():
        out = model(prompt, use_cache=True)
        past = out.past_key_values
        last = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(N):
            out = model(last, past_key_values=past, use_cache=True)
            past = out.past_key_values
            last = out.logits[:, -1].argmax(-1, keepdim=True)
    return last


cpu = []  # process CPU time per generation, each timed call's


def timed(n):
    c0 = time.process_time()
    for _ in range(n):
        generate()
    cpu.append((time.process_time() - c0) / n)


t = H.time(timed, n=1, reps=int(A.get("reps", 5)), warmup=1)
H.report("gpt2_124m_generate_b1", N / (t["median"] * 1e-9), "tokens/s",
         note="%dT, 16-token prompt, %d new tokens" % (threads, N))
# on a shared machine the CPU time a 1-thread run got is the steadier number
H.report("gpt2_124m_generate_b1_cpu", N / statistics.median(cpu[-int(A.get("reps", 5)):]),
         "tokens/s", note="%dT, per process CPU second" % threads)
