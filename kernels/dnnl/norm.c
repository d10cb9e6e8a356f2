/* kernels/dnnl/norm.c — batch_norm and its backward on oneDNN (MX_BACKEND_DNNL).
 * Only data in oneDNN's blocked layout (MX_LAYOUT_ONEDNN, from a oneDNN conv) with the
 * channel axis 2: the output keeps that layout, so conv -> batch_norm -> relu runs with no
 * reorder. Row-major calls stay on the cpu kernels' own loops (kernels/cpu/norm.c). The batch mean and (biased) variance
 * come from oneDNN; the inverse std and the moving update are done here, per channel. */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double invstd_of(double var, double eps) {
  return var == 0 && eps == 0 ? 0 : 1 / sqrt(var + eps);
}

typedef struct {
  int prop;            /* dnnl_forward_training / dnnl_forward_inference */
  unsigned flags;
  float eps;
  dnnl_memory_desc_t md;
} bn_dnnl_key;

static void *bn_dnnl_build(const void *key, void *arg) {
  (void)arg;
  const bn_dnnl_key *k = key;
  dnnl_batch_normalization_desc_t d;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t p = NULL;
  if (dnnl_batch_normalization_forward_desc_init(&d, (dnnl_prop_kind_t)k->prop, &k->md, k->eps,
                                                 k->flags) == dnnl_success &&
      dnnl_primitive_desc_create(&pd, &d, NULL, mx_dnnl_engine(), NULL) == dnnl_success &&
      dnnl_primitive_create(&p, pd) != dnnl_success)
    p = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  return p;
}
static void bn_dnnl_destroy(void *p) { dnnl_primitive_destroy(p); }

bool mx_dnnl_batch_norm_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
                             int nout, const mx_desc *out, const char **why) {
  (void)def, (void)nin, (void)nout, (void)out, (void)why;
  const struct mx_params_batch_norm *P = params;
  if (in[0].layout != MX_LAYOUT_ONEDNN || in[0].dtype != MX_F32) return false;
  if (P->axis != 1 || in[0].ndim < 3 || in[0].ndim > 5) return false;
  /* a fused relu in training would need oneDNN's workspace for its backward */
  if (P->act_type != MX_BATCH_NORM_ACT_TYPE_NONE && P->training && !P->use_global_stats)
    return false;
  for (int i = 1; i < 5; i++)
    if (in[i].dtype != MX_F32 || in[i].layout != MX_LAYOUT_ROW_MAJOR) return false;
  return true;
}

/* Output 0 in the input's blocked layout: a copy of its descriptor, the same layout
 * (the tensor frees the descriptor with the layout's free_md). */
/* ~flops per element of a batch norm forward (two passes: statistics, normalise); the
 * team size follows it (dnnl.h: one thread per MX_DNNL_FLOPS_PER_THREAD) */
#define BN_FLOPS_PER_ELEM 8.0

int mx_dnnl_batch_norm_out_layout(const mx_op_def *def, const void *params,
                              const mx_op_info *info, int nin,
                              mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)params, (void)nin;
  *out = NULL;
  if (i != 0 || !in[0]->layout || in[0]->layout->code != MX_LAYOUT_ONEDNN) return MX_OK;
  dnnl_memory_desc_t *m = malloc(sizeof *m);
  if (!m) return mx_err(MX_ENOMEM, "batch_norm: out of host memory for a layout descriptor");
  memcpy(m, in[0]->layout_md, sizeof *m);
  int rc = mx_tensor_new_laid(od->ndim, od->shape, od->dtype, dnnl_memory_desc_get_size(m),
                              in[0]->layout, m, out);
  if (rc) free(m);
  return rc;
}

int mx_dnnl_batch_norm(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_batch_norm *P = params;
  const mx_tensor *x = in[0];
  mx_tensor *y = out[0];
  int64_t c = x->shape[1];
  bool batch = P->training && !P->use_global_stats;
  bn_dnnl_key k;
  memset(&k, 0, sizeof k);
  k.prop = batch ? dnnl_forward_training : dnnl_forward_inference;
  k.flags = dnnl_use_shift | (P->fix_gamma ? 0u : dnnl_use_scale) |
            (batch ? 0u : dnnl_use_global_stats) |
            (P->act_type == MX_BATCH_NORM_ACT_TYPE_RELU ? dnnl_fuse_norm_relu : 0u);
  k.eps = (float)P->eps;
  memcpy(&k.md, x->layout_md, sizeof k.md);
  size_t ysz = dnnl_memory_desc_get_size(&k.md);
  bool scratch_y = y->layout == NULL; /* a row-major out= slot: compute blocked, reorder */
  float *ws = mx_kctx_workspace(ctx, sizeof(float) * (size_t)(2 * c) + 64 + (scratch_y ? ysz : 0));
  if (!ws) return mx_err(MX_ENOMEM, "batch_norm: out of memory (workspace)");
  float *bm = ws, *bv = ws + c;
  void *ydata = scratch_y ? (void *)((char *)ws + (((sizeof(float) * (size_t)(2 * c)) + 63) & ~(size_t)63))
                          : mx_ptr(y);
  mx_dnnl_entry *e = NULL;
  dnnl_primitive_t p = mx_dnnl_cache_get(MX_DNNL_NORM + 0, &k, sizeof k, bn_dnnl_build,
                                         bn_dnnl_destroy, NULL, &e);
  bool tmp = p == NULL;
  if (!p) p = bn_dnnl_build(&k, NULL);
  if (!p) return mx_err(MX_EINVAL, "batch_norm: oneDNN batch normalization unavailable");
  dnnl_memory_desc_t vmd;
  int rc = mx_dnnl_plain_md(&vmd, 1, &c, MX_F32);
  dnnl_stream_t s = mx_dnnl_stream();
  dnnl_engine_t eng = mx_dnnl_engine();
  dnnl_memory_t m[6] = {NULL, NULL, NULL, NULL, NULL, NULL};
  const void *ptr[6] = {mx_ptr(x), ydata, mx_ptr(in[1]), mx_ptr(in[2]),
                        batch ? (void *)bm : mx_ptr(in[3]), batch ? (void *)bv : mx_ptr(in[4])};
  const int argk[6] = {DNNL_ARG_SRC, DNNL_ARG_DST, DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN,
                       DNNL_ARG_VARIANCE};
  bool ok = !rc && s;
  for (int i = 0; i < 6 && ok; i++)
    ok = dnnl_memory_create(&m[i], i < 2 ? &k.md : &vmd, eng, (void *)ptr[i]) == dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[6];
    int na = 0;
    for (int i = 0; i < 6; i++) {
      if (i == 2 && P->fix_gamma) continue;
      args[na].arg = argk[i], args[na].memory = m[i], na++;
    }
    int prev, nt = mx_dnnl_team_begin(BN_FLOPS_PER_ELEM * (double)x->size, &prev);
    ok = dnnl_primitive_execute(p, s, na, args) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
    mx_dnnl_team_end(nt, prev);
  }
  for (int i = 0; i < 6; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (tmp) dnnl_primitive_destroy(p);
  else mx_dnnl_cache_put(e);
  if (!ok) return rc ? rc : mx_err(MX_EINVAL, "batch_norm: oneDNN execution failed");
  /* oneDNN normalises the padded channels of a block too, with a zero variance: with
   * eps 0 that is 0 * inf, NaN in the padding, which the next convolution reads (its
   * zero weights there do not cancel a NaN). Padding must stay zero (dnnl.h). */
  if (!scratch_y) mx_dnnl_zero_pad(&k.md, ydata);
  if (scratch_y) {
    dnnl_memory_desc_t pm;
    if ((rc = mx_dnnl_plain_md(&pm, y->ndim, y->shape, y->dtype))) return rc;
    if ((rc = mx_dnnl_reorder(&k.md, ydata, &pm, mx_ptr(y)))) return rc;
  }
  float *mo = mx_ptr(out[1]), *so = mx_ptr(out[2]);
  const float *mmv = mx_ptr(in[3]), *mvv = mx_ptr(in[4]);
  for (int64_t j = 0; j < c; j++) {
    double mean = batch ? bm[j] : mmv[j], var = batch ? bv[j] : mvv[j];
    mo[j] = (float)mean;
    so[j] = (float)invstd_of(var, P->eps);
    if (batch) {
      float *mm = mx_ptr(in[3]), *mv = mx_ptr(in[4]);
      double mom = P->momentum;
      mm[j] = (float)(mm[j] * mom + mean * (1 - mom));
      mv[j] = (float)(mv[j] * mom + var * (1 - mom));
    }
  }
  return MX_OK;
}

/* batch_norm_backward on blocked data: ddata in data's layout (ograd reordered into it
 * when it comes in another), dgamma and dbeta row-major. The variance oneDNN wants is
 * recovered from the saved inverse std (1/invstd^2, with eps 0). Scale and shift go
 * packed (dnnl_use_scaleshift, a (2, C) tensor; gamma 1 with fix_gamma): oneDNN 2.6's
 * backward with separate dnnl_use_shift fails at execution (oneDNN issue #1717). */
typedef struct {
  unsigned flags;
  float eps;
  dnnl_memory_desc_t md;
} bnb_dnnl_key;

static void *bnb_dnnl_build(const void *key, void *arg) {
  (void)arg;
  const bnb_dnnl_key *k = key;
  dnnl_batch_normalization_desc_t fd, bd;
  dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
  dnnl_primitive_t p = NULL;
  dnnl_engine_t eng = mx_dnnl_engine();
  if (dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &k->md, k->eps,
                                                 k->flags) == dnnl_success &&
      dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL) == dnnl_success &&
      dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &k->md, &k->md, k->eps,
                                                  k->flags) == dnnl_success &&
      dnnl_primitive_desc_create(&bpd, &bd, NULL, eng, fpd) == dnnl_success &&
      dnnl_primitive_create(&p, bpd) != dnnl_success)
    p = NULL;
  if (bpd) dnnl_primitive_desc_destroy(bpd);
  if (fpd) dnnl_primitive_desc_destroy(fpd);
  return p;
}

bool mx_dnnl_batch_norm_backward_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin,
                              const mx_desc *in, int nout, const mx_desc *out, const char **why) {
  (void)def, (void)nin, (void)nout, (void)out, (void)why;
  const struct mx_params_batch_norm_backward *P = params;
  if (in[1].layout != MX_LAYOUT_ONEDNN || in[1].dtype != MX_F32) return false;
  if (P->axis != 1 || in[1].ndim < 3 || in[1].ndim > 5 || in[0].dtype != MX_F32) return false;
  for (int i = 2; i < 5; i++)
    if (in[i].dtype != MX_F32 || in[i].layout != MX_LAYOUT_ROW_MAJOR) return false;
  return true;
}

/* ddata (output 0) in the data's (input 2's) blocked layout */
int mx_dnnl_batch_norm_backward_out_layout(const mx_op_def *def, const void *params,
                               const mx_op_info *info, int nin,
                               mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)nin;
  mx_tensor *const sw[1] = {in[1]};
  return i == 0 ? mx_dnnl_batch_norm_out_layout(def, params, info, 1, sw, 0, od, out)
                : (*out = NULL, MX_OK);
}

int mx_dnnl_batch_norm_backward(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const struct mx_params_batch_norm_backward *P = params;
  const mx_tensor *dy = in[0], *x = in[1];
  mx_tensor *dx = out[0];
  int64_t c = x->shape[1];
  bnb_dnnl_key k;
  memset(&k, 0, sizeof k);
  k.flags = dnnl_use_scaleshift | (P->global_stats ? dnnl_use_global_stats : 0u);
  k.eps = 0; /* the variance passed below already holds eps: invstd = 1/sqrt(var') */
  memcpy(&k.md, x->layout_md, sizeof k.md);
  size_t sz = dnnl_memory_desc_get_size(&k.md);
  bool dy_same = dy->layout && dy->layout->code == MX_LAYOUT_ONEDNN &&
                 dnnl_memory_desc_equal(dy->layout_md, &k.md);
  bool dx_blocked = dx->layout != NULL;
  size_t head = ((sizeof(float) * (size_t)(5 * c)) + 63) & ~(size_t)63;
  char *ws = mx_kctx_workspace(ctx, head + (dy_same ? 0 : sz) + (dx_blocked ? 0 : sz) + 64);
  if (!ws) return mx_err(MX_ENOMEM, "batch_norm_backward: out of memory (workspace)");
  float *var = (float *)ws, *ss = var + c, *dss = ss + 2 * c; /* (2, C) scaleshift, its diff */
  const float *gam = mx_ptr(in[2]);
  for (int64_t j = 0; j < c; j++) ss[j] = P->fix_gamma ? 1.0f : gam[j], ss[c + j] = 0;
  void *dyp = dy_same ? mx_ptr(dy) : ws + head;
  void *dxp = dx_blocked ? mx_ptr(dx) : ws + head + (dy_same ? 0 : sz);
  int rc = MX_OK;
  const float *istd = mx_ptr(in[4]);
  for (int64_t j = 0; j < c; j++) /* istd 0 (zero variance, eps 0): MXNet's ddata is 0 */
    var[j] = istd[j] > 0 ? 1.0f / (istd[j] * istd[j]) : 1e30f;
  if (!dy_same) {
    if (dy->layout) rc = mx_dnnl_reorder(dy->layout_md, mx_ptr(dy), &k.md, dyp);
    else {
      dnnl_memory_desc_t pm;
      if (!(rc = mx_dnnl_plain_md(&pm, dy->ndim, dy->shape, dy->dtype)))
        rc = mx_dnnl_reorder(&pm, mx_ptr(dy), &k.md, dyp);
    }
    if (rc) return rc;
  }
  mx_dnnl_entry *e = NULL;
  dnnl_primitive_t p = mx_dnnl_cache_get(MX_DNNL_NORM + 1, &k, sizeof k, bnb_dnnl_build,
                                         bn_dnnl_destroy, NULL, &e);
  bool tmp = p == NULL;
  if (!p) p = bnb_dnnl_build(&k, NULL);
  if (!p) return mx_err(MX_EINVAL, "batch_norm_backward: oneDNN batch normalization unavailable");
  dnnl_memory_desc_t vmd, smd;
  int64_t sdims[2] = {2, c};
  rc = mx_dnnl_plain_md(&vmd, 1, &c, MX_F32);
  if (!rc) rc = mx_dnnl_plain_md(&smd, 2, sdims, MX_F32);
  dnnl_stream_t s = mx_dnnl_stream();
  dnnl_engine_t eng = mx_dnnl_engine();
  enum { NM = 7 };
  dnnl_memory_t m[NM] = {NULL};
  const void *ptr[NM] = {mx_ptr(x), dyp, dxp, mx_ptr(in[3]), var, ss, dss};
  const int argk[NM] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_SRC, DNNL_ARG_MEAN,
                        DNNL_ARG_VARIANCE, DNNL_ARG_SCALE_SHIFT, DNNL_ARG_DIFF_SCALE_SHIFT};
  bool ok = !rc && s;
  for (int i = 0; i < NM && ok; i++)
    ok = dnnl_memory_create(&m[i], i < 3 ? &k.md : i < 5 ? &vmd : &smd, eng, (void *)ptr[i]) ==
         dnnl_success;
  if (ok) {
    dnnl_exec_arg_t args[NM];
    int na = 0;
    for (int i = 0; i < NM; i++) args[na].arg = argk[i], args[na].memory = m[i], na++;
    int prev, nt = mx_dnnl_team_begin(2 * BN_FLOPS_PER_ELEM * (double)x->size, &prev);
    ok = dnnl_primitive_execute(p, s, na, args) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
    mx_dnnl_team_end(nt, prev);
  }
  for (int i = 0; i < NM; i++)
    if (m[i]) dnnl_memory_destroy(m[i]);
  if (tmp) dnnl_primitive_destroy(p);
  else mx_dnnl_cache_put(e);
  if (!ok) return rc ? rc : mx_err(MX_EINVAL, "batch_norm_backward: oneDNN execution failed");
  float *dg = mx_ptr(out[1]), *db = mx_ptr(out[2]);
  for (int64_t j = 0; j < c; j++) dg[j] = P->fix_gamma ? 0.0f : dss[j], db[j] = dss[c + j];
  /* oneDNN writes whole channel blocks of diff_src: the padded channels get a zero
   * variance and, with the eps 0 above, an inf inverse std, so NaN there. The next
   * primitive (the convolution's backward data, which sums over the padded output
   * channels) reads that padding: it must be zero (dnnl.h). */
  if (dx_blocked) mx_dnnl_zero_pad(&k.md, dxp);
  if (!dx_blocked) {
    dnnl_memory_desc_t pm;
    if ((rc = mx_dnnl_plain_md(&pm, dx->ndim, dx->shape, dx->dtype))) return rc;
    if ((rc = mx_dnnl_reorder(&k.md, dxp, &pm, mx_ptr(dx)))) return rc;
  }
  return MX_OK;
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_norm_c_not_empty; /* ISO C: no empty translation unit */
