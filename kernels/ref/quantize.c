/* kernels/ref/quantize.c — reference kernels of the quantize family (core/ops/quantize.lua
 * says what the values mean): plain loops, row-major NC... data, int64/double arithmetic,
 * the oracle the oneDNN and CPU kernels are checked against. Rounding is to nearest, halves
 * away from zero; results saturate. Ranges are float32 tensors of shape (1). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"
#include "conv.h"

#include <math.h>

static double rd(const mx_tensor *t) { return ((const float *)mx_ptr(t))[0]; }
static void wr(mx_tensor *t, double v) { ((float *)mx_ptr(t))[0] = (float)v; }

/* the real value of one unit of a dtype holding range (mn, mx) */
static double unit(int dt, double mn, double mx) {
  double r = fmax(fabs(mn), fabs(mx));
  if (dt == MX_U8) return fmax(mx, 0) / 255.0;
  if (dt == MX_I32) return r / 2147483647.0;
  return r / 127.0;
}

static double quant(double x, double u, int dt) {
  double lo = dt == MX_U8 ? 0 : -127, hi = dt == MX_U8 ? 255 : 127;
  if (!(u > 0)) return 0;
  double q = round(x / u);
  return q < lo ? lo : q > hi ? hi : q;
}

/* writes the quantized output's range: int8 (-R, R), uint8 (0, max) */
static void out_range(mx_tensor *const *out, int dt, double mn, double mx) {
  double r = fmax(fabs(mn), fabs(mx));
  wr(out[1], dt == MX_U8 ? 0 : dt == MX_F32 ? mn : -r);
  wr(out[2], dt == MX_U8 ? fmax(mx, 0) : dt == MX_F32 ? mx : r);
}

static void minmax(const mx_tensor *x, double *mn, double *mx) {
  *mn = 0, *mx = 0;
  for (int64_t i = 0; i < x->size; i++) {
    double v = mx_load_f64(mx_ptr(x), x->dtype, i);
    if (v < *mn) *mn = v;
    if (v > *mx) *mx = v;
  }
}

int mx_ref_quantize_v2(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_quantize_v2 *P = p;
  double mn = P->min_calib_range, mx = P->max_calib_range;
  if (!P->has_min_calib_range) minmax(in[0], &mn, &mx);
  int dt = out[0]->dtype;
  double u = unit(dt, mn, mx);
  for (int64_t i = 0; i < in[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), dt, i, quant(mx_load_f64(mx_ptr(in[0]), MX_F32, i), u, dt));
  out_range(out, dt, mn, mx);
  return MX_OK;
}

int mx_ref_dequantize(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  double u = unit(in[0]->dtype, rd(in[1]), rd(in[2]));
  for (int64_t i = 0; i < in[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), MX_F32, i, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i) * u);
  return MX_OK;
}

int mx_ref_requantize(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_requantize *P = p;
  double ui = unit(MX_I32, rd(in[1]), rd(in[2]));
  double mn = P->min_calib_range, mx = P->max_calib_range;
  if (!P->has_min_calib_range) {
    minmax(in[0], &mn, &mx);
    mn *= ui, mx *= ui;
  }
  int dt = out[0]->dtype;
  double u = unit(dt, mn, mx);
  for (int64_t i = 0; i < in[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), dt, i, quant(mx_load_f64(mx_ptr(in[0]), MX_I32, i) * ui, u, dt));
  out_range(out, dt, mn, mx);
  return MX_OK;
}

/* A layer's real output value r at flat index i: the activation, the sum, then the store
 * (float32, or quantized in the calibrated range). */
typedef struct {
  int act, postsum;
  const mx_tensor *sum;
  double sum_unit, out_unit;
  mx_tensor *out;
} finish_t;

static void finish_init(finish_t *f, int act, int postsum, const mx_tensor *sum,
                        const mx_tensor *smin, const mx_tensor *smax, bool calib, double mn,
                        double mx, mx_tensor *const *out) {
  f->act = act, f->postsum = postsum, f->sum = sum, f->out = out[0];
  f->sum_unit = sum && sum->dtype != MX_F32 ? unit(sum->dtype, rd(smin), rd(smax)) : 1;
  f->out_unit = out[0]->dtype == MX_F32 ? 1 : unit(out[0]->dtype, mn, mx);
  if (calib) out_range(out, out[0]->dtype, mn, mx);
  else wr(out[1], 0), wr(out[2], 0);
}

static void finish(const finish_t *f, int64_t i, double r) {
  if (f->act && r < 0) r = 0;
  if (f->sum) r += mx_load_f64(mx_ptr(f->sum), f->sum->dtype, i) * f->sum_unit;
  if (f->postsum && r < 0) r = 0;
  if (f->out->dtype == MX_F32) mx_store_f64(mx_ptr(f->out), MX_F32, i, r);
  else mx_store_f64(mx_ptr(f->out), f->out->dtype, i, quant(r, f->out_unit, f->out->dtype));
}

int mx_ref_quantized_conv(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_quantized_conv *P = p;
  const mx_tensor *x = in[0], *w = in[3], *ws = in[4];
  const mx_tensor *b = P->no_bias ? NULL : in[5];
  int s = P->no_bias ? 5 : 6;
  mx_conv_geom g;
  int rc = mx_conv_geom_of("quantized_conv", (const struct mx_params_convolution *)p, x->ndim,
                           x->shape, w->shape[0], &g);
  if (rc) return rc;
  if (g.last) return mx_err(MX_EINVAL, "quantized_conv: channel-last layouts are not supported");
  finish_t f;
  finish_init(&f, P->act_type == MX_QUANTIZED_CONV_ACT_TYPE_RELU,
              P->postsum_act == MX_QUANTIZED_CONV_POSTSUM_ACT_RELU, P->with_sum ? in[s] : NULL,
              P->with_sum ? in[s + 1] : NULL, P->with_sum ? in[s + 2] : NULL,
              P->has_min_calib_range, P->min_calib_range, P->max_calib_range, out);
  double xu = unit(x->dtype, rd(in[1]), rd(in[2]));
  const float *wsc = mx_ptr(ws);
  int64_t cg = g.C / g.G, fg = g.F / g.G;
  int64_t osz = g.out[0] * g.out[1] * g.out[2], isz = g.in[0] * g.in[1] * g.in[2];
  int64_t ksz = g.k[0] * g.k[1] * g.k[2];
  for (int64_t n = 0; n < g.N; n++)
    for (int64_t oc = 0; oc < g.F; oc++) {
      int64_t grp = oc / fg;
      for (int64_t o0 = 0; o0 < g.out[0]; o0++)
        for (int64_t o1 = 0; o1 < g.out[1]; o1++)
          for (int64_t o2 = 0; o2 < g.out[2]; o2++) {
            int64_t acc = 0;
            for (int64_t ic = 0; ic < cg; ic++)
              for (int64_t k0 = 0; k0 < g.k[0]; k0++)
                for (int64_t k1 = 0; k1 < g.k[1]; k1++)
                  for (int64_t k2 = 0; k2 < g.k[2]; k2++) {
                    int64_t i0 = o0 * g.s[0] - g.p[0] + k0 * g.d[0];
                    int64_t i1 = o1 * g.s[1] - g.p[1] + k1 * g.d[1];
                    int64_t i2 = o2 * g.s[2] - g.p[2] + k2 * g.d[2];
                    if (i0 < 0 || i0 >= g.in[0] || i1 < 0 || i1 >= g.in[1] || i2 < 0 ||
                        i2 >= g.in[2])
                      continue;
                    int64_t xi = (n * g.C + grp * cg + ic) * isz + (i0 * g.in[1] + i1) * g.in[2] + i2;
                    int64_t wi = (oc * cg + ic) * ksz + (k0 * g.k[1] + k1) * g.k[2] + k2;
                    acc += (int64_t)mx_load_f64(mx_ptr(x), x->dtype, xi) *
                           (int64_t)mx_load_f64(mx_ptr(w), MX_I8, wi);
                  }
            double r = (double)acc * xu * wsc[oc];
            if (b) r += mx_load_f64(mx_ptr(b), MX_F32, oc);
            finish(&f, (n * g.F + oc) * osz + (o0 * g.out[1] + o1) * g.out[2] + o2, r);
          }
    }
  return MX_OK;
}

int mx_ref_quantized_fully_connected(const mx_kctx *ctx, const void *p, int nin,
                                     mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_quantized_fully_connected *P = p;
  const mx_tensor *x = in[0], *w = in[3], *b = P->no_bias ? NULL : in[5];
  const float *wsc = mx_ptr(in[4]);
  int64_t H = w->shape[0], K = w->shape[1], rows = x->size / K;
  finish_t f;
  finish_init(&f, P->act_type == MX_QUANTIZED_FULLY_CONNECTED_ACT_TYPE_RELU, 0, NULL, NULL, NULL,
              P->has_min_calib_range, P->min_calib_range, P->max_calib_range, out);
  double xu = unit(x->dtype, rd(in[1]), rd(in[2]));
  for (int64_t r = 0; r < rows; r++)
    for (int64_t h = 0; h < H; h++) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc += (int64_t)mx_load_f64(mx_ptr(x), x->dtype, r * K + k) *
               (int64_t)mx_load_f64(mx_ptr(w), MX_I8, h * K + k);
      double v = (double)acc * xu * wsc[h];
      if (b) v += mx_load_f64(mx_ptr(b), MX_F32, h);
      finish(&f, r * H + h, v);
    }
  return MX_OK;
}

/* pooling geometry as kernels/ref/pool.c reads inference's hand-off (NC... data) */
int mx_ref_quantized_pooling(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_quantized_pooling *P = p;
  const mx_op_info *f = &ctx->info;
  const mx_tensor *x = in[0];
  mx_tensor *y = out[0];
  if (f->axis != 0) return mx_err(MX_EINVAL, "quantized_pooling: channel-last layouts are not supported");
  int ns = f->align_ndim;
  int64_t N = x->shape[0], Cn = x->shape[1], is[3], os[3], k[3], st[3], pd[3];
  for (int d = 0; d < 3; d++) {
    int e = d - (3 - ns);
    bool real = e >= 0;
    is[d] = real ? x->shape[2 + e] : 1;
    os[d] = real ? y->shape[2 + e] : 1;
    k[d] = real ? f->extent[e] : 1;
    st[d] = real ? f->step[e] : 1;
    pd[d] = real ? f->begin[e] : 0;
  }
  bool avg = P->pool_type == MX_QUANTIZED_POOLING_POOL_TYPE_AVG;
  int64_t isz = is[0] * is[1] * is[2], osz = os[0] * os[1] * os[2];
  for (int64_t nc = 0; nc < N * Cn; nc++)
    for (int64_t o0 = 0; o0 < os[0]; o0++)
      for (int64_t o1 = 0; o1 < os[1]; o1++)
        for (int64_t o2 = 0; o2 < os[2]; o2++) {
          int64_t lo[3], hi[3], full = 1, o[3] = {o0, o1, o2};
          for (int d = 0; d < 3; d++) {
            int64_t a = o[d] * st[d] - pd[d];
            int64_t e = a + k[d] < is[d] + pd[d] ? a + k[d] : is[d] + pd[d];
            full *= e - a;
            lo[d] = a < 0 ? 0 : a;
            hi[d] = e < is[d] ? e : is[d];
          }
          double acc = avg ? 0 : -1e9;
          int64_t cnt = 0;
          for (int64_t a = lo[0]; a < hi[0]; a++)
            for (int64_t b = lo[1]; b < hi[1]; b++)
              for (int64_t e = lo[2]; e < hi[2]; e++) {
                double v = mx_load_f64(mx_ptr(x), x->dtype, nc * isz + (a * is[1] + b) * is[2] + e);
                if (avg) acc += v;
                else if (v > acc) acc = v;
                cnt++;
              }
          if (avg) acc = round(acc / (double)(P->count_include_pad ? full : cnt));
          mx_store_f64(mx_ptr(y), y->dtype, nc * osz + (o0 * os[1] + o1) * os[2] + o2, acc);
        }
  wr(out[1], rd(in[1]));
  wr(out[2], rd(in[2]));
  return MX_OK;
}

int mx_ref_quantized_act(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double v = mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i);
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, v < 0 ? 0 : v);
  }
  wr(out[1], rd(in[1]));
  wr(out[2], rd(in[2]));
  return MX_OK;
}

int mx_ref_quantized_flatten(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i));
  wr(out[1], rd(in[1]));
  wr(out[2], rd(in[2]));
  return MX_OK;
}

int mx_ref_quantized_elemwise_add(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_quantized_elemwise_add *P = p;
  double ul = unit(in[0]->dtype, rd(in[2]), rd(in[3])), ur = unit(in[1]->dtype, rd(in[4]), rd(in[5]));
  finish_t f;
  finish_init(&f, 0, P->act_type == MX_QUANTIZED_ELEMWISE_ADD_ACT_TYPE_RELU, NULL, NULL, NULL,
              P->has_min_calib_range, P->min_calib_range, P->max_calib_range, out);
  for (int64_t i = 0; i < in[0]->size; i++)
    finish(&f, i, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i) * ul +
                  mx_load_f64(mx_ptr(in[1]), in[1]->dtype, i) * ur);
  return MX_OK;
}

int mx_ref_quantized_concat(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)nout;
  int n = nin / 3, a = ctx->info.axis, dt = out[0]->dtype;
  (void)p;
  double R = 0;
  for (int i = 0; i < n; i++) R = fmax(R, fmax(fabs(rd(in[n + 2 * i])), fabs(rd(in[n + 2 * i + 1]))));
  double mn = dt == MX_U8 ? 0 : -R;
  double u = unit(dt, mn, R);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= out[0]->shape[d];
  for (int d = a + 1; d < out[0]->ndim; d++) inner *= out[0]->shape[d];
  int64_t off = 0, olen = out[0]->shape[a];
  for (int i = 0; i < n; i++) {
    const mx_tensor *x = in[i];
    double ui = unit(x->dtype, rd(in[n + 2 * i]), rd(in[n + 2 * i + 1]));
    int64_t len = x->shape[a];
    for (int64_t o = 0; o < outer; o++)
      for (int64_t j = 0; j < len * inner; j++) {
        double v = mx_load_f64(mx_ptr(x), x->dtype, o * len * inner + j) * ui;
        mx_store_f64(mx_ptr(out[0]), dt, (o * olen + off) * inner + j, quant(v, u, dt));
      }
    off += len;
  }
  out_range(out, dt, mn, R);
  return MX_OK;
}
