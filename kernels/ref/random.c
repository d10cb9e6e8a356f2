/* kernels/ref/random.c — reference random kernels: the formulas of random.h, one
 * element at a time, stored through mx_store_f64. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"
#include "random.h"

#include <string.h>
#include <stdlib.h>


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

/* ---- exponential, gamma, poisson, negative binomial, shuffle ---- */


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

/* ---- generalized negative binomial, _like and sample_* ops, multinomial ---- */

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
