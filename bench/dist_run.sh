#!/bin/sh
# bench/dist_run.sh — the dist_sync benchmarks, side by side in one run (2 processes on
# loopback; numbers are noisy on a shared machine: medians).
#   1. allreduce of a 64 MB float32 gradient: plain MPI_Allreduce (build/allreduce_bench;
#      Open MPI's default choice, then its ring forced) vs the kvstore
#      (bench/allreduce_bench.lua)
#   2. data-parallel step time of the same MLP and global batch: luamx dist_sync
#      (examples/dist_train.lua, synthetic data) vs PyTorch DistributedDataParallel (gloo,
#      bench/ddp_bench.py), with the communication time per step
# tools/dist/mxrun runs ranks unbound (--bind-to none); plain mpirun runs the C baseline
# unbound too, so both sides see the same placement.
# Environment: MB (64), REPS (10), STEPS (200), PY (/opt/torchvenv/bin/python).
set -e
cd "$(dirname "$0")/.."
MB=${MB:-64}
REPS=${REPS:-10}
STEPS=${STEPS:-200}
PY=${PY:-/opt/torchvenv/bin/python}
root=
[ "$(id -u)" = 0 ] && root=--allow-run-as-root
echo "== allreduce ${MB} MB float32, 2 processes"
echo "plain MPI_Allreduce, Open MPI's default algorithm choice:"
mpirun $root --oversubscribe --bind-to none -np 2 build/allreduce_bench "$MB" "$REPS"
echo "plain MPI_Allreduce, tuned ring (the algorithm libmx_mpi's MPI_Iallreduce uses):"
mpirun $root --oversubscribe --bind-to none -np 2 --mca coll_tuned_use_dynamic_rules 1 \
  --mca coll_tuned_allreduce_algorithm 4 build/allreduce_bench "$MB" "$REPS"
tools/dist/mxrun 2 bench/allreduce_bench.lua "$MB" "$REPS"
echo "== data-parallel MLP 784-256-256-10, global batch 128, 2 processes, 1 thread each"
# the same number of steps: 1 epoch of STEPS global batches. luamx's kernel threads are
# MX_NUM_THREADS (default: every core), PyTorch's torch.set_num_threads(1): one each.
# Both print the mean step time (loop wall time / steps).
N=$((STEPS * 128))
MX_NUM_THREADS=1 OMP_NUM_THREADS=1 tools/dist/mxrun 2 examples/dist_train.lua --kvstore dist_sync \
  --data synthetic --features 784 --train-size "$N" --hidden 256 --batch-size 128 \
  --epochs 1 --lr 0.05 | grep -E "final|ms/step"
OMP_NUM_THREADS=1 "$PY" bench/ddp_bench.py --steps "$STEPS" --batch-size 128
