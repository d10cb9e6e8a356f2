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

/* The checks batch_norm and layer_norm share: data of at least 1 dim, the axis
 * (normalised into info->axis), eps >= 0. */
static int data_axis_eps(const mx_op_def *def, const mx_desc *d, int64_t axis, double eps,
                         mx_op_info *info) {
  char b[MX_SHAPE_BUF];
  if (d->ndim < 1)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got shape %s", def->name,
                  mx_shape_str(b, d->ndim, d->shape));
  int rc = mx_norm_axis(def->name, "axis", axis, d->ndim, &info->axis);
  if (rc) return rc;
  if (!(eps >= 0)) return mx_err(MX_EINVAL, "%s: eps must be >= 0, got %g", def->name, eps);
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
  if (has_unknown(d)) return MX_OK;
  int rc = data_axis_eps(def, d, P->axis, P->eps, info);
  if (rc) return rc;
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

/* ---- group_norm, instance_norm -------------------------------------------------------- */

/* data (N, C, ...) with at least 3 dims (MXNet); groups divide C; gamma/beta (nv). */
static int gn_common(const mx_op_def *def, mx_desc *const *in, int64_t groups, bool per_channel,
                     mx_desc *out) {
  mx_desc *d = in[0];
  char b[MX_SHAPE_BUF];
  if (has_unknown(d)) return MX_OK;
  if (d->ndim < 3)
    return mx_err(MX_EINVAL, "%s: data must have at least 3 dims (N, C, spatial...), got %s",
                  def->name, mx_shape_str(b, d->ndim, d->shape));
  int64_t c = d->shape[1];
  if (per_channel) groups = c;
  else if (groups < 1 || c % groups != 0)
    return mx_err(MX_EINVAL, "%s: num_groups=%lld must be >= 1 and divide the %lld channels",
                  def->name, (long long)groups, (long long)c);
  int64_t nv = per_channel ? c : groups;
  int rc;
  if ((rc = check_vec(def, "gamma", in[1], nv, d->dtype, false))) return rc;
  if ((rc = check_vec(def, "beta", in[2], nv, d->dtype, false))) return rc;
  int64_t ms[2] = {d->shape[0], groups};
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  mx_out_set(&out[1], 2, ms, d->dtype);
  mx_out_set(&out[2], 2, ms, d->dtype);
  return MX_OK;
}

int mx_infer_group_norm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                        int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_group_norm *P = p;
  if (!(P->eps >= 0)) return mx_err(MX_EINVAL, "%s: eps must be >= 0, got %g", def->name, P->eps);
  return gn_common(def, in, P->num_groups, false, out);
}

int mx_infer_instance_norm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                           int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_instance_norm *P = p;
  if (!(P->eps >= 0)) return mx_err(MX_EINVAL, "%s: eps must be >= 0, got %g", def->name, P->eps);
  return gn_common(def, in, 0, true, out);
}

/* ograd like data, gamma (groups or C), mean and std (N, groups). */
int mx_infer_group_norm_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                                 int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_group_norm_backward *P = p;
  const mx_desc *g = in[0], *d = in[1];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (g->ndim != d->ndim || memcmp(g->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim))
    return mx_err(MX_EINVAL, "%s: ograd has shape %s but data has shape %s", def->name,
                  mx_shape_str(a, g->ndim, g->shape), mx_shape_str(b, d->ndim, d->shape));
  if (P->num_groups < 0)
    return mx_err(MX_EINVAL, "%s: num_groups must be >= 0, got %lld", def->name,
                  (long long)P->num_groups);
  mx_desc *fw[3] = {in[1], in[2], in[2]};
  int rc = gn_common(def, fw, P->num_groups, P->num_groups == 0, out);
  if (rc) return rc;
  for (int i = 3; i < 5; i++)
    if (in[i]->ndim != 2 || in[i]->shape[0] != out[1].shape[0] || in[i]->shape[1] != out[1].shape[1])
      return mx_err(MX_EINVAL, "%s: %s must have shape %s, got %s", def->name,
                    i == 3 ? "mean" : "std", mx_shape_str(a, 2, out[1].shape),
                    mx_shape_str(b, in[i]->ndim, in[i]->shape));
  int64_t nv = in[2]->shape[0];
  mx_out_set(&out[1], 1, &nv, d->dtype);
  mx_out_set(&out[2], 1, &nv, d->dtype);
  return MX_OK;
}

/* ---- lrn ------------------------------------------------------------------------------- */

static int lrn_check(const mx_op_def *def, bool has_n, int64_t n, double alpha, double beta,
                     double knorm, const mx_desc *d) {
  char b[MX_SHAPE_BUF];
  if (!has_n) return mx_err(MX_EINVAL, "%s: nsize is required", def->name);
  if (n < 1 || n % 2 == 0)
    return mx_err(MX_EINVAL, "%s: nsize must be a positive odd integer, got %lld", def->name,
                  (long long)n);
  if (!(knorm > 0) || !(alpha >= 0) || beta != beta)
    return mx_err(MX_EINVAL, "%s: needs knorm > 0 and alpha >= 0 (got knorm=%g, alpha=%g, "
                  "beta=%g)", def->name, knorm, alpha, beta);
  if (d->ndim < 2)
    return mx_err(MX_EINVAL, "%s: data must have at least 2 dims (N, C, ...), got %s", def->name,
                  mx_shape_str(b, d->ndim, d->shape));
  return MX_OK;
}

int mx_infer_lrn(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                 mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_lrn *P = p;
  int rc = lrn_check(def, P->has_nsize, P->nsize, P->alpha, P->beta, P->knorm, in[0]);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

int mx_infer_lrn_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                          int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_lrn_backward *P = p;
  const mx_desc *g = in[0], *d = in[1];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  int rc = lrn_check(def, P->has_nsize, P->nsize, P->alpha, P->beta, P->knorm, d);
  if (rc) return rc;
  if (g->ndim != d->ndim || memcmp(g->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim))
    return mx_err(MX_EINVAL, "%s: ograd has shape %s but data has shape %s", def->name,
                  mx_shape_str(a, g->ndim, g->shape), mx_shape_str(b, d->ndim, d->shape));
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  return MX_OK;
}

/* ---- l2_normalization ------------------------------------------------------------------ */

/* mode instance (0): over dims 1..; channel (1): over dim 1; spatial (2): over dims 2..
 * info->axes marks the summed dims; norm keeps them as size 1. */
int mx_infer_l2_normalization(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                              int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_l2_normalization *P = p;
  const mx_desc *d = in[0];
  char b[MX_SHAPE_BUF];
  int need = P->mode == 0 ? 1 : P->mode == 1 ? 2 : 3;
  static const char *const modes[] = {"instance", "channel", "spatial"};
  if (d->ndim < need)
    return mx_err(MX_EINVAL, "%s: mode %s needs data of at least %d dims, got %s", def->name,
                  modes[P->mode], need, mx_shape_str(b, d->ndim, d->shape));
  if (!(P->eps >= 0)) return mx_err(MX_EINVAL, "%s: eps must be >= 0, got %g", def->name, P->eps);
  int64_t ns[MX_MAX_DIM];
  for (int i = 0; i < d->ndim; i++) {
    bool red = P->mode == 0 ? i >= 1 : P->mode == 1 ? i == 1 : i >= 2;
    info->axes[i] = red;
    ns[i] = red ? 1 : d->shape[i];
  }
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  mx_out_set(&out[1], d->ndim, ns, d->dtype);
  return MX_OK;
}

/* ---- layer_norm ----------------------------------------- */

/* layer_norm(data, gamma, beta): statistics over `axis` (C = data.shape[axis]); gamma and
 * beta (C), filled when unknown; out like data, mean and std like data with axis cut to 1
 * (MXNet's LayerNorm outputs). */
int mx_infer_layer_norm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                        int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_layer_norm *P = p;
  mx_desc *d = in[0];
  if (has_unknown(d)) return MX_OK;
  int rc = data_axis_eps(def, d, P->axis, P->eps, info);
  if (rc) return rc;
  int64_t c = d->shape[info->axis];
  if ((rc = check_vec(def, "gamma", in[1], c, d->dtype, false))) return rc;
  if ((rc = check_vec(def, "beta", in[2], c, d->dtype, false))) return rc;
  int64_t s[MX_MAX_DIM];
  memcpy(s, d->shape, sizeof(int64_t) * (size_t)d->ndim);
  s[info->axis] = 1;
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  mx_out_set(&out[1], d->ndim, s, d->dtype);
  mx_out_set(&out[2], d->ndim, s, d->dtype);
  return MX_OK;
}

/* layer_norm_backward(ograd, data, gamma, mean, std) -> ddata, dgamma, dbeta */
int mx_infer_layer_norm_backward(const mx_op_def *def, const void *p, int nin,
                                 mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_layer_norm_backward *P = p;
  const mx_desc *g = in[0], *d = in[1];
  char b[MX_SHAPE_BUF], e[MX_SHAPE_BUF];
  if (d->ndim < 1)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got shape %s", def->name,
                  mx_shape_str(b, d->ndim, d->shape));
  int rc = mx_norm_axis(def->name, "axis", P->axis, d->ndim, &info->axis);
  if (rc) return rc;
  int64_t c = d->shape[info->axis];
  if (g->ndim != d->ndim || memcmp(g->shape, d->shape, sizeof(int64_t) * (size_t)d->ndim))
    return mx_err(MX_EINVAL, "%s: ograd %s must have data's shape %s", def->name,
                  mx_shape_str(b, g->ndim, g->shape), mx_shape_str(e, d->ndim, d->shape));
  if (in[2]->ndim != 1 || in[2]->shape[0] != c)
    return mx_err(MX_EINVAL, "%s: gamma must have shape (%lld), got %s", def->name,
                  (long long)c, mx_shape_str(b, in[2]->ndim, in[2]->shape));
  int64_t s[MX_MAX_DIM];
  memcpy(s, d->shape, sizeof(int64_t) * (size_t)d->ndim);
  s[info->axis] = 1;
  for (int k = 3; k < 5; k++)
    if (in[k]->ndim != d->ndim || memcmp(in[k]->shape, s, sizeof(int64_t) * (size_t)d->ndim))
      return mx_err(MX_EINVAL, "%s: %s must have shape %s (data's with axis %d cut to 1), got %s",
                    def->name, k == 3 ? "mean" : "std", mx_shape_str(b, d->ndim, s),
                    info->axis + 1, mx_shape_str(e, in[k]->ndim, in[k]->shape));
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  mx_out_set(&out[1], 1, &c, d->dtype);
  mx_out_set(&out[2], 1, &c, d->dtype);
  return MX_OK;
}
