/* infer.h — helpers for shape inference functions (the files in core/ops). */
#ifndef MX_INFER_H
#define MX_INFER_H
#include "internal.h"

/* Normalise a 0-based (possibly negative) axis against ndim; the error message is
 * phrased in the Lua API's 1-based convention. */
int mx_norm_axis(const char *op, const char *pname, int64_t axis, int ndim, int *out);
/* Axes list to a mask of ndim flags; n == -1 (not given) selects every axis. */
int mx_norm_axes(const char *op, const char *pname, const mx_tuple *axes, int ndim, bool *mask);
void mx_out_set(mx_out_desc *o, int ndim, const int64_t *shape, int dtype);
int mx_broadcast_shape(const char *op, const mx_tensor *a, const mx_tensor *b, int *ndim,
                       int64_t *shape);
#endif
