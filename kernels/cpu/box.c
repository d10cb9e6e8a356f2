/* kernels/cpu/box.c — box_nms, box_iou (float32/float64) and roi_align and its backward
 * (float32). box_nms gathers each batch's valid boxes with their scores, qsorts them (the
 * position breaks ties: the reference's stable order), keeps corner boxes and areas in double
 * (the reference's arithmetic, so both keep the same boxes), and suppresses by IoU, comparing
 * boxes only within their class (grouped by id). Row positions in the params are 0-based. */
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

/* box_iou, float32 in float arithmetic (as MXNet's kernel): rhs corners and areas once, as
 * five planes the inner loop reads contiguously (it vectorises); lhs rows run in parallel */
typedef struct {
  const float *lhs;
  const float *rc; /* x1, y1, x2, y2, area planes of nr each */
  float *out;
  int64_t nr;
  bool center, nan; /* nan: some rhs corner is NaN */
} iou_job;

static void iou_corners_f32(const float *b, bool center, float *c) {
  if (center) {
    c[0] = b[0] - b[2] / 2; c[1] = b[1] - b[3] / 2; c[2] = b[0] + b[2] / 2; c[3] = b[1] + b[3] / 2;
  } else {
    c[0] = b[0]; c[1] = b[1]; c[2] = b[2]; c[3] = b[3];
  }
}

static inline float area_f32(const float *c) {
  float w = c[2] - c[0], h = c[3] - c[1];
  return w < 0 || h < 0 ? 0.0f : w * h;
}

static inline float mnf(float a, float b) { return a != a ? b : b != b ? a : a < b ? a : b; }
static inline float mxf(float a, float b) { return a != a ? b : b != b ? a : a > b ? a : b; }

static void iou_rows(int64_t begin, int64_t end, void *ctx) {
  const iou_job *J = ctx;
  int64_t nr = J->nr;
  const float *x1 = J->rc, *y1 = x1 + nr, *x2 = y1 + nr, *y2 = x2 + nr, *ar = y2 + nr;
  for (int64_t i = begin; i < end; i++) {
    float a[4];
    iou_corners_f32(J->lhs + i * 4, J->center, a);
    float aa = area_f32(a);
    float *o = J->out + i * nr;
    if (J->nan || a[0] != a[0] || a[1] != a[1] || a[2] != a[2] || a[3] != a[3]) {
      /* the reference's NaN-ignoring min and max */
      for (int64_t j = 0; j < nr; j++) {
        float w = mnf(a[2], x2[j]) - mxf(a[0], x1[j]), h = mnf(a[3], y2[j]) - mxf(a[1], y1[j]);
        float inter = w > 0 && h > 0 ? w * h : 0.0f, u = aa + ar[j] - inter;
        o[j] = u > 0 ? inter / u : 0.0f;
      }
      continue;
    }
    for (int64_t j = 0; j < nr; j++) {
      float r = a[2] < x2[j] ? a[2] : x2[j], l = a[0] > x1[j] ? a[0] : x1[j];
      float b = a[3] < y2[j] ? a[3] : y2[j], t = a[1] > y1[j] ? a[1] : y1[j];
      float w = r - l, h = b - t;
      float inter = w > 0 && h > 0 ? w * h : 0.0f, u = aa + ar[j] - inter;
      o[j] = u > 0 ? inter / u : 0.0f;
    }
  }
}

/* box_iou: lhs (L.., 4), rhs (R.., 4) -> (L.., R..) */
int mx_cpu_box_iou(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_box_iou *P = p;
  bool center = P->format == MX_BOX_IOU_FORMAT_CENTER, f64 = in[0]->dtype == MX_F64;
  int64_t nl = in[0]->size / 4, nr = in[1]->size / 4;
  if (!f64) {
    float *rc = malloc((size_t)(nr > 0 ? nr : 1) * 5 * sizeof *rc);
    if (!rc) return mx_err(MX_ENOMEM, "box_iou: no memory for %lld boxes", (long long)nr);
    const float *rhs = mx_ptr(in[1]);
    bool nan = false;
    for (int64_t j = 0; j < nr; j++) {
      float c[4];
      iou_corners_f32(rhs + j * 4, center, c);
      for (int k = 0; k < 4; k++) rc[k * nr + j] = c[k], nan = nan || c[k] != c[k];
      rc[4 * nr + j] = area_f32(c);
    }
    iou_job J = { mx_ptr(in[0]), rc, mx_ptr(out[0]), nr, center, nan };
    mx_parallel_for(nl, nr > 0 ? 1 + 16384 / nr : nl, iou_rows, &J);
    free(rc);
    return MX_OK;
  }
  double *rb = malloc((size_t)(nr > 0 ? nr : 1) * 5 * sizeof *rb);
  if (!rb) return mx_err(MX_ENOMEM, "box_iou: no memory for %lld boxes", (long long)nr);
  for (int64_t j = 0; j < nr; j++) {
    corners(mx_ptr(in[1]), f64, j * 4, center, rb + j * 5);
    rb[j * 5 + 4] = area(rb + j * 5);
  }
  double *o = mx_ptr(out[0]);
  for (int64_t i = 0; i < nl; i++) {
    double a[4];
    corners(mx_ptr(in[0]), f64, i * 4, center, a);
    double aa = area(a);
    for (int64_t j = 0; j < nr; j++) {
      const double *b = rb + j * 5;
      double w = mn(a[2], b[2]) - mx(a[0], b[0]), h = mn(a[3], b[3]) - mx(a[1], b[1]);
      double inter = w > 0 && h > 0 ? w * h : 0, u = aa + b[4] - inter;
      o[i * nr + j] = u > 0 ? inter / u : 0;
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
      k->lo = lo, k->hi = hi, k->wh = (float)(v - (double)lo);
      k->wl = (float)(1 - (v - (double)lo));
    }
}

/* the columns an axis' taps touch: *x0 and the count (0: none inside the map) */
static int64_t roi_span(const roi_tap *t, int64_t n, int64_t size, int64_t *x0) {
  int64_t lo = size, hi = -1;
  for (int64_t k = 0; k < n; k++)
    if (t[k].in) lo = t[k].lo < lo ? t[k].lo : lo, hi = t[k].hi > hi ? t[k].hi : hi;
  *x0 = lo;
  return hi >= lo ? hi - lo + 1 : 0;
}

/* Without position sensitivity a bin row's samples all read one plane, so their row taps are
 * combined first (u: the ROI's columns of the row-weighted plane, a contiguous run), then
 * each bin takes its column taps of u: 2 * gh * nx + 2 * pw * gw multiply-adds per bin row
 * instead of 4 * pw * gh * gw. */
static void roi_align_rows(int64_t begin, int64_t end, void *ctx) {
  roi_job *J = ctx;
  for (int64_t r = begin; r < end; r++) {
    const roi_box *g = J->box + r;
    float *o = J->out + r * J->cout * J->ph * J->pw;
    int64_t nh = J->ph * g->gh, nw = J->pw * g->gw;
    if (g->b < 0) {
      memset(o, 0, sizeof(float) * (size_t)(J->cout * J->ph * J->pw));
      continue;
    }
    /* the taps, then W floats of u (in tap-sized slots) */
    int64_t need = nh + nw + (J->W * (int64_t)sizeof(float)) / (int64_t)sizeof(roi_tap) + 1;
    roi_tap stack[512], *ty = need <= 512 ? stack : malloc(sizeof *ty * (size_t)need);
    if (!ty) {
      atomic_store(&J->failed, 1);
      return;
    }
    roi_tap *tx = ty + nh;
    float *u = (float *)(tx + nw);
    roi_taps(g->y1, g->bh, J->ph, g->gh, J->H, ty);
    roi_taps(g->x1, g->bw, J->pw, g->gw, J->W, tx);
    int64_t x0, nx = roi_span(tx, nw, J->W, &x0);
    float inv = 1.0f / (float)(g->gh * g->gw > 0 ? g->gh * g->gw : 1);
    for (int64_t c = 0; c < J->cout; c++)
      for (int64_t i = 0; i < J->ph; i++) {
        if (!J->psr) {
          const float *pl = J->data + (g->b * J->C + c) * J->H * J->W + x0;
          for (int64_t x = 0; x < nx; x++) u[x] = 0;
          for (int64_t iy = 0; iy < g->gh; iy++) {
            const roi_tap *y = ty + i * g->gh + iy;
            if (!y->in) continue;
            const float *rl = pl + y->lo * J->W, *rh = pl + y->hi * J->W;
            float wl = y->wl, wh = y->wh;
            for (int64_t x = 0; x < nx; x++) u[x] += wl * rl[x] + wh * rh[x];
          }
          for (int64_t j = 0; j < J->pw; j++) {
            float sum = 0;
            for (int64_t ix = 0; ix < g->gw; ix++) {
              const roi_tap *x = tx + j * g->gw + ix;
              if (x->in) sum += x->wl * u[x->lo - x0] + x->wh * u[x->hi - x0];
            }
            o[(c * J->ph + i) * J->pw + j] = sum * inv;
          }
          continue;
        }
        for (int64_t j = 0; j < J->pw; j++) {
          int64_t cin = (c * J->ph + i) * J->pw + j;
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
      }
    if (ty != stack) free(ty);
  }
}

/* each ROI's geometry (MXNet's ROIAlign) into box (R entries), or an error naming op */
static int roi_boxes(const char *op, const float *rois, int64_t R, int64_t N, int64_t ph,
                     int64_t pw, double scale, bool aligned, int64_t ratio, roi_box *box) {
  double off = aligned ? 0.5 : 0;
  for (int64_t r = 0; r < R; r++) {
    const float *q = rois + r * 5;
    double id = q[0];
    if (id != floor(id) || id >= (double)N)
      return mx_err(MX_EINVAL, "%s: rois[%lld] has batch id %g, not one of 0..%lld", op,
                    (long long)r + 1, id, (long long)N - 1);
    for (int k = 1; k < 5; k++)
      if (!(fabs((double)q[k] * scale) < 9e15))
        return mx_err(MX_EINVAL, "%s: rois[%lld] has coordinate %d = %g (scaled %g): "
                      "not a finite feature-map position", op, (long long)r + 1, k,
                      (double)q[k], (double)q[k] * scale);
    roi_box *g = box + r;
    g->b = (int64_t)id;
    g->x1 = (double)q[1] * scale - off, g->y1 = (double)q[2] * scale - off;
    double w = (double)q[3] * scale - off - g->x1, h = (double)q[4] * scale - off - g->y1;
    if (!aligned) w = w > 1 ? w : 1, h = h > 1 ? h : 1;
    g->bh = h / (double)ph, g->bw = w / (double)pw;
    if (ratio <= 0 && !(g->bh <= ROI_MAX_SAMPLES && g->bw <= ROI_MAX_SAMPLES))
      return mx_err(MX_EINVAL, "%s: rois[%lld] needs more than %d samples per bin side "
                    "(bins of %g x %g): give sample_ratio", op, (long long)r + 1,
                    ROI_MAX_SAMPLES, g->bh, g->bw);
    g->gh = ratio > 0 ? ratio : (int64_t)ceil(g->bh);
    g->gw = ratio > 0 ? ratio : (int64_t)ceil(g->bw);
  }
  return MX_OK;
}

int mx_cpu_roi_align(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_roi_align *P = p;
  int64_t R = in[1]->shape[0], C = in[0]->shape[1];
  int64_t ph = P->pooled_size.v[0], pw = P->pooled_size.v[1];
  roi_box *box = malloc(sizeof *box * (size_t)(R > 0 ? R : 1));
  if (!box) return mx_err(MX_ENOMEM, "roi_align: no memory for %lld rois", (long long)R);
  int rc = roi_boxes("roi_align", mx_ptr(in[1]), R, in[0]->shape[0], ph, pw, P->spatial_scale,
                     P->aligned, P->sample_ratio, box);
  if (rc) {
    free(box);
    return rc;
  }
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

/* roi_align_backward, float32: ograd (R, Cout, ph, pw), data (N, C, H, W) read for its shape,
 * rois (R, 5) -> ddata (N, C, H, W). Each ROI's taps are worked out once (serially: a few
 * hundred ROIs), then the data-gradient planes (image, channel) run in parallel: a plane's
 * worker zeroes it and scatters into it from every ROI of its image, so no two threads write
 * one element. A sample's weight is its row tap's times its column tap's, so an ROI's share of
 * a plane is Wy' G Wx (G its ph x pw bins' ograd / samples, Wy (ph, H) and Wx (pw, W) the
 * summed taps of each bin row and column): G Wx first, a ph x (the ROI's columns) block, then
 * each bin row's taps add its row of that block to two plane rows, contiguous runs instead
 * of 16 scattered adds per bin. Position-sensitive: channel cin is bin (i, j) =
 * cin % (ph * pw) of output channel cin / (ph * pw) only, scattered directly. */
typedef struct {
  const float *og;
  float *dd;
  const roi_box *box;
  const roi_tap *taps;   /* per ROI: ph * gh row taps, then pw * gw column taps */
  const int64_t *first;  /* ROI r's taps start at taps + first[r] */
  const int64_t *xlo;    /* ROI r's columns: xlo[r] .. xlo[r] + nx[r] - 1 */
  const int64_t *nx;
  const int64_t *order;  /* the ROIs of image b: order[start[b] .. start[b + 1]) */
  const int64_t *start;
  int64_t C, H, W, ph, pw, cout, maxnx;
  bool psr;
  atomic_int failed; /* a worker found no memory for its block */
} roi_grad_job;

/* one bin's ograd g (already divided by the sample count) spread over its samples' taps */
static void roi_scatter(float *pl, int64_t W, const roi_tap *ty, int64_t gh, const roi_tap *tx,
                        int64_t gw, float g) {
  for (int64_t iy = 0; iy < gh; iy++) {
    const roi_tap *y = ty + iy;
    if (!y->in) continue;
    float *rl = pl + y->lo * W, *rh = pl + y->hi * W, gl = g * y->wl, gu = g * y->wh;
    for (int64_t ix = 0; ix < gw; ix++) {
      const roi_tap *x = tx + ix;
      if (!x->in) continue;
      rl[x->lo] += gl * x->wl;
      rl[x->hi] += gl * x->wh;
      rh[x->lo] += gu * x->wl;
      rh[x->hi] += gu * x->wh;
    }
  }
}

/* an ROI's share of one plane through the ph x nx block t (G Wx, columns from x0) */
static void roi_grad_block(const roi_grad_job *J, const roi_box *g, const roi_tap *ty,
                           const roi_tap *tx, int64_t x0, int64_t nx, const float *go,
                           float inv, float *t, float *pl) {
  int64_t ph = J->ph, pw = J->pw;
  memset(t, 0, sizeof(float) * (size_t)(ph * nx));
  bool any = false;
  for (int64_t i = 0; i < ph; i++) {
    float *ti = t + i * nx;
    for (int64_t j = 0; j < pw; j++) {
      float v = go[i * pw + j] * inv;
      if (v == 0) continue;
      any = true;
      for (int64_t ix = 0; ix < g->gw; ix++) {
        const roi_tap *x = tx + j * g->gw + ix;
        if (!x->in) continue;
        ti[x->lo - x0] += v * x->wl;
        ti[x->hi - x0] += v * x->wh;
      }
    }
  }
  if (!any) return;
  for (int64_t i = 0; i < ph; i++) {
    const float *ti = t + i * nx;
    for (int64_t iy = 0; iy < g->gh; iy++) {
      const roi_tap *y = ty + i * g->gh + iy;
      if (!y->in) continue;
      float *rl = pl + y->lo * J->W + x0, *rh = pl + y->hi * J->W + x0, wl = y->wl, wh = y->wh;
      for (int64_t x = 0; x < nx; x++) rl[x] += wl * ti[x];
      for (int64_t x = 0; x < nx; x++) rh[x] += wh * ti[x];
    }
  }
}

static void roi_grad_planes(int64_t begin, int64_t end, void *ctx) {
  roi_grad_job *J = ctx;
  int64_t bins = J->ph * J->pw;
  float *t = J->psr ? NULL : malloc(sizeof(float) * (size_t)(J->ph * J->maxnx + 1));
  if (!J->psr && !t) {
    atomic_store(&J->failed, 1);
    return;
  }
  for (int64_t plane = begin; plane < end; plane++) {
    int64_t b = plane / J->C, cin = plane % J->C;
    float *pl = J->dd + plane * J->H * J->W;
    memset(pl, 0, sizeof(float) * (size_t)(J->H * J->W));
    int64_t c = J->psr ? cin / bins : cin, i = cin % bins / J->pw, j = cin % bins % J->pw;
    for (int64_t k = J->start[b]; k < J->start[b + 1]; k++) {
      int64_t r = J->order[k];
      const roi_box *g = J->box + r;
      const roi_tap *ty = J->taps + J->first[r], *tx = ty + J->ph * g->gh;
      const float *go = J->og + (r * J->cout + c) * bins;
      float inv = 1.0f / (float)(g->gh * g->gw > 0 ? g->gh * g->gw : 1);
      if (!J->psr) {
        if (J->nx[r] > 0) roi_grad_block(J, g, ty, tx, J->xlo[r], J->nx[r], go, inv, t, pl);
      } else if (go[i * J->pw + j] != 0) {
        roi_scatter(pl, J->W, ty + i * g->gh, g->gh, tx + j * g->gw, g->gw,
                    go[i * J->pw + j] * inv);
      }
    }
  }
  free(t);
}

int mx_cpu_roi_align_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_roi_align_backward *P = p;
  int64_t R = in[2]->shape[0], N = in[1]->shape[0], C = in[1]->shape[1];
  int64_t H = in[1]->shape[2], W = in[1]->shape[3];
  int64_t ph = P->pooled_size.v[0], pw = P->pooled_size.v[1];
  size_t nr = (size_t)(R > 0 ? R : 1);
  roi_box *box = malloc(sizeof *box * nr);
  int64_t *first = malloc(sizeof *first * nr * 4), *order = first + nr, *xlo = order + nr;
  int64_t *nx = xlo + nr, maxnx = 0;
  int64_t *start = calloc((size_t)N + 2, sizeof *start);
  roi_tap *taps = NULL;
  int rc = MX_OK;
  if (!box || !first || !start) {
    rc = mx_err(MX_ENOMEM, "roi_align_backward: no memory for %lld rois", (long long)R);
    goto done;
  }
  rc = roi_boxes("roi_align_backward", mx_ptr(in[2]), R, N, ph, pw, P->spatial_scale,
                 P->aligned, P->sample_ratio, box);
  if (rc) goto done;
  int64_t ntaps = 0;
  for (int64_t r = 0; r < R; r++) {
    first[r] = ntaps;
    if (box[r].b >= 0) ntaps += ph * box[r].gh + pw * box[r].gw, start[box[r].b + 2]++;
  }
  taps = malloc(sizeof *taps * (size_t)(ntaps > 0 ? ntaps : 1));
  if (!taps) {
    rc = mx_err(MX_ENOMEM, "roi_align_backward: no memory for the bilinear taps of %lld rois",
                (long long)R);
    goto done;
  }
  /* counting sort of the ROIs by image, in ROI order within an image (the reference's
   * summation order) */
  for (int64_t b = 0; b < N; b++) start[b + 2] += start[b + 1];
  for (int64_t r = 0; r < R; r++) {
    const roi_box *g = box + r;
    if (g->b < 0) continue;
    order[start[g->b + 1]++] = r;
    roi_tap *tx = taps + first[r] + ph * g->gh;
    roi_taps(g->y1, g->bh, ph, g->gh, H, taps + first[r]);
    roi_taps(g->x1, g->bw, pw, g->gw, W, tx);
    nx[r] = roi_span(tx, pw * g->gw, W, xlo + r);
    maxnx = nx[r] > maxnx ? nx[r] : maxnx;
  }
  roi_grad_job J = { mx_ptr(in[0]), mx_ptr(out[0]), box, taps, first, xlo, nx, order, start,
                     C, H, W, ph, pw, P->position_sensitive ? C / (ph * pw) : C, maxnx,
                     P->position_sensitive, 0 };
  mx_parallel_for(N * C, 1, roi_grad_planes, &J);
  if (atomic_load(&J.failed))
    rc = mx_err(MX_ENOMEM, "roi_align_backward: no memory for a %lld x %lld block",
                (long long)ph, (long long)maxnx);
done:
  free(box), free(first), free(start), free(taps);
  return rc;
}

/* float32 ograd, data and rois (the reference takes float64) */
bool mx_cpu_roi_align_backward_supports(const mx_op_def *def, const void *params,
                                        const mx_op_info *info, int nin, const mx_desc *in,
                                        int nout, const mx_desc *out, const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout, (void)out;
  if (in[0].dtype != MX_F32 || in[1].dtype != MX_F32 || in[2].dtype != MX_F32) {
    *why = "float32 only";
    return false;
  }
  return true;
}
