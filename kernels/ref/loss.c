/* kernels/ref/loss.c — reference kernels of MXNet's loss heads (core/ops/loss.lua), in
 * double. SoftmaxOutput views data (any rank) as (outer, k, inner) — multi_output: (n, d1,
 * rest), preserve_shape: (size / last, last, 1), else (n, size / n, 1) — and normalises
 * along k; a class-id label holds outer * inner ids, row-major over (outer, inner). */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>

static void geometry(const struct mx_params_softmax_output *P, const mx_tensor *d,
                     int64_t *outer, int64_t *k, int64_t *inner) {
  int64_t n = d->ndim > 0 ? d->shape[0] : 1;
  if (P->multi_output && d->ndim >= 2) {
    *outer = n;
    *k = d->shape[1];
    *inner = n && *k ? d->size / n / *k : 0;
  } else if (P->preserve_shape) {
    *k = d->ndim > 0 ? d->shape[d->ndim - 1] : 1;
    *outer = *k ? d->size / *k : 0;
    *inner = 1;
  } else {
    *outer = n;
    *k = n ? d->size / n : 0;
    *inner = 1;
  }
}

/* softmax_output: in[0] data, in[1] label (unread) -> out[0] softmax along k. */
int mx_ref_softmax_output(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const mx_tensor *x = in[0], *o = out[0];
  int64_t outer, k, inner;
  geometry(p, x, &outer, &k, &inner);
  for (int64_t a = 0; a < outer; a++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = a * k * inner + i;
      double mx = -INFINITY, s = 0;
      for (int64_t c = 0; c < k; c++) {
        double v = mx_load_f64(mx_ptr(x), x->dtype, base + c * inner);
        if (v > mx || v != v) mx = v;
      }
      for (int64_t c = 0; c < k; c++)
        s += exp(mx_load_f64(mx_ptr(x), x->dtype, base + c * inner) - mx);
      for (int64_t c = 0; c < k; c++)
        mx_store_f64(mx_ptr(o), o->dtype, base + c * inner,
                     exp(mx_load_f64(mx_ptr(x), x->dtype, base + c * inner) - mx) / s);
    }
  return MX_OK;
}

/* softmax_output_backward: in[0] out (the forward's), in[1] label, in[2] ograd -> out[0]
 * d data: MXNet's SoftmaxOutput backward (softmax_output-inl.h). */
int mx_ref_softmax_output_backward(const mx_kctx *ctx, const void *p, int nin,
                                   mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_softmax_output *P = p;
  const mx_tensor *y = in[0], *l = in[1], *g = in[2], *o = out[0];
  bool prob = l->ndim == y->ndim;
  for (int d = 0; prob && d < y->ndim; d++) prob = l->shape[d] == y->shape[d];
  if (prob) { /* probabilities as the label: (out - label) * grad_scale, not normalised */
    for (int64_t e = 0; e < y->size; e++) {
      double v = (mx_load_f64(mx_ptr(y), y->dtype, e) - mx_load_f64(mx_ptr(l), l->dtype, e)) *
                 P->grad_scale;
      if (P->out_grad) v *= mx_load_f64(mx_ptr(g), g->dtype, e);
      mx_store_f64(mx_ptr(o), o->dtype, e, v);
    }
    return MX_OK;
  }
  int64_t outer, k, inner;
  geometry(P, y, &outer, &k, &inner);
  int64_t nl = outer * inner, ignored = 0;
  int ign = (int)P->ignore_label;
  for (int64_t j = 0; j < nl; j++) {
    double v = mx_load_f64(mx_ptr(l), l->dtype, j);
    bool skip = P->use_ignore && (int)v == ign;
    if ((int)v == ign) ignored++;
    if (!skip && !(v == floor(v) && v >= 0 && v < (double)k))
      return mx_err(MX_EINVAL, "softmax_output: label element %lld is %g, not a class id in "
                    "[0, %lld)%s", (long long)j + 1, v, (long long)k,
                    P->use_ignore ? " or ignore_label" : "");
  }
  double cnt;
  if (P->normalization == 1) cnt = P->multi_output ? (double)outer : (double)nl; /* batch */
  else if (P->normalization == 2) cnt = nl - ignored > 0 ? (double)(nl - ignored) : 1; /* valid */
  else cnt = 1;
  double scale = P->grad_scale / cnt;
  if (P->multi_output && P->normalization != 2) scale /= (double)inner;
  double alpha = P->smooth_alpha, rest = k > 1 ? alpha / (double)(k - 1) : 0;
  for (int64_t a = 0; a < outer; a++)
    for (int64_t i = 0; i < inner; i++) {
      double lv = mx_load_f64(mx_ptr(l), l->dtype, a * inner + i);
      bool skip = P->use_ignore && (int)lv == ign;
      int64_t lab = (int64_t)lv;
      for (int64_t c = 0; c < k; c++) {
        int64_t e = a * k * inner + c * inner + i;
        double v = 0;
        if (!skip) {
          v = mx_load_f64(mx_ptr(y), y->dtype, e);
          v -= c == lab ? 1 - alpha : rest;
          v *= scale;
          if (P->out_grad) v *= mx_load_f64(mx_ptr(g), g->dtype, e);
        }
        mx_store_f64(mx_ptr(o), o->dtype, e, v);
      }
    }
  return MX_OK;
}

static void copy_values(const mx_tensor *x, const mx_tensor *o, bool sigmoid) {
  for (int64_t e = 0; e < x->size; e++) {
    double v = mx_load_f64(mx_ptr(x), x->dtype, e);
    mx_store_f64(mx_ptr(o), o->dtype, e, sigmoid ? 1 / (1 + exp(-v)) : v);
  }
}

/* linear_regression_output / mae_regression_output / make_loss: the identity;
 * logistic_regression_output: the sigmoid. in[0] data -> out[0]. */
int mx_ref_linear_regression_output(const mx_kctx *ctx, const void *p, int nin,
                                    mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  copy_values(in[0], out[0], false);
  return MX_OK;
}
int mx_ref_mae_regression_output(const mx_kctx *ctx, const void *p, int nin,
                                 mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  copy_values(in[0], out[0], false);
  return MX_OK;
}
int mx_ref_logistic_regression_output(const mx_kctx *ctx, const void *p, int nin,
                                      mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  copy_values(in[0], out[0], true);
  return MX_OK;
}
int mx_ref_make_loss(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  copy_values(in[0], out[0], false);
  return MX_OK;
}
