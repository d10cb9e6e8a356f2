/* layout.h — tensor memory layouts beyond row-major (layout.c; the oneDNN layouts in
 * kernels/cpu/onednn.c). Not installed. docs/design/architecture.md, "Layouts". */
#ifndef MX_LAYOUT_H
#define MX_LAYOUT_H

#include "internal.h"

/* A backend layout: how a tensor's data is arranged, and how to get row-major back. */
typedef struct mx_layout {
  const char *name;
  int code;                                  /* MX_LAYOUT_* (mx.h) */
  /* src (this layout) into dst (row-major, same shape and dtype, CPU), synchronously;
   * src's pending writes are done */
  int (*to_row_major)(const mx_tensor *src, mx_tensor *dst);
  void (*free_md)(void *md);                 /* frees a tensor's layout_md */
} mx_layout;

/* A new reference to a row-major tensor with t's values: t itself when it is row-major,
 * else a converted copy (waits for t's pending writes). */
int mx_tensor_plain(mx_tensor *t, mx_tensor **out);

/* Converts t to row-major in place: waits for every pending op on t, then swaps its
 * storage for a row-major one holding the same values, under a process-wide lock (two
 * readers of one blocked tensor convert it once). A no-op for row-major tensors; every
 * reader that is not a kernel accepting the layout calls it first (data, item, totable,
 * copies, views, save). */
int mx_tensor_make_plain_slow(mx_tensor *t);
static inline int mx_tensor_make_plain(mx_tensor *t) {
  return MX_UNLIKELY(t->layout != NULL) ? mx_tensor_make_plain_slow(t) : MX_OK;
}

/* A new CPU tensor (never a cell) whose storage is nbytes (a layout's padded size) and
 * whose layout is l with descriptor md (owned by the tensor from here on, even on
 * failure it is not: the caller frees md when this fails). l NULL: row-major. */
int mx_tensor_new_laid(int ndim, const int64_t *shape, int dtype, size_t nbytes,
                       const mx_layout *l, void *md, mx_tensor **out);

/* Counts one conversion between layouts (mx_layout_reorders, mx.h). */
void mx_layout_note_reorder(void);

/* Lets a backend's kernel choose its outputs' layout: before allocating output i of a
 * call that keeps an input in a non-row-major layout, dispatch calls fn; it sets *out to
 * a new tensor of od's shape and dtype in the layout the kernel will write, or leaves it
 * NULL (row-major). out= slots stay as given. dispatch.c. */
typedef int (*mx_out_layout_fn)(const mx_op_def *def, const void *params, int nin,
                                mx_tensor *const *in, int i, const mx_desc *od,
                                mx_tensor **out);
int mx_kernel_set_out_layout(int op, int backend, mx_out_layout_fn fn);
/* Whether some backend's kernel of op may choose its output's layout (a registered
 * out-layout function: oneDNN's blocked chain; MX_LAYOUTS_CHOOSE_OUT kernels register
 * one too, dispatch reads it); the graph executor leaves such outputs
 * to the op instead of planning row-major buffers for them. */
bool mx_kernel_picks_layout(int op);
/* The out-layout function of op's kernel for backend (NULL: none); for callers that
 * allocate a kernel's outputs themselves (the inference runtime's plan). */
mx_out_layout_fn mx_kernel_out_layout(int op, int backend);
/* In mx_kernel_register's layouts mask: call the kernel's out-layout function for every
 * call, not only for calls that keep an input in a backend layout, so an op can start a
 * chain in its own layout from row-major inputs (convolution: oneDNN's choice). */
#define MX_LAYOUTS_CHOOSE_OUT (1u << 31)

#ifdef MX_HAVE_ONEDNN
/* mx_tensor_to_layout's oneDNN side (kernels/cpu/onednn.c). */
int mx_dnnl_to_layout(mx_tensor *t, const char *format, mx_tensor **out);
#endif

#endif
