/* creation.c — shape inference for the creation ops whose shape comes from values
 * (arange, linspace) or sizes (eye) rather than a shape param. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "shape.h"

#include <math.h>

/* MXNet's arange: ceil((stop - start) / step) values, each repeated `repeat` times;
 * with stop left out the range is [0, start). */
int mx_infer_arange(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_arange *P = p;
  double start = P->has_stop ? P->start : 0, stop = P->has_stop ? P->stop : P->start;
  if (P->step == 0) return mx_err(MX_EINVAL, "%s: step must not be 0", def->name);
  if (P->repeat < 1) return mx_err(MX_EINVAL, "%s: repeat must be >= 1, got %lld", def->name,
                                   (long long)P->repeat);
  if (!isfinite(start) || !isfinite(stop) || !isfinite(P->step))
    return mx_err(MX_EINVAL, "%s: start, stop and step must be finite", def->name);
  double n = ceil((stop - start) / P->step);
  if (n < 0) n = 0;
  if (n * (double)P->repeat > 9.0e15)
    return mx_err(MX_EINVAL, "%s: %g values is too many", def->name, n);
  int64_t s = (int64_t)n * P->repeat;
  mx_out_set(&out[0], 1, &s, P->dtype < 0 ? MX_F32 : P->dtype);
  return MX_OK;
}

int mx_infer_linspace(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_linspace *P = p;
  if (P->num < 0) return mx_err(MX_EINVAL, "%s: num must be >= 0, got %lld", def->name,
                                (long long)P->num);
  int64_t s = P->num;
  int rc = mx_shape_check_size(def->name, 1, &s);
  if (rc) return rc;
  mx_out_set(&out[0], 1, &s, P->dtype < 0 ? MX_F32 : P->dtype);
  return MX_OK;
}

/* eye: (N, M) with M = N when 0 */
int mx_infer_eye(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_eye *P = p;
  if (P->N < 0 || P->M < 0)
    return mx_err(MX_EINVAL, "%s: N and M must be >= 0, got N=%lld M=%lld", def->name,
                  (long long)P->N, (long long)P->M);
  int64_t s[2] = { P->N, P->M ? P->M : P->N };
  int rc = mx_shape_check_size(def->name, 2, s);
  if (rc) return rc;
  mx_out_set(&out[0], 2, s, P->dtype < 0 ? MX_F32 : P->dtype);
  return MX_OK;
}

