/* kernels/cpu/softmax.c — optimised softmax / log_softmax along one axis.
 * x viewed as (O, R, I) around the axis -> out, same shape and dtype (f32/f64; f16/bf16
 * through float32 buffers; integer inputs run the reference). Stable: the row maximum is subtracted before exp.
 * I == 1 (the last axis, the usual case) works on contiguous rows; I > 1 works on
 * blocks of columns. exp goes through libmvec so the loops vectorise; rows (or
 * column blocks) are split over the intra-op pool. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

__attribute__((simd("notinbranch"), const, nothrow)) float sm_expf(float) __asm__("expf");
__attribute__((simd("notinbranch"), const, nothrow)) double sm_exp(double) __asm__("exp");

#define GRAIN ((int64_t)1 << 14) /* elements per thread (exp-bound work) */
#define IBLK 64

typedef struct {
  bool log_;
  double t;
  const void *x;
  void *y;
  int64_t O, R, I, nblk;
} sm_ctx;

/* Maximum of a contiguous row, NaN if any (AVX2: GCC leaves the NaN-aware select
 * reduction scalar). */
#define ROWMAX_FN(name, T, V, W, LOAD, SET1, MAX, UNORD, OR, STORE)                        \
  static double name(const T *restrict x, int64_t n) {                                  \
    V a = SET1(-INFINITY), nan = SET1(0);                                               \
    int64_t i = 0;                                                                      \
    for (; i + W <= n; i += W) {                                                        \
      V v = LOAD(x + i);                                                                \
      a = MAX(a, v);                                                                    \
      nan = OR(nan, UNORD(v, v));                                                       \
    }                                                                                   \
    T lane[W], nl[W];                                                                   \
    STORE(lane, a);                                                                     \
    STORE(nl, nan);                                                                     \
    double r = -INFINITY;                                                               \
    bool any = false;                                                                   \
    for (int j = 0; j < W; j++) { r = lane[j] > r ? lane[j] : r; any |= nl[j] != 0; }   \
    for (; i < n; i++) { r = x[i] > r ? x[i] : r; any |= x[i] != x[i]; }               \
    return any ? NAN : r;                                                               \
  }
#define UNORD_PS(a, b) _mm256_cmp_ps(a, b, _CMP_UNORD_Q)
#define UNORD_PD(a, b) _mm256_cmp_pd(a, b, _CMP_UNORD_Q)
ROWMAX_FN(rowmax_f32, float, __m256, 8, _mm256_loadu_ps, _mm256_set1_ps, _mm256_max_ps, UNORD_PS,
          _mm256_or_ps, _mm256_storeu_ps)
ROWMAX_FN(rowmax_f64, double, __m256d, 4, _mm256_loadu_pd, _mm256_set1_pd, _mm256_max_pd,
          UNORD_PD, _mm256_or_pd, _mm256_storeu_pd)

/* (x - m) / T as (x - m) * (1 / T) where that is the same number: T and 1/T normal in the
 * compute type. Otherwise (a denormal T makes 1/T infinite, and 0 * inf NaN where the
 * reference's 0 / T is 0; a huge T makes 1/T 0) divide, in double, as the reference does. */
#define SM_SCALE(T, d) (dv ? (T)((double)(d) / c->t) : (d) * inv)
#define SM_SETUP(T)                                                                       \
  T inv = (T)(1.0 / c->t);                                                              \
  bool dv = !(isnormal(inv) && isnormal((T)c->t))

/* Row max (NaN propagates), then y = exp((x - m)/T) with its sum, then normalise. */
#define SM_ROW(name, T, EXP, LOG, ROWMAX)                                                       \
  static void name(const sm_ctx *c, int64_t b, int64_t e) {                             \
    SM_SETUP(T);                                                                        \
    for (int64_t row = b; row < e; row++) {                                             \
      const T *restrict x = (const T *)c->x + row * c->R;                               \
      T *restrict y = (T *)c->y + row * c->R;                                           \
      int64_t n = c->R;                                                                 \
      T m = (T)ROWMAX(x, n);                                                            \
      if (dv) for (int64_t i = 0; i < n; i++) y[i] = EXP(SM_SCALE(T, x[i] - m));            \
      else for (int64_t i = 0; i < n; i++) y[i] = EXP((x[i] - m) * inv);                \
      T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* independent sums: vectorises */           \
      int64_t i8 = n - n % 8;                                                           \
      for (int64_t i = 0; i < i8; i += 8) for (int j = 0; j < 8; j++) acc[j] += y[i + j]; \
      T s = 0;                                                                          \
      for (int j = 0; j < 8; j++) s += acc[j];                                          \
      for (int64_t i = i8; i < n; i++) s += y[i];                                       \
      if (c->log_) {                                                                    \
        T ls = LOG(s);                                                                  \
        for (int64_t i = 0; i < n; i++) y[i] = SM_SCALE(T, x[i] - m) - ls;                 \
      } else {                                                                          \
        T r = 1 / s;                                                                    \
        for (int64_t i = 0; i < n; i++) y[i] *= r;                                      \
      }                                                                                 \
    }                                                                                   \
  }
SM_ROW(row_f32, float, sm_expf, logf, rowmax_f32)
SM_ROW(row_f64, double, sm_exp, log, rowmax_f64)

/* Column blocks: task = (o, block of up to IBLK inner positions). */
#define SM_COL(name, T, EXP, LOG)                                                         \
  static void name(const sm_ctx *c, int64_t b, int64_t e) {                             \
    SM_SETUP(T);                                                                        \
    for (int64_t t = b; t < e; t++) {                                                   \
      int64_t o = t / c->nblk, j0 = (t % c->nblk) * IBLK;                               \
      int w = (int)(c->I - j0 < IBLK ? c->I - j0 : IBLK);                               \
      const T *x = (const T *)c->x + o * c->R * c->I + j0;                              \
      T *y = (T *)c->y + o * c->R * c->I + j0;                                          \
      T m[IBLK], s[IBLK];                                                               \
      for (int j = 0; j < w; j++) { m[j] = -INFINITY; s[j] = 0; }                       \
      for (int64_t r = 0; r < c->R; r++)                                                \
        for (int j = 0; j < w; j++) {                                                   \
          T v = x[r * c->I + j];                                                        \
          m[j] = m[j] != m[j] ? m[j] : (v > m[j] || v != v) ? v : m[j];                 \
        }                                                                               \
      for (int64_t r = 0; r < c->R; r++)                                                \
        for (int j = 0; j < w; j++) {                                                   \
          T z = EXP(SM_SCALE(T, x[r * c->I + j] - m[j]));                                  \
          y[r * c->I + j] = z;                                                          \
          s[j] += z;                                                                    \
        }                                                                               \
      for (int j = 0; j < w; j++) s[j] = c->log_ ? LOG(s[j]) : 1 / s[j];                \
      for (int64_t r = 0; r < c->R; r++)                                                \
        for (int j = 0; j < w; j++) {                                                   \
          if (c->log_) y[r * c->I + j] = SM_SCALE(T, x[r * c->I + j] - m[j]) - s[j];       \
          else y[r * c->I + j] *= s[j];                                                 \
        }                                                                               \
    }                                                                                   \
  }
SM_COL(col_f32, float, sm_expf, logf)
SM_COL(col_f64, double, sm_exp, log)

static void sm_range32(int64_t b, int64_t e, void *vc) {
  const sm_ctx *c = vc;
  if (c->I == 1) row_f32(c, b, e);
  else col_f32(c, b, e);
}
static void sm_range64(int64_t b, int64_t e, void *vc) {
  const sm_ctx *c = vc;
  if (c->I == 1) row_f64(c, b, e);
  else col_f64(c, b, e);
}


static int softmax(const mx_kctx *ctx, const void *p, mx_tensor *const *in, mx_tensor *const *out,
                   bool log_) {
  const struct mx_params_softmax *sp = p;
  const mx_tensor *x = in[0];
  bool half = x->dtype == MX_F16 || x->dtype == MX_BF16;
  if ((x->dtype != MX_F32 && x->dtype != MX_F64 && !half) || out[0]->dtype != x->dtype)
    return MX_DECLINE;
  int ax = ctx->info.axis; /* normalised by inference */
  int64_t R = x->shape[ax], I = 1;
  for (int d = ax + 1; d < x->ndim; d++) I *= x->shape[d];
  if (x->size == 0) return MX_OK;
  int64_t O = x->size / (R * I);
  int64_t nblk = I == 1 ? 1 : (I + IBLK - 1) / IBLK;
  /* log_softmax re-reads x after y holds the exponentials: in place, read a copy.
   * f16/bf16 compute in float32 buffers, converted once each way. */
  void *copy = NULL, *y32 = NULL;
  const void *src = mx_ptr(x);
  void *dst = mx_ptr(out[0]);
  if (half) {
    copy = malloc(sizeof(float) * (size_t)x->size);
    y32 = malloc(sizeof(float) * (size_t)x->size);
    if (!copy || !y32) {
      free(copy);
      free(y32);
      return mx_err(MX_ENOMEM, "softmax: out of memory");
    }
    mx_convert(copy, MX_F32, src, x->dtype, x->size);
    src = copy;
    dst = y32;
  } else if (log_ && mx_ptr(x) == mx_ptr(out[0])) {
    copy = malloc(mx_nbytes(x));
    if (!copy) return mx_err(MX_ENOMEM, "log_softmax: out of memory");
    memcpy(copy, src, mx_nbytes(x));
    src = copy;
  }
  sm_ctx c = {log_, sp->temperature, src, dst, O, R, I, nblk};
  int64_t ntask = O * nblk, work = x->size / ntask;
  int64_t grain = work >= GRAIN ? 1 : GRAIN / (work ? work : 1);
  mx_parallel_for(ntask, grain, x->dtype == MX_F64 ? sm_range64 : sm_range32, &c);
  if (half) mx_convert(mx_ptr(out[0]), x->dtype, y32, MX_F32, x->size);
  free(copy);
  free(y32);
  return MX_OK;
}

static int softmax_length(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          mx_tensor *const *out, bool log_);

int mx_cpu_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nout;
  if (out[0]->dtype != in[0]->dtype)
    return mx_err(MX_EINVAL, "%s: dtype %s differs from the data's %s: mx.nd and mx.sym compute "
                  "it through casts, the kernel takes the data's dtype", "softmax",
                  mx_dtype_name(out[0]->dtype), mx_dtype_name(in[0]->dtype));
  if (nin > 1) return softmax_length(ctx, p, nin, in, out, false);
  return softmax(ctx, p, in, out, false);
}
int mx_cpu_log_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)nout;
  if (out[0]->dtype != in[0]->dtype)
    return mx_err(MX_EINVAL, "%s: dtype %s differs from the data's %s: mx.nd and mx.sym compute "
                  "it through casts, the kernel takes the data's dtype", "log_softmax",
                  mx_dtype_name(out[0]->dtype), mx_dtype_name(in[0]->dtype));
  if (nin > 1) return softmax_length(ctx, p, nin, in, out, true);
  return softmax(ctx, p, in, out, true);
}

/* ---------------------------------------------------------------- softmin
 * softmax of -x: the negation goes to a copy (f32/f64; also what makes out= x safe), then
 * the softmax loops above; f16/bf16 and integers run the reference. */
int mx_cpu_softmin(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_softmin *sp = p;
  const mx_tensor *x = in[0];
  if ((x->dtype != MX_F32 && x->dtype != MX_F64) || out[0]->dtype != x->dtype)
    return MX_DECLINE;
  if (x->size == 0) return MX_OK;
  int ax = ctx->info.axis; /* normalised by inference */
  int64_t R = x->shape[ax], I = 1;
  for (int d = ax + 1; d < x->ndim; d++) I *= x->shape[d];
  int64_t O = x->size / (R * I);
  int64_t nblk = I == 1 ? 1 : (I + IBLK - 1) / IBLK;
  void *neg = malloc(mx_nbytes(x));
  if (!neg) return mx_err(MX_ENOMEM, "softmin: out of memory");
  if (x->dtype == MX_F32) {
    const float *a = mx_ptr(x);
    float *b = neg;
    for (int64_t i = 0; i < x->size; i++) b[i] = -a[i];
  } else {
    const double *a = mx_ptr(x);
    double *b = neg;
    for (int64_t i = 0; i < x->size; i++) b[i] = -a[i];
  }
  sm_ctx c = {false, sp->temperature, neg, mx_ptr(out[0]), O, R, I, nblk};
  int64_t ntask = O * nblk, work = x->size / ntask;
  int64_t grain = work >= GRAIN ? 1 : GRAIN / (work ? work : 1);
  mx_parallel_for(ntask, grain, x->dtype == MX_F64 ? sm_range64 : sm_range32, &c);
  free(neg);
  return MX_OK;
}

/* ---------------------------------------------------------------- lengths and masks
 * softmax / log_softmax with a length and masked_softmax / masked_log_softmax on the last
 * axis (contiguous rows) in f32/f64: rows over the pool, each row's kept elements only
 * (a prefix for a length, a mask row otherwise), exp through libmvec; other axes and
 * dtypes run the reference. Lengths are checked up front, on the calling thread. */

typedef struct {
  bool log_, f64;
  double t;
  const void *x;
  void *y;
  int64_t R;
  const int64_t *len;   /* per row, or NULL */
  const uint8_t *keep;  /* masks: the mask as 0/1 bytes */
  int64_t kstride;      /* masks: elements between a row's keep flags (1, or 0: broadcast) */
  const int64_t *krow;  /* masks: the keep row of each data row */
} lm_ctx;

#define LM_ROWS(name, T, EXP)                                                             \
  static void name(const lm_ctx *c, int64_t b, int64_t e) {                             \
    for (int64_t row = b; row < e; row++) {                                             \
      const T *x = (const T *)c->x + row * c->R;                                        \
      T *y = (T *)c->y + row * c->R;                                                    \
      const uint8_t *k = c->keep ? c->keep + c->krow[row] : NULL;                       \
      int64_t n = c->len ? c->len[row] : c->R;                                          \
      double m = -INFINITY, s = 0;                                                      \
      for (int64_t i = 0; i < n; i++)                                                   \
        if (!k || k[i * c->kstride]) m = (x[i] > m || x[i] != x[i]) ? x[i] : m;          \
      for (int64_t i = 0; i < n; i++) {                                                 \
        T z = (T)((x[i] - m) / c->t);                                                   \
        T v = EXP(z);                                                                   \
        if (k && !k[i * c->kstride]) v = 0;                                             \
        y[i] = v;                                                                       \
        s += v;                                                                         \
      }                                                                                 \
      T ls = (T)log(s), inv = (T)(1 / s);                                               \
      T pad = c->log_ && k ? (T)-INFINITY : (T)0;                                       \
      for (int64_t i = 0; i < n; i++) {                                                 \
        if (k && !k[i * c->kstride]) y[i] = pad;                                        \
        else y[i] = c->log_ ? (T)((x[i] - m) / c->t) - ls : y[i] * inv;                 \
      }                                                                                 \
      for (int64_t i = n; i < c->R; i++) y[i] = 0;                                      \
    }                                                                                   \
  }
LM_ROWS(lm_rows32, float, sm_expf)
LM_ROWS(lm_rows64, double, sm_exp)

static void lm_range(int64_t b, int64_t e, void *vc) {
  const lm_ctx *c = vc;
  if (c->f64) lm_rows64(c, b, e);
  else lm_rows32(c, b, e);
}

static int softmax_length(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          mx_tensor *const *out, bool log_) {
  const struct mx_params_softmax *sp = p;
  const mx_tensor *x = in[0], *l = in[1];
  int ax = ctx->info.axis;
  if ((x->dtype != MX_F32 && x->dtype != MX_F64) || out[0]->dtype != x->dtype
      || ax != x->ndim - 1 || mx_ptr(x) == mx_ptr(out[0]))
    return MX_DECLINE;
  int64_t R = x->shape[ax], rows = R ? x->size / R : 0;
  int64_t *len = malloc(sizeof(int64_t) * (size_t)(rows + 1));
  if (!len) return mx_err(MX_ENOMEM, "softmax: out of memory");
  for (int64_t j = 0; j < rows; j++) {
    double v = mx_load_f64(mx_ptr(l), l->dtype, j);
    if (!(v >= 0 && v <= (double)R) || v != floor(v)) {
      free(len);
      return mx_err(MX_EINVAL, "%s: length element %lld is %g, expected an integer in 0..%lld "
                    "(the axis' size)", log_ ? "log_softmax" : "softmax", (long long)j + 1, v,
                    (long long)R);
    }
    len[j] = (int64_t)v;
  }
  lm_ctx c = {log_, x->dtype == MX_F64, sp->temperature, mx_ptr(x), mx_ptr(out[0]), R, len,
              NULL, 0, NULL};
  mx_parallel_for(rows, R >= GRAIN ? 1 : GRAIN / (R ? R : 1), lm_range, &c);
  free(len);
  return MX_OK;
}

static int masked_cpu(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      mx_tensor *const *out, bool log_) {
  const struct mx_params_masked_softmax *sp = p;
  const mx_tensor *x = in[0], *mk = in[1];
  int ax = ctx->info.axis, nd = x->ndim;
  if ((x->dtype != MX_F32 && x->dtype != MX_F64) || out[0]->dtype != x->dtype
      || ax != nd - 1 || mx_ptr(x) == mx_ptr(out[0]) || x->size == 0)
    return MX_DECLINE;
  int64_t R = x->shape[ax], rows = x->size / R;
  /* the mask as bytes, and per data row the offset of its mask row (broadcast dims) */
  uint8_t *keep = malloc((size_t)mk->size + 1);
  int64_t *krow = malloc(sizeof(int64_t) * (size_t)rows);
  if (!keep || !krow) {
    free(keep);
    free(krow);
    return mx_err(MX_ENOMEM, "masked_softmax: out of memory");
  }
  if (mk->dtype == MX_BOOL || mk->dtype == MX_U8 || mk->dtype == MX_I8) {
    const uint8_t *b = mx_ptr(mk);
    for (int64_t i = 0; i < mk->size; i++) keep[i] = b[i] != 0;
  } else {
    for (int64_t i = 0; i < mk->size; i++) keep[i] = mx_load_f64(mx_ptr(mk), mk->dtype, i) != 0;
  }
  for (int64_t r = 0; r < rows; r++) {
    int64_t rem = r, off = 0, stride = mk->shape[nd - 1];
    for (int d = nd - 2; d >= 0; d--) {
      int64_t c = rem % x->shape[d];
      rem /= x->shape[d];
      if (mk->shape[d] != 1) off += c * stride;
      stride *= mk->shape[d];
    }
    krow[r] = off;
  }
  lm_ctx c = {log_, x->dtype == MX_F64, sp->temperature, mx_ptr(x), mx_ptr(out[0]), R, NULL,
              keep, mk->shape[nd - 1] == 1 ? 0 : 1, krow};
  mx_parallel_for(rows, R >= GRAIN ? 1 : GRAIN / (R ? R : 1), lm_range, &c);
  free(keep);
  free(krow);
  return MX_OK;
}

int mx_cpu_masked_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)nout;
  return masked_cpu(ctx, p, nin, in, out, false);
}
int mx_cpu_masked_log_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)nout;
  return masked_cpu(ctx, p, nin, in, out, true);
}
