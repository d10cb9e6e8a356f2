/* kernels/ref/norm.c — reference batch normalisation and its backward: plain two-pass
 * loops in double over data viewed as (outer, C, inner) around the channel axis. The
 * test oracle for kernels/cpu/norm.c, sharing no code with it. */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>

static void split3(const mx_tensor *x, int ax, int64_t *outer, int64_t *c, int64_t *inner) {
  *outer = 1, *inner = 1, *c = x->shape[ax];
  for (int d = 0; d < ax; d++) *outer *= x->shape[d];
  for (int d = ax + 1; d < x->ndim; d++) *inner *= x->shape[d];
}

/* MXNet: a zero variance with eps 0 gives invstd 0, not infinity. */
static double invstd_of(double var, double eps) {
  return var == 0 && eps == 0 ? 0 : 1 / sqrt(var + eps);
}

int mx_ref_batch_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_batch_norm *P = p;
  const mx_tensor *x = in[0], *ga = in[1], *be = in[2];
  mx_tensor *mm = in[3], *mv = in[4]; /* auxiliary: written in place */
  int dt = x->dtype;
  int64_t outer, c, inner;
  split3(x, ctx->info.axis, &outer, &c, &inner);
  int64_t n = outer * inner;
  bool batch = P->training && !P->use_global_stats;
  const void *xp = mx_ptr(x);
  for (int64_t k = 0; k < c; k++) {
    double mean, istd;
    if (batch) {
      double s = 0, v = 0;
      for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) s += mx_load_f64(xp, dt, (o * c + k) * inner + i);
      mean = n ? s / (double)n : 0;
      for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
          double e = mx_load_f64(xp, dt, (o * c + k) * inner + i) - mean;
          v += e * e;
        }
      double var = n ? v / (double)n : 0; /* biased, as MXNet's CPU kernel */
      istd = invstd_of(var, P->eps);
      if (n) {
        double m = P->momentum;
        mx_store_f64(mx_ptr(mm), dt, k, mx_load_f64(mx_ptr(mm), dt, k) * m + mean * (1 - m));
        mx_store_f64(mx_ptr(mv), dt, k, mx_load_f64(mx_ptr(mv), dt, k) * m + var * (1 - m));
      }
    } else {
      mean = mx_load_f64(mx_ptr(mm), dt, k);
      istd = invstd_of(mx_load_f64(mx_ptr(mv), dt, k), P->eps);
    }
    double g = P->fix_gamma ? 1 : mx_load_f64(mx_ptr(ga), ga->dtype, k);
    double b = mx_load_f64(mx_ptr(be), be->dtype, k);
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t j = (o * c + k) * inner + i;
        mx_store_f64(mx_ptr(out[0]), dt, j, (mx_load_f64(xp, dt, j) - mean) * istd * g + b);
      }
    mx_store_f64(mx_ptr(out[1]), dt, k, mean);
    mx_store_f64(mx_ptr(out[2]), dt, k, istd);
  }
  return MX_OK;
}

int mx_ref_batch_norm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_batch_norm_backward *P = p;
  const mx_tensor *dy = in[0], *x = in[1];
  int dt = x->dtype;
  int64_t outer, c, inner;
  split3(x, ctx->info.axis, &outer, &c, &inner);
  double n = (double)(outer * inner);
  const void *xp = mx_ptr(x), *gp = mx_ptr(dy);
  for (int64_t k = 0; k < c; k++) {
    double mean = mx_load_f64(mx_ptr(in[3]), dt, k), istd = mx_load_f64(mx_ptr(in[4]), dt, k);
    double g = P->fix_gamma ? 1 : mx_load_f64(mx_ptr(in[2]), dt, k);
    double sdy = 0, sdyx = 0;
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t j = (o * c + k) * inner + i;
        double d = mx_load_f64(gp, dt, j);
        sdy += d;
        sdyx += d * (mx_load_f64(xp, dt, j) - mean) * istd;
      }
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t j = (o * c + k) * inner + i;
        double d = mx_load_f64(gp, dt, j), v;
        if (P->global_stats) v = d * g * istd;
        else {
          double xh = (mx_load_f64(xp, dt, j) - mean) * istd;
          v = g * istd * (d - sdy / n - xh * sdyx / n);
        }
        mx_store_f64(mx_ptr(out[0]), dt, j, v);
      }
    mx_store_f64(mx_ptr(out[1]), dt, k, P->fix_gamma ? 0 : sdyx);
    mx_store_f64(mx_ptr(out[2]), dt, k, sdy);
  }
  return MX_OK;
}
