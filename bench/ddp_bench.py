"""bench/ddp_bench.py — PyTorch DistributedDataParallel (gloo) step time on the MLP of
examples/dist_train.lua (784-256-256-10, SGD momentum, synthetic data), 2 processes on
loopback, one thread each; the comparison row of bench/dist_run.sh.

  /opt/torchvenv/bin/python bench/ddp_bench.py [--steps 200] [--batch-size 128] [--nproc 2]

Prints the mean step time (wall time of the training loop / steps: the statistic
examples/dist_train.lua prints), the median step time, and the same gradients' allreduce
(dist.all_reduce of the flattened gradient, gloo) timed alone.
"""
import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, args, init_file):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=args.nproc)
    torch.manual_seed(1234)
    n = args.steps * args.batch_size
    x = torch.randn(n, 784)
    teacher = torch.randn(784, 10)
    y = (x @ teacher).argmax(1)
    torch.manual_seed(42)
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="sum")
    local = args.batch_size // args.nproc
    times = []
    dist.barrier()
    t_loop = time.perf_counter()
    for s in range(args.steps):
        base = s * args.batch_size + rank * local
        xb, yb = x[base:base + local], y[base:base + local]
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(ddp(xb), yb) / args.batch_size
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    t_loop = time.perf_counter() - t_loop
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    comm = []
    for _ in range(50):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        comm.append(time.perf_counter() - t0)
    if rank == 0:
        # the mean (loop wall time / steps) is what examples/dist_train.lua reports
        print("pytorch DDP gloo: %d procs, global batch %d: %.2f ms/step (mean), median "
              "%.2f ms/step, allreduce of the gradients (%.1f MB) alone %.2f ms"
              % (args.nproc, args.batch_size, 1000 * t_loop / args.steps,
                 1000 * statistics.median(times[10:]), flat.numel() * 4 / 2**20,
                 1000 * statistics.median(comm)))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    fd, init_file = tempfile.mkstemp(prefix="ddp_init_")
    os.close(fd)
    os.remove(init_file)
    try:
        mp.spawn(worker, args=(args, init_file), nprocs=args.nproc, join=True)
    finally:
        if os.path.exists(init_file):
            os.remove(init_file)


if __name__ == "__main__":
    main()
