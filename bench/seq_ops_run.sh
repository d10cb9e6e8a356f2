#!/usr/bin/env bash
# bench/seq_ops_run.sh — the sequence-op benchmarks (bench/seq_ops_bench.{lua,py})
# side by side with PyTorch CPU (/opt/torchvenv), alternating luamx / PyTorch runs at each
# thread count, medians over passes.
#   bench/seq_ops_run.sh [PASSES]   (default 3; MX_BUILD=build-dir; PY=python with torch;
#                                    THREADS="1 2" the thread counts; QUICK=1 smoke run)
# Writes bench/out/seq_ops_raw.txt (RESULT lines) and bench/out/seq_ops.md (the tables).
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-3}
export MX_BUILD=${MX_BUILD:-build}
PY=${PY:-/opt/torchvenv/bin/python}
THREADS=${THREADS:-"1 2"}
Q=${QUICK:+--quick}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/seq_ops_raw.txt
: >"$RAW"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
for p in $(seq "$PASSES"); do
  for t in $THREADS; do
    echo "pass $p/$PASSES threads=$t" >&2
    luajit bench/seq_ops_bench.lua --threads=$t $Q >>"$RAW"
    $PY bench/seq_ops_bench.py --threads=$t $Q >>"$RAW"
  done
done
{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');"
  echo "load average at start / end: $LOAD0 / $(cut -d' ' -f1-3 /proc/loadavg); run took"
  echo "$(( $(date +%s) - T0 )) s. Command: \`bench/seq_ops_run.sh $PASSES\`. Medians over passes of"
  echo "per-pass medians; ratios > 1 mean luamx is faster (for times: the peer's / luamx's)."
  echo
  python3 bench/compare.py "$RAW"
} >"$OUT/seq_ops.md"
cat "$OUT/seq_ops.md"
