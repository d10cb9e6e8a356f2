/* kernels/cpu/random.c — the random ops across the pool; values are the ref's
 * (random.h), so a seed gives the same tensor on any thread count. */
#include "mx_ops_gen.h"
#include "internal.h"
#include "random.h"

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
