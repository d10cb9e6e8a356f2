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
