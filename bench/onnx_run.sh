#!/usr/bin/env bash
# bench/onnx_run.sh — bench/onnx_bench.{lua,py} alternating, PASSES times (default 2), at 1
# and 2 threads; prints the RESULT lines grouped (bench/out/onnx_raw.txt). Needs the files
# of bench/onnx_export_models.py.
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-2}
PY=${PY:-/opt/torchvenv/bin/python}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/onnx_raw.txt
: >"$RAW"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for p in $(seq "$PASSES"); do
  for t in 1 2; do
    LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH="${MX_BUILD:-build}/lib/?.so;;" \
      luajit bench/onnx_bench.lua --threads=$t >>"$RAW"
    $PY bench/onnx_bench.py --threads=$t >>"$RAW"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep '^RESULT' "$RAW" | sort -k2,2 -k3,3 | cut -f2-6
