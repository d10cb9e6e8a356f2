/* creation.c — shape inference for the creation ops whose shape comes from values
 * (arange, linspace) or sizes (eye) rather than a shape param. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "random.h"
#include "shape.h"

#include <math.h>
#include <string.h>

/* MXNet's arange: ceil((stop - start) / step) values, each repeated `repeat` times;
 * with stop left out the range is [0, start). */
int mx_infer_arange(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_arange *P = p;
  double start = P->has_stop ? P->start : 0, stop = P->has_stop ? P->stop : P->start;
  if (P->step == 0) return mx_err(MX_EINVAL, "%s: step must not be 0", def->name);
  if (P->infer_range)
    return mx_err(MX_EINVAL, "%s: infer_range=true (MXNet's deprecated stop from the graph) is "
                  "not supported: give stop", def->name);
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

/* ---- random draws with a block of counters per element ---- */

int mx_infer_creation(const mx_op_def *, const void *, int, mx_desc *const *, int, mx_desc *,
                      mx_op_info *); /* core/ops/infer.c */

/* Like mx_infer_creation, but the draw reserves K counters per element (random.h:
 * rejection samplers own a fixed block each), so dispatch hands out size * K. */
int mx_infer_random_block(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  int rc = mx_infer_creation(def, p, nin, in, nout, out, info);
  if (rc) return rc;
  int64_t k = !strcmp(def->name, "random_gamma") ? MX_RNG_GAMMA_CTRS
            : !strcmp(def->name, "random_poisson") ? MX_RNG_POISSON_CTRS
            : !strcmp(def->name, "random_negative_binomial") ? MX_RNG_NEGBIN_CTRS : 1;
  if (info->rng_draws > INT64_MAX / k)
    return mx_err(MX_EINVAL, "%s: %lld elements need too many random counters", def->name,
                  (long long)info->rng_draws);
  info->rng_draws *= k;
  return MX_OK;
}

/* shuffle: output like data; one counter per Fisher-Yates step over the first axis */
int mx_infer_shuffle(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)def; (void)p; (void)nin; (void)nout;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  info->rng_draws = in[0]->ndim > 0 ? in[0]->shape[0] : 0;
  return MX_OK;
}
