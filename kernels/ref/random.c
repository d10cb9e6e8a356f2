/* kernels/ref/random.c — reference random kernels: the formulas of random.h, one
 * element at a time, stored through mx_store_f64. */
#include "mx_ops_gen.h"
#include "ref.h"
#include "random.h"

#include <string.h>

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

static int draw(const mx_kctx *ctx, const char *op, const void *p, mx_tensor *o) {
  mx_rng_draw d;
  int rc = mx_rng_setup(ctx, op, p, o->dtype, &d);
  if (rc) return rc;
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, mx_rng_value(&d, i));
  return MX_OK;
}

#define DRAW(name)                                                                       \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
                    mx_tensor *const *out) {                                             \
    (void)nin; (void)in; (void)nout;                                                     \
    return draw(ctx, #name, p, out[0]);                                                       \
  }
DRAW(random_uniform)
DRAW(random_normal)
DRAW(random_randint)
DRAW(random_bernoulli)
DRAW(random_uniform_like)
DRAW(random_normal_like)

/* ---- exponential, gamma, poisson, negative binomial, shuffle (issue 14) ---- */
#include <stdlib.h>

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

static int draw_x(const mx_kctx *ctx, const char *op, const void *p, mx_tensor *o) {
  mx_rng_draw d;
  int rc = mx_rng_setup_x(ctx, op, p, &d);
  if (rc) return rc;
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, mx_rng_value_x(&d, i));
  return MX_OK;
}

#define DRAW_X(prefix, name)                                                             \
  int mx_##prefix##_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, \
                           int nout, mx_tensor *const *out) {                            \
    (void)nin; (void)in; (void)nout;                                                     \
    return draw_x(ctx, #name, p, out[0]);                                                \
  }
DRAW_X(ref, random_exponential)
DRAW_X(ref, random_gamma)
DRAW_X(ref, random_poisson)
DRAW_X(ref, random_negative_binomial)

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

int mx_ref_shuffle(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0];
  mx_tensor *o = out[0];
  size_t total = (size_t)x->size * mx_dtype_size(x->dtype);
  if (x->ndim == 0 || x->shape[0] <= 1) {
    if (mx_ptr(o) != mx_ptr(x)) memmove(mx_ptr(o), mx_ptr(x), total);
    return MX_OK;
  }
  int64_t n = x->shape[0], *perm;
  size_t row = total / (size_t)n;
  int rc = mx_rng_shuffle_perm(ctx, n, &perm);
  if (rc) return rc;
  const char *src = mx_ptr(x);
  char *copy = NULL;
  if (mx_ptr(o) == mx_ptr(x)) { /* out=data: move the rows from a copy */
    copy = malloc(total ? total : 1);
    if (!copy) { free(perm); return mx_err(MX_ENOMEM, "shuffle: out of memory"); }
    memcpy(copy, src, total);
    src = copy;
  }
  for (int64_t i = 0; i < n; i++)
    memcpy((char *)mx_ptr(o) + (size_t)i * row, src + (size_t)perm[i] * row, row);
  free(copy);
  free(perm);
  return MX_OK;
}

/* ---- generalized negative binomial, _like and sample_* ops, multinomial (issue 14) ---- */

int mx_ref_random_generalized_negative_binomial(const mx_kctx *ctx, const void *p, int nin,
    mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  const struct mx_params_random_generalized_negative_binomial *P = p;
  const char *bad = mx_rng_check(MX_RNG_GENNEGBIN, P->mu, P->alpha);
  if (bad)
    return mx_err(MX_EINVAL, "random_generalized_negative_binomial: %s, got mu=%g alpha=%g", bad,
                  P->mu, P->alpha);
  mx_rng_draw d = { MX_RNG_GENNEGBIN, P->mu, P->alpha, ctx->rng_seed, ctx->rng_first, false };
  mx_tensor *o = out[0];
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, mx_rng_any(&d, i));
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

int mx_ref_random_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  mx_rng_draw d;
  int rc = mx_rng_setup_like(ctx, p, &d);
  if (rc) return rc;
  mx_tensor *o = out[0];
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, mx_rng_any(&d, i));
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

int mx_ref_random_sample(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)p; (void)nout;
  mx_tensor *o = out[0];
  mx_rng_sample s;
  int rc = mx_rng_setup_sample(ctx, nin, in, o->dtype, &s);
  if (rc) return rc;
  s.per = in[0]->size ? o->size / in[0]->size : 1;
  for (int64_t i = 0; i < o->size; i++)
    mx_store_f64(mx_ptr(o), o->dtype, i, mx_rng_sample_value(&s, i));
  return MX_OK;
}

/* multinomial: distribution r (row r of data viewed as (R, K)) gives output elements
 * r*per .. r*per + per - 1; draw i inverts u_i (counter first + i) through the running
 * sum, the last category taking what rounding leaves over (MXNet's rule). */
int mx_ref_sample_multinomial(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)p; (void)nin;
  const mx_tensor *x = in[0];
  mx_tensor *o = out[0], *lp = nout > 1 ? out[1] : NULL;
  int64_t K = x->shape[x->ndim - 1], R = K ? x->size / K : 0;
  int64_t per = R ? o->size / R : 0;
  for (int64_t j = 0; j < x->size; j++) {
    double v = mx_load_f64(mx_ptr(x), x->dtype, j);
    if (!(v >= 0) || isinf(v))
      return mx_err(MX_EINVAL, "sample_multinomial: probabilities must be finite and >= 0, "
                    "element %lld (0-based) is %g", (long long)j, v);
  }
  for (int64_t r = 0; r < R; r++)
    for (int64_t t = 0; t < per; t++) {
      int64_t i = r * per + t;
      double u = mx_random_unit(mx_random_bits(ctx->rng_seed, ctx->rng_first + (uint64_t)i));
      double acc = 0, pk = 0;
      int64_t k = 0;
      for (; k < K; k++) {
        pk = mx_load_f64(mx_ptr(x), x->dtype, r * K + k);
        acc += pk;
        if (u < acc) break;
      }
      if (k == K) { k = K - 1; pk = mx_load_f64(mx_ptr(x), x->dtype, r * K + k); }
      mx_store_f64(mx_ptr(o), o->dtype, i, (double)(k + 1)); /* 1-based, as luamx's indices */
      if (lp) mx_store_f64(mx_ptr(lp), lp->dtype, i, log(pk));
    }
  return MX_OK;
}

/* the categories come from sample_multinomial (1-based, <= K); one out of range is an
 * error, not a stray write */
int mx_ref_sample_multinomial_backward(const mx_kctx *ctx, const void *p, int nin,
    mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0], *idx = in[1], *g = in[2];
  mx_tensor *d = out[0];
  int64_t K = x->shape[x->ndim - 1], R = K ? x->size / K : 0;
  int64_t per = R ? idx->size / R : 0;
  for (int64_t j = 0; j < d->size; j++) mx_store_f64(mx_ptr(d), d->dtype, j, 0);
  for (int64_t i = 0; i < idx->size; i++) {
    double kv = mx_load_f64(mx_ptr(idx), idx->dtype, i);
    if (!(kv >= 1 && kv <= (double)K) || kv != floor(kv))
      return mx_err(MX_EINVAL, "sample_multinomial_backward: category %g at %lld is not in "
                    "[1, %lld]", kv, (long long)i, (long long)K);
    int64_t at = (i / per) * K + (int64_t)kv - 1;
    double pk = mx_load_f64(mx_ptr(x), x->dtype, at);
    double cur = mx_load_f64(mx_ptr(d), d->dtype, at);
    mx_store_f64(mx_ptr(d), d->dtype, at, cur + mx_load_f64(mx_ptr(g), g->dtype, i) / pk);
  }
  return MX_OK;
}
