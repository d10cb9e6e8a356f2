/* kernels/ref/anchor.c — reference anchor ops: multibox_prior, multibox_target,
 * multibox_detection (MXNet's contrib MultiBox operators). Plain loops in double through
 * mx_load_f64/mx_store_f64; sorts are stable (ties keep anchor order). MXNet's own
 * quirks are kept where they decide results: IoU from unclamped areas, the greedy
 * ground-truth matching, class 0 as the background of detection. */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double ld(const mx_tensor *t, int64_t i) { return mx_load_f64(mx_ptr(t), t->dtype, i); }
static void st(mx_tensor *t, int64_t i, double v) { mx_store_f64(mx_ptr(t), t->dtype, i, v); }

/* IoU of corner boxes as MXNet's MultiBox ops compute it: the areas are not clamped, so
 * an inverted box can make the union small or negative (then 0). */
static double overlap(const double *a, const double *b) {
  double w = fmax(0, fmin(a[2], b[2]) - fmax(a[0], b[0]));
  double h = fmax(0, fmin(a[3], b[3]) - fmax(a[1], b[1]));
  double i = w * h, u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i;
  return u <= 0 ? 0 : i / u;
}

/* multibox_prior: data (B, C, H, W) read for its shape -> out (1, H * W * A, 4), A = #sizes +
 * #ratios - 1 corner boxes per cell, row-major over (row, column, anchor). */
int mx_ref_multibox_prior(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_multibox_prior *P = p;
  int64_t H = in[0]->shape[2], W = in[0]->shape[3];
  double sy = P->steps.v[0] > 0 ? P->steps.v[0] : 1.0 / (double)H;
  double sx = P->steps.v[1] > 0 ? P->steps.v[1] : 1.0 / (double)W;
  int64_t k = 0;
  for (int64_t r = 0; r < H; r++) {
    double cy = ((double)r + P->offsets.v[0]) * sy;
    for (int64_t c = 0; c < W; c++) {
      double cx = ((double)c + P->offsets.v[1]) * sx;
      for (int a = 0; a < P->sizes.n + P->ratios.n - 1; a++) {
        /* first every size at ratios[0], then sizes[0] at each later ratio */
        double s = a < P->sizes.n ? P->sizes.v[a] : P->sizes.v[0];
        double q = sqrt(a < P->sizes.n ? P->ratios.v[0] : P->ratios.v[a - P->sizes.n + 1]);
        double w = s * (double)H / (double)W * q / 2, h = s / q / 2;
        double box[4] = { cx - w, cy - h, cx + w, cy + h };
        for (int j = 0; j < 4; j++) {
          double v = box[j];
          if (P->clip) v = fmin(1, fmax(0, v));
          st(out[0], k * 4 + j, v);
        }
        k++;
      }
    }
  }
  return MX_OK;
}

/* the variance-scaled centre offsets of ground truth g from anchor a (corner boxes) */
static void encode(const double *a, const double *g, const double *var, double *t) {
  double aw = a[2] - a[0], ah = a[3] - a[1], ax = (a[0] + a[2]) / 2, ay = (a[1] + a[3]) / 2;
  double gw = g[2] - g[0], gh = g[3] - g[1], gx = (g[0] + g[2]) / 2, gy = (g[1] + g[3]) / 2;
  t[0] = (gx - ax) / aw / var[0];
  t[1] = (gy - ay) / ah / var[1];
  t[2] = log(gw / aw) / var[2];
  t[3] = log(gh / ah) / var[3];
}

typedef struct { double key; int64_t idx; } keyed;

/* ascending key, ties by index: a stable order for qsort */
static int keyed_asc(const void *x, const void *y) {
  const keyed *a = x, *b = y;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* descending key, ties by index */
static int keyed_desc(const void *x, const void *y) {
  const keyed *a = x, *b = y;
  if (a->key != b->key) return a->key > b->key ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* multibox_target: anchor (1, N, 4), label (B, M, W), cls_pred (B, C, N) -> loc_target (B, N*4),
 * loc_mask (B, N*4), cls_target (B, N). Anchor flags per batch: 1 positive, 0 negative,
 * -1 ignored. */
int mx_ref_multibox_target(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_multibox_target *P = p;
  const mx_tensor *an = in[0], *lb = in[1], *cp = in[2];
  int64_t N = an->shape[1], B = lb->shape[0], M = lb->shape[1], LW = lb->shape[2];
  int64_t C = cp->shape[1];
  for (int64_t i = 0; i < out[0]->size; i++) { st(out[0], i, 0); st(out[1], i, 0); }
  for (int64_t i = 0; i < out[2]->size; i++) st(out[2], i, P->ignore_label);
  if (N == 0 || M == 0) return MX_OK;
  double *anc = malloc((size_t)N * 4 * sizeof *anc), *gt = malloc((size_t)M * 4 * sizeof *gt);
  double *iou = malloc((size_t)N * (size_t)M * sizeof *iou);
  double *best = malloc((size_t)N * sizeof *best);
  int64_t *match = malloc((size_t)N * sizeof *match);
  int *flag = malloc((size_t)N * sizeof *flag);
  bool *gt_done = malloc((size_t)M);
  keyed *neg = malloc((size_t)N * sizeof *neg);
  if (!anc || !gt || !iou || !best || !match || !flag || !gt_done || !neg) {
    free(anc); free(gt); free(iou); free(best); free(match); free(flag); free(gt_done);
    free(neg);
    return mx_err(MX_ENOMEM, "multibox_target: no memory for %lld anchors x %lld labels",
                  (long long)N, (long long)M);
  }
  for (int64_t i = 0; i < N * 4; i++) anc[i] = ld(an, i);
  const double *var = P->variances.v;
  for (int64_t b = 0; b < B; b++) {
    int64_t G = 0; /* ground truths: the rows before the first class id -1 */
    while (G < M && ld(lb, (b * M + G) * LW) != -1) {
      for (int j = 0; j < 4; j++) gt[G * 4 + j] = ld(lb, (b * M + G) * LW + 1 + j);
      G++;
    }
    if (G == 0) continue;
    for (int64_t i = 0; i < N; i++) {
      for (int64_t g = 0; g < G; g++) iou[i * G + g] = overlap(anc + i * 4, gt + g * 4);
      best[i] = -1;
      match[i] = -1;
      flag[i] = -1;
    }
    memset(gt_done, 0, (size_t)G);
    /* each ground truth takes the free anchor of the highest remaining IoU (above 1e-6),
     * the best pair first */
    int64_t npos = 0;
    for (int64_t left = G; left > 0; left--) {
      int64_t ba = -1, bg = -1;
      double bo = 1e-6;
      for (int64_t i = 0; i < N; i++) {
        if (flag[i] == 1) continue;
        for (int64_t g = 0; g < G; g++)
          if (!gt_done[g] && iou[i * G + g] > bo) { bo = iou[i * G + g]; ba = i; bg = g; }
      }
      if (ba < 0) break;
      best[ba] = bo;
      match[ba] = bg;
      flag[ba] = 1;
      gt_done[bg] = true;
      npos++;
    }
    /* the other anchors: their best ground truth, positive above overlap_threshold */
    for (int64_t i = 0; i < N; i++) {
      if (flag[i] == 1) continue;
      for (int64_t g = 0; g < G; g++)
        if (iou[i * G + g] > best[i]) { best[i] = iou[i * G + g]; match[i] = g; }
      if (P->overlap_threshold > 0 && best[i] > P->overlap_threshold) { flag[i] = 1; npos++; }
    }
    if (P->negative_mining_ratio > 0) {
      int64_t want = (int64_t)((double)npos * P->negative_mining_ratio), n = 0;
      if (want > N - npos) want = N - npos;
      /* candidates: below negative_mining_thresh, the lowest background probability
       * (softmax over cls_pred's classes) first */
      for (int64_t i = 0; i < N && want > 0; i++) {
        if (flag[i] == 1 || !(best[i] < P->negative_mining_thresh)) continue;
        const int64_t base = b * C * N + i;
        double mx = ld(cp, base);
        for (int64_t c = 1; c < C; c++) mx = fmax(mx, ld(cp, base + c * N));
        double sum = 0;
        for (int64_t c = 0; c < C; c++) sum += exp(ld(cp, base + c * N) - mx);
        neg[n].key = exp(ld(cp, base) - mx) / sum;
        neg[n].idx = i;
        n++;
      }
      qsort(neg, (size_t)n, sizeof *neg, keyed_asc);
      for (int64_t k = 0; k < n && k < want; k++) flag[neg[k].idx] = 0;
    } else {
      for (int64_t i = 0; i < N; i++)
        if (flag[i] != 1) flag[i] = 0;
    }
    for (int64_t i = 0; i < N; i++) {
      if (flag[i] == 1) {
        double t[4];
        encode(anc + i * 4, gt + match[i] * 4, var, t);
        st(out[2], b * N + i, ld(lb, (b * M + match[i]) * LW) + 1);
        for (int j = 0; j < 4; j++) {
          st(out[0], (b * N + i) * 4 + j, t[j]);
          st(out[1], (b * N + i) * 4 + j, 1);
        }
      } else if (flag[i] == 0) {
        st(out[2], b * N + i, 0);
      }
    }
  }
  free(anc); free(gt); free(iou); free(best); free(match); free(flag); free(gt_done);
  free(neg);
  return MX_OK;
}

/* multibox_detection: cls_prob (B, C, N), loc_pred (B, N*4), anchor (1, N, 4) -> out (B, N, 6)
 * rows [id, score, x1, y1, x2, y2], the detections first, then -1 rows. */
int mx_ref_multibox_detection(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_multibox_detection *P = p;
  const mx_tensor *cp = in[0], *lp = in[1], *an = in[2];
  int64_t B = cp->shape[0], C = cp->shape[1], N = cp->shape[2];
  for (int64_t i = 0; i < out[0]->size; i++) st(out[0], i, -1);
  if (N == 0) return MX_OK;
  double *det = malloc((size_t)N * 6 * sizeof *det);
  keyed *ord = malloc((size_t)N * sizeof *ord);
  if (!det || !ord) {
    free(det); free(ord);
    return mx_err(MX_ENOMEM, "multibox_detection: no memory for %lld anchors", (long long)N);
  }
  const double *var = P->variances.v;
  for (int64_t b = 0; b < B; b++) {
    int64_t n = 0;
    for (int64_t i = 0; i < N; i++) {
      /* the best class after the background (class 0, as MXNet's CPU operator) */
      double score = -1;
      int64_t id = 0;
      for (int64_t c = 1; c < C; c++) {
        double v = ld(cp, (b * C + c) * N + i);
        if (v > score) { score = v; id = c; }
      }
      if (id == 0 || score < P->threshold) continue;
      double a[4], l[4];
      for (int j = 0; j < 4; j++) { a[j] = ld(an, i * 4 + j); l[j] = ld(lp, (b * N + i) * 4 + j); }
      double aw = a[2] - a[0], ah = a[3] - a[1], ax = (a[0] + a[2]) / 2, ay = (a[1] + a[3]) / 2;
      double ox = l[0] * var[0] * aw + ax, oy = l[1] * var[1] * ah + ay;
      double ow = exp(l[2] * var[2]) * aw / 2, oh = exp(l[3] * var[3]) * ah / 2;
      double box[4] = { ox - ow, oy - oh, ox + ow, oy + oh };
      double *d = det + n * 6;
      d[0] = (double)(id - 1);
      d[1] = score;
      for (int j = 0; j < 4; j++) d[2 + j] = P->clip ? fmax(0, fmin(1, box[j])) : box[j];
      n++;
    }
    int64_t base = b * N * 6;
    if (n > 0 && P->nms_threshold > 0 && P->nms_threshold <= 1) {
      for (int64_t i = 0; i < n; i++) { ord[i].key = det[i * 6 + 1]; ord[i].idx = i; }
      qsort(ord, (size_t)n, sizeof *ord, keyed_desc);
      int64_t keep = P->nms_topk > 0 && P->nms_topk < n ? P->nms_topk : n;
      double *sorted = malloc((size_t)n * 6 * sizeof *sorted);
      if (!sorted) {
        free(det); free(ord);
        return mx_err(MX_ENOMEM, "multibox_detection: no memory for %lld detections",
                      (long long)n);
      }
      /* MXNet reorders only the nms_topk best: the later rows stay in anchor order with
       * id -1 */
      memcpy(sorted, det, (size_t)n * 6 * sizeof *sorted);
      for (int64_t i = 0; i < keep; i++)
        memcpy(sorted + i * 6, det + ord[i].idx * 6, 6 * sizeof *det);
      for (int64_t i = keep; i < n; i++) sorted[i * 6] = -1;
      memcpy(det, sorted, (size_t)n * 6 * sizeof *det);
      free(sorted);
      for (int64_t i = 0; i < n; i++) {
        if (det[i * 6] < 0) continue;
        for (int64_t j = i + 1; j < n; j++) {
          if (det[j * 6] < 0) continue;
          if ((P->force_suppress || det[i * 6] == det[j * 6]) &&
              overlap(det + i * 6 + 2, det + j * 6 + 2) >= P->nms_threshold)
            det[j * 6] = -1;
        }
      }
    }
    for (int64_t i = 0; i < n * 6; i++) st(out[0], base + i, det[i]);
  }
  free(det); free(ord);
  return MX_OK;
}

/* py-faster-rcnn's anchors of one cell: a (stride x stride) base box re-shaped per ratio
 * (rounded to whole pixels) then scaled, ratios outer, scales inner; a[k*4..] corners */
static void base_anchors(const struct mx_params_proposal *P, double *a) {
  double base = (double)P->feature_stride, ctr = 0.5 * (base - 1);
  int k = 0;
  for (int r = 0; r < P->ratios.n; r++) {
    for (int s = 0; s < P->scales.n; s++) {
      double size = base * base, ratio = P->ratios.v[r], scale = P->scales.v[s];
      double w = floor(sqrt(floor(size / ratio)) + 0.5) * scale;
      double h = floor(w / scale * ratio + 0.5) * scale;
      a[k * 4 + 0] = ctr - 0.5 * (w - 1);
      a[k * 4 + 1] = ctr - 0.5 * (h - 1);
      a[k * 4 + 2] = ctr + 0.5 * (w - 1);
      a[k * 4 + 3] = ctr + 0.5 * (h - 1);
      k++;
    }
  }
}

/* one image of proposal: cls_prob/bbox_pred at image b, its rows written from out row
 * b * post. p: count x 5 scratch (boxes and scores), ord/keep/gone: count each. */
static void propose(const struct mx_params_proposal *P, const mx_tensor *cp, const mx_tensor *bp,
                    const mx_tensor *im, int64_t b, const double *anc, double *p, keyed *ord,
                    int64_t *keep, bool *gone, double *sorted, mx_tensor *out, mx_tensor *score) {
  int64_t A = cp->shape[1] / 2, H = cp->shape[2], W = cp->shape[3], count = A * H * W;
  double stride = (double)P->feature_stride;
  double imh = ld(im, b * 3), imw = ld(im, b * 3 + 1), imscale = ld(im, b * 3 + 2);
  int64_t real_h = (int64_t)(imh / stride), real_w = (int64_t)(imw / stride);
  double min_size = (double)P->rpn_min_size * imscale;
  for (int64_t a = 0; a < A; a++) {
    for (int64_t h = 0; h < H; h++) {
      for (int64_t w = 0; w < W; w++) {
        int64_t i = h * W * A + w * A + a;
        double box[4] = { anc[a * 4] + (double)w * stride, anc[a * 4 + 1] + (double)h * stride,
                          anc[a * 4 + 2] + (double)w * stride, anc[a * 4 + 3] + (double)h * stride };
        double d[4];
        for (int c = 0; c < 4; c++) d[c] = ld(bp, ((b * A * 4 + a * 4 + c) * H + h) * W + w);
        double o[4];
        if (P->iou_loss) {
          for (int c = 0; c < 4; c++) o[c] = box[c] + d[c];
        } else {
          double bw = box[2] - box[0] + 1, bh = box[3] - box[1] + 1;
          double cx = box[0] + 0.5 * (bw - 1), cy = box[1] + 0.5 * (bh - 1);
          double px = d[0] * bw + cx, py = d[1] * bh + cy;
          double pw = exp(d[2]) * bw, ph = exp(d[3]) * bh;
          o[0] = px - 0.5 * (pw - 1);
          o[1] = py - 0.5 * (ph - 1);
          o[2] = px + 0.5 * (pw - 1);
          o[3] = py + 0.5 * (ph - 1);
        }
        o[0] = fmax(fmin(o[0], imw - 1), 0);
        o[1] = fmax(fmin(o[1], imh - 1), 0);
        o[2] = fmax(fmin(o[2], imw - 1), 0);
        o[3] = fmax(fmin(o[3], imh - 1), 0);
        double *q = p + i * 5;
        for (int c = 0; c < 4; c++) q[c] = o[c];
        q[4] = ld(cp, ((b * A * 2 + A + a) * H + h) * W + w);
        if (h >= real_h || w >= real_w) q[4] = -1;
        /* too small: grown by min_size / 2 each way and scored -1, as MXNet's FilterBox */
        if (q[2] - q[0] + 1 < min_size || q[3] - q[1] + 1 < min_size) {
          q[0] -= min_size / 2; q[1] -= min_size / 2;
          q[2] += min_size / 2; q[3] += min_size / 2;
          q[4] = -1;
        }
      }
    }
  }
  for (int64_t i = 0; i < count; i++) { ord[i].key = p[i * 5 + 4]; ord[i].idx = i; }
  qsort(ord, (size_t)count, sizeof *ord, keyed_desc);
  int64_t pre = P->rpn_pre_nms_top_n > 0 && P->rpn_pre_nms_top_n < count ? P->rpn_pre_nms_top_n
                                                                          : count;
  int64_t post = P->rpn_post_nms_top_n < pre ? P->rpn_post_nms_top_n : pre;
  for (int64_t i = 0; i < pre; i++) {
    memcpy(sorted + i * 5, p + ord[i].idx * 5, 5 * sizeof *p);
    gone[i] = false;
  }
  /* greedy NMS over the pre best (+1 areas), at most post kept */
  int64_t n = 0;
  for (int64_t i = 0; i < pre && n < post; i++) {
    if (gone[i]) continue;
    const double *a = sorted + i * 5;
    double aa = (a[2] - a[0] + 1) * (a[3] - a[1] + 1);
    keep[n++] = i;
    for (int64_t j = i + 1; j < pre; j++) {
      if (gone[j]) continue;
      const double *c = sorted + j * 5;
      double w = fmax(0, fmin(a[2], c[2]) - fmax(a[0], c[0]) + 1);
      double h = fmax(0, fmin(a[3], c[3]) - fmax(a[1], c[1]) + 1);
      double inter = w * h, ac = (c[2] - c[0] + 1) * (c[3] - c[1] + 1);
      if (inter / (aa + ac - inter) > P->threshold) gone[j] = true;
    }
  }
  /* rows after the kept ones repeat them in order */
  int64_t rows = P->rpn_post_nms_top_n;
  for (int64_t r = 0; r < rows; r++) {
    const double *q = sorted + keep[r % n] * 5;
    int64_t o = b * rows + r;
    st(out, o * 5, (double)b);
    for (int c = 0; c < 4; c++) st(out, o * 5 + 1 + c, q[c]);
    if (score) st(score, o, q[4]);
  }
}

/* proposal / multi_proposal: cls_prob (B, 2A, H, W), bbox_pred (B, 4A, H, W), im_info (B, 3)
 * -> rois (B * post, 5) [batch id, x1, y1, x2, y2] and, with output_score, scores (B * post, 1) */
static int proposals(const void *p, mx_tensor *const *in, int nout, mx_tensor *const *out,
                     const char *who) {
  const struct mx_params_proposal *P = p;
  const mx_tensor *cp = in[0], *bp = in[1], *im = in[2];
  int64_t B = cp->shape[0], A = cp->shape[1] / 2, H = cp->shape[2], W = cp->shape[3];
  int64_t count = A * H * W;
  for (int64_t b = 0; b < B; b++) {
    double stride = (double)P->feature_stride;
    if ((int64_t)(ld(im, b * 3) / stride) > H || (int64_t)(ld(im, b * 3 + 1) / stride) > W)
      return mx_err(MX_EINVAL, "%s: im_info[%lld] says %g x %g pixels, more than the %lld x %lld "
                    "map covers at feature_stride %lld", who, (long long)b + 1, ld(im, b * 3),
                    ld(im, b * 3 + 1), (long long)H, (long long)W, (long long)P->feature_stride);
  }
  if (count == 0) return mx_err(MX_EINVAL, "%s: an empty feature map", who);
  double *anc = malloc((size_t)A * 4 * sizeof *anc);
  double *buf = malloc((size_t)count * 10 * sizeof *buf);
  keyed *ord = malloc((size_t)count * sizeof *ord);
  int64_t *keep = malloc((size_t)count * sizeof *keep);
  bool *gone = malloc((size_t)count);
  if (!anc || !buf || !ord || !keep || !gone) {
    free(anc); free(buf); free(ord); free(keep); free(gone);
    return mx_err(MX_ENOMEM, "%s: no memory for %lld anchors", who, (long long)count);
  }
  base_anchors(P, anc);
  for (int64_t b = 0; b < B; b++)
    propose(P, cp, bp, im, b, anc, buf, ord, keep, gone, buf + count * 5, out[0],
            nout > 1 ? out[1] : NULL);
  free(anc); free(buf); free(ord); free(keep); free(gone);
  return MX_OK;
}

int mx_ref_proposal(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)ctx; (void)nin;
  return proposals(p, in, nout, out, "proposal");
}

int mx_ref_multi_proposal(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin;
  return proposals(p, in, nout, out, "multi_proposal");
}
