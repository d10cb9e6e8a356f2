/* pool.c — reference kernels of the pool family: plain loops in double (mx_load_f64 /
 * mx_store_f64), the oracle the oneDNN kernels are checked against. The window rules are
 * MXNet's pool.h (core/ops/pool.c says which geometry inference hands over). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- pooling -------------------------------------------------------------------------- */

/* Pooling geometry on 3 spatial dims (fewer are padded in front with size-1 dims). */
typedef struct {
  int64_t n, c, in[3], out[3], k[3], s[3], p[3];
  bool last;
} geo;

static void geo_of(const mx_op_info *f, const mx_tensor *x, const mx_tensor *y, geo *g) {
  int ns = f->align_ndim, nd = x->ndim;
  g->last = f->axis != 0;
  g->n = x->shape[0];
  g->c = x->shape[g->last ? nd - 1 : 1];
  for (int d = 0; d < 3; d++) {
    int e = d - (3 - ns), ax = g->last ? 1 + e : 2 + e;
    bool real = e >= 0;
    g->in[d] = real ? x->shape[ax] : 1;
    g->out[d] = real ? y->shape[ax] : 1;
    g->k[d] = real ? f->extent[e] : 1;
    g->s[d] = real ? f->step[e] : 1;
    g->p[d] = real ? f->begin[e] : 0;
  }
}

static int64_t at(const geo *g, int64_t n, int64_t c, const int64_t *sz, int64_t a, int64_t b,
                  int64_t e) {
  if (g->last) return (((n * sz[0] + a) * sz[1] + b) * sz[2] + e) * g->c + c;
  return (((n * g->c + c) * sz[0] + a) * sz[1] + b) * sz[2] + e;
}

/* window of output cell o along dim d: [lo, hi) on the data, padded extent in *full */
static void window(const geo *g, int d, int64_t o, int64_t *lo, int64_t *hi, int64_t *full) {
  int64_t st = o * g->s[d] - g->p[d];
  int64_t en = st + g->k[d] < g->in[d] + g->p[d] ? st + g->k[d] : g->in[d] + g->p[d];
  *full = en - st;
  *lo = st < 0 ? 0 : st;
  *hi = en < g->in[d] ? en : g->in[d];
}

static double lp_pow(double v, int64_t p) { return p == 1 ? v : p == 2 ? v * v : v * v * v; }
static double lp_root(double v, int64_t p) { return p == 1 ? v : p == 2 ? sqrt(v) : cbrt(v); }

/* One pass over every output cell: forward (dx NULL) writes y; backward adds into dx. */
static void pool_pass(const mx_kctx *ctx, const struct mx_params_pooling *P, const mx_tensor *x,
                      const mx_tensor *y, const mx_tensor *gy, mx_tensor *out, bool bwd) {
  geo g;
  geo_of(&ctx->info, x, y, &g);
  const void *xp = mx_ptr(x), *yp = mx_ptr(y);
  void *op = mx_ptr(out);
  int dt = x->dtype;
  double lowest = dt == MX_F64 ? -DBL_MAX : -FLT_MAX;
  int type = P->pool_type;
  int64_t pv = P->has_p_value ? P->p_value : 1;
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t c = 0; c < g.c; c++)
      for (int64_t o0 = 0; o0 < g.out[0]; o0++)
        for (int64_t o1 = 0; o1 < g.out[1]; o1++)
          for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
            int64_t lo[3], hi[3], full[3];
            window(&g, 0, o0, &lo[0], &hi[0], &full[0]);
            window(&g, 1, o1, &lo[1], &hi[1], &full[1]);
            window(&g, 2, o2, &lo[2], &hi[2], &full[2]);
            int64_t oi = at(&g, n, c, g.out, o0, o1, o2);
            double div = 1;
            if (type == MX_POOLING_POOL_TYPE_AVG)
              div = P->count_include_pad ? (double)(full[0] * full[1] * full[2])
                                         : (double)((hi[0] - lo[0]) * (hi[1] - lo[1]) *
                                                    (hi[2] - lo[2]));
            double acc = type == MX_POOLING_POOL_TYPE_MAX ? lowest : 0;
            int64_t arg = -1;
            double gv = bwd ? mx_load_f64(mx_ptr(gy), dt, oi) : 0;
            double yv = bwd ? mx_load_f64(yp, dt, oi) : 0;
            for (int64_t a = lo[0]; a < hi[0]; a++)
              for (int64_t b = lo[1]; b < hi[1]; b++)
                for (int64_t e = lo[2]; e < hi[2]; e++) {
                  int64_t xi = at(&g, n, c, g.in, a, b, e);
                  double v = mx_load_f64(xp, dt, xi);
                  if (type == MX_POOLING_POOL_TYPE_MAX) {
                    /* as MXNet's pool.h: NaN never wins (an all-NaN window gives the
                     * lowest value); backward: the first cell equal to the output */
                    if (!bwd && v > acc) acc = v;
                    if (bwd && arg < 0 && v == yv) arg = xi;
                  } else if (!bwd) {
                    acc += type == MX_POOLING_POOL_TYPE_LP ? lp_pow(v, pv) : v;
                  } else {
                    double d = gv;
                    if (type == MX_POOLING_POOL_TYPE_AVG) d = gv / div;
                    else if (type == MX_POOLING_POOL_TYPE_LP && pv > 1)
                      d = yv == 0 ? 0 : gv * lp_pow(v / yv, pv - 1);
                    mx_store_f64(op, dt, xi, mx_load_f64(op, dt, xi) + d);
                  }
                }
            if (bwd) {
              if (type == MX_POOLING_POOL_TYPE_MAX && arg >= 0)
                mx_store_f64(op, dt, arg, mx_load_f64(op, dt, arg) + gv);
              continue;
            }
            double r = acc;
            if (type == MX_POOLING_POOL_TYPE_AVG) r = div == 0 ? NAN : acc / div;
            else if (type == MX_POOLING_POOL_TYPE_LP) r = lp_root(acc, pv);
            mx_store_f64(op, dt, oi, r);
          }
}

int mx_ref_pooling(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  pool_pass(ctx, p, in[0], out[0], NULL, out[0], false);
  return MX_OK;
}

int mx_ref_pooling_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  memset(mx_ptr(out[0]), 0, mx_nbytes(out[0]));
  pool_pass(ctx, p, in[1], in[2], in[0], out[0], true);
  return MX_OK;
}

/* ---- adaptive_avg_pooling2d ---------------------------------------------------------- */

static void adaptive(const mx_tensor *x, const mx_tensor *y, const mx_tensor *gy, mx_tensor *dx) {
  int64_t N = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = y->shape[2], OW = y->shape[3];
  int dt = x->dtype;
  const void *xp = mx_ptr(x);
  for (int64_t n = 0; n < N; n++)
    for (int64_t i = 0; i < OH; i++)
      for (int64_t j = 0; j < OW; j++) {
        int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH;
        int64_t w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
        double cnt = (double)((h1 - h0) * (w1 - w0)), acc = 0;
        int64_t oi = (n * OH + i) * OW + j;
        double g = gy ? mx_load_f64(mx_ptr(gy), dt, oi) / cnt : 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) {
            int64_t xi = (n * H + h) * W + w;
            if (gy) mx_store_f64(mx_ptr(dx), dt, xi, mx_load_f64(mx_ptr(dx), dt, xi) + g);
            else acc += mx_load_f64(xp, dt, xi);
          }
        if (!gy) mx_store_f64(mx_ptr(dx), dt, oi, acc / cnt);
      }
}

int mx_ref_adaptive_avg_pooling2d(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  adaptive(in[0], out[0], NULL, out[0]);
  return MX_OK;
}

int mx_ref_adaptive_avg_pooling2d_backward(const mx_kctx *ctx, const void *p, int nin,
                                           mx_tensor *const *in, int nout,
                                           mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  memset(mx_ptr(out[0]), 0, mx_nbytes(out[0]));
  adaptive(in[1], in[0], in[0], out[0]);
  return MX_OK;
}

/* ---- upsampling ------------------------------------------------------------------------ */

/* bilinear: a depthwise transposed convolution (pad ceil((s-1)/2) = s/2); forward adds
 * into y, backward (y holds the output gradient) writes dx and adds into dw */
static void up_bilinear(int64_t s, const mx_tensor *x, const mx_tensor *w, const mx_tensor *y,
                        mx_tensor *dx, mx_tensor *dw, bool bwd) {
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = y->shape[2], OW = y->shape[3], k = w->shape[2], pad = s / 2;
  int dt = x->dtype;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t i = 0; i < H; i++)
        for (int64_t j = 0; j < W; j++) {
          int64_t xi = ((n * C + c) * H + i) * W + j;
          double xv = mx_load_f64(mx_ptr(x), dt, xi), gx = 0;
          for (int64_t a = 0; a < k; a++)
            for (int64_t b = 0; b < k; b++) {
              int64_t oy = i * s - pad + a, ox = j * s - pad + b;
              if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
              int64_t oi = ((n * C + c) * OH + oy) * OW + ox, wi = (c * k + a) * k + b;
              double wv = mx_load_f64(mx_ptr(w), dt, wi);
              double yv = mx_load_f64(mx_ptr(y), dt, oi);
              if (!bwd) {
                mx_store_f64(mx_ptr(y), dt, oi, yv + xv * wv);
              } else {
                gx += yv * wv;
                mx_store_f64(mx_ptr(dw), dt, wi, mx_load_f64(mx_ptr(dw), dt, wi) + xv * yv);
              }
            }
          if (bwd) mx_store_f64(mx_ptr(dx), dt, xi, gx);
        }
}

int mx_ref_upsampling(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)nout;
  const struct mx_params_upsampling *P = p;
  mx_tensor *y = out[0];
  memset(mx_ptr(y), 0, mx_nbytes(y));
  if (P->sample_type == MX_UPSAMPLING_SAMPLE_TYPE_BILINEAR) {
    up_bilinear(P->scale, in[0], in[1], y, NULL, NULL, false);
    return MX_OK;
  }
  bool sum = P->multi_input_mode == MX_UPSAMPLING_MULTI_INPUT_MODE_SUM;
  int64_t N = y->shape[0], OC = y->shape[1], OH = y->shape[2], OW = y->shape[3], c0 = 0;
  int dt = y->dtype;
  for (int t = 0; t < nin; t++) {
    const mx_tensor *x = in[t];
    int64_t C = x->shape[1], H = x->shape[2], W = x->shape[3], f = OH / H;
    for (int64_t n = 0; n < N; n++)
      for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < OH; i++)
          for (int64_t j = 0; j < OW; j++) {
            int64_t oi = ((n * OC + c0 + c) * OH + i) * OW + j;
            double v = mx_load_f64(mx_ptr(x), dt, ((n * C + c) * H + i / f) * W + j / f);
            mx_store_f64(mx_ptr(y), dt, oi, mx_load_f64(mx_ptr(y), dt, oi) + v);
          }
    if (!sum) c0 += C;
  }
  return MX_OK;
}

int mx_ref_upsampling_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_upsampling_backward *P = p;
  memset(mx_ptr(out[1]), 0, mx_nbytes(out[1]));
  up_bilinear(P->scale, in[1], in[2], in[0], out[0], out[1], true);
  return MX_OK;
}

/* ---- bilinear_resize2d ------------------------------------------------------------------ */

/* source coordinate of output index i (MXNet 1.9's area_pixel_compute_source_index) */
static double src_index(int64_t in, int64_t out, int64_t i, bool align) {
  double scale = out > 1 ? (align ? (double)(in - 1) / (double)(out - 1) : (double)in / out) : 0;
  if (align) return scale * (double)i;
  double v = scale * ((double)i + 0.5) - 0.5;
  return v < 0 ? 0 : v;
}

static void resize(bool align, const mx_tensor *x, const mx_tensor *y, mx_tensor *dx, bool bwd) {
  int64_t N = x->shape[0] * x->shape[1], H = x->shape[2], W = x->shape[3];
  int64_t OH = y->shape[2], OW = y->shape[3];
  int dt = x->dtype;
  for (int64_t i = 0; i < OH; i++) {
    double hr = src_index(H, OH, i, align);
    int64_t h = (int64_t)hr, hp = h < H - 1 ? 1 : 0;
    double l1 = hr - (double)h, l0 = 1 - l1;
    for (int64_t j = 0; j < OW; j++) {
      double wr = src_index(W, OW, j, align);
      int64_t w = (int64_t)wr, wp = w < W - 1 ? 1 : 0;
      double m1 = wr - (double)w, m0 = 1 - m1;
      int64_t q[4] = {h * W + w, h * W + w + wp, (h + hp) * W + w, (h + hp) * W + w + wp};
      double c[4] = {l0 * m0, l0 * m1, l1 * m0, l1 * m1};
      for (int64_t n = 0; n < N; n++) {
        int64_t oi = (n * OH + i) * OW + j, b = n * H * W;
        if (!bwd) {
          double v = 0;
          for (int t = 0; t < 4; t++) v += c[t] * mx_load_f64(mx_ptr(x), dt, b + q[t]);
          mx_store_f64(mx_ptr(y), dt, oi, v);
        } else {
          double g = mx_load_f64(mx_ptr(y), dt, oi);
          for (int t = 0; t < 4; t++)
            mx_store_f64(mx_ptr(dx), dt, b + q[t], mx_load_f64(mx_ptr(dx), dt, b + q[t]) + c[t] * g);
        }
      }
    }
  }
}

int mx_ref_bilinear_resize2d(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  resize(((const struct mx_params_bilinear_resize2d *)p)->align_corners, in[0], out[0], NULL,
         false);
  return MX_OK;
}

int mx_ref_bilinear_resize2d_backward(const mx_kctx *ctx, const void *p, int nin,
                                      mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  memset(mx_ptr(out[0]), 0, mx_nbytes(out[0]));
  resize(((const struct mx_params_bilinear_resize2d_backward *)p)->align_corners, in[1], in[0],
         out[0], true);
  return MX_OK;
}
