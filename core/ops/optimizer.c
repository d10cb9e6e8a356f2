/* core/ops/optimizer.c — inference for the fused optimizer updates (optable family
 * "optimizer") and for the nn ops (dropout, activation). */
#include "infer.h"
#include "mx_ops_gen.h"

#include <string.h>

/* Largest finite value of a float dtype (the weight's: the cpu kernels compute in it). */
static double dtype_max(int dtype) {
  switch (dtype) {
  case MX_F16: return 65504.0;
  case MX_BF16: return 3.3895313892515355e38;
  case MX_F32: return 3.4028234663852886e38;
  default: return 1.7976931348623157e308;
  }
}

/* The hyper-parameters: every one finite (Inf/NaN make every weight NaN or Inf), lr, wd,
 * rescale_grad, clip_gradient, eta and clip_weights representable in the weight's dtype
 * (the cpu kernels compute in it, the reference in double: past that they differ);
 * beta1, beta2 in [0, 1) (Adam's bias correction divides by 1 - beta^t), rho in [0, 1]
 * (a decay factor), epsilon > 0 (the denominator's guard). Params are read through the
 * op's param table: this file does not depend on the generated structs. */
static int check_hyper(const mx_op_def *def, const void *p, int wdtype) {
  double lim = dtype_max(wdtype);
  for (int i = 0; i < def->nparams; i++) {
    if (def->params[i].type != MX_PT_FLOAT) continue;
    const char *n = def->params[i].name;
    double v = *(const double *)((const char *)p + def->params[i].offset);
    if (!(v - v == 0))
      return mx_err(MX_EINVAL, "%s: %s=%g must be finite", def->name, n, v);
    if (strcmp(n, "beta1") == 0 || strcmp(n, "beta2") == 0) {
      if (!(v >= 0 && v < 1))
        return mx_err(MX_EINVAL, "%s: %s=%g must be in [0, 1)", def->name, n, v);
    } else if (strcmp(n, "rho") == 0) {
      if (!(v >= 0 && v <= 1))
        return mx_err(MX_EINVAL, "%s: %s=%g must be in [0, 1]", def->name, n, v);
    } else if (strcmp(n, "epsilon") == 0) {
      if (!(v > 0 && v <= lim))
        return mx_err(MX_EINVAL, "%s: epsilon=%g must be > 0 and at most %g (%s weight)",
                      def->name, v, lim, mx_dtype_name(wdtype));
    } else if (!(v >= -lim && v <= lim)) {
      return mx_err(MX_EINVAL, "%s: %s=%g is out of range for a %s weight (|%s| <= %g)",
                    def->name, n, v, mx_dtype_name(wdtype), n, lim);
    }
  }
  return MX_OK;
}

/* Fused update ops: inputs (weight, grad, state...) all of weight's shape and dtype;
 * outputs (new weight, new states...) likewise. Callers pass out={weight, states...}
 * to update in place. Hyper-parameters as check_hyper says. */
int mx_infer_update(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  static const char *const names[] = {"weight", "grad", "state 1", "state 2", "state 3",
                                      "state 4"};
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  const mx_desc *w = in[0];
  for (int i = 1; i < nin; i++) {
    const char *n = i < 6 ? names[i] : "state";
    if (in[i]->ndim != w->ndim ||
        memcmp(in[i]->shape, w->shape, sizeof(int64_t) * (size_t)w->ndim) != 0)
      return mx_err(MX_EINVAL, "%s: %s has shape %s but weight has shape %s", def->name, n,
                    mx_shape_str(a, in[i]->ndim, in[i]->shape), mx_shape_str(b, w->ndim, w->shape));
    if (in[i]->dtype != w->dtype)
      return mx_err(MX_EINVAL, "%s: %s has dtype %s but weight has dtype %s", def->name, n,
                    mx_dtype_name(in[i]->dtype), mx_dtype_name(w->dtype));
  }
  int rc = check_hyper(def, p, w->dtype);
  if (rc) return rc;
  for (int i = 0; i < nout; i++) mx_out_set(&out[i], w->ndim, w->shape, w->dtype);
  return MX_OK;
}

/* ftml_update: as mx_infer_update, and lr > 0, t >= 1 (the step divides by lr and by
 * 1 - beta1^t). */
int mx_infer_ftml_update(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  int rc = mx_infer_update(def, p, nin, in, nout, out, info);
  if (rc) return rc;
  for (int i = 0; i < def->nparams; i++) {
    const char *n = def->params[i].name, *base = (const char *)p + def->params[i].offset;
    if (strcmp(n, "lr") == 0 && !(*(const double *)base > 0))
      return mx_err(MX_EINVAL, "%s: lr=%g must be > 0", def->name, *(const double *)base);
    if (strcmp(n, "t") == 0 && *(const int64_t *)base < 1)
      return mx_err(MX_EINVAL, "%s: t=%lld must be >= 1 (the update count)", def->name,
                    (long long)*(const int64_t *)base);
  }
  return MX_OK;
}

/* dropout: out[0] like data; out[1] the mask: data's shape with the `axes` dims set
 * to 1 (a mask shared along those axes). p must be in [0, 1]. Params are read
 * through the op's param table so this file does not depend on the generated struct.
 *
 * When the op will draw (train mode or mode "always", p > 0) it asks for one random
 * counter per mask element (info->rng_draws): dispatch reserves them in program order,
 * whatever the engine's schedule, so masks are reproducible under mx.random.seed. */
int mx_infer_dropout(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const mx_desc *x = in[0];
  const mx_tuple *axes = NULL;
  double prob = 0.5;
  bool training = false;
  int32_t mode = 0;
  for (int i = 0; i < def->nparams; i++) {
    const char *base = (const char *)p + def->params[i].offset;
    const char *n = def->params[i].name;
    if (strcmp(n, "axes") == 0) axes = (const mx_tuple *)base;
    else if (strcmp(n, "p") == 0) prob = *(const double *)base;
    else if (strcmp(n, "training") == 0) training = *(const bool *)base;
    else if (strcmp(n, "mode") == 0) mode = *(const int32_t *)base;
  }
  if (!(prob >= 0 && prob <= 1))
    return mx_err(MX_EINVAL, "%s: p=%g must be in [0, 1]", def->name, prob);
  if (!mx_dtype_is_float(x->dtype))
    return mx_err(MX_EINVAL, "%s: data has dtype %s; dropout needs a float dtype", def->name,
                  mx_dtype_name(x->dtype));
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  int64_t ms[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) ms[d] = x->shape[d];
  if (axes && axes->n > 0) {
    bool mask[MX_MAX_DIM];
    int rc = mx_norm_axes(def->name, "axes", axes, x->ndim, mask);
    if (rc) return rc;
    for (int d = 0; d < x->ndim; d++) if (mask[d]) ms[d] = 1;
  }
  mx_out_set(&out[1], x->ndim, ms, x->dtype);
  if ((training || mode == MX_DROPOUT_MODE_ALWAYS) && prob > 0) info->rng_draws = mx_shape_prod(x->ndim, ms);
  return MX_OK;
}

/* ---- multi-precision updates: mp_sgd_update, mp_sgd_mom_update ----
 * weight and grad of one float dtype; the states (mom, weight32) float32, all of
 * weight's shape; outputs (weight, states...) of their inputs' dtypes. Hyper-parameters
 * checked against float32 (the step runs on the master copy). */
int mx_infer_mp_update(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)info;
  static const char *const names[] = { "weight", "grad", "state 1", "state 2" };
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  const mx_desc *w = in[0];
  for (int i = 1; i < nin; i++) {
    const char *n = i < 4 ? names[i] : "state";
    if (i == nin - 1) n = "weight32";
    if (in[i]->ndim != w->ndim ||
        memcmp(in[i]->shape, w->shape, sizeof(int64_t) * (size_t)w->ndim) != 0)
      return mx_err(MX_EINVAL, "%s: %s has shape %s but weight has shape %s", def->name, n,
                    mx_shape_str(a, in[i]->ndim, in[i]->shape), mx_shape_str(b, w->ndim, w->shape));
    int want = i == 1 ? w->dtype : MX_F32;
    if (in[i]->dtype != want)
      return mx_err(MX_EINVAL, "%s: %s has dtype %s but must be %s", def->name, n,
                    mx_dtype_name(in[i]->dtype), mx_dtype_name(want));
  }
  int rc = check_hyper(def, p, MX_F32);
  if (rc) return rc;
  for (int i = 0; i < nout; i++) mx_out_set(&out[i], w->ndim, w->shape, i == 0 ? w->dtype : MX_F32);
  return MX_OK;
}
