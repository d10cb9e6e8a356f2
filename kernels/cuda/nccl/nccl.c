/* nccl.c — libmx_nccl: NCCL communicators over the local GPUs and the two collectives
 * the 'nccl' kvstore needs (allreduce-sum, broadcast), pushed through libmx's engine.
 * API and ordering rules: mx_nccl.h. Plain C against NCCL's and the CUDA runtime's C
 * headers (no device code), so it builds with the host compiler and -Werror. */
#include "mx_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEV 64

struct mx_nccl_comm {
  atomic_int refs; /* the owner + every pushed job not yet freed */
  int ndev;
  int devs[MAX_DEV];
  ncclComm_t comms[MAX_DEV];
};

/* Sets libmx's thread-local message (what mx_last_error() and the engine report). */
static int fail(int code, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  mx_set_last_error(buf);
  return code;
}

/* "gpu(0), gpu(1)" for messages. */
static const char *dev_list(char *buf, size_t cap, int n, const int *devs) {
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k + 16 < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%sgpu(%d)", i ? ", " : "", devs[i]);
  return buf;
}

static int nccl_fail(ncclResult_t r, const char *op, int n, const int *devs) {
  char b[512];
  return fail(MX_EDEVICE, "nccl %s on %s: %s (ncclResult %d)%s", op, dev_list(b, sizeof b, n, devs),
              ncclGetErrorString(r), (int)r,
              r == ncclSystemError || r == ncclUnhandledCudaError
                  ? "; NCCL_DEBUG=WARN prints NCCL's own diagnosis" : "");
}

int mx_nccl_version(void) {
  int v = 0;
  return ncclGetVersion(&v) == ncclSuccess ? v : 0;
}

static void comm_unref(mx_nccl_comm *c) {
  if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
  int cur = -1;
  cudaGetDevice(&cur);
  for (int i = 0; i < c->ndev; i++)
    if (c->comms[i]) ncclCommDestroy(c->comms[i]);
  if (cur >= 0) cudaSetDevice(cur);
  free(c);
}

int mx_nccl_comm_new(int ndev, const int *devs, mx_nccl_comm **out) {
  if (!out) return fail(MX_EINVAL, "nccl comm_new: out is NULL");
  *out = NULL;
  if (ndev < 1 || ndev > MAX_DEV)
    return fail(MX_EINVAL, "nccl comm_new: %d devices (1 .. %d)", ndev, MAX_DEV);
  if (!devs) return fail(MX_EINVAL, "nccl comm_new: the device list is NULL");
  char b[512];
  int count = 0;
  cudaError_t ce = cudaGetDeviceCount(&count);
  if (ce != cudaSuccess) {
    cudaGetLastError();
    return fail(MX_EDEVICE, "nccl comm_new on %s: no CUDA device (%s: %s)",
                dev_list(b, sizeof b, ndev, devs), cudaGetErrorName(ce), cudaGetErrorString(ce));
  }
  for (int i = 0; i < ndev; i++) {
    if (devs[i] < 0 || devs[i] >= count)
      return fail(MX_EDEVICE, "nccl comm_new: gpu(%d) requested but %d GPU(s) present", devs[i],
                  count);
    for (int j = 0; j < i; j++)
      if (devs[j] == devs[i])
        return fail(MX_EINVAL, "nccl comm_new: gpu(%d) is listed twice (one value per device)",
                    devs[i]);
  }
  mx_nccl_comm *c = calloc(1, sizeof *c);
  if (!c) return fail(MX_ENOMEM, "nccl comm_new: out of host memory");
  atomic_init(&c->refs, 1);
  c->ndev = ndev;
  memcpy(c->devs, devs, sizeof(int) * (size_t)ndev);
  int cur = -1;
  cudaGetDevice(&cur);
  ncclResult_t r = ncclCommInitAll(c->comms, ndev, devs);
  if (cur >= 0) cudaSetDevice(cur); /* libmx_cuda caches the current device per thread */
  if (r != ncclSuccess) {
    free(c);
    return nccl_fail(r, "CommInitAll", ndev, devs);
  }
  *out = c;
  return MX_OK;
}

void mx_nccl_comm_free(mx_nccl_comm *c) { comm_unref(c); }
int mx_nccl_comm_ndev(const mx_nccl_comm *c) { return c ? c->ndev : 0; }
int mx_nccl_comm_device(const mx_nccl_comm *c, int r) {
  return c && r >= 0 && r < c->ndev ? c->devs[r] : -1;
}

static int nccl_dtype(int dt, bool for_sum, ncclDataType_t *out) {
  switch (dt) {
  case MX_F32: *out = ncclFloat32; return 1;
  case MX_F64: *out = ncclFloat64; return 1;
  case MX_F16: *out = ncclFloat16; return 1;
  case MX_BF16: *out = ncclBfloat16; return 1;
  case MX_I8: *out = ncclInt8; return 1;
  case MX_U8: *out = ncclUint8; return 1;
  case MX_I32: *out = ncclInt32; return 1;
  case MX_I64: *out = ncclInt64; return 1;
  case MX_BOOL: *out = ncclUint8; return !for_sum; /* a sum of bools is no bool */
  default: return 0;
  }
}

typedef struct job {
  mx_nccl_comm *c;
  int kind;         /* 0 allreduce, 1 broadcast */
  int root;         /* broadcast: the root's rank */
  ncclDataType_t dt;
  size_t count;
  mx_tensor *src[MAX_DEV]; /* by rank */
  mx_tensor *dst[MAX_DEV];
} job;

static void job_free(void *arg) {
  job *j = arg;
  for (int r = 0; r < j->c->ndev; r++) {
    if (j->dst[r] && j->dst[r] != j->src[r]) mx_tensor_release(j->dst[r]);
    if (j->src[r]) mx_tensor_release(j->src[r]);
  }
  comm_unref(j->c);
  free(j);
}

/* Runs once the engine has the tensors ready: one grouped call enqueues the collective on
 * every device's legacy default stream (ordered with libmx_cuda's kernels and copies). */
static int job_run(void *arg) {
  job *j = arg;
  mx_nccl_comm *c = j->c;
  int cur = -1;
  cudaGetDevice(&cur);
  ncclResult_t r = ncclGroupStart();
  for (int k = 0; r == ncclSuccess && k < c->ndev; k++) {
    void *s = mx_tensor_data_nowait(j->src[k]);
    void *d = mx_tensor_data_nowait(j->dst[k]);
    r = j->kind == 0 ? ncclAllReduce(s, d, j->count, j->dt, ncclSum, c->comms[k], 0)
                     : ncclBroadcast(s, d, j->count, j->dt, j->root, c->comms[k], 0);
  }
  ncclResult_t r2 = ncclGroupEnd(); /* always close the group, even after a failed call */
  if (r == ncclSuccess) r = r2;
  if (cur >= 0) cudaSetDevice(cur);
  if (r != ncclSuccess)
    return nccl_fail(r, j->kind == 0 ? "allreduce" : "broadcast", c->ndev, c->devs);
  return MX_OK;
}

/* Checks the per-device tensors and pushes the collective through the engine. */
static int collective(const char *op, int kind, mx_nccl_comm *c, int n, mx_tensor *const *src,
                      mx_tensor *const *dst, int root_dev) {
  if (n < 1 || n > MAX_DEV) return fail(MX_EINVAL, "nccl %s: %d tensors (1 .. %d)", op, n, MAX_DEV);
  if (!src) return fail(MX_EINVAL, "nccl %s: the tensor list is NULL", op);
  int dt0 = -1;
  int64_t size0 = -1;
  for (int i = 0; i < n; i++) {
    mx_tensor *s = src[i], *d = dst ? dst[i] : s;
    if (!s || !d) return fail(MX_EINVAL, "nccl %s: tensor %d is NULL", op, i + 1);
    if (mx_tensor_dev_type(s) != MX_GPU || mx_tensor_dev_type(d) != MX_GPU)
      return fail(MX_EINVAL, "nccl %s: tensor %d is on cpu(%d); NCCL reduces GPU tensors only", op,
                  i + 1, mx_tensor_dev_id(mx_tensor_dev_type(s) != MX_GPU ? s : d));
    if (mx_tensor_dev_id(d) != mx_tensor_dev_id(s))
      return fail(MX_EINVAL, "nccl %s: output %d is on gpu(%d) but its input on gpu(%d)", op, i + 1,
                  mx_tensor_dev_id(d), mx_tensor_dev_id(s));
    if (i == 0) {
      dt0 = mx_tensor_dtype(s);
      size0 = mx_tensor_size(s);
    }
    if (mx_tensor_dtype(s) != dt0 || mx_tensor_dtype(d) != dt0)
      return fail(MX_EINVAL, "nccl %s: tensor %d has dtype %s but tensor 1 %s", op, i + 1,
                  mx_dtype_name(mx_tensor_dtype(s) != dt0 ? mx_tensor_dtype(s) : mx_tensor_dtype(d)),
                  mx_dtype_name(dt0));
    if (mx_tensor_size(s) != size0 || mx_tensor_size(d) != size0)
      return fail(MX_EINVAL, "nccl %s: tensor %d has %lld elements but tensor 1 %lld", op, i + 1,
                  (long long)(mx_tensor_size(s) != size0 ? mx_tensor_size(s) : mx_tensor_size(d)),
                  (long long)size0);
    if (mx_tensor_layout(s) != MX_LAYOUT_ROW_MAJOR || mx_tensor_layout(d) != MX_LAYOUT_ROW_MAJOR)
      return fail(MX_EINVAL, "nccl %s: tensor %d is not row-major", op, i + 1);
  }
  ncclDataType_t ndt;
  if (!nccl_dtype(dt0, kind == 0, &ndt))
    return fail(MX_EINVAL, "nccl %s: dtype %s is not supported%s", op, mx_dtype_name(dt0),
                dt0 == MX_BOOL ? " (a sum of bools; cast to int32 or uint8 first)" : "");
  if (!c) return fail(MX_EINVAL, "nccl %s: the communicator is NULL", op);
  if (n != c->ndev)
    return fail(MX_EINVAL, "nccl %s: %d tensors for a communicator over %d GPUs (one per device)",
                op, n, c->ndev);
  job *j = calloc(1, sizeof *j);
  if (!j) return fail(MX_ENOMEM, "nccl %s: out of host memory", op);
  j->c = c;
  j->kind = kind;
  j->root = -1;
  j->dt = ndt;
  j->count = (size_t)size0;
  char b[512];
  for (int i = 0; i < n; i++) {
    int dev = mx_tensor_dev_id(src[i]), r = 0;
    while (r < c->ndev && c->devs[r] != dev) r++;
    if (r == c->ndev || j->src[r]) {
      free(j); /* nothing retained yet */
      return fail(MX_EINVAL, "nccl %s: tensor %d is on gpu(%d), %s (the communicator is over %s)",
                  op, i + 1, dev, r == c->ndev ? "not in the communicator" : "as is an earlier one",
                  dev_list(b, sizeof b, c->ndev, c->devs));
    }
    j->src[r] = src[i];
    j->dst[r] = dst ? dst[i] : src[i];
    if (kind == 1 && dev == root_dev) j->root = r;
  }
  if (kind == 1 && j->root < 0) {
    free(j);
    return fail(MX_EINVAL, "nccl broadcast: the root gpu(%d) is not in the communicator (%s)",
                root_dev, dev_list(b, sizeof b, c->ndev, c->devs));
  }
  /* the job owns references until it is freed (after it ran, or when it is not run) */
  mx_tensor *reads[MAX_DEV], *writes[MAX_DEV];
  int nr = 0;
  for (int r = 0; r < c->ndev; r++) {
    mx_tensor_retain(j->src[r]);
    if (j->dst[r] != j->src[r]) {
      mx_tensor_retain(j->dst[r]);
      reads[nr++] = j->src[r];
    }
    writes[r] = j->dst[r];
  }
  atomic_fetch_add(&c->refs, 1);
  return mx_engine_push_fn(kind == 0 ? "nccl.allreduce" : "nccl.broadcast", job_run, j, job_free,
                           nr, reads, c->ndev, writes, MX_GPU, c->devs[0], NULL);
}

int mx_nccl_allreduce(mx_nccl_comm *c, int n, mx_tensor *const *src, mx_tensor *const *dst) {
  return collective("allreduce", 0, c, n, src, dst, -1);
}

int mx_nccl_broadcast(mx_nccl_comm *c, int n, mx_tensor *const *t, int root_dev) {
  return collective("broadcast", 1, c, n, t, NULL, root_dev);
}
