/* softmax.c — shape/dtype inference for softmax and log_softmax. */
#include "infer.h"

#include "mx_ops_gen.h"

/* softmax, log_softmax: {int64_t axis; double temperature}; float output like input. */
int mx_infer_softmax(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_softmax *sp = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  if (x->ndim == 0)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got shape %s", def->name,
                  mx_shape_str(b, x->ndim, x->shape));
  int rc = mx_norm_axis(def->name, "axis", sp->axis, x->ndim, &info->axis);
  if (rc) return rc;
  if (!(sp->temperature > 0))
    return mx_err(MX_EINVAL, "%s: temperature must be > 0, got %g", def->name, sp->temperature);
  mx_out_set(&out[0], x->ndim, x->shape, mx_dtype_is_float(x->dtype) ? x->dtype : MX_F32);
  return MX_OK;
}

/* ---------------------------------------------------------------- lengths and masks
 * Every struct below starts {int64_t axis; double temperature} like softmin's. */

/* The length input: data's shape without the axis. */
static int check_length(const mx_op_def *def, const mx_desc *x, int ax, const mx_desc *l) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  bool ok = l->ndim == x->ndim - 1;
  for (int d = 0, k = 0; ok && d < x->ndim; d++)
    if (d != ax) ok = l->shape[k++] == x->shape[d];
  if (x->ndim == 1 && l->ndim == 1) ok = l->shape[0] == 1; /* 1-D data: () or (1) */
  if (!ok)
    return mx_err(MX_EINVAL, "%s: length must have data's shape %s without axis %d, got %s",
                  def->name, mx_shape_str(b, x->ndim, x->shape), ax + 1,
                  mx_shape_str(c, l->ndim, l->shape));
  return MX_OK;
}

/* softmax, log_softmax: {axis, temperature, use_length}, data and the optional length. */
int mx_infer_softmax_length(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                            int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_softmax *sp = p;
  int rc = mx_infer_softmax(def, p, nin, in, nout, out, info);
  if (rc) return rc;
  if (sp->has_dtype) {
    if (sp->dtype != MX_F16 && sp->dtype != MX_BF16 && sp->dtype != MX_F32 && sp->dtype != MX_F64)
      return mx_err(MX_EINVAL, "%s: dtype must be a float dtype (float16, bfloat16, float32, "
                    "float64), got %s", def->name, mx_dtype_name(sp->dtype));
    out[0].dtype = sp->dtype;
  }
  if (sp->use_length && nin < 2)
    return mx_err(MX_EINVAL, "%s: use_length is true but no length input was given", def->name);
  if (!sp->use_length && nin > 1)
    return mx_err(MX_EINVAL, "%s: a length input was given but use_length is false (pass "
                  "use_length = true)", def->name);
  return nin > 1 ? check_length(def, in[0], info->axis, in[1]) : MX_OK;
}

/* The pair (ograd, out) of a backward: same shape. */
static int check_pair(const mx_op_def *def, const mx_desc *g, const mx_desc *y) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  bool ok = g->ndim == y->ndim && g->ndim > 0;
  for (int d = 0; ok && d < g->ndim; d++) ok = g->shape[d] == y->shape[d];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd %s and out %s must have one shape (at least 1 dim)",
                  def->name, mx_shape_str(b, g->ndim, g->shape), mx_shape_str(c, y->ndim, y->shape));
  return MX_OK;
}

int mx_infer_log_softmax_length_backward(const mx_op_def *def, const void *p, int nin,
                                         mx_desc *const *in, int nout, mx_desc *out,
                                         mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_softmin *sp = p;
  int rc = check_pair(def, in[0], in[1]);
  if (!rc) rc = mx_norm_axis(def->name, "axis", sp->axis, in[0]->ndim, &info->axis);
  if (!rc) rc = check_length(def, in[0], info->axis, in[2]);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

/* mask: data's rank, each dim data's or 1. */
static int check_mask(const mx_op_def *def, const mx_desc *x, const mx_desc *m) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  bool ok = m->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = m->shape[d] == x->shape[d] || m->shape[d] == 1;
  if (!ok)
    return mx_err(MX_EINVAL, "%s: mask %s must have data's rank and each dim of data %s or 1",
                  def->name, mx_shape_str(c, m->ndim, m->shape), mx_shape_str(b, x->ndim, x->shape));
  return MX_OK;
}

int mx_infer_masked_softmax(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                            int nout, mx_desc *out, mx_op_info *info) {
  const mx_desc *x = in[0];
  if (x->dtype == MX_BOOL)
    return mx_err(MX_EINVAL, "%s: data must be numeric, got dtype bool", def->name);
  int rc = mx_infer_softmax(def, p, nin, in, nout, out, info);
  return rc ? rc : check_mask(def, x, in[1]);
}

int mx_infer_masked_log_softmax_backward(const mx_op_def *def, const void *p, int nin,
                                         mx_desc *const *in, int nout, mx_desc *out,
                                         mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_softmin *sp = p;
  if (in[0]->dtype == MX_BOOL || in[1]->dtype == MX_BOOL)
    return mx_err(MX_EINVAL, "%s: ograd and out must be numeric, got dtype bool", def->name);
  int rc = check_pair(def, in[0], in[1]);
  if (!rc) rc = mx_norm_axis(def->name, "axis", sp->axis, in[0]->ndim, &info->axis);
  if (!rc) rc = check_mask(def, in[0], in[2]);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}
