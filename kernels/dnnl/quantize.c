/* kernels/dnnl/quantize.c — the quantize family's layers on oneDNN's int8 convolution
 * (MX_BACKEND_DNNL): quantized_conv and quantized_fully_connected (a 1x1 convolution of
 * (rows, K) data). u8/s8 data (NC... row-major, or channel-last from an earlier
 * quantized_conv), s8 weights, int32 accumulation; the real-value scales of the data, the
 * weight channels and the output (core/ops/quantize.lua) become oneDNN's per-channel
 * output scales, the bias is divided into the accumulator's unit, act_type, the residual
 * sum and postsum_act are post-ops, so a layer is one primitive. Activations are laid out
 * channel-last (nhwc: oneDNN's int8 layout on x86), which quantized_conv's output keeps,
 * so a chain of them runs with no reorder. The weights' reorder into the primitive's
 * layout is kept with the cached primitive, redone when the weight tensor's storage
 * changes (mx_tensor_version). A primitive is specific to its scales (each layer has its
 * own): the cache key holds what they are made of (the data's and output's units, the
 * weight scales' tensor by address and version), so a warm call computes none of them.
 * quantized_pooling runs oneDNN's u8/s8 pooling (kernels/dnnl/pool.c's forward) on the
 * data as it comes, channel-last included, so conv -> pool -> conv stays in int8 nhwc. */
#include "conv.h"
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* quantized_pooling's params are pooling's (core/ops/quantize.lua params_of): the pool
 * kernels read them as struct mx_params_pooling */
_Static_assert(sizeof(struct mx_params_quantized_pooling) == sizeof(struct mx_params_pooling) &&
                   offsetof(struct mx_params_quantized_pooling, layout) ==
                       offsetof(struct mx_params_pooling, layout) &&
                   offsetof(struct mx_params_quantized_pooling, count_include_pad) ==
                       offsetof(struct mx_params_pooling, count_include_pad) &&
                   (int)MX_QUANTIZED_POOLING_POOL_TYPE_AVG == (int)MX_POOLING_POOL_TYPE_AVG &&
                   (int)MX_QUANTIZED_POOLING_POOL_TYPE_MAX == (int)MX_POOLING_POOL_TYPE_MAX,
               "quantized_pooling's params are pooling's");

typedef struct qkey {
  int nt, nsp, sdt, ddt, sumdt;
  bool bias, relu, sum, postrelu, fc;
  int64_t N, C, F, G, in[3], out[3], k[3], s[3], d[3], p[3];
  float sum_scale;
  /* what the output scales are made of: the data's and output's units and the weight
   * scales' tensor state (address + version name one state for the process's life) */
  double xu, ou;
  uintptr_t wsp;
  uint32_t wsver;
} qkey;

/* The primitive, its descriptors ([0] src, [1] weights, [2] dst, [3] bias) and the
 * weights reordered into md[1] from the tensor at wsrc in state wver. */
typedef struct qprim {
  dnnl_primitive_t prim;
  dnnl_memory_desc_t md[4];
  void *wbuf;
  const void *wsrc;
  uint32_t wver;
} qprim;

static void qprim_free(void *v) {
  qprim *c = v;
  if (c->prim) dnnl_primitive_destroy(c->prim);
  free(c->wbuf);
  free(c);
}

static int dnnl_dt(int dt) {
  return dt == MX_U8 ? dnnl_u8 : dt == MX_I8 ? dnnl_s8 : dt == MX_I32 ? dnnl_s32 : dnnl_f32;
}

/* An activation's descriptor: dims (N, C, spatial...) channel-last (nhwc), or row-major */
static bool act_md(dnnl_memory_desc_t *md, int nsp, int64_t N, int64_t C, const int64_t *sp,
                   int dt, bool last) {
  static const dnnl_format_tag_t plain[4] = {dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde};
  static const dnnl_format_tag_t cl[4] = {dnnl_ab, dnnl_acb, dnnl_acdb, dnnl_acdeb};
  dnnl_dims_t d;
  d[0] = N, d[1] = C;
  for (int i = 0; i < nsp; i++) d[2 + i] = sp[i];
  memset(md, 0, sizeof *md);
  return dnnl_memory_desc_init_by_tag(md, nsp + 2, d, (dnnl_data_type_t)dt,
                                      last ? cl[nsp] : plain[nsp]) == dnnl_success;
}

/* the weights as stored: (F, C/G, k...) s8 row-major, grouped (G, F/G, C/G, k...) */
static bool wei_md(const qkey *k, dnnl_memory_desc_t *md, bool any) {
  static const dnnl_format_tag_t plain[6] = {0, 0, dnnl_ab, dnnl_abc, dnnl_abcd, dnnl_abcde};
  dnnl_dims_t d;
  int g = k->G > 1, n = k->nsp + 2 + g;
  if (g) d[0] = k->G;
  d[g] = k->F / k->G, d[g + 1] = k->C / k->G;
  for (int i = 0; i < k->nsp; i++) d[g + 2 + i] = k->k[i];
  memset(md, 0, sizeof *md);
  if (n > 5) n = 5; /* grouped 3-D: refused in supports */
  return dnnl_memory_desc_init_by_tag(md, n, d, dnnl_s8, any ? dnnl_format_tag_any : plain[n]) ==
         dnnl_success;
}

static void *qbuild(const void *key, void *arg) {
  const qkey *k = key;
  const float *wsc = arg; /* the weight scales (k->wsp) */
  dnnl_engine_t eng = mx_dnnl_engine();
  qprim *c = calloc(1, sizeof *c);
  float *scales = malloc(sizeof(float) * (size_t)(k->F ? k->F : 1));
  if (!c || !eng || !scales) { free(c), free(scales); return NULL; }
  for (int64_t o = 0; o < k->F; o++) /* the accumulator's unit in output units */
    scales[o] = k->ou > 0 ? (float)(k->xu * wsc[o] / k->ou) : 0.0f;
  dnnl_memory_desc_t src, wei, dst, bias;
  dnnl_dims_t st, dl, pl, pr, bd = {k->F};
  for (int i = 0; i < k->nsp; i++) {
    st[i] = k->s[i], dl[i] = k->d[i] - 1, pl[i] = k->p[i];
    pr[i] = (k->out[i] - 1) * k->s[i] + (k->k[i] - 1) * k->d[i] + 1 - k->in[i] - k->p[i];
  }
  bool ok = act_md(&src, k->nsp, k->N, k->C, k->in, k->sdt, true) &&
            act_md(&dst, k->nsp, k->N, k->F, k->out, k->ddt, true) && wei_md(k, &wei, true) &&
            dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a) == dnnl_success;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_convolution_desc_t cd;
  ok = ok && dnnl_primitive_attr_create(&attr) == dnnl_success &&
       dnnl_primitive_attr_set_output_scales(attr, k->F, 1 << 1, scales) == dnnl_success;
  if (ok && (k->relu || k->sum))
    ok = dnnl_post_ops_create(&po) == dnnl_success &&
         (!k->relu || dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0) ==
                          dnnl_success) &&
         (!k->sum || dnnl_post_ops_append_sum_v2(po, k->sum_scale, (dnnl_data_type_t)k->sumdt) ==
                         dnnl_success) &&
         (!k->postrelu || dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0) ==
                              dnnl_success) &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  ok = ok &&
       dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                  dnnl_convolution_direct, &src, &wei,
                                                  k->bias ? &bias : NULL, &dst, st, dl, pl,
                                                  pr) == dnnl_success &&
       dnnl_primitive_desc_create(&pd, &cd, attr, eng, NULL) == dnnl_success &&
       dnnl_primitive_create(&c->prim, pd) == dnnl_success;
  if (ok) {
    c->md[0] = *dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    c->md[1] = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    c->md[2] = *dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    c->md[3] = bias;
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  free(scales);
  if (!ok) { qprim_free(c); return NULL; }
  return c;
}

static double rd(const mx_tensor *t) { return ((const float *)mx_ptr(t))[0]; }
static void wr(mx_tensor *t, double v) { ((float *)mx_ptr(t))[0] = (float)v; }
/* the real value of one unit of a dtype holding range (mn, mx): core/ops/quantize.lua */
static double unit(int dt, double mn, double mx) {
  if (dt == MX_U8) return fmax(mx, 0) / 255.0;
  return fmax(fabs(mn), fabs(mx)) / 127.0;
}

/* t's data in layout `want` (dims: t's logical shape): bound as it is, or reordered
 * into *buf, made here (want's size; the caller frees it) */
static int bind(const mx_tensor *t, const dnnl_memory_desc_t *um, const dnnl_memory_desc_t *want,
                void **buf, const void **ptr) {
  const dnnl_memory_desc_t *have = t->layout ? t->layout_md : um;
  if (dnnl_memory_desc_equal(have, want)) { *ptr = mx_ptr(t); return MX_OK; }
  if (posix_memalign(buf, 64, dnnl_memory_desc_get_size(want)))
    return mx_err(MX_ENOMEM, "out of memory for the int8 convolution");
  *ptr = *buf;
  return mx_dnnl_reorder(have, mx_ptr(t), want, *buf);
}

typedef struct qcall {
  const mx_tensor *x, *w, *ws, *b, *sum;
  double xmin, xmax, smin, smax;
  bool calib;
  double mn, mx;
} qcall;

static int qrun(qkey *k, const qcall *q, mx_tensor *const *out) {
  mx_tensor *y = out[0];
  int ydt = y->dtype;
  double xu = unit(q->x->dtype, q->xmin, q->xmax);
  double ou = ydt == MX_F32 ? 1.0 : unit(ydt, q->mn, q->mx);
  const float *wsc = mx_ptr(q->ws);
  float *bq = NULL; /* the bias in the accumulator's unit */
  if (q->b) {
    if (!(bq = malloc(sizeof(float) * (size_t)(k->F ? k->F : 1))))
      return mx_err(MX_ENOMEM, "out of memory for the int8 convolution's bias");
    const float *b = mx_ptr(q->b);
    for (int64_t o = 0; o < k->F; o++) {
      double acc_unit = xu * wsc[o];
      bq[o] = acc_unit > 0 ? (float)(b[o] / acc_unit) : 0.0f;
    }
  }
  if (q->sum) k->sum_scale = (float)(unit(q->sum->dtype, q->smin, q->smax) / ou);
  k->xu = xu, k->ou = ou;
  k->wsp = (uintptr_t)wsc, k->wsver = mx_tensor_version(q->ws);
  int prev;
  double flops = 2.0 * (double)k->N * (double)k->F * (double)(k->C / k->G) * (double)k->k[0] *
                 (double)k->k[1] * (double)k->k[2] * (double)k->out[0] * (double)k->out[1] *
                 (double)k->out[2];
  k->nt = mx_dnnl_team_begin(flops, &prev);
  mx_dnnl_entry *h = NULL;
  qprim *c = mx_dnnl_cache_get(MX_DNNL_QUANT, k, sizeof *k, qbuild, qprim_free, (void *)wsc, &h);
  bool tmp = c == NULL;
  if (!c) c = qbuild(k, (void *)wsc);
  int rc = MX_OK;
  void *sbuf = NULL, *wtmp = NULL, *dbuf = NULL;
  dnnl_memory_desc_t um;
  const void *sp = NULL, *wp = NULL;
  void *dp = NULL;
  if (!c) { rc = 1; goto done; }
  /* data */
  if (!act_md(&um, k->nsp, k->N, k->C, k->in, k->sdt, k->fc)) goto bad;
  if ((rc = bind(q->x, &um, &c->md[0], &sbuf, &sp))) goto done;
  /* weights: the entry's copy while the tensor is unchanged */
  uint32_t ver = mx_tensor_version(q->w);
  if (!wei_md(k, &um, false)) goto bad;
  if (!tmp && c->wbuf && c->wsrc == mx_ptr(q->w) && c->wver == ver) {
    wp = c->wbuf;
  } else {
    void *wb = NULL;
    if (posix_memalign(&wb, 64, dnnl_memory_desc_get_size(&c->md[1]))) goto oom;
    if ((rc = mx_dnnl_reorder(&um, mx_ptr(q->w), &c->md[1], wb))) { free(wb); goto done; }
    if (tmp) {
      wtmp = wb;
    } else {
      free(c->wbuf);
      c->wbuf = wb, c->wsrc = mx_ptr(q->w), c->wver = ver;
    }
    wp = wb;
  }
  /* output: in place when its layout is the primitive's */
  if (!act_md(&um, k->nsp, k->N, k->F, k->out, k->ddt, k->fc)) goto bad;
  if (dnnl_memory_desc_equal(y->layout ? y->layout_md : &um, &c->md[2])) {
    dp = mx_ptr(y);
  } else {
    if (posix_memalign(&dbuf, 64, dnnl_memory_desc_get_size(&c->md[2]))) goto oom;
    dp = dbuf;
  }
  if (q->sum) { /* the residual into dst, in dst's layout, in its own dtype */
    dnnl_memory_desc_t sum_um, sum_want = c->md[2];
    sum_want.data_type = (dnnl_data_type_t)k->sumdt;
    if (!act_md(&sum_um, k->nsp, k->N, k->F, k->out, k->sumdt, false)) goto bad;
    const dnnl_memory_desc_t *have = q->sum->layout ? q->sum->layout_md : &sum_um;
    if (!dnnl_memory_desc_equal(have, &sum_want)) {
      if ((rc = mx_dnnl_reorder(have, mx_ptr(q->sum), &sum_want, dp))) goto done;
    } else if (mx_ptr(q->sum) != dp) { /* not in place: the residual is still read later */
      memcpy(dp, mx_ptr(q->sum), dnnl_memory_desc_get_size(&sum_want));
    }
  }
  {
    dnnl_engine_t eng = mx_dnnl_engine();
    dnnl_stream_t s = mx_dnnl_stream();
    dnnl_memory_t m[4] = {NULL, NULL, NULL, NULL};
    const void *ptr[4] = {sp, wp, dp, bq};
    static const int argk[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    dnnl_exec_arg_t args[4];
    int nargs = k->bias ? 4 : 3;
    bool ok = s != NULL;
    for (int i = 0; i < nargs && ok; i++) {
      ok = dnnl_memory_create(&m[i], &c->md[i], eng, (void *)ptr[i]) == dnnl_success;
      args[i].arg = argk[i], args[i].memory = m[i];
    }
    ok = ok && dnnl_primitive_execute(c->prim, s, nargs, args) == dnnl_success &&
         dnnl_stream_wait(s) == dnnl_success;
    for (int i = 0; i < 4; i++)
      if (m[i]) dnnl_memory_destroy(m[i]);
    if (!ok) { rc = mx_err(MX_EINVAL, "onednn: int8 convolution primitive execution failed"); goto done; }
  }
  if (dp != mx_ptr(y)) rc = mx_dnnl_reorder(&c->md[2], dp, y->layout ? y->layout_md : &um, mx_ptr(y));
  if (!rc) {
    double r = fmax(fabs(q->mn), fabs(q->mx));
    if (!q->calib) wr(out[1], 0), wr(out[2], 0);
    else if (ydt == MX_U8) wr(out[1], 0), wr(out[2], fmax(q->mx, 0));
    else if (ydt == MX_F32) wr(out[1], q->mn), wr(out[2], q->mx);
    else wr(out[1], -r), wr(out[2], r);
  }
  goto done;
bad:
  rc = mx_err(MX_EINVAL, "onednn: no descriptor for the int8 convolution");
  goto done;
oom:
  rc = mx_err(MX_ENOMEM, "out of memory for the int8 convolution");
done:
  free(sbuf), free(dbuf), free(wtmp), free(bq);
  if (c && tmp) qprim_free(c);
  else if (c) mx_dnnl_cache_put(h);
  mx_dnnl_team_end(k->nt, prev);
  return rc;
}

/* A u8 output saturates at 0 when stored, which is a relu of the value stored: the
 * activation's when nothing is summed after it, the post-sum one always. Without those
 * post-ops oneDNN's int8 kernels ran MobileNet v2 at batch 16 5-8 % faster. */
static void drop_relu_of_u8(qkey *k) {
  if (k->ddt != dnnl_u8) return;
  k->relu = k->relu && k->sum;
  k->postrelu = false;
}

int mx_dnnl_quantized_conv(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_quantized_conv *P = p;
  mx_conv_geom g;
  int rc = mx_conv_geom_of(ctx->def->name, (const struct mx_params_convolution *)p, in[0]->ndim,
                           in[0]->shape, in[3]->shape[0], &g);
  if (rc) return rc;
  int s = P->no_bias ? 5 : 6;
  qkey k;
  memset(&k, 0, sizeof k);
  k.nsp = g.nsp, k.sdt = dnnl_dt(in[0]->dtype), k.ddt = dnnl_dt(out[0]->dtype);
  k.bias = !P->no_bias, k.relu = P->act_type == MX_QUANTIZED_CONV_ACT_TYPE_RELU;
  k.sum = P->with_sum, k.postrelu = P->with_sum && P->postsum_act == MX_QUANTIZED_CONV_POSTSUM_ACT_RELU;
  drop_relu_of_u8(&k);
  k.sumdt = P->with_sum ? dnnl_dt(in[s]->dtype) : 0;
  k.N = g.N, k.C = g.C, k.F = g.F, k.G = g.G;
  for (int i = 0; i < 3; i++)
    k.in[i] = g.in[i], k.out[i] = g.out[i], k.k[i] = g.k[i], k.s[i] = g.s[i], k.d[i] = g.d[i],
    k.p[i] = g.p[i];
  qcall q = {in[0], in[3], in[4], P->no_bias ? NULL : in[5], P->with_sum ? in[s] : NULL,
             rd(in[1]), rd(in[2]), 0, 0, P->has_min_calib_range, P->min_calib_range,
             P->max_calib_range};
  if (P->with_sum) q.smin = rd(in[s + 1]), q.smax = rd(in[s + 2]);
  rc = qrun(&k, &q, out);
  return rc == 1 ? MX_DECLINE : rc;
}

int mx_dnnl_quantized_fully_connected(const mx_kctx *ctx, const void *p, int nin,
                                      mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx, (void)nin, (void)nout;
  const struct mx_params_quantized_fully_connected *P = p;
  const mx_tensor *w = in[3];
  qkey k;
  memset(&k, 0, sizeof k);
  k.fc = true, k.nsp = 2;
  k.sdt = dnnl_dt(in[0]->dtype), k.ddt = dnnl_dt(out[0]->dtype);
  k.bias = !P->no_bias, k.relu = P->act_type == MX_QUANTIZED_FULLY_CONNECTED_ACT_TYPE_RELU;
  drop_relu_of_u8(&k);
  k.F = w->shape[0], k.C = w->shape[1], k.G = 1;
  k.N = k.C ? in[0]->size / k.C : 0;
  for (int i = 0; i < 3; i++)
    k.in[i] = k.out[i] = k.k[i] = k.s[i] = k.d[i] = 1;
  qcall q = {in[0], w, in[4], P->no_bias ? NULL : in[5], NULL, rd(in[1]), rd(in[2]), 0, 0,
             P->has_min_calib_range, P->min_calib_range, P->max_calib_range};
  int rc = qrun(&k, &q, out);
  return rc == 1 ? MX_DECLINE : rc;
}

/* Whether oneDNN's int8 kernels sum exactly on this CPU: without VNNI (AVX2, AVX-512
 * before Cascade Lake, or an ISA cap below it) they multiply u8 x s8 pairs with vpmaddubsw,
 * whose 16-bit pair sums saturate (255 * 127 * 2 > 32767): a quantized conv here was 5 %
 * off the exact sum. Those CPUs take the exact kernels instead. */
static bool int8_exact(void) {
  dnnl_cpu_isa_t isa = mx_dnnl_isa();
  return (isa & dnnl_cpu_isa_avx512_core_vnni & ~dnnl_cpu_isa_avx512_core) != 0 ||
         (isa & dnnl_cpu_isa_avx2_vnni & ~dnnl_cpu_isa_avx2) != 0;
}

/* u8/s8 data, s8 weights, f32 scales and bias, an f32/s8/u8 output; a quantized output
 * needs its calibrated range, a sum a u8/s8 sum and a quantized output (the sum post-op
 * reads it in the output's buffer: same element size); the reference kernel does the
 * rest. NC... layouts, grouped convolutions of at most 2 spatial dims. */
bool mx_dnnl_quantize_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                               int nin, const mx_desc *in, int nout, const mx_desc *out,
                               const char **why) {
  (void)info, (void)nout;
  bool conv = def->name[10] == 'c'; /* quantized_conv */
  bool calib, sum = false, last = false;
  int64_t G = 1;
  if (conv) {
    const struct mx_params_quantized_conv *P = params;
    calib = P->has_min_calib_range, sum = P->with_sum, G = P->num_group;
    last = P->layout > MX_QUANTIZED_CONV_LAYOUT_NCDHW;
  } else {
    calib = ((const struct mx_params_quantized_fully_connected *)params)->has_min_calib_range;
  }
  if (in[0].dtype != MX_U8 && in[0].dtype != MX_I8) {
    *why = "oneDNN int8 layers take uint8/int8 data";
    return false;
  }
  if (in[3].dtype != MX_I8 || in[4].dtype != MX_F32) {
    *why = "oneDNN int8 layers take int8 weights and float32 scales";
    return false;
  }
  for (int i = 1; i < nin; i++)
    if (in[i].layout && !(sum && i == nin - 3)) {
      *why = "oneDNN int8 layers read their weights, scales and ranges row-major";
      return false;
    }
  if (out[0].dtype != MX_F32 && !calib) {
    *why = "a quantized output without a calibrated range: the reference kernel";
    return false;
  }
  int sdt = sum ? in[nin - 3].dtype : MX_U8;
  if (sum && (out[0].dtype == MX_F32 || (sdt != MX_U8 && sdt != MX_I8))) {
    *why = "a float32 output or sum with a sum post-op: the reference kernel";
    return false;
  }
  if (last || (G > 1 && in[0].ndim > 4)) {
    *why = "oneDNN int8 convolution: NC... layouts, grouped up to 2 spatial dims";
    return false;
  }
  if (!int8_exact()) {
    *why = "oneDNN's int8 kernels without VNNI saturate their 16-bit pair sums";
    return false;
  }
  return mx_dnnl_engine() != NULL;
}

/* quantized_conv's data output channel-last (nhwc), the primitive's layout: the next
 * quantized_conv reads it as it is */
int mx_dnnl_quantized_conv_out_layout(const mx_op_def *def, const void *params,
                                      const mx_op_info *info, int nin,
                                      mx_tensor *const *in, int i, const mx_desc *od,
                                      mx_tensor **out) {
  (void)def, (void)params, (void)nin, (void)in;
  *out = NULL;
  if (i != 0 || od->ndim < 3 || od->ndim > 5) return MX_OK;
  dnnl_memory_desc_t md;
  if (!act_md(&md, od->ndim - 2, od->shape[0], od->shape[1], od->shape + 2, dnnl_dt(od->dtype),
              true))
    return MX_OK;
  return mx_dnnl_new_blocked(od->ndim, od->shape, od->dtype, &md, out);
}

/* u8/s8 max or avg pooling oneDNN computes as MXNet (pool.c's geometry), ranges row-major */
bool mx_dnnl_quantized_pooling_supports(const mx_op_def *def, const void *params,
                                        const mx_op_info *info, int nin, const mx_desc *in,
                                        int nout, const mx_desc *out, const char **why) {
  (void)def, (void)info, (void)nin, (void)nout;
  if (in[0].dtype != MX_U8 && in[0].dtype != MX_I8) {
    *why = "oneDNN int8 pooling takes uint8/int8 data";
    return false;
  }
  if (in[1].layout || in[2].layout) {
    *why = "oneDNN int8 pooling reads its ranges row-major";
    return false;
  }
  for (int i = 0; i < in[0].ndim; i++)
    if (in[0].shape[i] == 0 || out[0].shape[i] == 0) return false; /* empty: the reference */
  if (!mx_dnnl_pool_geometry_ok(params, in[0].ndim, in[0].shape, out[0].shape)) {
    *why = "oneDNN int8 pooling takes max/avg, channel-first, valid/full";
    return false;
  }
  return mx_dnnl_engine() != NULL;
}

int mx_dnnl_quantized_pooling_out_layout(const mx_op_def *def, const void *params,
                                         const mx_op_info *info, int nin,
                                         mx_tensor *const *in, int i, const mx_desc *od,
                                         mx_tensor **out) {
  (void)def, (void)nin;
  *out = NULL;
  return i == 0 ? mx_dnnl_pool_forward_layout(params, in[0], od, out) : MX_OK;
}

/* averages rounded to nearest, halves to even (the reference: away from zero) */
int mx_dnnl_quantized_pooling(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  int rc = mx_dnnl_pool_forward(ctx, p, in[0], out[0]);
  if (rc) return rc;
  wr(out[1], rd(in[1]));
  wr(out[2], rd(in[2]));
  return MX_OK;
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_quantize_c_not_empty; /* ISO C: no empty translation unit */
