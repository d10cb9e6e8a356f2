/* kernels/ref/softmax.c — reference softmax / log_softmax along one axis, in double.
 * in[0] of shape (outer, n, inner) around `axis` -> out same shape (float dtype):
 * softmax = exp((x - max)/T) / sum exp((x - max)/T), log_softmax = its log. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>

static int row_length(const char *op, const mx_tensor *l, int64_t j, int64_t n, int64_t *len);

static int softmax(const mx_kctx *ctx, const void *p, mx_tensor *const *in, mx_tensor *const *out,
                   bool log_, const mx_tensor *len) {
  const struct mx_params_softmax *sp = p;
  const mx_tensor *x = in[0], *o = out[0];
  int ax = ctx->info.axis; /* normalised by inference */
  int64_t n = x->shape[ax], inner = 1;
  for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t m = n ? x->size / n : 0;
  double t = sp->temperature;
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner, nr = n;
    if (len) { /* use_length: the row's first nr steps; 0 after them */
      int rc = row_length(log_ ? "log_softmax" : "softmax", len, j, n, &nr);
      if (rc) return rc;
    }
    double mx = -INFINITY;
    for (int64_t r = 0; r < nr; r++) {
      double v = mx_load_f64(mx_ptr(x), x->dtype, base + r * inner);
      if (v > mx || v != v) mx = v;
    }
    double s = 0;
    for (int64_t r = 0; r < nr; r++)
      s += exp((mx_load_f64(mx_ptr(x), x->dtype, base + r * inner) - mx) / t);
    for (int64_t r = 0; r < nr; r++) {
      double z = (mx_load_f64(mx_ptr(x), x->dtype, base + r * inner) - mx) / t;
      mx_store_f64(mx_ptr(o), o->dtype, base + r * inner, log_ ? z - log(s) : exp(z) / s);
    }
    for (int64_t r = nr; r < n; r++) mx_store_f64(mx_ptr(o), o->dtype, base + r * inner, 0);
  }
  return MX_OK;
}

int mx_ref_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nout;
  if (out[0]->dtype != in[0]->dtype)
    return mx_err(MX_EINVAL, "%s: dtype %s differs from the data's %s: mx.nd and mx.sym compute "
                  "it through casts, the kernel takes the data's dtype", "softmax",
                  mx_dtype_name(out[0]->dtype), mx_dtype_name(in[0]->dtype));
  return softmax(ctx, p, in, out, false, nin > 1 ? in[1] : NULL);
}
int mx_ref_log_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)nout;
  if (out[0]->dtype != in[0]->dtype)
    return mx_err(MX_EINVAL, "%s: dtype %s differs from the data's %s: mx.nd and mx.sym compute "
                  "it through casts, the kernel takes the data's dtype", "log_softmax",
                  mx_dtype_name(out[0]->dtype), mx_dtype_name(in[0]->dtype));
  return softmax(ctx, p, in, out, true, nin > 1 ? in[1] : NULL);
}

/* ---------------------------------------------------------------- softmin
 * softmax(-x / T) along the axis: the row minimum subtracted, so exp never overflows. */
int mx_ref_softmin(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_softmin *sp = p;
  const mx_tensor *x = in[0], *o = out[0];
  int ax = ctx->info.axis;
  int64_t n = x->shape[ax], inner = 1;
  for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t m = n ? x->size / n : 0;
  double t = sp->temperature;
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner;
    double mn = INFINITY;
    for (int64_t r = 0; r < n; r++) {
      double v = mx_load_f64(mx_ptr(x), x->dtype, base + r * inner);
      if (v < mn || v != v) mn = v;
      if (mn != mn) break; /* NaN propagates to the whole row */
    }
    double s = 0;
    for (int64_t r = 0; r < n; r++)
      s += exp((mn - mx_load_f64(mx_ptr(x), x->dtype, base + r * inner)) / t);
    for (int64_t r = 0; r < n; r++) {
      double z = (mn - mx_load_f64(mx_ptr(x), x->dtype, base + r * inner)) / t;
      mx_store_f64(mx_ptr(o), o->dtype, base + r * inner, exp(z) / s);
    }
  }
  return MX_OK;
}

/* ---------------------------------------------------------------- lengths and masks
 * softmax / log_softmax with a length (above), log_softmax's gradient with one, and
 * masked_softmax / masked_log_softmax with their backward, one row at a time in double. */

/* Row j's length, an integral value in 0..n. */
static int row_length(const char *op, const mx_tensor *l, int64_t j, int64_t n, int64_t *len) {
  double v = mx_load_f64(mx_ptr(l), l->dtype, j);
  if (!(v >= 0 && v <= (double)n) || v != floor(v))
    return mx_err(MX_EINVAL, "%s: length element %lld is %g, expected an integer in 0..%lld "
                  "(the axis' size)", op, (long long)j + 1, v, (long long)n);
  *len = (int64_t)v;
  return MX_OK;
}

int mx_ref_log_softmax_length_backward(const mx_kctx *ctx, const void *p, int nin,
                                       mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_log_softmax_length_backward *sp = p;
  const mx_tensor *g = in[0], *y = in[1], *o = out[0];
  int ax = ctx->info.axis;
  int64_t n = g->shape[ax], inner = 1;
  for (int d = ax + 1; d < g->ndim; d++) inner *= g->shape[d];
  int64_t m = n ? g->size / n : 0;
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner, nr = 0;
    int rc = row_length("log_softmax_length_backward", in[2], j, n, &nr);
    if (rc) return rc;
    double s = 0;
    for (int64_t r = 0; r < nr; r++) s += mx_load_f64(mx_ptr(g), g->dtype, base + r * inner);
    for (int64_t r = 0; r < n; r++) {
      int64_t i = base + r * inner;
      double d = r < nr ? (mx_load_f64(mx_ptr(g), g->dtype, i)
                           - exp(mx_load_f64(mx_ptr(y), y->dtype, i)) * s) / sp->temperature : 0;
      mx_store_f64(mx_ptr(o), o->dtype, i, d);
    }
  }
  return MX_OK;
}

/* Whether element i of data's shape is kept by the mask (broadcast, same rank). */
static bool mask_keeps(const mx_tensor *x, const mx_tensor *mk, int64_t i) {
  int64_t off = 0, stride = 1;
  for (int d = x->ndim - 1; d >= 0; d--) {
    int64_t c = i % x->shape[d];
    i /= x->shape[d];
    if (mk->shape[d] != 1) off += c * stride;
    stride *= mk->shape[d];
  }
  return mx_load_f64(mx_ptr(mk), mk->dtype, off) != 0;
}

static int masked(const mx_kctx *ctx, const void *p, mx_tensor *const *in, mx_tensor *const *out,
                  bool log_) {
  const struct mx_params_masked_softmax *sp = p;
  const mx_tensor *x = in[0], *mk = in[1], *o = out[0];
  int ax = ctx->info.axis;
  int64_t n = x->shape[ax], inner = 1;
  for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t m = n ? x->size / n : 0;
  double t = sp->temperature;
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner;
    double mx = -INFINITY, s = 0;
    for (int64_t r = 0; r < n; r++) {
      double v = mx_load_f64(mx_ptr(x), x->dtype, base + r * inner);
      if (mask_keeps(x, mk, base + r * inner) && (v > mx || v != v)) mx = v;
    }
    for (int64_t r = 0; r < n; r++)
      if (mask_keeps(x, mk, base + r * inner))
        s += exp((mx_load_f64(mx_ptr(x), x->dtype, base + r * inner) - mx) / t);
    for (int64_t r = 0; r < n; r++) {
      int64_t i = base + r * inner;
      double v = log_ ? -INFINITY : 0;
      if (mask_keeps(x, mk, i)) {
        double z = (mx_load_f64(mx_ptr(x), x->dtype, i) - mx) / t;
        v = log_ ? z - log(s) : exp(z) / s;
      }
      mx_store_f64(mx_ptr(o), o->dtype, i, v);
    }
  }
  return MX_OK;
}

int mx_ref_masked_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  return masked(ctx, p, in, out, false);
}
int mx_ref_masked_log_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  return masked(ctx, p, in, out, true);
}

int mx_ref_masked_log_softmax_backward(const mx_kctx *ctx, const void *p, int nin,
                                       mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_masked_log_softmax_backward *sp = p;
  const mx_tensor *g = in[0], *y = in[1], *mk = in[2], *o = out[0];
  int ax = ctx->info.axis;
  int64_t n = g->shape[ax], inner = 1;
  for (int d = ax + 1; d < g->ndim; d++) inner *= g->shape[d];
  int64_t m = n ? g->size / n : 0;
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner;
    double s = 0;
    for (int64_t r = 0; r < n; r++)
      if (mask_keeps(g, mk, base + r * inner)) s += mx_load_f64(mx_ptr(g), g->dtype, base + r * inner);
    for (int64_t r = 0; r < n; r++) {
      int64_t i = base + r * inner;
      double d = 0;
      if (mask_keeps(g, mk, i))
        d = (mx_load_f64(mx_ptr(g), g->dtype, i) - exp(mx_load_f64(mx_ptr(y), y->dtype, i)) * s)
            / sp->temperature;
      mx_store_f64(mx_ptr(o), o->dtype, i, d);
    }
  }
  return MX_OK;
}
