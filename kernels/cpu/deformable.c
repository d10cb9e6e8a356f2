/* kernels/cpu/deformable.c — the deformable convolutions in float32: per image, the
 * column matrix of bilinear samples built in parallel over its rows, then one GEMM per
 * group (gemm.h); the backward's column gradient by GEMM, the weight's by GEMM, then the
 * data gradient in parallel over channels and the offset and mask gradients in parallel
 * over (offset group, tap), each computing every sampled point's coordinates once. Other
 * dtypes run the reference kernels (supports). */
#include "deformable.h"
#include "gemm.h"
#include "mx_kernels_gen.h"

#include <math.h>
#include <string.h>

/* One bilinear read at (h, w) of an H x W plane (the semantics of the reference kernel:
 * v1 reads 0 outside [0, H) x [0, W) and collapses onto the last row/column; v2 reads
 * points in (-1, H) x (-1, W) with the cells outside the map as 0): the corners' flat
 * positions (0 for a corner outside, its weights 0), the value's weights and those of its
 * derivatives along h and w. Returns false for a point that reads 0. */
typedef struct {
  int64_t at[4];
  float wt[4], gh[4], gw[4];
} pt;

static inline bool point(bool v2, int64_t H, int64_t W, float h, float w, pt *s) {
  if (v2 ? !(h > -1 && w > -1 && h < H && w < W) : !(h >= 0 && w >= 0 && h < H && w < W))
    return false;
  /* floor without libm's call: h, w > -1, so h + 1 > 0 truncates to floor(h) + 1 */
  int64_t hl = (int64_t)(h + 1) - 1, wl = (int64_t)(w + 1) - 1, hh = hl + 1, wh = wl + 1;
  float lh = h - (float)hl, lw = w - (float)wl;
  bool fixh = false, fixw = false;
  if (!v2 && hl >= H - 1) hh = hl = H - 1, lh = 0, fixh = true;
  if (!v2 && wl >= W - 1) wh = wl = W - 1, lw = 0, fixw = true;
  const int64_t rows[4] = {hl, hl, hh, hh}, cols[4] = {wl, wh, wl, wh};
  const float wt[4] = {(1 - lh) * (1 - lw), (1 - lh) * lw, lh * (1 - lw), lh * lw};
  const float gh[4] = {-(1 - lw), -lw, 1 - lw, lw}, gw[4] = {-(1 - lh), 1 - lh, -lh, lh};
  for (int k = 0; k < 4; k++) {
    bool in = rows[k] >= 0 && rows[k] < H && cols[k] >= 0 && cols[k] < W;
    s->at[k] = in ? rows[k] * W + cols[k] : 0;
    s->wt[k] = in ? wt[k] : 0;
    s->gh[k] = in && !fixh ? gh[k] : 0;
    s->gw[k] = in && !fixw ? gw[k] : 0;
  }
  return true;
}

typedef struct {
  const mx_dcn_geom *g;
  const float *x, *off, *mask; /* image n's: (C, H, W), (DG 2 taps, P), (DG taps, P) */
  float *col, *cgrad;          /* (C taps, P) */
  float *dx, *doff, *dmask;    /* image n's gradients */
} job;

/* The sampled points of tap t (= i kw + j) of offset group grp, row by row of the output:
 * h0/w0 the undeformed coordinates of position (oh, 0), oh_/ow_ the offset rows, m_ the
 * mask row (NULL: 1). No divisions in the loops over positions. */
typedef struct {
  const float *oh_, *ow_, *m_;
  int64_t i, j;
} tapv;

static void tap_of(const job *b, int64_t grp, int64_t t, tapv *v) {
  const mx_dcn_geom *g = b->g;
  int64_t P = g->Ho * g->Wo, taps = g->kh * g->kw;
  v->i = t / g->kw, v->j = t % g->kw;
  v->oh_ = b->off + (grp * 2 * taps + 2 * t) * P;
  v->ow_ = v->oh_ + P;
  v->m_ = b->mask ? b->mask + (grp * taps + t) * P : NULL;
}

/* the point of position q = oh Wo + ow (hb, wb: its undeformed coordinates) */
#define DCN_POINT(v, q, hb, wb, h, w, m)                                                   \
  float h = (float)(hb) + (v).oh_[q], w = (float)(wb) + (v).ow_[q];                        \
  float m = (v).m_ ? (v).m_[q] : 1.0f

/* rows [r0, r1) of the columns: row (c taps + t) */
static void im2col_rows(int64_t r0, int64_t r1, void *arg) {
  const job *b = arg;
  const mx_dcn_geom *g = b->g;
  int64_t P = g->Ho * g->Wo, taps = g->kh * g->kw, HW = g->H * g->W, cpg = g->C / g->DG;
  for (int64_t r = r0; r < r1; r++) {
    int64_t c = r / taps, t = r % taps;
    tapv v;
    tap_of(b, c / cpg, t, &v);
    const float *plane = b->x + c * HW;
    float *row = b->col + r * P;
    for (int64_t oh = 0, q = 0; oh < g->Ho; oh++) {
      int64_t hb = oh * g->sh - g->ph + v.i * g->dh;
      for (int64_t ow = 0; ow < g->Wo; ow++, q++) {
        DCN_POINT(v, q, hb, ow * g->sw - g->pw + v.j * g->dw, h, w, m);
        pt s;
        float val = 0;
        if (point(g->modulated, g->H, g->W, h, w, &s))
          val = s.wt[0] * plane[s.at[0]] + s.wt[1] * plane[s.at[1]] +
                s.wt[2] * plane[s.at[2]] + s.wt[3] * plane[s.at[3]];
        row[q] = val * m;
      }
    }
  }
}

/* channels [c0, c1): the data gradient (each channel writes its own plane) */
static void data_grad(int64_t c0, int64_t c1, void *arg) {
  const job *b = arg;
  const mx_dcn_geom *g = b->g;
  int64_t P = g->Ho * g->Wo, taps = g->kh * g->kw, HW = g->H * g->W, cpg = g->C / g->DG;
  for (int64_t c = c0; c < c1; c++) {
    float *dplane = b->dx + c * HW;
    for (int64_t t = 0; t < taps; t++) {
      tapv v;
      tap_of(b, c / cpg, t, &v);
      const float *G = b->cgrad + (c * taps + t) * P;
      for (int64_t oh = 0, q = 0; oh < g->Ho; oh++) {
        int64_t hb = oh * g->sh - g->ph + v.i * g->dh;
        for (int64_t ow = 0; ow < g->Wo; ow++, q++) {
          DCN_POINT(v, q, hb, ow * g->sw - g->pw + v.j * g->dw, h, w, m);
          pt s;
          if (!point(g->modulated, g->H, g->W, h, w, &s)) continue;
          float gv = m * G[q];
          for (int k = 0; k < 4; k++) dplane[s.at[k]] += s.wt[k] * gv;
        }
      }
    }
  }
}

/* rows [r0, r1) of (offset group, tap): the offset and mask gradients, summed over the
 * group's channels */
static void coord_grad(int64_t r0, int64_t r1, void *arg) {
  const job *b = arg;
  const mx_dcn_geom *g = b->g;
  int64_t P = g->Ho * g->Wo, taps = g->kh * g->kw, HW = g->H * g->W, cg = g->C / g->DG;
  for (int64_t r = r0; r < r1; r++) {
    int64_t grp = r / taps, t = r % taps;
    tapv v;
    tap_of(b, grp, t, &v);
    float *dh = b->doff + (grp * 2 * taps + 2 * t) * P, *dw = dh + P;
    float *dm = b->dmask ? b->dmask + (grp * taps + t) * P : NULL;
    for (int64_t oh = 0, q = 0; oh < g->Ho; oh++) {
      int64_t hb = oh * g->sh - g->ph + v.i * g->dh;
      for (int64_t ow = 0; ow < g->Wo; ow++, q++) {
        DCN_POINT(v, q, hb, ow * g->sw - g->pw + v.j * g->dw, h, w, m);
        pt s;
        double sh = 0, sw = 0, sm = 0;
        if (point(g->modulated, g->H, g->W, h, w, &s))
          for (int64_t c = grp * cg; c < (grp + 1) * cg; c++) {
            const float *plane = b->x + c * HW;
            float G = b->cgrad[(c * taps + t) * P + q], val = 0, vh = 0, vw = 0;
            for (int k = 0; k < 4; k++) {
              float xv = plane[s.at[k]];
              val += s.wt[k] * xv, vh += s.gh[k] * xv, vw += s.gw[k] * xv;
            }
            sh += (double)G * vh, sw += (double)G * vw, sm += (double)G * val;
          }
        dh[q] = (float)(m * sh), dw[q] = (float)(m * sw);
        if (dm) dm[q] = (float)sm;
      }
    }
  }
}

static int64_t grain(const mx_dcn_geom *g) { return 1 + 16384 / (g->Ho * g->Wo + 1); }

/* data, offset, (mask,) weight at in[first...] */
static void job_of(const mx_dcn_geom *g, mx_tensor *const *in, int first, int64_t n, job *b) {
  int64_t P = g->Ho * g->Wo, taps = g->kh * g->kw;
  b->g = g;
  b->x = (const float *)mx_ptr(in[first]) + n * g->C * g->H * g->W;
  b->off = (const float *)mx_ptr(in[first + 1]) + n * g->DG * 2 * taps * P;
  b->mask = g->modulated ? (const float *)mx_ptr(in[first + 2]) + n * g->DG * taps * P : NULL;
}

static int forward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                   mx_tensor *out) {
  const char *op = ctx->def->name;
  mx_dcn_geom g;
  int rc = mx_dcn_geom_of(ctx->def, p, in[0]->ndim, in[0]->shape, &g);
  if (rc || (rc = mx_cpu_blas_ready(op))) return rc;
  int64_t P = g.Ho * g.Wo, taps = g.kh * g.kw, rows = g.C * taps, Fg = g.F / g.G;
  int64_t K = rows / g.G;
  float *col = mx_kctx_workspace(ctx, sizeof(float) * (size_t)(rows * P + 1));
  if (!col) return mx_err(MX_ENOMEM, "%s: out of memory for the columns", op);
  const float *W = mx_ptr(in[g.modulated ? 3 : 2]);
  const float *bias = g.no_bias ? NULL : mx_ptr(in[nin - 1]);
  for (int64_t n = 0; n < g.N && !rc; n++) {
    job b = {0};
    job_of(&g, in, 0, n, &b);
    b.col = col;
    mx_parallel_for(rows, grain(&g), im2col_rows, &b);
    float *y = (float *)mx_ptr(out) + n * g.F * P;
    for (int64_t gi = 0; gi < g.G && !rc; gi++)
      rc = mx_cpu_gemm_ld(op, MX_F32, false, false, Fg, P, K, 1.0, W + gi * Fg * K, K,
                          col + gi * K * P, P, 0.0, y + gi * Fg * P, P);
    for (int64_t f = 0; bias && f < g.F; f++)
      for (int64_t q = 0; q < P; q++) y[f * P + q] += bias[f];
  }
  return rc;
}

/* in: ograd, data, offset, (mask,) weight; out: ddata, doffset, (dmask,) dweight */
static int backward(const mx_kctx *ctx, const void *p, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  const char *op = ctx->def->name;
  mx_dcn_geom g;
  int rc = mx_dcn_geom_of(ctx->def, p, in[1]->ndim, in[1]->shape, &g);
  if (rc || (rc = mx_cpu_blas_ready(op))) return rc;
  int64_t P = g.Ho * g.Wo, taps = g.kh * g.kw, rows = g.C * taps, Fg = g.F / g.G;
  int64_t K = rows / g.G;
  float *col = mx_kctx_workspace(ctx, sizeof(float) * (size_t)(2 * rows * P + 1));
  if (!col) return mx_err(MX_ENOMEM, "%s: out of memory for the columns", op);
  float *cgrad = col + rows * P;
  const float *W = mx_ptr(in[g.modulated ? 4 : 3]);
  float *dW = mx_ptr(out[nout - 1]);
  for (int k = 0; k < nout; k++) memset(mx_ptr(out[k]), 0, sizeof(float) * (size_t)out[k]->size);
  for (int64_t n = 0; n < g.N && !rc; n++) {
    job b = {0};
    job_of(&g, in, 1, n, &b);
    b.col = col, b.cgrad = cgrad;
    b.dx = (float *)mx_ptr(out[0]) + n * g.C * g.H * g.W;
    b.doff = (float *)mx_ptr(out[1]) + n * g.DG * 2 * taps * P;
    b.dmask = g.modulated ? (float *)mx_ptr(out[2]) + n * g.DG * taps * P : NULL;
    const float *og = (const float *)mx_ptr(in[0]) + n * g.F * P;
    mx_parallel_for(rows, grain(&g), im2col_rows, &b);
    for (int64_t gi = 0; gi < g.G && !rc; gi++) {
      /* the columns' gradient W_g^T og_g and the weight's og_g col_g^T */
      rc = mx_cpu_gemm_ld(op, MX_F32, true, false, K, P, Fg, 1.0, W + gi * Fg * K, K,
                          og + gi * Fg * P, P, 0.0, cgrad + gi * K * P, P);
      if (!rc)
        rc = mx_cpu_gemm_ld(op, MX_F32, false, true, Fg, K, P, 1.0, og + gi * Fg * P, P,
                            col + gi * K * P, P, 1.0, dW + gi * Fg * K, K);
    }
    if (rc) break;
    mx_parallel_for(g.C, 1 + grain(&g) / (taps + 1), data_grad, &b);
    mx_parallel_for(g.DG * taps, grain(&g), coord_grad, &b);
  }
  return rc;
}

/* float32 only (the reference kernels take the other dtypes), within BLAS's extents */
static bool supports(const mx_op_def *def, const void *params, const mx_desc *data,
                     const char **why) {
  mx_dcn_geom g;
  if (data->dtype != MX_F32) {
    *why = "float32 only";
    return false;
  }
  if (data->ndim != 4 || mx_dcn_geom_of(def, params, data->ndim, data->shape, &g))
    return true; /* the kernel reports the error */
  int64_t K = g.C / g.G * g.kh * g.kw;
  if (!mx_cpu_blas_ok(MX_F32, g.F / g.G, g.Ho * g.Wo, K) || !mx_cpu_blas_ok(MX_F32, K, g.Ho * g.Wo, g.F)) {
    *why = "extents beyond BLAS's int";
    return false;
  }
  return true;
}

bool mx_cpu_deformable_convolution_supports(const mx_op_def *def, const void *params,
                                            const mx_op_info *info, int nin, const mx_desc *in,
                                            int nout, const mx_desc *out, const char **why) {
  (void)info, (void)nin, (void)nout, (void)out;
  return supports(def, params, &in[0], why);
}
bool mx_cpu_modulated_deformable_convolution_supports(const mx_op_def *def, const void *params,
                                                      const mx_op_info *info, int nin,
                                                      const mx_desc *in, int nout,
                                                      const mx_desc *out, const char **why) {
  (void)info, (void)nin, (void)nout, (void)out;
  return supports(def, params, &in[0], why);
}
bool mx_cpu_deformable_convolution_backward_supports(const mx_op_def *def, const void *params,
                                                     const mx_op_info *info, int nin,
                                                     const mx_desc *in, int nout,
                                                     const mx_desc *out, const char **why) {
  (void)info, (void)nin, (void)nout, (void)out;
  return supports(def, params, &in[1], why);
}
bool mx_cpu_modulated_deformable_convolution_backward_supports(
    const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
    int nout, const mx_desc *out, const char **why) {
  (void)info, (void)nin, (void)nout, (void)out;
  return supports(def, params, &in[1], why);
}

int mx_cpu_deformable_convolution(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nout;
  return forward(ctx, p, nin, in, out[0]);
}
int mx_cpu_modulated_deformable_convolution(const mx_kctx *ctx, const void *p, int nin,
                                            mx_tensor *const *in, int nout,
                                            mx_tensor *const *out) {
  (void)nout;
  return forward(ctx, p, nin, in, out[0]);
}
int mx_cpu_deformable_convolution_backward(const mx_kctx *ctx, const void *p, int nin,
                                           mx_tensor *const *in, int nout,
                                           mx_tensor *const *out) {
  (void)nin;
  return backward(ctx, p, in, nout, out);
}
int mx_cpu_modulated_deformable_convolution_backward(const mx_kctx *ctx, const void *p, int nin,
                                                     mx_tensor *const *in, int nout,
                                                     mx_tensor *const *out) {
  (void)nin;
  return backward(ctx, p, in, nout, out);
}
