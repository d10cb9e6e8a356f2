/* kernels/cpu/random.c — the random ops across the pool; values are the ref's
 * (random.h), so a seed gives the same tensor on any thread count. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"
#include "random.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  mx_rng_draw d;
  mx_tensor *o;
} draw_ctx;

static void draw_range(int64_t b, int64_t e, void *vc) {
  const draw_ctx *c = vc;
  if (c->d.kind == MX_RNG_NORMAL && c->o->dtype == MX_F32) { /* a pair per Box-Muller step */
    float *y = mx_ptr(c->o);
    double z0, z1, a = c->d.a, s = c->d.b;
    int64_t i = b;
    if (i & 1) { y[i] = (float)mx_rng_value(&c->d, i); i++; }
    for (; i + 1 < e; i += 2) {
      mx_rng_normal_pair(&c->d, i >> 1, &z0, &z1);
      y[i] = (float)(a + s * z0);
      y[i + 1] = (float)(a + s * z1);
    }
    if (i < e) y[i] = (float)mx_rng_value(&c->d, i);
    return;
  }
  if (c->o->dtype == MX_F32) {
    float *y = mx_ptr(c->o);
    for (int64_t i = b; i < e; i++) y[i] = (float)mx_rng_value(&c->d, i);
  } else {
    for (int64_t i = b; i < e; i++) mx_store_f64(mx_ptr(c->o), c->o->dtype, i, mx_rng_value(&c->d, i));
  }
}

static int draw(const mx_kctx *ctx, const char *op, const void *p, mx_tensor *o) {
  draw_ctx c;
  c.o = o;
  int rc = mx_rng_setup(ctx, op, p, o->dtype, &c.d);
  if (rc) return rc;
  mx_parallel_for(o->size, 1 << 14, draw_range, &c);
  return MX_OK;
}

#define DRAW(name)                                                                       \
  int mx_cpu_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,             \
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

static void draw_x_range(int64_t b, int64_t e, void *vc) {
  const draw_ctx *c = vc;
  if (c->o->dtype == MX_F32) {
    float *y = mx_ptr(c->o);
    for (int64_t i = b; i < e; i++) y[i] = (float)mx_rng_value_x(&c->d, i);
  } else {
    for (int64_t i = b; i < e; i++) mx_store_f64(mx_ptr(c->o), c->o->dtype, i, mx_rng_value_x(&c->d, i));
  }
}

static int draw_x(const mx_kctx *ctx, const char *op, const void *p, mx_tensor *o) {
  draw_ctx c;
  c.o = o;
  int rc = mx_rng_setup_x(ctx, op, p, &c.d);
  if (rc) return rc;
  /* gamma/poisson cost ~10x a uniform per element: smaller grains */
  mx_parallel_for(o->size, 1 << 11, draw_x_range, &c);
  return MX_OK;
}

#define DRAW_X(name)                                                                     \
  int mx_cpu_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,    \
                    int nout, mx_tensor *const *out) {                                   \
    (void)nin; (void)in; (void)nout;                                                     \
    return draw_x(ctx, #name, p, out[0]);                                                \
  }
DRAW_X(random_exponential)
DRAW_X(random_gamma)
DRAW_X(random_poisson)
DRAW_X(random_negative_binomial)

typedef struct {
  const char *src;
  char *dst;
  const int64_t *perm;
  size_t row;
} shuffle_ctx;

static void shuffle_range(int64_t b, int64_t e, void *vc) {
  const shuffle_ctx *c = vc;
  for (int64_t i = b; i < e; i++)
    memcpy(c->dst + (size_t)i * c->row, c->src + (size_t)c->perm[i] * c->row, c->row);
}

/* the order is drawn serially (mx_rng_shuffle_perm: the same on any thread count);
 * only the row moves run across the pool */
int mx_cpu_shuffle(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  const mx_tensor *x = in[0];
  if (x->ndim == 0 || x->shape[0] <= 1 || mx_ptr(out[0]) == mx_ptr(x))
    return MX_DECLINE;
  int64_t n = x->shape[0], *perm;
  int rc = mx_rng_shuffle_perm(ctx, n, &perm);
  if (rc) return rc;
  shuffle_ctx c = { mx_ptr(x), mx_ptr(out[0]), perm,
                    (size_t)x->size * mx_dtype_size(x->dtype) / (size_t)n };
  mx_parallel_for(n, c.row >= 4096 ? 1 : (int64_t)(65536 / (c.row ? c.row : 1)) + 1,
                  shuffle_range, &c);
  free(perm);
  return MX_OK;
}

/* ---- generalized negative binomial, _like and sample_* ops ---- */

static void draw_any_range(int64_t b, int64_t e, void *vc) {
  const draw_ctx *c = vc;
  for (int64_t i = b; i < e; i++) mx_store_f64(mx_ptr(c->o), c->o->dtype, i, mx_rng_any(&c->d, i));
}

int mx_cpu_random_generalized_negative_binomial(const mx_kctx *ctx, const void *p, int nin,
    mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_random_generalized_negative_binomial *P = p;
  if (mx_rng_check(MX_RNG_GENNEGBIN, P->mu, P->alpha)) /* the ref words the error */
    return MX_DECLINE;
  draw_ctx c = { { MX_RNG_GENNEGBIN, P->mu, P->alpha, ctx->rng_seed, ctx->rng_first, false }, out[0] };
  mx_parallel_for(out[0]->size, 1 << 11, draw_any_range, &c);
  return MX_OK;
}

int mx_cpu_random_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  draw_ctx c;
  c.o = out[0];
  int rc = mx_rng_setup_like(ctx, p, &c.d);
  if (rc) return rc;
  mx_parallel_for(c.o->size, 1 << 11, draw_any_range, &c);
  return MX_OK;
}

typedef struct {
  mx_rng_sample s;
  mx_tensor *o;
} sample_ctx;

static void sample_range(int64_t b, int64_t e, void *vc) {
  const sample_ctx *c = vc;
  for (int64_t i = b; i < e; i++)
    mx_store_f64(mx_ptr(c->o), c->o->dtype, i, mx_rng_sample_value(&c->s, i));
}

int mx_cpu_random_sample(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)p; (void)nout;
  sample_ctx c;
  c.o = out[0];
  int rc = mx_rng_setup_sample(ctx, nin, in, c.o->dtype, &c.s);
  if (rc) return rc;
  c.s.per = in[0]->size ? c.o->size / in[0]->size : 1;
  mx_parallel_for(c.o->size, 1 << 11, sample_range, &c);
  return MX_OK;
}
