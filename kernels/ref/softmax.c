/* kernels/ref/softmax.c — reference softmax / log_softmax along one axis, in double.
 * in[0] of shape (outer, n, inner) around `axis` -> out same shape (float dtype):
 * softmax = exp((x - max)/T) / sum exp((x - max)/T), log_softmax = its log. */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>

static int softmax(const mx_kctx *ctx, const void *p, mx_tensor *const *in, mx_tensor *const *out,
                   bool log_) {
  const struct mx_params_softmax *sp = p;
  const mx_tensor *x = in[0], *o = out[0];
  int ax = ctx->info.axis; /* normalised by inference */
  int64_t n = x->shape[ax], inner = 1;
  for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  int64_t m = n ? x->size / n : 0;
  double t = sp->temperature;
  for (int64_t j = 0; j < m; j++) {
    int64_t base = (j / inner) * n * inner + j % inner;
    double mx = -INFINITY;
    for (int64_t r = 0; r < n; r++) {
      double v = mx_load_f64(mx_ptr(x), x->dtype, base + r * inner);
      if (v > mx || v != v) mx = v;
    }
    double s = 0;
    for (int64_t r = 0; r < n; r++)
      s += exp((mx_load_f64(mx_ptr(x), x->dtype, base + r * inner) - mx) / t);
    for (int64_t r = 0; r < n; r++) {
      double z = (mx_load_f64(mx_ptr(x), x->dtype, base + r * inner) - mx) / t;
      mx_store_f64(mx_ptr(o), o->dtype, base + r * inner, log_ ? z - log(s) : exp(z) / s);
    }
  }
  return MX_OK;
}

int mx_ref_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  return softmax(ctx, p, in, out, false);
}
int mx_ref_log_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)nin; (void)nout;
  return softmax(ctx, p, in, out, true);
}

/* ---------------------------------------------------------------- softmin (owner: u14)
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
