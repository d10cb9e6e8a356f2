/* kernels/cpu/norm.c — batch, group and instance norm with own loops (layer_norm:
 * layer_norm.c; batch_norm on oneDNN's blocked layout: kernels/dnnl/norm.c).
 * batch_norm: data viewed as (outer, C, inner) around the channel axis. With inner > 1
 * (NCHW) three passes, each over threads: per-row sums in memory order, a cheap
 * per-channel combine (statistics, moving update, coefficients), then one row pass
 * y = x * A[c] + B[c] (the backward alike). With inner == 1 (channels last) one pass over
 * the rows accumulates every channel at once. Statistics are one pass around a shift (the
 * channel's first element), rows summed in vector lanes and combined in double, so
 * cancellation stays small without a second read of the data. */
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "rowsum.h"

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
  bool relu;         /* act_type relu: max(y, 0) in the same pass */
} bn_job;

static double invstd_of(double var, double eps) {
  return var == 0 && eps == 0 ? 0 : 1 / sqrt(var + eps);
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
      if (J->relu)                                                                            \
        for (int64_t i = 0; i < in; i++) {                                                    \
          T v = x[i] * a + b;                                                                 \
          y[i] = v > 0 ? v : 0;                                                               \
        }                                                                                     \
      else                                                                                    \
        for (int64_t i = 0; i < in; i++) y[i] = x[i] * a + b;                                 \
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
      for (int64_t k = 0; k < c; k++) {                                                       \
        T v = (T)(x[o * c + k] * A[k] + B[k]);                                                \
        y[o * c + k] = J->relu && !(v > 0) ? 0 : v;                                           \
      }                                                                                       \
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
  J.relu = P->act_type == MX_BATCH_NORM_ACT_TYPE_RELU;
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
