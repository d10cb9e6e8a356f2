/* kernels/ref/conv.c — reference convolution kernels: the direct 7-deep loop over
 * (batch, filter, output position, input channel of the group, kernel position), in
 * double, one loop nest for the forward and both gradients. The oracle of the oneDNN
 * kernels (kernels/cpu/conv.c); slow by design. */
#include "conv.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <stdlib.h>

enum { FWD, BWD_DATA, BWD_WEIGHT };

static int64_t data_at(const mx_conv_geom *g, int64_t C, const int64_t *sp, int64_t n, int64_t c,
                       const int64_t *i) {
  if (g->last) return (((n * sp[0] + i[0]) * sp[1] + i[1]) * sp[2] + i[2]) * C + c;
  return (((n * C + c) * sp[0] + i[0]) * sp[1] + i[1]) * sp[2] + i[2];
}
static int64_t weight_at(const mx_conv_geom *g, int64_t f, int64_t cg, const int64_t *k) {
  int64_t Cg = g->C / g->G;
  if (g->last) return (((f * g->k[0] + k[0]) * g->k[1] + k[1]) * g->k[2] + k[2]) * Cg + cg;
  return (((f * Cg + cg) * g->k[0] + k[0]) * g->k[1] + k[1]) * g->k[2] + k[2];
}

static double *load_all(const mx_tensor *t) {
  double *v = malloc(sizeof(double) * (size_t)(t->size ? t->size : 1));
  if (v)
    for (int64_t i = 0; i < t->size; i++) v[i] = mx_load_f64(mx_ptr(t), t->dtype, i);
  return v;
}

/* x, w, y: data, weight, output (or their gradients by mode); the one being computed
 * starts at zero and is accumulated. */
static void conv_loops(const mx_conv_geom *g, int mode, double *x, double *w, double *y) {
  int64_t Cg = g->C / g->G, Fg = g->F / g->G;
  int64_t o[3], k[3], i[3];
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t f = 0; f < g->F; f++)
      for (o[0] = 0; o[0] < g->out[0]; o[0]++)
        for (o[1] = 0; o[1] < g->out[1]; o[1]++)
          for (o[2] = 0; o[2] < g->out[2]; o[2]++) {
            int64_t yi = data_at(g, g->F, g->out, n, f, o);
            for (int64_t cg = 0; cg < Cg; cg++)
              for (k[0] = 0; k[0] < g->k[0]; k[0]++)
                for (k[1] = 0; k[1] < g->k[1]; k[1]++)
                  for (k[2] = 0; k[2] < g->k[2]; k[2]++) {
                    bool inside = true;
                    for (int a = 0; a < 3; a++) {
                      i[a] = o[a] * g->s[a] - g->p[a] + k[a] * g->d[a];
                      inside = inside && i[a] >= 0 && i[a] < g->in[a];
                    }
                    if (!inside) continue;
                    int64_t xi = data_at(g, g->C, g->in, n, (f / Fg) * Cg + cg, i);
                    int64_t wi = weight_at(g, f, cg, k);
                    if (mode == FWD) y[yi] += x[xi] * w[wi];
                    else if (mode == BWD_DATA) x[xi] += w[wi] * y[yi];
                    else w[wi] += x[xi] * y[yi];
                  }
          }
}

static void store_all(mx_tensor *t, const double *v) {
  for (int64_t i = 0; i < t->size; i++) mx_store_f64(mx_ptr(t), t->dtype, i, v[i]);
}

/* in: the call's tensors as (x, w, y) for mode; res: the one computed */
static int conv_run(const mx_kctx *ctx, const void *p, const mx_tensor *data, int64_t F,
                    int mode, const mx_tensor *a, const mx_tensor *b, mx_tensor *res,
                    const mx_tensor *bias, const mx_tensor *sum) {
  mx_conv_geom g;
  int rc = mx_conv_geom_of(ctx->def->name, p, data->ndim, data->shape, F, &g);
  if (rc) return rc;
  double *va = load_all(a), *vb = load_all(b);
  double *vr = calloc((size_t)(res->size ? res->size : 1), sizeof(double));
  if (!va || !vb || !vr) {
    free(va), free(vb), free(vr);
    return mx_err(MX_ENOMEM, "%s: out of memory for the reference kernel", ctx->def->name);
  }
  if (mode == FWD) conv_loops(&g, mode, va, vb, vr);
  else if (mode == BWD_DATA) conv_loops(&g, mode, vr, vb, va); /* a = ograd, b = weight */
  else conv_loops(&g, mode, vb, vr, va);                       /* a = ograd, b = data */
  if (mode == FWD || bias) { /* bias per channel of the result (a deconvolution's too) */
    const struct mx_params_convolution *P = p;
    int act = mode == FWD ? P->act_type : MX_CONVOLUTION_ACT_TYPE_NONE;
    int64_t ch = res->shape[g.last ? res->ndim - 1 : 1];
    int64_t per = res->size / (g.N ? g.N : 1) / (ch ? ch : 1); /* positions per channel */
    for (int64_t e = 0; e < res->size; e++) {
      int64_t f = g.last ? e % ch : (e / per) % ch;
      if (bias) vr[e] += mx_load_f64(mx_ptr(bias), bias->dtype, f);
      if (sum) vr[e] += mx_load_f64(mx_ptr(sum), sum->dtype, e); /* before relu */
      if (act != MX_CONVOLUTION_ACT_TYPE_NONE && !(vr[e] > 0)) vr[e] = 0;
      if (act == MX_CONVOLUTION_ACT_TYPE_RELU6 && vr[e] > 6) vr[e] = 6;
    }
  }
  store_all(res, vr);
  free(va), free(vb), free(vr);
  return MX_OK;
}

int mx_ref_convolution(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)nout;
  return conv_run(ctx, p, in[0], in[1]->shape[0], FWD, in[0], in[1], out[0],
                  nin > 2 ? in[2] : NULL, NULL);
}

int mx_ref_convolution_backward_data(const mx_kctx *ctx, const void *p, int nin,
                                     mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  return conv_run(ctx, p, in[2], in[1]->shape[0], BWD_DATA, in[0], in[1], out[0], NULL, NULL);
}

int mx_ref_convolution_backward_weight(const mx_kctx *ctx, const void *p, int nin,
                                       mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  return conv_run(ctx, p, in[1], out[0]->shape[0], BWD_WEIGHT, in[0], in[1], out[0], NULL, NULL);
}

/* deconvolution: the data gradient of the convolution with the same params (weight
 * (C, F/G, k...) is that convolution's), plus the bias */
int mx_ref_deconvolution(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nout;
  struct mx_params_convolution cp;
  int64_t os[5];
  int rc = mx_deconv_as_conv(ctx->def->name, p, in[0]->ndim, in[0]->shape, out[0]->shape[
      ((const struct mx_params_deconvolution *)p)->layout > MX_DECONVOLUTION_LAYOUT_NCDHW
          ? out[0]->ndim - 1 : 1], &cp, os);
  if (rc) return rc;
  return conv_run(ctx, &cp, out[0], in[1]->shape[0], BWD_DATA, in[0], in[1], out[0],
                  nin > 2 ? in[2] : NULL, NULL);
}

/* convolution_sum: the convolution plus bias, plus the residual (same shape and layout as
 * the output), then act_type */
int mx_ref_convolution_sum(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)nout;
  return conv_run(ctx, p, in[0], in[1]->shape[0], FWD, in[0], in[1], out[0],
                  nin > 3 ? in[3] : NULL, in[2]);
}
