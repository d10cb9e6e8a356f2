#!/bin/sh
# bench/gluonts_epoch.sh — DeepAR's training time per epoch, mx.gluonts vs GluonTS (gluonts
# from PyPI on its torch backend, /opt/torchvenv), same data (AirPassengers' training
# split), same network (2-layer LSTM 40, context 12, lags and time features of "M"), batch
# 32 x 50 batches per epoch, at 1 and 2 threads. Rounds alternate luamx and GluonTS; each
# side's figure is the median over rounds of its median epoch; the load average is printed
# with each round (wall timings taken under load are indicative only; the CPU seconds of
# each process per epoch, printed next to them, are less disturbed by other jobs).
#
#   sh bench/gluonts_epoch.sh [rounds=3] [epochs=4] [dataset=airpassengers]
set -e
ROUNDS=${1:-3}
EPOCHS=${2:-4}
DS=${3:-airpassengers}
PY=${PYTHON:-/opt/torchvenv/bin/python}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
epoch_s() { luajit -e "local f = io.open('$1') local t = require('cjson').decode(f:read('*a'))
  print(string.format('%.3f', t['$DS'].${2:-epoch_s} or 0/0))"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
for th in 1 2; do
  ours="" theirs="" oc="" tc=""
  r=1
  while [ "$r" -le "$ROUNDS" ]; do
    QUIET=1 bin/mx bench/gluonts_backtest.lua --epochs "$EPOCHS" --threads "$th" --datasets "$DS" \
      --no-plots --out "$TMP/ours.json" > /dev/null
    a=$(epoch_s "$TMP/ours.json") ac=$(epoch_s "$TMP/ours.json" epoch_cpu_s)
    OMP_NUM_THREADS=$th MKL_NUM_THREADS=$th "$PY" tools/gluonts_reference.py --epochs "$EPOCHS" \
      --threads "$th" --datasets "$DS" --out "$TMP/ref.json" > /dev/null 2>&1
    b=$(epoch_s "$TMP/ref.json") bc=$(epoch_s "$TMP/ref.json" epoch_cpu_s)
    echo "threads $th round $r: luamx $a s/epoch (CPU $ac s), gluonts-torch $b s/epoch (CPU $bc s) (load $(cut -d' ' -f1-3 /proc/loadavg))"
    ours="$ours $a" theirs="$theirs $b" oc="$oc $ac" tc="$tc $bc"
    r=$((r + 1))
  done
  mo=$(echo "$ours" | median) mt=$(echo "$theirs" | median)
  echo "threads $th median: luamx $mo s/epoch, gluonts-torch $mt s/epoch, ratio $(awk "BEGIN { printf \"%.2f\", $mt / $mo }")x"
  mo=$(echo "$oc" | median) mt=$(echo "$tc" | median)
  echo "threads $th median CPU: luamx $mo s/epoch, gluonts-torch $mt s/epoch, ratio $(awk "BEGIN { printf \"%.2f\", $mt / $mo }")x"
done
