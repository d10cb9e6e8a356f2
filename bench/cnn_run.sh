#!/usr/bin/env bash
# bench/cnn_run.sh — the CNN benchmarks side by side with PyTorch CPU (the PyPI
# wheel in /opt/torchvenv) and oneDNN called directly, alternating luamx / peer runs at 1
# and 2 threads, medians over passes: conv (vs oneDNN direct too), LeNet training,
# ResNet-18 inference and training, pooling, batch norm, the activations.
#   bench/cnn_run.sh [PASSES]       (default 2; MX_BUILD=build-dir; PY=python with torch;
#                                    THREADS="1 2" the thread counts)
# Writes bench/out/cnn_raw.txt (RESULT lines) and bench/out/cnn.md (the tables that go into
# bench/RESULTS.md). Run it on a quiet machine; it takes ~10 minutes at 2 passes.
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-2}
export MX_BUILD=${MX_BUILD:-build}
PY=${PY:-/opt/torchvenv/bin/python}
THREADS=${THREADS:-"1 2"}   # the thread counts to run
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/cnn_raw.txt
: >"$RAW"
cc -O2 -std=c11 -o "$OUT/conv_onednn" bench/conv_onednn.c -ldnnl
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
for p in $(seq "$PASSES"); do
  for t in $THREADS; do
    echo "pass $p/$PASSES threads=$t" >&2
    luajit bench/conv_bench.lua --threads=$t >>"$RAW"
    $PY bench/conv_bench.py --threads=$t >>"$RAW"
    OMP_NUM_THREADS=$t "$OUT/conv_onednn" >>"$RAW"
    luajit bench/cnn_bench.lua --threads=$t >>"$RAW"
    $PY bench/cnn_bench.py --threads=$t >>"$RAW"
    for b in pool norm act; do
      luajit bench/${b}_bench.lua --threads=$t >>"$RAW"
      $PY bench/${b}_bench.py --threads=$t >>"$RAW"
    done
  done
done
{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');"
  echo "load average at start / end: $LOAD0 / $(cut -d' ' -f1-3 /proc/loadavg); run took"
  echo "$(( $(date +%s) - T0 )) s. Command: \`bench/cnn_run.sh $PASSES\`. Medians over passes of"
  echo "per-pass medians; ratios > 1 mean luamx is faster (for times: the peer's / luamx's)."
  echo
  python3 bench/compare.py "$RAW"
} >"$OUT/cnn.md"
cat "$OUT/cnn.md"
