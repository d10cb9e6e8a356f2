/* kernels/cpu/reduce.c — optimised reductions (sum, mean, prod, max, min, norm,
 * reduce_to, argmax, argmin).
 *
 * The input (row-major) is viewed as groups of adjacent kept / reduced dims; each
 * reduced group is one pass over an (O, R, I) block -> (O, I): I == 1 reduces
 * contiguous rows with 8 independent accumulators (vectorised), I > 1 accumulates
 * whole rows of I into a block of accumulators (vectorised along I). Everything
 * accumulates in double (f32 sums of millions of values stay accurate, and results
 * match the reference); f32/f64 are read directly, other dtypes are converted first.
 * Work is split over outputs, or over R with per-thread partials when the outputs
 * are too few to keep both cores busy. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { K_SUM, K_PROD, K_MAX, K_MIN, K_SUMSQ, K_SUMABS };

#define GRAIN ((int64_t)1 << 16) /* input elements per thread below which we stay inline */
#define IBLK 256                 /* inner block of accumulators (I > 1) */
#define NACC 8                   /* independent accumulators for a contiguous row */

static double identity(int k) {
  return k == K_PROD ? 1.0 : k == K_MAX ? -INFINITY : k == K_MIN ? INFINITY : 0.0;
}
/* combine two partial results of kind k (NaN propagates through max/min) */
static inline double combine(int k, double a, double b) {
  switch (k) {
  case K_PROD: return a * b;
  case K_MAX: return a != a ? a : b > a || b != b ? b : a;
  case K_MIN: return a != a ? a : b < a || b != b ? b : a;
  default: return a + b;
  }
}

/* Reduce a contiguous row of n values. */
#define ROW_FN(name, T)                                                                   \
  static double name(int k, const T *restrict x, int64_t n) {                           \
    double acc[NACC];                                                                   \
    double id = identity(k);                                                            \
    for (int j = 0; j < NACC; j++) acc[j] = id;                                         \
    int64_t i = 0, m = n - n % NACC;                                                    \
    switch (k) {                                                                        \
    case K_SUM:                                                                         \
      for (; i < m; i += NACC) for (int j = 0; j < NACC; j++) acc[j] += (double)x[i + j]; \
      break;                                                                            \
    case K_SUMSQ:                                                                       \
      for (; i < m; i += NACC)                                                          \
        for (int j = 0; j < NACC; j++) { double v = x[i + j]; acc[j] += v * v; }        \
      break;                                                                            \
    case K_SUMABS:                                                                      \
      for (; i < m; i += NACC) for (int j = 0; j < NACC; j++) acc[j] += fabs((double)x[i + j]); \
      break;                                                                            \
    case K_PROD:                                                                        \
      for (; i < m; i += NACC) for (int j = 0; j < NACC; j++) acc[j] *= (double)x[i + j]; \
      break;                                                                            \
    case K_MAX:                                                                         \
      for (; i < m; i += NACC)                                                          \
        for (int j = 0; j < NACC; j++) {                                                \
          double v = x[i + j];                                                          \
          acc[j] = ((v > acc[j]) | (v != v)) ? v : acc[j]; /* NaN sticks */     \
        }                                                                               \
      break;                                                                            \
    case K_MIN:                                                                         \
      for (; i < m; i += NACC)                                                          \
        for (int j = 0; j < NACC; j++) {                                                \
          double v = x[i + j];                                                          \
          acc[j] = ((v < acc[j]) | (v != v)) ? v : acc[j];     \
        }                                                                               \
      break;                                                                            \
    }                                                                                   \
    double r = acc[0];                                                                  \
    for (int j = 1; j < NACC; j++) r = combine(k, r, acc[j]);                          \
    for (; i < n; i++) {                                                                \
      double v = x[i];                                                                  \
      r = combine(k, r, k == K_SUMSQ ? v * v : k == K_SUMABS ? fabs(v) : v);           \
    }                                                                                   \
    return r;                                                                           \
  }
ROW_FN(row_f32_generic, float)
ROW_FN(row_f64_generic, double)

/* max/min of a contiguous row with AVX2 (GCC does not vectorise the NaN-aware select
 * reduction): lane-wise max/min, NaN tracked separately and propagated at the end. */
#define ROW_EXT(name, T, V, W, LOAD, SET1, MAX, MIN, UNORD, OR, STORE, GENERIC)            \
  static double name(int k, const T *restrict x, int64_t n) {                           \
    if (k != K_MAX && k != K_MIN) return GENERIC(k, x, n);                              \
    bool mx = k == K_MAX;                                                               \
    V a0 = SET1(mx ? -INFINITY : INFINITY), a1 = a0, nan = SET1(0);                     \
    int64_t i = 0;                                                                      \
    for (; i + 2 * W <= n; i += 2 * W) {                                                \
      V v0 = LOAD(x + i), v1 = LOAD(x + i + W);                                         \
      a0 = mx ? MAX(a0, v0) : MIN(a0, v0);                                              \
      a1 = mx ? MAX(a1, v1) : MIN(a1, v1);                                              \
      nan = OR(nan, OR(UNORD(v0), UNORD(v1)));                                          \
    }                                                                                   \
    a0 = mx ? MAX(a0, a1) : MIN(a0, a1);                                                \
    T lane[W], nl[W];                                                                   \
    STORE(lane, a0);                                                                    \
    STORE(nl, nan);                                                                     \
    double r = mx ? -INFINITY : INFINITY;                                               \
    bool any = false;                                                                   \
    for (int j = 0; j < W; j++) {                                                       \
      r = mx ? (lane[j] > r ? lane[j] : r) : (lane[j] < r ? lane[j] : r);               \
      any |= nl[j] != 0;                                                                \
    }                                                                                   \
    for (; i < n; i++) {                                                                \
      double v = x[i];                                                                  \
      any |= v != v;                                                                    \
      r = mx ? (v > r ? v : r) : (v < r ? v : r);                                       \
    }                                                                                   \
    return any ? NAN : r;                                                               \
  }
#define UNORD_PS(v) _mm256_cmp_ps(v, v, _CMP_UNORD_Q)
#define UNORD_PD(v) _mm256_cmp_pd(v, v, _CMP_UNORD_Q)
ROW_EXT(row_f32, float, __m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_max_ps, _mm256_min_ps,
        UNORD_PS, _mm256_or_ps, _mm256_storeu_ps, row_f32_generic)
ROW_EXT(row_f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_set1_pd, _mm256_max_pd,
        _mm256_min_pd, UNORD_PD, _mm256_or_pd, _mm256_storeu_pd, row_f64_generic)

/* acc[0..w) op= x[r*I + j] over rows r in [r0, r1): a column block. */
#define COL_FN(name, T)                                                                   \
  static void name(int k, const T *restrict x, int64_t r0, int64_t r1, int64_t I, int w,  \
                   double *restrict acc) {                                              \
    for (int64_t r = r0; r < r1; r++) {                                                 \
      const T *restrict row = x + r * I;                                                \
      switch (k) {                                                                      \
      case K_SUM: for (int j = 0; j < w; j++) acc[j] += (double)row[j]; break;          \
      case K_SUMSQ:                                                                     \
        for (int j = 0; j < w; j++) { double v = row[j]; acc[j] += v * v; }            \
        break;                                                                          \
      case K_SUMABS: for (int j = 0; j < w; j++) acc[j] += fabs((double)row[j]); break; \
      case K_PROD: for (int j = 0; j < w; j++) acc[j] *= (double)row[j]; break;         \
      case K_MAX:                                                                       \
        for (int j = 0; j < w; j++) {                                                   \
          double v = row[j];                                                            \
          acc[j] = ((v > acc[j]) | (v != v)) ? v : acc[j]; /* NaN sticks */     \
        }                                                                               \
        break;                                                                          \
      case K_MIN:                                                                       \
        for (int j = 0; j < w; j++) {                                                   \
          double v = row[j];                                                            \
          acc[j] = ((v < acc[j]) | (v != v)) ? v : acc[j];     \
        }                                                                               \
        break;                                                                          \
      }                                                                                 \
    }                                                                                   \
  }
COL_FN(col_f32, float)
COL_FN(col_f64, double)

/* One pass: x (O, R, I) of f32 or f64 -> parts[P][O*I] doubles, R split in P parts. */
typedef struct {
  int k;
  bool f32;
  const void *x;
  int64_t O, R, I, nblk, P;
  double *parts;
} pass_ctx;

static void pass_task(int64_t b, int64_t e, void *vc) {
  const pass_ctx *c = vc;
  int64_t per = c->O * c->nblk;
  for (int64_t t = b; t < e; t++) {
    int64_t p = t / per, rest = t % per, o = rest / c->nblk, blk = rest % c->nblk;
    int64_t r0 = c->R * p / c->P, r1 = c->R * (p + 1) / c->P;
    double *dst = c->parts + p * c->O * c->I + o * c->I;
    if (c->I == 1) {
      size_t off = (size_t)(o * c->R + r0);
      dst[0] = c->f32 ? row_f32(c->k, (const float *)c->x + off, r1 - r0)
                      : row_f64(c->k, (const double *)c->x + off, r1 - r0);
      continue;
    }
    int64_t j0 = blk * IBLK;
    int w = (int)(c->I - j0 < IBLK ? c->I - j0 : IBLK);
    double acc[IBLK];
    double id = identity(c->k);
    for (int j = 0; j < w; j++) acc[j] = id;
    size_t off = (size_t)(o * c->R * c->I + j0);
    if (c->f32) col_f32(c->k, (const float *)c->x + off, r0, r1, c->I, w, acc);
    else col_f64(c->k, (const double *)c->x + off, r0, r1, c->I, w, acc);
    memcpy(dst + j0, acc, sizeof(double) * (size_t)w);
  }
}

/* Reduces (O, R, I) into res[O*I] (doubles). */
static int pass(int k, bool f32, const void *x, int64_t O, int64_t R, int64_t I, double *res) {
  int64_t nblk = I == 1 ? 1 : (I + IBLK - 1) / IBLK;
  int64_t total = O * R * I, tasks = O * nblk;
  int nt = mx_get_num_threads();
  int64_t P = 1;
  if (tasks < nt && total >= 2 * GRAIN && R >= 2 * nt) P = nt;
  double *parts = P == 1 ? res : malloc(sizeof(double) * (size_t)(P * O * I));
  if (!parts) return mx_err(MX_ENOMEM, "reduce: out of memory");
  pass_ctx c = {k, f32, x, O, R, I, nblk, P, parts};
  int64_t ntask = P * tasks;
  int64_t work = total / (ntask ? ntask : 1); /* input elements per task */
  int64_t grain = work >= GRAIN ? 1 : GRAIN / (work ? work : 1);
  mx_parallel_for(ntask, grain, pass_task, &c);
  if (P > 1) {
    for (int64_t j = 0; j < O * I; j++) {
      double r = parts[j];
      for (int64_t p = 1; p < P; p++) r = combine(k, r, parts[p * O * I + j]);
      res[j] = r;
    }
    free(parts);
  }
  return MX_OK;
}

/* Integers in and out (the same dtype), sum/prod/max/min: exact in int64 (a double holds
 * integers exactly only to 2^53); sums and products wrap like C's two's complement,
 * through uint64, then to the dtype's width (MXNet accumulates in the dtype). One pass over
 * x in row-major order, an odometer giving each element's output offset. */
static inline int64_t ld_i(const void *p, int dt, int64_t i) {
  switch (dt) {
  case MX_U8: return ((const uint8_t *)p)[i];
  case MX_I8: return ((const int8_t *)p)[i];
  case MX_I32: return ((const int32_t *)p)[i];
  default: return ((const int64_t *)p)[i];
  }
}
static bool is_intdt(int dt) { return dt == MX_U8 || dt == MX_I8 || dt == MX_I32 || dt == MX_I64; }

static int reduce_i64(const mx_tensor *x, const mx_tensor *o, const bool *mask, int k) {
  bool wide = o->dtype == MX_I64;
  int64_t *y = wide ? mx_ptr(o) : malloc(sizeof(int64_t) * (size_t)(o->size ? o->size : 1));
  if (!y) return mx_err(MX_ENOMEM, "reduce: out of memory");
  const void *px = mx_ptr(x);
  int dt = x->dtype;
  int64_t init = k == K_PROD ? 1 : k == K_MAX ? INT64_MIN : k == K_MIN ? INT64_MAX : 0;
  for (int64_t j = 0; j < o->size; j++) y[j] = init;
  int64_t ost[MX_MAX_DIM], idx[MX_MAX_DIM] = {0}, mul = 1, off = 0;
  int nd = x->ndim;
  for (int d = nd - 1; d >= 0; d--) {
    ost[d] = mask[d] ? 0 : mul;
    if (!mask[d]) mul *= x->shape[d];
  }
  for (int64_t i = 0; i < x->size; i++) {
    int64_t v = ld_i(px, dt, i), *a = &y[off];
    switch (k) {
    case K_SUM: *a = (int64_t)((uint64_t)*a + (uint64_t)v); break;
    case K_PROD: *a = (int64_t)((uint64_t)*a * (uint64_t)v); break;
    case K_MAX: if (v > *a) *a = v; break;
    default: if (v < *a) *a = v; break;
    }
    for (int d = nd - 1; d >= 0; d--) { /* advance the odometer */
      off += ost[d];
      if (++idx[d] < x->shape[d]) break;
      off -= ost[d] * x->shape[d];
      idx[d] = 0;
    }
  }
  if (!wide) {
    void *po = mx_ptr(o);
    for (int64_t j = 0; j < o->size; j++) {
      uint64_t v = (uint64_t)y[j];
      if (o->dtype == MX_U8) ((uint8_t *)po)[j] = (uint8_t)v;
      else if (o->dtype == MX_I8) ((int8_t *)po)[j] = (int8_t)(uint8_t)v;
      else ((int32_t *)po)[j] = (int32_t)(uint32_t)v;
    }
    free(y);
  }
  return MX_OK;
}

/* Reduce x over mask into out, applying mean (divide by the count) or root. */
static int reduce(const mx_tensor *x, const mx_tensor *o, const bool *mask, int k, bool mean,
                  bool root) {
  if (is_intdt(x->dtype) && o->dtype == x->dtype && x->size > 0 && !mean && !root &&
      (k == K_SUM || k == K_PROD || k == K_MAX || k == K_MIN))
    return reduce_i64(x, o, mask, k);
  /* groups of adjacent kept / reduced dims (size-1 dims dropped) */
  int64_t ext[MX_MAX_DIM];
  bool red[MX_MAX_DIM];
  int ng = 0;
  int64_t count = 1;
  for (int d = 0; d < x->ndim; d++) {
    if (mask[d]) count *= x->shape[d];
    if (x->shape[d] == 1) continue;
    if (ng > 0 && red[ng - 1] == mask[d]) {
      ext[ng - 1] *= x->shape[d];
    } else {
      ext[ng] = x->shape[d];
      red[ng] = mask[d];
      ng++;
    }
  }
  int64_t n = o->size;
  if (n == 0) return MX_OK;
  double *res = malloc(sizeof(double) * (size_t)n);
  if (!res) return mx_err(MX_ENOMEM, "reduce: out of memory");
  int rc = MX_OK;
  void *conv = NULL, *tmp = NULL;
  if (x->size == 0) {
    for (int64_t j = 0; j < n; j++) res[j] = identity(k);
  } else {
    const void *src = mx_ptr(x);
    bool f32 = x->dtype == MX_F32;
    if (x->dtype == MX_BF16) { /* exact in f32 (bf16 training's bias gradients): bit shifts */
      conv = malloc(sizeof(float) * (size_t)x->size);
      if (!conv) { free(res); return mx_err(MX_ENOMEM, "reduce: out of memory"); }
      const uint16_t *h = src;
      uint32_t *w = conv;
      for (int64_t i = 0; i < x->size; i++) w[i] = (uint32_t)h[i] << 16;
      src = conv;
      f32 = true;
    } else if (x->dtype != MX_F32 && x->dtype != MX_F64) { /* exact in double for every dtype */
      conv = malloc(sizeof(double) * (size_t)x->size);
      if (!conv) { free(res); return mx_err(MX_ENOMEM, "reduce: out of memory"); }
      mx_convert(conv, MX_F64, src, x->dtype, x->size);
      src = conv;
    }
    bool any = false;
    for (int g = 0; g < ng; g++) any |= red[g];
    if (!any) { /* nothing to reduce (reduce_to of an equal shape): x itself, or |x| */
      if (k == K_SUMSQ || k == K_SUMABS) {
        for (int64_t j = 0; j < n; j++) {
          double v = f32 ? ((const float *)src)[j] : ((const double *)src)[j];
          res[j] = k == K_SUMSQ ? v * v : fabs(v);
        }
      } else if (!mean && x->dtype == o->dtype) {
        memcpy(mx_ptr(o), mx_ptr(x), mx_nbytes(o));
        free(conv);
        free(res);
        return MX_OK;
      } else {
        mx_convert(res, MX_F64, src, f32 ? MX_F32 : MX_F64, n);
      }
    }
    int kind = k;
    while (any && rc == MX_OK) {
      int g = ng - 1;
      while (!red[g]) g--;
      int64_t O = 1, I = 1;
      for (int i = 0; i < g; i++) O *= ext[i];
      for (int i = g + 1; i < ng; i++) I *= ext[i];
      bool last = true;
      for (int i = 0; i < g; i++) last &= !red[i];
      double *dst = res;
      if (!last) {
        dst = malloc(sizeof(double) * (size_t)(O * I));
        if (!dst) { rc = mx_err(MX_ENOMEM, "reduce: out of memory"); break; }
      }
      rc = pass(kind, f32, src, O, ext[g], I, dst);
      /* later passes read doubles and combine partial results */
      if (kind == K_SUMSQ || kind == K_SUMABS) kind = K_SUM;
      f32 = false;
      free(tmp);
      tmp = last ? NULL : dst;
      src = dst;
      /* drop group g, merging the kept groups around it */
      if (g + 1 < ng && g > 0) {
        ext[g - 1] *= ext[g + 1];
        for (int i = g; i + 2 < ng; i++) { ext[i] = ext[i + 2]; red[i] = red[i + 2]; }
        ng -= 2;
      } else {
        for (int i = g; i + 1 < ng; i++) { ext[i] = ext[i + 1]; red[i] = red[i + 1]; }
        ng -= 1;
      }
      any = !last;
    }
  }
  if (rc == MX_OK) {
    if (mean) for (int64_t j = 0; j < n; j++) res[j] /= (double)count;
    if (root) for (int64_t j = 0; j < n; j++) res[j] = sqrt(res[j]);
    mx_convert(mx_ptr(o), o->dtype, res, MX_F64, n);
  }
  free(tmp);
  free(conv);
  free(res);
  return rc;
}

/* the reduction mask comes from inference (ctx->info.axes) */
static int run(const mx_kctx *ctx, mx_tensor *const *in, mx_tensor *const *out, int k, bool mean,
               bool root) {
  return reduce(in[0], out[0], ctx->info.axes, k, mean, root);
}

#define REDUCE(name, kind, mean)                                                          \
  int mx_cpu_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,              \
                    mx_tensor *const *out) {                                              \
    (void)nin; (void)nout;                                                                \
    return run(ctx, in, out, kind, mean, false);                                            \
  }
REDUCE(sum, K_SUM, false)
REDUCE(mean, K_SUM, true)
REDUCE(prod, K_PROD, false)
REDUCE(max, K_MAX, false)
REDUCE(min, K_MIN, false)

/* An f64 2-norm whose squares overflowed (an inf result) or may have underflowed (a
 * result below sqrt(DBL_MIN) ~ 1.5e-154 while some element is that small but nonzero):
 * redone scaled by the ref kernel, as MXNet's nrm2 reducer gives. A result stays when
 * it is plainly exact (no inf, no tiny element). f32 inputs sum their squares in double. */
#define NORM2_TINY 1.4916681462400413e-154
static bool norm2_needs_scaling(const mx_tensor *x, const mx_tensor *o) {
  if (x->dtype != MX_F64 || o->dtype != MX_F64) return false;
  const double *r = mx_ptr(o), *v = mx_ptr(x);
  bool small = false;
  for (int64_t j = 0; j < o->size; j++) {
    if (isinf(r[j])) return true;
    if (r[j] < NORM2_TINY) small = true;
  }
  if (!small) return false;
  for (int64_t i = 0; i < x->size; i++)
    if (v[i] != 0 && fabs(v[i]) < NORM2_TINY) return true;
  return false;
}

int mx_cpu_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_norm *np = p;
  /* ord is 1 or 2: mx_infer_norm rejected anything else before dispatch */
  int rc = run(ctx, in, out, np->ord == 2 ? K_SUMSQ : K_SUMABS, false, np->ord == 2);
  if (rc == MX_OK && np->ord == 2 && norm2_needs_scaling(in[0], out[0]))
    return MX_DECLINE;
  return rc;
}

int mx_cpu_reduce_to(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)nin; (void)nout;
  (void)p; /* the mask of data dims like lacks: inference (ctx->info.axes) */
  return reduce(in[0], out[0], ctx->info.axes, K_SUM, false, false);
}

/* ---------------------------------------------------------------- argmax/argmin */
/* x (O, R, I) -> int64 (O, I) 1-based; first extreme wins, NaN is the extreme */
typedef struct {
  bool is_max, f32;
  const void *x;
  int64_t O, R, I;
  int64_t *y;
} arg_ctx;

/* Rows (I == 1): a vectorised pass for the extreme (and any NaN), then the first index
 * holding it. Columns (I > 1): blocks of IBLK running bests, rows visited in order. */
#define ARG_FN(name, T, ROW)                                                                 \
  static void name(const arg_ctx *c, int64_t b, int64_t e) {                            \
    const T *x = c->x;                                                                  \
    int64_t R = c->R, I = c->I;                                                         \
    if (I == 1) {                                                                       \
      for (int64_t o = b; o < e; o++) {                                                 \
        const T *p = x + o * R;                                                         \
        double m = ROW(c->is_max ? K_MAX : K_MIN, p, R);                                \
        int64_t r = 0;                                                                  \
        if (m != m) while (p[r] == p[r]) r++;                                           \
        else while (p[r] != (T)m) r++;                                                  \
        c->y[o] = r + 1;                                                                \
      }                                                                                 \
      return;                                                                           \
    }                                                                                   \
    int64_t nblk = (I + IBLK - 1) / IBLK;                                               \
    for (int64_t t = b; t < e; t++) { /* t = (o, block) */                              \
      int64_t o = t / nblk, j0 = (t % nblk) * IBLK;                                     \
      int w = (int)(I - j0 < IBLK ? I - j0 : IBLK);                                     \
      const T *p = x + o * R * I + j0;                                                  \
      /* values and row indices both as double lanes so the selects vectorise */      \
      double bv[IBLK], bi[IBLK];                                                        \
      for (int j = 0; j < w; j++) { bv[j] = p[j]; bi[j] = 0; }                          \
      for (int64_t r = 1; r < R; r++) {                                                 \
        const T *restrict row = p + r * I;                                              \
        double rr = (double)r;                                                          \
        if (c->is_max) {                                                                \
          for (int j = 0; j < w; j++) {                                                 \
            double v = row[j];                                                          \
            int take = (bv[j] == bv[j]) & ((v > bv[j]) | (v != v));                     \
            bv[j] = take ? v : bv[j];                                                   \
            bi[j] = take ? rr : bi[j];                                                  \
          }                                                                             \
        } else {                                                                        \
          for (int j = 0; j < w; j++) {                                                 \
            double v = row[j];                                                          \
            int take = (bv[j] == bv[j]) & ((v < bv[j]) | (v != v));                     \
            bv[j] = take ? v : bv[j];                                                   \
            bi[j] = take ? rr : bi[j];                                                  \
          }                                                                             \
        }                                                                               \
      }                                                                                 \
      for (int j = 0; j < w; j++) c->y[o * I + j0 + j] = (int64_t)bi[j] + 1;                     \
    }                                                                                   \
  }
ARG_FN(arg_f32, float, row_f32)
ARG_FN(arg_f64, double, row_f64)

static void arg_range(int64_t b, int64_t e, void *vc) {
  const arg_ctx *c = vc;
  if (c->f32) arg_f32(c, b, e);
  else arg_f64(c, b, e);
}


static int argreduce(const mx_kctx *ctx, const void *p, mx_tensor *const *in, mx_tensor *const *out,
                     bool is_max) {
  const mx_tensor *x = in[0];
  if (x->dtype != MX_F32 && x->dtype != MX_F64)
    return MX_DECLINE;
  int ax = ctx->info.axis; /* normalised by inference; -1: the flattened input */
  int64_t R = ax < 0 ? x->size : x->shape[ax], I = 1;
  if (ax >= 0) for (int d = ax + 1; d < x->ndim; d++) I *= x->shape[d];
  int64_t nout = R ? x->size / R : 0;
  if (nout == 0) return MX_OK;
  int64_t O = nout / I;
  arg_ctx c = {is_max, x->dtype == MX_F32, mx_ptr(x), O, R, I, mx_ptr(out[0])};
  /* tasks: rows when I == 1, (row, column block) otherwise */
  int64_t ntask = I == 1 ? O : O * ((I + IBLK - 1) / IBLK);
  int64_t work = x->size / ntask;
  int64_t grain = work >= GRAIN ? 1 : GRAIN / (work ? work : 1);
  mx_parallel_for(ntask, grain, arg_range, &c);
  return MX_OK;
}

int mx_cpu_argmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  return argreduce(ctx, p, in, out, true);
}
int mx_cpu_argmin(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  return argreduce(ctx, p, in, out, false);
}

/* ---------------------------------------------------------------- nansum, nanprod, cumsum
 * */

/* nansum/nanprod: float inputs are copied with NaN replaced by the identity (0 / 1) into
 * workspace (one parallel pass the compiler vectorises; f16/bf16 widen to double there),
 * then sum's / prod's reduction runs over the copy, so every vectorised and parallel
 * path of reduce() serves them. Integers have no NaN: reduce() directly. */
typedef struct {
  const void *x;
  void *t;
  int xdt;
  double id;
} nanfill_ctx;

static void nanfill_task(int64_t b, int64_t e, void *vc) {
  const nanfill_ctx *c = vc;
  if (c->xdt == MX_F32) {
    const float *restrict x = c->x;
    float *restrict t = c->t, id = (float)c->id;
    for (int64_t i = b; i < e; i++) t[i] = x[i] != x[i] ? id : x[i];
  } else if (c->xdt == MX_F64) {
    const double *restrict x = c->x;
    double *restrict t = c->t, id = c->id;
    for (int64_t i = b; i < e; i++) t[i] = x[i] != x[i] ? id : x[i];
  } else {
    double *restrict t = c->t;
    mx_convert(t + b, MX_F64, (const char *)c->x + (size_t)b * mx_dtype_size(c->xdt), c->xdt,
               e - b);
    for (int64_t i = b; i < e; i++) t[i] = t[i] != t[i] ? c->id : t[i];
  }
}

/* Reduce a workspace copy of x (buf, nb bytes of dtype dt, x's shape, row-major) into o:
 * nansum/nanprod and any/all map x first, then take reduce()'s paths (it reads only the
 * fields set here). */
static int reduce_copy(const mx_tensor *x, void *buf, size_t nb, int dt, const mx_tensor *o,
                       const bool *mask, int k) {
  mx_storage st = {0};
  st.data = buf;
  st.nbytes = nb;
  mx_tensor t = {0};
  t.ndim = x->ndim;
  t.dtype = dt;
  memcpy(t.shape, x->shape, sizeof t.shape);
  t.size = x->size;
  t.storage = &st;
  return reduce(&t, o, mask, k, false, false);
}

static int nanreduce(const mx_kctx *ctx, mx_tensor *const *in, mx_tensor *const *out, bool prod) {
  const mx_tensor *x = in[0];
  int k = prod ? K_PROD : K_SUM;
  if (!mx_dtype_is_float(x->dtype) || x->size == 0)
    return reduce(x, out[0], ctx->info.axes, k, false, false);
  int tdt = x->dtype == MX_F32 ? MX_F32 : MX_F64;
  size_t nb = (size_t)x->size * mx_dtype_size(tdt);
  void *buf = mx_kctx_workspace(ctx, nb);
  if (!buf) return mx_err(MX_ENOMEM, "%s: out of memory", prod ? "nanprod" : "nansum");
  nanfill_ctx c = {mx_ptr(x), buf, x->dtype, prod ? 1.0 : 0.0};
  mx_parallel_for(x->size, GRAIN, nanfill_task, &c);
  return reduce_copy(x, buf, nb, tdt, out[0], ctx->info.axes, k);
}
int mx_cpu_nansum(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                  mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return nanreduce(ctx, in, out, false);
}
int mx_cpu_nanprod(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return nanreduce(ctx, in, out, true);
}

/* cumsum of f32/f64 into its own dtype, accumulated in double like the reference: x as
 * (O, R, I) along the axis; I == 1 scans contiguous rows, I > 1 carries a block of IBLK
 * running sums down the rows (vectorised along I). Tasks: rows / (row, block) pairs.
 * Other dtype pairs and the flattened scan of one long row use the reference. */
typedef struct {
  bool f32;
  const void *x;
  void *y;
  int64_t R, I, nblk;
} cum_ctx;

#define CUM_FN(name, T)                                                                   \
  static void name(const cum_ctx *c, int64_t b, int64_t e) {                            \
    int64_t R = c->R, I = c->I;                                                         \
    for (int64_t t = b; t < e; t++) {                                                   \
      int64_t o = t / c->nblk, j0 = (t % c->nblk) * IBLK;                               \
      int w = (int)(I - j0 < IBLK ? I - j0 : IBLK);                                     \
      const T *restrict x = (const T *)c->x + o * R * I + j0;                          \
      T *restrict y = (T *)c->y + o * R * I + j0;                                       \
      double acc[IBLK];                                                                 \
      for (int j = 0; j < w; j++) acc[j] = 0;                                           \
      for (int64_t r = 0; r < R; r++)                                                   \
        for (int j = 0; j < w; j++) {                                                   \
          acc[j] += (double)x[r * I + j];                                               \
          y[r * I + j] = (T)acc[j];                                                     \
        }                                                                               \
    }                                                                                   \
  }
CUM_FN(cum_f32, float)
CUM_FN(cum_f64, double)

static void cum_task(int64_t b, int64_t e, void *vc) {
  const cum_ctx *c = vc;
  if (c->f32) cum_f32(c, b, e);
  else cum_f64(c, b, e);
}


int mx_cpu_cumsum(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                  mx_tensor *const *out) {
  const mx_tensor *x = in[0], *o = out[0];
  int ax = ctx->info.axis; /* normalised by inference; -1: the flattened input */
  if ((x->dtype != MX_F32 && x->dtype != MX_F64) || o->dtype != x->dtype || ax < 0 ||
      x->size == 0)
    return MX_DECLINE;
  int64_t R = x->shape[ax], I = 1;
  for (int d = ax + 1; d < x->ndim; d++) I *= x->shape[d];
  int64_t O = x->size / (R * I), nblk = (I + IBLK - 1) / IBLK;
  cum_ctx c = {x->dtype == MX_F32, mx_ptr(x), mx_ptr(o), R, I, nblk};
  int64_t ntask = O * nblk, work = x->size / ntask;
  int64_t grain = work >= GRAIN ? 1 : GRAIN / (work ? work : 1);
  mx_parallel_for(ntask, grain, cum_task, &c);
  return MX_OK;
}

/* ---------------------------------------------------------------- any, all */

/* any/all: x is mapped to 0/1 float32 (nonzero: 1, NaN included) into workspace in one
 * parallel pass, then max's (any) / min's (all) reduction runs over the copy, so every
 * vectorised and parallel path of reduce() serves them; the 0/1 results convert exactly to
 * bool. Half floats test their bits without the sign (NaN's are nonzero), so no dtype
 * converts. Empty inputs have no elements to map: the identity is written directly. */
typedef struct {
  const void *x;
  float *t;
  int xdt;
} truth_ctx;

static void truth_task(int64_t b, int64_t e, void *vc) {
  const truth_ctx *c = vc;
  float *restrict t = c->t;
#define TRUTH(T, TEST)                                                                    \
  do {                                                                                    \
    const T *restrict x = c->x;                                                           \
    for (int64_t i = b; i < e; i++) t[i] = (TEST) ? 1.0f : 0.0f;                          \
  } while (0)
  switch (c->xdt) {
  case MX_F32: TRUTH(float, x[i] != 0); break;
  case MX_F64: TRUTH(double, x[i] != 0); break;
  case MX_F16: case MX_BF16: TRUTH(uint16_t, (x[i] & 0x7fffu) != 0); break;
  case MX_I32: TRUTH(int32_t, x[i] != 0); break;
  case MX_I64: TRUTH(int64_t, x[i] != 0); break;
  default: TRUTH(uint8_t, x[i] != 0); break; /* u8, i8, bool: one byte */
  }
#undef TRUTH
}

static int logical_reduce(const mx_kctx *ctx, mx_tensor *const *in, mx_tensor *const *out,
                          bool is_all) {
  const mx_tensor *x = in[0], *o = out[0];
  if (x->size == 0) {
    bool *y = mx_ptr(o);
    for (int64_t j = 0; j < o->size; j++) y[j] = is_all;
    return MX_OK;
  }
  size_t nb = (size_t)x->size * sizeof(float);
  float *buf = mx_kctx_workspace(ctx, nb);
  if (!buf) return mx_err(MX_ENOMEM, "%s: out of memory", is_all ? "all" : "any");
  truth_ctx c = {mx_ptr(x), buf, x->dtype};
  mx_parallel_for(x->size, GRAIN, truth_task, &c);
  return reduce_copy(x, buf, nb, MX_F32, o, ctx->info.axes, is_all ? K_MIN : K_MAX);
}
int mx_cpu_any(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return logical_reduce(ctx, in, out, false);
}
int mx_cpu_all(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  return logical_reduce(ctx, in, out, true);
}
