#!/usr/bin/env bash
# bench/zoo_run.sh [ROUNDS] [THREADS] [NETS] — the MXNet vision zoo's 14 networks at
# batch 1 and 8: luamx hybridized (bench/zoo_bench.lua) against MXNet 1.9.1 hybridized
# with static_alloc (oneDNN) and PyTorch eager under inference_mode in its faster memory
# format (bench/zoo_bench.py), same thread count. Each round runs every network in the
# three, one process each, alternating per network; the table holds medians over the
# rounds of each run's medians, wall time and process CPU time (on a loaded machine the
# CPU time is the steadier one at 1 thread). Writes bench/out/zoo_raw.txt and
# bench/out/zoo.md (bench/zoo_table.py). REPS=3: timed reps per run (after 2 warm-ups). Dev-only: needs /opt/mxvenv and /opt/torchvenv.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
THREADS=${2:-1}
NETS=${3:-resnet18_v1,resnet50_v1,resnet18_v2,resnet50_v2,vgg11_bn,alexnet,densenet121,squeezenet1.0,squeezenet1.1,inceptionv3,mobilenet1.0,mobilenet0.25,mobilenetv2_1.0,mobilenetv2_0.25}
REPS=${REPS:-3}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/zoo_raw.txt
: >"$RAW"
export LUA_PATH="bench/?.lua;lua/?.lua;lua/?/init.lua;;" LUA_CPATH="${MX_BUILD:-build}/lib/?.so;;"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
T0=$(date +%s)
for r in $(seq "$ROUNDS"); do
  for n in ${NETS//,/ }; do
    echo "round $r/$ROUNDS $n (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    A="--threads=$THREADS --nets=$n --reps=$REPS"
    # shellcheck disable=SC2086
    luajit bench/zoo_bench.lua $A >>"$RAW"
    # shellcheck disable=SC2086
    /opt/mxvenv/bin/python bench/zoo_bench.py $A 2>/dev/null >>"$RAW"
    # shellcheck disable=SC2086
    /opt/torchvenv/bin/python bench/zoo_bench.py --torch $A >>"$RAW"
  done
done
{
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');"
  echo "threads=$THREADS; load average at start / end: $LOAD0 / $(cut -d' ' -f1-3 /proc/loadavg);"
  echo "run took $(( $(date +%s) - T0 )) s. Command: \`bench/zoo_run.sh $ROUNDS $THREADS\`"
  echo "(REPS=$REPS). Ratios > 1: luamx faster."
  echo
  python3 bench/zoo_table.py "$RAW"
} >"$OUT/zoo.md"
cat "$OUT/zoo.md"
