#!/usr/bin/env bash
# bench/run_all.sh — the core benchmarks of luamx side by side with PyTorch CPU
# (and numpy), alternating luamx / peer runs, medians over passes.
#   bench/run_all.sh [PASSES]        (default 3; MX_BUILD=build-dir, default build)
# Writes bench/out/raw.txt (RESULT lines) and bench/out/core.md (the tables that go
# into bench/RESULTS.md). Run it niced on a quiet machine; it takes ~5 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-3}
export MX_BUILD=${MX_BUILD:-build}
ONLY=${MX_BENCH_ONLY:-all}    # ops | matmul | all
Q=${MX_BENCH_QUICK:+--quick}   # MX_BENCH_QUICK=1: short runs (smoke test of the script)
PY=${PY:-/usr/bin/python3}   # Debian's python3 with python3-torch / python3-numpy
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/raw.txt
: >"$RAW"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
log() { printf '%s\n' "$*" >&2; }

# OPENBLAS_CORETYPE "as the machine sets it" and the alternative: unset when it is
# set, Haswell (what these machines usually set) when it is not.
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  ALT_LABEL=unset; ALT=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
else
  ALT_LABEL=Haswell; ALT=(env OPENBLAS_CORETYPE=Haswell)
fi

for p in $(seq "$PASSES"); do
  for t in 1 2; do
    if [ "$ONLY" != matmul ]; then
      log "pass $p/$PASSES: ops threads=$t"
      luajit bench/ops_bench.lua --threads=$t $Q >>"$RAW"
      $PY bench/ops_bench.py --threads=$t $Q >>"$RAW"
    fi
    [ "$ONLY" = ops ] && continue
    for env in as_is alt; do
      log "pass $p/$PASSES: matmul threads=$t env=$env"
      if [ $env = as_is ]; then
        luajit bench/matmul_bench.lua --threads=$t $Q >>"$RAW"
        $PY bench/matmul_bench.py --threads=$t $Q >>"$RAW"
      else
        "${ALT[@]}" luajit bench/matmul_bench.lua --threads=$t $Q >>"$RAW"
        "${ALT[@]}" $PY bench/matmul_bench.py --threads=$t $Q >>"$RAW"
      fi
    done
  done
done
{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
  echo "OPENBLAS_CORETYPE as set: ${OPENBLAS_CORETYPE:-unset}; alternative: $ALT_LABEL."
  echo "Load average at start / end: $LOAD0 / $(cut -d' ' -f1-3 /proc/loadavg) (the machine is shared);"
  echo "run took $(( $(date +%s) - T0 )) s. Command: \`MX_BUILD=$MX_BUILD nice bench/run_all.sh $PASSES\`."
  echo "$PASSES passes, luamx and peer alternating; each value is the median over passes of"
  echo "per-pass medians. Ratios: > 1 means luamx is faster."
  echo
  $PY bench/compare.py "$RAW"
} >"$OUT/core.md"
cat "$OUT/core.md"
