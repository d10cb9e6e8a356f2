/* shape.h — strided views shared by the shape/indexing kernels (ref and cpu) and the
 * inference helpers of core/ops/shape.c they rely on. A view maps output element
 * coordinates (row-major over shape) to an input element offset:
 * base + sum(coord[d] * stride[d]); strides are in elements and may be 0 (repeat a
 * value) or negative (flip). Up to 16 dims: tile/repeat split each axis in two. */
#ifndef MX_SHAPE_H
#define MX_SHAPE_H
#include "internal.h"

#define MX_VIEW_DIMS 16
#define MX_SLICE_NONE INT64_MIN

typedef struct mx_view {
  int ndim;
  int64_t shape[MX_VIEW_DIMS];
  int64_t stride[MX_VIEW_DIMS];
  int64_t base;
} mx_view;

/* core/ops/shape.c */
/* An inferred shape whose element count would not fit (negative dims, int64
 * overflow, more than 2^59 elements) is an error naming the op and the shape. */
int mx_shape_check_size(const char *op, int ndim, const int64_t *shape);
int mx_shape_perm(const char *op, const mx_tuple *axes, int ndim, int *perm);
int mx_slice_axis_bounds(int64_t dim, int64_t b, int64_t e, int64_t step, int64_t *begin,
                         int64_t *len);
int mx_slice_resolve(const char *op, const mx_desc *x, const mx_tuple *B, const mx_tuple *E,
                     const mx_tuple *S, int64_t *begin, int64_t *step, int64_t *shape);

/* kernels/ref/shape.c: views of the input for each op (out = gather through it) */
void mx_view_contig(mx_view *v, int ndim, const int64_t *shape);
int mx_view_for(const char *op, const void *params, const mx_tensor *x, const mx_tensor *out,
                mx_view *v);
/* The region of `data` a slice_assign writes, as a view of data's elements. */
int mx_view_slice_region(const char *op, const mx_tensor *x, const mx_tuple *B, const mx_tuple *E,
                         const mx_tuple *S, mx_view *v);
/* value (right-aligned, broadcast) as a view over region shape */
void mx_view_bcast(mx_view *v, const mx_tensor *value, const mx_view *region);
#endif
