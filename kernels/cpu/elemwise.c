/* kernels/cpu/elemwise.c — optimised elementwise kernels: unary and binary (NumPy
 * broadcasting) ops, add_n and nan_to_num (scalar forms: elemwise_scalar.c; clip,
 * broadcast_to/like, where: elemwise_select.c).
 *
 * Layout: all tensors contiguous row-major. Loops are written per compute type
 * (f32, f64, i32, i64, i8, u8) so GCC vectorises them (-O3 -mavx2 -mfma); float math
 * (exp, log, tanh...) reaches glibc's libmvec through the asm-aliased declarations
 * (vmath.h), and the transcendental loops carry an AVX-512 clone picked at load time.
 * f16/bf16 (and mixed-dtype inputs) are converted to the compute type in chunks.
 * Large tensors are split over the intra-op pool; small ones (the 1-element add is
 * the per-op benchmark) run inline with no thread hand-off and no allocation.
 * Whatever a fast loop does not cover is declined (MX_DECLINE): dispatch runs the
 * reference kernel (correct, slow). */
#include "elemwise.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "vmath.h"

#include <math.h>

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

static int run_unary(un_fn const tab[CT_N], bool heavy, mx_tensor *const *in,
                     mx_tensor *const *out) {
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
  return MX_DECLINE;
}

#define UNARY_KERNEL(op, TAB, heavy)                                                      \
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    static un_fn const tab[CT_N] = TAB;                                                 \
    return run_unary(tab, heavy, in, out);                                              \
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

/* Converting path for operands of the output's size (or one element) with an f16/bf16
 * among them (bf16 training's relu_backward, residual adds, gradient sums): chunks
 * through f32 stack buffers inside the parallel loop, no whole-tensor temporaries. */
typedef struct {
  bin_fn f;
  const mx_tensor *a, *b, *y;
} bin_conv_ctx;

static const float *conv_operand(const mx_tensor *t, int64_t i, int64_t n, float *buf) {
  if (t->dtype == MX_F32) return (const float *)mx_ptr(t) + i;
  to_ct(buf, mx_ptr(t), t->dtype, i, n);
  return buf;
}

static void bin_conv_range(int64_t b, int64_t e, void *vc) {
  const bin_conv_ctx *c = vc;
  float ta[CHUNK], tb[CHUNK], ty[CHUNK];
  /* a one-element operand of a larger output: converted once, read with stride 0 */
  bool sa = c->a->size == 1 && c->y->size != 1, sb = c->b->size == 1 && c->y->size != 1;
  if (sa) to_ct(ta, mx_ptr(c->a), c->a->dtype, 0, 1);
  if (sb) to_ct(tb, mx_ptr(c->b), c->b->dtype, 0, 1);
  bool yf = c->y->dtype == MX_F32;
  for (int64_t i = b; i < e; i += CHUNK) {
    int64_t n = e - i < CHUNK ? e - i : CHUNK;
    const float *pa = sa ? ta : conv_operand(c->a, i, n, ta);
    const float *pb = sb ? tb : conv_operand(c->b, i, n, tb);
    float *py = yf ? (float *)mx_ptr(c->y) + i : ty;
    c->f(n, pa, !sa, pb, !sb, py);
    if (!yf) from_ct(mx_ptr(c->y), c->y->dtype, i, ty, n);
  }
}

static bool conv_dtype(int dt) { return dt == MX_F32 || dt == MX_F16 || dt == MX_BF16; }

static int run_binary(bin_fn const tab[CT_N], bool heavy, mx_tensor *const *in,
                      mx_tensor *const *out) {
  const mx_tensor *a = in[0], *b = in[1], *y = out[0];
  int64_t n = y->size;
  int ct = ct_of(y->dtype);
  bin_fn f = tab[ct];
  if (!f || n == 0) return n == 0 ? MX_OK : MX_DECLINE;
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
  if (ct == CT_F32 && !direct && conv_dtype(a->dtype) && conv_dtype(b->dtype) &&
      conv_dtype(y->dtype) && (a->size == n || a->size == 1) && (b->size == n || b->size == 1)) {
    bin_conv_ctx cc = {f, a, b, y};
    mx_parallel_for(n, grain / 2, bin_conv_range, &cc);
    return MX_OK;
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
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    static bin_fn const tab[CT_N] = TAB;                                                \
    return run_binary(tab, heavy, in, out);                                             \
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

/* ---------------------------------------------------------------- unary ops, more:
 * scalar libm loops for f32/f64 (integers, f16, bf16 convert or go to the
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

/* ---------------------------------------------------------------- binary ops, more:
 * float32/float64 loops; integer, f16 and bf16 results go to the reference
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
int mx_cpu_add_n(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)nout;
  int dt = out[0]->dtype;
  bool direct = dt == MX_F32 || dt == MX_F64;
  for (int k = 0; direct && k < nin; k++) direct = in[k]->dtype == dt && in[k] != out[0];
  if (!direct) return MX_DECLINE;
  addn_ctx c = {nin, in, out[0]};
  if (out[0]->size < 2 * GRAIN_LIGHT) addn_range(0, out[0]->size, &c);
  else mx_parallel_for(out[0]->size, GRAIN_LIGHT, addn_range, &c);
  return MX_OK;
}

/* ---------------------------------------------------------------- rint, fix and the
 * special functions: scalar loops for f32/f64; integers are the identity for rint/fix (the
 * float-only ops convert or go to the reference). erfinv and digamma call the reference's
 * double formulas (kernels/ref/elemwise.c), so both backends agree. */
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
int mx_cpu_nan_to_num(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_nan_to_num *np = p;
  const mx_tensor *x = in[0], *o = out[0];
  if (x->dtype != o->dtype || (o->dtype != MX_F32 && o->dtype != MX_F64))
    return MX_DECLINE;
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

