/* layout.c — the generic side of tensor layouts: row-major copies of tensors held in a
 * backend layout, for every reader that is not that backend's kernel. */
#include "layout.h"
#include "engine.h"

int mx_tensor_plain(mx_tensor *t, mx_tensor **out) {
  if (!t->layout) {
    mx_tensor_retain(t);
    *out = t;
    return MX_OK;
  }
  int rc = mx_engine_wait_storage(t->storage, true);
  if (rc) return rc;
  mx_tensor *p;
  if ((rc = mx_tensor_new(t->ndim, t->shape, t->dtype, MX_CPU, 0, &p))) return rc;
  if ((rc = t->layout->to_row_major(t, p))) {
    mx_tensor_release(p);
    return rc;
  }
  *out = p;
  return MX_OK;
}
