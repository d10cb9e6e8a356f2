/* kernels/cpu/norm.c — fast normalisation kernels with own loops, and batch_norm on
 * oneDNN for data in its blocked layout (at the end).
 * batch_norm: data viewed as (outer, C, inner) around the channel axis. With inner > 1
 * (NCHW) three passes, each over threads: per-row sums in memory order, a cheap
 * per-channel combine (statistics, moving update, coefficients), then one row pass
 * y = x * A[c] + B[c] (the backward alike). With inner == 1 (channels last) one pass over
 * the rows accumulates every channel at once. Statistics are one pass around a shift (the
 * channel's first element), rows summed in vector lanes and combined in double, so
 * cancellation stays small without a second read of the data. */
#include "mx_ops_gen.h"
#include "internal.h"

#include <math.h>
#include <string.h>

typedef struct {
  const void *x, *dy, *gamma, *beta;
  void *out, *mean, *istd, *mm, *mv, *dgamma, *dbeta;
  int64_t outer, c, inner;
  double eps, momentum;
  double *A, *B, *C; /* per-channel coefficients of the row pass (workspace) */
  double *RS, *RQ;   /* per-row sums (outer * c each, workspace) */
  bool batch, fix_gamma, global;
} bn_job;

static double invstd_of(double var, double eps) {
  return var == 0 && eps == 0 ? 0 : 1 / sqrt(var + eps);
}

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
ROWSUM_DEFINE(float, v8f, f32)
ROWSUM_DEFINE(double, v4d, f64)

#define BN_DEFINE(T, SUF)                                                                     \
  /* per channel [k0, k1): statistics, moving update, normalisation (inner > 1) */            \
  static void bn_fwd_##SUF(int64_t k0, int64_t k1, void *arg) {                               \
    const bn_job *J = arg;                                                                    \
    const T *x = J->x;                                                                        \
    int64_t c = J->c, in = J->inner, n = J->outer * in;                                       \
    for (int64_t k = k0; k < k1; k++) {                                                       \
      double mean, istd;                                                                      \
      if (J->batch) {                                                                         \
        T sh = n ? x[k * in] : 0;                                                             \
        double s = 0, q = 0;                                                                  \
        for (int64_t o = 0; o < J->outer; o++) s += J->RS[o * c + k], q += J->RQ[o * c + k];  \
        double dm = n ? s / (double)n : 0;                                                    \
        double var = n ? q / (double)n - dm * dm : 0;                                         \
        if (var < 0) var = 0;                                                                 \
        mean = sh + dm;                                                                       \
        istd = invstd_of(var, J->eps);                                                        \
        if (n) {                                                                              \
          T *mm = J->mm, *mv = J->mv;                                                         \
          double m = J->momentum;                                                             \
          mm[k] = (T)(mm[k] * m + mean * (1 - m));                                            \
          mv[k] = (T)(mv[k] * m + var * (1 - m));                                             \
        }                                                                                     \
      } else {                                                                                \
        mean = ((const T *)J->mm)[k];                                                         \
        istd = invstd_of(((const T *)J->mv)[k], J->eps);                                      \
      }                                                                                       \
      double g = J->fix_gamma ? 1 : ((const T *)J->gamma)[k];                                 \
      J->A[k] = istd * g;                                                                     \
      J->B[k] = ((const T *)J->beta)[k] - mean * istd * g;                                    \
      ((T *)J->mean)[k] = (T)mean;                                                            \
      ((T *)J->istd)[k] = (T)istd;                                                            \
    }                                                                                         \
  }                                                                                           \
  static void bn_bwd_##SUF(int64_t k0, int64_t k1, void *arg) {                               \
    const bn_job *J = arg;                                                                    \
    int64_t c = J->c, in = J->inner;                                                          \
    double n = (double)(J->outer * in);                                                       \
    for (int64_t k = k0; k < k1; k++) {                                                       \
      T mean = ((const T *)J->mean)[k];                                                       \
      double istd = ((const T *)J->istd)[k];                                                  \
      double g = J->fix_gamma ? 1 : ((const T *)J->gamma)[k];                                 \
      double sdy = 0, sdx = 0;                                                                \
      for (int64_t o = 0; o < J->outer; o++) sdy += J->RS[o * c + k], sdx += J->RQ[o * c + k]; \
      double sdyx = sdx * istd; /* sum(dy * xhat) */                                          \
      T a, b, cc;                                                                             \
      if (J->global) a = (T)(g * istd), b = 0, cc = 0;                                        \
      else {                                                                                  \
        a = (T)(g * istd);                                                                    \
        b = (T)(g * istd * istd * sdyx / n); /* times (x - mean) */                           \
        cc = (T)(g * istd * sdy / n);                                                         \
      }                                                                                       \
      /* dx = dy * a - x * b + (mean * b - cc) */                                            \
      J->A[k] = a, J->B[k] = b, J->C[k] = (double)mean * b - cc;                              \
      ((T *)J->dgamma)[k] = (T)(J->fix_gamma ? 0 : sdyx);                                     \
      ((T *)J->dbeta)[k] = (T)sdy;                                                            \
    }                                                                                         \
  }                                                                                           \
  /* rows [r0, r1) of (outer * c) in memory order: the per-row sums the channel passes     \
   * above combine (forward: around the channel's first element; backward: dy, dy (x-m)) */ \
  static void bn_rowsum_fwd_##SUF(int64_t r0, int64_t r1, void *arg) {                        \
    const bn_job *J = arg;                                                                    \
    const T *x = J->x;                                                                        \
    int64_t in = J->inner;                                                                    \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      J->RS[r] = J->RQ[r] = 0;                                                                \
      row_stat_##SUF(x + r * in, in, x[(r % J->c) * in], &J->RS[r], &J->RQ[r]);               \
    }                                                                                         \
  }                                                                                           \
  static void bn_rowsum_bwd_##SUF(int64_t r0, int64_t r1, void *arg) {                        \
    const bn_job *J = arg;                                                                    \
    int64_t in = J->inner;                                                                    \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      J->RS[r] = J->RQ[r] = 0;                                                                \
      row_dot_##SUF((const T *)J->dy + r * in, (const T *)J->x + r * in, in,                  \
                    ((const T *)J->mean)[r % J->c], &J->RS[r], &J->RQ[r]);                    \
    }                                                                                         \
  }                                                                                           \
  /* rows [r0, r1) of (outer * c) in memory order: y = x * A[k] + B[k] */                    \
  static void bn_rows_fwd_##SUF(int64_t r0, int64_t r1, void *arg) {                          \
    const bn_job *J = arg;                                                                    \
    int64_t in = J->inner;                                                                    \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      const T *x = (const T *)J->x + r * in;                                                  \
      T *y = (T *)J->out + r * in;                                                            \
      T a = (T)J->A[r % J->c], b = (T)J->B[r % J->c];                                         \
      for (int64_t i = 0; i < in; i++) y[i] = x[i] * a + b;                                   \
    }                                                                                         \
  }                                                                                           \
  static void bn_rows_bwd_##SUF(int64_t r0, int64_t r1, void *arg) {                          \
    const bn_job *J = arg;                                                                    \
    int64_t in = J->inner;                                                                    \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      const T *x = (const T *)J->x + r * in, *d = (const T *)J->dy + r * in;                  \
      T *w = (T *)J->out + r * in;                                                            \
      T a = (T)J->A[r % J->c], b = (T)J->B[r % J->c], cc = (T)J->C[r % J->c];                 \
      for (int64_t i = 0; i < in; i++) w[i] = d[i] * a - x[i] * b + cc;                       \
    }                                                                                         \
  }                                                                                           \
  /* channels last (inner == 1): rows of c, accumulated per channel in double (ws) */         \
  static int bn_fwd_last_##SUF(const mx_kctx *ctx, bn_job *J) {                               \
    int64_t c = J->c, rows = J->outer;                                                        \
    double *acc = mx_kctx_workspace(ctx, sizeof(double) * (size_t)(4 * c + 1));               \
    if (!acc) return mx_err(MX_ENOMEM, "batch_norm: out of memory (workspace)");              \
    double *s = acc, *q = acc + c, *A = acc + 2 * c, *B = acc + 3 * c;                        \
    const T *x = J->x;                                                                        \
    T *y = J->out;                                                                            \
    for (int64_t k = 0; k < c; k++) {                                                         \
      double mean, istd;                                                                      \
      if (!J->batch) {                                                                        \
        mean = ((const T *)J->mm)[k];                                                         \
        istd = invstd_of(((const T *)J->mv)[k], J->eps);                                      \
      } else mean = istd = 0;                                                                 \
      s[k] = mean, q[k] = istd;                                                               \
    }                                                                                         \
    if (J->batch) {                                                                           \
      double *sh = A; /* the shift: row 0 */                                                  \
      for (int64_t k = 0; k < c; k++) sh[k] = rows ? x[k] : 0, s[k] = q[k] = 0;               \
      for (int64_t o = 0; o < rows; o++)                                                      \
        for (int64_t k = 0; k < c; k++) {                                                     \
          double e = x[o * c + k] - sh[k];                                                    \
          s[k] += e, q[k] += e * e;                                                           \
        }                                                                                     \
      for (int64_t k = 0; k < c; k++) {                                                       \
        double dm = rows ? s[k] / (double)rows : 0;                                           \
        double var = rows ? q[k] / (double)rows - dm * dm : 0;                                \
        if (var < 0) var = 0;                                                                 \
        s[k] = sh[k] + dm;                                                                    \
        q[k] = invstd_of(var, J->eps);                                                        \
        if (rows) {                                                                           \
          T *mm = J->mm, *mv = J->mv;                                                         \
          double m = J->momentum;                                                             \
          mm[k] = (T)(mm[k] * m + s[k] * (1 - m));                                            \
          mv[k] = (T)(mv[k] * m + var * (1 - m));                                             \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    for (int64_t k = 0; k < c; k++) {                                                         \
      double g = J->fix_gamma ? 1 : ((const T *)J->gamma)[k];                                 \
      A[k] = q[k] * g;                                                                        \
      B[k] = ((const T *)J->beta)[k] - s[k] * q[k] * g;                                       \
      ((T *)J->mean)[k] = (T)s[k];                                                            \
      ((T *)J->istd)[k] = (T)q[k];                                                            \
    }                                                                                         \
    for (int64_t o = 0; o < rows; o++)                                                        \
      for (int64_t k = 0; k < c; k++) y[o * c + k] = (T)(x[o * c + k] * A[k] + B[k]);         \
    return MX_OK;                                                                             \
  }                                                                                           \
  static int bn_bwd_last_##SUF(const mx_kctx *ctx, bn_job *J) {                               \
    int64_t c = J->c, rows = J->outer;                                                        \
    double *acc = mx_kctx_workspace(ctx, sizeof(double) * (size_t)(5 * c + 1));               \
    if (!acc) return mx_err(MX_ENOMEM, "batch_norm_backward: out of memory (workspace)");     \
    double *sdy = acc, *sdx = acc + c, *A = acc + 2 * c, *B = acc + 3 * c, *C = acc + 4 * c;  \
    const T *x = J->x, *dy = J->dy, *mean = J->mean, *istd = J->istd;                         \
    T *dx = J->out;                                                                           \
    double n = (double)rows;                                                                  \
    for (int64_t k = 0; k < c; k++) sdy[k] = sdx[k] = 0;                                      \
    for (int64_t o = 0; o < rows; o++)                                                        \
      for (int64_t k = 0; k < c; k++) {                                                       \
        double d = dy[o * c + k];                                                             \
        sdy[k] += d, sdx[k] += d * (x[o * c + k] - mean[k]);                                  \
      }                                                                                       \
    for (int64_t k = 0; k < c; k++) {                                                         \
      double g = J->fix_gamma ? 1 : ((const T *)J->gamma)[k], is = istd[k];                   \
      double sdyx = sdx[k] * is;                                                              \
      A[k] = g * is;                                                                          \
      B[k] = J->global ? 0 : g * is * is * sdyx / n;                                          \
      C[k] = J->global ? 0 : g * is * sdy[k] / n;                                             \
      ((T *)J->dgamma)[k] = (T)(J->fix_gamma ? 0 : sdyx);                                     \
      ((T *)J->dbeta)[k] = (T)sdy[k];                                                         \
    }                                                                                         \
    for (int64_t o = 0; o < rows; o++)                                                        \
      for (int64_t k = 0; k < c; k++)                                                         \
        dx[o * c + k] = (T)(dy[o * c + k] * A[k] - (x[o * c + k] - mean[k]) * B[k] - C[k]);   \
    return MX_OK;                                                                             \
  }

BN_DEFINE(float, f32)
BN_DEFINE(double, f64)

static void split3(const mx_tensor *x, int ax, bn_job *J) {
  J->outer = 1, J->inner = 1, J->c = x->shape[ax];
  for (int d = 0; d < ax; d++) J->outer *= x->shape[d];
  for (int d = ax + 1; d < x->ndim; d++) J->inner *= x->shape[d];
}

static int64_t row_grain(const bn_job *J) {
  return J->inner >= 32768 ? 1 : 32768 / J->inner;
}

static int coef_alloc(const mx_kctx *ctx, bn_job *J, const char *op) {
  J->A = mx_kctx_workspace(ctx, sizeof(double) * (size_t)(3 * J->c + 2 * J->outer * J->c + 1));
  if (!J->A) return mx_err(MX_ENOMEM, "%s: out of memory (workspace)", op);
  J->B = J->A + J->c, J->C = J->B + J->c;
  J->RS = J->C + J->c, J->RQ = J->RS + J->outer * J->c;
  return MX_OK;
}

int mx_cpu_batch_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_batch_norm *P = p;
  bn_job J;
  int rc;
  memset(&J, 0, sizeof J);
  split3(in[0], ctx->info.axis, &J);
  J.x = mx_ptr(in[0]), J.gamma = mx_ptr(in[1]), J.beta = mx_ptr(in[2]);
  J.mm = mx_ptr(in[3]), J.mv = mx_ptr(in[4]);
  J.out = mx_ptr(out[0]), J.mean = mx_ptr(out[1]), J.istd = mx_ptr(out[2]);
  J.eps = P->eps, J.momentum = P->momentum;
  J.batch = P->training && !P->use_global_stats;
  J.fix_gamma = P->fix_gamma;
  bool f32 = in[0]->dtype == MX_F32;
  if (J.inner == 1 && J.c > 1) return f32 ? bn_fwd_last_f32(ctx, &J) : bn_fwd_last_f64(ctx, &J);
  if ((rc = coef_alloc(ctx, &J, "batch_norm"))) return rc;
  if (J.batch)
    mx_parallel_for(J.outer * J.c, row_grain(&J), f32 ? bn_rowsum_fwd_f32 : bn_rowsum_fwd_f64, &J);
  mx_parallel_for(J.c, 1 << 20, f32 ? bn_fwd_f32 : bn_fwd_f64, &J); /* per channel: cheap */
  mx_parallel_for(J.outer * J.c, row_grain(&J), f32 ? bn_rows_fwd_f32 : bn_rows_fwd_f64, &J);
  return MX_OK;
}

int mx_cpu_batch_norm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_batch_norm_backward *P = p;
  bn_job J;
  int rc;
  memset(&J, 0, sizeof J);
  split3(in[1], ctx->info.axis, &J);
  J.dy = mx_ptr(in[0]), J.x = mx_ptr(in[1]), J.gamma = mx_ptr(in[2]);
  J.mean = mx_ptr(in[3]), J.istd = mx_ptr(in[4]);
  J.out = mx_ptr(out[0]), J.dgamma = mx_ptr(out[1]), J.dbeta = mx_ptr(out[2]);
  J.fix_gamma = P->fix_gamma, J.global = P->global_stats;
  bool f32 = in[1]->dtype == MX_F32;
  if (J.inner == 1 && J.c > 1) return f32 ? bn_bwd_last_f32(ctx, &J) : bn_bwd_last_f64(ctx, &J);
  if ((rc = coef_alloc(ctx, &J, "batch_norm_backward"))) return rc;
  mx_parallel_for(J.outer * J.c, row_grain(&J), f32 ? bn_rowsum_bwd_f32 : bn_rowsum_bwd_f64, &J);
  mx_parallel_for(J.c, 1 << 20, f32 ? bn_bwd_f32 : bn_bwd_f64, &J); /* per channel: cheap */
  mx_parallel_for(J.outer * J.c, row_grain(&J), f32 ? bn_rows_bwd_f32 : bn_rows_bwd_f64, &J);
  return MX_OK;
}

/* ---- group_norm / instance_norm: (N, G, M) rows, M = (C / G) * spatial, contiguous; one
 * row per (sample, group), the rows split over threads; gamma/beta per group (instance:
 * G = C). Statistics one pass around the row's first element, in double. */
typedef struct {
  const void *x, *dy, *gamma, *beta, *mean, *sd;
  void *out, *omean, *osd;
  double *dg, *db; /* backward: per-row partial dgamma/dbeta (summed per group after) */
  int64_t g, m;
  double eps;
} gn_job;

#define GN_DEFINE(T, SUF)                                                                     \
  static void gn_fwd_##SUF(int64_t r0, int64_t r1, void *arg) {                               \
    const gn_job *J = arg;                                                                    \
    int64_t m = J->m;                                                                         \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      const T *x = (const T *)J->x + r * m;                                                   \
      T *y = (T *)J->out + r * m;                                                             \
      T sh = m ? x[0] : 0;                                                                    \
      double s = 0, q = 0;                                                                    \
      row_stat_##SUF(x, m, sh, &s, &q);                                                       \
      double dm = m ? s / (double)m : 0, var = m ? q / (double)m - dm * dm : 0;               \
      if (var < 0) var = 0;                                                                   \
      double mean = sh + dm, sd = sqrt(var + J->eps);                                         \
      double ga = ((const T *)J->gamma)[r % J->g], be = ((const T *)J->beta)[r % J->g];       \
      T a = (T)(sd > 0 ? ga / sd : 0), b = (T)(sd > 0 ? be - mean * ga / sd : be);            \
      for (int64_t i = 0; i < m; i++) y[i] = x[i] * a + b;                                    \
      ((T *)J->omean)[r] = (T)mean;                                                           \
      ((T *)J->osd)[r] = (T)sd;                                                               \
    }                                                                                         \
  }                                                                                           \
  static void gn_bwd_##SUF(int64_t r0, int64_t r1, void *arg) {                               \
    const gn_job *J = arg;                                                                    \
    int64_t m = J->m;                                                                         \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      const T *x = (const T *)J->x + r * m, *d = (const T *)J->dy + r * m;                    \
      T *w = (T *)J->out + r * m;                                                             \
      T mean = ((const T *)J->mean)[r];                                                       \
      double sd = ((const T *)J->sd)[r], is = sd > 0 ? 1 / sd : 0;                            \
      double ga = ((const T *)J->gamma)[r % J->g], sdy = 0, sdx = 0;                          \
      row_dot_##SUF(d, x, m, mean, &sdy, &sdx);                                               \
      double sdyx = sdx * is, n = m ? (double)m : 1;                                          \
      /* dx = ga is (dy - sdy/m - xhat sdyx/m) = dy a - (x - mean) b - c */                   \
      T a = (T)(ga * is), b = (T)(ga * is * is * sdyx / n), c = (T)(ga * is * sdy / n);        \
      for (int64_t i = 0; i < m; i++) w[i] = d[i] * a - (x[i] - mean) * b - c;                \
      J->dg[r] = sdyx, J->db[r] = sdy;                                                        \
    }                                                                                         \
  }

GN_DEFINE(float, f32)
GN_DEFINE(double, f64)

static int gn_cpu_forward(const mx_kctx *ctx, double eps, int64_t groups, mx_tensor *const *in,
                          mx_tensor *const *out) {
  (void)ctx;
  const mx_tensor *x = in[0];
  gn_job J;
  memset(&J, 0, sizeof J);
  int64_t n = x->shape[0];
  J.g = groups > 0 ? groups : x->shape[1];
  J.m = n && J.g ? x->size / (n * J.g) : 0;
  J.x = mx_ptr(x), J.gamma = mx_ptr(in[1]), J.beta = mx_ptr(in[2]);
  J.out = mx_ptr(out[0]), J.omean = mx_ptr(out[1]), J.osd = mx_ptr(out[2]);
  J.eps = eps;
  int64_t grain = J.m >= 32768 ? 1 : 32768 / (J.m ? J.m : 1);
  mx_parallel_for(n * J.g, grain, x->dtype == MX_F32 ? gn_fwd_f32 : gn_fwd_f64, &J);
  return MX_OK;
}

int mx_cpu_group_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_group_norm *P = p;
  return gn_cpu_forward(ctx, P->eps, P->num_groups, in, out);
}

int mx_cpu_instance_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_instance_norm *P = p;
  return gn_cpu_forward(ctx, P->eps, 0, in, out);
}

int mx_cpu_group_norm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_group_norm_backward *P = p;
  const mx_tensor *x = in[1];
  gn_job J;
  memset(&J, 0, sizeof J);
  int64_t n = x->shape[0];
  J.g = P->num_groups > 0 ? P->num_groups : x->shape[1];
  J.m = n && J.g ? x->size / (n * J.g) : 0;
  J.dy = mx_ptr(in[0]), J.x = mx_ptr(x), J.gamma = mx_ptr(in[2]);
  J.mean = mx_ptr(in[3]), J.sd = mx_ptr(in[4]), J.out = mx_ptr(out[0]);
  J.dg = mx_kctx_workspace(ctx, sizeof(double) * (size_t)(2 * n * J.g + 1));
  if (!J.dg) return mx_err(MX_ENOMEM, "group_norm_backward: out of memory (workspace)");
  J.db = J.dg + n * J.g;
  int64_t grain = J.m >= 32768 ? 1 : 32768 / (J.m ? J.m : 1);
  bool f32 = x->dtype == MX_F32;
  mx_parallel_for(n * J.g, grain, f32 ? gn_bwd_f32 : gn_bwd_f64, &J);
  for (int64_t g = 0; g < J.g; g++) { /* the rows' sums per group, in sample order */
    double sg = 0, sb = 0;
    for (int64_t s = 0; s < n; s++) sg += J.dg[s * J.g + g], sb += J.db[s * J.g + g];
    if (f32) ((float *)mx_ptr(out[1]))[g] = (float)sg, ((float *)mx_ptr(out[2]))[g] = (float)sb;
    else ((double *)mx_ptr(out[1]))[g] = sg, ((double *)mx_ptr(out[2]))[g] = sb;
  }
  return MX_OK;
}

/* ---- oneDNN: batch_norm forward on blocked inputs ------------------------------------------
 * Only data in oneDNN's blocked layout (MX_LAYOUT_ONEDNN, from a oneDNN conv) with the
 * channel axis 2: the output keeps that layout, so conv -> batch_norm -> relu runs with no
 * reorder. Row-major calls stay on the loops above. The batch mean and (biased) variance
 * come from oneDNN; the inverse std and the moving update are done here, per channel. */
#ifdef MX_HAVE_ONEDNN
#include "layout.h"
#include "onednn.h"

#include <stdlib.h>

typedef struct {
  int prop;            /* dnnl_forward_training / dnnl_forward_inference */
  unsigned flags;
  float eps;
  dnnl_memory_desc_t md;
} bn_dnnl_key;

static void *bn_dnnl_build(const void *key, void *arg) {
  (void)arg;
  const bn_dnnl_key *k = key;
  dnnl_batch_normalization_desc_t d;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t p = NULL;
  if (dnnl_batch_normalization_forward_desc_init(&d, (dnnl_prop_kind_t)k->prop, &k->md, k->eps,
                                                 k->flags) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &d, NULL, mx_dnnl_engine(), NULL) == dnnl_success &&
      dnnl_primitive_create(&p, pd) != dnnl_success)
    p = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return p;
}
static void bn_dnnl_destroy(void *p) { dnnl_primitive_destroy(p); }

static bool bn_dnnl_supports(const mx_op_def *def, const void *params, int nin, const mx_desc *in,
                             int nout, const mx_desc *out, const char **why) {
  (void)def, (void)nin, (void)nout, (void)out, (void)why;
  const struct mx_params_batch_norm *P = params;
  if (in[0].layout != MX_LAYOUT_ONEDNN || in[0].dtype != MX_F32) return false;
  if (P->axis != 1 || in[0].ndim < 3 || in[0].ndim > 5) return false;
  for (int i = 1; i < 5; i++)
    if (in[i].dtype != MX_F32 || in[i].layout != MX_LAYOUT_ROW_MAJOR) return false;
  return true;
}

/* Output 0 in the input's blocked layout: a copy of its descriptor, the same layout
 * (the tensor frees the descriptor with the layout's free_md). */
/* ~flops per element of a batch norm forward (two passes: statistics, normalise); the
 * team size follows it (onednn.h: one thread per MX_DNNL_FLOPS_PER_THREAD) */
#define BN_FLOPS_PER_ELEM 8.0

static int bn_dnnl_out_layout(const mx_op_def *def, const void *params, int nin,
                              mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)params, (void)nin;
  *out = NULL;
  if (i != 0 || !in[0]->layout || in[0]->layout->code != MX_LAYOUT_ONEDNN) return MX_OK;
  dnnl_memory_desc_t *m = malloc(sizeof *m);
  if (!m) return mx_err(MX_ENOMEM, "batch_norm: out of host memory for a layout descriptor");
  memcpy(m, in[0]->layout_md, sizeof *m);
  int rc = mx_tensor_new_laid(od->ndim, od->shape, od->dtype, dnnl_memory_desc_get_size(m),
                              in[0]->layout, m, out);
  if (rc) free(m);
  return rc;
}

static int bn_dnnl_run(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_batch_norm *P = params;
  const mx_tensor *x = in[0];
  mx_tensor *y = out[0];
  int64_t c = x->shape[1];
  bool batch = P->training && !P->use_global_stats;
  bn_dnnl_key k;
  memset(&k, 0, sizeof k);
  k.prop = batch ? dnnl_forward_training : dnnl_forward_inference;
  k.flags = dnnl_use_shift | (P->fix_gamma ? 0u : dnnl_use_scale) |
            (batch ? 0u : dnnl_use_global_stats);
  k.eps = (float)P->eps;
  memcpy(&k.md, x->layout_md, sizeof k.md);
  size_t ysz = dnnl_memory_desc_get_size(&k.md);
  bool scratch_y = y->layout == NULL; /* a row-major out= slot: compute blocked, reorder */
  float *ws = mx_kctx_workspace(ctx, sizeof(float) * (size_t)(2 * c) + 64 + (scratch_y ? ysz : 0));
  if (!ws) return mx_err(MX_ENOMEM, "batch_norm: out of memory (workspace)");
  float *bm = ws, *bv = ws + c;
  void *ydata = scratch_y ? (void *)((char *)ws + (((sizeof(float) * (size_t)(2 * c)) + 63) & ~(size_t)63))
                          : mx_ptr(y);
  mx_dnnl_entry *e = NULL;
  dnnl_primitive_t p = mx_dnnl_cache_get(MX_DNNL_NORM + 0, &k, sizeof k, bn_dnnl_build,
                                         bn_dnnl_destroy, NULL, &e);
  bool tmp = p == NULL;
  if (!p) p = bn_dnnl_build(&k, NULL);
  if (!p) return mx_err(MX_EINVAL, "batch_norm: oneDNN batch normalization unavailable");
  dnnl_memory_desc_t vmd;
  int rc = mx_dnnl_plain_md(&vmd, 1, &c, MX_F32);
  dnnl_stream_t s = mx_dnnl_stream();
  dnnl_engine_t eng = mx_dnnl_engine();
  dnnl_memory_t m[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
  const void *ptr[6] = {mx_ptr(x), ydata, mx_ptr(in[1]), mx_ptr(in[2]),
                        batch ? (void *)bm : mx_ptr(in[3]), batch ? (void *)bv : mx_ptr(in[4])};
  const int argk[6] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN,
                       DNNL_ARG_VARIANCE};
  bool ok = !rc && s;
  for (int i = 0; i < 6 && ok; i++)
    ok = dnnl_memory_create(&m[i], i < 2 ? &k.md : &vmd, eng, (void *)ptr[i]) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[6];
    int na = 0;
    for (int i = 0; i < 6; i++) {
      if (i == 2 && P->fix_gamma) continue;
      args[na].arg = argk[i], args[na].memory = m[i], na++;
    }
    int prev, nt = mx_dnnl_team_begin(BN_FLOPS_PER_ELEM * (double)x->size, &prev);
    ok = dnnl_primitive_execute(p, s, na, args) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
    mx_dnnl_team_end(nt, prev);
  }
  for (int i = 0; i < 6; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (tmp) dnnl_primitive_destroy(p);
  else mx_dnnl_cache_put(e);
  if (!ok) return rc ? rc : mx_err(MX_EINVAL, "batch_norm: oneDNN execution failed");
  if (scratch_y) {
    dnnl_memory_desc_t pm;
    if ((rc = mx_dnnl_plain_md(&pm, y->ndim, y->shape, y->dtype))) return rc;
    if ((rc = mx_dnnl_reorder(&k.md, ydata, &pm, mx_ptr(y)))) return rc;
  }
  float *mo = mx_ptr(out[1]), *so = mx_ptr(out[2]);
  const float *mmv = mx_ptr(in[3]), *mvv = mx_ptr(in[4]);
  for (int64_t j = 0; j < c; j++) {
    double mean = batch ? bm[j] : mmv[j], var = batch ? bv[j] : mvv[j];
    mo[j] = (float)mean;
    so[j] = (float)invstd_of(var, P->eps);
    if (batch) {
      float *mm = mx_ptr(in[3]), *mv = mx_ptr(in[4]);
      double mom = P->momentum;
      mm[j] = (float)(mm[j] * mom + mean * (1 - mom));
      mv[j] = (float)(mv[j] * mom + var * (1 - mom));
    }
  }
  return MX_OK;
}

/* batch_norm_backward on blocked data: ddata in data's layout (ograd reordered into it
 * when it comes in another), dgamma and dbeta row-major. The variance oneDNN wants is
 * recovered from the saved inverse std (1/invstd^2, with eps 0). Scale and shift go
 * packed (dnnl_use_scaleshift, a (2, C) tensor; gamma 1 with fix_gamma): oneDNN 2.6's
 * backward with separate dnnl_use_shift fails at execution (oneDNN issue #1717). */
typedef struct {
  unsigned flags;
  float eps;
  dnnl_memory_desc_t md;
} bnb_dnnl_key;

static void *bnb_dnnl_build(const void *key, void *arg) {
  (void)arg;
  const bnb_dnnl_key *k = key;
  dnnl_batch_normalization_desc_t fd, bd;
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  dnnl_primitive_t p = NULL;
  dnnl_engine_t eng = mx_dnnl_engine();
  if (dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &k->md, k->eps,
                                                 k->flags) == dnnl_success &&
      dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL) == dnnl_success &&
      dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &k->md, &k->md, k->eps,
                                                  k->flags) == dnnl_success &&
      dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd) == dnnl_success &&
      dnnl_primitive_create(&p, bpd) != dnnl_success)
    p = NULL;
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  return p;
}

static bool bnb_dnnl_supports(const mx_op_def *def, const void *params, int nin,
                              const mx_desc *in, int nout, const mx_desc *out, const char **why) {
  (void)def, (void)nin, (void)nout, (void)out, (void)why;
  const struct mx_params_batch_norm_backward *P = params;
  if (in[1].layout != MX_LAYOUT_ONEDNN || in[1].dtype != MX_F32) return false;
  if (P->axis != 1 || in[1].ndim < 3 || in[1].ndim > 5 || in[0].dtype != MX_F32) return false;
  for (int i = 2; i < 5; i++)
    if (in[i].dtype != MX_F32 || in[i].layout != MX_LAYOUT_ROW_MAJOR) return false;
  return true;
}

/* ddata (output 0) in the data's (input 2's) blocked layout */
static int bnb_dnnl_out_layout(const mx_op_def *def, const void *params, int nin,
                               mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)nin;
  mx_tensor *const sw[1] = {in[1]};
  return i == 0 ? bn_dnnl_out_layout(def, params, 1, sw, 0, od, out) : (*out = NULL, MX_OK);
}

static int bnb_dnnl_run(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_batch_norm_backward *P = params;
  const mx_tensor *dy = in[0], *x = in[1];
  mx_tensor *dx = out[0];
  int64_t c = x->shape[1];
  bnb_dnnl_key k;
  memset(&k, 0, sizeof k);
  k.flags = dnnl_use_scaleshift | (P->global_stats ? dnnl_use_global_stats : 0u);
  k.eps = 0; /* the variance passed below already holds eps: invstd = 1/sqrt(var') */
  memcpy(&k.md, x->layout_md, sizeof k.md);
  size_t sz = dnnl_memory_desc_get_size(&k.md);
  bool dy_same = dy->layout && dy->layout->code == MX_LAYOUT_ONEDNN &&
                 dnnl_memory_desc_equal(dy->layout_md, &k.md);
  bool dx_blocked = dx->layout != NULL;
  size_t head = ((sizeof(float) * (size_t)(5 * c)) + 63) & ~(size_t)63;
  char *ws = mx_kctx_workspace(ctx, head + (dy_same ? 0 : sz) + (dx_blocked ? 0 : sz) + 64);
  if (!ws) return mx_err(MX_ENOMEM, "batch_norm_backward: out of memory (workspace)");
  float *var = (float *)ws, *ss = var + c, *dss = ss + 2 * c; /* (2, C) scaleshift, its diff */
  const float *gam = mx_ptr(in[2]);
  for (int64_t j = 0; j < c; j++) ss[j] = P->fix_gamma ? 1.0f : gam[j], ss[c + j] = 0;
  void *dyp = dy_same ? mx_ptr(dy) : ws + head;
  void *dxp = dx_blocked ? mx_ptr(dx) : ws + head + (dy_same ? 0 : sz);
  int rc = MX_OK;
  const float *istd = mx_ptr(in[4]);
  for (int64_t j = 0; j < c; j++) /* istd 0 (zero variance, eps 0): MXNet's ddata is 0 */
    var[j] = istd[j] > 0 ? 1.0f / (istd[j] * istd[j]) : 1e30f;
  if (!dy_same) {
    if (dy->layout) rc = mx_dnnl_reorder(dy->layout_md, mx_ptr(dy), &k.md, dyp);
    else {
      dnnl_memory_desc_t pm;
      if (!(rc = mx_dnnl_plain_md(&pm, dy->ndim, dy->shape, dy->dtype)))
        rc = mx_dnnl_reorder(&pm, mx_ptr(dy), &k.md, dyp);
    }
    if (rc) return rc;
  }
  mx_dnnl_entry *e = NULL;
  dnnl_primitive_t p = mx_dnnl_cache_get(MX_DNNL_NORM + 1, &k, sizeof k, bnb_dnnl_build,
                                         bn_dnnl_destroy, NULL, &e);
  bool tmp = p == NULL;
  if (!p) p = bnb_dnnl_build(&k, NULL);
  if (!p) return mx_err(MX_EINVAL, "batch_norm_backward: oneDNN batch normalization unavailable");
  dnnl_memory_desc_t vmd, smd;
  int64_t sdims[2] = {2, c};
  rc = mx_dnnl_plain_md(&vmd, 1, &c, MX_F32);
  if (!rc) rc = mx_dnnl_plain_md(&smd, 2, sdims, MX_F32);
  dnnl_stream_t s = mx_dnnl_stream();
  dnnl_engine_t eng = mx_dnnl_engine();
  enum { NM = 7 };
  dnnl_memory_t m[NM] = {NULL};
  const void *ptr[NM] = {mx_ptr(x), dyp, dxp, mx_ptr(in[3]), var, ss, dss};
  const int argk[NM] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_MEAN,
                        DNNL_ARG_VARIANCE, DNNL_ARG_SCALE_SHIFT, DNNL_ARG_DIFF_SCALE_SHIFT};
  bool ok = !rc && s;
  for (int i = 0; i < NM && ok; i++)
    ok = dnnl_memory_create(&m[i], i < 3 ? &k.md : i < 5 ? &vmd : &smd, eng, (void *)ptr[i]) ==
         dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[NM];
    int na = 0;
    for (int i = 0; i < NM; i++) args[na].arg = argk[i], args[na].memory = m[i], na++;
    int prev, nt = mx_dnnl_team_begin(2 * BN_FLOPS_PER_ELEM * (double)x->size, &prev);
    ok = dnnl_primitive_execute(p, s, na, args) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
    mx_dnnl_team_end(nt, prev);
  }
  for (int i = 0; i < NM; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (tmp) dnnl_primitive_destroy(p);
  else mx_dnnl_cache_put(e);
  if (!ok) return rc ? rc : mx_err(MX_EINVAL, "batch_norm_backward: oneDNN execution failed");
  float *dg = mx_ptr(out[1]), *db = mx_ptr(out[2]);
  for (int64_t j = 0; j < c; j++) dg[j] = P->fix_gamma ? 0.0f : dss[j], db[j] = dss[c + j];
  if (!dx_blocked) {
    dnnl_memory_desc_t pm;
    if ((rc = mx_dnnl_plain_md(&pm, dx->ndim, dx->shape, dx->dtype))) return rc;
    if ((rc = mx_dnnl_reorder(&k.md, dxp, &pm, mx_ptr(dx)))) return rc;
  }
  return MX_OK;
}

__attribute__((constructor)) static void norm_dnnl_register(void) {
  int op = mx_op_find("batch_norm");
  if (op >= 0) {
    mx_kernel_register(op, MX_BACKEND_DNNL, bn_dnnl_run, bn_dnnl_supports, 1u << MX_LAYOUT_ONEDNN);
    mx_kernel_set_out_layout(op, MX_BACKEND_DNNL, bn_dnnl_out_layout);
  }
  op = mx_op_find("batch_norm_backward");
  if (op >= 0) {
    mx_kernel_register(op, MX_BACKEND_DNNL, bnb_dnnl_run, bnb_dnnl_supports,
                       1u << MX_LAYOUT_ONEDNN);
    mx_kernel_set_out_layout(op, MX_BACKEND_DNNL, bnb_dnnl_out_layout);
  }
}
#endif /* MX_HAVE_ONEDNN */

/* ---- issue 12: layer_norm (owner: i12-attn) ----------------------------------------------
 * The normalised axis last (inner == 1, the transformer case): each row's statistics in
 * one sweep around a shift (row_stat: vector lanes, combined in double), then one
 * vectorised write pass while the row is still in L1. The backward is fused the same way
 * (two sums per row, then dx), dgamma/dbeta summed per block of rows into workspace and
 * added up in block order, so results do not depend on the thread count. Other axes: the
 * ref kernel. */
int mx_ref_layer_norm(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_layer_norm_backward(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

typedef struct {
  const void *x, *dy, *gamma, *beta, *mean, *sd;
  void *out, *omean, *osd;
  double *part; /* per block: dgamma (c) then dbeta (c) */
  int64_t rows, c, per;
  double eps;
} ln_job;

#define LN_DEFINE(T, V, SUF)                                                                  \
  static void ln_fwd_##SUF(int64_t r0, int64_t r1, void *arg) {                               \
    const ln_job *J = arg;                                                                    \
    int64_t c = J->c;                                                                         \
    const T *restrict ga = J->gamma, *restrict be = J->beta;                                  \
    for (int64_t r = r0; r < r1; r++) {                                                       \
      const T *restrict x = (const T *)J->x + r * c;                                          \
      T *restrict y = (T *)J->out + r * c;                                                    \
      double s1 = 0, s2 = 0;                                                                  \
      row_stat_##SUF(x, c, x[0], &s1, &s2);                                                   \
      double m1 = s1 / (double)c, var = s2 / (double)c - m1 * m1;                             \
      double mean = (double)x[0] + m1, sd = sqrt((var < 0 ? 0 : var) + J->eps);               \
      T m = (T)mean, is = sd == 0 ? 0 : (T)(1 / sd); /* NaN propagates */                    \
      for (int64_t k = 0; k < c; k++) y[k] = (x[k] - m) * is * ga[k] + be[k];                 \
      ((T *)J->omean)[r] = m, ((T *)J->osd)[r] = (T)sd;                                       \
    }                                                                                         \
  }                                                                                           \
  static void ln_bwd_##SUF(int64_t b0, int64_t b1, void *arg) {                               \
    const ln_job *J = arg;                                                                    \
    int64_t c = J->c;                                                                         \
    enum { W = sizeof(V) / sizeof(T) };                                                       \
    const T *restrict ga = J->gamma;                                                          \
    for (int64_t b = b0; b < b1; b++) {                                                       \
      T *restrict dg = (T *)(J->part + b * 2 * c), *restrict db = dg + c; /* T partials */  \
      memset(dg, 0, sizeof(T) * 2 * (size_t)c);                                               \
      int64_t e = (b + 1) * J->per < J->rows ? (b + 1) * J->per : J->rows;                    \
      for (int64_t r = b * J->per; r < e; r++) {                                              \
        const T *restrict x = (const T *)J->x + r * c, *restrict g = (const T *)J->dy + r * c; \
        T *restrict dx = (T *)J->out + r * c;                                                 \
        T m = ((const T *)J->mean)[r], sdv = ((const T *)J->sd)[r];                           \
        T is = sdv == 0 ? 0 : 1 / sdv;                                                        \
        V a = {0}, q = {0};                                                                   \
        int64_t k = 0;                                                                        \
        for (; k + W <= c; k += W) {                                                          \
          V gv, gav, xv;                                                                      \
          memcpy(&gv, g + k, sizeof gv), memcpy(&gav, ga + k, sizeof gav);                    \
          memcpy(&xv, x + k, sizeof xv);                                                      \
          V gg = gv * gav;                                                                    \
          a += gg, q += gg * (xv - m);                                                        \
        }                                                                                     \
        double s1 = hsum_##SUF(a), s2 = hsum_##SUF(q);                                        \
        for (; k < c; k++) s1 += (double)(g[k] * ga[k]), s2 += (double)(g[k] * ga[k] * (x[k] - m)); \
        T u = (T)(s1 / (double)c), w = (T)(s2 / (double)c) * is * is;                         \
        for (k = 0; k < c; k++) dx[k] = (g[k] * ga[k] - u - (x[k] - m) * w) * is;             \
        for (k = 0; k < c; k++) dg[k] += g[k] * (x[k] - m) * is, db[k] += g[k];               \
      }                                                                                       \
    }                                                                                         \
  }
LN_DEFINE(float, v8f, f32)
LN_DEFINE(double, v4d, f64)

int mx_cpu_layer_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  const struct mx_params_layer_norm *P = p;
  const mx_tensor *x = in[0];
  int ax = ctx->info.axis;
  if (ax != x->ndim - 1 || x->size == 0) return mx_ref_layer_norm(ctx, p, nin, in, nout, out);
  ln_job J;
  memset(&J, 0, sizeof J);
  J.c = x->shape[ax], J.rows = x->size / J.c, J.eps = P->eps;
  J.x = mx_ptr(x), J.gamma = mx_ptr(in[1]), J.beta = mx_ptr(in[2]);
  J.out = mx_ptr(out[0]), J.omean = mx_ptr(out[1]), J.osd = mx_ptr(out[2]);
  mx_parallel_for(J.rows, 1 + 8192 / J.c, x->dtype == MX_F32 ? ln_fwd_f32 : ln_fwd_f64, &J);
  return MX_OK;
}

int mx_cpu_layer_norm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  const mx_tensor *x = in[1];
  int ax = ctx->info.axis;
  if (ax != x->ndim - 1 || x->size == 0)
    return mx_ref_layer_norm_backward(ctx, p, nin, in, nout, out);
  ln_job J;
  memset(&J, 0, sizeof J);
  J.c = x->shape[ax], J.rows = x->size / J.c;
  /* 32 rows a block at least; at most 64 blocks (the partials stay in cache) */
  int64_t nb = J.rows / 32 > 64 ? 64 : J.rows / 32 ? J.rows / 32 : 1;
  J.per = (J.rows + nb - 1) / nb;
  nb = (J.rows + J.per - 1) / J.per;
  J.part = mx_kctx_workspace(ctx, sizeof(double) * 2 * (size_t)(J.c * nb));
  if (!J.part) return mx_err(MX_ENOMEM, "layer_norm_backward: out of memory (workspace)");
  J.dy = mx_ptr(in[0]), J.x = mx_ptr(x), J.gamma = mx_ptr(in[2]);
  J.mean = mx_ptr(in[3]), J.sd = mx_ptr(in[4]), J.out = mx_ptr(out[0]);
  bool f32 = x->dtype == MX_F32;
  mx_parallel_for(nb, 1, f32 ? ln_bwd_f32 : ln_bwd_f64, &J);
  for (int64_t k = 0; k < J.c; k++) { /* the blocks' partials, in block order */
    double sg = 0, sb = 0;
    for (int64_t b = 0; b < nb; b++) {
      if (f32) {
        const float *q = (const float *)(J.part + b * 2 * J.c);
        sg += q[k], sb += q[J.c + k];
      } else {
        const double *q = J.part + b * 2 * J.c;
        sg += q[k], sb += q[J.c + k];
      }
    }
    if (f32) ((float *)mx_ptr(out[1]))[k] = (float)sg, ((float *)mx_ptr(out[2]))[k] = (float)sb;
    else ((double *)mx_ptr(out[1]))[k] = sg, ((double *)mx_ptr(out[2]))[k] = sb;
  }
  return MX_OK;
}
