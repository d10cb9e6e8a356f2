/* kernels/dnnl/pool.c — the oneDNN kernels of the pool family (MX_BACKEND_DNNL): pooling and
 * pooling_backward for max and avg in float32 or bfloat16 (every tensor of the call the
 * same: bf16 training under mx.amp pools the bf16 convolution outputs), channel-first
 * layouts, valid and full conventions; the forward also serves the quantize family's
 * quantized_pooling on u8/s8 data (mx_dnnl_pool_forward, kernels/dnnl/quantize.c). Inputs
 * may be row-major or oneDNN-blocked (MX_LAYOUT_ONEDNN, from a
 * preceding oneDNN op); a blocked input gives a blocked output in the format oneDNN picks,
 * so a conv -> bn -> relu -> pool chain runs with no reorder. Everything else (sum, lp,
 * same, channel-last, float64, avg windows that MXNet divides differently) stays on the
 * reference kernels. Primitives are cached by (geometry, source descriptor) in the
 * MX_DNNL_POOL range: +0 forward inference, +1 forward training + backward. */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdlib.h>
#include <string.h>

/* ---- blocked tensors: mx_dnnl_new_blocked (dnnl.h) makes them in dnnl.c's layout */
static bool is_blocked(const mx_tensor *t) {
  return t->layout && t->layout->code == MX_LAYOUT_ONEDNN;
}

/* ---- geometry --------------------------------------------------------------------------- */

typedef struct {
  int alg, ns, blocked, dt; /* dt: the data's MX dtype, also the output's */
  dnnl_dims_t k, s, pl, pr, ys; /* DNNL_MAX_NDIMS each (the API reads that many) */
  dnnl_memory_desc_t src; /* the data's descriptor: plain, or the blocked input's */
} pool_key;

/* oneDNN's window geometry for pooling data xs -> ys under P; false when oneDNN cannot
 * compute what MXNet does (the reference kernels take the call). */
static bool pool_geom(const struct mx_params_pooling *P, int nd, const int64_t *xs,
                      const int64_t *ys, pool_key *k) {
  if (nd < 3 || nd > 5 || (P->has_layout && P->layout >= MX_POOLING_LAYOUT_NWC)) return false;
  if (P->pooling_convention == MX_POOLING_POOLING_CONVENTION_SAME) return false;
  bool avg = P->pool_type == MX_POOLING_POOL_TYPE_AVG;
  if (!avg && P->pool_type != MX_POOLING_POOL_TYPE_MAX) return false;
  memset(k, 0, sizeof *k);
  k->ns = nd - 2;
  k->alg = avg ? (P->count_include_pad ? dnnl_pooling_avg_include_padding
                                       : dnnl_pooling_avg_exclude_padding)
               : dnnl_pooling_max;
  for (int i = 0; i < nd; i++) k->ys[i] = ys[i];
  for (int d = 0; d < k->ns; d++) {
    int64_t n = xs[2 + d], o = ys[2 + d];
    int64_t kk = P->global_pool ? n : P->kernel.v[d];
    int64_t s = P->global_pool || P->stride.n <= 0 ? 1 : P->stride.v[d];
    int64_t p = P->global_pool || P->pad.n <= 0 ? 0 : P->pad.v[d];
    /* right padding that gives exactly o windows (full: past the data; valid: p, oneDNN
     * floors like MXNet) */
    int64_t pr = (o - 1) * s + kk - n - p;
    if (pr < p) pr = p;
    /* MXNet's avg divisor stops at the padded extent; oneDNN's counts the whole window */
    if (avg && P->count_include_pad && pr > p) return false;
    if (p >= kk || pr >= kk || o < 1) return false;
    k->k[d] = kk, k->s[d] = s, k->pl[d] = p, k->pr[d] = pr;
  }
  return true;
}

bool mx_dnnl_pool_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
                          int nout, const mx_desc *out, const char **why) {
  (void)nout;
  pool_key k;
  const mx_desc *x = nin == 1 ? &in[0] : &in[1];
  const mx_desc *y = nin == 1 ? &out[0] : &in[0];
  int dt = in[0].dtype;
  if (dt != MX_F32 && dt != MX_BF16) return false;
  for (int i = 0; i < nin; i++)
    if (in[i].dtype != dt) return false;
  if (out[0].dtype != dt) return false;
  (void)def;
  for (int i = 0; i < x->ndim; i++)
    if (x->shape[i] == 0 || y->shape[i] == 0) return false; /* empty: the ref kernels */
  if (!pool_geom(params, x->ndim, x->shape, y->shape, &k)) {
    *why = "oneDNN pooling takes max/avg, channel-first, valid/full";
    return false;
  }
  return true;
}

static int src_md(const mx_tensor *t, dnnl_memory_desc_t *md) {
  if (is_blocked(t)) {
    memcpy(md, t->layout_md, sizeof *md);
    return MX_OK;
  }
  return mx_dnnl_plain_md(md, t->ndim, t->shape, t->dtype);
}

/* ---- the cached primitives ------------------------------------------------------------ */

typedef struct {
  dnnl_primitive_t fwd, bwd;
  dnnl_memory_desc_t dst, ws; /* forward's dst (and workspace: max training) */
  bool has_ws;
} pool_prim;

static void prim_free(void *o) {
  pool_prim *p = o;
  if (p->fwd) dnnl_primitive_destroy(p->fwd);
  if (p->bwd) dnnl_primitive_destroy(p->bwd);
  free(p);
}

/* dst: plain for plain data, oneDNN's choice for blocked data, in the data's dtype */
static int dst_md(const pool_key *k, dnnl_memory_desc_t *md) {
  int nd = k->ns + 2;
  if (!k->blocked) {
    int64_t s[5];
    for (int i = 0; i < nd; i++) s[i] = k->ys[i];
    return mx_dnnl_plain_md(md, nd, s, k->dt);
  }
  memset(md, 0, sizeof *md);
  return dnnl_memory_desc_init_by_tag(md, nd, k->ys, k->src.data_type, dnnl_format_tag_any) ==
                 dnnl_success ? MX_OK : MX_EINVAL;
}

/* training: forward_training (+ workspace) and the backward primitive */
static void *prim_build(const pool_key *k, bool train) {
  dnnl_engine_t eng = mx_dnnl_engine();
  pool_prim *p = calloc(1, sizeof *p);
  dnnl_memory_desc_t dmd;
  dnnl_pooling_desc_t fd, bd;
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  bool ok = p && dst_md(k, &dmd) == MX_OK &&
            dnnl_pooling_forward_desc_init(&fd, train ? dnnl_forward_training
                                                      : dnnl_forward_inference,
                                           (dnnl_alg_kind_t)k->alg, &k->src, &dmd, k->s, k->k,
                                           k->pl, k->pr) == dnnl_success &&
            dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL) == dnnl_success &&
            dnnl_primitive_create(&p->fwd, fpd) == dnnl_success;
  if (ok) {
    p->dst = *dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    p->has_ws = ws && dnnl_memory_desc_get_size(ws) > 0;
    if (p->has_ws) p->ws = *ws;
  }
  if (ok && train)
    ok = dnnl_pooling_backward_desc_init(&bd, (dnnl_alg_kind_t)k->alg, &k->src, &p->dst, k->s,
                                         k->k, k->pl, k->pr) == dnnl_success &&
         dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd) == dnnl_success &&
         dnnl_primitive_create(&p->bwd, bpd) == dnnl_success;
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (!ok && p) {
    prim_free(p);
    p = NULL;
  }
  return p;
}
static void *build_fwd(const void *key, void *arg) { (void)arg; return prim_build(key, false); }
static void *build_bwd(const void *key, void *arg) { (void)arg; return prim_build(key, true); }

/* A cached primitive set, or (busy entry) a fresh one the caller frees (*tmp). */
static pool_prim *prim_get(const pool_key *k, bool train, mx_dnnl_entry **e, bool *tmp) {
  void *(*b)(const void *, void *) = train ? build_bwd : build_fwd;
  pool_prim *p = mx_dnnl_cache_get(MX_DNNL_POOL + (train ? 1 : 0), k, sizeof *k, b, prim_free,
                                   NULL, e);
  *tmp = p == NULL;
  if (!p && mx_dnnl_engine()) p = b(k, NULL);
  return p;
}
static void prim_put(pool_prim *p, mx_dnnl_entry *e, bool tmp) {
  if (tmp && p) prim_free(p);
  else mx_dnnl_cache_put(e);
}

/* The team for `work` source elements: one thread per POOL_GRAIN of them, through the
 * shared oneDNN team (dnnl.h: mx_dnnl_team_begin/end, sized in flops). */
#define POOL_GRAIN ((int64_t)1 << 16)
static int team_begin(int64_t work, int *prev) {
  return mx_dnnl_team_begin((double)work * (MX_DNNL_FLOPS_PER_THREAD / (double)POOL_GRAIN), prev);
}
#define team_end mx_dnnl_team_end

/* Runs primitive p with n (arg, md, data) triples, synchronously, on a thread team sized
 * by the first descriptor. */
static int exec(dnnl_primitive_t p, int n, const int *args, const dnnl_memory_desc_t *const *mds,
                void *const *data) {
  int64_t work = 1;
  for (int i = 0; i < mds[0]->ndims; i++) work *= mds[0]->dims[i];
  int prev, nt = team_begin(work, &prev);
  dnnl_memory_t m[4] = {NULL, NULL, NULL, NULL};
  dnnl_exec_arg_t ea[4];
  dnnl_stream_t s = mx_dnnl_stream();
  bool ok = s != NULL;
  for (int i = 0; ok && i < n; i++) {
    ok = dnnl_memory_create(&m[i], mds[i], mx_dnnl_engine(), data[i]) == dnnl_success;
    ea[i].arg = args[i];
    ea[i].memory = m[i];
  }
  ok = ok && dnnl_primitive_execute(p, s, n, ea) == dnnl_success &&
       dnnl_stream_wait(s) == dnnl_success;
  for (int i = 0; i < n; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  team_end(nt, prev);
  return ok ? MX_OK : mx_err(MX_EINVAL, "pooling: oneDNN primitive execution failed");
}

static bool same_md(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b) {
  return dnnl_memory_desc_equal(a, b) != 0;
}

/* ---- forward ------------------------------------------------------------------------------ */

static int fwd_key(const void *params, const mx_tensor *x, const int64_t *ys, pool_key *k) {
  if (!pool_geom(params, x->ndim, x->shape, ys, k))
    return mx_err(MX_EINVAL, "pooling: not a oneDNN pooling");
  k->blocked = is_blocked(x);
  k->dt = x->dtype;
  return src_md(x, &k->src);
}

bool mx_dnnl_pool_geometry_ok(const void *params, int nd, const int64_t *xs, const int64_t *ys) {
  pool_key k;
  return pool_geom(params, nd, xs, ys, &k);
}

int mx_dnnl_pool_forward_layout(const void *params, const mx_tensor *x, const mx_desc *od,
                                mx_tensor **out) {
  *out = NULL;
  if (!is_blocked(x)) return MX_OK;
  pool_key k;
  int rc = fwd_key(params, x, od->shape, &k);
  if (rc) return rc;
  mx_dnnl_entry *e;
  bool tmp;
  pool_prim *p = prim_get(&k, false, &e, &tmp);
  if (!p) return mx_err(MX_EINVAL, "pooling: no oneDNN primitive for this call");
  rc = mx_dnnl_new_blocked(od->ndim, od->shape, x->dtype, &p->dst, out);
  prim_put(p, e, tmp);
  return rc;
}

/* A blocked input gives a blocked output in the primitive's dst format. */
int mx_dnnl_pooling_out_layout(const mx_op_def *def, const void *params,
                           const mx_op_info *info, int nin,
                           mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)nin;
  *out = NULL;
  if (i != 0) return MX_OK;
  return mx_dnnl_pool_forward_layout(params, in[0], od, out);
}

int mx_dnnl_pooling(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                    int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  return mx_dnnl_pool_forward(ctx, params, in[0], out[0]);
}

int mx_dnnl_pool_forward(const mx_kctx *ctx, const void *params, const mx_tensor *x,
                         mx_tensor *y) {
  pool_key k;
  int rc = fwd_key(params, x, y->shape, &k);
  if (rc) return rc;
  mx_dnnl_entry *e;
  bool tmp;
  pool_prim *p = prim_get(&k, false, &e, &tmp);
  if (!p && k.dt == MX_BF16) return MX_DECLINE; /* no bf16 pooling on this CPU: the reference */
  if (!p) return mx_err(MX_EINVAL, "%s: no oneDNN primitive for this call", ctx->def->name);
  static const int args[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
  const dnnl_memory_desc_t *mds[2] = {&k.src, &p->dst};
  dnnl_memory_desc_t ym;
  if (!(rc = src_md(y, &ym)) && same_md(&ym, &p->dst)) {
    void *data[2] = {mx_ptr(x), mx_ptr(y)};
    rc = exec(p->fwd, 2, args, mds, data);
  } else if (!rc) { /* an out= slot in another layout: compute into scratch, reorder */
    void *ws = mx_kctx_workspace(ctx, dnnl_memory_desc_get_size(&p->dst));
    void *data[2] = {mx_ptr(x), ws};
    rc = ws ? exec(p->fwd, 2, args, mds, data)
            : mx_err(MX_ENOMEM, "%s: out of memory for scratch", ctx->def->name);
    if (!rc) rc = mx_dnnl_reorder(&p->dst, ws, &ym, mx_ptr(y));
  }
  prim_put(p, e, tmp);
  return rc;
}

/* ---- backward: forward training (max: the workspace of argmax positions), then backward */

int mx_dnnl_pooling_backward_out_layout(const mx_op_def *def, const void *params,
                          const mx_op_info *info, int nin,
                          mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)params, (void)nin;
  *out = NULL;
  if (i != 0 || !is_blocked(in[1])) return MX_OK;
  return mx_dnnl_new_blocked(od->ndim, od->shape, in[1]->dtype, in[1]->layout_md, out);
}

static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

int mx_dnnl_pooling_backward(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                   int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const mx_tensor *g = in[0], *x = in[1];
  mx_tensor *dx = out[0];
  pool_key k;
  int rc = fwd_key(params, x, g->shape, &k);
  if (rc) return rc;
  mx_dnnl_entry *e;
  bool tmp;
  pool_prim *p = prim_get(&k, true, &e, &tmp);
  if (!p && k.dt == MX_BF16) return MX_DECLINE; /* no bf16 pooling on this CPU: the reference */
  if (!p) return mx_err(MX_EINVAL, "%s: no oneDNN primitive for this call", ctx->def->name);
  dnnl_memory_desc_t gm, dm;
  if ((rc = src_md(g, &gm)) || (rc = src_md(dx, &dm))) goto done;
  /* scratch: the forward's dst (max), its workspace, ograd in the dst format, dx */
  bool greo = !same_md(&gm, &p->dst), dreo = !same_md(&dm, &k.src);
  size_t ny = p->has_ws ? up64(dnnl_memory_desc_get_size(&p->dst)) : 0;
  size_t nw = p->has_ws ? up64(dnnl_memory_desc_get_size(&p->ws)) : 0;
  size_t ng = greo ? up64(dnnl_memory_desc_get_size(&p->dst)) : 0;
  size_t nd = dreo ? up64(dnnl_memory_desc_get_size(&k.src)) : 0;
  char *ws = mx_kctx_workspace(ctx, ny + nw + ng + nd + 64);
  if (!ws) {
    rc = mx_err(MX_ENOMEM, "%s: out of memory for scratch", ctx->def->name);
    goto done;
  }
  void *gp = greo ? ws + ny + nw : mx_ptr(g);
  void *dp = dreo ? ws + ny + nw + ng : mx_ptr(dx);
  if (greo && (rc = mx_dnnl_reorder(&gm, mx_ptr(g), &p->dst, gp))) goto done;
  if (p->has_ws) { /* recompute the forward for oneDNN's argmax workspace */
    static const int fa[3] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_WORKSPACE};
    const dnnl_memory_desc_t *fm[3] = {&k.src, &p->dst, &p->ws};
    void *fdata[3] = {mx_ptr(x), ws, ws + ny};
    if ((rc = exec(p->fwd, 3, fa, fm, fdata))) goto done;
  }
  static const int ba[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_WORKSPACE};
  const dnnl_memory_desc_t *bm[3] = {&p->dst, &k.src, &p->ws};
  void *bdata[3] = {gp, dp, ws + ny};
  if ((rc = exec(p->bwd, p->has_ws ? 3 : 2, ba, bm, bdata))) goto done;
  if (dreo) rc = mx_dnnl_reorder(&k.src, dp, &dm, mx_ptr(dx));
done:
  prim_put(p, e, tmp);
  return rc;
}


#endif /* MX_HAVE_ONEDNN */
typedef int mx_pool_c_not_empty; /* ISO C: no empty translation unit */
