/* kernels/ref/deformable.c — reference kernels of the deformable convolutions: per image,
 * the column matrix of bilinear samples at the offset points (MXNet's deformable_im2col,
 * its modulated form multiplying by the mask), then the grouped product with the weight;
 * the backward runs the same sampling in reverse (the exact derivative of the
 * interpolation for data and offset, the samples for the mask and the weight). All in
 * double; the oracle, slow by design. */
#include "deformable.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One bilinear read at (h, w) of an H x W plane: the four corners' flat positions, the
 * value's weights on them, and the weights of its derivatives along h and w (0 for a
 * corner outside the map). v1 (MXNet's deformable_im2col): a point outside [0, H) x [0, W)
 * reads 0; in the last row (column) the interpolation collapses onto it, so the value does
 * not change along h (w) there. v2 (modulated_deformable_im2col): points in (-1, H) x
 * (-1, W) read with the cells outside the map as 0. */
typedef struct {
  int64_t at[4];
  double wt[4], gh[4], gw[4];
} sample;

static bool sample_at(bool v2, int64_t H, int64_t W, double h, double w, sample *s) {
  memset(s, 0, sizeof *s);
  if (v2 ? !(h > -1 && w > -1 && h < H && w < W) : !(h >= 0 && w >= 0 && h < H && w < W))
    return false;
  int64_t hl = (int64_t)floor(h), wl = (int64_t)floor(w), hh = hl + 1, wh = wl + 1;
  double lh = h - (double)hl, lw = w - (double)wl;
  bool fixh = false, fixw = false; /* v1's collapse onto the last row / column */
  if (!v2 && hl >= H - 1) hh = hl = H - 1, lh = 0, fixh = true;
  if (!v2 && wl >= W - 1) wh = wl = W - 1, lw = 0, fixw = true;
  int64_t rows[4] = {hl, hl, hh, hh}, cols[4] = {wl, wh, wl, wh};
  double wt[4] = {(1 - lh) * (1 - lw), (1 - lh) * lw, lh * (1 - lw), lh * lw};
  double gh[4] = {-(1 - lw), -lw, 1 - lw, lw}, gw[4] = {-(1 - lh), 1 - lh, -lh, lh};
  for (int k = 0; k < 4; k++) {
    if (rows[k] < 0 || rows[k] >= H || cols[k] < 0 || cols[k] >= W) continue;
    s->at[k] = rows[k] * W + cols[k];
    s->wt[k] = wt[k];
    s->gh[k] = fixh ? 0 : gh[k];
    s->gw[k] = fixw ? 0 : gw[k];
  }
  return true;
}

static double *load_all(const mx_tensor *t) {
  double *v = malloc(sizeof(double) * (size_t)(t->size ? t->size : 1));
  if (v)
    for (int64_t i = 0; i < t->size; i++) v[i] = mx_load_f64(mx_ptr(t), t->dtype, i);
  return v;
}

static void store_all(mx_tensor *t, const double *v) {
  for (int64_t i = 0; i < t->size; i++) mx_store_f64(mx_ptr(t), t->dtype, i, v[i]);
}

/* The call's arrays (double copies) and the geometry. */
typedef struct {
  mx_dcn_geom g;
  double *x, *off, *mask, *w; /* inputs (mask NULL for v1) */
  double *col;                /* one image's columns: (C kh kw, Ho Wo) */
} dcn;

/* The sampled point of tap (i, j) of channel c at output position (oh, ow) of image n:
 * its offsets' flat positions in off (oh_at, ow_at) and the mask's (m_at). */
static void tap(const dcn *d, int64_t n, int64_t c, int64_t i, int64_t j, int64_t oh, int64_t ow,
                double *h, double *w, int64_t *oh_at, int64_t *ow_at, int64_t *m_at) {
  const mx_dcn_geom *g = &d->g;
  int64_t taps = g->kh * g->kw, P = g->Ho * g->Wo, grp = c / (g->C / g->DG);
  int64_t t = i * g->kw + j, pos = oh * g->Wo + ow;
  *oh_at = ((n * g->DG + grp) * 2 * taps + 2 * t) * P + pos;
  *ow_at = *oh_at + P;
  *m_at = ((n * g->DG + grp) * taps + t) * P + pos;
  *h = (double)(oh * g->sh - g->ph + i * g->dh) + d->off[*oh_at];
  *w = (double)(ow * g->sw - g->pw + j * g->dw) + d->off[*ow_at];
}

/* image n's columns: col[(c kh + i) kw + j][pos] = mask * sample */
static void im2col(dcn *d, int64_t n) {
  const mx_dcn_geom *g = &d->g;
  int64_t P = g->Ho * g->Wo, HW = g->H * g->W;
  for (int64_t c = 0; c < g->C; c++) {
    const double *plane = d->x + (n * g->C + c) * HW;
    for (int64_t i = 0; i < g->kh; i++)
      for (int64_t j = 0; j < g->kw; j++)
        for (int64_t oh = 0; oh < g->Ho; oh++)
          for (int64_t ow = 0; ow < g->Wo; ow++) {
            double h, w, v = 0;
            int64_t ah, aw, am;
            sample s;
            tap(d, n, c, i, j, oh, ow, &h, &w, &ah, &aw, &am);
            if (sample_at(g->modulated, g->H, g->W, h, w, &s))
              for (int k = 0; k < 4; k++) v += s.wt[k] * plane[s.at[k]];
            if (d->mask) v *= d->mask[am];
            d->col[((c * g->kh + i) * g->kw + j) * P + oh * g->Wo + ow] = v;
          }
  }
}

static void dcn_free(dcn *d) { free(d->x), free(d->off), free(d->mask), free(d->w), free(d->col); }

/* in: data, offset, (mask,) weight from position first */
static int dcn_load(const mx_kctx *ctx, const void *p, mx_tensor *const *in, int first, dcn *d) {
  memset(d, 0, sizeof *d);
  const mx_tensor *x = in[first];
  int rc = mx_dcn_geom_of(ctx->def, p, x->ndim, x->shape, &d->g);
  if (rc) return rc;
  const mx_dcn_geom *g = &d->g;
  d->x = load_all(x), d->off = load_all(in[first + 1]);
  if (g->modulated) d->mask = load_all(in[first + 2]);
  d->w = load_all(in[first + (g->modulated ? 3 : 2)]);
  d->col = malloc(sizeof(double) * (size_t)(g->C * g->kh * g->kw * g->Ho * g->Wo + 1));
  if (!d->x || !d->off || (g->modulated && !d->mask) || !d->w || !d->col) {
    dcn_free(d);
    return mx_err(MX_ENOMEM, "%s: out of memory for the reference kernel", ctx->def->name);
  }
  return MX_OK;
}

static int forward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                   mx_tensor *out) {
  dcn d;
  int rc = dcn_load(ctx, p, in, 0, &d);
  if (rc) return rc;
  const mx_dcn_geom *g = &d.g;
  const mx_tensor *bias = g->no_bias ? NULL : in[nin - 1];
  int64_t P = g->Ho * g->Wo, Fg = g->F / g->G, K = g->C / g->G * g->kh * g->kw;
  double *y = calloc((size_t)(out->size + 1), sizeof(double));
  if (!y) {
    dcn_free(&d);
    return mx_err(MX_ENOMEM, "%s: out of memory for the reference kernel", ctx->def->name);
  }
  for (int64_t n = 0; n < g->N; n++) {
    im2col(&d, n);
    for (int64_t f = 0; f < g->F; f++) {
      const double *wf = d.w + f * K, *cg = d.col + (f / Fg) * K * P;
      double *yf = y + (n * g->F + f) * P;
      double b = bias ? mx_load_f64(mx_ptr(bias), bias->dtype, f) : 0;
      for (int64_t q = 0; q < P; q++) yf[q] = b;
      for (int64_t k = 0; k < K; k++)
        for (int64_t q = 0; q < P; q++) yf[q] += wf[k] * cg[k * P + q];
    }
  }
  store_all(out, y);
  free(y);
  dcn_free(&d);
  return MX_OK;
}

/* in: ograd, data, offset, (mask,) weight; out: their gradients (data, offset, (mask,)
 * weight) */
static int backward(const mx_kctx *ctx, const void *p, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  dcn d;
  int rc = dcn_load(ctx, p, in, 1, &d);
  if (rc) return rc;
  const mx_dcn_geom *g = &d.g;
  int64_t P = g->Ho * g->Wo, HW = g->H * g->W, Fg = g->F / g->G;
  int64_t K = g->C / g->G * g->kh * g->kw, rows = g->C * g->kh * g->kw;
  double *og = load_all(in[0]), *res[4] = {NULL, NULL, NULL, NULL};
  double *cgrad = malloc(sizeof(double) * (size_t)(rows * P + 1));
  bool ok = og && cgrad;
  for (int k = 0; k < nout; k++) ok = ok && (res[k] = calloc((size_t)(out[k]->size + 1),
                                                                sizeof(double)));
  if (!ok) {
    free(og), free(cgrad);
    for (int k = 0; k < 4; k++) free(res[k]);
    dcn_free(&d);
    return mx_err(MX_ENOMEM, "%s: out of memory for the reference kernel", ctx->def->name);
  }
  double *dx = res[0], *doff = res[1], *dmask = g->modulated ? res[2] : NULL;
  double *dw = res[nout - 1];
  for (int64_t n = 0; n < g->N; n++) {
    const double *ogn = og + n * g->F * P;
    /* the columns' gradient and the weight's */
    im2col(&d, n);
    memset(cgrad, 0, sizeof(double) * (size_t)(rows * P));
    for (int64_t f = 0; f < g->F; f++) {
      const double *wf = d.w + f * K, *cg = d.col + (f / Fg) * K * P, *of = ogn + f * P;
      double *cgr = cgrad + (f / Fg) * K * P, *dwf = dw + f * K;
      for (int64_t k = 0; k < K; k++)
        for (int64_t q = 0; q < P; q++) {
          cgr[k * P + q] += wf[k] * of[q];
          dwf[k] += of[q] * cg[k * P + q];
        }
    }
    /* through the sampling: data, offset and mask */
    for (int64_t c = 0; c < g->C; c++) {
      const double *plane = d.x + (n * g->C + c) * HW;
      double *dplane = dx + (n * g->C + c) * HW;
      for (int64_t i = 0; i < g->kh; i++)
        for (int64_t j = 0; j < g->kw; j++)
          for (int64_t oh = 0; oh < g->Ho; oh++)
            for (int64_t ow = 0; ow < g->Wo; ow++) {
              double h, w;
              int64_t ah, aw, am;
              sample s;
              tap(&d, n, c, i, j, oh, ow, &h, &w, &ah, &aw, &am);
              if (!sample_at(g->modulated, g->H, g->W, h, w, &s)) continue;
              double G = cgrad[((c * g->kh + i) * g->kw + j) * P + oh * g->Wo + ow];
              double m = d.mask ? d.mask[am] : 1, v = 0, vh = 0, vw = 0;
              for (int k = 0; k < 4; k++) {
                double xv = plane[s.at[k]];
                v += s.wt[k] * xv, vh += s.gh[k] * xv, vw += s.gw[k] * xv;
                dplane[s.at[k]] += s.wt[k] * m * G;
              }
              doff[ah] += m * G * vh;
              doff[aw] += m * G * vw;
              if (dmask) dmask[am] += G * v;
            }
    }
  }
  for (int k = 0; k < nout; k++) store_all(out[k], res[k]);
  free(og), free(cgrad);
  for (int k = 0; k < 4; k++) free(res[k]);
  dcn_free(&d);
  return MX_OK;
}

int mx_ref_deformable_convolution(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nout;
  return forward(ctx, p, nin, in, out[0]);
}

int mx_ref_modulated_deformable_convolution(const mx_kctx *ctx, const void *p, int nin,
                                            mx_tensor *const *in, int nout,
                                            mx_tensor *const *out) {
  (void)nout;
  return forward(ctx, p, nin, in, out[0]);
}

int mx_ref_deformable_convolution_backward(const mx_kctx *ctx, const void *p, int nin,
                                           mx_tensor *const *in, int nout,
                                           mx_tensor *const *out) {
  (void)nin;
  return backward(ctx, p, in, nout, out);
}

int mx_ref_modulated_deformable_convolution_backward(const mx_kctx *ctx, const void *p, int nin,
                                                     mx_tensor *const *in, int nout,
                                                     mx_tensor *const *out) {
  (void)nin;
  return backward(ctx, p, in, nout, out);
}
