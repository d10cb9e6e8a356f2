/* layout.h — the registry of tensor memory layouts beyond row-major (layout.c): the
 * backend that owns a layout registers it (oneDNN's: kernels/dnnl/dnnl.c). What a
 * layout is (struct mx_layout) and how a tensor gets row-major values back are the
 * tensor's (internal.h, tensor.c). Not installed. docs/design/architecture.md, "Layouts". */
#ifndef MX_LAYOUT_H
#define MX_LAYOUT_H

#include "internal.h"

/* Makes l the layout of its code (l is not copied: static storage). MX_EINVAL for a code
 * out of range. Thread-safe; backends call it from their load constructors. */
int mx_layout_register(const mx_layout *l);
/* The registered layout of a code, NULL when none (row-major has none). */
const mx_layout *mx_layout_get(int code);

/* Counts one conversion between layouts (mx_layout_reorders, mx.h). */
void mx_layout_note_reorder(void);

#endif
