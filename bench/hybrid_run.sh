#!/usr/bin/env bash
# bench/hybrid_run.sh — the "hybridize" section of bench/RESULTS.md: luamx eager and
# hybridized (bench/hybrid_bench.lua) beside PyTorch eager and torch.compile
# (bench/hybrid_bench.py, the PyPI wheel in /opt/torchvenv), alternating, same threads,
# medians over passes.
#   bench/hybrid_run.sh [PASSES] [THREADS]    (defaults 3 1; MX_BUILD=build; PY=python)
# Writes bench/out/hybrid_raw.txt (RESULT lines) and prints the table (bench/compare.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-3}
THREADS=${2:-1}
export MX_BUILD=${MX_BUILD:-build}
PY=${PY:-/opt/torchvenv/bin/python}
export OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS MX_NUM_THREADS=$THREADS
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/hybrid_raw.txt
: >"$RAW"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW"
for p in $(seq "$PASSES"); do
  echo "pass $p/$PASSES" >&2
  luajit bench/hybrid_bench.lua --threads="$THREADS" >>"$RAW"
  $PY bench/hybrid_bench.py --threads="$THREADS" >>"$RAW" 2>/dev/null
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RAW"
if [ -x "$PY" ]; then $PY bench/compare.py "$RAW"; else python3 bench/compare.py "$RAW"; fi
