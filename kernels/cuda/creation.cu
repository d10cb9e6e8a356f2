/* creation.cu — zeros / ones / full on the GPU.
 * out[0]: any shape, contiguous, dtype from params; filled on the device. */
#include "cuda_common.cuh"

/* fill: out[n] (type T) = v converted with the reference store semantics;
 * grid-stride, one element per thread per step. */
template <typename T>
__global__ void fill_kernel(T *out, int64_t n, double v) {
  typedef typename mx_compute<T>::type C;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    mx_st<T>::put(out, i, (C)v);
}

struct Fill {
  template <typename T> static int run(mx_tensor *o, double v) {
    int64_t n = o->size;
    if (n == 0) return MX_OK;
    int rc = mx_cuda_use(o->storage->dev_id);
    if (rc) return rc;
    fill_kernel<T><<<mx_cuda_blocks(n, 256), 256, 0, mx_cuda_stream()>>>((T *)mx_ptr(o), n, v);
    MX_CUDA_TRY(cudaGetLastError(), "fill");
    return MX_OK;
  }
};

static int fill(mx_tensor *o, double v) {
  if (v == 0.0 && !(1.0 / v < 0)) { /* all-zero bits for every dtype (not -0.0) */
    if (o->size == 0) return MX_OK;
    int rc = mx_cuda_use(o->storage->dev_id);
    if (rc) return rc;
    MX_CUDA_TRY(cudaMemsetAsync(mx_ptr(o), 0, mx_nbytes(o), mx_cuda_stream()), "zeros");
    return MX_OK;
  }
  return MX_CUDA_DISPATCH(o->dtype, Fill, o, v);
}

int mx_cuda_zeros(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 0.0);
}
int mx_cuda_ones(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 1.0);
}
int mx_cuda_full(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  return fill(out[0], ((const struct mx_params_full *)p)->value);
}

