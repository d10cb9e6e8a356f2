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
