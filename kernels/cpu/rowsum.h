/* rowsum.h — per-row sums for the normalisation kernels (norm.c, layer_norm.c). */
#ifndef MX_CPU_ROWSUM_H
#define MX_CPU_ROWSUM_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Row sums in vector lanes (GCC/Clang vector extensions, 32-byte vectors, two of them to
 * hide the add latency): a plain `acc += v` loop does not vectorise (float addition is
 * not reassociated without -ffast-math). stat: sum(x - sh), sum((x - sh)^2);
 * dot: sum(d), sum(d (x - m)). Each row's lanes are added up in double. */
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
#define ROWSUM_DEFINE(T, V, SUF)                                                              \
  static inline V ld_##SUF(const T *p) {                                                      \
    V v;                                                                                      \
    memcpy(&v, p, sizeof v);                                                                  \
    return v;                                                                                 \
  }                                                                                           \
  static inline double hsum_##SUF(V v) {                                                      \
    double s = 0;                                                                             \
    for (size_t l = 0; l < sizeof v / sizeof(T); l++) s += v[l];                              \
    return s;                                                                                 \
  }                                                                                           \
  static inline void row_stat_##SUF(const T *x, int64_t n, T sh, double *s1, double *s2) {    \
    enum { W = sizeof(V) / sizeof(T) };                                                       \
    V a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};                                                 \
    int64_t i = 0;                                                                            \
    for (; i + 2 * W <= n; i += 2 * W) {                                                      \
      V e0 = ld_##SUF(x + i) - sh, e1 = ld_##SUF(x + i + W) - sh;                             \
      a0 += e0, a1 += e1, b0 += e0 * e0, b1 += e1 * e1;                                       \
    }                                                                                         \
    double u = hsum_##SUF(a0 + a1), v = hsum_##SUF(b0 + b1);                                  \
    for (; i < n; i++) {                                                                      \
      double e = (double)(x[i] - sh);                                                         \
      u += e, v += e * e;                                                                     \
    }                                                                                         \
    *s1 += u, *s2 += v;                                                                       \
  }                                                                                           \
  static inline void row_dot_##SUF(const T *d, const T *x, int64_t n, T m, double *s1,        \
                                   double *s2) {                                              \
    enum { W = sizeof(V) / sizeof(T) };                                                       \
    V a0 = {0}, a1 = {0}, b0 = {0}, b1 = {0};                                                 \
    int64_t i = 0;                                                                            \
    for (; i + 2 * W <= n; i += 2 * W) {                                                      \
      V d0 = ld_##SUF(d + i), d1 = ld_##SUF(d + i + W);                                       \
      a0 += d0, a1 += d1;                                                                     \
      b0 += d0 * (ld_##SUF(x + i) - m), b1 += d1 * (ld_##SUF(x + i + W) - m);                 \
    }                                                                                         \
    double u = hsum_##SUF(a0 + a1), v = hsum_##SUF(b0 + b1);                                  \
    for (; i < n; i++) u += d[i], v += (double)(d[i] * (x[i] - m));                           \
    *s1 += u, *s2 += v;                                                                       \
  }

#endif
