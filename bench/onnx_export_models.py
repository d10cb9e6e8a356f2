"""bench/onnx_export_models.py — the ONNX files bench/onnx_bench.{lua,py} time: torchvision's
ResNet-50 and MobileNet v2 (random weights: torchvision downloads pretrained ones at run
time, which this project does not do; timing does not depend on the values), exported by
torch.onnx (opset 13) into bench/out/. Dev venv only:

    /opt/torchvenv/bin/python bench/onnx_export_models.py
"""
import os

import torch
import torchvision

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
for name, ctor in (("resnet50", torchvision.models.resnet50),
                   ("mobilenet_v2", torchvision.models.mobilenet_v2)):
    net = ctor(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(net, (x,), path, opset_version=13, input_names=["data"],
                      output_names=["out"], dynamo=False)
    print(path, os.path.getsize(path))
