/* layout.h — tensor memory layouts beyond row-major (layout.c; the oneDNN layouts in
 * kernels/cpu). Not installed. */
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

#endif
