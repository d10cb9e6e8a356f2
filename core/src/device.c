/* device.c — device backends. The CPU is built in; the GPU backend lives in
 * libmx_cuda, loaded with dlopen from libmx's own directory on first use, so a
 * CPU-only install needs no CUDA at all. */

#include "internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef const mx_device_backend *(*backend_fn)(void);
typedef int (*register_fn)(void); /* mx_cuda_register_kernels: how many it registered */

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const mx_device_backend *cuda_backend;
static char cuda_status[512] = "libmx_cuda not loaded yet";

static void load_cuda(void) {
  if (getenv("MX_DISABLE_GPU")) {
    snprintf(cuda_status, sizeof cuda_status, "disabled by MX_DISABLE_GPU");
    return;
  }
  char path[4096] = "libmx_cuda.so";
  Dl_info info;
  if (dladdr((void *)&load_cuda, &info) && info.dli_fname) {
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash && (size_t)(slash - info.dli_fname) + 16 < sizeof path)
      snprintf(path, sizeof path, "%.*s/libmx_cuda.so", (int)(slash - info.dli_fname),
               info.dli_fname);
  }
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(cuda_status, sizeof cuda_status, "libmx_cuda not available (%s)", dlerror());
    return;
  }
  backend_fn bf = (backend_fn)dlsym(h, "mx_cuda_backend");
  register_fn rf = (register_fn)dlsym(h, "mx_cuda_register_kernels");
  if (!bf || !rf) {
    snprintf(cuda_status, sizeof cuda_status, "libmx_cuda at %.400s lacks its entry points", path);
    return;
  }
  const mx_device_backend *b = bf();
  if (!b || b->count() <= 0) {
    snprintf(cuda_status, sizeof cuda_status, "libmx_cuda loaded but no usable GPU: %s",
             mx_last_error());
    return;
  }
  rf();
  cuda_backend = b;
  cuda_status[0] = 0;
}

const mx_device_backend *mx_backend(int dev_type) {
  if (dev_type != MX_GPU) return NULL;
  pthread_once(&cuda_once, load_cuda);
  return cuda_backend;
}

int mx_gpu_count(void) {
  const mx_device_backend *b = mx_backend(MX_GPU);
  return b ? b->count() : 0;
}

const char *mx_gpu_status(void) {
  pthread_once(&cuda_once, load_cuda);
  return cuda_status;
}

/* CPU contexts with distinct ids are distinct devices (own storage pool, own tensors;
 * an op takes its inputs from one of them): cpu(0) .. cpu(n - 1), n = MX_NUM_CPU_DEVICES
 * (default and maximum MX_MAX_CPU_DEVICES = 16; storage.c sizes its pools by it). */
#ifndef MX_MAX_CPU_DEVICES
#define MX_MAX_CPU_DEVICES 16
#endif
static int cpu_devices = -1;
static int cpu_device_count(void) {
  int n = __atomic_load_n(&cpu_devices, __ATOMIC_RELAXED);
  if (n < 0) {
    const char *e = getenv("MX_NUM_CPU_DEVICES");
    n = e ? atoi(e) : MX_MAX_CPU_DEVICES;
    if (n < 1) n = 1;
    if (n > MX_MAX_CPU_DEVICES) n = MX_MAX_CPU_DEVICES;
    __atomic_store_n(&cpu_devices, n, __ATOMIC_RELAXED);
  }
  return n;
}

int mx_device_check(const char *op, int dev_type, int dev_id) {
  if (dev_type == MX_CPU) {
    if (MX_LIKELY(dev_id == 0)) return MX_OK;
    int n = cpu_device_count();
    if (dev_id < 0 || dev_id >= n)
      return mx_err(MX_EDEVICE, "%s: cpu(%d) requested but there are %d CPU devices, cpu(0) .. "
                    "cpu(%d) (MX_NUM_CPU_DEVICES, at most %d)", op, dev_id, n, n - 1,
                    MX_MAX_CPU_DEVICES);
    return MX_OK;
  }
  if (dev_type != MX_GPU)
    return mx_err(MX_EINVAL, "%s: unknown device type %d (1 = cpu, 2 = gpu)", op, dev_type);
  int n = mx_gpu_count();
  if (n == 0) return mx_err(MX_EDEVICE, "%s: gpu(%d) requested but %s", op, dev_id, mx_gpu_status());
  if (dev_id < 0 || dev_id >= n)
    return mx_err(MX_EDEVICE, "%s: gpu(%d) requested but only %d GPU(s) present", op, dev_id, n);
  return MX_OK;
}
