/* nn.c — shape/dtype inference for the activation ops of the nn family (leaky_relu, its
 * backward, and the <name>_backward ops of the elementwise activations). dropout's
 * inference is in optimizer.c. */
#include "infer.h"

#include "mx_ops_gen.h"

static int float_in(const mx_op_def *def, const char *what, const mx_desc *d) {
  if (!mx_dtype_is_float(d->dtype))
    return mx_err(MX_EINVAL, "%s: %s has dtype %s; needs a float dtype", def->name, what,
                  mx_dtype_name(d->dtype));
  return MX_OK;
}

/* gamma (prelu's slope): (1) or (C) with C = data's dim 1 (0-based; MXNet's channel). */
static int check_gamma(const mx_op_def *def, const mx_desc *x, const mx_desc *g) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int64_t ch = x->ndim >= 2 ? x->shape[1] : 1;
  if (g->ndim != 1 || (g->shape[0] != 1 && g->shape[0] != ch))
    return mx_err(MX_EINVAL, "%s: gamma must have shape (1) or (%lld) (data's channels, axis 2), "
                  "got %s for data %s", def->name, (long long)ch, mx_shape_str(b, g->ndim, g->shape),
                  mx_shape_str(c, x->ndim, x->shape));
  if (g->dtype != x->dtype)
    return mx_err(MX_EINVAL, "%s: gamma has dtype %s, data %s: they must match", def->name,
                  mx_dtype_name(g->dtype), mx_dtype_name(x->dtype));
  return MX_OK;
}

static int check_type(const mx_op_def *def, int32_t t, int nin_gamma) {
  bool prelu = t == MX_LEAKY_RELU_ACT_TYPE_PRELU;
  if (prelu && !nin_gamma)
    return mx_err(MX_EINVAL, "%s: act_type=prelu needs the input gamma", def->name);
  if (!prelu && nin_gamma)
    return mx_err(MX_EINVAL, "%s: gamma is an input of act_type=prelu only", def->name);
  return MX_OK;
}

/* leaky_relu: data (float), gamma? (prelu) -> out like data, mask: rrelu in train mode
 * data's shape (the slopes; one random counter per element, info->rng_draws, reserved in
 * program order), otherwise (1). */
int mx_infer_leaky_relu(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_leaky_relu *P = p;
  const mx_desc *x = in[0];
  /* partial: prelu's unknown gamma is (C), data's channels (MXNet's LeakyReLU shape
   * inference); with data unknown nothing is said yet */
  if (nin > 1 && in[1]->ndim < 0 && x->ndim >= 0) {
    in[1]->ndim = 1;
    in[1]->shape[0] = x->ndim >= 2 ? x->shape[1] : 1;
    if (in[1]->dtype < 0) in[1]->dtype = x->dtype;
  }
  if (x->ndim < 0 || x->dtype < 0) return MX_OK;
  for (int d = 0; d < x->ndim; d++) if (x->shape[d] < 0) return MX_OK;
  if (nin > 1 && (in[1]->ndim < 0 || in[1]->shape[0] < 0)) return MX_OK;
  int rc = float_in(def, "data", x);
  if (!rc) rc = check_type(def, P->act_type, nin > 1);
  if (!rc && nin > 1) rc = check_gamma(def, x, in[1]);
  if (rc) return rc;
  if (P->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU &&
      !(P->lower_bound >= 0 && P->lower_bound <= P->upper_bound))
    return mx_err(MX_EINVAL, "%s: rrelu needs 0 <= lower_bound <= upper_bound, got %g and %g",
                  def->name, P->lower_bound, P->upper_bound);
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  int64_t one = 1;
  if (P->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU && P->training) {
    mx_out_set(&out[1], x->ndim, x->shape, x->dtype);
    info->rng_draws = mx_shape_prod(x->ndim, x->shape);
  } else {
    mx_out_set(&out[1], 1, &one, x->dtype);
  }
  return MX_OK;
}

static bool same_shape(const mx_desc *a, const mx_desc *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static int same_as(const mx_op_def *def, const char *what, const mx_desc *a, const mx_desc *x) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  if (!same_shape(a, x))
    return mx_err(MX_EINVAL, "%s: %s has shape %s, data %s: they must match", def->name, what,
                  mx_shape_str(b, a->ndim, a->shape), mx_shape_str(c, x->ndim, x->shape));
  if (a->dtype != x->dtype)
    return mx_err(MX_EINVAL, "%s: %s has dtype %s, data %s: they must match", def->name, what,
                  mx_dtype_name(a->dtype), mx_dtype_name(x->dtype));
  return MX_OK;
}

/* leaky_relu_backward: ograd, data alike, mask (data's shape or (1)), gamma? -> ddata like data, dgamma
 * like gamma ((1) without gamma). */
int mx_infer_leaky_relu_backward(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nout; (void)info;
  const struct mx_params_leaky_relu_backward *P = p;
  const mx_desc *x = in[1];
  int rc = float_in(def, "data", x);
  if (!rc) rc = same_as(def, "ograd", in[0], x);
  if (!rc && mx_shape_prod(in[2]->ndim, in[2]->shape) != 1) rc = same_as(def, "mask", in[2], x);
  if (!rc && in[2]->dtype != x->dtype)
    rc = mx_err(MX_EINVAL, "%s: mask has dtype %s, data %s: they must match", def->name,
                mx_dtype_name(in[2]->dtype), mx_dtype_name(x->dtype));
  if (!rc) rc = check_type(def, P->act_type, nin > 3);
  if (!rc && nin > 3) rc = check_gamma(def, x, in[3]);
  if (rc) return rc;
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  int64_t one = 1;
  if (nin > 3) mx_out_set(&out[1], 1, in[3]->shape, x->dtype);
  else mx_out_set(&out[1], 1, &one, x->dtype);
  return MX_OK;
}

/* <act>_backward: ograd, data alike (float) -> data's shape and dtype. */
int mx_infer_act_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int rc = float_in(def, "data", in[1]);
  if (!rc) rc = same_as(def, "ograd", in[0], in[1]);
  if (rc) return rc;
  mx_out_set(&out[0], in[1]->ndim, in[1]->shape, in[1]->dtype);
  return MX_OK;
}
