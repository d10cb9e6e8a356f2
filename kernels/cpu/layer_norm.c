/* kernels/cpu/layer_norm.c — layer_norm and its backward with own loops.
 * The normalised axis last (inner == 1, the transformer case): each row's statistics in
 * one sweep around a shift (row_stat: vector lanes, combined in double), then one
 * vectorised write pass while the row is still in L1. The backward is fused the same way
 * (two sums per row, then dx), dgamma/dbeta summed per block of rows into workspace and
 * added up in block order, so results do not depend on the thread count. Other axes are
 * not this kernel's (its supports: dispatch runs the ref kernel). */
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "rowsum.h"

#include <math.h>

ROWSUM_DEFINE(float, v8f, f32)
ROWSUM_DEFINE(double, v4d, f64)

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

/* x: the data's descriptor (layer_norm's input 1, the backward's input 2) */
static bool axis_last(const mx_op_info *info, const mx_desc *x, const char **why) {
  int64_t n = 1;
  for (int d = 0; d < x->ndim; d++) n *= x->shape[d];
  if (info->axis == x->ndim - 1 && n > 0) return true;
  *why = "the cpu kernel normalises the last axis of a non-empty tensor";
  return false;
}
bool mx_cpu_layer_norm_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                                int nin, const mx_desc *in, int nout, const mx_desc *out,
                                const char **why) {
  return axis_last(info, &in[0], why);
}
bool mx_cpu_layer_norm_backward_supports(const mx_op_def *def, const void *params,
                                         const mx_op_info *info, int nin, const mx_desc *in,
                                         int nout, const mx_desc *out, const char **why) {
  return axis_last(info, &in[1], why);
}

int mx_cpu_layer_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  const struct mx_params_layer_norm *P = p;
  const mx_tensor *x = in[0];
  int ax = ctx->info.axis;
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
