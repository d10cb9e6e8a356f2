#!/usr/bin/env bash
# bench/serve_bench.sh [ROUNDS] [SECONDS] — mx-serve against TorchServe on this machine,
# serving the same two networks: ResNet-18 image classification (a JPEG, resize 256,
# crop 224, top-5) and the 12-32-16-5 MLP (one JSON row per request). Both servers run
# side by side on loopback (one worker per model, 2 intra-op threads, batch_size 8,
# max_batch_delay 5 ms); wrk drives one of them at a time at fixed concurrency,
# alternating mx-serve and TorchServe ROUNDS times (default 3) for SECONDS each
# (default 10; ResNet-18's rounds twice that), after a warm-up round each. Prints
# RESULT lines (bench/out/serve_raw.txt) and the bench/compare.py table of the medians.
# Needs wrk (Debian), Java (Debian) and torchserve + torch-model-archiver in the dev
# venv (PY=, default /opt/torchvenv; TorchServe 0.12 also imports captum and pyyaml).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECS=${2:-10}
PY=${PY:-/opt/torchvenv/bin/python}
VENV_BIN=$(dirname "$PY")
WORK=${SERVE_BENCH_DIR:-/tmp/mx_serve_bench}
IMAGE=${IMAGE:-/usr/share/doc/opencv-doc/examples/data/baboon.jpg}
OUTDIR=bench/out
RAW=$OUTDIR/serve_raw.txt
mkdir -p "$WORK" "$OUTDIR"
: >"$RAW"
export LUA_PATH="$PWD/lua/?.lua;$PWD/lua/?/init.lua;;" LUA_CPATH="$PWD/build/lib/?.so;;"

luajit bench/serve/make_models.lua "$WORK" >/dev/null
"$PY" bench/serve/make_models.py "$WORK" >/dev/null 2>&1

MX_PID= TS_STARTED=
cleanup() {
  if [ -n "$MX_PID" ]; then kill -TERM "$MX_PID" 2>/dev/null || true; wait "$MX_PID" 2>/dev/null || true; fi
  if [ -n "$TS_STARTED" ]; then "$VENV_BIN/torchserve" --stop >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# TorchServe: its own ports, async logging (its per-request DEBUG lines otherwise go
# through the synchronous appender), no token, no snapshot.
cat >"$WORK/ts.properties" <<EOF
inference_address=http://127.0.0.1:18080
management_address=http://127.0.0.1:18081
metrics_address=http://127.0.0.1:18082
default_workers_per_model=1
job_queue_size=1000
async_logging=true
disable_token_authorization=true
enable_model_api=true
EOF
(cd "$WORK" && OMP_NUM_THREADS=2 PATH="$VENV_BIN:$PATH" "$VENV_BIN/torchserve" --start --ncs \
  --model-store "$WORK/ts_store" --ts-config "$WORK/ts.properties" >"$WORK/ts.out" 2>&1)
TS_STARTED=1
for _ in $(seq 120); do
  curl -sf -m 2 http://127.0.0.1:18080/ping >/dev/null 2>&1 && break
  sleep 1
done
for m in resnet18 mlp; do
  curl -sf -m 300 -X POST "http://127.0.0.1:18081/models?url=$m.mar&batch_size=8&max_batch_delay=5&initial_workers=1&synchronous=true" >/dev/null
done

build/mx-serve --model-store "$WORK/mx_store" --models resnet18=resnet18.tar,mlp=mlp.tar \
  --inference-address 127.0.0.1:28080 --management-address 127.0.0.1:28081 \
  --metrics-address 127.0.0.1:28082 --workers 1 --worker-threads 2 >"$WORK/mx.log" 2>&1 &
MX_PID=$!
for _ in $(seq 120); do
  st=$(curl -s -m 2 http://127.0.0.1:28080/ping 2>/dev/null || true)
  case $st in *'"Healthy"'*) break ;; esac
  sleep 1
done

cat >"$WORK/resnet18.lua" <<EOF
local f = io.open("$IMAGE", "rb")
wrk.method = "POST"; wrk.body = f:read("*a"); f:close()
wrk.headers["Content-Type"] = "image/jpeg"
EOF
cat >"$WORK/mlp.lua" <<EOF
wrk.method = "POST"; wrk.body = "[1,2,3,4,5,6,7,8,9,10,11,12]"
wrk.headers["Content-Type"] = "application/json"
EOF
# Both must answer the same kind of thing before anything is timed.
check() { # port model content-type body-argument
  local out
  out=$(curl -s -m 60 -w '\n%{http_code}' -H "Content-Type: $3" --data-binary "$4" \
    "http://127.0.0.1:$1/predictions/$2")
  case $out in *$'\n'200) ;; *) echo "port $1 $2 answered: $out" >&2; exit 1 ;; esac
}
for port in 28080 18080; do
  check "$port" mlp application/json '[1,2,3,4,5,6,7,8,9,10,11,12]'
  check "$port" resnet18 image/jpeg "@$IMAGE"
done

# one wrk run -> RESULT lines (requests/s, p50, p99; failures in the note)
run() { # impl port model conc secs record
  local out rps p50 p99 bad
  out=$(wrk -t2 -c"$4" -d"$5"s --timeout 60s --latency -s "$WORK/$3.lua" "http://127.0.0.1:$2/predictions/$3")
  [ "$6" = 1 ] || return 0
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  ms() { awk -v q="$1" '$1 == q { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 }
    else if (v ~ /ms$/) sub(/ms$/, "", v); else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 }
    print v }' <<<"$out"; }
  p50=$(ms 50%) p99=$(ms 99%)
  bad=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {n += $4 + $6 + $8 + $10} END {print n + 0}' <<<"$out")
  local note="c=$4 ${5}s failed=$bad"
  printf 'RESULT\tserve %s requests/s\t%s\t%s\treq/s\t%s\n' "$3" "$1" "$rps" "c=$4" >>"$RAW"
  printf 'RESULT\tserve %s p50\t%s\t%s\tms\t%s\n' "$3" "$1" "$p50" "c=$4" >>"$RAW"
  printf 'RESULT\tserve %s p99\t%s\t%s\tms\t%s\n' "$3" "$1" "$p99" "c=$4" >>"$RAW"
  printf 'RESULT\tserve %s failed requests\t%s\t%s\tcount\t%s\n' "$3" "$1" "$bad" "c=$4" >>"$RAW"
  echo "$1 $3 $note: $rps req/s p50 $p50 ms p99 $p99 ms (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# model, connections, round length in SECONDS (ResNet-18's rounds twice as long)
for spec in "mlp 16 1" "resnet18 8 2"; do
  set -- $spec
  run luamx 28080 "$1" "$2" 3 0
  run torchserve 18080 "$1" "$2" 3 0
  for _ in $(seq "$ROUNDS"); do
    run luamx 28080 "$1" "$2" $((SECS * $3)) 1
    run torchserve 18080 "$1" "$2" $((SECS * $3)) 1
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "RSS after the runs (kB): mx-serve front end $(awk '/VmRSS/ {print $2}' /proc/$MX_PID/status)" >&2
python3 bench/compare.py "$RAW"
