"""Checks ONNX files luamx exported (spec/onnx_export_spec.lua, #slow #torch): each with
onnx.checker (full check), then ONNX Runtime against luamx's own outputs saved beside it.

    /opt/ortvenv/bin/python tools/onnx/check_export.py MODEL.onnx IO.safetensors [rtol]

IO.safetensors (written by mx.nd.save) holds the inputs in the model's input order (in_0,
in_1...) and luamx's outputs (out_0...). The error is max |ORT - luamx| over max |luamx|
per output. Prints "OK <max relative error>" or the failure."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from safetensors.numpy import load_file


def main():
    path, io_path = sys.argv[1], sys.argv[2]
    rtol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
    onnx.checker.check_model(onnx.load(path), full_check=True)
    io = load_file(io_path)
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {i.name: io["in_%d" % k] for k, i in enumerate(s.get_inputs())}
    outs = s.run(None, feeds)
    worst = 0.0
    for k, got in enumerate(outs):
        want = io["out_%d" % k]
        if got.shape != want.shape:
            print("FAIL output %d: shape %s vs %s" % (k, got.shape, want.shape))
            sys.exit(1)
        # relative to the output's scale (max |luamx|): elementwise ratios blow up near 0
        scale = float(np.max(np.abs(want))) or 1.0
        err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
        worst = max(worst, err)
    if worst > rtol:
        print("FAIL max relative error %g > %g" % (worst, rtol))
        sys.exit(1)
    print("OK %g" % worst)


if __name__ == "__main__":
    main()
