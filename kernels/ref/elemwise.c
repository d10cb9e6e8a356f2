/* kernels/ref/elemwise.c — reference elementwise kernels.
 * unary:  in[0] any shape -> out same shape (dtype per infer)
 * binary: in[0], in[1] broadcastable -> out broadcast shape, computed in double
 * scalar: in[0] op params.scalar -> out same shape/dtype */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>

typedef double (*un_fn)(double);
static int unary(mx_tensor *const *in, mx_tensor *const *out, un_fn f) {
  const void *x = mx_ptr(in[0]);
  void *y = mx_ptr(out[0]);
  for (int64_t i = 0; i < out[0]->size; i++)
    mx_store_f64(y, out[0]->dtype, i, f(mx_load_f64(x, in[0]->dtype, i)));
  return MX_OK;
}

static double f_neg(double x) { return -x; }
static double f_abs(double x) { return fabs(x); }
static double f_sign(double x) { return (x > 0) - (x < 0); }
static double f_square(double x) { return x * x; }
static double f_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double f_relu(double x) { return x > 0 ? x : 0; }
static double f_reciprocal(double x) { return 1.0 / x; }
static double f_rsqrt(double x) { return 1.0 / sqrt(x); }
/* log(1+e^x) without overflow: x + log1p(e^-x) for x > 0 */
static double f_softrelu(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }
static double f_softsign(double x) { return x / (1.0 + fabs(x)); }
static double f_logical_not(double x) { return x == 0; }

#define UNARY(name, f)                                                                   \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)p; (void)nin; (void)nout;                                                      \
    return unary(in, out, f);                                                            \
  }
UNARY(neg, f_neg)
UNARY(abs, f_abs)
UNARY(sign, f_sign)
UNARY(exp, exp)
UNARY(log, log)
UNARY(sqrt, sqrt)
UNARY(square, f_square)
UNARY(tanh, tanh)
UNARY(sigmoid, f_sigmoid)
UNARY(relu, f_relu)
UNARY(sin, sin)
UNARY(cos, cos)
UNARY(log1p, log1p)
UNARY(expm1, expm1)
UNARY(reciprocal, f_reciprocal)
UNARY(rsqrt, f_rsqrt)
UNARY(softrelu, f_softrelu)
UNARY(softsign, f_softsign)
UNARY(erf, erf)
UNARY(floor, floor)
UNARY(ceil, ceil)
UNARY(round, round)
UNARY(trunc, trunc)
UNARY(logical_not, f_logical_not)

/* clip: in[0] any shape -> same shape/dtype; a missing bound does not clip; NaN stays */
int mx_ref_clip(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_clip *c = p;
  const void *x = mx_ptr(in[0]);
  void *y = mx_ptr(out[0]);
  for (int64_t i = 0; i < out[0]->size; i++) {
    double v = mx_load_f64(x, in[0]->dtype, i);
    if (c->has_a_min && v < c->a_min) v = c->a_min;
    if (c->has_a_max && v > c->a_max) v = c->a_max;
    mx_store_f64(y, out[0]->dtype, i, v);
  }
  return MX_OK;
}

/* where: cond, x, y broadcast together -> out (promoted x/y dtype); cond != 0 picks x */
int mx_ref_where(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *c = in[0], *a = in[1], *b = in[2], *o = out[0];
  for (int64_t i = 0; i < o->size; i++) {
    double k = mx_load_f64(mx_ptr(c), c->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, c->ndim, c->shape));
    const mx_tensor *s = k != 0 ? a : b;
    double v = mx_load_f64(mx_ptr(s), s->dtype, mx_ref_bcast_offset(i, o->ndim, o->shape, s->ndim, s->shape));
    mx_store_f64(mx_ptr(o), o->dtype, i, v);
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

typedef double (*bin_fn)(double, double);
static int binary(mx_tensor *const *in, mx_tensor *const *out, bin_fn f) {
  const mx_tensor *a = in[0], *b = in[1], *o = out[0];
  const void *pa = mx_ptr(a), *pb = mx_ptr(b);
  void *po = mx_ptr(o);
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
/* relu_backward(ograd, data): ograd * (data > 0), the product relu's two-op gradient
 * computed (so NaN and infinite ograds propagate the same way) */
static double f_relu_bw(double g, double x) { return g * (double)(x > 0); }

#define BINARY(name, f)                                                                  \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)p; (void)nin; (void)nout;                                                      \
    return binary(in, out, f);                                                           \
  }
BINARY(add, f_add)
BINARY(sub, f_sub)
BINARY(mul, f_mul)
BINARY(pow, f_pow)
BINARY(maximum, f_max)
BINARY(minimum, f_min)
BINARY(equal, f_eq)
BINARY(not_equal, f_ne)
BINARY(greater, f_gt)
BINARY(relu_backward, f_relu_bw)
BINARY(greater_equal, f_ge)
BINARY(lesser, f_lt)
BINARY(lesser_equal, f_le)

int mx_ref_div(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return binary(in, out, is_int_dtype(out[0]->dtype) ? f_idiv : f_div);
}

static int scalar(const void *p, mx_tensor *const *in, mx_tensor *const *out, bin_fn f,
                  bool reversed) {
  double s = ((const struct mx_params_add_scalar *)p)->scalar;
  const void *x = mx_ptr(in[0]);
  void *y = mx_ptr(out[0]);
  for (int64_t i = 0; i < out[0]->size; i++) {
    double v = mx_load_f64(x, in[0]->dtype, i);
    mx_store_f64(y, out[0]->dtype, i, reversed ? f(s, v) : f(v, s));
  }
  return MX_OK;
}

/* every *_scalar params struct is {double scalar;}: same layout as add_scalar's */
#define SCALAR(name, f, rev)                                                             \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)nin; (void)nout;                                                               \
    return scalar(p, in, out, f, rev);                                                   \
  }
SCALAR(add_scalar, f_add, false)
SCALAR(sub_scalar, f_sub, false)
SCALAR(rsub_scalar, f_sub, true)
SCALAR(mul_scalar, f_mul, false)
SCALAR(pow_scalar, f_pow, false)
SCALAR(rpow_scalar, f_pow, true)
SCALAR(maximum_scalar, f_max, false)
SCALAR(minimum_scalar, f_min, false)
SCALAR(equal_scalar, f_eq, false)
SCALAR(not_equal_scalar, f_ne, false)
SCALAR(greater_scalar, f_gt, false)
SCALAR(greater_equal_scalar, f_ge, false)
SCALAR(lesser_scalar, f_lt, false)
SCALAR(lesser_equal_scalar, f_le, false)

int mx_ref_div_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)nin; (void)nout;
  return scalar(p, in, out, is_int_dtype(out[0]->dtype) ? f_idiv : f_div, false);
}
int mx_ref_rdiv_scalar(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)nin; (void)nout;
  return scalar(p, in, out, is_int_dtype(out[0]->dtype) ? f_idiv : f_div, true);
}
