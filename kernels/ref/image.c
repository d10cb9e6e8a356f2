/* kernels/ref/image.c — reference to_tensor: data (N, H, W, C) (N = 1 for a 3-d
 * image), uint8 or float32, row-major; out (N, C, H, W) float32,
 * out[n, c, h, w] = data[n, h, w, c] / 255 computed in double and rounded once. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>

int mx_ref_to_tensor(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0];
  int n = x->ndim;
  int64_t N = n == 4 ? x->shape[0] : 1, H = x->shape[n - 3], W = x->shape[n - 2],
          Cc = x->shape[n - 1];
  float *o = mx_ptr(out[0]);
  for (int64_t b = 0; b < N; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++)
        for (int64_t c = 0; c < Cc; c++) {
          int64_t src = ((b * H + h) * W + w) * Cc + c, dst = ((b * Cc + c) * H + h) * W + w;
          o[dst] = (float)(mx_load_f64(mx_ptr(x), x->dtype, src) / 255.0);
        }
  return MX_OK;
}

/* ---- imresize, copy_make_border, colour ops, imrotate ----
 * Plain double arithmetic on (N, H, W, C) (N = 1 for a 3-d image); uint8 results are
 * rounded to nearest (ties to even, OpenCV's cvRound) and saturated, float32 ones are
 * not clamped. */

static void img_dims(const mx_tensor *x, int64_t *N, int64_t *H, int64_t *W, int64_t *C) {
  int n = x->ndim;
  *N = n == 4 ? x->shape[0] : 1;
  *H = x->shape[n - 3];
  *W = x->shape[n - 2];
  *C = x->shape[n - 1];
}

static void img_store(mx_tensor *o, int64_t i, double v) {
  if (o->dtype == MX_U8) {
    v = rint(v);
    v = v < 0 ? 0 : v > 255 ? 255 : v;
  }
  mx_store_f64(mx_ptr(o), o->dtype, i, v);
}

/* MXNet's interp codes are OpenCV's */
enum { NEAREST = 0, LINEAR = 1, CUBIC = 2, AREA = 3 };

/* One axis of a resize: output index d reads n[d] source indices from s[d * K + k] with
 * weights w[d * K + k]. OpenCV's coordinate rules per interpolation (see image.lua). */
typedef struct {
  int64_t K, *s, *n;
  double *w;
} taps;

static int64_t clampi(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

static int taps_make(taps *t, int64_t src, int64_t dst, int interp, int area_down) {
  double scale = (double)src / (double)dst, inv = (double)dst / (double)src;
  t->K = interp == CUBIC ? 4 : interp == AREA && area_down ? (int64_t)ceil(scale) + 2 : 2;
  if (interp == NEAREST) t->K = 1;
  t->s = malloc(sizeof(int64_t) * (size_t)(dst * t->K));
  t->n = malloc(sizeof(int64_t) * (size_t)dst);
  t->w = malloc(sizeof(double) * (size_t)(dst * t->K));
  if (!t->s || !t->n || !t->w) return MX_ENOMEM;
  for (int64_t d = 0; d < dst; d++) {
    int64_t *s = t->s + d * t->K;
    double *w = t->w + d * t->K;
    if (interp == NEAREST) { /* resizeNN: floor(d / inv) */
      s[0] = clampi((int64_t)floor((double)d * (1.0 / inv)), src);
      w[0] = 1;
      t->n[d] = 1;
    } else if (interp == AREA && area_down) { /* computeResizeAreaTab */
      double f1 = (double)d * scale, f2 = f1 + scale, cell = fmin(scale, (double)src - f1);
      int64_t s1 = (int64_t)ceil(f1), s2 = (int64_t)floor(f2), k = 0;
      if (s2 > src - 1) s2 = src - 1;
      if (s1 > s2) s1 = s2;
      if ((double)s1 - f1 > 1e-3) { s[k] = s1 - 1; w[k++] = ((double)s1 - f1) / cell; }
      for (int64_t i = s1; i < s2; i++) { s[k] = i; w[k++] = 1.0 / cell; }
      if (f2 - (double)s2 > 1e-3) { s[k] = s2; w[k++] = fmin(fmin(f2 - (double)s2, 1.0), cell) / cell; }
      t->n[d] = k;
    } else {
      double f;
      int64_t sx;
      if (interp == AREA) { /* INTER_AREA when enlarging: OpenCV's area_mode linear weights */
        sx = (int64_t)floor((double)d * scale);
        f = (double)(float)((double)(d + 1) - (double)(sx + 1) * inv);
        f = f <= 0 ? 0 : f - floor(f);
      } else {
        f = ((double)d + 0.5) * scale - 0.5;
        sx = (int64_t)floor(f);
        f -= (double)sx;
      }
      if (interp == CUBIC) {
        const double A = -0.75;
        w[0] = ((A * (f + 1) - 5 * A) * (f + 1) + 8 * A) * (f + 1) - 4 * A;
        w[1] = ((A + 2) * f - (A + 3)) * f * f + 1;
        w[2] = ((A + 2) * (1 - f) - (A + 3)) * (1 - f) * (1 - f) + 1;
        w[3] = 1 - w[0] - w[1] - w[2];
        for (int k = 0; k < 4; k++) s[k] = clampi(sx - 1 + k, src);
        t->n[d] = 4;
      } else {
        if (interp == AREA && sx >= src - 1) { sx = src - 1; f = 0; }
        s[0] = clampi(sx, src);
        s[1] = clampi(sx + 1, src);
        w[0] = 1 - f;
        w[1] = f;
        t->n[d] = 2;
      }
    }
  }
  return MX_OK;
}

static void taps_free(taps *t) { free(t->s); free(t->n); free(t->w); }

int mx_ref_imresize(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  const struct mx_params_imresize *P = p;
  const mx_tensor *x = in[0];
  int64_t N, H, W, C;
  img_dims(x, &N, &H, &W, &C);
  int64_t h = P->h, w = P->w;
  int interp = (int)P->interp;
  /* OpenCV uses the box (area) tables only when neither axis is enlarged */
  int area_down = interp == AREA && H >= h && W >= w;
  taps tx = { 0 }, ty = { 0 };
  double *tmp = malloc(sizeof(double) * (size_t)(H * w * C + 1));
  int rc = tmp ? MX_OK : MX_ENOMEM;
  if (!rc) rc = taps_make(&tx, W, w, interp, area_down);
  if (!rc) rc = taps_make(&ty, H, h, interp, area_down);
  if (rc) {
    free(tmp); taps_free(&tx); taps_free(&ty);
    return mx_err(MX_ENOMEM, "imresize: out of memory");
  }
  for (int64_t b = 0; b < N; b++) {
    for (int64_t y = 0; y < H; y++) /* horizontal pass */
      for (int64_t d = 0; d < w; d++)
        for (int64_t c = 0; c < C; c++) {
          double acc = 0;
          for (int64_t k = 0; k < tx.n[d]; k++)
            acc += tx.w[d * tx.K + k] *
                   mx_load_f64(mx_ptr(x), x->dtype, ((b * H + y) * W + tx.s[d * tx.K + k]) * C + c);
          tmp[(y * w + d) * C + c] = acc;
        }
    for (int64_t d = 0; d < h; d++) /* vertical pass */
      for (int64_t xx = 0; xx < w; xx++)
        for (int64_t c = 0; c < C; c++) {
          double acc = 0;
          for (int64_t k = 0; k < ty.n[d]; k++)
            acc += ty.w[d * ty.K + k] * tmp[(ty.s[d * ty.K + k] * w + xx) * C + c];
          img_store(out[0], ((b * h + d) * w + xx) * C + c, acc);
        }
  }
  free(tmp); taps_free(&tx); taps_free(&ty);
  return MX_OK;
}

/* OpenCV's borderInterpolate; -1 for the constant border */
static int64_t border_index(int64_t p, int64_t len, int type) {
  if (p >= 0 && p < len) return p;
  if (type == 0) return -1;
  if (type == 1) return p < 0 ? 0 : len - 1;
  if (type == 3) {
    p %= len;
    return p < 0 ? p + len : p;
  }
  if (len == 1) return 0;
  int64_t delta = type == 4;
  do {
    if (p < 0) p = -p - 1 + delta;
    else p = len - 1 - (p - len) - delta;
  } while (p < 0 || p >= len);
  return p;
}

int mx_ref_copy_make_border(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  const struct mx_params_copy_make_border *P = p;
  const mx_tensor *x = in[0];
  int64_t N, H, W, C;
  img_dims(x, &N, &H, &W, &C);
  int64_t oh = H + P->top + P->bot, ow = W + P->left + P->right;
  int type = (int)P->type;
  for (int64_t b = 0; b < N; b++)
    for (int64_t y = 0; y < oh; y++)
      for (int64_t xx = 0; xx < ow; xx++) {
        int64_t sy = border_index(y - P->top, H, type), sx = border_index(xx - P->left, W, type);
        for (int64_t c = 0; c < C; c++) {
          double v = sy < 0 || sx < 0 ? P->value
                                      : mx_load_f64(mx_ptr(x), x->dtype, ((b * H + sy) * W + sx) * C + c);
          img_store(out[0], ((b * oh + y) * ow + xx) * C + c, v);
        }
      }
  return MX_OK;
}

/* the colour ops: kind 0 brightness, 1 contrast, 2 saturation, 3 hue, 4 lighting, 5 gray */
static const double GRAY[3] = { 0.299, 0.587, 0.114 };

static int colour(const mx_tensor *x, mx_tensor *o, int kind, const double *a) {
  int64_t N, H, W, C;
  img_dims(x, &N, &H, &W, &C);
  double M[3][3] = { { 0 } }, add[3] = { 0 };
  if (kind == 3) { /* MXNet's HueJitterAug: ityiq * bt * tyiq */
    static const double tyiq[3][3] = { { 0.299, 0.587, 0.114 }, { 0.596, -0.274, -0.321 },
                                       { 0.211, -0.523, 0.311 } };
    static const double ityiq[3][3] = { { 1.0, 0.956, 0.621 }, { 1.0, -0.272, -0.647 },
                                        { 1.0, -1.107, 1.705 } };
    double u = cos(a[0] * M_PI), w = sin(a[0] * M_PI);
    double bt[3][3] = { { 1, 0, 0 }, { 0, u, -w }, { 0, w, u } }, t1[3][3];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        t1[i][j] = 0;
        for (int k = 0; k < 3; k++) t1[i][j] += ityiq[i][k] * bt[k][j];
      }
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        for (int k = 0; k < 3; k++) M[i][j] += t1[i][k] * tyiq[k][j];
  }
  if (kind == 4) { /* MXNet's LightingAug: eigvec * (alpha .* eigval) */
    static const double eigval[3] = { 55.46, 4.794, 1.148 };
    static const double eigvec[3][3] = { { -0.5675, 0.7192, 0.4009 }, { -0.5808, -0.0045, -0.8140 },
                                         { -0.5836, -0.6948, 0.4203 } };
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) add[i] += eigvec[i][j] * a[j] * eigval[j];
  }
  const void *px = mx_ptr(x);
  int dt = x->dtype;
  for (int64_t b = 0; b < N; b++) {
    int64_t base = b * H * W * C;
    double mean = 0;
    if (kind == 1) {
      for (int64_t i = 0; i < H * W; i++)
        for (int c = 0; c < 3; c++) mean += GRAY[c] * mx_load_f64(px, dt, base + i * 3 + c);
      mean = H > 0 && W > 0 ? mean / (double)(H * W) : 0;
    }
    for (int64_t i = 0; i < H * W; i++) {
      if (kind == 0) {
        for (int64_t c = 0; c < C; c++)
          img_store(o, base + i * C + c, mx_load_f64(px, dt, base + i * C + c) * a[0]);
        continue;
      }
      double v[3], r[3], g = 0;
      for (int c = 0; c < 3; c++) {
        v[c] = mx_load_f64(px, dt, base + i * 3 + c);
        g += GRAY[c] * v[c];
      }
      for (int c = 0; c < 3; c++) {
        switch (kind) {
        case 1: r[c] = v[c] * a[0] + (1 - a[0]) * mean; break;
        case 2: r[c] = v[c] * a[0] + (1 - a[0]) * g; break;
        case 3: r[c] = M[c][0] * v[0] + M[c][1] * v[1] + M[c][2] * v[2]; break;
        case 4: r[c] = v[c] + add[c]; break;
        default: r[c] = g; break;
        }
        img_store(o, base + i * 3 + c, r[c]);
      }
    }
  }
  return MX_OK;
}

int mx_ref_adjust_brightness(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  double a = ((const struct mx_params_adjust_brightness *)p)->alpha;
  return colour(in[0], out[0], 0, &a);
}
int mx_ref_adjust_contrast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  double a = ((const struct mx_params_adjust_contrast *)p)->alpha;
  return colour(in[0], out[0], 1, &a);
}
int mx_ref_adjust_saturation(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  double a = ((const struct mx_params_adjust_saturation *)p)->alpha;
  return colour(in[0], out[0], 2, &a);
}
int mx_ref_adjust_hue(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  double a = ((const struct mx_params_adjust_hue *)p)->alpha;
  return colour(in[0], out[0], 3, &a);
}
int mx_ref_adjust_lighting(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  const struct mx_params_adjust_lighting *P = p;
  double a[3] = { P->alpha_r, P->alpha_g, P->alpha_b };
  return colour(in[0], out[0], 4, a);
}
int mx_ref_to_gray(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  double a = 0;
  return colour(in[0], out[0], 5, &a);
}

int mx_ref_imrotate(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  const mx_tensor *x = in[0];
  int64_t N, H, W, C;
  img_dims(x, &N, &H, &W, &C);
  double rad = ((const struct mx_params_imrotate *)p)->angle * M_PI / 180.0;
  double cs = cos(rad), sn = sin(rad), cx = (double)(W - 1) / 2, cy = (double)(H - 1) / 2;
  for (int64_t b = 0; b < N; b++)
    for (int64_t y = 0; y < H; y++)
      for (int64_t xx = 0; xx < W; xx++) {
        double dx = (double)xx - cx, dy = (double)y - cy;
        double sx = cx + dx * cs - dy * sn, sy = cy + dx * sn + dy * cs;
        int64_t x0 = (int64_t)floor(sx), y0 = (int64_t)floor(sy);
        double fx = sx - (double)x0, fy = sy - (double)y0;
        for (int64_t c = 0; c < C; c++) {
          double acc = 0;
          for (int j = 0; j < 2; j++)
            for (int i = 0; i < 2; i++) {
              int64_t u = x0 + i, v = y0 + j;
              if (u < 0 || u >= W || v < 0 || v >= H) continue;
              acc += (i ? fx : 1 - fx) * (j ? fy : 1 - fy) *
                     mx_load_f64(mx_ptr(x), x->dtype, ((b * H + v) * W + u) * C + c);
            }
          img_store(out[0], ((b * H + y) * W + xx) * C + c, acc);
        }
      }
  return MX_OK;
}
