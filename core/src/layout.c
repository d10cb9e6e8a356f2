/* layout.c — the generic side of tensor layouts: row-major copies of tensors held in a
 * backend layout, in-place conversion for every reader that is not that backend's
 * kernel, the reorder counter, and mx_tensor_layout / mx_tensor_to_layout (mx.h). */
#include "layout.h"
#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_llong reorders;
static pthread_mutex_t plain_mu = PTHREAD_MUTEX_INITIALIZER;

void mx_layout_note_reorder(void) { atomic_fetch_add_explicit(&reorders, 1, memory_order_relaxed); }
int64_t mx_layout_reorders(void) { return atomic_load(&reorders); }

int mx_tensor_layout(const mx_tensor *t) {
  return t->layout ? t->layout->code : MX_LAYOUT_ROW_MAJOR;
}

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

int mx_tensor_make_plain_slow(mx_tensor *t) {
  pthread_mutex_lock(&plain_mu);
  int rc = MX_OK;
  if (t->layout) { /* re-checked under the lock: another reader may have converted it */
    /* every pending op, readers too: a queued kernel that reads t in its layout must
     * not see the storage swapped under it */
    mx_tensor *p = NULL;
    rc = mx_engine_wait_storage(t->storage, false);
    if (!rc)
      rc = mx_tensor_new_laid(t->ndim, t->shape, t->dtype, (size_t)t->size * mx_dtype_size(t->dtype),
                              NULL, NULL, &p);
    if (!rc) rc = t->layout->to_row_major(t, p);
    if (!rc) { /* p takes t's old storage and descriptor, and frees them */
      mx_storage *s = t->storage;
      t->storage = p->storage;
      t->offset = 0;
      p->storage = s;
      p->layout = t->layout;
      p->layout_md = t->layout_md;
      t->layout_md = NULL;
      t->layout = NULL;
    }
    mx_tensor_release(p);
  }
  pthread_mutex_unlock(&plain_mu);
  return rc;
}

int mx_tensor_to_layout(mx_tensor *t, int layout, const char *format, mx_tensor **out) {
  if (!t || !out) return mx_err(MX_EINVAL, "to_layout: tensor or out is NULL");
  if (layout == MX_LAYOUT_ROW_MAJOR) {
    mx_tensor *p;
    int rc = mx_tensor_plain(t, &p);
    if (rc) return rc;
    if (p == t) { /* a new tensor, as for the other layouts */
      mx_tensor_release(p);
      return mx_tensor_to(t, mx_dev(t), t->storage->dev_id, -1, out);
    }
    *out = p;
    return MX_OK;
  }
  if (layout != MX_LAYOUT_ONEDNN)
    return mx_err(MX_EINVAL, "to_layout: unknown layout code %d", layout);
  if (!format) return mx_err(MX_EINVAL, "to_layout: a oneDNN format name is needed (\"nChw16c\")");
#ifdef MX_HAVE_ONEDNN
  return mx_dnnl_to_layout(t, format, out);
#else
  return mx_err(MX_EINVAL, "to_layout: format '%s': this build has no oneDNN", format);
#endif
}
