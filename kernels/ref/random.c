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
