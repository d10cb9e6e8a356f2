#!/usr/bin/env bash
# tools/runtime/mxnet_example_check.sh EXAMPLE.cc [IMAGE] — the manual (dev-only) check of
# MXNet's C predict API compatibility (docs/c-api.md): builds MXNet 1.9.1's own
# example/image-classification/predict-cpp/image-classification-predict.cc UNCHANGED
# twice, against MXNet 1.9.1's libmxnet.so (/opt/mxvenv) and against luamx's
# <mxnet/c_predict_api.h> + libmx (only -I/-L/-l differ), runs both on the same exported
# model and photo, and compares the 1000 scores they print. The example's source is not
# in this repository (fetch apache/mxnet at tag 1.9.1); it hard-codes its model paths, so
# the model (a Gluon ResNet-18 exported by MXNet with seeded random weights; no pretrained
# weights are available offline) is laid out where it looks: model/Inception/.
# Needs libopencv-dev (the example uses OpenCV) and /opt/mxvenv. Nothing here runs in CI.
set -euo pipefail
SRC=$(readlink -f "$1")
IMG=$(readlink -f "${2:-/usr/share/doc/opencv-doc/examples/data/baboon.jpg}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
MXI=$(/opt/mxvenv/bin/python -c 'import mxnet, os; print(os.path.dirname(mxnet.__file__))')
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/model/Inception"
cd "$W"
/opt/mxvenv/bin/python - <<'PY'
import mxnet as mx, numpy as np
from mxnet.gluon.model_zoo import vision
mx.random.seed(7); np.random.seed(7)
net = vision.resnet18_v1(); net.initialize(mx.init.Xavier(magnitude=2.0)); net.hybridize()
net(mx.nd.zeros((1, 3, 224, 224)))
for k, p in net.collect_params().items():  # non-trivial BatchNorm statistics
    if k.endswith('running_mean'): p.set_data(mx.nd.array(np.random.uniform(-0.1, 0.1, p.shape)))
    if k.endswith('running_var'): p.set_data(mx.nd.array(np.random.uniform(0.5, 1.5, p.shape)))
net(mx.nd.zeros((1, 3, 224, 224)))
net.export('model/Inception/Inception-BN', 126)
PY
awk '{printf "n%08d %s\n", NR, $0}' \
  /usr/share/doc/opencv-doc/examples/data/dnn/classification_classes_ILSVRC2012.txt \
  > model/Inception/synset.txt
CV="$(pkg-config --cflags opencv4)"
# libmxnet.so carries its own libjpeg, libpng and protobuf: the system's are named first
# and only the OpenCV modules the example uses are linked, or their symbols clash
g++ -std=c++11 -O2 -w $CV -I"$MXI/include" -o icp_mxnet "$SRC" -Wl,--no-as-needed -ljpeg \
  -lpng16 -lopencv_imgcodecs -lopencv_imgproc -lopencv_core "$MXI/libmxnet.so" -lpthread
g++ -std=c++11 -O2 -w $CV -I"$ROOT/core/include" -o icp_luamx "$SRC" -lopencv_imgcodecs \
  -lopencv_imgproc -lopencv_core -L"$ROOT/build/lib/mx" -Wl,-rpath,"$ROOT/build/lib/mx" -lmx -lpthread
LD_LIBRARY_PATH="$MXI" ./icp_mxnet "$IMG" > out_mxnet.txt 2>&1
./icp_luamx "$IMG" > out_luamx.txt 2>&1
grep "Best Result" out_mxnet.txt | sed 's/^/mxnet: /'
grep "Best Result" out_luamx.txt | sed 's/^/luamx: /'
python3 - <<'PY'
import re
rd = lambda f: [float(m) for m in re.findall(r"Accuracy\[\d+\] = (\S+)", open(f).read())]
a, b = rd("out_mxnet.txt"), rd("out_luamx.txt")
top = lambda v: sorted(range(len(v)), key=lambda i: -v[i])[:5]
print("scores: %d / %d, max |mxnet - luamx| = %.3g (max |score| %.3g)" % (
    len(a), len(b), max(abs(x - y) for x, y in zip(a, b)), max(map(abs, a))))
print("top-5 mxnet", top(a), "luamx", top(b), "same" if top(a) == top(b) else "DIFFERENT")
PY
