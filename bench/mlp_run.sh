#!/usr/bin/env bash
# bench/mlp_run.sh — the "MLP training" section of bench/RESULTS.md: luamx
# (bench/mlp_bench.lua) and PyTorch (bench/mlp_bench.py) side by side, alternating,
# same threads, same hyper-parameters; peak RSS of each whole process (GNU time -v);
# time to `require "mx"` vs `import torch` (fresh processes, median).
#   bench/mlp_run.sh [EPOCHS] [THREADS] [OPTIMIZER] [PASSES]  (defaults 5 1 adam 1;
#   MX_BUILD=build). Values are medians over passes.
# Writes bench/out/mlp_raw.txt and bench/out/mlp.md. Needs GNU time (/usr/bin/time,
# Debian package `time`) and Debian's python3-torch / python3-numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-5}
THREADS=${2:-1}
OPT=${3:-adam}
PASSES=${4:-1}
export MX_BUILD=${MX_BUILD:-build}
PY=${PY:-/usr/bin/python3}
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/mlp_raw.txt
: >"$RAW"
export OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS MX_NUM_THREADS=$THREADS
ARGS="--threads=$THREADS --epochs=$EPOCHS --batch=64 --optimizer=$OPT --seed=1"
# OPENBLAS_CORETYPE as the machine sets it, and the alternative: unset when it is set,
# Haswell (what these machines usually set) when it is not (as bench/run_all.sh does)
AS_IS=(env)
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  ALT_LABEL=unset; ALT=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
else
  ALT_LABEL=Haswell; ALT=(env OPENBLAS_CORETYPE=Haswell)
fi
log() { printf '%s\n' "$*" >&2; }

# run ENVLABEL IMPL CMD...: RESULT lines + peak RSS (MB) of the whole process
run() {
  local label=$1 impl=$2; shift 2
  local tlog; tlog=$(mktemp)
  /usr/bin/time -v -o "$tlog" "$@" | sed "s/\t\(1T\|2T\|[0-9]*T\) /\t$label \1 /" | tee -a "$RAW" >&2
  local kb; kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tlog")
  printf 'RESULT\tmlp_peak_rss\t%s\t%.1f\tMB\t%s %sT bs64 %s\n' "$impl" "$(awk "BEGIN{print $kb/1024}")" \
    "$label" "$THREADS" "$OPT" >>"$RAW"
  rm -f "$tlog"
}

for pass in $(seq "$PASSES"); do
  for label in as_is $ALT_LABEL; do
    if [ $label = as_is ]; then E=("${AS_IS[@]}"); else E=("${ALT[@]}"); fi
    log "== pass $pass/$PASSES: OPENBLAS_CORETYPE $label (as set here: ${OPENBLAS_CORETYPE:-unset})"
    run $label luamx "${E[@]}" luajit bench/mlp_bench.lua $ARGS
    run $label torch "${E[@]}" $PY bench/mlp_bench.py $ARGS
  done
done

# start-up: median of 7 fresh processes each
startup() { # impl label cmd...
  local impl=$1 label=$2; shift 2
  local ts=()
  for _ in 1 2 3 4 5 6 7; do
    local a b; a=$(date +%s%N); "$@" >/dev/null; b=$(date +%s%N)
    ts+=($(( (b - a) / 1000 )))
  done
  local med; med=$(printf '%s\n' "${ts[@]}" | sort -n | sed -n 4p)
  printf 'RESULT\tstartup\t%s\t%.1f\tms\t%s\n' "$impl" "$(awk "BEGIN{print $med/1000}")" "$label" >>"$RAW"
}
LP="LUA_PATH=lua/?.lua;lua/?/init.lua;; LUA_CPATH=$MX_BUILD/lib/?.so;;"
startup luamx 'require "mx" vs import torch' env $LP luajit -e 'require("mx")'
startup torch 'require "mx" vs import torch' $PY -c 'import torch'
startup luamx 'mx + gluon (nn, loss, data.vision) vs torch + torch.nn' env $LP luajit -e \
  'local mx = require("mx"); local _ = mx.gluon.nn, mx.gluon.loss, mx.gluon.data.vision, mx.gluon.Trainer'
startup torch 'mx + gluon (nn, loss, data.vision) vs torch + torch.nn' $PY -c 'import torch, torch.nn, torch.optim'

{
  echo "Machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)."
  echo "Threads: $THREADS (MX_NUM_THREADS, torch.set_num_threads, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS)."
  echo "$PASSES pass(es), alternating; $EPOCHS epochs, batch 64, $OPT, seed 1; as_is = OPENBLAS_CORETYPE as the environment sets it"
  echo "(${OPENBLAS_CORETYPE:-unset here}); $ALT_LABEL = ${ALT[*]}."
  echo
  $PY bench/compare.py "$RAW"
} >"$OUT/mlp.md"
cat "$OUT/mlp.md"
