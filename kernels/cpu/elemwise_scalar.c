/* kernels/cpu/elemwise_scalar.c — the scalar forms of the binary ops (tensor op number,
 * number op tensor) and smooth_l1: x op s computed in double and rounded once into the
 * tensor's dtype, as the reference does. Layout and threading as elemwise.c. */
#include "elemwise.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "vmath.h"

#include <math.h>

/* ---------------------------------------------------------------- scalar forms */
/* x op s computed in double and rounded once into the tensor's dtype, exactly as the
 * reference does (so 0.1 means 0.1, not 0.1f, and int32 x > 2.5 is right); integer
 * results saturate like mx_store_f64. */
typedef void (*sc_fn)(int64_t n, const void *x, double s, void *y);

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


/* MXNet's mod: the sign of the divisor; a zero divisor gives 0 */
#define F_MOD(T, FM, a, b)                                                                \
  ((b) == 0 ? (T)0 : (FM((a), (b)) != 0 && (FM((a), (b)) < 0) != ((b) < 0) ? FM((a), (b)) + (b) \
                                                                          : FM((a), (b))))
/* more scalar forms and smooth_l1: f32/f64 loops computed in double (as the reference), other
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
static int run_scalar14(sc_fn f32, sc_fn f64, double s, mx_tensor *const *in,
                        mx_tensor *const *out) {
  const mx_tensor *x = in[0], *y = out[0];
  if (x->dtype != y->dtype || (y->dtype != MX_F32 && y->dtype != MX_F64))
    return MX_DECLINE;
  sc_ctx c = {y->dtype == MX_F32 ? f32 : f64, s, mx_ptr(x), mx_ptr(y), mx_dtype_size(y->dtype),
              x->dtype, y->dtype};
  if (y->size < 2 * GRAIN_HEAVY) c.f(y->size, c.x, s, c.y);
  else mx_parallel_for(y->size, GRAIN_HEAVY, sc_range, &c);
  return MX_OK;
}
#define SCALAR14_KERNEL(op, SEXPR)                                                        \
  int mx_cpu_##op(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                  mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                              \
    double s = ((const struct mx_params_##op *)p)->scalar;                              \
    return run_scalar14(sc_##op##_f32, sc_##op##_f64, SEXPR, in, out);                  \
  }
SCALAR14_KERNEL(mod_scalar, s)
SCALAR14_KERNEL(rmod_scalar, s)
SCALAR14_KERNEL(hypot_scalar, s)
SCALAR14_KERNEL(logical_and_scalar, s)
SCALAR14_KERNEL(logical_or_scalar, s)
SCALAR14_KERNEL(logical_xor_scalar, s)
SCALAR14_KERNEL(smooth_l1, s * s)
