/* shape.h — what the shape inference of core/ops/shape.c shares with the other op
 * families' inference. The kernels (ref and cpu) read the geometry inference resolved
 * into ctx->info (internal.h's mx_op_info) and share nothing else: the reference
 * kernels walk output coordinates directly, the cpu ones build their own strided views
 * (kernels/cpu/shape.c), so a spec comparing the two checks one against the other. */
#ifndef MX_SHAPE_H
#define MX_SHAPE_H
#include "internal.h"

#define MX_SLICE_NONE INT64_MIN /* a slice bound left out (MXNet's None) */

/* An inferred shape whose element count would not fit (negative dims, int64
 * overflow, more than 2^59 elements) is an error naming the op and the shape. */
int mx_shape_check_size(const char *op, int ndim, const int64_t *shape);
#endif
