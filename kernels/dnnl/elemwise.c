/* kernels/dnnl/elemwise.c — same-layout elementwise ops on blocked inputs (MX_BACKEND_DNNL). */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <string.h>

/* add, sub, mul, maximum, minimum and relu_backward of two same-shape f32 inputs, at least one in oneDNN's layout (a residual add, the ReLU
 * gradient between blocked convolutions): an elementwise op does not care where the
 * elements sit, so both inputs are brought to ONE blocked descriptor (the first blocked
 * input's; the other reordered into scratch if it differs) and the cpu backend's own
 * kernel (the registry's entry: this file has no arithmetic of its own) runs over the
 * flat buffers, padding included: the values and their NaN rules are exactly that
 * kernel's, and the output keeps the layout. Only ops with f(0, 0) = 0
 * are taken, so blocked padding (zeros, which oneDNN expects) stays zero. */
bool mx_dnnl_same_layout_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
                          int nout, const mx_desc *out, const char **why) {
  (void)params, (void)nout, (void)out, (void)why;
  if (!def->k[MX_BACKEND_CPU].run) return false; /* the flat buffers run the cpu kernel */
  if (nin != 2 || in[0].dtype != MX_F32 || in[1].dtype != MX_F32 || in[0].ndim != in[1].ndim)
    return false;
  if (in[0].layout != MX_LAYOUT_ONEDNN && in[1].layout != MX_LAYOUT_ONEDNN) return false;
  for (int d = 0; d < in[0].ndim; d++)
    if (in[0].shape[d] != in[1].shape[d]) return false;
  return true;
}

static const mx_tensor *same_lead(mx_tensor *const *in) {
  return mx_dnnl_is_blocked(in[0]) ? in[0] : in[1];
}

int mx_dnnl_same_layout_out_layout(const mx_op_def *def, const void *params,
                           const mx_op_info *info, int nin,
                           mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)params, (void)nin, (void)od;
  *out = NULL;
  const mx_tensor *lead = same_lead(in);
  if (i != 0 || !mx_dnnl_is_blocked(lead)) return MX_OK;
  return mx_dnnl_new_like(lead, lead->layout_md, out);
}

/* A flat row-major f32 vector of n elements over data, for the cpu kernel (st: a stack
 * storage record, so scratch buffers need no real storage). */
static mx_tensor flat_alias(mx_storage *st, void *data, int64_t n) {
  memset(st, 0, sizeof *st);
  st->dev_type = MX_CPU;
  st->data = data;
  st->nbytes = st->capacity = (size_t)n * sizeof(float);
  mx_tensor a;
  memset(&a, 0, sizeof a);
  a.ndim = 1;
  a.dtype = MX_F32;
  a.shape[0] = a.size = n;
  a.storage = st;
  return a;
}

int mx_dnnl_same_layout(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                    int nout, mx_tensor *const *out) {
  (void)nin, (void)nout;
  const mx_op_def *def = ctx->def;
  const mx_tensor *lead = same_lead(in);
  const dnnl_memory_desc_t *md = lead->layout_md;
  size_t bytes = dnnl_memory_desc_get_size(md);
  int64_t n = (int64_t)(bytes / sizeof(float));
  mx_tensor *y = out[0];
  bool y_scratch = !mx_dnnl_is_blocked(y) ||
                   !dnnl_memory_desc_equal(y->layout_md, md); /* an out= slot elsewhere */
  int others = 0;
  for (int i = 0; i < 2; i++)
    if (in[i] != lead && (!mx_dnnl_is_blocked(in[i]) || !dnnl_memory_desc_equal(in[i]->layout_md, md)))
      others++;
  char *ws = NULL;
  size_t need = bytes * (size_t)(others + (y_scratch ? 1 : 0));
  if (need && !(ws = mx_kctx_workspace(ctx, need)))
    return mx_err(MX_ENOMEM, "%s: out of memory for %zu bytes of scratch", def->name, need);
  char *wp = ws;
  mx_storage st[3];
  mx_tensor a[2], r;
  for (int i = 0; i < 2; i++) {
    const mx_tensor *t = in[i];
    if (t == lead || (mx_dnnl_is_blocked(t) && dnnl_memory_desc_equal(t->layout_md, md))) {
      a[i] = flat_alias(&st[i], mx_ptr(t), n);
      continue;
    }
    dnnl_memory_desc_t pm;
    const dnnl_memory_desc_t *from = t->layout_md;
    int rc = MX_OK;
    if (!mx_dnnl_is_blocked(t)) {
      rc = mx_dnnl_plain_md(&pm, t->ndim, t->shape, t->dtype);
      from = &pm;
    }
    if (!rc) rc = mx_dnnl_reorder(from, mx_ptr(t), md, wp);
    if (rc) return rc;
    a[i] = flat_alias(&st[i], wp, n);
    wp += bytes;
  }
  r = flat_alias(&st[2], y_scratch ? (void *)wp : mx_ptr(y), n);
  mx_tensor *ins[2] = {&a[0], &a[1]}, *outs[1] = {&r};
  int rc = def->k[MX_BACKEND_CPU].run(ctx, params, 2, ins, 1, outs);
  if (!rc && y_scratch) {
    dnnl_memory_desc_t pm;
    const dnnl_memory_desc_t *to = y->layout_md;
    if (!mx_dnnl_is_blocked(y)) {
      rc = mx_dnnl_plain_md(&pm, y->ndim, y->shape, y->dtype);
      to = &pm;
    }
    if (!rc) rc = mx_dnnl_reorder(md, wp, to, mx_ptr(y));
  }
  return rc;
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_elemwise_c_not_empty; /* ISO C: no empty translation unit */
