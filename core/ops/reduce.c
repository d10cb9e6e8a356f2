/* reduce.c — shape/dtype inference for reductions (sum, mean, prod, max, min, norm,
 * argmax, argmin, reduce_to). Their params structs share the prefix
 * {mx_tuple axis; bool keepdims;} (see the op table), read here as mx_params_sum. */
#include "infer.h"

#include "mx_ops_gen.h"

/* Output shape of reducing `x` over mask (keepdims: reduced dims become 1). */
static int reduced_shape(const mx_desc *x, const bool *mask, bool keepdims, int64_t *shape) {
  int n = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (!mask[d]) shape[n++] = x->shape[d];
    else if (keepdims) shape[n++] = 1;
  }
  return n;
}

/* Reductions with no identity (max/min/argmax...) reject an empty reduced extent
 * that would have to produce a value. */
static int check_nonempty(const mx_op_def *def, const mx_desc *x, const bool *mask,
                          int onDim, const int64_t *oshape) {
  int64_t r = 1, o = mx_shape_prod(onDim, oshape);
  for (int d = 0; d < x->ndim; d++) if (mask[d]) r *= x->shape[d];
  if (r == 0 && o > 0) {
    char b[MX_SHAPE_BUF];
    return mx_err(MX_EINVAL, "%s: cannot reduce over an empty axis of data of shape %s (no identity)",
                  def->name, mx_shape_str(b, x->ndim, x->shape));
  }
  return MX_OK;
}

static int infer(const mx_op_def *def, const void *p, mx_desc *const *in, mx_desc *out,
                 mx_op_info *info, int kind) {
  const struct mx_params_sum *rp = p;
  const mx_desc *x = in[0];
  bool *mask = info->axes; /* the kernels' reduction mask */
  int rc = mx_norm_axes(def->name, "axis", &rp->axis, x->ndim, mask);
  if (rc) return rc;
  int64_t shape[MX_MAX_DIM];
  int n = reduced_shape(x, mask, rp->keepdims, shape);
  if (kind == 2 && (rc = check_nonempty(def, x, mask, n, shape))) return rc;
  int dt = x->dtype;
  if (kind == 1 && !mx_dtype_is_float(dt)) dt = MX_F32;
  if (kind == 3) dt = MX_BOOL;
  mx_out_set(&out[0], n, shape, dt);
  return MX_OK;
}

/* sum, prod: same dtype (integer sums accumulate in double, then convert). */
int mx_infer_reduce(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  return infer(def, p, in, out, info, 0);
}
/* mean, norm: integer inputs give float32. */
int mx_infer_reduce_float(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  return infer(def, p, in, out, info, 1);
}
/* norm: like mean, and ord must be 1 or 2. */
int mx_infer_norm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_norm *np = p;
  if (np->ord != 1 && np->ord != 2)
    return mx_err(MX_EINVAL, "%s: ord must be 1 or 2, got %lld", def->name, (long long)np->ord);
  return infer(def, p, in, out, info, 1);
}
/* max, min: same dtype; an empty reduced extent is an error. */
int mx_infer_reduce_minmax(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  return infer(def, p, in, out, info, 2);
}

/* argmax, argmin: {bool has_axis; int64_t axis; bool keepdims}; int64 indices. */
int mx_infer_argreduce(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_argmax *ap = p;
  const mx_desc *x = in[0];
  bool mask[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) mask[d] = !ap->has_axis;
  info->axis = -1; /* the kernels' axis; -1: the flattened input */
  if (ap->has_axis && x->ndim > 0) {
    int a, rc = mx_norm_axis(def->name, "axis", ap->axis, x->ndim, &a);
    if (rc) return rc;
    mask[a] = true;
    info->axis = a;
  }
  int64_t shape[MX_MAX_DIM];
  int n = reduced_shape(x, mask, ap->keepdims, shape);
  int rc = check_nonempty(def, x, mask, n, shape);
  if (rc) return rc;
  mx_out_set(&out[0], n, shape, MX_I64);
  return MX_OK;
}

/* reduce_to(data, like, {axis=}): like's shape, data's dtype; like (aligned to data's
 * rank: right-aligned, or with size-1 dims at `axis`) must broadcast to data. */
int mx_infer_reduce_to(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_reduce_to *rp = p;
  const mx_desc *x = in[0], *like = in[1];
  int64_t al[MX_MAX_DIM];
  int rc = mx_aligned_shape(def->name, like, x->ndim, &rp->axis, al);
  if (rc) return rc;
  for (int d = 0; d < x->ndim; d++)
    if (al[d] != 1 && al[d] != x->shape[d]) {
      char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
      return mx_err(MX_EINVAL, "%s: cannot reduce data of shape %s to shape %s (axis %d: %lld vs %lld)",
                    def->name, mx_shape_str(a, x->ndim, x->shape),
                    mx_shape_str(b, like->ndim, like->shape), d + 1, (long long)x->shape[d],
                    (long long)al[d]);
    }
  /* the kernels' reduction mask: data dims that like (aligned) has as 1 */
  for (int d = 0; d < x->ndim; d++) info->axes[d] = al[d] == 1 && x->shape[d] != 1;
  mx_out_set(&out[0], like->ndim, like->shape, x->dtype);
  return MX_OK;
}

/* cumsum: {bool has_axis; int64_t axis; bool has_dtype; int dtype}. With axis: data's
 * shape (info->axis, 0-based); without: 1-D over the flattened data (info->axis -1). */
int mx_infer_cumsum(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_cumsum *cp = p;
  const mx_desc *x = in[0];
  int dt = cp->has_dtype && cp->dtype >= 0 ? (int)cp->dtype : x->dtype;
  if (dt == MX_BOOL)
    return mx_err(MX_EINVAL, "%s: dtype bool is not a sum dtype", def->name);
  info->axis = -1;
  if (!cp->has_axis) {
    int64_t n = mx_shape_prod(x->ndim, x->shape);
    mx_out_set(&out[0], 1, &n, dt);
    return MX_OK;
  }
  int a, rc = mx_norm_axis(def->name, "axis", cp->axis, x->ndim, &a);
  if (rc) return rc;
  info->axis = a;
  mx_out_set(&out[0], x->ndim, x->shape, dt);
  return MX_OK;
}

/* moments: {mx_tuple axes; bool keepdims}; mean and var of the reduced shape, data's dtype. */
int mx_infer_moments(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_moments *mp = p;
  const mx_desc *x = in[0];
  int rc = mx_norm_axes(def->name, "axes", &mp->axes, x->ndim, info->axes);
  if (rc) return rc;
  int64_t shape[MX_MAX_DIM];
  int n = reduced_shape(x, info->axes, mp->keepdims, shape);
  mx_out_set(&out[0], n, shape, x->dtype);
  mx_out_set(&out[1], n, shape, x->dtype);
  return MX_OK;
}

/* any, all: bool results (MXNet's np.any/np.all); both have an identity, so empty
 * extents are fine. */
int mx_infer_reduce_bool(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  return infer(def, p, in, out, info, 3);
}
