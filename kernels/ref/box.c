/* kernels/ref/box.c — reference box ops: box_nms (+ backward), box_iou, bipartite_matching,
 * box_encode, box_decode, roi_align (+ backward). Plain loops in double through
 * mx_load_f64/mx_store_f64; sorts are stable insertion sorts (ties keep input order). Row
 * positions in the params are 0-based (converted by the Lua wrapper). */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double ld(const mx_tensor *t, int64_t i) { return mx_load_f64(mx_ptr(t), t->dtype, i); }
static void st(mx_tensor *t, int64_t i, double v) { mx_store_f64(mx_ptr(t), t->dtype, i, v); }

/* a box of 4 values at b[0..3] in `center` or corner format, as corners c[0..3] */
static void to_corner(const double *b, bool center, double *c) {
  if (center) {
    c[0] = b[0] - b[2] / 2; c[1] = b[1] - b[3] / 2;
    c[2] = b[0] + b[2] / 2; c[3] = b[1] + b[3] / 2;
  } else {
    memcpy(c, b, 4 * sizeof *c);
  }
}

static double area(const double *c) {
  double w = c[2] - c[0], h = c[3] - c[1];
  return w < 0 || h < 0 ? 0 : w * h;
}

/* IoU of two corner boxes; 0 when the union is empty */
static double iou(const double *a, const double *b) {
  double w = fmin(a[2], b[2]) - fmax(a[0], b[0]), h = fmin(a[3], b[3]) - fmax(a[1], b[1]);
  double inter = w > 0 && h > 0 ? w * h : 0, u = area(a) + area(b) - inter;
  return u > 0 ? inter / u : 0;
}

/* box_nms: data (B.., N, K) -> out (same; kept rows first, the rest -1), index (B.., N)
 * 1-based source rows (0 for the -1 rows). */
int mx_ref_box_nms(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_box_nms *P = p;
  const mx_tensor *x = in[0];
  int64_t K = x->shape[x->ndim - 1], N = x->shape[x->ndim - 2];
  int64_t B = N * K > 0 ? x->size / (N * K) : 0;
  bool center_in = P->in_format == MX_BOX_NMS_IN_FORMAT_CENTER;
  bool center_out = P->out_format == MX_BOX_NMS_OUT_FORMAT_CENTER;
  for (int64_t i = 0; i < out[0]->size; i++) st(out[0], i, -1);
  for (int64_t i = 0; i < out[1]->size; i++) st(out[1], i, 0);
  if (N == 0) return MX_OK;
  int64_t *ord = malloc((size_t)N * sizeof *ord);
  bool *gone = malloc((size_t)N);
  double *box = malloc((size_t)N * 4 * sizeof *box);
  if (!ord || !gone || !box) {
    free(ord); free(gone); free(box);
    return mx_err(MX_ENOMEM, "box_nms: no memory for %lld boxes", (long long)N);
  }
  for (int64_t b = 0; b < B; b++) {
    int64_t base = b * N * K, n = 0;
    for (int64_t i = 0; i < N; i++) {
      double s = ld(x, base + i * K + P->score_index);
      if (!(s > P->valid_thresh)) continue;
      if (P->id_index >= 0) {
        double id = ld(x, base + i * K + P->id_index);
        if (id == (double)P->background_id) continue; /* -1 by default: padding rows */
      }
      /* stable insertion by descending score */
      int64_t q = n++;
      while (q > 0 && ld(x, base + ord[q - 1] * K + P->score_index) < s) {
        ord[q] = ord[q - 1];
        q--;
      }
      ord[q] = i;
    }
    if (P->topk > 0 && n > P->topk) n = P->topk;
    for (int64_t a = 0; a < n; a++) {
      double raw[4];
      for (int c = 0; c < 4; c++) raw[c] = ld(x, base + ord[a] * K + P->coord_start + c);
      to_corner(raw, center_in, box + a * 4);
      gone[a] = false;
    }
    for (int64_t a = 0; a < n; a++) {
      if (gone[a]) continue;
      double ida = P->id_index >= 0 ? ld(x, base + ord[a] * K + P->id_index) : 0;
      for (int64_t c = a + 1; c < n; c++) {
        if (gone[c]) continue;
        if (!P->force_suppress && P->id_index >= 0 &&
            ld(x, base + ord[c] * K + P->id_index) != ida)
          continue;
        if (iou(box + a * 4, box + c * 4) > P->overlap_thresh) gone[c] = true;
      }
    }
    int64_t r = 0;
    for (int64_t a = 0; a < n; a++) {
      if (gone[a]) continue;
      int64_t src = base + ord[a] * K, dst = base + r * K;
      for (int64_t k = 0; k < K; k++) st(out[0], dst + k, ld(x, src + k));
      if (center_in != center_out) {
        const double *c = box + a * 4;
        double v[4] = { c[0], c[1], c[2], c[3] };
        if (center_out) {
          v[0] = (c[0] + c[2]) / 2; v[1] = (c[1] + c[3]) / 2;
          v[2] = c[2] - c[0]; v[3] = c[3] - c[1];
        }
        for (int k = 0; k < 4; k++) st(out[0], dst + P->coord_start + k, v[k]);
      }
      st(out[1], b * N + r, (double)(ord[a] + 1));
      r++;
    }
  }
  free(ord); free(gone); free(box);
  return MX_OK;
}

/* box_nms_backward: ograd (B.., N, K), index (B.., N) -> zeros with ograd row r at row
 * index[r] - 1 */
int mx_ref_box_nms_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *g = in[0], *ix = in[1];
  int64_t K = g->shape[g->ndim - 1], N = g->shape[g->ndim - 2];
  int64_t B = N * K > 0 ? g->size / (N * K) : 0;
  for (int64_t i = 0; i < out[0]->size; i++) st(out[0], i, 0);
  for (int64_t b = 0; b < B; b++)
    for (int64_t r = 0; r < N; r++) {
      double j = mx_load_f64(mx_ptr(ix), ix->dtype, b * N + r);
      if (j <= 0) continue;
      if (j > (double)N || j != floor(j))
        return mx_err(MX_EINVAL, "box_nms_backward: index %g at row %lld is not a row of 1..%lld",
                      j, (long long)r + 1, (long long)N);
      int64_t src = (b * N + r) * K, dst = (b * N + (int64_t)j - 1) * K;
      for (int64_t k = 0; k < K; k++) st(out[0], dst + k, ld(g, src + k));
    }
  return MX_OK;
}

/* box_iou: lhs (L.., 4), rhs (R.., 4) -> (L.., R..) */
int mx_ref_box_iou(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_box_iou *P = p;
  bool center = P->format == MX_BOX_IOU_FORMAT_CENTER;
  int64_t nl = in[0]->size / 4, nr = in[1]->size / 4;
  for (int64_t i = 0; i < nl; i++) {
    double a[4], ca[4];
    for (int k = 0; k < 4; k++) a[k] = ld(in[0], i * 4 + k);
    to_corner(a, center, ca);
    for (int64_t j = 0; j < nr; j++) {
      double b[4], cb[4];
      for (int k = 0; k < 4; k++) b[k] = ld(in[1], j * 4 + k);
      to_corner(b, center, cb);
      st(out[0], i * nr + j, iou(ca, cb));
    }
  }
  return MX_OK;
}

/* bipartite_matching: data (B.., N, M) -> row_marker (B.., N), col_marker (B.., M):
 * 1-based matches, 0 for none; greedy in stable score order. */
int mx_ref_bipartite_matching(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_bipartite_matching *P = p;
  const mx_tensor *x = in[0];
  int64_t N = x->shape[x->ndim - 2], M = x->shape[x->ndim - 1], S = N * M;
  int64_t B = S > 0 ? x->size / S : 0;
  for (int64_t i = 0; i < out[0]->size; i++) st(out[0], i, 0);
  for (int64_t i = 0; i < out[1]->size; i++) st(out[1], i, 0);
  if (S == 0) return MX_OK;
  int64_t *ord = malloc((size_t)S * sizeof *ord);
  if (!ord) return mx_err(MX_ENOMEM, "bipartite_matching: no memory for %lld pairs", (long long)S);
  for (int64_t b = 0; b < B; b++) {
    int64_t base = b * S;
    for (int64_t i = 0; i < S; i++) {
      double s = ld(x, base + i);
      int64_t q = i;
      while (q > 0 && (P->is_ascend ? ld(x, base + ord[q - 1]) > s : ld(x, base + ord[q - 1]) < s)) {
        ord[q] = ord[q - 1];
        q--;
      }
      ord[q] = i;
    }
    int64_t count = 0;
    for (int64_t i = 0; i < S; i++) {
      double s = ld(x, base + ord[i]);
      if (P->is_ascend ? !(s < P->threshold) : !(s > P->threshold)) break;
      int64_t r = ord[i] / M, c = ord[i] % M;
      if (ld(out[0], b * N + r) != 0 || ld(out[1], b * M + c) != 0) continue;
      st(out[0], b * N + r, (double)(c + 1));
      st(out[1], b * M + c, (double)(r + 1));
      if (P->topk > 0 && ++count >= P->topk) break;
    }
  }
  free(ord);
  return MX_OK;
}

/* centre form (x, y, w, h) of a corner box */
static void center_of(const double *c, double *o) {
  o[2] = c[2] - c[0]; o[3] = c[3] - c[1];
  o[0] = c[0] + o[2] / 2; o[1] = c[1] + o[3] / 2;
}

/* box_encode: samples, matches (B, N), anchors (B, N, 4), refs (B, M, 4), means, stds (4)
 * -> targets, masks (B, N, 4) */
int mx_ref_box_encode(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t B = in[0]->shape[0], N = in[0]->shape[1], M = in[3]->shape[1];
  double mean[4], sd[4];
  for (int k = 0; k < 4; k++) mean[k] = ld(in[4], k), sd[k] = ld(in[5], k);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < N; i++) {
      int64_t o = (b * N + i) * 4;
      if (!(ld(in[0], b * N + i) > 0.5)) {
        for (int k = 0; k < 4; k++) st(out[0], o + k, 0), st(out[1], o + k, 0);
        continue;
      }
      double m = ld(in[1], b * N + i);
      if (!(m >= 1 && m <= (double)M) || m != floor(m))
        return mx_err(MX_EINVAL, "box_encode: matches[%lld][%lld] = %g is not a 1-based ref "
                      "of 1..%lld", (long long)b + 1, (long long)i + 1, m, (long long)M);
      double a[4], g[4], ca[4], cg[4];
      for (int k = 0; k < 4; k++) {
        a[k] = ld(in[2], o + k);
        g[k] = ld(in[3], (b * M + (int64_t)m - 1) * 4 + k);
      }
      center_of(a, ca);
      center_of(g, cg);
      double t[4] = { (cg[0] - ca[0]) / ca[2], (cg[1] - ca[1]) / ca[3], log(cg[2] / ca[2]),
                      log(cg[3] / ca[3]) };
      for (int k = 0; k < 4; k++) {
        st(out[0], o + k, (t[k] - mean[k]) / sd[k]);
        st(out[1], o + k, 1);
      }
    }
  return MX_OK;
}

/* box_decode: data (B, N, 4) offsets, anchors (1 or B, N, 4) -> corner boxes (B, N, 4) */
int mx_ref_box_decode(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_box_decode *P = p;
  const mx_tensor *x = in[0], *an = in[1];
  int64_t B = x->shape[0], N = x->shape[1];
  bool center = P->format == MX_BOX_DECODE_FORMAT_CENTER;
  double sd[4] = { P->std0, P->std1, P->std2, P->std3 };
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < N; i++) {
      int64_t o = (b * N + i) * 4, ao = ((an->shape[0] == 1 ? 0 : b) * N + i) * 4;
      double a[4], ca[4], d[4];
      for (int k = 0; k < 4; k++) a[k] = ld(an, ao + k), d[k] = ld(x, o + k) * sd[k];
      if (center) memcpy(ca, a, sizeof ca); else center_of(a, ca);
      if (P->clip > 0) d[2] = fmin(d[2], P->clip), d[3] = fmin(d[3], P->clip);
      double ox = d[0] * ca[2] + ca[0], oy = d[1] * ca[3] + ca[1];
      double ow = exp(d[2]) * ca[2] / 2, oh = exp(d[3]) * ca[3] / 2;
      st(out[0], o, ox - ow); st(out[0], o + 1, oy - oh);
      st(out[0], o + 2, ox + ow); st(out[0], o + 3, oy + oh);
    }
  return MX_OK;
}

/* the most samples per bin side roi_align takes (also its sample_ratio bound, box.c) */
#define MAX_SAMPLES 1024

/* ROIAlign's geometry for one ROI: first corner, bin size, samples per bin side */
typedef struct { int64_t b; double y1, x1, bh, bw; int64_t gh, gw; double count; } roi_geom;

static int roi_geometry(const char *op, const mx_tensor *rois, int64_t r, int64_t nbatch,
                        double scale, int64_t ph, int64_t pw, int64_t ratio, bool aligned,
                        roi_geom *g) {
  double bi = ld(rois, r * 5);
  if (bi != floor(bi) || bi >= (double)nbatch)
    return mx_err(MX_EINVAL, "%s: rois[%lld] has batch id %g, not one of 0..%lld", op,
                  (long long)r + 1, bi, (long long)nbatch - 1);
  g->b = (int64_t)bi; /* negative: an empty ROI (zeros), as MXNet */
  for (int k = 1; k < 5; k++) {
    double v = ld(rois, r * 5 + k) * scale;
    if (!(fabs(v) < 9e15))
      return mx_err(MX_EINVAL, "%s: rois[%lld] has coordinate %d = %g (scaled %g): not a finite "
                    "feature-map position", op, (long long)r + 1, k, ld(rois, r * 5 + k), v);
  }
  double off = aligned ? 0.5 : 0;
  double x1 = ld(rois, r * 5 + 1) * scale - off, y1 = ld(rois, r * 5 + 2) * scale - off;
  double w = ld(rois, r * 5 + 3) * scale - off - x1, h = ld(rois, r * 5 + 4) * scale - off - y1;
  if (!aligned) w = fmax(w, 1), h = fmax(h, 1);
  g->x1 = x1, g->y1 = y1, g->bh = h / (double)ph, g->bw = w / (double)pw;
  if (ratio <= 0 && !(h / (double)ph <= MAX_SAMPLES && w / (double)pw <= MAX_SAMPLES))
    return mx_err(MX_EINVAL, "%s: rois[%lld] needs more than %d samples per bin side (bins of "
                  "%g x %g): give sample_ratio", op, (long long)r + 1, MAX_SAMPLES,
                  h / (double)ph, w / (double)pw);
  g->gh = ratio > 0 ? ratio : (int64_t)ceil(h / (double)ph);
  g->gw = ratio > 0 ? ratio : (int64_t)ceil(w / (double)pw);
  g->count = fmax((double)(g->gh * g->gw), 1);
  return MX_OK;
}

/* bilinear weights of (y, x) on an H x W map: the 4 neighbours' flat offsets and weights;
 * false when the point lies outside (-1, H) x (-1, W) */
static bool bilinear(double y, double x, int64_t H, int64_t W, int64_t *at, double *w) {
  if (!(y >= -1.0 && y <= (double)H && x >= -1.0 && x <= (double)W)) return false; /* NaN too */
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
  if (yl >= H - 1) yh = yl = H - 1, y = (double)yl; else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, x = (double)xl; else xh = xl + 1;
  double ly = y - (double)yl, lx = x - (double)xl, hy = 1 - ly, hx = 1 - lx;
  at[0] = yl * W + xl; at[1] = yl * W + xh; at[2] = yh * W + xl; at[3] = yh * W + xh;
  w[0] = hy * hx; w[1] = hy * lx; w[2] = ly * hx; w[3] = ly * lx;
  return true;
}

/* The loop roi_align and its backward share: for output element (r, c, i, j) of
 * (R, Cout, ph, pw), every sample's neighbours in input channel plane `plane`. */
static int roi_walk(const char *op, const mx_tensor *rois, const int64_t *dshape,
                    const mx_tuple *ps, double scale, int64_t ratio, bool psr, bool aligned,
                    const mx_tensor *src, mx_tensor *dst, bool backward) {
  int64_t R = rois->shape[0], C = dshape[1], H = dshape[2], W = dshape[3];
  int64_t ph = ps->v[0], pw = ps->v[1], cout = psr ? C / (ph * pw) : C;
  for (int64_t r = 0; r < R; r++) {
    roi_geom g;
    int rc = roi_geometry(op, rois, r, dshape[0], scale, ph, pw, ratio, aligned, &g);
    if (rc) return rc;
    for (int64_t c = 0; c < cout; c++)
      for (int64_t i = 0; i < ph; i++)
        for (int64_t j = 0; j < pw; j++) {
          int64_t o = ((r * cout + c) * ph + i) * pw + j;
          int64_t cin = psr ? (c * ph + i) * pw + j : c;
          int64_t plane = (g.b * C + cin) * H * W;
          double sum = 0, go = backward ? ld(src, o) / g.count : 0;
          if (g.b < 0) {
            if (!backward) st(dst, o, 0);
            continue;
          }
          for (int64_t iy = 0; iy < g.gh; iy++) {
            double y = g.y1 + (double)i * g.bh + ((double)iy + 0.5) * g.bh / (double)g.gh;
            for (int64_t ix = 0; ix < g.gw; ix++) {
              double x = g.x1 + (double)j * g.bw + ((double)ix + 0.5) * g.bw / (double)g.gw;
              int64_t at[4];
              double w[4];
              if (!bilinear(y, x, H, W, at, w)) continue;
              for (int k = 0; k < 4; k++) {
                if (backward)
                  st(dst, plane + at[k], ld(dst, plane + at[k]) + go * w[k]);
                else
                  sum += w[k] * ld(src, plane + at[k]);
              }
            }
          }
          if (!backward) st(dst, o, sum / g.count);
        }
  }
  return MX_OK;
}

/* roi_align: data (N, C, H, W), rois (R, 5) -> (R, Cout, ph, pw) */
int mx_ref_roi_align(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_roi_align *P = p;
  return roi_walk("roi_align", in[1], in[0]->shape, &P->pooled_size, P->spatial_scale,
                  P->sample_ratio, P->position_sensitive, P->aligned, in[0], out[0], false);
}

/* roi_align_backward: ograd (R, Cout, ph, pw), data (shape only), rois -> ddata */
int mx_ref_roi_align_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_roi_align_backward *P = p;
  for (int64_t i = 0; i < out[0]->size; i++) st(out[0], i, 0);
  return roi_walk("roi_align_backward", in[2], in[1]->shape, &P->pooled_size, P->spatial_scale,
                  P->sample_ratio, P->position_sensitive, P->aligned, in[0], out[0], true);
}

/* roi_pooling: data (N, C, H, W), rois (R, 5) -> out (R, C, ph, pw) bin maxima, argmax (1-based
 * flat positions in data, 0 for an empty bin). MXNet's geometry: ROI corners rounded to
 * cells, at least 1 cell, bins [floor(i * size), ceil((i + 1) * size)) clipped to the map. */
int mx_ref_roi_pooling(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_roi_pooling *P = p;
  const mx_tensor *x = in[0], *rois = in[1];
  int64_t R = rois->shape[0], N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t ph = P->pooled_size.v[0], pw = P->pooled_size.v[1];
  for (int64_t r = 0; r < R; r++) {
    double bi = ld(rois, r * 5);
    if (bi != floor(bi) || bi < 0 || bi >= (double)N)
      return mx_err(MX_EINVAL, "roi_pooling: rois[%lld] has batch id %g, not one of 0..%lld",
                    (long long)r + 1, bi, (long long)N - 1);
    int64_t b = (int64_t)bi;
    for (int k = 1; k < 5; k++) {
      double v = ld(rois, r * 5 + k) * P->spatial_scale;
      if (!(fabs(v) < 9e15))
        return mx_err(MX_EINVAL, "roi_pooling: rois[%lld] has coordinate %d = %g (scaled %g): "
                      "not a finite feature-map position", (long long)r + 1, k,
                      ld(rois, r * 5 + k), v);
    }
    int64_t x1 = (int64_t)round(ld(rois, r * 5 + 1) * P->spatial_scale);
    int64_t y1 = (int64_t)round(ld(rois, r * 5 + 2) * P->spatial_scale);
    int64_t x2 = (int64_t)round(ld(rois, r * 5 + 3) * P->spatial_scale);
    int64_t y2 = (int64_t)round(ld(rois, r * 5 + 4) * P->spatial_scale);
    double bh = (double)(y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1) / (double)ph;
    double bw = (double)(x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1) / (double)pw;
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < ph; i++)
        for (int64_t j = 0; j < pw; j++) {
          int64_t hs = (int64_t)floor((double)i * bh) + y1, he = (int64_t)ceil((double)(i + 1) * bh) + y1;
          int64_t ws = (int64_t)floor((double)j * bw) + x1, we = (int64_t)ceil((double)(j + 1) * bw) + x1;
          hs = hs < 0 ? 0 : hs > H ? H : hs; he = he < 0 ? 0 : he > H ? H : he;
          ws = ws < 0 ? 0 : ws > W ? W : ws; we = we < 0 ? 0 : we > W ? W : we;
          double best = 0;
          int64_t at = -1;
          for (int64_t h = hs; h < he; h++)
            for (int64_t w = ws; w < we; w++) {
              int64_t k = ((b * C + c) * H + h) * W + w;
              double v = ld(x, k);
              if (at < 0 || v > best) best = v, at = k;
            }
          int64_t o = ((r * C + c) * ph + i) * pw + j;
          st(out[0], o, at < 0 ? 0 : best);
          st(out[1], o, (double)(at + 1));
        }
  }
  return MX_OK;
}

/* roi_pooling_backward: ograd, data (shape only), argmax -> ddata (ograd summed at argmax) */
int mx_ref_roi_pooling_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                                int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *g = in[0], *am = in[2];
  for (int64_t i = 0; i < out[0]->size; i++) st(out[0], i, 0);
  for (int64_t i = 0; i < g->size; i++) {
    double a = mx_load_f64(mx_ptr(am), am->dtype, i);
    if (a <= 0) continue;
    if (a > (double)out[0]->size || a != floor(a))
      return mx_err(MX_EINVAL, "roi_pooling_backward: argmax %g is not a position of data", a);
    int64_t k = (int64_t)a - 1;
    st(out[0], k, ld(out[0], k) + ld(g, i));
  }
  return MX_OK;
}
