#!/usr/bin/env bash
# bench/safetensors_run.sh — bench/safetensors_bench.{lua,py} alternating, PASSES times
# (default 3), 1 thread; prints the RESULT lines grouped (bench/out/safetensors_raw.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PASSES=${1:-3}
PY=${PY:-/opt/torchvenv/bin/python}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/safetensors_raw.txt
: >"$RAW"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for p in $(seq "$PASSES"); do
  LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH="${MX_BUILD:-build}/lib/?.so;;" \
    luajit bench/safetensors_bench.lua --threads=1 >>"$RAW"
  $PY bench/safetensors_bench.py --threads=1 >>"$RAW"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
grep '^RESULT' "$RAW" | sort -k2,2 -k3,3 | cut -f2-6
