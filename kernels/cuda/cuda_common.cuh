/* cuda_common.cuh — what the CUDA kernel files of libmx_cuda share: error
 * reporting through libmx's thread-local message, device selection, launch
 * geometry, and element load/store for every MXNet dtype with the reference
 * kernels' semantics (f16/bf16 round-to-nearest-even, integer stores saturate and
 * truncate toward zero, NaN -> 0, bool = v != 0). */
#ifndef MX_CUDA_COMMON_CUH
#define MX_CUDA_COMMON_CUH

#include "internal.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Returns MX_EDEVICE with a message naming `what` when a CUDA call failed. */
static inline int mx_cuda_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return MX_OK;
  return mx_err(MX_EDEVICE, "%s: CUDA error %s (%s)", what, cudaGetErrorName(e),
                cudaGetErrorString(e));
}
#define MX_CUDA_TRY(call, what)                                                          \
  do {                                                                                   \
    int rc_ = mx_cuda_check((call), (what));                                             \
    if (rc_) return rc_;                                                                 \
  } while (0)

/* Makes dev_id current on this thread (cached: cudaSetDevice only on change). */
int mx_cuda_use(int dev_id);
/* The stream kernels and copies of libmx_cuda run on (the legacy default stream:
 * ordered with every synchronous cudaMemcpy, which is what the copy paths use). */
static inline cudaStream_t mx_cuda_stream(void) { return 0; }

/* Launch geometry for n elements with a grid-stride loop. */
static inline unsigned mx_cuda_blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b > 65535LL * 8) b = 65535LL * 8; /* grid-stride covers the rest */
  if (b < 1) b = 1;
  return (unsigned)b;
}

/* ---- element access by runtime dtype -------------------------------------------- */
/* Load element i of a buffer of MXNet dtype `dt` as C (float or double). */
template <typename C>
__device__ __forceinline__ C mx_ld(const void *p, int dt, int64_t i) {
  switch (dt) {
  case MX_F32: return (C)((const float *)p)[i];
  case MX_F64: return (C)((const double *)p)[i];
  case MX_F16: return (C)__half2float(((const __half *)p)[i]);
  case MX_BF16: return (C)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
  case MX_U8: return (C)((const uint8_t *)p)[i];
  case MX_I8: return (C)((const int8_t *)p)[i];
  case MX_I32: return (C)((const int32_t *)p)[i];
  case MX_I64: return (C)((const int64_t *)p)[i];
  case MX_BOOL: return (C)(((const uint8_t *)p)[i] != 0);
  default: return (C)0;
  }
}

/* Saturating float -> integer conversion (as dtype.c's sat_i64). */
__device__ __forceinline__ int64_t mx_sat(double v, double lo, double hi) {
  if (v != v) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return (int64_t)hi;
  return (int64_t)v;
}

/* Store v into element i of output type T. */
template <typename T> struct mx_st;
template <> struct mx_st<float> {
  template <typename C> __device__ static void put(float *p, int64_t i, C v) { p[i] = (float)v; }
};
template <> struct mx_st<double> {
  template <typename C> __device__ static void put(double *p, int64_t i, C v) { p[i] = (double)v; }
};
template <> struct mx_st<__half> {
  template <typename C> __device__ static void put(__half *p, int64_t i, C v) {
    p[i] = __float2half_rn((float)v);
  }
};
template <> struct mx_st<__nv_bfloat16> {
  template <typename C> __device__ static void put(__nv_bfloat16 *p, int64_t i, C v) {
    p[i] = __float2bfloat16_rn((float)v);
  }
};
template <> struct mx_st<uint8_t> {
  template <typename C> __device__ static void put(uint8_t *p, int64_t i, C v) {
    p[i] = (uint8_t)mx_sat((double)v, 0, 255);
  }
};
template <> struct mx_st<int8_t> {
  template <typename C> __device__ static void put(int8_t *p, int64_t i, C v) {
    p[i] = (int8_t)mx_sat((double)v, -128, 127);
  }
};
template <> struct mx_st<int32_t> {
  template <typename C> __device__ static void put(int32_t *p, int64_t i, C v) {
    p[i] = (int32_t)mx_sat((double)v, -2147483648.0, 2147483647.0);
  }
};
template <> struct mx_st<int64_t> {
  template <typename C> __device__ static void put(int64_t *p, int64_t i, C v) {
    p[i] = mx_sat((double)v, -9223372036854775808.0, 9223372036854774784.0);
  }
};
/* bool is stored as one byte: a distinct tag type */
struct mx_bool_t { uint8_t v; };
template <> struct mx_st<mx_bool_t> {
  template <typename C> __device__ static void put(mx_bool_t *p, int64_t i, C v) {
    p[i].v = v != (C)0;
  }
};

/* Compute type for an output dtype: float for f32/f16/bf16, double otherwise
 * (f64, and the integers, which the reference kernels compute in double too). */
template <typename T> struct mx_compute { typedef double type; };
template <> struct mx_compute<float> { typedef float type; };
template <> struct mx_compute<__half> { typedef float type; };
template <> struct mx_compute<__nv_bfloat16> { typedef float type; };

/* Calls F::template run<T>(args...) with T the C type of dtype dt; returns its
 * status, or MX_EINVAL for an unknown dtype. */
#define MX_CUDA_DISPATCH(dt, F, ...)                                                     \
  ((dt) == MX_F32    ? F::template run<float>(__VA_ARGS__)                              \
   : (dt) == MX_F64  ? F::template run<double>(__VA_ARGS__)                             \
   : (dt) == MX_F16  ? F::template run<__half>(__VA_ARGS__)                             \
   : (dt) == MX_BF16 ? F::template run<__nv_bfloat16>(__VA_ARGS__)                     \
   : (dt) == MX_U8   ? F::template run<uint8_t>(__VA_ARGS__)                            \
   : (dt) == MX_I8   ? F::template run<int8_t>(__VA_ARGS__)                             \
   : (dt) == MX_I32  ? F::template run<int32_t>(__VA_ARGS__)                            \
   : (dt) == MX_I64  ? F::template run<int64_t>(__VA_ARGS__)                            \
   : (dt) == MX_BOOL ? F::template run<mx_bool_t>(__VA_ARGS__)                          \
                     : mx_err(MX_EINVAL, "cuda: unknown dtype %d", (int)(dt)))

#endif
