/* kernels/ref/elemwise.c — reference elementwise kernels.
 * unary:  in[0] any shape -> out same shape (dtype per infer)
 * binary: in[0], in[1] broadcastable -> out broadcast shape, computed in double
 * scalar: in[0] op params.scalar -> out same shape/dtype
 * int64 operands take exact integer paths (a double holds integers exactly only to 2^53):
 * see "int64 exactness" in docs/ops-notes.md. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <string.h>

/* ---- int64 exactness: the helpers the int64 paths below share */
#define I64_LIM 9223372036854775808.0 /* 2^63, exact in double */
/* s as an int64 when it is integral and in range */
static bool i64_of(double s, int64_t *k) {
  if (!(s >= -I64_LIM && s < I64_LIM) || s != floor(s)) return false;
  *k = (int64_t)s;
  return true;
}
/* exact order of an int64 and a double: -1, 0, 1, or 2 when s is NaN */
static int i64_cmp(int64_t v, double s) {
  if (s != s) return 2;
  if (s >= I64_LIM) return -1;
  if (s < -I64_LIM) return 1;
  double f = floor(s);
  int64_t k = (int64_t)f;
  if (v != k) return v < k ? -1 : 1;
  return s == f ? 0 : -1;
}
/* double to int64 as C truncation, saturating (NaN gives 0) */
static int64_t i64_sat(double r) {
  if (r != r) return 0;
  if (r >= I64_LIM) return INT64_MAX;
  if (r <= -I64_LIM) return INT64_MIN;
  return (int64_t)r;
}
/* integer division truncates; by zero gives 0; INT64_MIN / -1 wraps */
static int64_t i64_div(int64_t a, int64_t b) {
  return b == 0 ? 0 : b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;
}
static void i64_store(mx_tensor *o, int64_t i, int64_t v) {
  if (o->dtype == MX_I64) ((int64_t *)mx_ptr(o))[i] = v;
  else mx_store_f64(mx_ptr(o), o->dtype, i, (double)v);
}

/* b^e on int64s by squaring, wrapping mod 2^64 (through uint64: no signed overflow);
 * a negative e gives 0 except for |b| == 1, as integer division (1 / b^-e) would */
static int64_t i64_pow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? (((uint64_t)e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  for (uint64_t n = (uint64_t)e; n; n >>= 1) {
    if (n & 1) r *= x;
    x *= x;
  }
  return (int64_t)r;
}

typedef double (*un_fn)(double);
typedef int64_t (*un_i64_fn)(int64_t);
/* fi: the op's exact int64 form (NULL: every dtype through double) */
static int unary(mx_tensor *const *in, mx_tensor *const *out, un_fn f, un_i64_fn fi) {
  const void *x = mx_ptr(in[0]);
  void *y = mx_ptr(out[0]);
  if (fi && in[0]->dtype == MX_I64) {
    for (int64_t i = 0; i < out[0]->size; i++) i64_store(out[0], i, fi(((const int64_t *)x)[i]));
    return MX_OK;
  }
  int dt = out[0]->dtype;
  if (fi && in[0]->dtype == dt && (dt == MX_I8 || dt == MX_U8 || dt == MX_I32)) {
    /* neg, abs and square wrap modulo 2^bits (MXNet, NumPy: int8 -(-128) is -128): the
     * exact int64 result's low bits, stored through the unsigned type of the same width */
    for (int64_t i = 0; i < out[0]->size; i++) {
      uint64_t r = (uint64_t)fi((int64_t)mx_load_f64(x, dt, i));
      if (dt == MX_I32) ((uint32_t *)y)[i] = (uint32_t)r;
      else ((uint8_t *)y)[i] = (uint8_t)r;
    }
    return MX_OK;
  }
  for (int64_t i = 0; i < out[0]->size; i++)
    mx_store_f64(y, out[0]->dtype, i, f(mx_load_f64(x, in[0]->dtype, i)));
  return MX_OK;
}

static double f_neg(double x) { return -x; }
static double f_abs(double x) { return fabs(x); }
static double f_sign(double x) { return (x > 0) - (x < 0); }
static double f_square(double x) { return x * x; }
static double f_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* NaN stays NaN (MXNet): `x <= 0` is false for NaN */
static double f_relu(double x) { return x <= 0 ? 0 : x; }
static double f_reciprocal(double x) { return 1.0 / x; }
static double f_rsqrt(double x) { return 1.0 / sqrt(x); }
/* log(1+e^x) without overflow: x + log1p(e^-x) for x > 0 */
static double f_softrelu(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double f_softsign(double x) { return x / (1.0 + fabs(x)); }
static double f_logical_not(double x) { return x == 0; }
/* the integer-valued ops on int64, exact; neg, abs and square wrap like C unsigned
 * arithmetic (abs(INT64_MIN) is INT64_MIN, as in NumPy) */
static int64_t i_neg(int64_t v) { return (int64_t)(0u - (uint64_t)v); }
static int64_t i_abs(int64_t v) { return v < 0 ? i_neg(v) : v; }
static int64_t i_sign(int64_t v) { return (v > 0) - (v < 0); }
static int64_t i_square(int64_t v) { return (int64_t)((uint64_t)v * (uint64_t)v); }
static int64_t i_relu(int64_t v) { return v > 0 ? v : 0; }
static int64_t i_same(int64_t v) { return v; } /* floor, ceil, round, trunc */

#define UNARY(name, f, fi)                                                                \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)p; (void)nin; (void)nout;                                                      \
    return unary(in, out, f, fi);                                                        \
  }
UNARY(neg, f_neg, i_neg)
UNARY(abs, f_abs, i_abs)
UNARY(sign, f_sign, i_sign)
UNARY(exp, exp, NULL)
UNARY(log, log, NULL)
UNARY(sqrt, sqrt, NULL)
UNARY(square, f_square, i_square)
UNARY(tanh, tanh, NULL)
UNARY(sigmoid, f_sigmoid, NULL)
UNARY(relu, f_relu, i_relu)
UNARY(sin, sin, NULL)
UNARY(cos, cos, NULL)
UNARY(log1p, log1p, NULL)
UNARY(expm1, expm1, NULL)
UNARY(reciprocal, f_reciprocal, NULL)
UNARY(rsqrt, f_rsqrt, NULL)
UNARY(softrelu, f_softrelu, NULL)
UNARY(softsign, f_softsign, NULL)
UNARY(erf, erf, NULL)
UNARY(floor, floor, i_same)
UNARY(ceil, ceil, i_same)
UNARY(round, round, i_same)
UNARY(trunc, trunc, i_same)
UNARY(logical_not, f_logical_not, NULL)

/* clip: in[0] any shape -> same shape/dtype; a missing bound does not clip; NaN stays */
int mx_ref_clip(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_clip *c = p;
  const void *x = mx_ptr(in[0]);
  void *y = mx_ptr(out[0]);
  if (in[0]->dtype == MX_I64 && out[0]->dtype == MX_I64) { /* exact: compare, never round */
    for (int64_t i = 0; i < out[0]->size; i++) {
      int64_t v = ((const int64_t *)x)[i];
      if (c->has_a_min && i64_cmp(v, c->a_min) == -1) v = i64_sat(c->a_min);
      if (c->has_a_max && i64_cmp(v, c->a_max) == 1) v = i64_sat(c->a_max);
      ((int64_t *)y)[i] = v;
    }
    return MX_OK;
  }
  for (int64_t i = 0; i < out[0]->size; i++) {
    double v = mx_load_f64(x, in[0]->dtype, i);
    if (c->has_a_min && v < c->a_min) v = c->a_min;
    if (c->has_a_max && v > c->a_max) v = c->a_max;
    mx_store_f64(y, out[0]->dtype, i, v);
  }
  return MX_OK;
}

/* where: x, y of out's shape (promoted x/y dtype); cond of that shape or 1-D picking rows,
 * read through its aligned dims (ctx->info.align, set by infer); cond != 0 picks x.
 * The picked element is copied as bytes when its dtype is out's (exact for int64 above
 * 2^53), else converted through double. */
int mx_ref_where(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *c = in[0], *a = in[1], *b = in[2], *o = out[0];
  for (int64_t i = 0; i < o->size; i++) {
    double k = mx_load_f64(mx_ptr(c), c->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, ctx->info.align_ndim, ctx->info.align));
    const mx_tensor *s = k != 0 ? a : b;
    int64_t at = mx_ref_bcast_offset(i, o->ndim, o->shape, s->ndim, s->shape);
    if (s->dtype == o->dtype) {
      size_t es = mx_dtype_size(o->dtype);
      memcpy((char *)mx_ptr(o) + (size_t)i * es, (const char *)mx_ptr(s) + (size_t)at * es, es);
    } else {
      mx_store_f64(mx_ptr(o), o->dtype, i, mx_load_f64(mx_ptr(s), s->dtype, at));
    }
  }
  return MX_OK;
}

/* broadcast_to / broadcast_like: in[0] broadcast (right-aligned, or with size-1 axes
 * inserted where params.axis says: infer gives the aligned shape) -> out, same dtype.
 * Copies element bytes, so every dtype (int64 included) is exact. */
static int bcast_copy(const mx_tensor *x, const mx_tensor *o, int xnd, const int64_t *xshape) {
  size_t es = mx_dtype_size(o->dtype);
  const char *px = mx_ptr(x);
  char *po = mx_ptr(o);
  for (int64_t i = 0; i < o->size; i++) {
    int64_t off = mx_ref_bcast_offset(i, o->ndim, o->shape, xnd, xshape);
    for (size_t k = 0; k < es; k++) po[(size_t)i * es + k] = px[(size_t)off * es + k];
  }
  return MX_OK;
}

int mx_ref_broadcast_to(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return bcast_copy(in[0], out[0], in[0]->ndim, in[0]->shape);
}

int mx_ref_broadcast_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  (void)nin; (void)nout;
  (void)p; /* data's dims on like's rank: inference resolved the axis param */
  return bcast_copy(in[0], out[0], ctx->info.align_ndim, ctx->info.align);
}

enum { OP_ADD, OP_SUB, OP_RSUB, OP_MUL, OP_DIV, OP_RDIV, OP_MAX, OP_MIN, OP_EQ, OP_NE,
       OP_GT, OP_GE, OP_LT, OP_LE, OP_RELU_BW, OP_POW, OP_RPOW, OP_NONE };
/* a op b on int64s, two's-complement wrap-around (through uint64: no signed overflow) */
static int64_t i64_op(int op, int64_t a, int64_t b) {
  uint64_t x = (uint64_t)a, y = (uint64_t)b;
  switch (op) {
  case OP_ADD: return (int64_t)(x + y);
  case OP_SUB: return (int64_t)(x - y);
  case OP_RSUB: return (int64_t)(y - x);
  case OP_MUL: return (int64_t)(x * y);
  case OP_DIV: return i64_div(a, b);
  case OP_RDIV: return i64_div(b, a);
  case OP_MAX: return a >= b ? a : b;
  case OP_MIN: return a <= b ? a : b;
  case OP_EQ: return a == b;
  case OP_NE: return a != b;
  case OP_GT: return a > b;
  case OP_GE: return a >= b;
  case OP_LT: return a < b;
  case OP_RELU_BW: return b > 0 ? a : 0;
  case OP_POW: return i64_pow(a, b);
  case OP_RPOW: return i64_pow(b, a);
  default: return a <= b;
  }
}

/* add/sub/rsub/mul on int8/uint8/int32 results wrap modulo 2^bits (MXNet, NumPy: uint8
 * 250 + 6 is 0): i64_op's wrapped value, its low bits stored through the unsigned type of
 * the same width (same representation: no implementation-defined conversion) */
static bool wraps(int op, int dtype) {
  return (op == OP_ADD || op == OP_SUB || op == OP_RSUB || op == OP_MUL) &&
         (dtype == MX_I8 || dtype == MX_U8 || dtype == MX_I32);
}
static void wrap_store(mx_tensor *o, int64_t i, int64_t v) {
  if (o->dtype == MX_I32) ((uint32_t *)mx_ptr(o))[i] = (uint32_t)(uint64_t)v;
  else ((uint8_t *)mx_ptr(o))[i] = (uint8_t)(uint64_t)v;
}

typedef double (*bin_fn)(double, double);
static int binary_op(mx_tensor *const *in, mx_tensor *const *out, bin_fn f, int op) {
  const mx_tensor *a = in[0], *b = in[1], *o = out[0];
  const void *pa = mx_ptr(a), *pb = mx_ptr(b);
  void *po = mx_ptr(o);
  if (op != OP_NONE && a->dtype == MX_I64 && b->dtype == MX_I64) {
    for (int64_t i = 0; i < o->size; i++) {
      int64_t x = ((const int64_t *)pa)[mx_ref_bcast_offset(i, o->ndim, o->shape, a->ndim, a->shape)];
      int64_t y = ((const int64_t *)pb)[mx_ref_bcast_offset(i, o->ndim, o->shape, b->ndim, b->shape)];
      i64_store(out[0], i, i64_op(op, x, y));
    }
    return MX_OK;
  }
  if (wraps(op, o->dtype) && !mx_dtype_is_float(a->dtype) && !mx_dtype_is_float(b->dtype)) {
    for (int64_t i = 0; i < o->size; i++) { /* operands of 32 bits or less: exact in double */
      double x = mx_load_f64(pa, a->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, a->ndim, a->shape));
      double y = mx_load_f64(pb, b->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, b->ndim, b->shape));
      wrap_store(out[0], i, i64_op(op, (int64_t)x, (int64_t)y));
    }
    return MX_OK;
  }
  for (int64_t i = 0; i < o->size; i++) {
    double x = mx_load_f64(pa, a->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, a->ndim, a->shape));
    double y = mx_load_f64(pb, b->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, b->ndim, b->shape));
    mx_store_f64(po, o->dtype, i, f(x, y));
  }
  return MX_OK;
}

static bool is_int_dtype(int d) { return !mx_dtype_is_float(d); }

static double f_add(double a, double b) { return a + b; }
static double f_sub(double a, double b) { return a - b; }
static double f_mul(double a, double b) { return a * b; }
static double f_div(double a, double b) { return a / b; }
/* integer division truncates toward zero (C, MXNet); by zero gives 0, never a trap */
static double f_idiv(double a, double b) { return b == 0 ? 0 : trunc(a / b); }
static double f_pow(double a, double b) { return pow(a, b); }
/* NaN in either operand gives NaN (NumPy's maximum/minimum) */
static double f_max(double a, double b) { return a != a || b != b ? NAN : a >= b ? a : b; }
static double f_min(double a, double b) { return a != a || b != b ? NAN : a <= b ? a : b; }
static double f_eq(double a, double b) { return a == b; }
static double f_ne(double a, double b) { return a != b; }
static double f_gt(double a, double b) { return a > b; }
static double f_ge(double a, double b) { return a >= b; }
static double f_lt(double a, double b) { return a < b; }
static double f_le(double a, double b) { return a <= b; }
/* relu_backward(ograd, data): ograd * relu'(data), relu' being 1 above 0, 0 at or below,
 * and NaN at NaN (MXNet's relu_grad), so a NaN in data or ograd gives a NaN gradient */
static double f_relu_bw(double g, double x) { return g * (x > 0 ? 1.0 : x != x ? x : 0.0); }

#define BINARY(name, f, op)                                                                \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)p; (void)nin; (void)nout;                                                      \
    return binary_op(in, out, f, op);                                                    \
  }
BINARY(add, f_add, OP_ADD)
BINARY(sub, f_sub, OP_SUB)
BINARY(mul, f_mul, OP_MUL)
BINARY(pow, f_pow, OP_NONE)
BINARY(maximum, f_max, OP_MAX)
BINARY(minimum, f_min, OP_MIN)
BINARY(equal, f_eq, OP_EQ)
BINARY(not_equal, f_ne, OP_NE)
BINARY(greater, f_gt, OP_GT)
BINARY(relu_backward, f_relu_bw, OP_RELU_BW)
BINARY(greater_equal, f_ge, OP_GE)
BINARY(lesser, f_lt, OP_LT)
BINARY(lesser_equal, f_le, OP_LE)

int mx_ref_div(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return binary_op(in, out, is_int_dtype(out[0]->dtype) ? f_idiv : f_div, OP_DIV);
}

/* int64 x op s, exact: comparisons, maximum and minimum for every double s; arithmetic
 * (pow included: x^s, or s^x for rpow) when s is integral and in range (else false: the
 * caller computes in double) */
static bool i64_scalar(int op, int64_t v, double s, int64_t *r) {
  int c = i64_cmp(v, s);
  switch (op) {
  case OP_EQ: *r = c == 0; return true;
  case OP_NE: *r = c != 0; return true;
  case OP_GT: *r = c == 1; return true;
  case OP_GE: *r = c == 0 || c == 1; return true;
  case OP_LT: *r = c == -1; return true;
  case OP_LE: *r = c == -1 || c == 0; return true;
  /* NaN wins (stored as 0, like any NaN into an integer); else the larger, truncated */
  case OP_MAX: *r = c == 2 ? 0 : c >= 0 ? v : i64_sat(s); return true;
  case OP_MIN: *r = c == 2 ? 0 : c <= 0 ? v : i64_sat(s); return true;
  default: break;
  }
  int64_t k;
  if (!i64_of(s, &k)) return false;
  *r = i64_op(op, v, k);
  return true;
}

static int scalar_op(const void *p, mx_tensor *const *in, mx_tensor *const *out, bin_fn f,
                     bool reversed, int op) {
  double s = ((const struct mx_params_add_scalar *)p)->scalar;
  const void *x = mx_ptr(in[0]);
  void *y = mx_ptr(out[0]);
  int64_t r;
  if (op != OP_NONE && in[0]->dtype == MX_I64 && out[0]->size > 0 &&
      i64_scalar(op, ((const int64_t *)x)[0], s, &r)) {
    for (int64_t i = 0; i < out[0]->size; i++) {
      i64_scalar(op, ((const int64_t *)x)[i], s, &r);
      i64_store(out[0], i, r);
    }
    return MX_OK;
  }
  int64_t k;
  if (wraps(op, out[0]->dtype) && !mx_dtype_is_float(in[0]->dtype) && i64_of(s, &k)) {
    for (int64_t i = 0; i < out[0]->size; i++)
      wrap_store(out[0], i, i64_op(op, (int64_t)mx_load_f64(x, in[0]->dtype, i), k));
    return MX_OK;
  }
  for (int64_t i = 0; i < out[0]->size; i++) {
    double v = mx_load_f64(x, in[0]->dtype, i);
    double r = reversed ? f(s, v) : f(v, s);
    /* into int64: truncated, saturating at INT64_MAX itself (not 2^63 - 1024) */
    if (out[0]->dtype == MX_I64) ((int64_t *)y)[i] = i64_sat(r);
    else mx_store_f64(y, out[0]->dtype, i, r);
  }
  return MX_OK;
}

/* every *_scalar params struct is {double scalar;}: same layout as add_scalar's */
#define SCALAR(name, f, rev, op)                                                         \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                    mx_tensor *const *out) {                                             \
    (void)nin; (void)nout;                                                               \
    return scalar_op(p, in, out, f, rev, op);                                            \
  }
SCALAR(add_scalar, f_add, false, OP_ADD)
SCALAR(sub_scalar, f_sub, false, OP_SUB)
SCALAR(rsub_scalar, f_sub, true, OP_RSUB)
SCALAR(mul_scalar, f_mul, false, OP_MUL)
SCALAR(pow_scalar, f_pow, false, OP_POW)
SCALAR(rpow_scalar, f_pow, true, OP_RPOW)
SCALAR(maximum_scalar, f_max, false, OP_MAX)
SCALAR(minimum_scalar, f_min, false, OP_MIN)
SCALAR(equal_scalar, f_eq, false, OP_EQ)
SCALAR(not_equal_scalar, f_ne, false, OP_NE)
SCALAR(greater_scalar, f_gt, false, OP_GT)
SCALAR(greater_equal_scalar, f_ge, false, OP_GE)
SCALAR(lesser_scalar, f_lt, false, OP_LT)
SCALAR(lesser_equal_scalar, f_le, false, OP_LE)

int mx_ref_div_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)nin; (void)nout;
  return scalar_op(p, in, out, is_int_dtype(out[0]->dtype) ? f_idiv : f_div, false, OP_DIV);
}
int mx_ref_rdiv_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)nin; (void)nout;
  return scalar_op(p, in, out, is_int_dtype(out[0]->dtype) ? f_idiv : f_div, true, OP_RDIV);
}

/* ---------------------------------------------------------------- unary ops, more
 * plain libm through double, every dtype; isnan/isinf/isfinite give 1 or 0 in
 * the output (input) dtype, integers being never NaN/inf */
static double f_degrees(double x) { return x * (180.0 / 3.14159265358979323846); }
static double f_radians(double x) { return x * (3.14159265358979323846 / 180.0); }
static double f_rcbrt(double x) { return 1.0 / cbrt(x); }
static double f_isnan(double x) { return isnan(x) ? 1 : 0; }
static double f_isinf(double x) { return isinf(x) ? 1 : 0; }
static double f_isfinite(double x) { return isfinite(x) ? 1 : 0; }
UNARY(tan, tan, NULL)
UNARY(arcsin, asin, NULL)
UNARY(arccos, acos, NULL)
UNARY(arctan, atan, NULL)
UNARY(sinh, sinh, NULL)
UNARY(cosh, cosh, NULL)
UNARY(arcsinh, asinh, NULL)
UNARY(arccosh, acosh, NULL)
UNARY(arctanh, atanh, NULL)
UNARY(degrees, f_degrees, NULL)
UNARY(radians, f_radians, NULL)
UNARY(log2, log2, NULL)
UNARY(log10, log10, NULL)
UNARY(cbrt, cbrt, NULL)
UNARY(rcbrt, f_rcbrt, NULL)
UNARY(isnan, f_isnan, NULL)
UNARY(isinf, f_isinf, NULL)
UNARY(isfinite, f_isfinite, NULL)

/* ---------------------------------------------------------------- binary ops, more
 * mod, hypot, arctan2, ldexp, logical_and/or/xor, their scalar forms,
 * smooth_l1, add_n. Through double (exact for every dtype but int64 above 2^53: mod and
 * add_n take exact int64 paths). */
/* MXNet's mod (mshadow_op::mod): the sign of the divisor; a zero divisor gives 0 */
static double f_mod(double a, double b) {
  if (b == 0) return 0;
  double r = fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
static int64_t i_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0; /* -1: INT64_MIN % -1 would trap */
  int64_t r = a % b;
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
static double f_hypot(double a, double b) { return hypot(a, b); }
static double f_arctan2(double a, double b) { return atan2(a, b); }
static double f_ldexp(double a, double b) { return a * exp2(b); }
static double f_land(double a, double b) { return a != 0 && b != 0; }
static double f_lor(double a, double b) { return a != 0 || b != 0; }
static double f_lxor(double a, double b) { return (a != 0) != (b != 0); }

static int binary14(mx_tensor *const *in, mx_tensor *const *out, bin_fn f,
                    int64_t (*fi)(int64_t, int64_t)) {
  const mx_tensor *a = in[0], *b = in[1], *o = out[0];
  if (fi && a->dtype == MX_I64 && b->dtype == MX_I64) {
    for (int64_t i = 0; i < o->size; i++) {
      int64_t x = ((const int64_t *)mx_ptr(a))[mx_ref_bcast_offset(i, o->ndim, o->shape, a->ndim, a->shape)];
      int64_t y = ((const int64_t *)mx_ptr(b))[mx_ref_bcast_offset(i, o->ndim, o->shape, b->ndim, b->shape)];
      i64_store(out[0], i, fi(x, y));
    }
    return MX_OK;
  }
  return binary_op(in, out, f, OP_NONE);
}
#define BINARY14(name, f, fi)                                                            \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                    mx_tensor *const *out) {                                             \
    (void)ctx; (void)p; (void)nin; (void)nout;                                           \
    return binary14(in, out, f, fi);                                                     \
  }
BINARY14(mod, f_mod, i_mod)
BINARY14(hypot, f_hypot, NULL)
BINARY14(arctan2, f_arctan2, NULL)
BINARY14(ldexp, f_ldexp, NULL)
BINARY14(logical_and, f_land, NULL)
BINARY14(logical_or, f_lor, NULL)
BINARY14(logical_xor, f_lxor, NULL)

/* x op s; int64 mod with an integral in-range scalar is exact */
static int scalar14(const void *p, mx_tensor *const *in, mx_tensor *const *out, bin_fn f,
                    bool reversed, int64_t (*fi)(int64_t, int64_t)) {
  double s = ((const struct mx_params_add_scalar *)p)->scalar;
  int64_t k;
  if (fi && in[0]->dtype == MX_I64 && i64_of(s, &k)) {
    const int64_t *x = mx_ptr(in[0]);
    for (int64_t i = 0; i < out[0]->size; i++)
      i64_store(out[0], i, reversed ? fi(k, x[i]) : fi(x[i], k));
    return MX_OK;
  }
  return scalar_op(p, in, out, f, reversed, OP_NONE);
}
#define SCALAR14(name, f, rev, fi)                                                       \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, \
                    mx_tensor *const *out) {                                             \
    (void)ctx; (void)nin; (void)nout;                                                    \
    return scalar14(p, in, out, f, rev, fi);                                             \
  }
SCALAR14(mod_scalar, f_mod, false, i_mod)
SCALAR14(rmod_scalar, f_mod, true, i_mod)
SCALAR14(hypot_scalar, f_hypot, false, NULL)
SCALAR14(logical_and_scalar, f_land, false, NULL)
SCALAR14(logical_or_scalar, f_lor, false, NULL)
SCALAR14(logical_xor_scalar, f_lxor, false, NULL)

/* smooth_l1 (MXNet's): 0.5 (s x)^2 where |x| < 1/s^2, else |x| - 0.5/s^2 */
int mx_ref_smooth_l1(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  double s2 = ((const struct mx_params_smooth_l1 *)p)->scalar;
  s2 *= s2;
  for (int64_t i = 0; i < out[0]->size; i++) {
    double v = mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i);
    double r = fabs(v) < 1.0 / s2 ? 0.5 * v * v * s2 : fabs(v) - 0.5 / s2;
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, r);
  }
  return MX_OK;
}

/* add_n: same-shaped inputs summed in order; integer results wrap like add (through
 * uint64), floats sum in double and round once */
int mx_ref_add_n(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nout;
  mx_tensor *o = out[0];
  bool ints = !mx_dtype_is_float(o->dtype);
  for (int64_t i = 0; i < o->size; i++) {
    if (ints) {
      uint64_t acc = 0;
      for (int k = 0; k < nin; k++)
        acc += in[k]->dtype == MX_I64 ? (uint64_t)((const int64_t *)mx_ptr(in[k]))[i]
                                      : (uint64_t)(int64_t)mx_load_f64(mx_ptr(in[k]), in[k]->dtype, i);
      if (o->dtype == MX_I64) ((int64_t *)mx_ptr(o))[i] = (int64_t)acc;
      else if (o->dtype == MX_I32 || o->dtype == MX_I8 || o->dtype == MX_U8) wrap_store(o, i, (int64_t)acc);
      else mx_store_f64(mx_ptr(o), o->dtype, i, (double)(int64_t)acc);
    } else {
      double acc = 0;
      for (int k = 0; k < nin; k++) acc += mx_load_f64(mx_ptr(in[k]), in[k]->dtype, i);
      mx_store_f64(mx_ptr(o), o->dtype, i, acc);
    }
  }
  return MX_OK;
}

static int64_t i_same14(int64_t v) { return v; }
UNARY(rint, mx_sf_rint, i_same14)
UNARY(fix, trunc, i_same14)
UNARY(erfinv, mx_sf_erfinv, NULL)
UNARY(gamma, tgamma, NULL)
UNARY(gammaln, mx_sf_gammaln, NULL)
UNARY(digamma, mx_sf_digamma, NULL)

/* nan_to_num: integers have no NaN/inf: copied (exact, int64 included) */
int mx_ref_nan_to_num(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_nan_to_num *np = p;
  mx_tensor *x = in[0], *o = out[0];
  if (!mx_dtype_is_float(x->dtype)) {
    if (mx_ptr(x) != mx_ptr(o)) memmove(mx_ptr(o), mx_ptr(x), mx_nbytes(o));
    return MX_OK;
  }
  double big = mx_sf_float_max(o->dtype);
  double pinf = np->has_posinf ? np->posinf : big, ninf = np->has_neginf ? np->neginf : -big;
  for (int64_t i = 0; i < o->size; i++) {
    double v = mx_load_f64(mx_ptr(x), x->dtype, i);
    v = v != v ? np->nan : v == INFINITY ? pinf : v == -INFINITY ? ninf : v;
    mx_store_f64(mx_ptr(o), o->dtype, i, v);
  }
  return MX_OK;
}

UNARY(trigamma, mx_sf_trigamma, NULL)
