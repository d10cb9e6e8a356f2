/* random.c — inference of the issue 14 random ops declared in core/ops/random.lua whose
 * counter needs or shapes differ from the creation/random_block/same kinds: the
 * generalized negative binomial, the counter-block _like ops, sample_* (distribution
 * parameters as tensors) and multinomial, and multinomial's output count. Counters per
 * element come from kernels/ref/random.h (mx_rng_kind_of), so kernels and inference agree. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "random.h"

int mx_infer_creation(const mx_op_def *, const void *, int, mx_desc *const *, int, mx_desc *,
                      mx_op_info *); /* core/ops/infer.c */

static const char *shp(char *b, const mx_desc *t) { return mx_shape_str(b, t->ndim, t->shape); }

/* info->rng_draws = elements x counters per element, without overflow */
static int reserve(const char *op, int64_t n, mx_op_info *info) {
  int64_t k = 1;
  if (mx_rng_kind_of(op, &k, NULL) < 0) k = 1;
  if (n > INT64_MAX / k)
    return mx_err(MX_EINVAL, "%s: %lld elements need too many random counters", op, (long long)n);
  info->rng_draws = n * k;
  return MX_OK;
}

int mx_infer_random_gnb(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  int rc = mx_infer_creation(def, p, nin, in, nout, out, info);
  return rc ? rc : reserve(def->name, mx_shape_prod(out[0].ndim, out[0].shape), info);
}

int mx_infer_random_like(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return reserve(def->name, mx_shape_prod(in[0]->ndim, in[0]->shape), info);
}

/* out = P + shape where P is the parameters' (common) shape */
static int param_plus_shape(const char *op, const mx_desc *x, int keep, const mx_tuple *shape,
                            int dtype, mx_desc *o) {
  char b[MX_SHAPE_BUF];
  int n = shape->n < 0 ? 0 : shape->n;
  if (keep + n > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: parameter shape %s + shape has more than %d dims", op,
                  shp(b, x), MX_MAX_DIM);
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < keep; i++) s[i] = x->shape[i];
  for (int i = 0; i < n; i++) {
    if (shape->v[i] < 0)
      return mx_err(MX_EINVAL, "%s: negative dimension in shape %s", op,
                    mx_shape_str(b, n, shape->v));
    s[keep + i] = shape->v[i];
  }
  int rc = mx_shape_check(op, keep + n, s, dtype);
  if (rc) return rc;
  mx_out_set(o, keep + n, s, dtype);
  return MX_OK;
}

int mx_infer_random_sample(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nout;
  /* the sample_* ops share one param layout (shape, dtype): sample_uniform's struct */
  const struct mx_params_sample_uniform *P = p;
  char b1[MX_SHAPE_BUF], b2[MX_SHAPE_BUF];
  for (int i = 1; i < nin; i++) {
    if (in[i]->ndim != in[0]->ndim ||
        mx_shape_prod(in[i]->ndim, in[i]->shape) != mx_shape_prod(in[0]->ndim, in[0]->shape))
      goto mismatch;
    for (int d = 0; d < in[0]->ndim; d++)
      if (in[i]->shape[d] != in[0]->shape[d]) goto mismatch;
  }
  int dt = P->has_dtype && P->dtype >= 0 ? P->dtype : in[0]->dtype;
  if (!mx_dtype_is_float(dt))
    return mx_err(MX_EINVAL, "%s: dtype must be a float type (the parameters are floats)",
                  def->name);
  int rc = param_plus_shape(def->name, in[0], in[0]->ndim, &P->shape, dt, &out[0]);
  return rc ? rc : reserve(def->name, mx_shape_prod(out[0].ndim, out[0].shape), info);
mismatch:
  return mx_err(MX_EINVAL, "%s: the parameters must have one shape, got %s and %s", def->name,
                shp(b1, in[0]), shp(b2, in[nin - 1]));
}

int mx_nout_multinomial(const void *params) {
  const struct mx_params_sample_multinomial *P = params;
  return P->get_prob ? 2 : 1;
}

int mx_infer_random_multinomial(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin;
  const struct mx_params_sample_multinomial *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
    return mx_err(MX_EINVAL, "%s: data must have a non-empty last axis of probabilities, "
                  "got shape %s", def->name, shp(b, x));
  int dt = P->dtype < 0 ? MX_I32 : P->dtype;
  if (dt != MX_I32 && dt != MX_I64 && dt != MX_F32 && dt != MX_F64)
    return mx_err(MX_EINVAL, "%s: dtype must be int32, int64, float32 or float64 (it holds "
                  "category indices)", def->name);
  int rc = param_plus_shape(def->name, x, x->ndim - 1, &P->shape, dt, &out[0]);
  if (rc) return rc;
  if (nout > 1) mx_out_set(&out[1], out[0].ndim, out[0].shape, x->dtype);
  info->rng_draws = mx_shape_prod(out[0].ndim, out[0].shape);
  return MX_OK;
}

/* sample_multinomial_backward(data, out, ograd): data float (..., K); out (the drawn
 * categories) data.shape[:-1] + shape, ograd out's shape in data's dtype; ddata like data. */
int mx_infer_multinomial_backward(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *x = in[0], *o = in[1], *g = in[2];
  char b1[MX_SHAPE_BUF], b2[MX_SHAPE_BUF], b3[MX_SHAPE_BUF];
  if (!mx_dtype_is_float(x->dtype) || g->dtype != x->dtype)
    return mx_err(MX_EINVAL, "%s: data and ograd must share a float dtype, got %s and %s",
                  def->name, mx_dtype_name(x->dtype), mx_dtype_name(g->dtype));
  bool ok = x->ndim >= 1 && x->shape[x->ndim - 1] >= 1 && o->ndim >= x->ndim - 1 && g->ndim == o->ndim;
  for (int d = 0; ok && d < x->ndim - 1; d++) ok = o->shape[d] == x->shape[d];
  for (int d = 0; ok && d < o->ndim; d++) ok = g->shape[d] == o->shape[d];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: out %s and ograd %s do not fit data %s", def->name,
                  shp(b1, o), shp(b2, g), shp(b3, x));
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  return MX_OK;
}
