/* device.cu — libmx_cuda's entry points: the GPU device backend (allocation,
 * copies, sync, count). libmx dlopens this library on first GPU use (core/src/device.c)
 * and then calls the generated registration of its kernels. */
#include "cuda_common.cuh"


static thread_local int current_dev = -1;

int mx_cuda_use(int dev_id) {
  if (dev_id == current_dev) return MX_OK;
  MX_CUDA_TRY(cudaSetDevice(dev_id), "cudaSetDevice");
  current_dev = dev_id;
  return MX_OK;
}

static void *cuda_alloc(size_t nbytes, int dev_id) {
  if (mx_cuda_use(dev_id)) return NULL;
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, nbytes ? nbytes : 1);
  if (e != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky-free error state */
    mx_err(MX_ENOMEM, "gpu(%d): cudaMalloc of %zu bytes failed: %s", dev_id, nbytes,
           cudaGetErrorString(e));
    return NULL;
  }
  return p;
}

static void cuda_free(void *p, size_t nbytes, int dev_id) {
  (void)nbytes;
  if (!p) return;
  if (mx_cuda_use(dev_id)) return;
  cudaFree(p);
}

/* kind: 0 host->dev, 1 dev->host, 2 dev->dev. Synchronous: when it returns, the
 * data is where it was asked to go (earlier kernels on the stream are done). */
static int cuda_copy(void *dst, const void *src, size_t nbytes, int kind, int dev_id) {
  int rc = mx_cuda_use(dev_id);
  if (rc) return rc;
  if (nbytes == 0) return MX_OK;
  cudaMemcpyKind k = kind == 0 ? cudaMemcpyHostToDevice
                     : kind == 1 ? cudaMemcpyDeviceToHost
                                 : cudaMemcpyDeviceToDevice;
  MX_CUDA_TRY(cudaMemcpy(dst, src, nbytes, k), "copy");
  return MX_OK;
}

static int cuda_sync(int dev_id) {
  int rc = mx_cuda_use(dev_id);
  if (rc) return rc;
  MX_CUDA_TRY(cudaDeviceSynchronize(), "sync");
  return MX_OK;
}

/* The device count does not change while the process runs: asked once (libmx
 * checks it on every op that names a GPU). */
static std::atomic<int> cached_count(-1);
static int cuda_count(void) {
  int c = cached_count.load(std::memory_order_relaxed);
  if (c >= 0) return c;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();
    mx_err(MX_EDEVICE, "no CUDA device (%s: %s)", cudaGetErrorName(e), cudaGetErrorString(e));
    return 0; /* not cached: the message must be set again for the next caller */
  }
  cached_count.store(n, std::memory_order_relaxed);
  return n;
}

static const mx_device_backend backend = {
  "cuda", cuda_alloc, cuda_free, cuda_copy, cuda_sync, cuda_count,
};

extern "C" const mx_device_backend *mx_cuda_backend(void) { return &backend; }

/* The kernels register through mx_cuda_register_kernels, generated from the op table's
 * `cuda` fields (build/gen/mx_cuda_gen.c): libmx calls it once the device answers. */
