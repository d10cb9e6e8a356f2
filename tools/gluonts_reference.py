# tools/gluonts_reference.py — GluonTS's own DeepAR (PyPI gluonts on its torch backend, the
# dev venv) and SeasonalNaive on the data sets of mx.gluonts.repository, with the same
# splits (last windows x prediction_length values held out, rolling), horizons, epochs and
# batches as bench/gluonts_backtest.lua; writes --out, by default
# docs/results/gluonts_reference_s<seed>.json (mean wQL, MASE, ND per data set, seconds per
# epoch).
#   OMP_NUM_THREADS=1 /opt/torchvenv/bin/python tools/gluonts_reference.py --epochs 20 --threads 1
import argparse, json, os, tempfile, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
import pandas as pd
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=20)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--datasets", default="")
ap.add_argument("--out", default=None)
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
if a.out is None:
    a.out = "docs/results/gluonts_reference_s%d.json" % a.seed
torch.set_num_threads(a.threads)

from gluonts.dataset.common import ListDataset
from gluonts.dataset.split import split
from gluonts.evaluation import Evaluator, make_evaluation_predictions
from gluonts.model.seasonal_naive import SeasonalNaivePredictor
from gluonts.torch.model.deepar import DeepAREstimator
import lightning.pytorch as pl

SETS = {"airpassengers": (12, 3), "sunspots_monthly": (24, 3), "co2": (12, 3), "ukgas": (8, 3),
        "nottem": (12, 3), "elec_equip": (12, 3), "taylor": (48, 3), "r_monthly": (12, 2)}
ROOT = os.environ.get("MX_GLUONTS_DATA", os.path.expanduser("~/.mxnet/gluon-ts/datasets"))


def load(name):
    rows = []
    for line in open(os.path.join(ROOT, name + ".txt")):
        iid, start, freq, vals = line.rstrip("\n").split("\t")
        v = [np.nan if x == "NA" else float(x) for x in vals.split(",")]
        if freq == "Q":
            start = pd.Period(start, freq="Q")
        rows.append({"item_id": iid, "start": pd.Period(start, freq=freq), "target": v,
                     "feat_static_cat": [len(rows)]})
    return rows, freq


class EpochTimer(pl.Callback):
    # wall seconds and the process's CPU seconds (all threads) per epoch
    def __init__(self): self.t, self.cpu = [], []
    def on_train_epoch_start(self, *_): self.t0, self.c0 = time.perf_counter(), time.process_time()
    def on_train_epoch_end(self, *_):
        self.t.append(time.perf_counter() - self.t0)
        self.cpu.append(time.process_time() - self.c0)


res = {}
# the checkpoints (the best epoch's, which train loads back) in a directory of this process's
# own: runs side by side must not pick up each other's files
ckpt_dir = tempfile.mkdtemp(prefix="gluonts_reference_")
names = [n for n in SETS if not a.datasets or n in a.datasets.split(",")]
for name in names:
    h, w = SETS[name]
    rows, freq = load(name)
    ds = ListDataset(rows, freq=freq)
    train, tmpl = split(ds, offset=-h * w)
    test = tmpl.generate_instances(prediction_length=h, windows=w, distance=h)
    ev = Evaluator(quantiles=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9], num_workers=0)

    def score(pred):
        fcs = list(pred.predict(test.input, num_samples=100))
        tss = []
        for inp, lab in zip(test.input, test.label):
            y = np.concatenate([inp["target"], lab["target"]])
            tss.append(pd.Series(y, index=pd.period_range(inp["start"], periods=len(y), freq=freq)))
        agg, _ = ev(iter(tss), iter(fcs), num_series=len(tss))
        return {k: float(agg[k]) for k in ("mean_wQuantileLoss", "MASE", "ND", "RMSE")}

    from gluonts.time_feature import get_seasonality
    sn = score(SeasonalNaivePredictor(prediction_length=h, season_length=get_seasonality(freq)))
    pl.seed_everything(a.seed, workers=True)
    timer = EpochTimer()
    cat = len(rows) > 1
    est = DeepAREstimator(freq=freq, prediction_length=h, batch_size=32, num_batches_per_epoch=50,
                          num_feat_static_cat=1 if cat else 0,
                          cardinality=[len(rows)] if cat else None,
                          trainer_kwargs={"max_epochs": a.epochs, "callbacks": [timer],
                                          "enable_progress_bar": False, "logger": False,
                                          "enable_model_summary": False,
                                          "default_root_dir": ckpt_dir})
    t0 = time.perf_counter()
    pred = est.train(train)
    train_s = time.perf_counter() - t0
    da = score(pred)
    res[name] = {"freq": freq, "prediction_length": h, "windows": w, "seasonal_naive": sn,
                 "deepar": da, "train_s": train_s, "epoch_s": float(np.median(timer.t)),
                 "epoch_cpu_s": float(np.median(timer.cpu)),
                 "epochs": a.epochs, "threads": a.threads}
    print(name, json.dumps(res[name]), flush=True)

os.makedirs(os.path.dirname(a.out), exist_ok=True)
tmp = a.out + ".tmp"
with open(tmp, "w") as f:
    json.dump(res, f, indent=1, sort_keys=True)
os.replace(tmp, a.out)
import shutil
shutil.rmtree(ckpt_dir, ignore_errors=True)
