/* kernels/ref/norm.c — reference batch normalisation and its backward: plain two-pass
 * loops in double over data viewed as (outer, C, inner) around the channel axis. The
 * test oracle for kernels/cpu/norm.c, sharing no code with it. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
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
        double v = (mx_load_f64(xp, dt, j) - mean) * istd * g + b;
        if (P->act_type == MX_BATCH_NORM_ACT_TYPE_RELU && !(v > 0)) v = 0;
        mx_store_f64(mx_ptr(out[0]), dt, j, v);
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

/* ---- group_norm / instance_norm: data as (N, G, M), M = (C / G) * spatial; gamma and beta
 * are per group (instance_norm: G = C, so per channel) ---------------------------------- */

static void gn_dims(const mx_tensor *x, int64_t groups, int64_t *n, int64_t *g, int64_t *m) {
  *n = x->shape[0];
  *g = groups > 0 ? groups : x->shape[1];
  *m = *n && *g ? x->size / (*n * *g) : 0;
}

static int gn_forward(const void *pp, double eps, int64_t groups, mx_tensor *const *in,
                      mx_tensor *const *out) {
  (void)pp;
  const mx_tensor *x = in[0];
  int dt = x->dtype;
  int64_t N, G, M;
  gn_dims(x, groups, &N, &G, &M);
  const void *xp = mx_ptr(x);
  for (int64_t s = 0; s < N * G; s++) {
    int64_t base = s * M, g = s % G;
    double sum = 0, q = 0;
    for (int64_t i = 0; i < M; i++) sum += mx_load_f64(xp, dt, base + i);
    double mean = M ? sum / (double)M : 0;
    for (int64_t i = 0; i < M; i++) {
      double e = mx_load_f64(xp, dt, base + i) - mean;
      q += e * e;
    }
    double sd = sqrt((M ? q / (double)M : 0) + eps);
    double ga = mx_load_f64(mx_ptr(in[1]), dt, g), be = mx_load_f64(mx_ptr(in[2]), dt, g);
    for (int64_t i = 0; i < M; i++) {
      double v = (mx_load_f64(xp, dt, base + i) - mean) / sd;
      mx_store_f64(mx_ptr(out[0]), dt, base + i, sd > 0 ? v * ga + be : be);
    }
    mx_store_f64(mx_ptr(out[1]), dt, s, mean);
    mx_store_f64(mx_ptr(out[2]), dt, s, sd);
  }
  return MX_OK;
}

int mx_ref_group_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_group_norm *P = p;
  return gn_forward(p, P->eps, P->num_groups, in, out);
}

int mx_ref_instance_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_instance_norm *P = p;
  return gn_forward(p, P->eps, 0, in, out);
}

int mx_ref_group_norm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_group_norm_backward *P = p;
  const mx_tensor *dy = in[0], *x = in[1];
  int dt = x->dtype;
  int64_t N, G, M;
  gn_dims(x, P->num_groups, &N, &G, &M);
  const void *xp = mx_ptr(x), *gp = mx_ptr(dy);
  for (int64_t g = 0; g < G; g++) {
    mx_store_f64(mx_ptr(out[1]), dt, g, 0);
    mx_store_f64(mx_ptr(out[2]), dt, g, 0);
  }
  for (int64_t s = 0; s < N * G; s++) {
    int64_t base = s * M, g = s % G;
    double mean = mx_load_f64(mx_ptr(in[3]), dt, s), sd = mx_load_f64(mx_ptr(in[4]), dt, s);
    double ga = mx_load_f64(mx_ptr(in[2]), dt, g);
    double is = sd > 0 ? 1 / sd : 0, sw = 0, swx = 0, sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < M; i++) {
      double d = mx_load_f64(gp, dt, base + i), xh = (mx_load_f64(xp, dt, base + i) - mean) * is;
      sdy += d, sdyx += d * xh;
      sw += d * ga, swx += d * ga * xh;
    }
    for (int64_t i = 0; i < M; i++) {
      double d = mx_load_f64(gp, dt, base + i), xh = (mx_load_f64(xp, dt, base + i) - mean) * is;
      double v = is * (d * ga - sw / (double)M - xh * swx / (double)M);
      mx_store_f64(mx_ptr(out[0]), dt, base + i, v);
    }
    mx_store_f64(mx_ptr(out[1]), dt, g, mx_load_f64(mx_ptr(out[1]), dt, g) + sdyx);
    mx_store_f64(mx_ptr(out[2]), dt, g, mx_load_f64(mx_ptr(out[2]), dt, g) + sdy);
  }
  return MX_OK;
}

/* ---- lrn: across channels (axis 1), data as (N, C, S) ---------------------------------- */

/* knorm + alpha / nsize * sum of x^2 over channels [c - h, c + h] */
static double lrn_scale(const void *xp, int dt, int64_t n, int64_t c, int64_t s, int64_t C,
                        int64_t S, int64_t h, double alpha, double knorm, int64_t nsize) {
  double q = 0;
  for (int64_t k = c - h; k <= c + h; k++) {
    if (k < 0 || k >= C) continue;
    double v = mx_load_f64(xp, dt, (n * C + k) * S + s);
    q += v * v;
  }
  return knorm + alpha / (double)nsize * q;
}

int mx_ref_lrn(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_lrn *P = p;
  const mx_tensor *x = in[0];
  int64_t N = x->shape[0], C = x->shape[1], S = N && C ? x->size / (N * C) : 0, h = P->nsize / 2;
  const void *xp = mx_ptr(x);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t s = 0; s < S; s++) {
        double sc = lrn_scale(xp, x->dtype, n, c, s, C, S, h, P->alpha, P->knorm, P->nsize);
        int64_t j = (n * C + c) * S + s;
        mx_store_f64(mx_ptr(out[0]), x->dtype, j, mx_load_f64(xp, x->dtype, j) * pow(sc, -P->beta));
      }
  return MX_OK;
}

/* dx_j = dy_j s_j^-beta - 2 beta alpha / nsize x_j sum_{i in window(j)} dy_i x_i s_i^(-beta-1) */
int mx_ref_lrn_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_lrn_backward *P = p;
  const mx_tensor *dy = in[0], *x = in[1];
  int dt = x->dtype;
  int64_t N = x->shape[0], C = x->shape[1], S = N && C ? x->size / (N * C) : 0, h = P->nsize / 2;
  const void *xp = mx_ptr(x), *gp = mx_ptr(dy);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t s = 0; s < S; s++) {
        int64_t j = (n * C + c) * S + s;
        double sj = lrn_scale(xp, dt, n, c, s, C, S, h, P->alpha, P->knorm, P->nsize);
        double acc = 0;
        for (int64_t k = c - h; k <= c + h; k++) {
          if (k < 0 || k >= C) continue;
          int64_t i = (n * C + k) * S + s;
          double si = lrn_scale(xp, dt, n, k, s, C, S, h, P->alpha, P->knorm, P->nsize);
          acc += mx_load_f64(gp, dt, i) * mx_load_f64(xp, dt, i) * pow(si, -P->beta - 1);
        }
        double v = mx_load_f64(gp, dt, j) * pow(sj, -P->beta) -
                   2 * P->beta * P->alpha / (double)P->nsize * mx_load_f64(xp, dt, j) * acc;
        mx_store_f64(mx_ptr(out[0]), dt, j, v);
      }
  return MX_OK;
}

/* ---- l2_normalization: norm over the dims info.axes marks ------------------------------ */

int mx_ref_l2_normalization(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_l2_normalization *P = p;
  const mx_tensor *x = in[0], *nr = out[1];
  int dt = x->dtype;
  double *acc = mx_kctx_workspace(ctx, sizeof(double) * (size_t)(nr->size ? nr->size : 1));
  if (!acc) return mx_err(MX_ENOMEM, "l2_normalization: out of memory (workspace)");
  for (int64_t k = 0; k < nr->size; k++) acc[k] = 0;
  const void *xp = mx_ptr(x);
  /* element i -> its norm cell: drop the summed dims' coordinates */
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t i = 0; i < x->size; i++) {
      int64_t r = i, k = 0, st = 1;
      for (int d = x->ndim - 1; d >= 0; d--) {
        int64_t cd = r % x->shape[d];
        r /= x->shape[d];
        if (!ctx->info.axes[d]) k += cd * st, st *= x->shape[d];
      }
      double v = mx_load_f64(xp, dt, i);
      if (pass == 0) acc[k] += v * v;
      else mx_store_f64(mx_ptr(out[0]), dt, i, v / acc[k]);
    }
    if (pass == 0)
      for (int64_t k = 0; k < nr->size; k++) {
        acc[k] = sqrt(acc[k] + P->eps);
        mx_store_f64(mx_ptr(out[1]), dt, k, acc[k]);
      }
  }
  return MX_OK;
}

/* ---- layer_norm: data as (outer, C, inner) around axis; one
 * (outer, inner) position's C values are normalised together ------------------------- */

int mx_ref_layer_norm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_layer_norm *P = p;
  const mx_tensor *x = in[0];
  int dt = x->dtype;
  int64_t outer, c, inner;
  split3(x, ctx->info.axis, &outer, &c, &inner);
  const void *xp = mx_ptr(x), *gp = mx_ptr(in[1]), *bp = mx_ptr(in[2]);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double s = 0, q = 0;
      for (int64_t k = 0; k < c; k++) s += mx_load_f64(xp, dt, (o * c + k) * inner + i);
      double mean = c ? s / (double)c : 0;
      for (int64_t k = 0; k < c; k++) {
        double e = mx_load_f64(xp, dt, (o * c + k) * inner + i) - mean;
        q += e * e;
      }
      double sd = sqrt((c ? q / (double)c : 0) + P->eps);
      for (int64_t k = 0; k < c; k++) {
        int64_t j = (o * c + k) * inner + i;
        /* sd 0 (constant vector, eps 0): xhat 0; a NaN sd propagates */
        double v = sd == 0 ? 0 : (mx_load_f64(xp, dt, j) - mean) / sd;
        mx_store_f64(mx_ptr(out[0]), dt, j, v * mx_load_f64(gp, dt, k) + mx_load_f64(bp, dt, k));
      }
      mx_store_f64(mx_ptr(out[1]), dt, o * inner + i, mean);
      mx_store_f64(mx_ptr(out[2]), dt, o * inner + i, sd);
    }
  return MX_OK;
}

/* dx = (g*gamma - mean(g*gamma) - xhat * mean(g*gamma*xhat)) / std over each C-vector;
 * dgamma = sum(g * xhat), dbeta = sum(g) over every other position. */
int mx_ref_layer_norm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *dy = in[0], *x = in[1];
  int dt = x->dtype;
  int64_t outer, c, inner;
  split3(x, ctx->info.axis, &outer, &c, &inner);
  const void *xp = mx_ptr(x), *gyp = mx_ptr(dy), *gp = mx_ptr(in[2]);
  for (int64_t k = 0; k < c; k++) {
    mx_store_f64(mx_ptr(out[1]), dt, k, 0);
    mx_store_f64(mx_ptr(out[2]), dt, k, 0);
  }
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      double mean = mx_load_f64(mx_ptr(in[3]), dt, o * inner + i);
      double sd = mx_load_f64(mx_ptr(in[4]), dt, o * inner + i);
      double r = sd == 0 ? 0 : 1 / sd, s1 = 0, s2 = 0;
      for (int64_t k = 0; k < c; k++) {
        int64_t j = (o * c + k) * inner + i;
        double g = mx_load_f64(gyp, dt, j), xh = (mx_load_f64(xp, dt, j) - mean) * r;
        double gg = g * mx_load_f64(gp, dt, k);
        s1 += gg;
        s2 += gg * xh;
        mx_store_f64(mx_ptr(out[1]), dt, k, mx_load_f64(mx_ptr(out[1]), dt, k) + g * xh);
        mx_store_f64(mx_ptr(out[2]), dt, k, mx_load_f64(mx_ptr(out[2]), dt, k) + g);
      }
      s1 /= (double)c, s2 /= (double)c;
      for (int64_t k = 0; k < c; k++) {
        int64_t j = (o * c + k) * inner + i;
        double xh = (mx_load_f64(xp, dt, j) - mean) * r;
        double gg = mx_load_f64(gyp, dt, j) * mx_load_f64(gp, dt, k);
        mx_store_f64(mx_ptr(out[0]), dt, j, (gg - s1 - xh * s2) * r);
      }
    }
  return MX_OK;
}
