/* random.h — the random streams' definition: the per-element formulas of the random ops
 * and the counters each element takes, shared by inference (how many counters a call
 * reserves) and by every backend's kernels, so all give the same values for the same
 * counters. Element i of a draw reads
 * counter first + i; normal pairs elements (2j, 2j+1) on counters first + 2j and
 * first + 2j + 1 (Box-Muller: cos and sin of one pair), so any element can be
 * computed alone, in any thread. */
#ifndef MX_RANDOM_H
#define MX_RANDOM_H
#include "internal.h"

#include <math.h>
#include <string.h>

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
/* ---- exponential, gamma, poisson, negative binomial ----
 * Still one pure function of (seed, counter) per element, but rejection samplers need
 * an unknown number of uniforms, so each element owns a FIXED block of counters:
 * element i reads counters first + i * K .. first + i * K + K - 1 (K below, per kind)
 * and dispatch reserves size * K of them (mx_infer_random_block). A sampler that
 * rejects every trial of its block falls back to a deterministic value (documented
 * per sampler); the chance of that is below 1e-8 per element. */
enum { MX_RNG_EXPONENTIAL = 16, MX_RNG_GAMMA, MX_RNG_POISSON, MX_RNG_NEGBINOMIAL };
enum {
  MX_RNG_GAMMA_CTRS = 32,   /* 1 boost uniform (alpha < 1) + 10 trials of 3 */
  MX_RNG_POISSON_CTRS = 16, /* inversion: 1 uniform; PTRS: 8 trials of 2 */
  MX_RNG_NEGBIN_CTRS = MX_RNG_GAMMA_CTRS + MX_RNG_POISSON_CTRS
};

static inline double mx_rng_u(uint64_t seed, uint64_t c) {
  return mx_random_unit(mx_random_bits(seed, c));
}

/* Gamma(alpha, 1) from counters c .. c + 31: Marsaglia-Tsang (2000). Trial t uses
 * c + 1 + 3t (two for a Box-Muller normal, one for the acceptance uniform); alpha < 1
 * draws Gamma(alpha + 1) and scales by U^(1/alpha), U from counter c. Acceptance is
 * >= 95% per trial, so 10 trials all fail with chance < 1e-13; then it returns d, the
 * distribution's centre (deterministic). */
static inline double mx_rng_gamma1(uint64_t seed, uint64_t c, double alpha) {
  double boost = 1;
  if (alpha < 1) {
    double u = mx_rng_u(seed, c);
    boost = pow(1.0 - u, 1.0 / alpha); /* 1 - u in (0, 1] */
    alpha += 1;
  }
  double d = alpha - 1.0 / 3.0, cc = 1.0 / sqrt(9.0 * d);
  for (int t = 0; t < 10; t++) {
    uint64_t k = c + 1 + 3 * (uint64_t)t;
    double u1 = mx_rng_u(seed, k), u2 = mx_rng_u(seed, k + 1), u = mx_rng_u(seed, k + 2);
    double x = sqrt(-2.0 * log1p(-u1)) * cos(6.283185307179586 * u2);
    double v = 1 + cc * x;
    if (v <= 0) continue;
    v = v * v * v;
    double x2 = x * x;
    if (u < 1 - 0.0331 * x2 * x2) return d * v * boost;
    if (u > 0 && log(u) < 0.5 * x2 + d * (1 - v + log(v))) return d * v * boost;
  }
  return d * boost;
}

/* log(k!) without lgamma (not thread-safe: it writes signgam) */
static inline double mx_rng_logfact(double k) {
  if (k < 16) {
    double s = 0;
    for (int j = 2; j <= (int)k; j++) s += log((double)j);
    return s;
  }
  double x = k + 1, x2 = x * x; /* Stirling series of lgamma(x), error < 1e-13 */
  return (x - 0.5) * log(x) - x + 0.9189385332046728 +
         (1.0 / 12 - (1.0 / 360 - 1.0 / (1260 * x2)) / x2) / x;
}

/* Poisson(lam) from counters c .. c + 15. lam < 10: inversion of one uniform (exact,
 * O(lam) steps). lam in [10, 1e34): Hormann's PTRS (1993), trial t on c + 2t, c + 2t + 1,
 * acceptance > 89%; if all 8 trials reject (chance < 1e-8) it returns floor(lam), the
 * mode (deterministic). */
static inline double mx_rng_poisson1(uint64_t seed, uint64_t c, double lam) {
  if (lam <= 0) return 0;
  if (lam < 10) {
    double u = mx_rng_u(seed, c), p = exp(-lam), f = p, k = 0;
    while (u >= f) { /* stop where the terms no longer move f (rounding: u ~ 1 - 1e-16) */
      k += 1;
      p *= lam / k;
      if (p < f * 1e-17) break;
      f += p;
    }
    return k;
  }
  /* beyond 1e34 the standard deviation is below a double's resolution of lam (also
   * keeps an infinite lam from negative_binomial's gamma at tiny p out of PTRS) */
  if (!(lam < 1e34)) return lam;
  double slam = sqrt(lam), loglam = log(lam);
  double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
  double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2);
  for (int t = 0; t < 8; t++) {
    double U = mx_rng_u(seed, c + 2 * (uint64_t)t) - 0.5, V = mx_rng_u(seed, c + 2 * (uint64_t)t + 1);
    double us = 0.5 - fabs(U);
    double k = floor((2 * a / us + b) * U + lam + 0.43);
    if (us >= 0.07 && V <= vr) return k;
    if (k < 0 || (us < 0.013 && V > us)) continue;
    if (V > 0 && log(V) + log(invalpha) - log(a / (us * us) + b) <=
                     -lam + k * loglam - mx_rng_logfact(k))
      return k;
  }
  return floor(lam);
}

/* element i of an exponential/gamma/poisson/negative-binomial draw
 * (exponential: rate a; gamma: shape a, scale b; poisson: a; negbin: k a, p b) */
static inline double mx_rng_value_x(const mx_rng_draw *d, int64_t i) {
  uint64_t ui = (uint64_t)i;
  switch (d->kind) {
  case MX_RNG_EXPONENTIAL: /* 1 counter; 1 - u in (0, 1]: finite */
    return -log1p(-mx_rng_u(d->seed, d->first + ui)) / d->a;
  case MX_RNG_GAMMA:
    return d->b * mx_rng_gamma1(d->seed, d->first + ui * MX_RNG_GAMMA_CTRS, d->a);
  case MX_RNG_POISSON:
    return mx_rng_poisson1(d->seed, d->first + ui * MX_RNG_POISSON_CTRS, d->a);
  default: { /* negative binomial as MXNet: Poisson(Gamma(k, (1 - p) / p)) */
    uint64_t c = d->first + ui * MX_RNG_NEGBIN_CTRS;
    double lam = d->b >= 1 ? 0 : (1 - d->b) / d->b * mx_rng_gamma1(d->seed, c, d->a);
    return mx_rng_poisson1(d->seed, c + MX_RNG_GAMMA_CTRS, lam);
  }
  }
}

/* ---- generalized negative binomial, _like and sample_* ops ---- */
enum { MX_RNG_GENNEGBIN = 32 };

/* Generalized negative binomial (mean mu, dispersion alpha) from counters c .. c + 47,
 * as MXNet: Poisson(Gamma(1/alpha, mu*alpha)); alpha = 0 is Poisson(mu). */
static inline double mx_rng_gnb1(uint64_t seed, uint64_t c, double mu, double alpha) {
  double lam = alpha == 0 ? mu : (mu == 0 ? 0 : mu * alpha * mx_rng_gamma1(seed, c, 1.0 / alpha));
  return mx_rng_poisson1(seed, c + MX_RNG_GAMMA_CTRS, lam);
}

/* Element i of any draw kind (mx_rng_value or mx_rng_value_x formulas, or GNB). */
static inline double mx_rng_any(const mx_rng_draw *d, int64_t i) {
  if (d->kind < MX_RNG_EXPONENTIAL) return mx_rng_value(d, i);
  if (d->kind == MX_RNG_GENNEGBIN)
    return mx_rng_gnb1(d->seed, d->first + (uint64_t)i * MX_RNG_NEGBIN_CTRS, d->a, d->b);
  return mx_rng_value_x(d, i);
}

/* The kind, counters per element and parameter count of a draw op by name (random_*,
 * random_*_like, sample_*); -1 for a name that is none of them. */
static inline int mx_rng_kind_of(const char *name, int64_t *ctrs, int *nparams) {
  static const struct { const char *base; int kind, np; int64_t k; } T[] = {
    { "uniform", MX_RNG_UNIFORM, 2, 1 }, { "normal", MX_RNG_NORMAL, 2, 1 },
    { "exponential", MX_RNG_EXPONENTIAL, 1, 1 }, { "gamma", MX_RNG_GAMMA, 2, MX_RNG_GAMMA_CTRS },
    { "poisson", MX_RNG_POISSON, 1, MX_RNG_POISSON_CTRS },
    { "negative_binomial", MX_RNG_NEGBINOMIAL, 2, MX_RNG_NEGBIN_CTRS },
    { "generalized_negative_binomial", MX_RNG_GENNEGBIN, 2, MX_RNG_NEGBIN_CTRS },
  };
  const char *b = !strncmp(name, "random_", 7) ? name + 7 : !strncmp(name, "sample_", 7) ? name + 7 : name;
  size_t n = strlen(b);
  if (n > 5 && !strcmp(b + n - 5, "_like")) n -= 5;
  for (size_t j = 0; j < sizeof T / sizeof T[0]; j++)
    if (strlen(T[j].base) == n && !strncmp(T[j].base, b, n)) {
      if (ctrs) *ctrs = T[j].k;
      if (nparams) *nparams = T[j].np;
      return T[j].kind;
    }
  return -1;
}

/* NULL when (a, b) are valid parameters of kind, else what is wrong (static text). */
static inline const char *mx_rng_check(int kind, double a, double b) {
  switch (kind) {
  case MX_RNG_UNIFORM: return isfinite(a) && isfinite(b) && b >= a ? NULL : "needs finite low <= high";
  case MX_RNG_NORMAL: return isfinite(a) && isfinite(b) && b >= 0 ? NULL : "needs finite mu and sigma >= 0";
  case MX_RNG_EXPONENTIAL: return a > 0 && !isinf(a) ? NULL : "needs a finite lam > 0";
  case MX_RNG_GAMMA: return a > 0 && !isinf(a) && b > 0 && !isinf(b) ? NULL : "needs finite alpha > 0 and beta > 0";
  case MX_RNG_POISSON: return a >= 0 && a <= 1e15 ? NULL : "needs lam in [0, 1e15]";
  case MX_RNG_NEGBINOMIAL: return a >= 1 && a <= 1e15 && a == floor(a) && b > 0 && b <= 1 ? NULL
                                      : "needs an integer k >= 1 and p in (0, 1]";
  default: return a >= 0 && a <= 1e15 && b >= 0 && !isinf(b) ? NULL : "needs mu in [0, 1e15] and a finite alpha >= 0";
  }
}

/* _like ops: the draw from the op's params (struct by name) and the reserved counters */
int mx_rng_setup_like(const mx_kctx *ctx, const void *params, mx_rng_draw *d);
/* sample_* ops: element i of the output draws from the parameters at i / per */
typedef struct mx_rng_sample {
  mx_rng_draw d;
  const mx_tensor *pa, *pb; /* pb NULL for one-parameter kinds */
  int64_t per;              /* prod(shape): draws per parameter element */
} mx_rng_sample;
int mx_rng_setup_sample(const mx_kctx *ctx, int nin, mx_tensor *const *in, int out_dtype,
                        mx_rng_sample *s);
/* value of output element i of a sample_* op */
static inline double mx_rng_sample_value(const mx_rng_sample *s, int64_t i) {
  mx_rng_draw d = s->d;
  int64_t j = s->per ? i / s->per : 0;
  d.a = mx_load_f64(mx_ptr(s->pa), s->pa->dtype, j);
  d.b = s->pb ? mx_load_f64(mx_ptr(s->pb), s->pb->dtype, j) : 0;
  if (d.kind == MX_RNG_EXPONENTIAL) d.b = 0;
  return mx_rng_any(&d, i);
}

/* Validates the params of the ops above (shape-param ops, by name) and takes the
 * reserved counters. */
int mx_rng_setup_x(const mx_kctx *ctx, const char *op, const void *params, mx_rng_draw *d);
/* shuffle's row order (malloc'd, caller frees): perm[i] = source row of output row i */
int mx_rng_shuffle_perm(const mx_kctx *ctx, int64_t n, int64_t **perm);
#endif
