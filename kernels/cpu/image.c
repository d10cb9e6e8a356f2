/* kernels/cpu/image.c — to_tensor: data (N, H, W, C) uint8 or float32 (N = 1 for a
 * 3-d image); out (N, C, H, W) float32 = data / 255, bit for bit the ref kernel's
 * value (the float nearest v / 255). float32 data: a float division (rounding a
 * double quotient of floats to float gives the same). uint8 data: v * (1/255) plus
 * one FMA correction step, exact for all 256 values (spec/image_spec.lua checks each)
 * and divider-free: vdivps made the 64-image 28x28 batch take 8.4 us. One channel is
 * a straight vector loop (no transpose); more channels go pixel by pixel. Images
 * split over the intra-op pool. */
#include "mx_ops_gen.h"
#include "internal.h"

#include <math.h>

static inline float u8_div255(uint8_t u) {
  const float r = 1.0f / 255.0f;
  float v = (float)u, q = v * r;
  return fmaf(fmaf(-q, 255.0f, v), r, q);
}

typedef struct {
  const void *x;
  float *o;
  int64_t H, W, C;
  bool u8;
} job;

#define GRAIN 65536 /* elements per thread: the pass is memory-bound */

static void one_channel(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  float *restrict o = j->o;
  if (j->u8) {
    const uint8_t *restrict x = j->x;
#pragma omp simd
    for (int64_t i = b; i < e; i++) o[i] = u8_div255(x[i]);
  } else {
    const float *restrict x = j->x;
#pragma omp simd
    for (int64_t i = b; i < e; i++) o[i] = x[i] / 255.0f;
  }
}

/* [b, e) ranges over images (N) */
static void channels(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  int64_t hw = j->H * j->W, C = j->C;
  for (int64_t n = b; n < e; n++) {
    float *o = j->o + n * hw * C;
    for (int64_t px = 0; px < hw; px++)
      for (int64_t c = 0; c < C; c++) {
        int64_t s = (n * hw + px) * C + c;
        o[c * hw + px] = j->u8 ? u8_div255(((const uint8_t *)j->x)[s])
                               : ((const float *)j->x)[s] / 255.0f;
      }
  }
}

int mx_cpu_to_tensor(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0];
  int n = x->ndim;
  job j = {mx_ptr(x), mx_ptr(out[0]), x->shape[n - 3], x->shape[n - 2], x->shape[n - 1],
           x->dtype == MX_U8};
  if (j.C == 1) {
    mx_parallel_for(x->size, GRAIN, one_channel, &j);
  } else {
    int64_t N = n == 4 ? x->shape[0] : 1, per = j.H * j.W * j.C;
    mx_parallel_for(N, per ? GRAIN / per + 1 : 1, channels, &j);
  }
  return MX_OK;
}

/* ---- issue 15: imresize ----
 * Separable resize with OpenCV's coordinate rules (the ref kernel's doc; its tables are
 * rebuilt here in float, as OpenCV's are). Per output row: the vertical taps first
 * (rows of W * C floats), then the horizontal ones; uint8 results round to nearest and
 * saturate. Output rows split over the intra-op pool. */
#include <stdatomic.h>
#include <stdlib.h>

enum { RS_NEAREST = 0, RS_LINEAR = 1, RS_CUBIC = 2, RS_AREA = 3 };

typedef struct {
  int32_t *off; /* dst + 1 offsets into idx / wt */
  int32_t *idx;
  float *wt;
} rs_axis;

static int64_t rs_clamp(int64_t v, int64_t n) { return v < 0 ? 0 : v >= n ? n - 1 : v; }

static int rs_axis_make(rs_axis *a, int64_t src, int64_t dst, int interp, int area_down) {
  double scale = (double)src / (double)dst, inv = (double)dst / (double)src;
  int64_t K = interp == RS_NEAREST ? 1 : interp == RS_CUBIC ? 4
            : interp == RS_AREA && area_down ? (int64_t)ceil(scale) + 2 : 2;
  a->off = malloc(sizeof(int32_t) * (size_t)(dst + 1));
  a->idx = malloc(sizeof(int32_t) * (size_t)(dst * K));
  a->wt = malloc(sizeof(float) * (size_t)(dst * K));
  if (!a->off || !a->idx || !a->wt) return -1;
  int32_t n = 0;
  for (int64_t d = 0; d < dst; d++) {
    a->off[d] = n;
    if (interp == RS_NEAREST) {
      a->idx[n] = (int32_t)rs_clamp((int64_t)floor((double)d * (1.0 / inv)), src);
      a->wt[n++] = 1;
    } else if (interp == RS_AREA && area_down) {
      double f1 = (double)d * scale, f2 = f1 + scale, cell = fmin(scale, (double)src - f1);
      int64_t s1 = (int64_t)ceil(f1), s2 = (int64_t)floor(f2);
      if (s2 > src - 1) s2 = src - 1;
      if (s1 > s2) s1 = s2;
      if ((double)s1 - f1 > 1e-3) {
        a->idx[n] = (int32_t)(s1 - 1);
        a->wt[n++] = (float)(((double)s1 - f1) / cell);
      }
      for (int64_t i = s1; i < s2; i++) {
        a->idx[n] = (int32_t)i;
        a->wt[n++] = (float)(1.0 / cell);
      }
      if (f2 - (double)s2 > 1e-3) {
        a->idx[n] = (int32_t)s2;
        a->wt[n++] = (float)(fmin(fmin(f2 - (double)s2, 1.0), cell) / cell);
      }
    } else {
      double f;
      int64_t sx;
      if (interp == RS_AREA) {
        sx = (int64_t)floor((double)d * scale);
        f = (double)(float)((double)(d + 1) - (double)(sx + 1) * inv);
        f = f <= 0 ? 0 : f - floor(f);
        if (sx >= src - 1) { sx = src - 1; f = 0; }
      } else {
        f = ((double)d + 0.5) * scale - 0.5;
        sx = (int64_t)floor(f);
        f -= (double)sx;
      }
      if (interp == RS_CUBIC) {
        const double A = -0.75;
        double c0 = ((A * (f + 1) - 5 * A) * (f + 1) + 8 * A) * (f + 1) - 4 * A,
               c1 = ((A + 2) * f - (A + 3)) * f * f + 1,
               c2 = ((A + 2) * (1 - f) - (A + 3)) * (1 - f) * (1 - f) + 1;
        double c[4] = { c0, c1, c2, 1 - c0 - c1 - c2 };
        for (int k = 0; k < 4; k++) {
          a->idx[n] = (int32_t)rs_clamp(sx - 1 + k, src);
          a->wt[n++] = (float)c[k];
        }
      } else {
        a->idx[n] = (int32_t)rs_clamp(sx, src);
        a->wt[n++] = (float)(1 - f);
        a->idx[n] = (int32_t)rs_clamp(sx + 1, src);
        a->wt[n++] = (float)f;
      }
    }
  }
  a->off[dst] = n;
  return 0;
}

static void rs_axis_free(rs_axis *a) { free(a->off); free(a->idx); free(a->wt); }

typedef struct {
  const void *x;
  void *o;
  int64_t H, W, C, h, w;
  bool u8;
  rs_axis ax, ay;
  int kx; /* taps per output column when fixed, else 0 (area when shrinking) */
  atomic_int failed; /* a worker's row buffer could not be allocated */
} rs_job;

/* [b, e) ranges over output rows of all images (N * h) */
static void rs_rows(int64_t b, int64_t e, void *ctx) {
  rs_job *j = ctx;
  int64_t WC = j->W * j->C, C = j->C;
  float *row = malloc(sizeof(float) * (size_t)(WC + j->w * C + 1));
  if (!row) {
    atomic_store(&j->failed, 1);
    return;
  }
  for (int64_t r = b; r < e; r++) {
    int64_t n = r / j->h, d = r % j->h;
    for (int64_t i = 0; i < WC; i++) row[i] = 0;
    for (int32_t k = j->ay.off[d]; k < j->ay.off[d + 1]; k++) {
      float wgt = j->ay.wt[k];
      int64_t base = (n * j->H + j->ay.idx[k]) * WC;
      if (j->u8) {
        const uint8_t *restrict s = (const uint8_t *)j->x + base;
#pragma omp simd
        for (int64_t i = 0; i < WC; i++) row[i] += wgt * (float)s[i];
      } else {
        const float *restrict s = (const float *)j->x + base;
#pragma omp simd
        for (int64_t i = 0; i < WC; i++) row[i] += wgt * s[i];
      }
    }
    int64_t ob = (n * j->h + d) * j->w * C;
    float *acc = row + WC; /* one output row of floats, then stored */
    if (j->kx > 0) { /* a fixed tap count (nearest 1, linear 2, cubic 4): no offset table */
      const int kx = j->kx;
      for (int64_t xx = 0; xx < j->w; xx++) {
        const int32_t *ix = j->ax.idx + xx * kx;
        const float *wx = j->ax.wt + xx * kx;
        for (int64_t c = 0; c < C; c++) {
          float a = 0;
          for (int k = 0; k < kx; k++) a += wx[k] * row[(int64_t)ix[k] * C + c];
          acc[xx * C + c] = a;
        }
      }
    } else {
      for (int64_t xx = 0; xx < j->w; xx++)
        for (int64_t c = 0; c < C; c++) {
          float a = 0;
          for (int32_t k = j->ax.off[xx]; k < j->ax.off[xx + 1]; k++)
            a += j->ax.wt[k] * row[(int64_t)j->ax.idx[k] * C + c];
          acc[xx * C + c] = a;
        }
    }
    int64_t wC = j->w * C;
    if (j->u8) {
      uint8_t *restrict o = (uint8_t *)j->o + ob;
#pragma omp simd
      for (int64_t i = 0; i < wC; i++) {
        float v = acc[i] + 0.5f; /* round half up: ties differ from rint only at exact .5 */
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        o[i] = (uint8_t)v;
      }
    } else {
      float *restrict o = (float *)j->o + ob;
#pragma omp simd
      for (int64_t i = 0; i < wC; i++) o[i] = acc[i];
    }
  }
  free(row);
}

int mx_cpu_imresize(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  const struct mx_params_imresize *P = p;
  const mx_tensor *x = in[0];
  int n = x->ndim;
  rs_job j = { mx_ptr(x), mx_ptr(out[0]), x->shape[n - 3], x->shape[n - 2], x->shape[n - 1],
               P->h, P->w, x->dtype == MX_U8, { 0 }, { 0 }, 0, 0 };
  int64_t N = n == 4 ? x->shape[0] : 1;
  int interp = (int)P->interp;
  int area_down = interp == RS_AREA && j.H >= j.h && j.W >= j.w;
  if (rs_axis_make(&j.ax, j.W, j.w, interp, area_down) ||
      rs_axis_make(&j.ay, j.H, j.h, interp, area_down)) {
    rs_axis_free(&j.ax);
    rs_axis_free(&j.ay);
    return mx_err(MX_ENOMEM, "imresize: out of memory");
  }
  j.kx = interp == RS_NEAREST ? 1 : interp == RS_CUBIC ? 4 : interp == RS_AREA && area_down ? 0 : 2;
  int64_t per_row = j.W * j.C * 2 + j.w * j.C * 4;
  mx_parallel_for(N * j.h, per_row ? 65536 / per_row + 1 : 1, rs_rows, &j);
  rs_axis_free(&j.ax);
  rs_axis_free(&j.ay);
  if (atomic_load(&j.failed)) return mx_err(MX_ENOMEM, "imresize: out of memory");
  return MX_OK;
}
