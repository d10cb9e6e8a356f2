"""TorchServe handler for the MLP of bench/serve_bench.sh: JSON rows in, JSON rows out,
the batch TorchServe assembled run as one tensor (the mx-serve json_tensor handler's
work, for the comparison)."""
import json

import torch
from ts.torch_handler.base_handler import BaseHandler


class MLPHandler(BaseHandler):
    def preprocess(self, data):
        rows = []
        for r in data:
            b = r.get("data") or r.get("body")
            if isinstance(b, (bytes, bytearray)):
                b = json.loads(b)
            rows.append(b)
        return torch.tensor(rows, dtype=torch.float32)

    def postprocess(self, out):
        return out.tolist()
