/* random.h — the per-element formulas of the random ops, shared by ref and cpu so
 * both give the same values for the same counters. Element i of a draw reads
 * counter first + i; normal pairs elements (2j, 2j+1) on counters first + 2j and
 * first + 2j + 1 (Box-Muller: cos and sin of one pair), so any element can be
 * computed alone, in any thread. */
#ifndef MX_RANDOM_H
#define MX_RANDOM_H
#include "internal.h"

#include <math.h>

enum { MX_RNG_UNIFORM, MX_RNG_NORMAL, MX_RNG_RANDINT, MX_RNG_BERNOULLI };

typedef struct mx_rng_draw {
  int kind;
  double a, b;   /* uniform/randint: [a, b); normal: loc a, scale b; bernoulli: p = a */
  uint64_t seed, first;
  bool single;   /* normal into a float32/16 tensor: Box-Muller in float (3x faster) */
} mx_rng_draw;

/* Normal pair j (elements 2j and 2j+1) from counters first + 2j and first + 2j + 1. */
static inline void mx_rng_normal_pair(const mx_rng_draw *d, int64_t j, double *z0, double *z1) {
  uint64_t c0 = d->first + 2 * (uint64_t)j;
  uint64_t b1 = mx_random_bits(d->seed, c0), b2 = mx_random_bits(d->seed, c0 + 1);
  if (d->single) {
    /* 24-bit uniforms are exact in float; 1 - u1 is in (0, 1]: no log(0) */
    float u1 = (float)(b1 >> 40) * (1.0f / 16777216.0f), u2 = (float)(b2 >> 40) * (1.0f / 16777216.0f);
    float r = sqrtf(-2.0f * log1pf(-u1)), t = 6.2831853f * u2;
    *z0 = (double)(r * cosf(t));
    *z1 = (double)(r * sinf(t));
    return;
  }
  double u1 = mx_random_unit(b1), u2 = mx_random_unit(b2);
  double r = sqrt(-2.0 * log1p(-u1)), t = 6.283185307179586 * u2;
  *z0 = r * cos(t);
  *z1 = r * sin(t);
}

static inline double mx_rng_value(const mx_rng_draw *d, int64_t i) {
  uint64_t c = d->first + (uint64_t)i;
  switch (d->kind) {
  case MX_RNG_UNIFORM:
    return d->a + (d->b - d->a) * mx_random_unit(mx_random_bits(d->seed, c));
  case MX_RNG_RANDINT: {
    double span = floor(d->b) - ceil(d->a);
    double v = ceil(d->a) + floor(mx_random_unit(mx_random_bits(d->seed, c)) * span);
    return v < d->b ? v : ceil(d->a);
  }
  case MX_RNG_BERNOULLI:
    return mx_random_unit(mx_random_bits(d->seed, c)) < d->a ? 1 : 0;
  default: { /* normal */
    double z0, z1;
    mx_rng_normal_pair(d, i >> 1, &z0, &z1);
    return d->a + d->b * (i & 1 ? z1 : z0);
  }
  }
}

/* Validates the op's params and takes the counters dispatch reserved (ctx). */
int mx_rng_setup(const mx_kctx *ctx, const char *op, const void *params, int dtype,
                 mx_rng_draw *d);
#endif
