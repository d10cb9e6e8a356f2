/* mx_nccl.h — libmx_nccl: NCCL collectives across the local GPUs of one process, for
 * the 'nccl' kvstore (lua/mx/kvstore/nccl.lua; docs/distributed.md).
 *
 * libmx_nccl.so is a separate library (built beside libmx_cuda when nccl.h and libnccl
 * are found, CMake option MX_USE_NCCL) so that libmx_cuda, and every other GPU feature,
 * never needs libnccl at load time. Lua ffi.loads it only when an 'nccl' store is made.
 *
 * Errors: every function returns MX_OK (0) or an MX_E* code with libmx's thread-local
 * message set (mx_last_error()): MX_EINVAL for bad arguments (naming the argument),
 * MX_EDEVICE for CUDA/NCCL failures (naming the op, the devices and ncclGetErrorString).
 *
 * Ordering: the collectives are pushed through libmx's engine (mx_engine_push_fn) with
 * their tensors as reads/writes, on device dev(0) of the communicator, and are enqueued on
 * each device's legacy default stream — the stream libmx_cuda's kernels and copies use —
 * so a later op or copy of a result on its device runs after the collective. */
#ifndef MX_NCCL_H
#define MX_NCCL_H

#include "mx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* lua/mx/kvstore/nccl.lua ffi.cdefs the region between the markers (no macros there) */
/* MX_FFI_BEGIN */
typedef struct mx_nccl_comm mx_nccl_comm;

/* NCCL's version code (e.g. 22809 for 2.28.9) of the libnccl actually loaded; 0 when it
 * cannot be asked. Needs no GPU. */
int mx_nccl_version(void);

/* One communicator over ndev distinct local GPUs devs[0..ndev-1] (ncclCommInitAll):
 * rank r is gpu(devs[r]). 1 <= ndev <= 64. *out is freed with mx_nccl_comm_free. */
int mx_nccl_comm_new(int ndev, const int *devs, mx_nccl_comm **out);
void mx_nccl_comm_free(mx_nccl_comm *c);
int mx_nccl_comm_ndev(const mx_nccl_comm *c);
/* gpu id of rank r (-1 when r is out of range). */
int mx_nccl_comm_device(const mx_nccl_comm *c, int r);

/* Sum over the communicator's devices: dst[i] = sum_j src[j] for every i. n must be the
 * communicator's size with one tensor per device (any order: each tensor's gpu id picks its
 * rank); all tensors have one dtype (float32/64/16, bfloat16, int8/32/64, uint8) and one
 * element count, and are row-major. dst may be NULL or dst == src (in place); dst[i] must be
 * on src[i]'s device. */
int mx_nccl_allreduce(mx_nccl_comm *c, int n, mx_tensor *const *src, mx_tensor *const *dst);
/* t[i] = the value of the tensor on gpu(root_dev) for every i (in place); same rules, any
 * dtype (bool too). */
int mx_nccl_broadcast(mx_nccl_comm *c, int n, mx_tensor *const *t, int root_dev);
/* MX_FFI_END */

#ifdef __cplusplus
}
#endif

#endif
