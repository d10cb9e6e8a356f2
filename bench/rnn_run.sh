#!/usr/bin/env bash
# bench/rnn_run.sh — the fused LSTM benchmark side by side with PyTorch CPU (the PyPI
# wheel in /opt/torchvenv), alternating luamx / PyTorch runs at each thread count, medians.
#   bench/rnn_run.sh [PASSES]   (default 2; MX_BUILD=build-dir; PY=python with torch;
#                                THREADS="1 2")
# Writes bench/out/rnn_raw.txt (RESULT lines) and prints them grouped.
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-2}
export MX_BUILD=${MX_BUILD:-build}
PY=${PY:-/opt/torchvenv/bin/python}
THREADS=${THREADS:-"1 2"}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/rnn_raw.txt
: >"$RAW"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for p in $(seq "$PASSES"); do
  for t in $THREADS; do
    echo "pass $p/$PASSES threads=$t" >&2
    luajit bench/rnn_bench.lua --threads=$t >>"$RAW"
    $PY bench/rnn_bench.py --threads=$t >>"$RAW"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep '^RESULT' "$RAW" | sort -k2,2 -k6,6 -k3,3 | cut -f2-6
