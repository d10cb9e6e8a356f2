/* kernels/ref/creation.c — reference creation kernels: out[0] of params.shape/dtype. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

static int fill(mx_tensor *o, double v) {
  void *p = mx_ptr(o);
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(p, o->dtype, i, v);
  return MX_OK;
}

int mx_ref_zeros(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 0);
}
int mx_ref_ones(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 1);
}
int mx_ref_full(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  return fill(out[0], ((const struct mx_params_full *)p)->value);
}

/* arange: value i = start + (i / repeat) * step (MXNet: [start, stop)) */
int mx_ref_arange(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_arange *P = p;
  double start = P->has_stop ? P->start : 0;
  for (int64_t i = 0; i < out[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, start + (double)(i / P->repeat) * P->step);
  return MX_OK;
}

/* linspace: num values from start to stop (stop included when endpoint) */
int mx_ref_linspace(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_linspace *P = p;
  int64_t n = P->num, div = P->endpoint ? n - 1 : n;
  double step = div > 0 ? (P->stop - P->start) / (double)div : 0;
  for (int64_t i = 0; i < n; i++) {
    double v = P->endpoint && i == n - 1 && n > 1 ? P->stop : P->start + (double)i * step;
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, v);
  }
  return MX_OK;
}

/* eye: (N, M), ones on diagonal k (k > 0 above the main one) */
int mx_ref_eye(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_eye *P = p;
  mx_tensor *o = out[0];
  int64_t M = o->shape[1];
  for (int64_t i = 0; i < o->size; i++)
    mx_store_f64(mx_ptr(o), o->dtype, i, (i % M) - (i / M) == P->k ? 1 : 0);
  return MX_OK;
}

int mx_ref_zeros_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 0);
}
int mx_ref_ones_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 1);
}
int mx_ref_full_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  return fill(out[0], ((const struct mx_params_full_like *)p)->value);
}
