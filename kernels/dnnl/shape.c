/* kernels/dnnl/shape.c — the oneDNN kernels of the shape family (MX_BACKEND_DNNL): concat
 * of float32 inputs of which at least one is in oneDNN's blocked layout (an Inception or
 * DenseNet branch from a convolution), joined by oneDNN's concat primitive into the
 * layout it picks for them (the inputs' own, when they share one), so the chain of oneDNN
 * ops goes on without a reorder to row-major and back. Row-major inputs take part as
 * they are; all-row-major calls stay on the cpu kernel. Primitives are cached by (axis,
 * the inputs' descriptors) in MX_DNNL_SHAPE. */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_SRC = 64 };

/* The key: the axis, the input count and each input's descriptor (memset: padding). */
typedef struct cat_key {
  int axis, n;
  dnnl_memory_desc_t md[MAX_SRC]; /* the first n are the key (keylen stops there) */
} cat_key;

static size_t key_len(const cat_key *k) {
  return offsetof(cat_key, md) + (size_t)k->n * sizeof(dnnl_memory_desc_t);
}

/* The concat primitive and the destination descriptor it chose. */
typedef struct cat_prim {
  dnnl_primitive_t prim;
  dnnl_memory_desc_t dst;
} cat_prim;

static void cat_free(void *v) {
  cat_prim *c = v;
  if (c->prim) dnnl_primitive_destroy(c->prim);
  free(c);
}

static void *cat_build(const void *key, void *arg) {
  (void)arg;
  const cat_key *k = key;
  cat_prim *c = calloc(1, sizeof *c);
  dnnl_primitive_desc_t pd = NULL;
  bool ok = c && dnnl_concat_primitive_desc_create(&pd, NULL, k->n, k->axis, k->md, NULL,
                                                   mx_dnnl_engine()) == dnnl_success &&
            dnnl_primitive_create(&c->prim, pd) == dnnl_success;
  if (ok) {
    const dnnl_memory_desc_t *d = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    ok = d != NULL;
    if (ok) c->dst = *d;
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (!ok && c) {
    cat_free(c);
    c = NULL;
  }
  return c;
}

/* The call's key from its tensors: blocked inputs by their descriptor, row-major ones
 * by their plain one. */
static int key_of(int axis, int n, mx_tensor *const *in, cat_key *k) {
  memset(k, 0, offsetof(cat_key, md) + (size_t)n * sizeof(dnnl_memory_desc_t));
  k->axis = axis;
  k->n = n;
  for (int i = 0; i < n; i++) {
    if (mx_dnnl_is_blocked(in[i])) k->md[i] = *(const dnnl_memory_desc_t *)in[i]->layout_md;
    else {
      int rc = mx_dnnl_plain_md(&k->md[i], in[i]->ndim, in[i]->shape, in[i]->dtype);
      if (rc) return rc;
    }
  }
  return MX_OK;
}

bool mx_dnnl_concat_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                             int nin, const mx_desc *in, int nout, const mx_desc *out,
                             const char **why) {
  (void)def, (void)params, (void)info, (void)nout, (void)out, (void)why;
  if (nin < 1 || nin > MAX_SRC || mx_dnnl_engine() == NULL) return false;
  bool blocked = false;
  for (int i = 0; i < nin; i++) {
    if (in[i].dtype != MX_F32 || in[i].ndim != in[0].ndim) return false;
    blocked |= in[i].layout == MX_LAYOUT_ONEDNN;
  }
  return blocked; /* row-major joins are the cpu kernel's copies */
}

/* The output in the layout oneDNN's concat picks for these inputs. */
int mx_dnnl_concat_out_layout(const mx_op_def *def, const void *params,
                              const mx_op_info *info, int nin,
                              mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  *out = NULL;
  if (i != 0 || nin > MAX_SRC) return MX_OK;
  for (int k = 0; k < nin; k++) /* grouped weights' split dims: not this kernel's */
    if (mx_dnnl_is_blocked(in[k]) &&
        ((const dnnl_memory_desc_t *)in[k]->layout_md)->ndims != in[k]->ndim)
      return MX_OK;
  int64_t axis = ((const struct mx_params_concat *)params)->dim;
  if (axis < 0) axis += od->ndim;
  if (axis < 0 || axis >= od->ndim) return MX_OK; /* the kernel's inference reports it */
  cat_key *k = malloc(sizeof *k);
  if (!k) return mx_err(MX_ENOMEM, "%s: out of memory", def->name);
  int rc = key_of((int)axis, nin, in, k);
  mx_dnnl_entry *e;
  cat_prim *c = rc ? NULL : mx_dnnl_cache_get(MX_DNNL_SHAPE, k, key_len(k), cat_build, cat_free,
                                              NULL, &e);
  if (c) {
    rc = mx_dnnl_new_blocked(od->ndim, od->shape, od->dtype, &c->dst, out);
    mx_dnnl_cache_put(e);
  }
  free(k);
  return rc;
}

int mx_dnnl_concat(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                   int nout, mx_tensor *const *out) {
  (void)params, (void)nout;
  mx_tensor *y = out[0];
  cat_key *k = malloc(sizeof *k);
  if (!k) return mx_err(MX_ENOMEM, "%s: out of memory", ctx->def->name);
  int rc = key_of(ctx->info.axis, nin, in, k);
  mx_dnnl_entry *e = NULL;
  cat_prim *c = rc ? NULL : mx_dnnl_cache_get(MX_DNNL_SHAPE, k, key_len(k), cat_build, cat_free,
                                              NULL, &e);
  bool tmp = !c && !rc;
  if (tmp) c = cat_build(k, NULL); /* a busy entry */
  if (!c) {
    free(k);
    return rc ? rc : MX_DECLINE; /* oneDNN declined: the cpu kernel (on row-major copies) */
  }
  /* the destination: y itself when in the chosen layout, else scratch reordered into y */
  bool direct = mx_dnnl_is_blocked(y) && dnnl_memory_desc_equal(y->layout_md, &c->dst);
  void *dst = direct ? mx_ptr(y) : mx_kctx_workspace(ctx, dnnl_memory_desc_get_size(&c->dst));
  dnnl_engine_t eng = mx_dnnl_engine();
  dnnl_stream_t s = mx_dnnl_stream();
  dnnl_memory_t m[MAX_SRC + 1];
  dnnl_exec_arg_t args[MAX_SRC + 1];
  int nm = 0;
  bool ok = dst && s;
  if (!dst) rc = mx_err(MX_ENOMEM, "%s: out of memory for scratch", ctx->def->name);
  for (int i = 0; ok && i < nin; i++) {
    ok = dnnl_memory_create(&m[nm], &k->md[i], eng, mx_ptr(in[i])) == dnnl_success;
    if (ok) args[nm].arg = DNNL_ARG_MULTIPLE_SRC + i, args[nm].memory = m[nm], nm++;
  }
  if (ok) {
    ok = dnnl_memory_create(&m[nm], &c->dst, eng, dst) == dnnl_success;
    if (ok) args[nm].arg = DNNL_ARG_DST, args[nm].memory = m[nm], nm++;
  }
  ok = ok && dnnl_primitive_execute(c->prim, s, nm, args) == dnnl_success &&
       dnnl_stream_wait(s) == dnnl_success;
  for (int i = 0; i < nm; i++) dnnl_memory_destroy(m[i]);
  if (!rc && !ok) rc = mx_err(MX_EINVAL, "%s: oneDNN concat failed", ctx->def->name);
  if (!rc && !direct) { /* a row-major out= slot, or another blocked layout */
    if (mx_dnnl_is_blocked(y)) {
      rc = mx_dnnl_reorder(&c->dst, dst, y->layout_md, mx_ptr(y));
    } else {
      dnnl_memory_desc_t pm;
      rc = mx_dnnl_plain_md(&pm, y->ndim, y->shape, y->dtype);
      if (!rc) rc = mx_dnnl_reorder(&c->dst, dst, &pm, mx_ptr(y));
    }
  }
  if (tmp) cat_free(c);
  else mx_dnnl_cache_put(e);
  free(k);
  return rc;
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_shape_c_not_empty; /* ISO C: no empty translation unit */
