"""bench/serve/make_models.py OUT: the TorchServe side of bench/serve_bench.sh —
torchvision's ResNet-18 (seeded random weights: no pretrained file is fetched) and the
12-32-16-5 MLP as TorchScript, packed by torch-model-archiver into OUT/ts_store/*.mar
(the image_classifier handler; the MLP with ts_mlp_handler.py)."""
import os
import subprocess
import sys

import torch
import torchvision

out = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
store = os.path.join(out, "ts_store")
os.makedirs(store, exist_ok=True)
torch.manual_seed(1)
resnet = torchvision.models.resnet18(weights=None).eval()
torch.jit.trace(resnet, torch.rand(1, 3, 224, 224)).save(os.path.join(out, "resnet18.pt"))
mlp = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                          torch.nn.Tanh(), torch.nn.Linear(16, 5)).eval()
torch.jit.trace(mlp, torch.rand(1, 12)).save(os.path.join(out, "mlp.pt"))
arch = os.path.join(os.path.dirname(sys.executable), "torch-model-archiver")
for name, handler in (("resnet18", "image_classifier"), ("mlp", os.path.join(here, "ts_mlp_handler.py"))):
    subprocess.check_call([arch, "--model-name", name, "--version", "1.0", "--serialized-file",
                           os.path.join(out, name + ".pt"), "--handler", handler,
                           "--export-path", store, "--force"])
print(store)
