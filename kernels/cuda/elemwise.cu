/* elemwise.cu — the elementwise family on the GPU: unary ops, binary ops with
 * NumPy broadcasting and dtype promotion, the *_scalar forms and comparisons.
 * Semantics follow kernels/ref/elemwise.c: integer outputs are computed in double
 * and stored saturating (integer division truncates, x/0 = 0), comparisons give
 * 1 or 0 in the output dtype, maximum/minimum propagate NaN. f32/f16/bf16 compute
 * in float, f64 in double. One kernel per output dtype; the op is a (uniform)
 * runtime switch, which costs nothing measurable on these memory-bound loops and
 * keeps the number of instantiations (and the build time) small. */
#include "bcast_geom.h"
#include "cuda_common.cuh"

#include <string.h>

/* ---- math in the compute type --------------------------------------------------- */
#define MX_M1(name, ff, df)                                                              \
  __device__ __forceinline__ float m_##name(float x) { return ff(x); }                   \
  __device__ __forceinline__ double m_##name(double x) { return df(x); }
MX_M1(exp, expf, exp)
MX_M1(log, logf, log)
MX_M1(sqrt, sqrtf, sqrt)
MX_M1(tanh, tanhf, tanh)
MX_M1(sin, sinf, sin)
MX_M1(cos, cosf, cos)
MX_M1(log1p, log1pf, log1p)
MX_M1(expm1, expm1f, expm1)
MX_M1(erf, erff, erf)
MX_M1(floor, floorf, floor)
MX_M1(ceil, ceilf, ceil)
MX_M1(round, roundf, round)
MX_M1(trunc, truncf, trunc)
MX_M1(fabs, fabsf, fabs)
__device__ __forceinline__ float m_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double m_pow(double a, double b) { return pow(a, b); }

enum {
  U_NEG, U_ABS, U_SIGN, U_EXP, U_LOG, U_SQRT, U_SQUARE, U_TANH, U_SIGMOID, U_RELU, U_SIN,
  U_COS, U_LOG1P, U_EXPM1, U_RECIP, U_RSQRT, U_SOFTRELU, U_SOFTSIGN, U_ERF, U_FLOOR,
  U_CEIL, U_ROUND, U_TRUNC, U_LOGICAL_NOT
};
enum {
  B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_EQ, B_NE, B_GT, B_GE, B_LT, B_LE,
  B_RELU_BW
};

template <typename C> __device__ __forceinline__ C un_apply(int op, C x) {
  switch (op) {
  case U_NEG: return -x;
  case U_ABS: return m_fabs(x);
  case U_SIGN: return (C)((x > 0) - (x < 0));
  case U_EXP: return m_exp(x);
  case U_LOG: return m_log(x);
  case U_SQRT: return m_sqrt(x);
  case U_SQUARE: return x * x;
  case U_TANH: return m_tanh(x);
  case U_SIGMOID: return (C)1 / ((C)1 + m_exp(-x));
  case U_RELU: return x > 0 ? x : (C)0;
  case U_SIN: return m_sin(x);
  case U_COS: return m_cos(x);
  case U_LOG1P: return m_log1p(x);
  case U_EXPM1: return m_expm1(x);
  case U_RECIP: return (C)1 / x;
  case U_RSQRT: return (C)1 / m_sqrt(x);
  case U_SOFTRELU: return x > 0 ? x + m_log1p(m_exp(-x)) : m_log1p(m_exp(x));
  case U_SOFTSIGN: return x / ((C)1 + m_fabs(x));
  case U_ERF: return m_erf(x);
  case U_FLOOR: return m_floor(x);
  case U_CEIL: return m_ceil(x);
  case U_ROUND: return m_round(x);
  case U_TRUNC: return m_trunc(x);
  case U_LOGICAL_NOT: return (C)(x == 0);
  default: return x;
  }
}

/* INT: the output dtype is an integer (division truncates, by zero gives 0). */
template <typename C, bool INT> __device__ __forceinline__ C bin_apply(int op, C a, C b) {
  switch (op) {
  case B_ADD: return a + b;
  case B_SUB: return a - b;
  case B_MUL: return a * b;
  case B_DIV:
    if (INT) return b == 0 ? (C)0 : m_trunc(a / b);
    return a / b;
  case B_POW: return m_pow(a, b);
  case B_MAX: return (a != a || b != b) ? (C)NAN : a >= b ? a : b;
  case B_MIN: return (a != a || b != b) ? (C)NAN : a <= b ? a : b;
  case B_EQ: return (C)(a == b);
  case B_NE: return (C)(a != b);
  case B_GT: return (C)(a > b);
  case B_GE: return (C)(a >= b);
  case B_LT: return (C)(a < b);
  case B_LE: return (C)(a <= b);
  case B_RELU_BW: return a * (C)(b > 0); /* relu_backward(ograd, data) */
  default: return a;
  }
}

template <typename T> struct is_int_out { static const bool value = true; };
template <> struct is_int_out<float> { static const bool value = false; };
template <> struct is_int_out<double> { static const bool value = false; };
template <> struct is_int_out<__half> { static const bool value = false; };
template <> struct is_int_out<__nv_bfloat16> { static const bool value = false; };

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);              \
       i += (int64_t)gridDim.x * blockDim.x)

/* ---- kernels ------------------------------------------------------------------------ */
/* unary: x[n] (dtype dx, any) -> y[n] (T); contiguous, same element order. */
template <typename T>
__global__ void unary_kernel(int op, const void *x, int dx, T *y, int64_t n) {
  typedef typename mx_compute<T>::type C;
  GRID_STRIDE(i, n) mx_st<T>::put(y, i, un_apply<C>(op, mx_ld<C>(x, dx, i)));
}

/* scalar: x[n] (dtype dx) op s -> y[n] (T); rev: s op x. */
template <typename T>
__global__ void scalar_kernel(int op, bool rev, const void *x, int dx, double s, T *y,
                              int64_t n) {
  typedef typename mx_compute<T>::type C;
  const C cs = (C)s;
  GRID_STRIDE(i, n) {
    C v = mx_ld<C>(x, dx, i);
    mx_st<T>::put(y, i, rev ? bin_apply<C, is_int_out<T>::value>(op, cs, v)
                            : bin_apply<C, is_int_out<T>::value>(op, v, cs));
  }
}

/* binary, same shapes: a[n] (da) op b[n] (db) -> o[n] (T), all contiguous. */
template <typename T>
__global__ void binary_flat_kernel(int op, const void *a, int da, const void *b, int db, T *o,
                                   int64_t n) {
  typedef typename mx_compute<T>::type C;
  GRID_STRIDE(i, n)
  mx_st<T>::put(o, i, bin_apply<C, is_int_out<T>::value>(op, mx_ld<C>(a, da, i),
                                                         mx_ld<C>(b, db, i)));
}

/* binary fast path for float32 a[n] + b[n] -> o[n], 16-byte aligned: float4
 * loads/stores, n4 = n / 4 vectors (the caller handles the tail). */
__global__ void add_f32x4_kernel(const float4 *a, const float4 *b, float4 *o, int64_t n4) {
  GRID_STRIDE(i, n4) {
    float4 x = a[i], y = b[i];
    o[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

/* binary with broadcasting: o (T, n elements, row-major over the coalesced g.shape)
 * from a and b read through their broadcast strides g.sa / g.sb (bcast_geom.h). */
template <typename T>
__global__ void binary_bcast_kernel(int op, const void *a, int da, const void *b, int db, T *o,
                                    int64_t n, bcast_geom g) {
  typedef typename mx_compute<T>::type C;
  GRID_STRIDE(i, n) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
      int64_t c = rem % g.shape[d];
      rem /= g.shape[d];
      oa += c * g.sa[d];
      ob += c * g.sb[d];
    }
    mx_st<T>::put(o, i, bin_apply<C, is_int_out<T>::value>(op, mx_ld<C>(a, da, oa),
                                                           mx_ld<C>(b, db, ob)));
  }
}

/* ---- host side ---------------------------------------------------------------------- */
static const int THREADS = 256;

struct Unary {
  template <typename T> static int run(int op, const mx_tensor *x, mx_tensor *y) {
    unary_kernel<T><<<mx_cuda_blocks(y->size, THREADS), THREADS, 0, mx_cuda_stream()>>>(
        op, mx_ptr(x), x->dtype, (T *)mx_ptr(y), y->size);
    return MX_OK;
  }
};

struct Scalar {
  template <typename T>
  static int run(int op, bool rev, const mx_tensor *x, double s, mx_tensor *y) {
    scalar_kernel<T><<<mx_cuda_blocks(y->size, THREADS), THREADS, 0, mx_cuda_stream()>>>(
        op, rev, mx_ptr(x), x->dtype, s, (T *)mx_ptr(y), y->size);
    return MX_OK;
  }
};

struct BinaryFlat {
  template <typename T>
  static int run(int op, const mx_tensor *a, const mx_tensor *b, mx_tensor *o) {
    binary_flat_kernel<T><<<mx_cuda_blocks(o->size, THREADS), THREADS, 0, mx_cuda_stream()>>>(
        op, mx_ptr(a), a->dtype, mx_ptr(b), b->dtype, (T *)mx_ptr(o), o->size);
    return MX_OK;
  }
};

struct BinaryBcast {
  template <typename T>
  static int run(int op, const mx_tensor *a, const mx_tensor *b, mx_tensor *o,
                 const bcast_geom *g) {
    binary_bcast_kernel<T><<<mx_cuda_blocks(o->size, THREADS), THREADS, 0,
                             mx_cuda_stream()>>>(op, mx_ptr(a), a->dtype, mx_ptr(b), b->dtype,
                                                 (T *)mx_ptr(o), o->size, *g);
    return MX_OK;
  }
};

static bool same_shape(const mx_tensor *a, const mx_tensor *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static int launch_done(const char *name) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return mx_err(MX_EDEVICE, "%s: CUDA launch failed: %s", name,
                                      cudaGetErrorString(e));
  return MX_OK;
}

static int do_unary(const char *name, int op, mx_tensor *const *in, mx_tensor *const *out) {
  mx_tensor *y = out[0];
  if (y->size == 0) return MX_OK;
  int rc = mx_cuda_use(y->storage->dev_id);
  if (rc) return rc;
  rc = MX_CUDA_DISPATCH(y->dtype, Unary, op, in[0], y);
  return rc ? rc : launch_done(name);
}

static int do_scalar(const char *name, int op, bool rev, const void *p, mx_tensor *const *in,
                     mx_tensor *const *out) {
  mx_tensor *y = out[0];
  if (y->size == 0) return MX_OK;
  int rc = mx_cuda_use(y->storage->dev_id);
  if (rc) return rc;
  /* every *_scalar params struct is {double scalar;} (see kernels/ref/elemwise.c) */
  double s = ((const struct mx_params_add_scalar *)p)->scalar;
  rc = MX_CUDA_DISPATCH(y->dtype, Scalar, op, rev, in[0], s, y);
  return rc ? rc : launch_done(name);
}

static int do_binary(const char *name, int op, mx_tensor *const *in, mx_tensor *const *out) {
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  if (o->size == 0) return MX_OK;
  int rc = mx_cuda_use(o->storage->dev_id);
  if (rc) return rc;
  if (same_shape(a, o) && same_shape(b, o)) {
    void *pa = mx_ptr(a), *pb = mx_ptr(b), *po = mx_ptr(o);
    if (op == B_ADD && o->dtype == MX_F32 && a->dtype == MX_F32 && b->dtype == MX_F32 &&
        ((uintptr_t)pa | (uintptr_t)pb | (uintptr_t)po) % 16 == 0 && o->size >= 4) {
      int64_t n4 = o->size / 4, tail = o->size - n4 * 4;
      add_f32x4_kernel<<<mx_cuda_blocks(n4, THREADS), THREADS, 0, mx_cuda_stream()>>>(
          (const float4 *)pa, (const float4 *)pb, (float4 *)po, n4);
      if (tail)
        binary_flat_kernel<float><<<1, 32, 0, mx_cuda_stream()>>>(
            op, (const float *)pa + n4 * 4, MX_F32, (const float *)pb + n4 * 4, MX_F32,
            (float *)po + n4 * 4, tail);
      return launch_done(name);
    }
    rc = MX_CUDA_DISPATCH(o->dtype, BinaryFlat, op, a, b, o);
    return rc ? rc : launch_done(name);
  }
  bcast_geom g;
  memset(&g, 0, sizeof g);
  bcast_geom_make(&g, o->ndim, o->shape, a->ndim, a->shape, b->ndim, b->shape);
  rc = MX_CUDA_DISPATCH(o->dtype, BinaryBcast, op, a, b, o, &g);
  return rc ? rc : launch_done(name);
}

/* ---- the registry entries --------------------------------------------------------- */
#define UNARY(name, code)                                                                \
  int mx_cuda_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                     mx_tensor *const *out) {                                            \
    (void)p; (void)nin; (void)nout;                                                      \
    return do_unary(#name, code, in, out);                                               \
  }
#define BINARY(name, code)                                                               \
  int mx_cuda_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                     mx_tensor *const *out) {                                            \
    (void)p; (void)nin; (void)nout;                                                      \
    return do_binary(#name, code, in, out);                                              \
  }
#define SCALAR(name, code, rev)                                                          \
  int mx_cuda_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                     mx_tensor *const *out) {                                            \
    (void)nin; (void)nout;                                                               \
    return do_scalar(#name, code, rev, p, in, out);                                      \
  }

UNARY(neg, U_NEG)
UNARY(abs, U_ABS)
UNARY(sign, U_SIGN)
UNARY(exp, U_EXP)
UNARY(log, U_LOG)
UNARY(sqrt, U_SQRT)
UNARY(square, U_SQUARE)
UNARY(tanh, U_TANH)
UNARY(sigmoid, U_SIGMOID)
UNARY(relu, U_RELU)
UNARY(sin, U_SIN)
UNARY(cos, U_COS)
UNARY(log1p, U_LOG1P)
UNARY(expm1, U_EXPM1)
UNARY(reciprocal, U_RECIP)
UNARY(rsqrt, U_RSQRT)
UNARY(softrelu, U_SOFTRELU)
UNARY(softsign, U_SOFTSIGN)
UNARY(erf, U_ERF)
UNARY(floor, U_FLOOR)
UNARY(ceil, U_CEIL)
UNARY(round, U_ROUND)
UNARY(trunc, U_TRUNC)
UNARY(logical_not, U_LOGICAL_NOT)

BINARY(add, B_ADD)
BINARY(sub, B_SUB)
BINARY(mul, B_MUL)
BINARY(div, B_DIV)
BINARY(pow, B_POW)
BINARY(maximum, B_MAX)
BINARY(minimum, B_MIN)
BINARY(equal, B_EQ)
BINARY(not_equal, B_NE)
BINARY(greater, B_GT)
BINARY(greater_equal, B_GE)
BINARY(lesser, B_LT)
BINARY(lesser_equal, B_LE)
BINARY(relu_backward, B_RELU_BW)

SCALAR(add_scalar, B_ADD, false)
SCALAR(sub_scalar, B_SUB, false)
SCALAR(rsub_scalar, B_SUB, true)
SCALAR(mul_scalar, B_MUL, false)
SCALAR(div_scalar, B_DIV, false)
SCALAR(rdiv_scalar, B_DIV, true)
SCALAR(pow_scalar, B_POW, false)
SCALAR(rpow_scalar, B_POW, true)
SCALAR(maximum_scalar, B_MAX, false)
SCALAR(minimum_scalar, B_MIN, false)
SCALAR(equal_scalar, B_EQ, false)
SCALAR(not_equal_scalar, B_NE, false)
SCALAR(greater_scalar, B_GT, false)
SCALAR(greater_equal_scalar, B_GE, false)
SCALAR(lesser_scalar, B_LT, false)
SCALAR(lesser_equal_scalar, B_LE, false)

