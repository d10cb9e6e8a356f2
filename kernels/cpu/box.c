/* kernels/cpu/box.c — box_nms, box_iou (float32/float64) and roi_align (float32). box_nms
 * gathers each batch's valid boxes with their scores, qsorts them (the position breaks ties: the
 * reference's stable order), keeps corner boxes and areas in double (the reference's
 * arithmetic, so both keep the same boxes), and suppresses by IoU, comparing boxes
 * only within their class (grouped by id). Row positions in the params are
 * 0-based. */
#include "internal.h"
#include "mx_ops_gen.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct { double s; int64_t i; } cand;

/* the class ids qsort's by_group orders candidate positions by (class id, position): the
 * kernel's own array, set before each sort (a kernel runs on one thread) */
static _Thread_local const double *grp_ids;
static int by_group(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  if (grp_ids[a] != grp_ids[b]) return grp_ids[a] < grp_ids[b] ? -1 : 1;
  return (a > b) - (a < b);
}

static int by_score(const void *x, const void *y) {
  const cand *a = x, *b = y;
  if (a->s != b->s) return a->s < b->s ? 1 : -1;
  return (a->i > b->i) - (a->i < b->i);
}

/* row element k of a float32 or float64 tensor's flat storage */
static inline double get(const void *d, bool f64, int64_t k) {
  return f64 ? ((const double *)d)[k] : (double)((const float *)d)[k];
}
static inline void put(void *d, bool f64, int64_t k, double v) {
  if (f64) ((double *)d)[k] = v; else ((float *)d)[k] = (float)v;
}

static void corners(const void *d, bool f64, int64_t at, bool center, double *c) {
  double a = get(d, f64, at), b = get(d, f64, at + 1), w = get(d, f64, at + 2),
         h = get(d, f64, at + 3);
  if (center) {
    c[0] = a - w / 2; c[1] = b - h / 2; c[2] = a + w / 2; c[3] = b + h / 2;
  } else {
    c[0] = a; c[1] = b; c[2] = w; c[3] = h;
  }
}

/* fmin/fmax (the reference's, NaN-ignoring) inline: the libm calls cost more than the IoU */
static inline double mn(double a, double b) {
  if (a != a) return b;
  if (b != b) return a;
  return a < b ? a : b;
}
static inline double mx(double a, double b) {
  if (a != a) return b;
  if (b != b) return a;
  return a > b ? a : b;
}

static inline double area(const double *c) {
  double w = c[2] - c[0], h = c[3] - c[1];
  return w < 0 || h < 0 ? 0 : w * h;
}

/* box_nms: data (B.., N, K) -> out (B.., N, K), index (B.., N) int64, 1-based */
int mx_cpu_box_nms(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_box_nms *P = p;
  const mx_tensor *x = in[0];
  bool f64 = x->dtype == MX_F64;
  int64_t K = x->shape[x->ndim - 1], N = x->shape[x->ndim - 2];
  int64_t B = N * K > 0 ? x->size / (N * K) : 0;
  bool cin = P->in_format == MX_BOX_NMS_IN_FORMAT_CENTER;
  bool cout = P->out_format == MX_BOX_NMS_OUT_FORMAT_CENTER;
  const void *src = mx_ptr(x);
  void *dst = mx_ptr(out[0]);
  int64_t *index = mx_ptr(out[1]);
  for (int64_t i = 0; i < out[0]->size; i++) put(dst, f64, i, -1);
  memset(index, 0, (size_t)out[1]->size * sizeof *index);
  if (N == 0) return MX_OK;
  cand *cs = malloc((size_t)N * sizeof *cs);
  double *box = malloc((size_t)N * 5 * sizeof *box); /* corners + area */
  double *ids = malloc((size_t)N * sizeof *ids);
  bool *gone = malloc((size_t)N);
  int64_t *grp = malloc((size_t)N * sizeof *grp);
  if (!cs || !box || !ids || !gone || !grp) {
    free(cs); free(box); free(ids); free(gone); free(grp);
    return mx_err(MX_ENOMEM, "box_nms: no memory for %lld boxes", (long long)N);
  }
  bool by_id = P->id_index >= 0 && !P->force_suppress;
  for (int64_t b = 0; b < B; b++) {
    int64_t base = b * N * K, n = 0;
    for (int64_t i = 0; i < N; i++) {
      int64_t row = base + i * K;
      double s = get(src, f64, row + P->score_index);
      if (!(s > P->valid_thresh)) continue;
      if (P->id_index >= 0) {
        double id = get(src, f64, row + P->id_index);
        if (id == (double)P->background_id) continue; /* -1 by default: padding rows */
      }
      cs[n].s = s;
      cs[n++].i = i;
    }
    qsort(cs, (size_t)n, sizeof *cs, by_score);
    if (P->topk > 0 && n > P->topk) n = P->topk;
    for (int64_t a = 0; a < n; a++) {
      int64_t row = base + cs[a].i * K;
      double *c = box + a * 5;
      corners(src, f64, row + P->coord_start, cin, c);
      c[4] = area(c);
      ids[a] = P->id_index >= 0 ? get(src, f64, row + P->id_index) : 0;
      gone[a] = false;
    }
    /* suppression within each class: the candidates grouped by id (score order kept in
     * each group), so a box is compared only with the later boxes of its class */
    for (int64_t a = 0; a < n; a++) grp[a] = a;
    if (by_id) {
      grp_ids = ids;
      qsort(grp, (size_t)n, sizeof *grp, by_group);
    }
    for (int64_t ga = 0; ga < n; ga++) {
      int64_t a = grp[ga];
      if (gone[a]) continue;
      const double *ca = box + a * 5;
      for (int64_t gc = ga + 1; gc < n; gc++) {
        int64_t c = grp[gc];
        if (by_id && ids[c] != ids[a]) break;
        if (gone[c]) continue;
        const double *cb = box + c * 5;
        double w = mn(ca[2], cb[2]) - mx(ca[0], cb[0]);
        if (!(w > 0)) continue;
        double h = mn(ca[3], cb[3]) - mx(ca[1], cb[1]);
        if (!(h > 0)) continue;
        double inter = w * h, u = ca[4] + cb[4] - inter;
        if (u > 0 && inter / u > P->overlap_thresh) gone[c] = true;
      }
    }
    int64_t r = 0;
    for (int64_t a = 0; a < n; a++) {
      if (gone[a]) continue;
      const double *ca = box + a * 5;
      int64_t from = base + cs[a].i * K, to = base + r * K;
      if (f64)
        memcpy((double *)dst + to, (const double *)src + from, (size_t)K * sizeof(double));
      else
        memcpy((float *)dst + to, (const float *)src + from, (size_t)K * sizeof(float));
      if (cin != cout) {
        double v[4] = { ca[0], ca[1], ca[2], ca[3] };
        if (cout) {
          v[0] = (ca[0] + ca[2]) / 2; v[1] = (ca[1] + ca[3]) / 2;
          v[2] = ca[2] - ca[0]; v[3] = ca[3] - ca[1];
        }
        for (int k = 0; k < 4; k++) put(dst, f64, to + P->coord_start + k, v[k]);
      }
      index[b * N + r] = cs[a].i + 1;
      r++;
    }
  }
  free(cs); free(box); free(ids); free(gone); free(grp);
  return MX_OK;
}

/* box_iou: lhs (L.., 4), rhs (R.., 4) -> (L.., R..); rhs corners and areas computed once */
int mx_cpu_box_iou(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_box_iou *P = p;
  bool center = P->format == MX_BOX_IOU_FORMAT_CENTER, f64 = in[0]->dtype == MX_F64;
  int64_t nl = in[0]->size / 4, nr = in[1]->size / 4;
  double *rb = malloc((size_t)(nr > 0 ? nr : 1) * 5 * sizeof *rb);
  if (!rb) return mx_err(MX_ENOMEM, "box_iou: no memory for %lld boxes", (long long)nr);
  for (int64_t j = 0; j < nr; j++) {
    corners(mx_ptr(in[1]), f64, j * 4, center, rb + j * 5);
    rb[j * 5 + 4] = area(rb + j * 5);
  }
  void *o = mx_ptr(out[0]);
  for (int64_t i = 0; i < nl; i++) {
    double a[4];
    corners(mx_ptr(in[0]), f64, i * 4, center, a);
    double aa = area(a);
    float *of = f64 ? NULL : (float *)o + i * nr;
    double *od = f64 ? (double *)o + i * nr : NULL;
    for (int64_t j = 0; j < nr; j++) {
      const double *b = rb + j * 5;
      double w = mn(a[2], b[2]) - mx(a[0], b[0]), h = mn(a[3], b[3]) - mx(a[1], b[1]);
      double inter = w > 0 && h > 0 ? w * h : 0, u = aa + b[4] - inter;
      double v = u > 0 ? inter / u : 0;
      if (od) od[j] = v; else of[j] = (float)v;
    }
  }
  free(rb);
  return MX_OK;
}

/* roi_align, float32: data (N, C, H, W), rois (R, 5) -> (R, Cout, ph, pw). A sample's
 * bilinear taps are separable (its row pair and weights depend on its y only, its column
 * pair on its x), so each ROI's sample rows and columns are worked out once for all its
 * channels; the ROIs run in parallel. Geometry as MXNet's ROIAlign. */
#define ROI_MAX_SAMPLES 1024

typedef struct { int64_t lo, hi; float wl, wh; bool in; } roi_tap;
typedef struct { int64_t b, gh, gw; double y1, x1, bh, bw; } roi_box;

typedef struct {
  const float *data;
  float *out;
  const roi_box *box;
  int64_t C, H, W, ph, pw, cout;
  bool psr;
  atomic_int failed; /* a worker found no memory for its taps */
} roi_job;

/* the taps of bins x per samples along an axis of `size` cells from `first` */
static void roi_taps(double first, double bin, int64_t bins, int64_t per, int64_t size,
                     roi_tap *t) {
  for (int64_t i = 0; i < bins; i++)
    for (int64_t s = 0; s < per; s++) {
      double v = first + (double)i * bin + ((double)s + 0.5) * bin / (double)per;
      roi_tap *k = t + i * per + s;
      k->in = v >= -1.0 && v <= (double)size;
      if (!k->in) continue;
      if (v <= 0) v = 0;
      int64_t lo = (int64_t)v, hi;
      if (lo >= size - 1) hi = lo = size - 1, v = (double)lo; else hi = lo + 1;
      k->lo = lo, k->hi = hi, k->wh = (float)(v - (double)lo), k->wl = (float)(1 - (v - (double)lo));
    }
}

static void roi_align_rows(int64_t begin, int64_t end, void *ctx) {
  const roi_job *J = ctx;
  for (int64_t r = begin; r < end; r++) {
    const roi_box *g = J->box + r;
    float *o = J->out + r * J->cout * J->ph * J->pw;
    int64_t nh = J->ph * g->gh, nw = J->pw * g->gw;
    if (g->b < 0) {
      memset(o, 0, sizeof(float) * (size_t)(J->cout * J->ph * J->pw));
      continue;
    }
    roi_tap stack[256], *ty = nh + nw <= 256 ? stack : malloc(sizeof *ty * (size_t)(nh + nw));
    if (!ty) {
      atomic_store(&J->failed, 1);
      return;
    }
    roi_tap *tx = ty + nh;
    roi_taps(g->y1, g->bh, J->ph, g->gh, J->H, ty);
    roi_taps(g->x1, g->bw, J->pw, g->gw, J->W, tx);
    float inv = 1.0f / (float)(g->gh * g->gw > 0 ? g->gh * g->gw : 1);
    for (int64_t c = 0; c < J->cout; c++)
      for (int64_t i = 0; i < J->ph; i++)
        for (int64_t j = 0; j < J->pw; j++) {
          int64_t cin = J->psr ? (c * J->ph + i) * J->pw + j : c;
          const float *pl = J->data + (g->b * J->C + cin) * J->H * J->W;
          float sum = 0;
          for (int64_t iy = 0; iy < g->gh; iy++) {
            const roi_tap *y = ty + i * g->gh + iy;
            if (!y->in) continue;
            const float *rl = pl + y->lo * J->W, *rh = pl + y->hi * J->W;
            for (int64_t ix = 0; ix < g->gw; ix++) {
              const roi_tap *x = tx + j * g->gw + ix;
              if (!x->in) continue;
              sum += y->wl * (x->wl * rl[x->lo] + x->wh * rl[x->hi]) +
                     y->wh * (x->wl * rh[x->lo] + x->wh * rh[x->hi]);
            }
          }
          o[(c * J->ph + i) * J->pw + j] = sum * inv;
        }
    if (ty != stack) free(ty);
  }
}

int mx_cpu_roi_align(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_roi_align *P = p;
  const float *rois = mx_ptr(in[1]);
  int64_t R = in[1]->shape[0], N = in[0]->shape[0];
  int64_t ph = P->pooled_size.v[0], pw = P->pooled_size.v[1];
  double scale = P->spatial_scale, off = P->aligned ? 0.5 : 0;
  roi_box *box = malloc(sizeof *box * (size_t)(R > 0 ? R : 1));
  if (!box) return mx_err(MX_ENOMEM, "roi_align: no memory for %lld rois", (long long)R);
  for (int64_t r = 0; r < R; r++) {
    const float *q = rois + r * 5;
    double id = q[0];
    if (id != floor(id) || id >= (double)N) {
      free(box);
      return mx_err(MX_EINVAL, "roi_align: rois[%lld] has batch id %g, not one of 0..%lld",
                    (long long)r + 1, id, (long long)N - 1);
    }
    for (int k = 1; k < 5; k++)
      if (!(fabs((double)q[k] * scale) < 9e15)) {
        free(box);
        return mx_err(MX_EINVAL, "roi_align: rois[%lld] has coordinate %d = %g (scaled %g): "
                      "not a finite feature-map position", (long long)r + 1, k, (double)q[k],
                      (double)q[k] * scale);
      }
    roi_box *g = box + r;
    g->b = (int64_t)id;
    g->x1 = (double)q[1] * scale - off, g->y1 = (double)q[2] * scale - off;
    double w = (double)q[3] * scale - off - g->x1, h = (double)q[4] * scale - off - g->y1;
    if (!P->aligned) w = w > 1 ? w : 1, h = h > 1 ? h : 1;
    g->bh = h / (double)ph, g->bw = w / (double)pw;
    if (P->sample_ratio <= 0 && !(g->bh <= ROI_MAX_SAMPLES && g->bw <= ROI_MAX_SAMPLES)) {
      free(box);
      return mx_err(MX_EINVAL, "roi_align: rois[%lld] needs more than %d samples per bin side "
                    "(bins of %g x %g): give sample_ratio", (long long)r + 1, ROI_MAX_SAMPLES,
                    g->bh, g->bw);
    }
    g->gh = P->sample_ratio > 0 ? P->sample_ratio : (int64_t)ceil(g->bh);
    g->gw = P->sample_ratio > 0 ? P->sample_ratio : (int64_t)ceil(g->bw);
  }
  int64_t C = in[0]->shape[1];
  roi_job J = { mx_ptr(in[0]), mx_ptr(out[0]), box, C, in[0]->shape[2], in[0]->shape[3], ph, pw,
                P->position_sensitive ? C / (ph * pw) : C, P->position_sensitive, 0 };
  mx_parallel_for(R, 1, roi_align_rows, &J);
  free(box);
  if (atomic_load(&J.failed))
    return mx_err(MX_ENOMEM, "roi_align: no memory for the bilinear taps of %lld rois",
                  (long long)R);
  return MX_OK;
}

/* float32 data and rois (the reference takes float64) */
bool mx_cpu_roi_align_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                               int nin, const mx_desc *in, int nout, const mx_desc *out,
                               const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout, (void)out;
  if (in[0].dtype != MX_F32 || in[1].dtype != MX_F32) {
    *why = "float32 only";
    return false;
  }
  return true;
}
