/* infer.h — helpers for shape inference functions (the files in core/ops). */
#ifndef MX_INFER_H
#define MX_INFER_H
#include "internal.h"

/* Normalise a 0-based (possibly negative) axis against ndim; the error message is
 * phrased in the Lua API's 1-based convention. */
int mx_norm_axis(const char *op, const char *pname, int64_t axis, int ndim, int *out);
/* Axes list to a mask of ndim flags; n == -1 (not given) selects every axis. */
int mx_norm_axes(const char *op, const char *pname, const mx_tuple *axes, int ndim, bool *mask);
void mx_out_set(mx_desc *o, int ndim, const int64_t *shape, int dtype);
int mx_broadcast_shape(const char *op, const mx_desc *a, const mx_desc *b, int *ndim,
                       int64_t *shape);
/* data's dims placed on a rank-`ndim` shape: right-aligned when axis is absent (n = -1),
 * else at the positions not listed in axis (those get size 1); x->ndim must then be
 * ndim - axis->n. Used by broadcast_like / reduce_to with an `axis` (reduction grads). */
int mx_aligned_shape(const char *op, const mx_desc *x, int ndim, const mx_tuple *axis,
                     int64_t *shape);
#endif
