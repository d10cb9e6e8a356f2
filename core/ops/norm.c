/* norm.c — shape/dtype inference for the norm family (batch_norm and its backward). */
#include "infer.h"

#include "mx_ops_gen.h"

#include <string.h>

static bool has_unknown(const mx_desc *t) {
  if (t->ndim < 0 || t->dtype < 0) return true;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0) return true;
  return false;
}

/* A per-channel vector input (gamma, beta, moving stats): filled in when unknown
 * (partial inference, Gluon's deferred in_channels), else checked to be (c,). */
static int check_vec(const mx_op_def *def, const char *what, mx_desc *v, int64_t c, int dtype,
                     bool same_dtype) {
  char b[MX_SHAPE_BUF];
  if (v->ndim < 0) {
    v->ndim = 1;
    v->shape[0] = MX_DIM_UNKNOWN;
  }
  if (v->ndim == 1 && v->shape[0] < 0) v->shape[0] = c;
  if (v->dtype < 0) v->dtype = dtype;
  if (v->ndim != 1 || v->shape[0] != c)
    return mx_err(MX_EINVAL, "%s: %s must have shape (%lld) (the channel count), got %s",
                  def->name, what, (long long)c, mx_shape_str(b, v->ndim, v->shape));
  if (same_dtype && v->dtype != dtype)
    return mx_err(MX_EINVAL, "%s: %s has dtype %s but data has dtype %s (it is updated in "
                  "place, so no conversion is made)", def->name, what, mx_dtype_name(v->dtype),
                  mx_dtype_name(dtype));
  return MX_OK;
}

/* batch_norm: data (..., C at axis, ...), gamma, beta, moving_mean, moving_var all (C);
 * out like data, mean and invstd (C). The moving statistics are written in place, so
 * they must already have data's dtype. */
int mx_infer_batch_norm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                        int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_batch_norm *P = p;
  mx_desc *d = in[0];
  char b[MX_SHAPE_BUF];
  if (has_unknown(d)) return MX_OK;
  if (d->ndim < 1)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got shape %s", def->name,
                  mx_shape_str(b, d->ndim, d->shape));
  int rc = mx_norm_axis(def->name, "axis", P->axis, d->ndim, &info->axis);
  if (rc) return rc;
  if (!(P->eps >= 0))
    return mx_err(MX_EINVAL, "%s: eps must be >= 0, got %g", def->name, P->eps);
  if (!(P->momentum >= 0 && P->momentum <= 1))
    return mx_err(MX_EINVAL, "%s: momentum must be in [0, 1], got %g", def->name, P->momentum);
  int64_t c = d->shape[info->axis];
  static const char *const names[] = {"gamma", "beta", "moving_mean", "moving_var"};
  for (int i = 1; i < 5; i++)
    if ((rc = check_vec(def, names[i - 1], in[i], c, d->dtype, i >= 3))) return rc;
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  mx_out_set(&out[1], 1, &c, d->dtype);
  mx_out_set(&out[2], 1, &c, d->dtype);
  return MX_OK;
}

/* batch_norm_backward: ograd like data, gamma, mean, invstd (C) -> ddata, dgamma, dbeta. */
int mx_infer_batch_norm_backward(const mx_op_def *def, const void *p, int nin,
                                 mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_batch_norm_backward *P = p;
  const mx_desc *g = in[0], *d = in[1];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (d->ndim < 1)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got shape %s", def->name,
                  mx_shape_str(b, d->ndim, d->shape));
  if (g->ndim != d->ndim || memcmp(g->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim))
    return mx_err(MX_EINVAL, "%s: ograd has shape %s but data has shape %s", def->name,
                  mx_shape_str(a, g->ndim, g->shape), mx_shape_str(b, d->ndim, d->shape));
  int rc = mx_norm_axis(def->name, "axis", P->axis, d->ndim, &info->axis);
  if (rc) return rc;
  int64_t c = d->shape[info->axis];
  static const char *const names[] = {"gamma", "mean", "invstd"};
  for (int i = 2; i < 5; i++)
    if ((rc = check_vec(def, names[i - 2], in[i], c, d->dtype, false))) return rc;
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  mx_out_set(&out[1], 1, &c, d->dtype);
  mx_out_set(&out[2], 1, &c, d->dtype);
  return MX_OK;
}
