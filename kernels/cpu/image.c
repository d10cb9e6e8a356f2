/* kernels/cpu/image.c — to_tensor: data (N, H, W, C) uint8 or float32 (N = 1 for a
 * 3-d image); out (N, C, H, W) float32 = data / 255, bit for bit the ref kernel's
 * value (the float nearest v / 255). float32 data: a float division (rounding a
 * double quotient of floats to float gives the same). uint8 data: v * (1/255) plus
 * one FMA correction step, exact for all 256 values (spec/image_spec.lua checks each)
 * and divider-free: vdivps made the 64-image 28x28 batch take 8.4 us. One channel is
 * a straight vector loop (no transpose); more channels go pixel by pixel. Images
 * split over the intra-op pool. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <stdlib.h>

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

/* ---- imresize ----
 * Separable resize with OpenCV's coordinate rules (the ref kernel's doc; its tables are
 * rebuilt here in float, as OpenCV's are). Per output row: the vertical taps first
 * (rows of W * C floats), then the horizontal ones; uint8 results round to nearest and
 * saturate. Output rows split over the intra-op pool. */

enum { RS_NEAREST = 0, RS_LINEAR = 1, RS_CUBIC = 2, RS_AREA = 3 };
/* work per thread (about one operation an element tap): one 224x224 image stays on the
 * calling thread (on this loaded 2-core machine splitting it made it 5x slower: a
 * descheduled pool thread holds up the whole image); batches split by rows */
#define RS_GRAIN (INT64_C(1) << 20)

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
        float v = rintf(acc[i]); /* ties to even, as OpenCV's cvRound */
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

/* uint8 bilinear (and area when enlarging, which OpenCV runs as bilinear with its own
 * weights) in OpenCV 3.4's fixed point, so that results equal MXNet 1.9.1's (it bundles
 * OpenCV 3.4.2) bit for bit: weights are float, rounded to shorts of 2048ths; the
 * horizontal pass sums S * a in ints; the vertical pass is OpenCV's SSE2
 * VResizeLinearVec_32s8u, ((S0 >> 4) * b0 >> 16) + ((S1 >> 4) * b1 >> 16) + 2 >> 2, for
 * the columns its 16- and 4-wide loops cover, and FixedPtCast (sum + 2^21) >> 22 for
 * the rest. */
typedef struct {
  const uint8_t *x;
  uint8_t *o;
  int64_t H, W, C, h, w;
  int32_t *xofs, *yofs; /* first source column / row (sx, sy: taps start at sx - K/2 + 1) */
  int16_t *alpha, *beta; /* K per output column / row */
  int K;                 /* 2 bilinear, 4 bicubic */
  atomic_int failed;
} fx_job;

static int16_t fx_short(float v) {
  long r = lrintf(v * 2048.0f);
  return (int16_t)(r < -32768 ? -32768 : r > 32767 ? 32767 : r);
}

/* OpenCV's resizeGeneric tables for one axis: ofs[d] and the K weights */
static void fx_axis(int64_t src, int64_t dst, int area, int K, int32_t *ofs, int16_t *wt,
                    int mul) {
  double inv = (double)dst / (double)src, scale = 1.0 / inv;
  for (int64_t d = 0; d < dst; d++) {
    float f;
    int64_t sx;
    if (!area) {
      f = (float)(((double)d + 0.5) * scale - 0.5);
      sx = (int64_t)floorf(f);
      f -= (float)sx;
    } else {
      sx = (int64_t)floor((double)d * scale);
      f = (float)((double)(d + 1) - (double)(sx + 1) * inv);
      f = f <= 0 ? 0.f : f - floorf(f);
    }
    if (mul && K == 2) { /* bilinear columns: OpenCV clamps the position at the edges */
      if (sx < 0) { f = 0; sx = 0; }
      if (sx >= src - 1) { f = 0; sx = src - 1; }
    }
    ofs[d] = (int32_t)sx;
    if (K == 2) {
      wt[2 * d] = fx_short(1.f - f);
      wt[2 * d + 1] = fx_short(f);
    } else { /* OpenCV's interpolateCubic, in float */
      const float A = -0.75f;
      float c0 = ((A * (f + 1) - 5 * A) * (f + 1) + 8 * A) * (f + 1) - 4 * A;
      float c1 = ((A + 2) * f - (A + 3)) * f * f + 1;
      float c2 = ((A + 2) * (1 - f) - (A + 3)) * (1 - f) * (1 - f) + 1;
      float c3 = 1.f - c0 - c1 - c2;
      wt[4 * d] = fx_short(c0);
      wt[4 * d + 1] = fx_short(c1);
      wt[4 * d + 2] = fx_short(c2);
      wt[4 * d + 3] = fx_short(c3);
    }
  }
}

static void fx_rows(int64_t b, int64_t e, void *ctx) {
  fx_job *j = ctx;
  int64_t C = j->C, wc = j->w * C;
  const int K = j->K, k2 = K / 2;
  int32_t *buf = malloc(sizeof(int32_t) * (size_t)(K * wc + 1));
  if (!buf) {
    atomic_store(&j->failed, 1);
    return;
  }
  int64_t have[4] = { -1, -1, -1, -1 }; /* image * H + row held by buf's K slots */
  for (int64_t r = b; r < e; r++) {
    int64_t n = r / j->h, d = r % j->h;
    int64_t want[4];
    for (int k = 0; k < K; k++) {
      int64_t sy = j->yofs[d] - k2 + 1 + k;
      want[k] = n * j->H + (sy < 0 ? 0 : sy >= j->H ? j->H - 1 : sy);
    }
    /* rows move forward: slide the slots still wanted down to their new positions */
    for (int k = 0; k < K; k++)
      for (int m = k; m < K; m++)
        if (have[m] == want[k] && m != k) {
          memcpy(buf + k * wc, buf + m * wc, sizeof(int32_t) * (size_t)wc);
          have[k] = have[m];
          break;
        }
    for (int k = 0; k < K; k++) { /* horizontal pass of the K source rows, in ints */
      if (have[k] == want[k]) continue;
      have[k] = want[k];
      const uint8_t *S = j->x + want[k] * j->W * C;
      int32_t *D = buf + k * wc;
      for (int64_t dx = 0; dx < j->w; dx++) {
        int64_t sx = j->xofs[dx];
        const int16_t *a = j->alpha + K * dx;
        if (K == 2 && sx >= j->W - 1) { /* OpenCV's xmax tail: S[sx] * ONE */
          for (int64_t c = 0; c < C; c++) D[dx * C + c] = S[sx * C + c] * 2048;
          continue;
        }
        int64_t u0 = sx - k2 + 1;
        if (u0 >= 0 && u0 + K <= j->W) { /* interior: no clamping */
          const uint8_t *q = S + u0 * C;
          if (K == 2 && C == 3) { /* the common case, unrolled */
            int32_t *o3 = D + dx * 3;
            o3[0] = q[0] * a[0] + q[3] * a[1];
            o3[1] = q[1] * a[0] + q[4] * a[1];
            o3[2] = q[2] * a[0] + q[5] * a[1];
          } else if (K == 2)
            for (int64_t c = 0; c < C; c++) D[dx * C + c] = q[c] * a[0] + q[C + c] * a[1];
          else
            for (int64_t c = 0; c < C; c++)
              D[dx * C + c] = q[c] * a[0] + q[C + c] * a[1] + q[2 * C + c] * a[2] +
                              q[3 * C + c] * a[3];
          continue;
        }
        for (int64_t c = 0; c < C; c++) {
          int32_t acc = 0;
          for (int t = 0; t < K; t++) {
            int64_t u = u0 + t;
            u = u < 0 ? 0 : u >= j->W ? j->W - 1 : u;
            acc += S[u * C + c] * a[t];
          }
          D[dx * C + c] = acc;
        }
      }
    }
    const int16_t *bt = j->beta + K * d;
    uint8_t *o = j->o + (n * j->h + d) * wc;
    if (K == 2) {
      const int32_t *S0 = buf, *S1 = buf + wc;
      int b0 = bt[0], b1 = bt[1];
      for (int64_t x = 0; x < wc; x++) {
        int s0 = S0[x] >> 4, s1 = S1[x] >> 4;
        s0 = s0 > 32767 ? 32767 : s0 < -32768 ? -32768 : s0; /* _mm_packs_epi32 */
        s1 = s1 > 32767 ? 32767 : s1 < -32768 ? -32768 : s1;
        int v = (((s0 * b0) >> 16) + ((s1 * b1) >> 16) + 2) >> 2;
        o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    } else { /* VResizeCubicVec_32s8u: float sums, rounded to nearest (even) */
      const float sc = 1.f / (2048.f * 2048.f);
      float b0 = bt[0] * sc, b1 = bt[1] * sc, b2 = bt[2] * sc, b3 = bt[3] * sc;
      for (int64_t x = 0; x < wc; x++) {
        float v = (float)buf[x] * b0;
        v += (float)buf[wc + x] * b1;
        v += (float)buf[2 * wc + x] * b2;
        v += (float)buf[3 * wc + x] * b3;
        v = rintf(v);
        o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
      }
    }
  }
  free(buf);
}

static int fx_resize(const mx_tensor *x, mx_tensor *out, int64_t N, int area, int K) {
  int n = x->ndim;
  fx_job j = { mx_ptr(x), mx_ptr(out), x->shape[n - 3], x->shape[n - 2], x->shape[n - 1],
               out->shape[n - 3], out->shape[n - 2], NULL, NULL, NULL, NULL, K, 0 };
  j.xofs = malloc(sizeof(int32_t) * (size_t)j.w);
  j.yofs = malloc(sizeof(int32_t) * (size_t)j.h);
  j.alpha = malloc(sizeof(int16_t) * (size_t)(K * j.w));
  j.beta = malloc(sizeof(int16_t) * (size_t)(K * j.h));
  int rc = MX_OK;
  if (!j.xofs || !j.yofs || !j.alpha || !j.beta) {
    rc = mx_err(MX_ENOMEM, "imresize: out of memory");
  } else {
    fx_axis(j.W, j.w, area, K, j.xofs, j.alpha, 1);
    fx_axis(j.H, j.h, area, K, j.yofs, j.beta, 0);
    int64_t per_row = j.w * j.C * 6 * K;
    mx_parallel_for(N * j.h, per_row ? RS_GRAIN / per_row + 1 : 1, fx_rows, &j);
    if (atomic_load(&j.failed)) rc = mx_err(MX_ENOMEM, "imresize: out of memory");
  }
  free(j.xofs); free(j.yofs); free(j.alpha); free(j.beta);
  return rc;
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
  if (j.u8 && (interp == RS_LINEAR || (interp == RS_AREA && !area_down)))
    return fx_resize(x, out[0], N, interp == RS_AREA, 2);
  if (j.u8 && interp == RS_CUBIC) return fx_resize(x, out[0], N, 0, 4);
  if (rs_axis_make(&j.ax, j.W, j.w, interp, area_down) ||
      rs_axis_make(&j.ay, j.H, j.h, interp, area_down)) {
    rs_axis_free(&j.ax);
    rs_axis_free(&j.ay);
    return mx_err(MX_ENOMEM, "imresize: out of memory");
  }
  j.kx = interp == RS_NEAREST ? 1 : interp == RS_CUBIC ? 4 : interp == RS_AREA && area_down ? 0 : 2;
  int64_t per_row = j.W * j.C * 2 + j.w * j.C * 4;
  mx_parallel_for(N * j.h, per_row ? RS_GRAIN / per_row + 1 : 1, rs_rows, &j);
  rs_axis_free(&j.ax);
  rs_axis_free(&j.ay);
  if (atomic_load(&j.failed)) return mx_err(MX_ENOMEM, "imresize: out of memory");
  return MX_OK;
}

/* ---- the colour ops ----
 * One pass per image with each op's formula (MXNet's augmenters, see core/ops/image.lua)
 * written out rather than as a 3x3 matrix, in double: a matrix's zero entries would turn
 * an inf channel into NaN in the others, and a huge alpha must overflow as the ref's
 * does (the sweep checks both). uint8 results are rounded to nearest even and saturated.
 * Images of a batch split over the pool; one image stays on the calling thread. */
typedef struct {
  const void *x;
  void *o;
  int64_t HW, C;
  bool u8;
  int kind; /* 0 brightness, 1 contrast, 2 saturation, 3 hue (M), 4 lighting (t), 5 gray */
  double alpha, M[9], t[3];
} col_job;

static inline double col_ld(const void *x, bool u8, int64_t i) {
  return u8 ? (double)((const uint8_t *)x)[i] : (double)((const float *)x)[i];
}

static inline void col_st(const col_job *j, int64_t i, double v) {
  if (j->u8) {
    v = rint(v);
    ((uint8_t *)j->o)[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  } else {
    ((float *)j->o)[i] = (float)v;
  }
}

static void col_images(int64_t b, int64_t e, void *ctx) {
  const col_job *j = ctx;
  static const double G[3] = { 0.299, 0.587, 0.114 };
  const double a = j->alpha, *M = j->M, *t = j->t;
  for (int64_t n = b; n < e; n++) {
    int64_t base = n * j->HW * j->C;
    if (j->kind == 0) {
      for (int64_t i = base; i < base + j->HW * j->C; i++) col_st(j, i, col_ld(j->x, j->u8, i) * a);
      continue;
    }
    double mean = 0;
    if (j->kind == 1) { /* contrast: this image's mean gray */
      for (int64_t p = 0; p < j->HW; p++)
        for (int c = 0; c < 3; c++) mean += G[c] * col_ld(j->x, j->u8, base + p * 3 + c);
      mean = j->HW > 0 ? mean / (double)j->HW : 0;
    }
    for (int64_t p = 0; p < j->HW; p++) {
      int64_t i = base + p * 3;
      double v0 = col_ld(j->x, j->u8, i), v1 = col_ld(j->x, j->u8, i + 1),
             v2 = col_ld(j->x, j->u8, i + 2);
      double g = G[0] * v0 + G[1] * v1 + G[2] * v2;
      switch (j->kind) {
      case 1:
        col_st(j, i, v0 * a + (1 - a) * mean);
        col_st(j, i + 1, v1 * a + (1 - a) * mean);
        col_st(j, i + 2, v2 * a + (1 - a) * mean);
        break;
      case 2:
        col_st(j, i, v0 * a + (1 - a) * g);
        col_st(j, i + 1, v1 * a + (1 - a) * g);
        col_st(j, i + 2, v2 * a + (1 - a) * g);
        break;
      case 3:
        col_st(j, i, M[0] * v0 + M[1] * v1 + M[2] * v2);
        col_st(j, i + 1, M[3] * v0 + M[4] * v1 + M[5] * v2);
        col_st(j, i + 2, M[6] * v0 + M[7] * v1 + M[8] * v2);
        break;
      case 4:
        col_st(j, i, v0 + t[0]);
        col_st(j, i + 1, v1 + t[1]);
        col_st(j, i + 2, v2 + t[2]);
        break;
      default:
        col_st(j, i, g);
        col_st(j, i + 1, g);
        col_st(j, i + 2, g);
        break;
      }
    }
  }
}

static int col_run(col_job *j, const mx_tensor *x, mx_tensor *out) {
  int n = x->ndim;
  int64_t N = n == 4 ? x->shape[0] : 1;
  j->x = mx_ptr(x);
  j->o = mx_ptr(out);
  j->HW = x->shape[n - 3] * x->shape[n - 2];
  j->C = x->shape[n - 1];
  j->u8 = x->dtype == MX_U8;
  int64_t per = j->HW * j->C * 4;
  mx_parallel_for(N, per ? RS_GRAIN / per + 1 : 1, col_images, j);
  return MX_OK;
}

int mx_cpu_adjust_brightness(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  col_job j = { .kind = 0, .alpha = ((const struct mx_params_adjust_brightness *)p)->alpha };
  return col_run(&j, in[0], out[0]);
}

int mx_cpu_adjust_contrast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  col_job j = { .kind = 1, .alpha = ((const struct mx_params_adjust_contrast *)p)->alpha };
  return col_run(&j, in[0], out[0]);
}

int mx_cpu_adjust_saturation(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  col_job j = { .kind = 2, .alpha = ((const struct mx_params_adjust_saturation *)p)->alpha };
  return col_run(&j, in[0], out[0]);
}

int mx_cpu_adjust_hue(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  static const double Y[3][3] = { { 0.299, 0.587, 0.114 }, { 0.596, -0.274, -0.321 },
                                  { 0.211, -0.523, 0.311 } };
  static const double IY[3][3] = { { 1.0, 0.956, 0.621 }, { 1.0, -0.272, -0.647 },
                                   { 1.0, -1.107, 1.705 } };
  double al = ((const struct mx_params_adjust_hue *)p)->alpha * M_PI;
  double u = cos(al), w = sin(al);
  double B[3][3] = { { 1, 0, 0 }, { 0, u, -w }, { 0, w, u } };
  col_job j = { .kind = 3 };
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++) {
      double v = 0;
      for (int k = 0; k < 3; k++) {
        double ib = 0;
        for (int m = 0; m < 3; m++) ib += IY[r][m] * B[m][k];
        v += ib * Y[k][c];
      }
      j.M[3 * r + c] = v;
    }
  return col_run(&j, in[0], out[0]);
}

int mx_cpu_adjust_lighting(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  static const double EV[3] = { 55.46, 4.794, 1.148 };
  static const double EVEC[3][3] = { { -0.5675, 0.7192, 0.4009 }, { -0.5808, -0.0045, -0.8140 },
                                     { -0.5836, -0.6948, 0.4203 } };
  const struct mx_params_adjust_lighting *P = p;
  double a[3] = { P->alpha_r, P->alpha_g, P->alpha_b };
  col_job j = { .kind = 4 };
  for (int r = 0; r < 3; r++) {
    double v = 0;
    for (int k = 0; k < 3; k++) v += EVEC[r][k] * a[k] * EV[k];
    j.t[r] = v;
  }
  return col_run(&j, in[0], out[0]);
}

int mx_cpu_to_gray(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  col_job j = { .kind = 5 };
  return col_run(&j, in[0], out[0]);
}

/* ---- imrotate and copy_make_border ----
 * imrotate: the source position moves by (cos, sin) per output column, so each row is
 * a start point plus steps (float); taps outside the image count as 0 as in the ref.
 * copy_make_border: a column map (source column or -1 for the constant) built once,
 * then each output row copies through it. Images of a batch split over the pool. */
typedef struct {
  const void *x;
  void *o;
  int64_t H, W, C, oh, ow, top, left;
  bool u8;
  float cs, sn, value;
  int32_t *cols, *rows; /* border maps: source index or -1 */
} geo_job;

static void rot_images(int64_t b, int64_t e, void *ctx) {
  const geo_job *j = ctx;
  int64_t H = j->H, W = j->W, C = j->C;
  float cx = (float)(W - 1) / 2, cy = (float)(H - 1) / 2;
  for (int64_t n = b; n < e; n++) {
    int64_t base = n * H * W * C;
    for (int64_t y = 0; y < H; y++) {
      float dy = (float)y - cy;
      for (int64_t xx = 0; xx < W; xx++) {
        float dx = (float)xx - cx;
        float sx = cx + dx * j->cs - dy * j->sn, sy = cy + dx * j->sn + dy * j->cs;
        float fx0 = floorf(sx), fy0 = floorf(sy);
        int64_t x0 = (int64_t)fx0, y0 = (int64_t)fy0;
        float fx = sx - fx0, fy = sy - fy0;
        float w00 = (1 - fx) * (1 - fy), w01 = fx * (1 - fy), w10 = (1 - fx) * fy, w11 = fx * fy;
        bool in00 = x0 >= 0 && x0 < W && y0 >= 0 && y0 < H,
             in01 = x0 + 1 >= 0 && x0 + 1 < W && y0 >= 0 && y0 < H,
             in10 = x0 >= 0 && x0 < W && y0 + 1 >= 0 && y0 + 1 < H,
             in11 = x0 + 1 >= 0 && x0 + 1 < W && y0 + 1 >= 0 && y0 + 1 < H;
        int64_t o = base + (y * W + xx) * C, s = base + (y0 * W + x0) * C;
        for (int64_t c = 0; c < C; c++) {
          float acc = 0;
          if (in00) acc += w00 * col_ld(j->x, j->u8, s + c);
          if (in01) acc += w01 * col_ld(j->x, j->u8, s + C + c);
          if (in10) acc += w10 * col_ld(j->x, j->u8, s + W * C + c);
          if (in11) acc += w11 * col_ld(j->x, j->u8, s + W * C + C + c);
          if (j->u8) {
            float v = rintf(acc);
            ((uint8_t *)j->o)[o + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
          } else {
            ((float *)j->o)[o + c] = acc;
          }
        }
      }
    }
  }
}

int mx_cpu_imrotate(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  const mx_tensor *x = in[0];
  int n = x->ndim;
  double rad = ((const struct mx_params_imrotate *)p)->angle * M_PI / 180.0;
  geo_job j = { .x = mx_ptr(x), .o = mx_ptr(out[0]), .H = x->shape[n - 3], .W = x->shape[n - 2],
                .C = x->shape[n - 1], .u8 = x->dtype == MX_U8, .cs = (float)cos(rad),
                .sn = (float)sin(rad) };
  int64_t N = n == 4 ? x->shape[0] : 1, per = j.H * j.W * j.C * 12;
  mx_parallel_for(N, per ? RS_GRAIN / per + 1 : 1, rot_images, &j);
  return MX_OK;
}

/* OpenCV's borderInterpolate (types 1..4); -1 for the constant border (type 0) */
static int64_t bd_index(int64_t p, int64_t len, int type) {
  if (p >= 0 && p < len) return p;
  if (type == 0) return -1;
  if (type == 1) return p < 0 ? 0 : len - 1;
  if (type == 3) {
    int64_t q = p % len;
    return q < 0 ? q + len : q;
  }
  if (len == 1) return 0;
  int64_t delta = type == 4;
  while (p < 0 || p >= len) p = p < 0 ? -p - 1 + delta : 2 * len - p - 1 - delta;
  return p;
}

static void bd_images(int64_t b, int64_t e, void *ctx) {
  const geo_job *j = ctx;
  int64_t C = j->C, es = j->u8 ? 1 : 4;
  for (int64_t n = b; n < e; n++)
    for (int64_t y = 0; y < j->oh; y++) {
      char *o = (char *)j->o + ((n * j->oh + y) * j->ow) * C * es;
      int32_t sy = j->rows[y];
      const char *srow = sy < 0 ? NULL : (const char *)j->x + ((n * j->H + sy) * j->W) * C * es;
      for (int64_t xx = 0; xx < j->ow; xx++) {
        int32_t sx = j->cols[xx];
        char *d = o + xx * C * es;
        if (srow && sx >= 0) {
          memcpy(d, srow + (int64_t)sx * C * es, (size_t)(C * es));
        } else if (j->u8) {
          float v = rintf(j->value);
          uint8_t u = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
          memset(d, u, (size_t)C);
        } else {
          for (int64_t c = 0; c < C; c++) ((float *)(void *)d)[c] = j->value;
        }
      }
    }
}

int mx_cpu_copy_make_border(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  const struct mx_params_copy_make_border *P = p;
  const mx_tensor *x = in[0];
  int n = x->ndim;
  geo_job j = { .x = mx_ptr(x), .o = mx_ptr(out[0]), .H = x->shape[n - 3], .W = x->shape[n - 2],
                .C = x->shape[n - 1], .u8 = x->dtype == MX_U8, .value = (float)P->value };
  j.oh = out[0]->shape[n - 3];
  j.ow = out[0]->shape[n - 2];
  j.rows = malloc(sizeof(int32_t) * (size_t)(j.oh + 1));
  j.cols = malloc(sizeof(int32_t) * (size_t)(j.ow + 1));
  if (!j.rows || !j.cols) {
    free(j.rows);
    free(j.cols);
    return mx_err(MX_ENOMEM, "copy_make_border: out of memory");
  }
  int type = (int)P->type;
  for (int64_t y = 0; y < j.oh; y++) j.rows[y] = (int32_t)bd_index(y - P->top, j.H, type);
  for (int64_t xx = 0; xx < j.ow; xx++) j.cols[xx] = (int32_t)bd_index(xx - P->left, j.W, type);
  int64_t N = n == 4 ? x->shape[0] : 1, per = j.oh * j.ow * j.C * 2;
  mx_parallel_for(N, per ? RS_GRAIN / per + 1 : 1, bd_images, &j);
  free(j.rows);
  free(j.cols);
  return MX_OK;
}
