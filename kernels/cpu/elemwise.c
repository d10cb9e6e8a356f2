/* kernels/cpu/elemwise.c — optimised elementwise kernels (unary, binary with NumPy
 * broadcasting, scalar forms, comparisons, clip, broadcast_to/like).
 *
 * Layout: all tensors contiguous row-major. Loops are written per compute type
 * (f32, f64, i32, i64, i8, u8) so GCC vectorises them (-O3 -mavx2 -mfma); float math
 * (exp, log, tanh...) reaches glibc's libmvec through the asm-aliased declarations
 * below, and the transcendental loops carry an AVX-512 clone picked at load time.
 * f16/bf16 (and mixed-dtype inputs) are converted to the compute type in chunks.
 * Large tensors are split over the intra-op pool; small ones (the 1-element add is
 * the per-op benchmark) run inline with no thread hand-off and no allocation.
 * Whatever a fast loop does not cover runs the reference kernel (correct, slow). */
#include "mx_ops_gen.h"
#include "internal.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

enum { CT_F32, CT_F64, CT_I32, CT_I64, CT_I8, CT_U8, CT_N };
static const int ct_dtype[CT_N] = {MX_F32, MX_F64, MX_I32, MX_I64, MX_I8, MX_U8};
static const size_t ct_size[CT_N] = {4, 8, 4, 8, 1, 1};

/* Compute type of a dtype: itself, f32 for f16/bf16, u8 for bool. */
static int ct_of(int dtype) {
  switch (dtype) {
  case MX_F32: case MX_F16: case MX_BF16: return CT_F32;
  case MX_F64: return CT_F64;
  case MX_I32: return CT_I32;
  case MX_I64: return CT_I64;
  case MX_I8: return CT_I8;
  default: return CT_U8; /* u8, bool */
  }
}
static bool is_native(int dtype) { return dtype != MX_F16 && dtype != MX_BF16; }

#define GRAIN_LIGHT ((int64_t)1 << 16) /* per thread: memory-bound loops */
#define GRAIN_HEAVY ((int64_t)1 << 14) /* per thread: transcendental loops */
#define CHUNK 512                      /* conversion block (elements) */

/* ---------------------------------------------------------------- conversion */
/* Converts n elements into / out of the compute type; f16 uses F16C, bf16 bit ops. */
static void to_ct(float *restrict dst, const void *src, int dtype, int64_t off, int64_t n) {
  if (dtype == MX_F16) {
    const uint16_t *s = (const uint16_t *)src + off;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) dst[i] = _cvtsh_ss(s[i]);
  } else if (dtype == MX_BF16) {
    const uint16_t *s = (const uint16_t *)src + off;
    for (int64_t i = 0; i < n; i++) {
      uint32_t u = (uint32_t)s[i] << 16;
      memcpy(&dst[i], &u, 4);
    }
  } else {
    mx_convert(dst, MX_F32, (const char *)src + (size_t)off * mx_dtype_size(dtype), dtype, n);
  }
}
static void from_ct(void *dst, int dtype, int64_t off, const float *restrict src, int64_t n) {
  if (dtype == MX_F16) {
    uint16_t *d = (uint16_t *)dst + off;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128((__m128i *)(d + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = mx_f32_to_f16(src[i]);
  } else if (dtype == MX_BF16) {
    uint16_t *d = (uint16_t *)dst + off;
    for (int64_t i = 0; i < n; i++) {
      uint32_t x;
      memcpy(&x, &src[i], 4);
      /* round to nearest even; NaN kept quiet (as mx_f32_to_bf16) */
      uint32_t r = (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x400000u)
                                                  : x + 0x7fffu + ((x >> 16) & 1u);
      d[i] = (uint16_t)(r >> 16);
    }
  } else {
    mx_convert((char *)dst + (size_t)off * mx_dtype_size(dtype), dtype, src, MX_F32, n);
  }
}

/* A whole tensor in compute type ct (a new buffer the caller frees), or NULL+ENOMEM. */
static void *as_ct(const mx_tensor *t, int ct, bool *owned) {
  *owned = false;
  if (t->dtype == ct_dtype[ct]) return mx_ptr(t);
  void *b = malloc((size_t)(t->size ? t->size : 1) * ct_size[ct]);
  if (!b) return NULL;
  *owned = true;
  if (ct == CT_F32) {
    to_ct(b, mx_ptr(t), t->dtype, 0, t->size);
  } else {
    mx_convert(b, ct_dtype[ct], mx_ptr(t), t->dtype, t->size);
  }
  return b;
}

/* ---------------------------------------------------------------- unary */
typedef void (*un_fn)(int64_t n, const void *x, void *y);

#define UN_LOOP(name, T, EXPR, ATTR)                                                      \
  ATTR static void name(int64_t n, const void *xv, void *yv) {                          \
    const T *restrict x = xv;                                                           \
    T *restrict y = yv;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T v = x[i];                                                                       \
      y[i] = (EXPR);                                                                    \
    }                                                                                   \
  }
/* float ops: f32 and f64 expressions */
#define UN_F(op, E32, E64, ATTR)                                                          \
  UN_LOOP(un_##op##_f32, float, E32, ATTR)                                              \
  UN_LOOP(un_##op##_f64, double, E64, ATTR)
/* integer ops: int8/uint8/int32 compute in int64 and saturate on store (as the
 * reference's conversion does); int64 wraps (unsigned arithmetic: no UB) */
#define UN_LOOP_SAT(name, T, LO, HI, EXPR)                                                \
  static void name(int64_t n, const void *xv, void *yv) {                               \
    const T *restrict x = xv;                                                           \
    T *restrict y = yv;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
      int64_t v = x[i];                                                                 \
      int64_t r = (EXPR);                                                               \
      y[i] = (T)(r < (LO) ? (LO) : r > (HI) ? (HI) : r);                                \
    }                                                                                   \
  }
#define UN_I(op, EW, E64)                                                                 \
  UN_LOOP_SAT(un_##op##_i32, int32_t, INT32_MIN, INT32_MAX, EW)                          \
  UN_LOOP_SAT(un_##op##_i8, int8_t, INT8_MIN, INT8_MAX, EW)                              \
  UN_LOOP_SAT(un_##op##_u8, uint8_t, 0, UINT8_MAX, EW)                                   \
  UN_LOOP(un_##op##_i64, int64_t, E64, )

#define NOATTR
UN_F(neg, -v, -v, NOATTR)
UN_F(abs, fabsf(v), fabs(v), NOATTR)
UN_F(sign, (float)((v > 0) - (v < 0)), (double)((v > 0) - (v < 0)), NOATTR)
UN_F(square, v * v, v * v, NOATTR)
/* relu: NaN stays NaN (MXNet): `v <= 0` is false for NaN */
UN_F(relu, v <= 0 ? 0.0f : v, v <= 0 ? 0.0 : v, NOATTR)
UN_F(sqrt, sqrtf(v), sqrt(v), NOATTR)
UN_F(reciprocal, 1.0f / v, 1.0 / v, NOATTR)
UN_F(rsqrt, 1.0f / sqrtf(v), 1.0 / sqrt(v), NOATTR)
UN_F(softsign, v / (1.0f + fabsf(v)), v / (1.0 + fabs(v)), NOATTR)
UN_F(floor, floorf(v), floor(v), NOATTR)
UN_F(ceil, ceilf(v), ceil(v), NOATTR)
UN_F(round, roundf(v), round(v), NOATTR)
UN_F(trunc, truncf(v), trunc(v), NOATTR)
UN_F(logical_not, (float)(v == 0), (double)(v == 0), NOATTR)
UN_F(exp, v_expf(v), v_exp(v), HEAVY)
UN_F(log, v_logf(v), v_log(v), HEAVY)
UN_F(tanh, v_tanhf(v), v_tanh(v), HEAVY)
UN_F(sigmoid, 1.0f / (1.0f + v_expf(-v)), 1.0 / (1.0 + v_exp(-v)), HEAVY)
UN_F(sin, v_sinf(v), v_sin(v), HEAVY)
UN_F(cos, v_cosf(v), v_cos(v), HEAVY)
UN_F(log1p, v_log1pf(v), v_log1p(v), HEAVY)
UN_F(expm1, v_expm1f(v), v_expm1(v), HEAVY)
UN_F(erf, v_erff(v), v_erf(v), HEAVY)
/* softplus without overflow: max(x, 0) + log1p(e^-|x|) */
UN_F(softrelu, (v > 0 ? v : 0.0f) + v_log1pf(v_expf(-fabsf(v))),
     (v > 0 ? v : 0.0) + v_log1p(v_exp(-fabs(v))), HEAVY)

/* neg, abs and square on int8/uint8/int32 wrap modulo 2^bits (MXNet, NumPy: int8
 * -(-128) is -128): the exact int64 result's low bits, stored through the unsigned type of
 * the same width (same representation: no implementation-defined conversion) */
#define UN_LOOP_WRAP(name, T, UT, EXPR)                                                   \
  static void name(int64_t n, const void *xv, void *yv) {                               \
    const T *restrict x = xv;                                                           \
    UT *restrict y = yv;                                                                \
    for (int64_t i = 0; i < n; i++) {                                                   \
      int64_t v = x[i];                                                                 \
      y[i] = (UT)(uint64_t)(EXPR);                                                      \
    }                                                                                   \
  }
#define UN_WRAP(op, EW, E64)                                                              \
  UN_LOOP_WRAP(un_##op##_i32, int32_t, uint32_t, EW)                                     \
  UN_LOOP_WRAP(un_##op##_i8, int8_t, uint8_t, EW)                                        \
  UN_LOOP_WRAP(un_##op##_u8, uint8_t, uint8_t, EW)                                       \
  UN_LOOP(un_##op##_i64, int64_t, E64, )
UN_WRAP(neg, -v, (int64_t)(0ull - (uint64_t)v))
UN_WRAP(abs, v < 0 ? -v : v, v < 0 ? (int64_t)(0ull - (uint64_t)v) : v)
UN_I(sign, (v > 0) - (v < 0), (v > 0) - (v < 0))
UN_WRAP(square, v * v, (int64_t)((uint64_t)v * (uint64_t)v))
UN_I(relu, v > 0 ? v : 0, v > 0 ? v : 0)
UN_I(floor, v, v)
UN_I(logical_not, v == 0, v == 0)

#define TAB_F(op) {un_##op##_f32, un_##op##_f64, NULL, NULL, NULL, NULL}
#define TAB_FI(op) {un_##op##_f32, un_##op##_f64, un_##op##_i32, un_##op##_i64, un_##op##_i8, un_##op##_u8}
/* integer floor/ceil/round/trunc are the identity */
#define TAB_FID(op) {un_##op##_f32, un_##op##_f64, un_floor_i32, un_floor_i64, un_floor_i8, un_floor_u8}

typedef struct {
  un_fn f;
  const void *x;
  void *y;
  size_t xs, ys;          /* element sizes (native path) */
  int xd, yd;             /* dtypes (converting path) */
  un_fn f32;              /* converting path: the f32 loop */
} un_ctx;

static void un_range(int64_t b, int64_t e, void *vc) {
  const un_ctx *c = vc;
  c->f(e - b, (const char *)c->x + (size_t)b * c->xs, (char *)c->y + (size_t)b * c->ys);
}

/* Converting path: chunks through f32 stack buffers. */
static void un_conv_range(int64_t b, int64_t e, void *vc) {
  const un_ctx *c = vc;
  float buf[CHUNK], res[CHUNK];
  for (int64_t i = b; i < e; i += CHUNK) {
    int64_t n = e - i < CHUNK ? e - i : CHUNK;
    to_ct(buf, c->x, c->xd, i, n);
    c->f32(n, buf, res);
    from_ct(c->y, c->yd, i, res, n);
  }
}

static int run_unary(const mx_kctx *ctx, un_fn const tab[CT_N], bool heavy, mx_kernel_fn ref, const void *p,
                     mx_tensor *const *in, mx_tensor *const *out) {
  const mx_tensor *x = in[0], *y = out[0];
  int64_t n = y->size;
  int64_t grain = heavy ? GRAIN_HEAVY : GRAIN_LIGHT;
  if (x->dtype == y->dtype && is_native(x->dtype)) {
    int ct = ct_of(x->dtype);
    un_fn f = tab[ct];
    if (f) {
      if (n < 2 * grain) { /* the small-tensor path: no pool, no context */
        f(n, mx_ptr(x), mx_ptr(y));
        return MX_OK;
      }
      un_ctx c = {f, mx_ptr(x), mx_ptr(y), ct_size[ct], ct_size[ct], 0, 0, NULL};
      mx_parallel_for(n, grain, un_range, &c);
      return MX_OK;
    }
  } else if (tab[CT_F32] && mx_dtype_is_float(y->dtype) && y->dtype != MX_F64 &&
             x->dtype != MX_F64) {
    /* f16/bf16, or an integer input to a float op (result f32) */
    un_ctx c = {NULL, mx_ptr(x), mx_ptr(y), 0, 0, x->dtype, y->dtype, tab[CT_F32]};
    mx_parallel_for(n, grain / 2, un_conv_range, &c);
    return MX_OK;
  }
  return ref(ctx, p, 1, in, 1, out);
}

#define REF_DECL(op) int mx_ref_##op(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
#define UNARY_KERNEL(op, TAB, heavy)                                                      \
  REF_DECL(op)                                                                          \
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    static un_fn const tab[CT_N] = TAB;                                                 \
    return run_unary(ctx, tab, heavy, mx_ref_##op, p, in, out);                             \
  }
UNARY_KERNEL(neg, TAB_FI(neg), false)
UNARY_KERNEL(abs, TAB_FI(abs), false)
UNARY_KERNEL(sign, TAB_FI(sign), false)
UNARY_KERNEL(square, TAB_FI(square), false)
UNARY_KERNEL(relu, TAB_FI(relu), false)
UNARY_KERNEL(sqrt, TAB_F(sqrt), false)
UNARY_KERNEL(reciprocal, TAB_F(reciprocal), false)
UNARY_KERNEL(rsqrt, TAB_F(rsqrt), false)
UNARY_KERNEL(softsign, TAB_F(softsign), false)
UNARY_KERNEL(floor, TAB_FID(floor), false)
UNARY_KERNEL(ceil, TAB_FID(ceil), false)
UNARY_KERNEL(round, TAB_FID(round), false)
UNARY_KERNEL(trunc, TAB_FID(trunc), false)
UNARY_KERNEL(logical_not, TAB_FI(logical_not), false)
UNARY_KERNEL(exp, TAB_F(exp), true)
UNARY_KERNEL(log, TAB_F(log), true)
UNARY_KERNEL(tanh, TAB_F(tanh), true)
UNARY_KERNEL(sigmoid, TAB_F(sigmoid), true)
UNARY_KERNEL(sin, TAB_F(sin), true)
UNARY_KERNEL(cos, TAB_F(cos), true)
UNARY_KERNEL(log1p, TAB_F(log1p), true)
UNARY_KERNEL(expm1, TAB_F(expm1), true)
UNARY_KERNEL(erf, TAB_F(erf), true)
UNARY_KERNEL(softrelu, TAB_F(softrelu), true)

/* ---------------------------------------------------------------- broadcasting plan */
/* Output dims (size-1 dims dropped) with each operand's element stride (0 where it
 * broadcasts); adjacent dims merge when every operand continues contiguously, so
 * same-shape, scalar-like, row and column broadcasts reduce to 1 or 2 dims. */
typedef struct {
  int nd;
  int nops;
  int64_t shape[MX_MAX_DIM];
  int64_t st[3][MX_MAX_DIM];
} bplan;

static void make_plan(bplan *p, int nops, const int *ndim, const int64_t *const *shapes,
                      int ond, const int64_t *oshape) {
  int64_t cur[3] = {1, 1, 1};
  int64_t rs[MX_MAX_DIM], rst[3][MX_MAX_DIM];
  int n = 0;
  p->nops = nops;
  for (int d = ond - 1; d >= 0; d--) {
    int64_t s[3];
    for (int k = 0; k < nops; k++) {
      int id = d - (ond - ndim[k]);
      int64_t dim = id >= 0 ? shapes[k][id] : 1;
      s[k] = dim == 1 ? 0 : cur[k];
      cur[k] *= dim;
    }
    if (oshape[d] == 1) continue;
    bool merge = n > 0;
    for (int k = 0; k < nops && merge; k++)
      if (s[k] != rst[k][n - 1] * rs[n - 1]) merge = false;
    if (merge) {
      rs[n - 1] *= oshape[d];
    } else {
      rs[n] = oshape[d];
      for (int k = 0; k < nops; k++) rst[k][n] = s[k];
      n++;
    }
  }
  if (n == 0) { /* every dim is 1: one element */
    rs[0] = 1;
    for (int k = 0; k < nops; k++) rst[k][0] = 0;
    n = 1;
  }
  p->nd = n;
  for (int i = 0; i < n; i++) { /* reverse into outer-to-inner order */
    p->shape[i] = rs[n - 1 - i];
    for (int k = 0; k < nops; k++) p->st[k][i] = rst[k][n - 1 - i];
  }
}

/* Walks output elements [b, e) in inner runs: calls run(len, offsets, pos, ctx) with
 * each operand's element offset at the run start; the run's inner strides are the
 * plan's last-dim strides. */
typedef void (*run_fn)(int64_t len, const int64_t *off, int64_t pos, const void *ctx);
static void plan_walk(const bplan *p, int64_t b, int64_t e, run_fn run, const void *ctx) {
  int nd = p->nd, in = nd - 1;
  int64_t idx[MX_MAX_DIM], off[3] = {0, 0, 0};
  int64_t r = b;
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = r % p->shape[d];
    r /= p->shape[d];
    for (int k = 0; k < p->nops; k++) off[k] += idx[d] * p->st[k][d];
  }
  int64_t pos = b;
  while (pos < e) {
    int64_t len = p->shape[in] - idx[in];
    if (len > e - pos) len = e - pos;
    run(len, off, pos, ctx);
    pos += len;
    idx[in] += len;
    for (int k = 0; k < p->nops; k++) off[k] += len * p->st[k][in];
    for (int d = in; d > 0 && idx[d] == p->shape[d]; d--) {
      idx[d] = 0;
      idx[d - 1]++;
      for (int k = 0; k < p->nops; k++) off[k] += p->st[k][d - 1] - p->shape[d] * p->st[k][d];
    }
  }
}

/* ---------------------------------------------------------------- binary */
/* sa/sb: 1 when the operand advances along the run, 0 when it is one value. */
typedef void (*bin_fn)(int64_t n, const void *a, int sa, const void *b, int sb, void *y);

#define BIN_LOOP(name, T, EXPR, ATTR)                                                     \
  ATTR static void name(int64_t n, const void *av, int sa, const void *bv, int sb,      \
                        void *yv) {                                                      \
    const T *restrict A = av;                                                           \
    const T *restrict B = bv;                                                           \
    T *restrict Y = yv;                                                                 \
    if (sa && sb) {                                                                     \
      for (int64_t i = 0; i < n; i++) { T a = A[i], b = B[i]; Y[i] = (EXPR); }         \
    } else if (sa) {                                                                    \
      T b = B[0];                                                                       \
      for (int64_t i = 0; i < n; i++) { T a = A[i]; Y[i] = (EXPR); }                   \
    } else if (sb) {                                                                    \
      T a = A[0];                                                                       \
      for (int64_t i = 0; i < n; i++) { T b = B[i]; Y[i] = (EXPR); }                   \
    } else {                                                                            \
      T a = A[0], b = B[0];                                                             \
      T r = (EXPR);                                                                     \
      for (int64_t i = 0; i < n; i++) Y[i] = r;                                         \
    }                                                                                   \
  }
#define BIN_F(op, E32, E64, ATTR)                                                         \
  BIN_LOOP(bin_##op##_f32, float, E32, ATTR)                                            \
  BIN_LOOP(bin_##op##_f64, double, E64, ATTR)
/* int8/uint8/int32: computed in int64, saturated on store (the reference's rule);
 * int64: wraps (unsigned arithmetic, no undefined behaviour) */
#define SAT_I(T, r, LO, HI) (T)((r) < (LO) ? (LO) : (r) > (HI) ? (HI) : (r))
#define BIN_LOOP_SAT(name, T, LO, HI, EXPR)                                               \
  static void name(int64_t n, const void *av, int sa, const void *bv, int sb, void *yv) { \
    const T *restrict A = av;                                                           \
    const T *restrict B = bv;                                                           \
    T *restrict Y = yv;                                                                 \
    if (sa && sb) {                                                                     \
      for (int64_t i = 0; i < n; i++) {                                                 \
        int64_t a = A[i], b = B[i], r = (EXPR);                                         \
        Y[i] = SAT_I(T, r, LO, HI);                                                     \
      }                                                                                 \
    } else if (sa) {                                                                    \
      int64_t b = B[0];                                                                 \
      for (int64_t i = 0; i < n; i++) {                                                 \
        int64_t a = A[i], r = (EXPR);                                                   \
        Y[i] = SAT_I(T, r, LO, HI);                                                     \
      }                                                                                 \
    } else {                                                                            \
      int64_t a = A[0];                                                                 \
      for (int64_t i = 0; i < n; i++) {                                                 \
        int64_t b = B[sb ? i : 0], r = (EXPR);                                          \
        Y[i] = SAT_I(T, r, LO, HI);                                                     \
      }                                                                                 \
    }                                                                                   \
  }
#define BIN_I(op, EW, E64)                                                                \
  BIN_LOOP_SAT(bin_##op##_i32, int32_t, INT32_MIN, INT32_MAX, EW)                        \
  BIN_LOOP_SAT(bin_##op##_i8, int8_t, INT8_MIN, INT8_MAX, EW)                            \
  BIN_LOOP_SAT(bin_##op##_u8, uint8_t, 0, UINT8_MAX, EW)                                 \
  BIN_LOOP(bin_##op##_i64, int64_t, E64, )

/* maximum/minimum: NaN in either operand gives NaN (NumPy) */
#define F_MAX(a, b) ((a) != (a) ? (a) : (a) >= (b) ? (a) : (b))
#define F_MIN(a, b) ((a) != (a) ? (a) : (a) <= (b) ? (a) : (b))
BIN_F(add, a + b, a + b, NOATTR)
BIN_F(sub, a - b, a - b, NOATTR)
BIN_F(mul, a * b, a * b, NOATTR)
BIN_F(div, a / b, a / b, NOATTR)
BIN_F(pow, v_powf(a, b), v_pow(a, b), HEAVY)
BIN_F(maximum, F_MAX(a, b), F_MAX(a, b), NOATTR)
BIN_F(minimum, F_MIN(a, b), F_MIN(a, b), NOATTR)
BIN_F(equal, (float)(a == b), (double)(a == b), NOATTR)
BIN_F(not_equal, (float)(a != b), (double)(a != b), NOATTR)
BIN_F(greater, (float)(a > b), (double)(a > b), NOATTR)
BIN_F(greater_equal, (float)(a >= b), (double)(a >= b), NOATTR)
BIN_F(lesser, (float)(a < b), (double)(a < b), NOATTR)
BIN_F(lesser_equal, (float)(a <= b), (double)(a <= b), NOATTR)
/* relu's gradient (ograd, data): a * (b > 0), one pass instead of greater_scalar then mul.
 * GCC turns a comparison with a constant into a branch and then cannot vectorize the
 * loop (measured: 13x slower than mul on random signs), so the float32 loop over two
 * running operands (the backward's case) is written with AVX2 intrinsics. */
/* A NaN data gives a NaN gradient (MXNet's relu_grad is NaN at NaN): the factor is b. */
#define RELU_BW(a, b) ((a) * ((b) > 0 ? 1.0f : (b) != (b) ? (b) : 0.0f))
BIN_LOOP(bin_relu_backward_f32_generic, float, RELU_BW(a, b), NOATTR)
static void bin_relu_backward_f32(int64_t n, const void *av, int sa, const void *bv, int sb,
                                  void *yv) {
  if (!(sa && sb)) {
    bin_relu_backward_f32_generic(n, av, sa, bv, sb, yv);
    return;
  }
  const float *A = av, *B = bv;
  float *Y = yv;
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 b = _mm256_loadu_ps(B + i);
    /* factor: 1 where b > 0, b itself (NaN) where b is NaN, else 0 */
    __m256 m = _mm256_or_ps(_mm256_and_ps(_mm256_cmp_ps(b, zero, _CMP_GT_OQ), one),
                            _mm256_and_ps(_mm256_cmp_ps(b, b, _CMP_UNORD_Q), b));
    _mm256_storeu_ps(Y + i, _mm256_mul_ps(_mm256_loadu_ps(A + i), m));
  }
  for (; i < n; i++) Y[i] = RELU_BW(A[i], B[i]);
}
BIN_LOOP(bin_relu_backward_f64, double, a * (b > 0 ? 1.0 : b != b ? b : 0.0), NOATTR)

/* integer division truncates; by zero gives 0; INT64_MIN / -1 wraps, never traps */
/* add/sub/mul on int8/uint8/int32 wrap modulo 2^bits (MXNet, NumPy: uint8 3 - 5 is 254):
 * computed on the unsigned type of the same width (same representation, so the int8 and
 * int32 buffers are read and written through it), promoted to uint32: no signed overflow */
#define BIN_WRAP(op, EXPR)                                                                \
  BIN_LOOP(bin_##op##_i32, uint32_t, (uint32_t)(EXPR), NOATTR)                          \
  BIN_LOOP(bin_##op##_i8, uint8_t, (uint8_t)(EXPR), NOATTR)                             \
  BIN_LOOP(bin_##op##_u8, uint8_t, (uint8_t)(EXPR), NOATTR)                             \
  BIN_LOOP(bin_##op##_i64, int64_t, (int64_t)((uint64_t)a EXPR_OP_##op (uint64_t)b), NOATTR)
#define EXPR_OP_add +
#define EXPR_OP_sub -
#define EXPR_OP_mul *
BIN_WRAP(add, (uint32_t)a + (uint32_t)b)
BIN_WRAP(sub, (uint32_t)a - (uint32_t)b)
BIN_WRAP(mul, (uint32_t)a * (uint32_t)b)
BIN_I(div, b == 0 ? 0 : a / b, b == 0 ? 0 : b == -1 ? (int64_t)(0ull - (uint64_t)a) : a / b)
BIN_I(maximum, a >= b ? a : b, a >= b ? a : b)
BIN_I(minimum, a <= b ? a : b, a <= b ? a : b)
BIN_I(equal, a == b, a == b)
BIN_I(not_equal, a != b, a != b)
BIN_I(greater, a > b, a > b)
BIN_I(greater_equal, a >= b, a >= b)
BIN_I(lesser, a < b, a < b)
BIN_I(lesser_equal, a <= b, a <= b)
BIN_I(relu_backward, b > 0 ? a : 0, b > 0 ? a : 0)

#define BTAB_F(op) {bin_##op##_f32, bin_##op##_f64, NULL, NULL, NULL, NULL}
#define BTAB_FI(op) {bin_##op##_f32, bin_##op##_f64, bin_##op##_i32, bin_##op##_i64, bin_##op##_i8, bin_##op##_u8}

typedef struct {
  bin_fn f;
  bplan plan;
  const char *a, *b;
  char *y;
  size_t es;
} bin_ctx;

static void bin_run(int64_t len, const int64_t *off, int64_t pos, const void *vc) {
  const bin_ctx *c = vc;
  int in = c->plan.nd - 1;
  c->f(len, c->a + (size_t)off[0] * c->es, c->plan.st[0][in] != 0, c->b + (size_t)off[1] * c->es,
       c->plan.st[1][in] != 0, c->y + (size_t)pos * c->es);
}
static void bin_range(int64_t b, int64_t e, void *vc) {
  plan_walk(&((const bin_ctx *)vc)->plan, b, e, bin_run, vc);
}

static int run_binary(const mx_kctx *ctx, bin_fn const tab[CT_N], bool heavy, mx_kernel_fn ref, const void *p,
                      mx_tensor *const *in, mx_tensor *const *out) {
  const mx_tensor *a = in[0], *b = in[1], *y = out[0];
  int64_t n = y->size;
  int ct = ct_of(y->dtype);
  bin_fn f = tab[ct];
  if (!f || n == 0) return n == 0 ? MX_OK : ref(ctx, p, 2, in, 1, out);
  size_t es = ct_size[ct];
  int64_t grain = heavy ? GRAIN_HEAVY : GRAIN_LIGHT;
  bool direct = a->dtype == y->dtype && b->dtype == y->dtype && is_native(y->dtype);
  /* the hot path: same shape or a one-element operand, native dtype, small */
  if (direct && n < 2 * grain) {
    if (a->size == n && b->size == n) {
      f(n, mx_ptr(a), 1, mx_ptr(b), 1, mx_ptr(y));
      return MX_OK;
    }
    if (b->size == 1 && a->size == n) {
      f(n, mx_ptr(a), 1, mx_ptr(b), 0, mx_ptr(y));
      return MX_OK;
    }
    if (a->size == 1 && b->size == n) {
      f(n, mx_ptr(a), 0, mx_ptr(b), 1, mx_ptr(y));
      return MX_OK;
    }
  }
  bin_ctx c;
  c.f = f;
  c.es = es;
  int nds[2] = {a->ndim, b->ndim};
  const int64_t *shp[2] = {a->shape, b->shape};
  make_plan(&c.plan, 2, nds, shp, y->ndim, y->shape);
  bool oa = false, ob = false;
  void *ya = NULL;
  c.a = as_ct(a, ct, &oa);
  c.b = as_ct(b, ct, &ob);
  bool ynat = y->dtype == ct_dtype[ct];
  c.y = ynat ? mx_ptr(y) : (ya = malloc((size_t)n * es));
  int rc = MX_OK;
  if (!c.a || !c.b || !c.y) {
    rc = mx_err(MX_ENOMEM, "binary op: out of memory for a %lld-element temporary", (long long)n);
  } else {
    mx_parallel_for(n, grain, bin_range, &c);
    if (!ynat && ct == CT_F32) from_ct(mx_ptr(y), y->dtype, 0, (const float *)c.y, n);
    else if (!ynat) mx_convert(mx_ptr(y), y->dtype, c.y, ct_dtype[ct], n);
  }
  if (oa) free((void *)c.a);
  if (ob) free((void *)c.b);
  free(ya);
  return rc;
}

#define BINARY_KERNEL(op, TAB, heavy)                                                     \
  REF_DECL(op)                                                                          \
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    static bin_fn const tab[CT_N] = TAB;                                                \
    return run_binary(ctx, tab, heavy, mx_ref_##op, p, in, out);                            \
  }
BINARY_KERNEL(add, BTAB_FI(add), false)
BINARY_KERNEL(sub, BTAB_FI(sub), false)
BINARY_KERNEL(mul, BTAB_FI(mul), false)
BINARY_KERNEL(div, BTAB_FI(div), false)
BINARY_KERNEL(pow, BTAB_F(pow), true)
BINARY_KERNEL(maximum, BTAB_FI(maximum), false)
BINARY_KERNEL(minimum, BTAB_FI(minimum), false)
BINARY_KERNEL(equal, BTAB_FI(equal), false)
BINARY_KERNEL(not_equal, BTAB_FI(not_equal), false)
BINARY_KERNEL(greater, BTAB_FI(greater), false)
BINARY_KERNEL(greater_equal, BTAB_FI(greater_equal), false)
BINARY_KERNEL(lesser, BTAB_FI(lesser), false)
BINARY_KERNEL(lesser_equal, BTAB_FI(lesser_equal), false)
BINARY_KERNEL(relu_backward, BTAB_FI(relu_backward), false)

/* ---------------------------------------------------------------- scalar forms */
/* x op s computed in double and rounded once into the tensor's dtype, exactly as the
 * reference does (so 0.1 means 0.1, not 0.1f, and int32 x > 2.5 is right); integer
 * results saturate like mx_store_f64. */
typedef void (*sc_fn)(int64_t n, const void *x, double s, void *y);

/* int64 tensors stay exact at every magnitude (a double holds integers exactly only to
 * 2^53): comparisons, maximum and minimum compare the int64 with the double exactly;
 * arithmetic with an integral in-range scalar runs in int64 with two's-complement
 * wrap-around (through uint64: no signed overflow); other scalars go through double
 * (docs/ops-notes.md, "int64 exactness"). */
#define I64_LIM 9223372036854775808.0 /* 2^63, exact in double */
static inline bool i64_of(double s, int64_t *k) {
  if (!(s >= -I64_LIM && s < I64_LIM) || s != floor(s)) return false;
  *k = (int64_t)s;
  return true;
}
/* exact order of v and s: -1, 0, 1, or 2 when s is NaN */
static inline int i64_cmp(int64_t v, double s) {
  if (s != s) return 2;
  if (s >= I64_LIM) return -1;
  if (s < -I64_LIM) return 1;
  double f = floor(s);
  int64_t k = (int64_t)f;
  if (v != k) return v < k ? -1 : 1;
  return s == f ? 0 : -1;
}
static inline int64_t i64_sat(double r) {
  if (r != r) return 0;
  if (r >= I64_LIM) return INT64_MAX;
  if (r <= -I64_LIM) return INT64_MIN;
  return (int64_t)r;
}
static inline int64_t i64_idiv(int64_t a, int64_t b) {
  return b == 0 ? 0 : b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;
}

#define SAT(T, r, lo, hi) ((r) != (r) ? (T)0 : (r) <= (lo) ? (T)(lo) : (r) >= (hi) ? (T)(hi) : (T)(r))
#define SC_LOOP(name, T, EXPR, STORE, ATTR)                                               \
  ATTR static void name(int64_t n, const void *xv, double s, void *yv) {                \
    const T *restrict x = xv;                                                           \
    T *restrict y = yv;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
      double v = (double)x[i];                                                          \
      double r = (EXPR);                                                                \
      y[i] = STORE;                                                                     \
    }                                                                                   \
  }
#define SC_ALL(op, EXPR, ATTR)                                                            \
  SC_LOOP(sc_##op##_f32, float, EXPR, (float)r, ATTR)                                   \
  SC_LOOP(sc_##op##_f64, double, EXPR, r, ATTR)                                         \
  SC_LOOP(sc_##op##_i32, int32_t, EXPR, SAT(int32_t, r, -2147483648.0, 2147483647.0), ATTR) \
  SC_LOOP(sc_##op##_i8, int8_t, EXPR, SAT(int8_t, r, -128.0, 127.0), ATTR)              \
  SC_LOOP(sc_##op##_u8, uint8_t, EXPR, SAT(uint8_t, r, 0.0, 255.0), ATTR)
#define IDIV(a, b) ((b) == 0 ? 0.0 : trunc((a) / (b)))
/* add/sub/rsub/mul: floats as SC_ALL; int8/uint8/int32 below (sc_wrap_*) */
#define SC_ARITH(op, EXPR)                                                                \
  SC_LOOP(sc_##op##_f32, float, EXPR, (float)r, NOATTR)                                 \
  SC_LOOP(sc_##op##_f64, double, EXPR, r, NOATTR)                                       \
  SC_LOOP(sc_##op##_i32_dbl, int32_t, EXPR, SAT(int32_t, r, -2147483648.0, 2147483647.0), NOATTR) \
  SC_LOOP(sc_##op##_i8_dbl, int8_t, EXPR, SAT(int8_t, r, -128.0, 127.0), NOATTR)        \
  SC_LOOP(sc_##op##_u8_dbl, uint8_t, EXPR, SAT(uint8_t, r, 0.0, 255.0), NOATTR)
SC_ARITH(add_scalar, v + s)
SC_ARITH(sub_scalar, v - s)
SC_ARITH(rsub_scalar, s - v)
SC_ARITH(mul_scalar, v * s)
SC_ALL(maximum_scalar, s != s ? s : F_MAX(v, s), NOATTR)
SC_ALL(minimum_scalar, s != s ? s : F_MIN(v, s), NOATTR)
SC_ALL(equal_scalar, (double)(v == s), NOATTR)
SC_ALL(not_equal_scalar, (double)(v != s), NOATTR)
SC_ALL(greater_scalar, (double)(v > s), NOATTR)
SC_ALL(greater_equal_scalar, (double)(v >= s), NOATTR)
SC_ALL(lesser_scalar, (double)(v < s), NOATTR)
SC_ALL(lesser_equal_scalar, (double)(v <= s), NOATTR)
SC_ALL(pow_scalar, s == 2 ? v * v : v_pow(v, s), HEAVY)
SC_ALL(rpow_scalar, v_pow(s, v), HEAVY)
/* int64 through double: the fallbacks of the exact int64 forms below */
SC_LOOP(sc_add_scalar_i64_dbl, int64_t, v + s, i64_sat(r), NOATTR)
SC_LOOP(sc_sub_scalar_i64_dbl, int64_t, v - s, i64_sat(r), NOATTR)
SC_LOOP(sc_rsub_scalar_i64_dbl, int64_t, s - v, i64_sat(r), NOATTR)
SC_LOOP(sc_mul_scalar_i64_dbl, int64_t, v * s, i64_sat(r), NOATTR)
SC_LOOP(sc_pow_scalar_i64_dbl, int64_t, s == 2 ? v * v : v_pow(v, s), i64_sat(r), HEAVY)
SC_LOOP(sc_rpow_scalar_i64_dbl, int64_t, v_pow(s, v), i64_sat(r), HEAVY)
/* division: floats divide, integers truncate (by zero: 0) */
SC_LOOP(sc_div_scalar_f32, float, v / s, (float)r, )
SC_LOOP(sc_div_scalar_f64, double, v / s, r, )
SC_LOOP(sc_rdiv_scalar_f32, float, s / v, (float)r, )
SC_LOOP(sc_rdiv_scalar_f64, double, s / v, r, )
#define SC_INT(op, EXPR)                                                                  \
  SC_LOOP(sc_##op##_i32, int32_t, EXPR, SAT(int32_t, r, -2147483648.0, 2147483647.0), ) \
  SC_LOOP(sc_##op##_i64_dbl, int64_t, EXPR, i64_sat(r), )                                \
  SC_LOOP(sc_##op##_i8, int8_t, EXPR, SAT(int8_t, r, -128.0, 127.0), )                  \
  SC_LOOP(sc_##op##_u8, uint8_t, EXPR, SAT(uint8_t, r, 0.0, 255.0), )
SC_INT(div_scalar, IDIV(v, s))
SC_INT(rdiv_scalar, IDIV(s, v))

/* int64 arithmetic: exact when s is an in-range integer, else through double */
#define SC_I64_ARITH(op, IEXPR)                                                           \
  static void sc_##op##_i64(int64_t n, const void *xv, double s, void *yv) {            \
    const int64_t *restrict x = xv;                                                     \
    int64_t *restrict y = yv;                                                           \
    int64_t k;                                                                          \
    if (!i64_of(s, &k)) { sc_##op##_i64_dbl(n, xv, s, yv); return; }                    \
    uint64_t K = (uint64_t)k;                                                           \
    (void)K;                                                                            \
    for (int64_t i = 0; i < n; i++) {                                                   \
      int64_t v = x[i];                                                                 \
      uint64_t V = (uint64_t)v;                                                         \
      (void)V;                                                                          \
      y[i] = (IEXPR);                                                                   \
    }                                                                                   \
  }
/* int8/uint8/int32 arithmetic with an integral in-range s wraps modulo 2^bits as MXNet
 * and NumPy do (uint8 250 + 6 is 0): computed on the unsigned type of the same width,
 * stored through it (same representation: no signed overflow, no implementation-defined
 * conversion); a non-integral s goes through double and saturates */
#define SC_WRAP(name, UT, EXPR)                                                           \
  static void sc_##name(int64_t n, const void *xv, double s, void *yv) {                \
    int64_t k;                                                                          \
    if (!i64_of(s, &k)) { sc_##name##_dbl(n, xv, s, yv); return; }                      \
    const UT *restrict x = xv;                                                          \
    UT *restrict y = yv;                                                                \
    uint32_t K = (uint32_t)(uint64_t)k;                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
      uint32_t V = x[i];                                                                \
      y[i] = (UT)(EXPR);                                                                \
    }                                                                                   \
  }
#define SC_WRAP_ALL(op, EXPR)                                                             \
  SC_WRAP(op##_i32, uint32_t, EXPR)                                                     \
  SC_WRAP(op##_i8, uint8_t, EXPR)                                                       \
  SC_WRAP(op##_u8, uint8_t, EXPR)
SC_WRAP_ALL(add_scalar, V + K)
SC_WRAP_ALL(sub_scalar, V - K)
SC_WRAP_ALL(rsub_scalar, K - V)
SC_WRAP_ALL(mul_scalar, V * K)
SC_I64_ARITH(add_scalar, (int64_t)(V + K))
SC_I64_ARITH(sub_scalar, (int64_t)(V - K))
SC_I64_ARITH(rsub_scalar, (int64_t)(K - V))
SC_I64_ARITH(mul_scalar, (int64_t)(V * K))
SC_I64_ARITH(div_scalar, i64_idiv(v, k))
SC_I64_ARITH(rdiv_scalar, i64_idiv(k, v))
/* int64 comparisons, maximum, minimum: exact for every double s (c: i64_cmp(v, s)) */
#define SC_I64_CMP(op, CEXPR)                                                             \
  static void sc_##op##_i64(int64_t n, const void *xv, double s, void *yv) {            \
    const int64_t *restrict x = xv;                                                     \
    int64_t *restrict y = yv;                                                           \
    int64_t ts = i64_sat(s);                                                            \
    (void)ts;                                                                           \
    for (int64_t i = 0; i < n; i++) {                                                   \
      int64_t v = x[i];                                                                 \
      int c = i64_cmp(v, s);                                                            \
      y[i] = (CEXPR);                                                                   \
    }                                                                                   \
  }
/* NaN wins (stored as 0, as any NaN into an integer); else the larger, truncated */
SC_I64_CMP(maximum_scalar, c == 2 ? 0 : c >= 0 ? v : ts)
SC_I64_CMP(minimum_scalar, c == 2 ? 0 : c <= 0 ? v : ts)
SC_I64_CMP(equal_scalar, c == 0)
SC_I64_CMP(not_equal_scalar, c != 0)
SC_I64_CMP(greater_scalar, c == 1)
SC_I64_CMP(greater_equal_scalar, c == 0 || c == 1)
SC_I64_CMP(lesser_scalar, c == -1)
SC_I64_CMP(lesser_equal_scalar, c == -1 || c == 0)
/* pow with an integral in-range s: b^e by squaring, wrapping mod 2^64 (through uint64);
 * a negative e gives 0 except for |b| == 1, as integer division would (docs/ops-notes.md) */
static inline int64_t i64_ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? (((uint64_t)e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  for (uint64_t m = (uint64_t)e; m; m >>= 1) {
    if (m & 1) r *= x;
    x *= x;
  }
  return (int64_t)r;
}
SC_I64_ARITH(pow_scalar, i64_ipow(v, k))
SC_I64_ARITH(rpow_scalar, i64_ipow(k, v))

#define STAB(op) {sc_##op##_f32, sc_##op##_f64, sc_##op##_i32, sc_##op##_i64, sc_##op##_i8, sc_##op##_u8}

typedef struct {
  sc_fn f;
  double s;
  const void *x;
  void *y;
  size_t es;
  int xd, yd;
} sc_ctx;

static void sc_range(int64_t b, int64_t e, void *vc) {
  const sc_ctx *c = vc;
  c->f(e - b, (const char *)c->x + (size_t)b * c->es, c->s, (char *)c->y + (size_t)b * c->es);
}
static void sc_conv_range(int64_t b, int64_t e, void *vc) {
  const sc_ctx *c = vc;
  float buf[CHUNK], res[CHUNK];
  for (int64_t i = b; i < e; i += CHUNK) {
    int64_t n = e - i < CHUNK ? e - i : CHUNK;
    to_ct(buf, c->x, c->xd, i, n);
    c->f(n, buf, c->s, res);
    from_ct(c->y, c->yd, i, res, n);
  }
}

static int run_scalar(sc_fn const tab[CT_N], bool heavy, const void *p, mx_tensor *const *in,
                      mx_tensor *const *out) {
  const mx_tensor *x = in[0], *y = out[0];
  double s = ((const struct mx_params_add_scalar *)p)->scalar;
  int64_t n = y->size, grain = heavy ? GRAIN_HEAVY : GRAIN_LIGHT;
  int ct = ct_of(y->dtype);
  sc_ctx c = {tab[ct], s, mx_ptr(x), mx_ptr(y), ct_size[ct], x->dtype, y->dtype};
  if (is_native(x->dtype)) {
    if (n < 2 * grain) c.f(n, c.x, s, c.y);
    else mx_parallel_for(n, grain, sc_range, &c);
  } else {
    mx_parallel_for(n, grain / 2, sc_conv_range, &c);
  }
  return MX_OK;
}

/* every *_scalar params struct is {double scalar;}: the same layout as add_scalar's */
#define SCALAR_KERNEL(op, heavy)                                                          \
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    static sc_fn const tab[CT_N] = STAB(op);                                            \
    return run_scalar(tab, heavy, p, in, out);                                          \
  }
SCALAR_KERNEL(add_scalar, false)
SCALAR_KERNEL(sub_scalar, false)
SCALAR_KERNEL(rsub_scalar, false)
SCALAR_KERNEL(mul_scalar, false)
SCALAR_KERNEL(div_scalar, false)
SCALAR_KERNEL(rdiv_scalar, false)
SCALAR_KERNEL(pow_scalar, true)
SCALAR_KERNEL(rpow_scalar, true)
SCALAR_KERNEL(maximum_scalar, false)
SCALAR_KERNEL(minimum_scalar, false)
SCALAR_KERNEL(equal_scalar, false)
SCALAR_KERNEL(not_equal_scalar, false)
SCALAR_KERNEL(greater_scalar, false)
SCALAR_KERNEL(greater_equal_scalar, false)
SCALAR_KERNEL(lesser_scalar, false)
SCALAR_KERNEL(lesser_equal_scalar, false)

/* ---------------------------------------------------------------- clip */
/* clip: x -> same shape/dtype; bounds as doubles (absent: +-inf); NaN stays NaN */
#define CLIP_LOOP(name, T, STORE)                                                         \
  static void name(int64_t n, const void *xv, double lo, double hi, void *yv) {         \
    const T *restrict x = xv;                                                           \
    T *restrict y = yv;                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                   \
      double r = (double)x[i];                                                          \
      r = r < lo ? lo : r;                                                              \
      r = r > hi ? hi : r;                                                              \
      y[i] = STORE;                                                                     \
    }                                                                                   \
  }
CLIP_LOOP(clip_f32, float, (float)r)
CLIP_LOOP(clip_f64, double, r)
CLIP_LOOP(clip_i32, int32_t, SAT(int32_t, r, -2147483648.0, 2147483647.0))
/* int64: compared exactly, never rounded through double */
static void clip_i64(int64_t n, const void *xv, double lo, double hi, void *yv) {
  const int64_t *restrict x = xv;
  int64_t *restrict y = yv;
  int64_t tlo = i64_sat(lo), thi = i64_sat(hi);
  for (int64_t i = 0; i < n; i++) {
    int64_t v = x[i];
    if (i64_cmp(v, lo) == -1) v = tlo;
    if (i64_cmp(v, hi) == 1) v = thi;
    y[i] = v;
  }
}
CLIP_LOOP(clip_i8, int8_t, SAT(int8_t, r, -128.0, 127.0))
CLIP_LOOP(clip_u8, uint8_t, SAT(uint8_t, r, 0.0, 255.0))
typedef void (*clip_fn)(int64_t, const void *, double, double, void *);

typedef struct {
  clip_fn f;
  double lo, hi;
  const void *x;
  void *y;
  size_t es;
  int xd, yd;
} clip_ctx;
static void clip_range(int64_t b, int64_t e, void *vc) {
  const clip_ctx *c = vc;
  c->f(e - b, (const char *)c->x + (size_t)b * c->es, c->lo, c->hi,
       (char *)c->y + (size_t)b * c->es);
}
static void clip_conv_range(int64_t b, int64_t e, void *vc) {
  const clip_ctx *c = vc;
  float buf[CHUNK], res[CHUNK];
  for (int64_t i = b; i < e; i += CHUNK) {
    int64_t n = e - i < CHUNK ? e - i : CHUNK;
    to_ct(buf, c->x, c->xd, i, n);
    c->f(n, buf, c->lo, c->hi, res);
    from_ct(c->y, c->yd, i, res, n);
  }
}

int mx_cpu_clip(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  static clip_fn const tab[CT_N] = {clip_f32, clip_f64, clip_i32, clip_i64, clip_i8, clip_u8};
  const struct mx_params_clip *cp = p;
  const mx_tensor *x = in[0], *y = out[0];
  int ct = ct_of(y->dtype);
  clip_ctx c = {tab[ct], cp->has_a_min ? cp->a_min : -INFINITY,
                cp->has_a_max ? cp->a_max : INFINITY, mx_ptr(x), mx_ptr(y), ct_size[ct],
                x->dtype, y->dtype};
  if (is_native(x->dtype)) {
    if (y->size < 2 * GRAIN_LIGHT) c.f(y->size, c.x, c.lo, c.hi, c.y);
    else mx_parallel_for(y->size, GRAIN_LIGHT, clip_range, &c);
  } else {
    mx_parallel_for(y->size, GRAIN_LIGHT / 2, clip_conv_range, &c);
  }
  return MX_OK;
}

/* ---------------------------------------------------------------- broadcast_to/like */
/* data -> out (broadcast), same dtype: element copies by size, stride 0 or 1 */
typedef struct {
  bplan plan;
  const char *x;
  char *y;
  size_t es;
} bc_ctx;

static void bc_run(int64_t len, const int64_t *off, int64_t pos, const void *vc) {
  const bc_ctx *c = vc;
  const char *src = c->x + (size_t)off[0] * c->es;
  char *dst = c->y + (size_t)pos * c->es;
  if (c->plan.st[0][c->plan.nd - 1] != 0) {
    memcpy(dst, src, (size_t)len * c->es);
    return;
  }
  switch (c->es) { /* one value repeated */
  case 1: memset(dst, *src, (size_t)len); break;
  case 2: { uint16_t v; memcpy(&v, src, 2); for (int64_t i = 0; i < len; i++) ((uint16_t *)dst)[i] = v; } break;
  case 4: { uint32_t v; memcpy(&v, src, 4); for (int64_t i = 0; i < len; i++) ((uint32_t *)dst)[i] = v; } break;
  default: { uint64_t v; memcpy(&v, src, 8); for (int64_t i = 0; i < len; i++) ((uint64_t *)dst)[i] = v; } break;
  }
}
static void bc_range(int64_t b, int64_t e, void *vc) {
  plan_walk(&((const bc_ctx *)vc)->plan, b, e, bc_run, vc);
}

static int bcast(const mx_tensor *x, const mx_tensor *y, int xnd, const int64_t *xshape) {
  if (y->size == 0) return MX_OK;
  bc_ctx c;
  const int64_t *shp[1] = {xshape};
  make_plan(&c.plan, 1, &xnd, shp, y->ndim, y->shape);
  c.x = mx_ptr(x);
  c.y = mx_ptr(y);
  c.es = mx_dtype_size(y->dtype);
  mx_parallel_for(y->size, GRAIN_LIGHT, bc_range, &c);
  return MX_OK;
}

int mx_cpu_broadcast_to(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return bcast(in[0], out[0], in[0]->ndim, in[0]->shape);
}

int mx_cpu_broadcast_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  (void)nin; (void)nout;
  (void)p; /* data's dims on like's rank: inference resolved the axis param */
  return bcast(in[0], out[0], ctx->info.align_ndim, ctx->info.align);
}

/* ---------------------------------------------------------------- where */
/* where(cond, x, y): cond as a uint8 nonzero mask, x and y in the result's compute
 * type, walked by one 3-operand plan (cond on its aligned dims: a 1-D cond repeats along
 * the inner axes); strides 0/1 per operand along each run. */
#define WHERE_LOOP(name, T)                                                               \
  static void name(int64_t n, const void *cv, int sc, const void *xv, int sx,           \
                   const void *yv, int sy, void *ov) {                                  \
    const uint8_t *c = cv;                                                              \
    const T *x = xv, *y = yv;                                                           \
    T *o = ov;                                                                          \
    for (int64_t i = 0; i < n; i++)                                                     \
      o[i] = c[sc ? i : 0] != 0 ? x[sx ? i : 0] : y[sy ? i : 0];                        \
  }
WHERE_LOOP(where_f32, float)
WHERE_LOOP(where_f64, double)
WHERE_LOOP(where_i32, int32_t)
WHERE_LOOP(where_i64, int64_t)
WHERE_LOOP(where_i8, int8_t)
WHERE_LOOP(where_u8, uint8_t)
typedef void (*where_fn)(int64_t, const void *, int, const void *, int, const void *, int,
                         void *);

typedef struct {
  where_fn f;
  bplan plan;
  const char *p[3];
  char *y;
  size_t es;
} where_ctx;

static void where_run(int64_t len, const int64_t *off, int64_t pos, const void *vc) {
  const where_ctx *c = vc;
  int in = c->plan.nd - 1;
  c->f(len, c->p[0] + (size_t)off[0], c->plan.st[0][in] != 0,
       c->p[1] + (size_t)off[1] * c->es, c->plan.st[1][in] != 0,
       c->p[2] + (size_t)off[2] * c->es, c->plan.st[2][in] != 0, c->y + (size_t)pos * c->es);
}
static void where_range(int64_t b, int64_t e, void *vc) {
  plan_walk(&((const where_ctx *)vc)->plan, b, e, where_run, vc);
}

int mx_cpu_where(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  static where_fn const tab[CT_N] = {where_f32, where_f64, where_i32, where_i64, where_i8,
                                     where_u8};
  const mx_tensor *y = out[0];
  int64_t n = y->size;
  if (n == 0) return MX_OK;
  int ct = ct_of(y->dtype);
  where_ctx c;
  c.f = tab[ct];
  c.es = ct_size[ct];
  /* cond through its dims aligned on x's rank (infer: a 1-D cond picks rows) */
  int nds[3] = {ctx->info.align_ndim, in[1]->ndim, in[2]->ndim};
  const int64_t *shp[3] = {ctx->info.align, in[1]->shape, in[2]->shape};
  make_plan(&c.plan, 3, nds, shp, y->ndim, y->shape);
  bool owned[3] = {false, false, false};
  int rc = MX_OK;
  const mx_tensor *cond = in[0];
  if (cond->dtype == MX_U8 || cond->dtype == MX_BOOL) {
    c.p[0] = mx_ptr(cond);
  } else {
    uint8_t *m = malloc((size_t)(cond->size ? cond->size : 1));
    if (m) {
      for (int64_t i = 0; i < cond->size; i++) m[i] = mx_load_f64(mx_ptr(cond), cond->dtype, i) != 0;
      owned[0] = true;
    }
    c.p[0] = (const char *)m;
  }
  for (int k = 0; k < 3; k++) {
    if (k > 0) c.p[k] = as_ct(in[k], ct, &owned[k]);
    if (!c.p[k]) rc = mx_err(MX_ENOMEM, "where: out of memory");
  }
  bool ynat = y->dtype == ct_dtype[ct];
  void *tmp = NULL;
  c.y = ynat ? mx_ptr(y) : (tmp = malloc((size_t)n * c.es));
  if (!c.y) rc = mx_err(MX_ENOMEM, "where: out of memory");
  if (rc == MX_OK) {
    mx_parallel_for(n, GRAIN_LIGHT, where_range, &c);
    if (!ynat && ct == CT_F32) from_ct(mx_ptr(y), y->dtype, 0, (const float *)c.y, n);
    else if (!ynat) mx_convert(mx_ptr(y), y->dtype, c.y, ct_dtype[ct], n);
  }
  for (int k = 0; k < 3; k++) if (owned[k]) free((void *)c.p[k]);
  free(tmp);
  return rc;
}

/* ---------------------------------------------------------------- issue 14 unary ops
 * (owner: ew) scalar libm loops for f32/f64 (integers, f16, bf16 convert or go to the
 * reference); the predicates give 1 or 0 in the input dtype */
UN_F(tan, tanf(v), tan(v), HEAVY)
UN_F(arcsin, asinf(v), asin(v), HEAVY)
UN_F(arccos, acosf(v), acos(v), HEAVY)
UN_F(arctan, atanf(v), atan(v), HEAVY)
UN_F(sinh, sinhf(v), sinh(v), HEAVY)
UN_F(cosh, coshf(v), cosh(v), HEAVY)
UN_F(arcsinh, asinhf(v), asinh(v), HEAVY)
UN_F(arccosh, acoshf(v), acosh(v), HEAVY)
UN_F(arctanh, atanhf(v), atanh(v), HEAVY)
UN_F(degrees, v * (float)(180.0 / 3.14159265358979323846), v * (180.0 / 3.14159265358979323846),
     NOATTR)
UN_F(radians, v * (float)(3.14159265358979323846 / 180.0), v * (3.14159265358979323846 / 180.0),
     NOATTR)
UN_F(log2, log2f(v), log2(v), HEAVY)
UN_F(log10, log10f(v), log10(v), HEAVY)
UN_F(cbrt, cbrtf(v), cbrt(v), HEAVY)
UN_F(rcbrt, 1.0f / cbrtf(v), 1.0 / cbrt(v), HEAVY)
UN_F(isnan, (float)(isnan(v) != 0), (double)(isnan(v) != 0), NOATTR)
UN_F(isinf, (float)(isinf(v) != 0), (double)(isinf(v) != 0), NOATTR)
UN_F(isfinite, (float)(isfinite(v) != 0), (double)(isfinite(v) != 0), NOATTR)
UNARY_KERNEL(tan, TAB_F(tan), true)
UNARY_KERNEL(arcsin, TAB_F(arcsin), true)
UNARY_KERNEL(arccos, TAB_F(arccos), true)
UNARY_KERNEL(arctan, TAB_F(arctan), true)
UNARY_KERNEL(sinh, TAB_F(sinh), true)
UNARY_KERNEL(cosh, TAB_F(cosh), true)
UNARY_KERNEL(arcsinh, TAB_F(arcsinh), true)
UNARY_KERNEL(arccosh, TAB_F(arccosh), true)
UNARY_KERNEL(arctanh, TAB_F(arctanh), true)
UNARY_KERNEL(degrees, TAB_F(degrees), false)
UNARY_KERNEL(radians, TAB_F(radians), false)
UNARY_KERNEL(log2, TAB_F(log2), true)
UNARY_KERNEL(log10, TAB_F(log10), true)
UNARY_KERNEL(cbrt, TAB_F(cbrt), true)
UNARY_KERNEL(rcbrt, TAB_F(rcbrt), true)
UNARY_KERNEL(isnan, TAB_F(isnan), false)
UNARY_KERNEL(isinf, TAB_F(isinf), false)
UNARY_KERNEL(isfinite, TAB_F(isfinite), false)

/* ---------------------------------------------------------------- issue 14 binary ops
 * (owner: e14) float32/float64 loops; integer, f16 and bf16 results go to the reference
 * (exact int64 mod there). Same formulas as kernels/ref/elemwise.c. */
/* MXNet's mod: the sign of the divisor; a zero divisor gives 0 */
#define F_MOD(T, FM, a, b)                                                                \
  ((b) == 0 ? (T)0 : (FM((a), (b)) != 0 && (FM((a), (b)) < 0) != ((b) < 0) ? FM((a), (b)) + (b) \
                                                                          : FM((a), (b))))
BIN_F(mod, F_MOD(float, fmodf, a, b), F_MOD(double, fmod, a, b), HEAVY)
BIN_F(hypot, hypotf(a, b), hypot(a, b), HEAVY)
BIN_F(arctan2, atan2f(a, b), atan2(a, b), HEAVY)
BIN_F(ldexp, a * exp2f(b), a * exp2(b), HEAVY)
BIN_F(logical_and, (float)(a != 0 && b != 0), (double)(a != 0 && b != 0), NOATTR)
BIN_F(logical_or, (float)(a != 0 || b != 0), (double)(a != 0 || b != 0), NOATTR)
BIN_F(logical_xor, (float)((a != 0) != (b != 0)), (double)((a != 0) != (b != 0)), NOATTR)
BINARY_KERNEL(mod, BTAB_F(mod), true)
BINARY_KERNEL(hypot, BTAB_F(hypot), true)
BINARY_KERNEL(arctan2, BTAB_F(arctan2), true)
BINARY_KERNEL(ldexp, BTAB_F(ldexp), true)
BINARY_KERNEL(logical_and, BTAB_F(logical_and), false)
BINARY_KERNEL(logical_or, BTAB_F(logical_or), false)
BINARY_KERNEL(logical_xor, BTAB_F(logical_xor), false)

/* scalar forms and smooth_l1: f32/f64 loops computed in double (as the reference), other
 * dtypes go to the reference */
static double sc_mod_d(double a, double b) { return F_MOD(double, fmod, a, b); }
SC_LOOP(sc_mod_scalar_f32, float, sc_mod_d(v, s), (float)r, HEAVY)
SC_LOOP(sc_mod_scalar_f64, double, sc_mod_d(v, s), r, HEAVY)
SC_LOOP(sc_rmod_scalar_f32, float, sc_mod_d(s, v), (float)r, HEAVY)
SC_LOOP(sc_rmod_scalar_f64, double, sc_mod_d(s, v), r, HEAVY)
SC_LOOP(sc_hypot_scalar_f32, float, hypot(v, s), (float)r, HEAVY)
SC_LOOP(sc_hypot_scalar_f64, double, hypot(v, s), r, HEAVY)
SC_LOOP(sc_logical_and_scalar_f32, float, (double)(v != 0 && s != 0), (float)r, NOATTR)
SC_LOOP(sc_logical_and_scalar_f64, double, (double)(v != 0 && s != 0), r, NOATTR)
SC_LOOP(sc_logical_or_scalar_f32, float, (double)(v != 0 || s != 0), (float)r, NOATTR)
SC_LOOP(sc_logical_or_scalar_f64, double, (double)(v != 0 || s != 0), r, NOATTR)
SC_LOOP(sc_logical_xor_scalar_f32, float, (double)((v != 0) != (s != 0)), (float)r, NOATTR)
SC_LOOP(sc_logical_xor_scalar_f64, double, (double)((v != 0) != (s != 0)), r, NOATTR)
/* s here is sigma^2 */
#define SMOOTH_L1(v, s) (fabs(v) < 1.0 / (s) ? 0.5 * (v) * (v) * (s) : fabs(v) - 0.5 / (s))
SC_LOOP(sc_smooth_l1_f32, float, SMOOTH_L1(v, s), (float)r, NOATTR)
SC_LOOP(sc_smooth_l1_f64, double, SMOOTH_L1(v, s), r, NOATTR)
static int run_scalar14(const mx_kctx *ctx, sc_fn f32, sc_fn f64, mx_kernel_fn ref, double s,
                        const void *p, mx_tensor *const *in, mx_tensor *const *out) {
  const mx_tensor *x = in[0], *y = out[0];
  if (x->dtype != y->dtype || (y->dtype != MX_F32 && y->dtype != MX_F64))
    return ref(ctx, p, 1, in, 1, out);
  sc_ctx c = {y->dtype == MX_F32 ? f32 : f64, s, mx_ptr(x), mx_ptr(y), mx_dtype_size(y->dtype),
              x->dtype, y->dtype};
  if (y->size < 2 * GRAIN_HEAVY) c.f(y->size, c.x, s, c.y);
  else mx_parallel_for(y->size, GRAIN_HEAVY, sc_range, &c);
  return MX_OK;
}
#define SCALAR14_KERNEL(op, SEXPR)                                                        \
  REF_DECL(op)                                                                          \
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    double s = ((const struct mx_params_##op *)p)->scalar;                              \
    return run_scalar14(ctx, sc_##op##_f32, sc_##op##_f64, mx_ref_##op, SEXPR, p, in, out); \
  }
SCALAR14_KERNEL(mod_scalar, s)
SCALAR14_KERNEL(rmod_scalar, s)
SCALAR14_KERNEL(hypot_scalar, s)
SCALAR14_KERNEL(logical_and_scalar, s)
SCALAR14_KERNEL(logical_or_scalar, s)
SCALAR14_KERNEL(logical_xor_scalar, s)
SCALAR14_KERNEL(smooth_l1, s * s)

/* add_n: float32/float64 inputs all of the result's dtype sum pairwise-in-order per
 * element (a running sum, as the reference's order); anything else: the reference */
typedef struct {
  int nin;
  mx_tensor *const *in;
  mx_tensor *out;
} addn_ctx;
static void addn_range(int64_t b, int64_t e, void *vc) {
  const addn_ctx *c = vc;
  if (c->out->dtype == MX_F32) {
    float *y = (float *)mx_ptr(c->out);
    /* the reference sums in double and rounds once: so does this (exactly the same) */
    for (int64_t i = b; i < e; i++) {
      double acc = 0;
      for (int k = 0; k < c->nin; k++) acc += ((const float *)mx_ptr(c->in[k]))[i];
      y[i] = (float)acc;
    }
  } else {
    double *y = (double *)mx_ptr(c->out);
    for (int64_t i = b; i < e; i++) y[i] = 0;
    for (int k = 0; k < c->nin; k++) {
      const double *x = (const double *)mx_ptr(c->in[k]);
      for (int64_t i = b; i < e; i++) y[i] += x[i];
    }
  }
}
REF_DECL(add_n)
int mx_cpu_add_n(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)nout;
  int dt = out[0]->dtype;
  bool direct = dt == MX_F32 || dt == MX_F64;
  for (int k = 0; direct && k < nin; k++) direct = in[k]->dtype == dt && in[k] != out[0];
  if (!direct) return mx_ref_add_n(ctx, p, nin, in, 1, out);
  addn_ctx c = {nin, in, out[0]};
  if (out[0]->size < 2 * GRAIN_LIGHT) addn_range(0, out[0]->size, &c);
  else mx_parallel_for(out[0]->size, GRAIN_LIGHT, addn_range, &c);
  return MX_OK;
}

/* ---------------------------------------------------------------- issue 14 unary ops, more
 * (owner: u14) scalar loops for f32/f64; integers are the identity for rint/fix (the
 * float-only ops convert or go to the reference). erfinv and digamma call the reference's
 * double formulas (kernels/ref/elemwise.c), so both backends agree. */
double mx_sf_rint(double x);
double mx_sf_erfinv(double y);
double mx_sf_gammaln(double x);
double mx_sf_digamma(double x);
double mx_sf_float_max(int dtype);
/* MXNet's rint: halves toward -inf (see the reference) */
#define RINT14(T, FL, CE, v) ((v) - FL(v) <= CE(v) - (v) ? FL(v) : CE(v))
static float lgammaf14(float v) {
  int s;
  return lgammaf_r(v, &s); /* not lgammaf: signgam is a global (a data race) */
}
UN_F(rint, RINT14(float, floorf, ceilf, v), RINT14(double, floor, ceil, v), NOATTR)
UN_F(fix, truncf(v), trunc(v), NOATTR)
UN_F(erfinv, (float)mx_sf_erfinv(v), mx_sf_erfinv(v), NOATTR)
UN_F(gamma, tgammaf(v), tgamma(v), NOATTR)
UN_F(gammaln, lgammaf14(v), mx_sf_gammaln(v), NOATTR)
UN_F(digamma, (float)mx_sf_digamma(v), mx_sf_digamma(v), NOATTR)
UNARY_KERNEL(rint, TAB_FID(rint), false)
UNARY_KERNEL(fix, TAB_FID(fix), false)
UNARY_KERNEL(erfinv, TAB_F(erfinv), true)
UNARY_KERNEL(gamma, TAB_F(gamma), true)
UNARY_KERNEL(gammaln, TAB_F(gammaln), true)
UNARY_KERNEL(digamma, TAB_F(digamma), true)

/* nan_to_num on f32/f64 in one pass (other dtypes: the reference) */
REF_DECL(nan_to_num)
int mx_cpu_nan_to_num(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_nan_to_num *np = p;
  const mx_tensor *x = in[0], *o = out[0];
  if (x->dtype != o->dtype || (o->dtype != MX_F32 && o->dtype != MX_F64))
    return mx_ref_nan_to_num(ctx, p, 1, in, 1, out);
  double big = mx_sf_float_max(o->dtype);
  double pinf = np->has_posinf ? np->posinf : big, ninf = np->has_neginf ? np->neginf : -big;
  int64_t n = o->size;
  if (o->dtype == MX_F32) {
    const float *a = mx_ptr(x);
    float *b = mx_ptr(o), fn = (float)np->nan, fp = (float)pinf, fm = (float)ninf;
    for (int64_t i = 0; i < n; i++) {
      float v = a[i];
      b[i] = v != v ? fn : v == INFINITY ? fp : v == -INFINITY ? fm : v;
    }
  } else {
    const double *a = mx_ptr(x);
    double *b = mx_ptr(o);
    for (int64_t i = 0; i < n; i++) {
      double v = a[i];
      b[i] = v != v ? np->nan : v == INFINITY ? pinf : v == -INFINITY ? ninf : v;
    }
  }
  return MX_OK;
}
