/* kernels/dnnl/reduce.c — reduce_to on a blocked tensor (MX_BACKEND_DNNL). */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <string.h>

/* reduce_to(data, like) of a blocked data with like's shape (the gradient of a same-shape
 * add/sub: nothing to sum) is a copy that keeps the layout. */
bool mx_dnnl_reduce_to_supports(const mx_op_def *def, const void *params, const mx_op_info *info, int nin, const mx_desc *in,
                        int nout, const mx_desc *out, const char **why) {
  (void)def, (void)params, (void)nin, (void)nout, (void)why;
  if (in[0].layout != MX_LAYOUT_ONEDNN || in[0].dtype != MX_F32 || out[0].ndim != in[0].ndim)
    return false;
  for (int d = 0; d < in[0].ndim; d++)
    if (in[0].shape[d] != out[0].shape[d]) return false;
  return true;
}
int mx_dnnl_reduce_to_out_layout(const mx_op_def *def, const void *params,
                         const mx_op_info *info, int nin,
                         mx_tensor *const *in, int i, const mx_desc *od, mx_tensor **out) {
  (void)def, (void)params, (void)nin, (void)od;
  *out = NULL;
  if (i != 0 || !mx_dnnl_is_blocked(in[0])) return MX_OK;
  return mx_dnnl_new_like(in[0], in[0]->layout_md, out);
}
int mx_dnnl_reduce_to(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                  int nout, mx_tensor *const *out) {
  (void)ctx, (void)params, (void)nin, (void)nout;
  const mx_tensor *x = in[0];
  mx_tensor *y = out[0];
  if (mx_dnnl_is_blocked(y) && dnnl_memory_desc_equal(y->layout_md, x->layout_md)) {
    memcpy(mx_ptr(y), mx_ptr(x), dnnl_memory_desc_get_size(x->layout_md));
    return MX_OK;
  }
  dnnl_memory_desc_t pm;
  const dnnl_memory_desc_t *to = y->layout_md;
  int rc = MX_OK;
  if (!mx_dnnl_is_blocked(y)) {
    rc = mx_dnnl_plain_md(&pm, y->ndim, y->shape, y->dtype);
    to = &pm;
  }
  return rc ? rc : mx_dnnl_reorder(x->layout_md, mx_ptr(x), to, mx_ptr(y));
}

#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_reduce_c_not_empty; /* ISO C: no empty translation unit */
