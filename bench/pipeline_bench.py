"""bench/pipeline_bench.py — PyTorch's peer of bench/pipeline_bench.lua.

torch.utils.data.DataLoader over torchvision.datasets.ImageFolder (PIL decode) with
RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize, batch 64,
images/s at 0, 1 and 2 workers (worker processes, torch's default start method), on the
JPEG folder bench/pipeline_bench.lua makes (run that first):
    /opt/torchvenv/bin/python bench/pipeline_bench.py [--dir=DIR] [--passes=N]
        [--workers=0,1,2] [--threads=N] [--quick]
Same method as the Lua side: one warm-up pass per loader (persistent_workers, so the
workers stay up across passes as luamx's threads do), then the median of --passes
passes; torch's intra-op threads 1 (--threads). Dev-only: torchvision and pillow from
PyPI in /opt/torchvenv.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

torch, A, threads = H.torch_setup(sys.argv[1:])
import torchvision  # noqa: E402
from torchvision import datasets, transforms as T  # noqa: E402

DIR = A.get("dir", "/tmp/luamx_pipeline_jpegs")
PASSES = 1 if A.get("quick") else int(A.get("passes", 3))
WORKERS = [int(w) for w in str(A.get("workers", "0,1,2")).split(",")]
if not os.path.exists(DIR + ".complete"):
    sys.exit("no JPEG folder %s: run luajit bench/pipeline_bench.lua first" % DIR)

impl = "torchvision" + torchvision.__version__.split("+")[0]
tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
H.env_note()
ds = datasets.ImageFolder(DIR, transform=tf)
print("# torch %s, torchvision %s, PIL, %d images in %s, intra-op threads %d"
      % (torch.__version__, torchvision.__version__, len(ds), DIR, threads))

rates = {}
for nw in WORKERS:
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=nw,
                                         persistent_workers=nw > 0)
    for x, _ in loader:
        assert x.shape[1:] == (3, 224, 224)
    r = []
    for _ in range(PASSES):
        t0, n = H.now(), 0
        for x, _ in loader:
            n += x.shape[0]
        r.append(n / (H.now() - t0))
    del loader
    rates[nw] = statistics.median(r)
    H.report("pipeline_jpeg_rrc224_w%d" % nw, rates[nw], "images/s", impl=impl,
             note="batch 64, %d workers, torch threads %d" % (nw, threads))
if 0 in rates and 2 in rates:
    print("# 2 workers / 0 workers: %.2fx" % (rates[2] / rates[0]))
