/* kernels/dnnl/conv.c — convolution on oneDNN (MX_BACKEND_DNNL kernels, f32): forward
 * (bias and relu / relu6 fused as the primitive's bias and post-op), backward data and backward
 * weights. Primitives are built with format "any" for every tensor, so oneDNN picks its
 * blocked layouts (nChw16c, OIhw16i16o...), and cached by geometry and team size in the
 * shared cache (dnnl.h, kinds MX_DNNL_CONV+0..2). Each tensor is bound as it is when
 * its layout is the primitive's (a blocked input from an earlier oneDNN op: no reorder),
 * else reordered into scratch; the forward's output stays blocked when its data input
 * was (the chain conv -> batch_norm -> relu -> pooling keeps oneDNN's layout). A call
 * oneDNN cannot take after all (a primitive it declines to build) returns MX_DECLINE:
 * dispatch runs the next backend. */
#include "conv.h"
#include "conv_winograd.h"
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum { K_FWD, K_BWD_DATA, K_BWD_WEIGHT };

/* The cache key: everything the primitive depends on (memset first: padding bytes count). */
typedef struct conv_key {
  int kind, nt, nsp, dt;
  bool last, bias, sum;       /* sum: convolution_sum's residual post-op */
  bool blocked;               /* info.prefer_blocked: data and output in nChw16c */
  int act;                    /* act_type: MX_CONVOLUTION_ACT_TYPE_* */
  int64_t N, C, F, G, in[3], out[3], k[3], s[3], d[3], p[3];
} conv_key;

/* The primitive and its descriptors: [0] data (src / diff_src), [1] weights (or their
 * gradient), [2] output (dst / diff_dst), [3] bias. */
typedef struct conv_prim {
  dnnl_primitive_t prim;
  dnnl_memory_desc_t md[4];
} conv_prim;

static void conv_prim_free(void *v) {
  conv_prim *c = v;
  if (c->prim) dnnl_primitive_destroy(c->prim);
  free(c);
}

/* dims (outermost first) laid out in `order` (outermost first): a plain descriptor */
static bool md_ordered(dnnl_memory_desc_t *md, int n, const int64_t *dims, const int *order,
                       int dt) {
  dnnl_dims_t dd, st;
  int64_t s = 1;
  for (int i = n - 1; i >= 0; i--) {
    st[order[i]] = s;
    s *= dims[order[i]] ? dims[order[i]] : 1;
  }
  for (int i = 0; i < n; i++) dd[i] = dims[i];
  memset(md, 0, sizeof *md);
  return dnnl_memory_desc_init_by_strides(md, n, dd, (dnnl_data_type_t)dt, st) == dnnl_success;
}

/* The user's tensors as oneDNN sees them (role 0 data, 1 weights, 2 output, 3 bias):
 * plain layouts, channel-last when the call's layout says so; grouped weights get
 * oneDNN's leading group dim (G, F/G, C/G, k...), which is the same memory. */
static bool user_md(const conv_key *k, int role, dnnl_memory_desc_t *md) {
  int64_t dims[6];
  int order[6], n = k->nsp + 2;
  if (role == 3) {
    dims[0] = k->F, order[0] = 0;
    return md_ordered(md, 1, dims, order, k->dt);
  }
  if (role != 1) {
    dims[0] = k->N, dims[1] = role == 0 ? k->C : k->F;
    for (int i = 0; i < k->nsp; i++) dims[2 + i] = role == 0 ? k->in[i] : k->out[i];
  } else {
    int g = k->G > 1;
    if (g) dims[0] = k->G;
    dims[g] = k->F / k->G, dims[g + 1] = k->C / k->G;
    for (int i = 0; i < k->nsp; i++) dims[g + 2 + i] = k->k[i];
    n += g;
  }
  /* the channel dim (or input-channel dim of the weights) goes innermost if channel-last */
  int ch = role == 1 ? n - k->nsp - 1 : 1, j = 0;
  for (int i = 0; i < n; i++)
    if (!k->last || i != ch) order[j++] = i;
  if (k->last) order[j++] = ch;
  return md_ordered(md, n, dims, order, k->dt);
}

/* Whether oneDNN runs AVX-512 kernels here, whose "any" is channel-last (AVX2's is nChw8c). */
static bool isa_avx512(void) {
  return (mx_dnnl_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
}

/* "any" descriptors of the same dims; a blocked key's 2-D forward on AVX-512 takes data and
 * output of whole 16-channel blocks in nChw16c (ungrouped only: the depthwise kernels are
 * channel-last's) */
static bool any_md(const conv_key *k, int role, dnnl_memory_desc_t *md) {
  dnnl_memory_desc_t u;
  if (!user_md(k, role, &u)) return false;
  memset(md, 0, sizeof *md);
  dnnl_format_tag_t tag = role == 3 ? dnnl_a : dnnl_format_tag_any;
  if (k->blocked && k->kind == K_FWD && k->nsp == 2 && k->G == 1 && (role == 0 || role == 2) &&
      u.dims[1] % 16 == 0 && isa_avx512())
    tag = dnnl_aBcd16b;
  return dnnl_memory_desc_init_by_tag(md, u.ndims, u.dims, u.data_type, tag) == dnnl_success;
}

static bool conv_desc(const conv_key *k, int kind, dnnl_convolution_desc_t *cd) {
  dnnl_dims_t st, dl, pl, pr;
  for (int i = 0; i < k->nsp; i++) {
    st[i] = k->s[i], dl[i] = k->d[i] - 1, pl[i] = k->p[i];
    pr[i] = (k->out[i] - 1) * k->s[i] + (k->k[i] - 1) * k->d[i] + 1 - k->in[i] - k->p[i];
  }
  dnnl_memory_desc_t m[4];
  for (int r = 0; r < 4; r++)
    if (!any_md(k, r, &m[r])) return false;
  dnnl_alg_kind_t alg = dnnl_convolution_direct;
  if (kind == K_FWD)
    return dnnl_dilated_convolution_forward_desc_init(
               cd, k->nt < 0 ? dnnl_forward_training : dnnl_forward_inference, alg, &m[0],
               &m[1], k->bias ? &m[3] : NULL, &m[2], st, dl, pl, pr) == dnnl_success;
  if (kind == K_BWD_DATA)
    return dnnl_dilated_convolution_backward_data_desc_init(cd, alg, &m[0], &m[1], &m[2], st, dl,
                                                            pl, pr) == dnnl_success;
  return dnnl_dilated_convolution_backward_weights_desc_init(cd, alg, &m[0], &m[1], NULL, &m[2],
                                                             st, dl, pl, pr) == dnnl_success;
}

static void *conv_build(const void *key, void *arg) {
  (void)arg;
  const conv_key *k = key;
  dnnl_engine_t eng = mx_dnnl_engine();
  conv_prim *c = calloc(1, sizeof *c);
  if (!c || !eng) { free(c); return NULL; }
  dnnl_primitive_desc_t pd = NULL, hint = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_convolution_desc_t cd, fd;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success;
  bool act = k->act != MX_CONVOLUTION_ACT_TYPE_NONE;
  if (ok && k->kind == K_FWD && (act || k->sum)) /* dst = act(conv + bias + dst) */
    ok = dnnl_post_ops_create(&po) == dnnl_success &&
         (!k->sum || dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success) &&
         (!act || (k->act == MX_CONVOLUTION_ACT_TYPE_RELU6
                       ? dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, 0, 6)
                       : dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0)) ==
                      dnnl_success) &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  if (ok && k->kind != K_FWD) { /* backward primitives take the forward's as a hint */
    conv_key f = *k;
    f.kind = K_FWD, f.nt = -1, f.bias = false;
    ok = conv_desc(&f, K_FWD, &fd) &&
         dnnl_primitive_desc_create(&hint, &fd, NULL, eng, NULL) == dnnl_success;
  }
  ok = ok && conv_desc(k, k->kind, &cd) &&
       dnnl_primitive_desc_create(&pd, &cd, attr, eng, hint) == dnnl_success &&
       dnnl_primitive_create(&c->prim, pd) == dnnl_success;
  if (ok) {
    static const dnnl_query_t q[3][4] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md, dnnl_query_weights_md},
        {dnnl_query_diff_src_md, dnnl_query_weights_md, dnnl_query_diff_dst_md,
         dnnl_query_weights_md},
        {dnnl_query_src_md, dnnl_query_diff_weights_md, dnnl_query_diff_dst_md,
         dnnl_query_diff_weights_md}};
    for (int r = 0; r < 4; r++) {
      const dnnl_memory_desc_t *m = dnnl_primitive_desc_query_md(pd, q[k->kind][r], r == 3);
      if (m) c->md[r] = *m;
    }
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (hint) dnnl_primitive_desc_destroy(hint);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (!ok) { conv_prim_free(c); return NULL; }
  return c;
}

/* The intra-op team for this call (dnnl.h: mx_dnnl_team_begin/end). */
static int conv_team_begin(const conv_key *k, int *prev) {
  double flops = 2.0 * (double)k->N * (double)k->F * (double)(k->C / k->G) * (double)k->k[0] *
                 (double)k->k[1] * (double)k->k[2] * (double)k->out[0] * (double)k->out[1] *
                 (double)k->out[2];
  return mx_dnnl_team_begin(flops, prev);
}
#define conv_team_end mx_dnnl_team_end

static int key_of(const char *op, int kind, const void *params, const mx_op_info *info,
                  const int64_t *dshape, int ndim, int64_t F, int dtype, bool bias, conv_key *k) {
  const struct mx_params_convolution *P = params;
  mx_conv_geom g;
  int rc = mx_conv_geom_of(op, P, ndim, dshape, F, &g);
  if (rc) return rc;
  memset(k, 0, sizeof *k);
  k->kind = kind, k->nsp = g.nsp, k->last = g.last, k->bias = bias;
  k->blocked = kind == K_FWD && info->prefer_blocked;
  k->act = kind == K_FWD ? P->act_type : MX_CONVOLUTION_ACT_TYPE_NONE;
  k->dt = dtype == MX_BF16 ? dnnl_bf16 : dnnl_f32;
  k->N = g.N, k->C = g.C, k->F = g.F, k->G = g.G;
  for (int i = 0; i < 3; i++)
    k->in[i] = g.in[i], k->out[i] = g.out[i], k->k[i] = g.k[i], k->s[i] = g.s[i],
    k->d[i] = g.d[i], k->p[i] = g.p[i];
  return MX_OK;
}

/* Scratch buffers of one call, freed together. */
typedef struct scratch { void *p[8]; int n; } scratch;
static void *scratch_get(scratch *s, size_t n) {
  if (s->n == 8) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, 64, n ? n : 64) != 0) return NULL;
  return s->p[s->n++] = p;
}
static void scratch_free(scratch *s) {
  for (int i = 0; i < s->n; i++) free(s->p[i]);
}

/* t's data in the primitive's layout `want` (for reading): t itself, or a reordered
 * copy. um: t's plain layout in the primitive's dims (user_md). */
static int bind_in(const mx_tensor *t, const dnnl_memory_desc_t *um, const dnnl_memory_desc_t *want,
                   scratch *s, void **ptr) {
  const void *src = mx_ptr(t);
  if (t->layout) {
    const dnnl_memory_desc_t *tm = t->layout_md;
    if (dnnl_memory_desc_equal(tm, want)) { *ptr = (void *)src; return MX_OK; }
    bool same_dims = tm->ndims == want->ndims;
    for (int i = 0; i < tm->ndims && same_dims; i++) same_dims = tm->dims[i] == want->dims[i];
    if (same_dims) { /* one reorder, layout to layout */
      void *buf = scratch_get(s, dnnl_memory_desc_get_size(want));
      if (!buf) return mx_err(MX_ENOMEM, "out of memory for a reorder");
      *ptr = buf;
      return mx_dnnl_reorder(tm, src, want, buf);
    }
    /* another blocked layout: to row-major first (its dims are t's shape, which may
     * differ from the primitive's: grouped weights, channel-last data) */
    dnnl_memory_desc_t pm;
    void *buf = scratch_get(s, (size_t)t->size * mx_dtype_size(t->dtype));
    int rc = buf ? mx_dnnl_plain_md(&pm, t->ndim, t->shape, t->dtype)
                 : mx_err(MX_ENOMEM, "out of memory for a reorder");
    if (rc || (rc = mx_dnnl_reorder(tm, src, &pm, buf))) return rc;
    src = buf;
  }
  if (dnnl_memory_desc_equal(um, want)) { *ptr = (void *)src; return MX_OK; }
  void *buf = scratch_get(s, dnnl_memory_desc_get_size(want));
  if (!buf) return mx_err(MX_ENOMEM, "out of memory for a reorder");
  *ptr = buf;
  return mx_dnnl_reorder(um, src, want, buf);
}

static int exec(const conv_prim *c, int nargs, const int *argk, void *const *ptr) {
  dnnl_engine_t eng = mx_dnnl_engine();
  dnnl_stream_t s = mx_dnnl_stream();
  dnnl_memory_t m[4] = {NULL, NULL, NULL, NULL};
  dnnl_exec_arg_t args[4];
  bool ok = s != NULL;
  for (int i = 0; i < nargs && ok; i++) {
    ok = dnnl_memory_create(&m[i], &c->md[i], eng, ptr[i]) == dnnl_success;
    args[i].arg = argk[i], args[i].memory = m[i];
  }
  ok = ok && dnnl_primitive_execute(c->prim, s, nargs, args) == dnnl_success &&
       dnnl_stream_wait(s) == dnnl_success;
  for (int i = 0; i < 4; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  return ok ? MX_OK : mx_err(MX_EINVAL, "onednn: convolution primitive execution failed");
}

/* One call of kind: a = the data-role tensor, b = weights role, o = output role; which of
 * them is the result (res_role) depends on kind. Returns 1 when oneDNN declined. */
static int conv_sum_fill(const mx_tensor *r, const dnnl_memory_desc_t *um,
                         const dnnl_memory_desc_t *want, scratch *s, void *dst);

/* sum (convolution_sum's residual, k0->sum): copied into the result's buffer first, the
 * primitive's sum post-op adds it. */
static int conv_dnnl(const mx_kctx *ctx, const conv_key *k0, mx_tensor *const *role,
                     const mx_tensor *bias, int res_role, const mx_tensor *sum) {
  conv_key k = *k0;
  int prev, nt = conv_team_begin(&k, &prev);
  k.nt = nt;
  mx_dnnl_entry *h;
  conv_prim *c = mx_dnnl_cache_get(MX_DNNL_CONV + k.kind, &k, sizeof k, conv_build,
                                   conv_prim_free, NULL, &h);
  bool tmp = c == NULL;
  if (!c) c = conv_build(&k, NULL); /* busy entry (or declined: built again, NULL again) */
  if (!c) { conv_team_end(nt, prev); return 1; }
  static const int argk[3][4] = {
      {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS},
      {DNNL_ARG_DIFF_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_DST, 0},
      {DNNL_ARG_SRC, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_DST, 0}};
  scratch s = {{0}, 0};
  void *ptr[4] = {NULL, NULL, NULL, NULL};
  dnnl_memory_desc_t um[4];
  int rc = MX_OK;
  for (int r = 0; r < 3 && !rc; r++) {
    if (!user_md(&k, r, &um[r])) rc = mx_err(MX_EINVAL, "onednn: no descriptor for the conv");
    else if (r != res_role) rc = bind_in(role[r], &um[r], &c->md[r], &s, &ptr[r]);
    else if (role[r]->layout ? dnnl_memory_desc_equal(role[r]->layout_md, &c->md[r])
                             : dnnl_memory_desc_equal(&um[r], &c->md[r]))
      ptr[r] = mx_ptr(role[r]); /* written in place */
    else if (!(ptr[r] = scratch_get(&s, dnnl_memory_desc_get_size(&c->md[r]))))
      rc = mx_err(MX_ENOMEM, "out of memory for the convolution's result");
  }
  if (!rc && sum) rc = conv_sum_fill(sum, &um[res_role], &c->md[res_role], &s, ptr[res_role]);
  int nargs = 3;
  if (!rc && bias) ptr[nargs++] = mx_ptr(bias);
  if (!rc) rc = exec(c, nargs, argk[k.kind], ptr);
  mx_tensor *res = role[res_role];
  if (!rc && ptr[res_role] != mx_ptr(res)) { /* computed in scratch: into the result */
    if (res->layout) {
      dnnl_memory_desc_t pm;
      void *buf = scratch_get(&s, (size_t)res->size * mx_dtype_size(res->dtype));
      rc = buf ? MX_OK : mx_err(MX_ENOMEM, "out of memory for a reorder");
      if (!rc) rc = mx_dnnl_reorder(&c->md[res_role], ptr[res_role], &um[res_role], buf);
      if (!rc) rc = mx_dnnl_plain_md(&pm, res->ndim, res->shape, res->dtype);
      if (!rc) rc = mx_dnnl_reorder(&pm, buf, res->layout_md, mx_ptr(res));
    } else {
      rc = mx_dnnl_reorder(&c->md[res_role], ptr[res_role], &um[res_role], mx_ptr(res));
    }
  }
  scratch_free(&s);
  if (tmp) conv_prim_free(c);
  else mx_dnnl_cache_put(h);
  conv_team_end(nt, prev);
  (void)ctx;
  return rc;
}

/* The forward of convolution and convolution_sum: weights prepacked for Winograd run
 * there, else (or when it declines a layout) the oneDNN primitive on the plain weights. */
static int conv_forward(const mx_kctx *ctx, conv_key *k, mx_tensor *const *in, mx_tensor *out,
                        const mx_tensor *bias, const mx_tensor *sum) {
  mx_tensor *w = in[1], *plain = NULL;
  if (mx_wino_is(w)) {
    int rc = mx_wino_conv(in[0], w, bias, sum, out, k->p, k->act);
    if (rc != MX_DECLINE) return rc;
    if ((rc = mx_tensor_plain(w, &plain))) return rc;
    w = plain;
  }
  mx_tensor *role[3] = {in[0], w, out};
  int rc = conv_dnnl(ctx, k, role, bias, 2, sum);
  if (plain) mx_tensor_release(plain);
  return rc == 1 ? MX_DECLINE : rc;
}

int mx_dnnl_convolution(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  conv_key k;
  int rc = key_of(ctx->def->name, K_FWD, p, &ctx->info, in[0]->shape, in[0]->ndim, in[1]->shape[0],
                  in[0]->dtype, nin > 2, &k);
  if (rc) return rc;
  return conv_forward(ctx, &k, in, out[0], nin > 2 ? in[2] : NULL, NULL);
}

int mx_dnnl_convolution_backward_data(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                             int nout, mx_tensor *const *out) {
  conv_key k;
  int rc = key_of(ctx->def->name, K_BWD_DATA, p, &ctx->info,
                  in[2]->shape, in[2]->ndim, in[1]->shape[0], in[2]->dtype, false, &k);
  if (rc) return rc;
  mx_tensor *role[3] = {out[0], in[1], in[0]};
  rc = conv_dnnl(ctx, &k, role, NULL, 0, NULL);
  return rc == 1 ? MX_DECLINE : rc;
}

int mx_dnnl_convolution_backward_weight(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  conv_key k;
  int rc = key_of(ctx->def->name, K_BWD_WEIGHT, p, &ctx->info,
                  in[1]->shape, in[1]->ndim, out[0]->shape[0], in[1]->dtype, false, &k);
  if (rc) return rc;
  mx_tensor *role[3] = {in[1], out[0], in[0]};
  rc = conv_dnnl(ctx, &k, role, NULL, 1, NULL);
  return rc == 1 ? MX_DECLINE : rc;
}

/* deconvolution: the backward-data primitive of the convolution with the same params
 * (mx_deconv_as_conv), then the bias added per channel */
int mx_dnnl_deconvolution(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  const struct mx_params_deconvolution *D = p;
  mx_tensor *o = out[0];
  bool last = D->layout > MX_DECONVOLUTION_LAYOUT_NCDHW;
  int64_t F = o->shape[last ? o->ndim - 1 : 1], os[5];
  struct mx_params_convolution cp;
  conv_key k;
  int rc = mx_deconv_as_conv(ctx->def->name, D, in[0]->ndim, in[0]->shape, F, &cp, os);
  if (rc || (rc = key_of(ctx->def->name, K_BWD_DATA, &cp, &ctx->info,
                         o->shape, o->ndim, in[1]->shape[0], o->dtype, false, &k)))
    return rc;
  mx_tensor *role[3] = {o, in[1], in[0]};
  rc = conv_dnnl(ctx, &k, role, NULL, 0, NULL);
  if (rc == 1) return MX_DECLINE;
  if (rc || nin < 3) return rc;
  const float *b = mx_ptr(in[2]);
  float *v = mx_ptr(o);
  int64_t per = o->size / (o->shape[0] ? o->shape[0] : 1) / (F ? F : 1);
  if (last)
    for (int64_t e = 0; e < o->size; e++) v[e] += b[e % F];
  else
    for (int64_t e = 0; e < o->size; e++) v[e] += b[(e / per) % F];
  return MX_OK;
}

/* f32, and bf16 for the convolution ops (not deconvolution: its bias pass is f32);
 * every input's layout is bound by the kernel. A bf16 primitive oneDNN declines (a CPU
 * without bf16 support) runs the reference kernel. */
bool mx_dnnl_conv_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
                          int nout, const mx_desc *out, const char **why) {
  (void)params, (void)nout, (void)out;
  bool bf16 = def->name[0] == 'c'; /* convolution* */
  for (int i = 0; i < nin; i++)
    if (in[i].dtype != MX_F32 && !(bf16 && in[i].dtype == MX_BF16)) {
      *why = "oneDNN convolution takes float32 (and bfloat16)";
      return false;
    }
  return mx_dnnl_engine() != NULL;
}

/* A new tensor of od in the layout primitive k's role r has, laid out as `like` (a
 * blocked input: the oneDNN layout object); *out stays NULL when that cannot be had. */
static int relay_new(conv_key *k, int r, const mx_desc *od, mx_tensor **out) {
  int prev;
  k->nt = conv_team_begin(k, &prev); /* the team the kernel will get, as its cache key */
  conv_team_end(k->nt, prev);
  mx_dnnl_entry *h;
  conv_prim *c = mx_dnnl_cache_get(MX_DNNL_CONV + k->kind, k, sizeof *k, conv_build,
                                   conv_prim_free, NULL, &h);
  if (!c) return MX_OK;
  int rc = MX_OK;
  dnnl_memory_desc_t plain;
  /* a layout of its own only where oneDNN chose one: a row-major choice stays plain */
  if (!mx_dnnl_plain_md(&plain, od->ndim, od->shape, od->dtype) &&
      !dnnl_memory_desc_equal(&plain, &c->md[r]))
    rc = mx_dnnl_new_blocked(od->ndim, od->shape, od->dtype, &c->md[r], out);
  mx_dnnl_cache_put(h);
  return rc;
}

/* The forward's weights in the layout its primitive reads them in, made once for a graph
 * whose weights are constants (graph_compile.c): bind_in then takes them as they are
 * instead of reordering them into scratch on every call. convolution and
 * convolution_sum (bias after the residual). */
int mx_dnnl_convolution_prepack(const mx_op_def *def, const void *params,
                                const mx_op_info *info, int nin,
                                mx_tensor *const *in, int k, mx_tensor **out) {
  *out = NULL;
  const mx_tensor *x = in[0], *w = in[1];
  bool sum = strcmp(def->name, "convolution_sum") == 0;
  conv_key key;
  if (k != 1 || x->ndim < 3 || w->layout ||
      key_of(def->name, K_FWD, params, info, x->shape, x->ndim, w->shape[0], x->dtype,
             nin > (sum ? 3 : 2), &key) || key.last)
    return MX_OK; /* the kernel reports the error, or binds the weights as they are */
  key.sum = sum;
  if (mx_wino_wants(key.nsp, key.last, x->dtype, key.C, key.F, key.G, key.k, key.s, key.d,
                    key.out) && w->dtype == MX_F32 && w->ndim == 4 && !w->layout &&
      w->shape[0] == key.F && w->shape[1] == key.C)
    return mx_wino_prepack(w, out);
  int prev;
  key.nt = conv_team_begin(&key, &prev); /* the team the kernel will get, as its cache key */
  conv_team_end(key.nt, prev);
  mx_dnnl_entry *h;
  conv_prim *c = mx_dnnl_cache_get(MX_DNNL_CONV + K_FWD, &key, sizeof key, conv_build,
                                   conv_prim_free, NULL, &h);
  if (!c) return MX_OK;
  dnnl_memory_desc_t um;
  int rc = MX_OK;
  if (user_md(&key, 1, &um) && !dnnl_memory_desc_equal(&um, &c->md[1]) &&
      !(rc = mx_dnnl_new_blocked(w->ndim, w->shape, w->dtype, &c->md[1], out))) {
    rc = mx_dnnl_reorder(&um, mx_ptr(w), &c->md[1], mx_ptr(*out));
    if (rc) {
      mx_tensor_release(*out);
      *out = NULL;
    }
  }
  mx_dnnl_cache_put(h);
  return rc;
}

static bool is_blocked(const mx_tensor *t) {
  return t->layout && t->layout->code == MX_LAYOUT_ONEDNN;
}

/* The forward's output is in the layout oneDNN chose for it, whatever the data input's
 * (MX_LAYOUTS_CHOOSE_OUT: a network's first convolution starts the blocked chain that
 * batch_norm, the activations and pooling keep); the data gradient stays in oneDNN's
 * layout when the output's gradient is in it (NC layouts: a blocked tensor's dims are its
 * logical shape, which is then the primitive's). */
int mx_dnnl_convolution_out_layout(const mx_op_def *def, const void *params,
                           const mx_op_info *info, int nin,
                           mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  *out = NULL;
  const mx_tensor *x = in[0];
  conv_key k;
  if (i != 0 || x->ndim < 3 ||
      key_of(def->name, K_FWD, params, info, x->shape, x->ndim, in[1]->shape[0], x->dtype, nin > 2,
             &k) || k.last)
    return MX_OK; /* the kernel reports the error, or writes row-major */
  return relay_new(&k, 2, od, out);
}
int mx_dnnl_convolution_backward_data_out_layout(const mx_op_def *def, const void *params,
                                    const mx_op_info *info, int nin,
                                    mx_tensor *const *in, int i, const mx_desc *od,
                                    mx_tensor **out) {
  (void)nin;
  *out = NULL;
  const mx_tensor *g = in[0], *x = in[2];
  conv_key k;
  if (i != 0 || !is_blocked(g) ||
      key_of(def->name, K_BWD_DATA, params, info,
             x->shape, x->ndim, in[1]->shape[0], g->dtype, false, &k) || k.last)
    return MX_OK;
  return relay_new(&k, 0, od, out);
}


/* ---- convolution_sum: one forward primitive with post-ops [sum 1, act_type's] ---- */



/* The residual r into dst in the primitive's dst layout `want` (um: r's plain layout):
 * bound as it is when already in it (a blocked residual from an earlier oneDNN op: a copy,
 * no reorder), else reordered. dst == r's memory (out= the residual): nothing to copy. */
static int conv_sum_fill(const mx_tensor *r, const dnnl_memory_desc_t *um,
                         const dnnl_memory_desc_t *want, scratch *s, void *dst) {
  void *src = NULL;
  int rc = bind_in(r, um, want, s, &src);
  if (!rc && src != dst) memcpy(dst, src, dnnl_memory_desc_get_size(want));
  return rc;
}

int mx_dnnl_convolution_sum(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  conv_key k;
  int rc = key_of(ctx->def->name, K_FWD, p, &ctx->info, in[0]->shape, in[0]->ndim, in[1]->shape[0],
                  in[0]->dtype, nin > 3, &k);
  if (rc) return rc;
  k.sum = true;
  return conv_forward(ctx, &k, in, out[0], nin > 3 ? in[3] : NULL, in[2]);
}

/* the output in the layout oneDNN chose, as convolution's (mx_dnnl_convolution_out_layout) */
int mx_dnnl_convolution_sum_out_layout(const mx_op_def *def, const void *params,
                               const mx_op_info *info, int nin,
                               mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  *out = NULL;
  const mx_tensor *x = in[0];
  conv_key k;
  if (i != 0 || x->ndim < 3 ||
      key_of(def->name, K_FWD, params, info, x->shape, x->ndim, in[1]->shape[0], x->dtype, nin > 3,
             &k) || k.last)
    return MX_OK;
  k.sum = true;
  return relay_new(&k, 2, od, out);
}


#endif /* MX_HAVE_ONEDNN */
typedef int mx_cpu_conv_c_not_empty; /* ISO C: no empty translation unit */
