/* layout.c — the generic side of tensor layouts: the layouts backends register, row-major
 * copies of tensors held in a backend layout, in-place conversion for every reader that
 * is not that backend's kernel, the reorder counter, and mx_tensor_layout /
 * mx_tensor_to_layout (mx.h). Which layouts exist is the backends' business: this file
 * only calls their hooks. */
#include "layout.h"
#include "engine.h"

#include <pthread.h>
#include <stdatomic.h>

static atomic_llong reorders;

#define MAX_LAYOUTS 8
static _Atomic(const mx_layout *) layouts[MAX_LAYOUTS];

int mx_layout_register(const mx_layout *l) {
  if (!l || l->code <= MX_LAYOUT_ROW_MAJOR || l->code >= MAX_LAYOUTS || !l->to_row_major ||
      !l->from_row_major || !l->free_md)
    return mx_err(MX_EINVAL, "layout_register: bad layout (code %d)", l ? l->code : -1);
  atomic_store(&layouts[l->code], l);
  return MX_OK;
}

const mx_layout *mx_layout_get(int code) {
  return code > MX_LAYOUT_ROW_MAJOR && code < MAX_LAYOUTS ? atomic_load(&layouts[code]) : NULL;
}

void mx_layout_note_reorder(void) { atomic_fetch_add_explicit(&reorders, 1, memory_order_relaxed); }
int64_t mx_layout_reorders(void) { return atomic_load(&reorders); }

int mx_tensor_layout(const mx_tensor *t) {
  return t->layout ? t->layout->code : MX_LAYOUT_ROW_MAJOR;
}

int mx_tensor_to_layout(mx_tensor *t, int layout, const char *format, mx_tensor **out) {
  if (!t || !out) return mx_err(MX_EINVAL, "to_layout: tensor or out is NULL");
  if (t->stype) return mx_err(MX_EINVAL, "to_layout: sparse tensors have no backend layouts");
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
  const mx_layout *l = mx_layout_get(layout);
  if (!l)
    return mx_err(MX_EINVAL, "to_layout: layout code %d: no backend of this build provides it",
                  layout);
  if (!format) return mx_err(MX_EINVAL, "to_layout: layout %s needs a format name", l->name);
  if (!l->to_format) return mx_err(MX_EINVAL, "to_layout: layout %s takes no format", l->name);
  return l->to_format(t, format, out);
}
