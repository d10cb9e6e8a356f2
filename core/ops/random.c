/* random.c — inference of the random ops declared in core/ops/random.lua whose counter
 * needs or shapes differ from the creation/random_block/same kinds: the generalized
 * negative binomial, the counter-block _like ops, sample_* (distribution parameters as
 * tensors) and multinomial, and multinomial's output count. Counters per element come
 * from random.h (mx_rng_kind_of), so kernels and inference agree. Then the draws' setup
 * every backend's random kernels share. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "random.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the draws' setup, shared by every backend's random kernels (random.h): what a call
 * draws (distribution, params, counters) read once from its params and inputs, so every
 * backend computes the same values from the same counters ---- */

/* the op's distribution from its params (the struct is picked by name) */
int mx_rng_setup(const mx_kctx *ctx, const char *op, const void *p, int dtype, mx_rng_draw *d) {
  memset(d, 0, sizeof *d);
  if (!strcmp(op, "random_uniform")) {
    const struct mx_params_random_uniform *P = p;
    *d = (mx_rng_draw){ MX_RNG_UNIFORM, P->low, P->high, 0, 0, false };
  } else if (!strcmp(op, "random_uniform_like")) {
    const struct mx_params_random_uniform_like *P = p;
    *d = (mx_rng_draw){ MX_RNG_UNIFORM, P->low, P->high, 0, 0, false };
  } else if (!strcmp(op, "random_normal")) {
    const struct mx_params_random_normal *P = p;
    *d = (mx_rng_draw){ MX_RNG_NORMAL, P->loc, P->scale, 0, 0, false };
  } else if (!strcmp(op, "random_normal_like")) {
    const struct mx_params_random_normal_like *P = p;
    *d = (mx_rng_draw){ MX_RNG_NORMAL, P->loc, P->scale, 0, 0, false };
  } else if (!strcmp(op, "random_randint")) {
    const struct mx_params_random_randint *P = p;
    *d = (mx_rng_draw){ MX_RNG_RANDINT, (double)P->low, (double)P->high, 0, 0, false };
  } else {
    const struct mx_params_random_bernoulli *P = p;
    *d = (mx_rng_draw){ MX_RNG_BERNOULLI, P->prob, 0, 0, 0, false };
  }
  if (!isfinite(d->a) || !isfinite(d->b))
    return mx_err(MX_EINVAL, "%s: parameters must be finite", op);
  if (d->kind == MX_RNG_UNIFORM && d->b < d->a)
    return mx_err(MX_EINVAL, "%s: high (%g) must be >= low (%g)", op, d->b, d->a);
  if (d->kind == MX_RNG_RANDINT && !(d->b > d->a))
    return mx_err(MX_EINVAL, "%s: high (%g) must be > low (%g)", op, d->b, d->a);
  if (d->kind == MX_RNG_NORMAL && d->b < 0)
    return mx_err(MX_EINVAL, "%s: scale must be >= 0, got %g", op, d->b);
  if (d->kind == MX_RNG_BERNOULLI && (d->a < 0 || d->a > 1))
    return mx_err(MX_EINVAL, "%s: prob must be in [0, 1], got %g", op, d->a);
  d->single = dtype == MX_F32 || dtype == MX_F16 || dtype == MX_BF16;
  d->seed = ctx->rng_seed; /* reserved by dispatch, in program order */
  d->first = ctx->rng_first;
  return MX_OK;
}

int mx_rng_setup_x(const mx_kctx *ctx, const char *op, const void *p, mx_rng_draw *d) {
  memset(d, 0, sizeof *d);
  if (!strcmp(op, "random_exponential")) {
    const struct mx_params_random_exponential *P = p;
    *d = (mx_rng_draw){ MX_RNG_EXPONENTIAL, P->lam, 0, 0, 0, false };
    if (!(P->lam > 0) || isinf(P->lam))
      return mx_err(MX_EINVAL, "%s: lam must be finite and > 0, got %g", op, P->lam);
  } else if (!strcmp(op, "random_gamma")) {
    const struct mx_params_random_gamma *P = p;
    *d = (mx_rng_draw){ MX_RNG_GAMMA, P->alpha, P->beta, 0, 0, false };
    if (!(P->alpha > 0) || isinf(P->alpha))
      return mx_err(MX_EINVAL, "%s: alpha must be finite and > 0, got %g", op, P->alpha);
    if (!(P->beta > 0) || isinf(P->beta))
      return mx_err(MX_EINVAL, "%s: beta must be finite and > 0, got %g", op, P->beta);
  } else if (!strcmp(op, "random_poisson")) {
    const struct mx_params_random_poisson *P = p;
    *d = (mx_rng_draw){ MX_RNG_POISSON, P->lam, 0, 0, 0, false };
    if (!(P->lam >= 0) || P->lam > 1e15)
      return mx_err(MX_EINVAL, "%s: lam must be in [0, 1e15], got %g", op, P->lam);
  } else {
    const struct mx_params_random_negative_binomial *P = p;
    *d = (mx_rng_draw){ MX_RNG_NEGBINOMIAL, (double)P->k, P->p, 0, 0, false };
    if (P->k < 1)
      return mx_err(MX_EINVAL, "%s: k must be >= 1, got %lld", op, (long long)P->k);
    if (!(P->p > 0 && P->p <= 1))
      return mx_err(MX_EINVAL, "%s: p must be in (0, 1], got %g", op, P->p);
  }
  d->seed = ctx->rng_seed;
  d->first = ctx->rng_first;
  return MX_OK;
}

/* Fisher-Yates over n rows: step j (from the last row down) swaps row j with row
 * floor(u * (j + 1)), u from counter first + (n - 1 - j); serial, so the order is one
 * function of (seed, counters) whoever moves the rows. perm[i] = source row of row i. */
int mx_rng_shuffle_perm(const mx_kctx *ctx, int64_t n, int64_t **perm) {
  *perm = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  if (!*perm) return mx_err(MX_ENOMEM, "shuffle: out of memory for %lld rows", (long long)n);
  int64_t *q = *perm;
  for (int64_t i = 0; i < n; i++) q[i] = i;
  for (int64_t j = n - 1; j > 0; j--) {
    double u = mx_random_unit(mx_random_bits(ctx->rng_seed, ctx->rng_first + (uint64_t)(n - 1 - j)));
    int64_t r = (int64_t)(u * (double)(j + 1));
    if (r > j) r = j;
    int64_t t = q[j]; q[j] = q[r]; q[r] = t;
  }
  return MX_OK;
}

int mx_rng_setup_like(const mx_kctx *ctx, const void *p, mx_rng_draw *d) {
  const char *op = ctx->def->name;
  memset(d, 0, sizeof *d);
  d->kind = mx_rng_kind_of(op, NULL, NULL);
  if (!strcmp(op, "random_exponential_like")) {
    d->a = ((const struct mx_params_random_exponential_like *)p)->lam;
  } else if (!strcmp(op, "random_gamma_like")) {
    d->a = ((const struct mx_params_random_gamma_like *)p)->alpha;
    d->b = ((const struct mx_params_random_gamma_like *)p)->beta;
  } else if (!strcmp(op, "random_poisson_like")) {
    d->a = ((const struct mx_params_random_poisson_like *)p)->lam;
  } else if (!strcmp(op, "random_negative_binomial_like")) {
    d->a = (double)((const struct mx_params_random_negative_binomial_like *)p)->k;
    d->b = ((const struct mx_params_random_negative_binomial_like *)p)->p;
  } else if (!strcmp(op, "random_generalized_negative_binomial_like")) {
    d->a = ((const struct mx_params_random_generalized_negative_binomial_like *)p)->mu;
    d->b = ((const struct mx_params_random_generalized_negative_binomial_like *)p)->alpha;
  } else {
    return mx_err(MX_EINVAL, "%s: not a random _like op", op);
  }
  const char *bad = mx_rng_check(d->kind, d->a, d->b);
  if (bad) return mx_err(MX_EINVAL, "%s: %s, got %g, %g", op, bad, d->a, d->b);
  d->seed = ctx->rng_seed;
  d->first = ctx->rng_first;
  return MX_OK;
}

/* Every parameter element is checked before any draw: a bad one is an error naming its
 * position, never a NaN in the output. */
int mx_rng_setup_sample(const mx_kctx *ctx, int nin, mx_tensor *const *in, int out_dtype,
                        mx_rng_sample *s) {
  const char *op = ctx->def->name;
  memset(s, 0, sizeof *s);
  int np = 0;
  s->d.kind = mx_rng_kind_of(op, NULL, &np);
  if (s->d.kind < 0 || nin != np) return mx_err(MX_EINVAL, "%s: not a sample_* op", op);
  s->pa = in[0];
  s->pb = np > 1 ? in[1] : NULL;
  int64_t n = in[0]->size;
  for (int64_t j = 0; j < n; j++) {
    double a = mx_load_f64(mx_ptr(s->pa), s->pa->dtype, j);
    double b = s->pb ? mx_load_f64(mx_ptr(s->pb), s->pb->dtype, j) : 0;
    const char *bad = mx_rng_check(s->d.kind, a, b);
    if (bad)
      return s->pb ? mx_err(MX_EINVAL, "%s: parameter element %lld (0-based) %s, got %g, %g",
                            op, (long long)j, bad, a, b)
                   : mx_err(MX_EINVAL, "%s: parameter element %lld (0-based) %s, got %g", op,
                            (long long)j, bad, a);
  }
  s->d.single = s->d.kind == MX_RNG_NORMAL && (out_dtype == MX_F32 || out_dtype == MX_F16 ||
                                               out_dtype == MX_BF16);
  s->d.seed = ctx->rng_seed;
  s->d.first = ctx->rng_first;
  return MX_OK;
}
