#!/usr/bin/env bash
# bench/runtime_run.sh [ROUNDS] [ITERS] [MODELS...] — batch-1 latency of the MXNet vision
# zoo through the C predict API: luamx's runtime vs MXNet 1.9.1's libmxnet.so (both run
# bench/predict_bench.c, built against each library's c_predict_api.h), and PyTorch eager
# with torch.inference_mode (bench/runtime_bench.py). One thread each (MX_NUM_THREADS,
# OMP_NUM_THREADS, torch.set_num_threads). The models are exported by MXNet from
# gluon.model_zoo.vision with seeded random weights (latency does not depend on them) into
# a temporary folder. Rounds alternate the three; medians of the rounds' medians (wall),
# and of the rounds' mean process CPU time per forward (steadier on a loaded machine).
# Prints the load average before and after. Dev-only: needs /opt/mxvenv and /opt/torchvenv.
set -euo pipefail
ROUNDS=${1:-3}
ITERS=${2:-30}
shift $(( $# > 2 ? 2 : $# )) || true
MODELS=${*:-resnet18_v1 resnet50_v1 mobilenet1.0 mobilenetv2_1.0 squeezenet1.0 densenet121 inceptionv3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MXI=$(/opt/mxvenv/bin/python -c 'import mxnet, os; print(os.path.dirname(mxnet.__file__))')
W=${RUNTIME_BENCH_DIR:-$(mktemp -d)}
cd "$W"
cc -O2 -std=c11 -I"$ROOT/core/include" -o pb_luamx "$ROOT/bench/predict_bench.c" \
  -L"$ROOT/build/lib/mx" -Wl,-rpath,"$ROOT/build/lib/mx" -lmx -lpthread
cc -O2 -std=c11 -I"$MXI/include" -o pb_mxnet "$ROOT/bench/predict_bench.c" "$MXI/libmxnet.so" \
  -Wl,-rpath,"$MXI" -lpthread
for m in $MODELS; do
  [ -f "$m-symbol.json" ] && continue
  /opt/mxvenv/bin/python - "$m" <<'PY' 2>/dev/null
import sys, mxnet as mx, numpy as np
from mxnet.gluon.model_zoo import vision
name = sys.argv[1]
mx.random.seed(7); np.random.seed(7)
net = vision.get_model(name); net.initialize(mx.init.Xavier(magnitude=2.0)); net.hybridize()
net(mx.nd.zeros((1, 3, 299, 299) if name.startswith('inception') else (1, 3, 224, 224)))
net.export(name)
PY
done
echo "load before: $(cat /proc/loadavg)"
printf "| model | luamx C API ms | MXNet 1.9.1 predict API ms | PyTorch eager ms | vs MXNet | vs PyTorch | CPU ms luamx / MXNet / PyTorch | CPU vs MXNet | CPU vs PyTorch |\n|---|---|---|---|---|---|---|---|---|\n"
for m in $MODELS; do
  s=224; [ "${m#inception}" != "$m" ] && s=299
  L=(); M=(); T=(); LC=(); MC=(); TC=()
  for r in $(seq "$ROUNDS"); do
    read -r _ w _ _ _ c < <(MX_NUM_THREADS=1 OMP_NUM_THREADS=1 ./pb_luamx "$m-symbol.json" "$m-0000.params" 3 $s $s "$ITERS")
    L+=("$w"); LC+=("$c")
    read -r _ w _ _ _ c < <(OMP_NUM_THREADS=1 MXNET_ENGINE_TYPE=NaiveEngine ./pb_mxnet "$m-symbol.json" "$m-0000.params" 3 $s $s "$ITERS" 2>/dev/null)
    M+=("$w"); MC+=("$c")
    read -r _ w _ _ _ c < <(OMP_NUM_THREADS=1 /opt/torchvenv/bin/python "$ROOT/bench/runtime_bench.py" "$m" "$ITERS")
    T+=("$w"); TC+=("$c")
  done
  python3 - "$m" "${L[*]}" "${M[*]}" "${T[*]}" "${LC[*]}" "${MC[*]}" "${TC[*]}" <<'PY'
import sys, statistics as st
m, *cols = sys.argv[1:]
l, x, t, lc, xc, tc = (st.median(map(float, c.split())) for c in cols)
print("| %s | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.1f / %.1f / %.1f | %.2fx | %.2fx |"
      % (m, l, x, t, x / l, t / l, lc, xc, tc, xc / lc, tc / lc))
PY
done
echo "load after: $(cat /proc/loadavg)"
