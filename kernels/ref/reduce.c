/* kernels/ref/reduce.c — reference reductions, computed in double (integers: in int64).
 * in[0] of shape S reduced over the axes in a mask -> out of shape S without (or,
 * keepdims, with size 1 at) those axes, row-major; argmax/argmin give int64 1-based
 * indices along the axis (flat row-major index when no axis is given). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>

enum { R_SUM, R_PROD, R_MAX, R_MIN, R_SUMSQ, R_SUMABS };

/* Output index of input element i: the row-major index over the unmasked dims. */
static int64_t out_index(int64_t i, const mx_tensor *x, const bool *mask) {
  int64_t o = 0, mul = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    int64_t c = i % x->shape[d];
    i /= x->shape[d];
    if (!mask[d]) { o += c * mul; mul *= x->shape[d]; }
  }
  return o;
}

/* An integer element as int64 (sign- or zero-extended) and back, wrapping to the width. */
static int64_t ld_int(const void *p, int dt, int64_t i) {
  switch (dt) {
  case MX_U8: return ((const uint8_t *)p)[i];
  case MX_I8: return ((const int8_t *)p)[i];
  case MX_I32: return ((const int32_t *)p)[i];
  default: return ((const int64_t *)p)[i];
  }
}
static void st_int(void *p, int dt, int64_t i, int64_t v) {
  switch (dt) {
  case MX_U8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v; break;
  case MX_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
  case MX_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
  default: ((int64_t *)p)[i] = v; break;
  }
}
static bool int_dtype(int dt) { return dt == MX_U8 || dt == MX_I8 || dt == MX_I32 || dt == MX_I64; }

/* Integers in and out (same dtype): sum/prod/max/min exact in int64 (a double holds
 * integers exactly only to 2^53), sums and products wrapping like C's two's complement
 * (through uint64) and then to the dtype's width, as MXNet accumulates in the dtype. */
static int reduce_int(const mx_tensor *x, const mx_tensor *o, const bool *mask, int kind) {
  int64_t *acc = malloc(sizeof(int64_t) * (size_t)(o->size ? o->size : 1));
  if (!acc) return mx_err(MX_ENOMEM, "reduce: out of memory");
  int64_t init = kind == R_PROD ? 1 : kind == R_MAX ? INT64_MIN : kind == R_MIN ? INT64_MAX : 0;
  for (int64_t j = 0; j < o->size; j++) acc[j] = init;
  const void *px = mx_ptr(x);
  for (int64_t i = 0; i < x->size; i++) {
    int64_t v = ld_int(px, x->dtype, i), *a = &acc[out_index(i, x, mask)];
    switch (kind) {
    case R_SUM: *a = (int64_t)((uint64_t)*a + (uint64_t)v); break;
    case R_PROD: *a = (int64_t)((uint64_t)*a * (uint64_t)v); break;
    case R_MAX: if (v > *a) *a = v; break;
    default: if (v < *a) *a = v; break;
    }
  }
  for (int64_t j = 0; j < o->size; j++) st_int(mx_ptr(o), o->dtype, j, acc[j]);
  free(acc);
  return MX_OK;
}

/* Reduces in[0] over mask into out[0]; mean divides by the reduced count. */
static int reduce(const mx_tensor *x, const mx_tensor *o, const bool *mask, int kind, bool mean,
                  bool root) {
  if (int_dtype(x->dtype) && o->dtype == x->dtype && x->size > 0 && !mean && !root &&
      (kind == R_SUM || kind == R_PROD || kind == R_MAX || kind == R_MIN))
    return reduce_int(x, o, mask, kind);
  double *acc = malloc(sizeof(double) * (size_t)(o->size ? o->size : 1));
  if (!acc) return mx_err(MX_ENOMEM, "reduce: out of memory");
  double init = kind == R_PROD ? 1 : kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : 0;
  for (int64_t j = 0; j < o->size; j++) acc[j] = init;
  const void *px = mx_ptr(x);
  for (int64_t i = 0; i < x->size; i++) {
    double v = mx_load_f64(px, x->dtype, i);
    double *a = &acc[out_index(i, x, mask)];
    switch (kind) {
    case R_SUM: *a += v; break;
    case R_PROD: *a *= v; break;
    case R_SUMSQ: *a += v * v; break;
    case R_SUMABS: *a += fabs(v); break;
    /* a NaN, once taken, stays: nothing compares greater or less than it */
    case R_MAX: if (v != v || v > *a) *a = v; break;
    case R_MIN: if (v != v || v < *a) *a = v; break;
    }
  }
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++) if (mask[d]) count *= x->shape[d];
  for (int64_t j = 0; j < o->size; j++) {
    double v = acc[j];
    if (mean) v = v / (double)count;
    if (root) v = sqrt(v);
    mx_store_f64(mx_ptr(o), o->dtype, j, v);
  }
  free(acc);
  return MX_OK;
}

/* the reduction mask comes from inference (ctx->info.axes) */
static int run(const mx_kctx *ctx, mx_tensor *const *in, mx_tensor *const *out, int kind, bool mean,
               bool root) {
  return reduce(in[0], out[0], ctx->info.axes, kind, mean, root);
}

#define REDUCE(name, kind, mean)                                                          \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                    mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                                \
    return run(ctx, in, out, kind, mean, false);                                            \
  }
REDUCE(sum, R_SUM, false)
REDUCE(mean, R_SUM, true)
REDUCE(prod, R_PROD, false)
REDUCE(max, R_MAX, false)
REDUCE(min, R_MIN, false)

/* The 2-norm scaled by the largest |x| (as MXNet's nrm2 reducer and BLAS nrm2): no
 * overflow or underflow of the squares (f64 values beyond 1e154 or below 1e-154). NaN
 * anywhere gives NaN; an infinite element gives inf (MXNet's nrm2 gives NaN for two
 * infinite elements: a quirk of its running scale, not kept). */
static int norm2_scaled(const mx_tensor *x, const mx_tensor *o, const bool *mask) {
  size_t n = (size_t)(o->size ? o->size : 1);
  double *scale = malloc(sizeof(double) * 2 * n);
  if (!scale) return mx_err(MX_ENOMEM, "norm: out of memory");
  double *ss = scale + n;
  for (int64_t j = 0; j < o->size; j++) scale[j] = ss[j] = 0;
  const void *px = mx_ptr(x);
  for (int64_t i = 0; i < x->size; i++) { /* pass 1: max |x|; NaN marks ss */
    double v = fabs(mx_load_f64(px, x->dtype, i));
    int64_t j = out_index(i, x, mask);
    if (v != v) ss[j] = NAN;
    else if (v > scale[j]) scale[j] = v;
  }
  for (int64_t i = 0; i < x->size; i++) {
    int64_t j = out_index(i, x, mask);
    if (scale[j] == 0 || isinf(scale[j])) continue;
    double v = mx_load_f64(px, x->dtype, i) / scale[j];
    ss[j] += v * v;
  }
  for (int64_t j = 0; j < o->size; j++) {
    double r = ss[j] != ss[j] ? NAN : isinf(scale[j]) ? INFINITY : scale[j] * sqrt(ss[j]);
    mx_store_f64(mx_ptr(o), o->dtype, j, r);
  }
  free(scale);
  return MX_OK;
}

/* norm: ord 2 = sqrt(sum x^2) (scaled), ord 1 = sum |x| */
int mx_ref_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_norm *np = p;
  /* ord is 1 or 2: mx_infer_norm rejected anything else before dispatch */
  if (np->ord == 2) return norm2_scaled(in[0], out[0], ctx->info.axes);
  return run(ctx, in, out, R_SUMABS, false, false);
}

int mx_ref_reduce_to(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)nin; (void)nout;
  (void)p; /* the mask of data dims like lacks: inference (ctx->info.axes) */
  return reduce(in[0], out[0], ctx->info.axes, R_SUM, false, false);
}

/* argmax/argmin: first extreme wins; NaN counts as the extreme (NumPy). */
static int argreduce(const mx_kctx *ctx, const void *p, mx_tensor *const *in, mx_tensor *const *out,
                     bool is_max) {
  const mx_tensor *x = in[0], *o = out[0];
  int ax = ctx->info.axis; /* normalised by inference; -1: the flattened input */
  int64_t n = ax < 0 ? x->size : x->shape[ax], inner = 1;
  if (ax >= 0) for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t m = n ? x->size / n : 0; /* number of outputs */
  int64_t *y = mx_ptr(o);
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner;
    int64_t best = 0;
    if (x->dtype == MX_I64) { /* exact: doubles would tie distinct values above 2^53 */
      const int64_t *px = mx_ptr(x);
      for (int64_t r = 1; r < n; r++) {
        int64_t v = px[base + r * inner], b = px[base + best * inner];
        if (is_max ? v > b : v < b) best = r;
      }
      y[j] = best + 1;
      continue;
    }
    double bv = mx_load_f64(mx_ptr(x), x->dtype, base);
    for (int64_t r = 1; r < n && bv == bv; r++) {
      double v = mx_load_f64(mx_ptr(x), x->dtype, base + r * inner);
      if (v != v || (is_max ? v > bv : v < bv)) { bv = v; best = r; }
    }
    y[j] = best + 1;
  }
  return MX_OK;
}

int mx_ref_argmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  return argreduce(ctx, p, in, out, true);
}
int mx_ref_argmin(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  return argreduce(ctx, p, in, out, false);
}

/* ---------------------------------------------------------------- nansum, nanprod, cumsum,
 * moments */

/* nansum/nanprod: NaN elements are skipped (treated as 0 / 1); integers have no NaN and
 * reduce exactly as sum/prod do. */
static int nanreduce(const mx_kctx *ctx, mx_tensor *const *in, mx_tensor *const *out, bool prod) {
  const mx_tensor *x = in[0], *o = out[0];
  const bool *mask = ctx->info.axes;
  if (x->dtype != MX_F32 && x->dtype != MX_F64 && x->dtype != MX_F16 && x->dtype != MX_BF16)
    return reduce(x, o, mask, prod ? R_PROD : R_SUM, false, false);
  double *acc = malloc(sizeof(double) * (size_t)(o->size ? o->size : 1));
  if (!acc) return mx_err(MX_ENOMEM, "nanreduce: out of memory");
  for (int64_t j = 0; j < o->size; j++) acc[j] = prod ? 1 : 0;
  const void *px = mx_ptr(x);
  for (int64_t i = 0; i < x->size; i++) {
    double v = mx_load_f64(px, x->dtype, i);
    if (v != v) continue;
    double *a = &acc[out_index(i, x, mask)];
    if (prod) *a *= v; else *a += v;
  }
  for (int64_t j = 0; j < o->size; j++) mx_store_f64(mx_ptr(o), o->dtype, j, acc[j]);
  free(acc);
  return MX_OK;
}
int mx_ref_nansum(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                  mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return nanreduce(ctx, in, out, false);
}
int mx_ref_nanprod(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return nanreduce(ctx, in, out, true);
}

static bool is_float(int dt) { return dt == MX_F32 || dt == MX_F64 || dt == MX_F16 || dt == MX_BF16; }

/* element i of x as an integer of the result's dtype would see it: integers exactly,
 * floats truncated toward zero (NaN 0, saturating at int64's range) */
static int64_t load_i64(const mx_tensor *x, int64_t i) {
  if (x->dtype == MX_I64) return ((const int64_t *)mx_ptr(x))[i];
  double v = mx_load_f64(mx_ptr(x), x->dtype, i);
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}
/* an int64 running sum into an integer dtype, wrapping to its width (two's complement) */
static void store_int(const mx_tensor *o, int64_t i, uint64_t v) {
  void *po = mx_ptr(o);
  switch (o->dtype) {
  case MX_I64: ((int64_t *)po)[i] = (int64_t)v; break;
  case MX_I32: ((int32_t *)po)[i] = (int32_t)(uint32_t)v; break;
  case MX_I8: ((int8_t *)po)[i] = (int8_t)(uint8_t)v; break;
  default: ((uint8_t *)po)[i] = (uint8_t)v; break; /* MX_U8 */
  }
}

/* cumsum along ctx->info.axis (-1: the flattened input); accumulated in the result's
 * dtype: double for floats, wrapping integers otherwise (NumPy's accumulate). */
int mx_ref_cumsum(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                  mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0], *o = out[0];
  if (x->size == 0) return MX_OK;
  int ax = ctx->info.axis;
  int64_t n = ax < 0 ? x->size : x->shape[ax], inner = 1;
  if (ax >= 0) for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t lines = x->size / n; /* (outer, inner) pairs */
  bool fl = is_float(o->dtype);
  for (int64_t j = 0; j < lines; j++) {
    int64_t base = (j / inner) * n * inner + j % inner;
    double acc = 0;
    uint64_t iacc = 0;
    for (int64_t r = 0; r < n; r++) {
      int64_t i = base + r * inner;
      if (fl) {
        acc += mx_load_f64(mx_ptr(x), x->dtype, i);
        mx_store_f64(mx_ptr(o), o->dtype, i, acc);
      } else {
        iacc += (uint64_t)load_i64(x, i);
        store_int(o, i, iacc);
      }
    }
  }
  return MX_OK;
}

/* moments: mean, then the mean squared deviation from it (two passes, in double) */
int mx_ref_moments(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0], *om = out[0], *ov = out[1];
  const bool *mask = ctx->info.axes;
  size_t m = (size_t)(om->size ? om->size : 1);
  double *mean = calloc(m, sizeof(double)), *var = calloc(m, sizeof(double));
  if (!mean || !var) { free(mean); free(var); return mx_err(MX_ENOMEM, "moments: out of memory"); }
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++) if (mask[d]) count *= x->shape[d];
  const void *px = mx_ptr(x);
  for (int64_t i = 0; i < x->size; i++) mean[out_index(i, x, mask)] += mx_load_f64(px, x->dtype, i);
  for (int64_t j = 0; j < om->size; j++) mean[j] /= (double)count; /* 0/0: NaN when empty */
  for (int64_t i = 0; i < x->size; i++) {
    int64_t j = out_index(i, x, mask);
    double d = mx_load_f64(px, x->dtype, i) - mean[j];
    var[j] += d * d;
  }
  for (int64_t j = 0; j < om->size; j++) {
    mx_store_f64(mx_ptr(om), om->dtype, j, mean[j]);
    mx_store_f64(mx_ptr(ov), ov->dtype, j, var[j] / (double)count);
  }
  free(mean);
  free(var);
  return MX_OK;
}

/* ---------------------------------------------------------------- any, all */

/* any/all over the mask into bool: an element counts as true when nonzero (NaN too, as
 * NumPy); the empty extent keeps the identity (any: false, all: true). */
static int logical_reduce(const mx_kctx *ctx, mx_tensor *const *in, mx_tensor *const *out,
                          bool is_all) {
  const mx_tensor *x = in[0], *o = out[0];
  const bool *mask = ctx->info.axes;
  bool *y = mx_ptr(o);
  for (int64_t j = 0; j < o->size; j++) y[j] = is_all;
  const void *px = mx_ptr(x);
  for (int64_t i = 0; i < x->size; i++) {
    /* double keeps every nonzero integer nonzero (int64's too), and NaN != 0 */
    bool t = mx_load_f64(px, x->dtype, i) != 0;
    if (t != is_all) y[out_index(i, x, mask)] = t;
  }
  return MX_OK;
}
int mx_ref_any(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return logical_reduce(ctx, in, out, false);
}
int mx_ref_all(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return logical_reduce(ctx, in, out, true);
}
