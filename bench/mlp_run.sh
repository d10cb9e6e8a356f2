#!/usr/bin/env bash
# bench/mlp_run.sh — the "MLP training" section of bench/RESULTS.md: luamx
# (bench/mlp_bench.lua) and PyTorch (bench/mlp_bench.py) side by side, alternating,
# same threads, same hyper-parameters; peak RSS of each whole process (GNU time -v);
# time to `require "mx"` vs `import torch` (fresh processes, median).
#   bench/mlp_run.sh [EPOCHS] [THREADS] [OPTIMIZER] [PASSES]  (defaults 5 1 adam 1;
#   MX_BUILD=build). Values are medians over passes.
# PyTorch peers: every interpreter in PEERS that imports torch (default: the PyPI
# wheel in the dev-only virtualenv /opt/torchvenv, the current PyTorch, and Debian's
# python3-torch 1.13 under /usr/bin/python3); each gets its own column, named
# torch<version>. ALT_CORETYPE=1 adds a pass under the other OPENBLAS_CORETYPE setting.
# Writes bench/out/mlp_raw.txt and bench/out/mlp.md. Needs GNU time (/usr/bin/time,
# Debian package `time`).
set -euo pipefail
cd "$(dirname "$0")/.."
EPOCHS=${1:-5}
THREADS=${2:-1}
OPT=${3:-adam}
PASSES=${4:-1}
export MX_BUILD=${MX_BUILD:-build}
PEERS=${PEERS:-/opt/torchvenv/bin/python /usr/bin/python3}
PYS=()
for py in $PEERS; do
  if [ -x "$py" ] && "$py" -c 'import torch' 2>/dev/null; then PYS+=("$py"); fi
done
[ ${#PYS[@]} -gt 0 ] || { echo "mlp_run.sh: no interpreter in PEERS ($PEERS) imports torch" >&2; exit 1; }
OUT=bench/out
mkdir -p "$OUT"
RAW=$OUT/mlp_raw.txt
: >"$RAW"
export OPENBLAS_NUM_THREADS=$THREADS OMP_NUM_THREADS=$THREADS MX_NUM_THREADS=$THREADS
ARGS="--threads=$THREADS --epochs=$EPOCHS --batch=64 --optimizer=$OPT --seed=1"
# OPENBLAS_CORETYPE as the machine sets it, and with ALT_CORETYPE=1 the alternative: unset when
# it is set, Haswell (what these machines usually set) when it is not
AS_IS=(env)
LABELS=as_is
if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
  ALT_LABEL=unset; ALT=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)
else
  ALT_LABEL=Haswell; ALT=(env OPENBLAS_CORETYPE=Haswell)
fi
[ "${ALT_CORETYPE:-0}" = 1 ] && LABELS="as_is $ALT_LABEL"
log() { printf '%s\n' "$*" >&2; }

# run ENVLABEL IMPL CMD...: RESULT lines + peak RSS (MB) of the whole process (IMPL:
# luamx, or "py" to take the torch<version> name from the RESULT lines)
run() {
  local label=$1 impl=$2; shift 2
  local tlog out; tlog=$(mktemp); out=$(mktemp)
  /usr/bin/time -v -o "$tlog" "$@" | sed "s/\t\(1T\|2T\|[0-9]*T\) /\t$label \1 /" | tee "$out" >&2
  cat "$out" >>"$RAW"
  [ "$impl" = py ] && impl=$(awk -F'\t' '/^RESULT/ {print $3; exit}' "$out")
  local kb; kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tlog")
  printf 'RESULT\tmlp_peak_rss\t%s\t%.1f\tMB\t%s %sT bs64 %s\n' "$impl" "$(awk "BEGIN{print $kb/1024}")" \
    "$label" "$THREADS" "$OPT" >>"$RAW"
  rm -f "$tlog" "$out"
}

for pass in $(seq "$PASSES"); do
  for label in $LABELS; do
    if [ $label = as_is ]; then E=("${AS_IS[@]}"); else E=("${ALT[@]}"); fi
    log "== pass $pass/$PASSES: OPENBLAS_CORETYPE $label (as set here: ${OPENBLAS_CORETYPE:-unset})"
    run $label luamx "${E[@]}" luajit bench/mlp_bench.lua $ARGS
    for py in "${PYS[@]}"; do run $label py "${E[@]}" "$py" bench/mlp_bench.py $ARGS; done
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
startup luamx 'mx + gluon (nn, loss, data.vision) vs torch + torch.nn' env $LP luajit -e \
  'local mx = require("mx"); local _ = mx.gluon.nn, mx.gluon.loss, mx.gluon.data.vision, mx.gluon.Trainer'
for py in "${PYS[@]}"; do
  name=$("$py" -c 'import torch; print("torch" + torch.__version__.split("+")[0])')
  startup "$name" 'require "mx" vs import torch' "$py" -c 'import torch'
  startup "$name" 'mx + gluon (nn, loss, data.vision) vs torch + torch.nn' "$py" -c 'import torch, torch.nn, torch.optim'
done

{
  echo "Machine: $(nproc --all) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)."
  for py in "${PYS[@]}"; do echo "Peer: $py ($("$py" -c 'import torch; print("torch", torch.__version__)'))."; done
  echo "Threads: $THREADS (MX_NUM_THREADS, torch.set_num_threads, OPENBLAS_NUM_THREADS, OMP_NUM_THREADS)."
  echo "$PASSES pass(es), alternating; $EPOCHS epochs, batch 64, $OPT, seed 1; as_is = OPENBLAS_CORETYPE as the environment sets it"
  echo "(${OPENBLAS_CORETYPE:-unset here}); $ALT_LABEL = ${ALT[*]}."
  echo
  python3 bench/compare.py "$RAW"
} >"$OUT/mlp.md"
cat "$OUT/mlp.md"
