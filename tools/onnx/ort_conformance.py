"""ONNX Runtime over the same ONNX backend test data as spec/onnx_conformance_spec.lua
(Debian's libonnx-testdata), for docs/onnx.md's comparison. Dev venv only:

    /opt/ortvenv/bin/python tools/onnx/ort_conformance.py [folder ...]   (or /opt/torchvenv)

Prints "pass|fail|error <folder>/<case> <why>" per case and "TOTAL <folder> pass N fail N
error N" per folder. A case passes when every output of every test data set matches
within rtol 1e-3, atol 1e-7 (onnx.backend.test's runner), exactly for integers; "error"
is a model ORT refuses to load or run."""
import glob
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

ROOT = "/usr/share/libonnx-testdata/data"


def run_case(d):
    try:
        return run_case_checked(d)
    except Exception as e:  # noqa: BLE001  (a test data file of a type numpy cannot hold)
        return "error", str(e).splitlines()[0][:160]


def run_case_checked(d):
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(os.path.join(d, "model.onnx"), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001
        return "error", str(e).splitlines()[0][:160]
    ins = [i.name for i in sess.get_inputs()]
    for ds in sorted(glob.glob(os.path.join(d, "test_data_set_*"))):
        feeds = {}
        for k, p in enumerate(sorted(glob.glob(os.path.join(ds, "input_*.pb")),
                                     key=lambda s: int(s.rsplit("_", 1)[1][:-3]))):
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            feeds[t.name or ins[k]] = onnx.numpy_helper.to_array(t)
        try:
            outs = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            return "error", str(e).splitlines()[0][:160]
        for k, p in enumerate(sorted(glob.glob(os.path.join(ds, "output_*.pb")),
                                     key=lambda s: int(s.rsplit("_", 1)[1][:-3]))):
            t = onnx.TensorProto()
            with open(p, "rb") as f:
                t.ParseFromString(f.read())
            want = onnx.numpy_helper.to_array(t)
            got = outs[k]
            if want.dtype != got.dtype or want.shape != got.shape:
                return "fail", "output %d: %s%s vs %s%s" % (k, got.dtype, got.shape, want.dtype,
                                                           want.shape)
            if want.dtype.kind in "fc":
                if not np.allclose(got, want, rtol=1e-3, atol=1e-7, equal_nan=True):
                    return "fail", "output %d differs" % k
            elif not np.array_equal(got, want):
                return "fail", "output %d differs" % k
    return "pass", ""


def main():
    folders = sys.argv[1:] or ["node", "pytorch-converted", "pytorch-operator", "simple"]
    for folder in folders:
        tot = {"pass": 0, "fail": 0, "error": 0}
        for d in sorted(glob.glob(os.path.join(ROOT, folder, "test_*"))):
            st, why = run_case(d)
            tot[st] += 1
            print("%s %s/%s %s" % (st, folder, os.path.basename(d), why), flush=True)
        print("TOTAL %s pass %d fail %d error %d" % (folder, tot["pass"], tot["fail"], tot["error"]),
              flush=True)


if __name__ == "__main__":
    main()
