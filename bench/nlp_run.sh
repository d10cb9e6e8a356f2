#!/usr/bin/env bash
# bench/nlp_run.sh [PASSES] — the GluonNLP benches beside their Python peers in one
# command, alternating luamx and the peer in every pass (default 2): the tokenizers
# (tokenizers / tiktoken, 1 thread), all-MiniLM-L6-v2 embeddings at batch 32 x 128 (1 and 2
# threads) and GPT-2 124M-config incremental generation at batch 1 (1 thread) against
# PyTorch + transformers. RESULT lines go to bench/out/nlp_raw.txt, the medians table
# (bench/compare.py) to stdout, the load average before and after each bench to stderr.
# Needs the weights of tools/setup.sh --weights and the dev venv (PY=).
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-2}
PY=${PY:-/opt/torchvenv/bin/python}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/nlp_raw.txt
: >"$RAW"
export LUA_PATH='bench/?.lua;lua/?.lua;lua/?/init.lua;;' LUA_CPATH="${MX_BUILD:-build}/lib/?.so;;"
load() { cut -d' ' -f1-3 /proc/loadavg; }
both() { # name, lua command, python command
  echo "$1: load $(load)" >&2
  eval "$2" >>"$RAW"
  eval "$3" >>"$RAW"
}
for p in $(seq "$PASSES"); do
  echo "pass $p" >&2
  both tokenizers "luajit bench/tokenizer_bench.lua" "(cd bench && $PY tokenizer_bench.py)"
  for t in 1 2; do
    both "minilm ${t}T" "luajit bench/minilm_bench.lua --threads=$t --n=1 --reps=3" \
      "$PY bench/minilm_bench.py --threads=$t --n=1 --reps=3"
  done
  both "gpt2 1T" "luajit bench/gpt2_gen_bench.lua --threads=1 --reps=3 --tokens=32" \
    "$PY bench/gpt2_gen_bench.py --threads=1 --reps=3 --tokens=32"
done
echo "end: load $(load)" >&2
python3 bench/compare.py "$RAW"
