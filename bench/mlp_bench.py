"""bench/mlp_bench.py — the PyTorch peer of bench/mlp_bench.lua.

Trains the same 784-256-256-10 MLP (ReLU, Xavier-uniform weights, zero biases) on
real Fashion-MNIST with the same hyper-parameters and the same data path: the
images stay uint8 in memory; each batch is gathered by a shuffled index list,
converted to float32 / 255 and flattened. Reports (RESULT lines, bench/harness.py):
  mlp_train       samples/s over the training epochs (evaluation excluded)
  mlp_test_acc    test accuracy after the last epoch
  mlp_epoch       seconds per training epoch (median)
  mlp_load        seconds to read the dataset

  PYTHON bench/mlp_bench.py --threads=1 --epochs=5 --batch=64 \\
      --optimizer=adam --lr=0.001 --seed=1
"""
import gzip
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = np.frombuffer(b[4:4 + 4 * nd], ">u4").astype(np.int64)
    return np.frombuffer(b[4 + 4 * nd:], np.uint8).reshape(dims)


def main():
    a = H.args(sys.argv[1:])
    threads = int(a.get("threads", 1))
    epochs = int(a.get("epochs", 5))
    bs = int(a.get("batch", 64))
    opt_name = a.get("optimizer", "adam")
    lr = float(a.get("lr", 1e-3 if opt_name == "adam" else 0.1))
    seed = int(a.get("seed", 1))
    note = "%dT bs%d %s" % (threads, bs, opt_name)
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    H.env_note()

    t0 = time.perf_counter()
    xtr = torch.from_numpy(read_idx(ROOT + "/train-images-idx3-ubyte.gz").copy()).reshape(-1, 784)
    ytr = torch.from_numpy(read_idx(ROOT + "/train-labels-idx1-ubyte.gz").astype(np.int64))
    xte = torch.from_numpy(read_idx(ROOT + "/t10k-images-idx3-ubyte.gz").copy()).reshape(-1, 784)
    yte = torch.from_numpy(read_idx(ROOT + "/t10k-labels-idx1-ubyte.gz").astype(np.int64))
    H.report("mlp_load", time.perf_counter() - t0, "s", note=note)

    net = torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))
    for m in net:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            torch.nn.init.zeros_(m.bias)
    loss_fn = torch.nn.CrossEntropyLoss()
    if opt_name == "adam":
        opt = torch.optim.Adam(net.parameters(), lr=lr)
    else:
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)

    n = xtr.shape[0]
    epoch_times, samples, train_time = [], 0, 0.0
    for epoch in range(epochs):
        perm = torch.randperm(n)
        net.train()
        t0 = time.perf_counter()
        loss_sum, seen = 0.0, 0
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            x = xtr[idx].float().div_(255)
            y = ytr[idx]
            out = net(x)
            loss = loss_fn(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.item() * x.shape[0]
            seen += x.shape[0]
        dt = time.perf_counter() - t0
        epoch_times.append(dt)
        train_time += dt
        samples += seen
        acc = evaluate(net, xte, yte)
        sys.stdout.write("# epoch %d/%d loss %.4f test-acc %.4f %.1fs\n"
                         % (epoch + 1, epochs, loss_sum / seen, acc, dt))
    H.report("mlp_train", samples / train_time, "samples/s", note=note)
    H.report("mlp_epoch", statistics.median(epoch_times), "s", note=note)
    H.report("mlp_test_acc", acc, "accuracy", note=note + " %d epochs" % epochs)


def evaluate(net, x, y):
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 1000):
            out = net(x[i:i + 1000].float().div_(255))
            correct += (out.argmax(1) == y[i:i + 1000]).sum().item()
    return correct / x.shape[0]


if __name__ == "__main__":
    main()
