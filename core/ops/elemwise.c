/* elemwise.c — shape/dtype inference for the elementwise family beyond infer.c's
 * generic unary/binary kinds: where, broadcast_to, broadcast_like, add_n. */
#include "infer.h"

#include "mx_ops_gen.h"

#include <string.h>

/* where(cond, x, y), MXNet's rule: x and y have the same shape (the result's; dtype =
 * promote(x, y)); cond has that shape too, or is 1-D with length x's first dim and then
 * picks whole rows. The kernels read cond through info->align: its dims on x's rank
 * ((n) becomes (n, 1, ..., 1)), so both cases are one broadcast. */
int mx_infer_where(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  const mx_desc *c = in[0], *x = in[1], *y = in[2];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  bool same = x->ndim == y->ndim;
  for (int d = 0; same && d < x->ndim; d++) same = x->shape[d] == y->shape[d];
  if (!same)
    return mx_err(MX_EINVAL, "%s: x of shape %s and y of shape %s must have the same shape",
                  def->name, mx_shape_str(a, x->ndim, x->shape), mx_shape_str(b, y->ndim, y->shape));
  bool csame = c->ndim == x->ndim;
  for (int d = 0; csame && d < x->ndim; d++) csame = c->shape[d] == x->shape[d];
  bool rows = !csame && c->ndim == 1 && x->ndim >= 1 && c->shape[0] == x->shape[0];
  if (!csame && !rows)
    return mx_err(MX_EINVAL, "%s: condition of shape %s must have x's shape %s or be 1-D of "
                  "length %lld (x's first dim)", def->name, mx_shape_str(a, c->ndim, c->shape),
                  mx_shape_str(b, x->ndim, x->shape), (long long)(x->ndim ? x->shape[0] : 1));
  info->align_ndim = x->ndim;
  for (int d = 0; d < x->ndim; d++) info->align[d] = csame || d == 0 ? x->shape[d] : 1;
  mx_out_set(&out[0], x->ndim, x->shape, mx_dtype_promote(x->dtype, y->dtype));
  return MX_OK;
}

/* Checks data (aligned to the target rank as `al`) broadcasts to target. */
static int check_bcast(const char *op, const mx_desc *x, int nd, const int64_t *al,
                       const int64_t *target) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  for (int d = 0; d < nd; d++)
    if (al[d] != 1 && al[d] != target[d])
      return mx_err(MX_EINVAL, "%s: data of shape %s cannot be broadcast to %s (axis %d: %lld vs %lld)",
                    op, mx_shape_str(a, x->ndim, x->shape), mx_shape_str(b, nd, target), d + 1,
                    (long long)al[d], (long long)target[d]);
  return MX_OK;
}

/* broadcast_to(data, {shape=}): a 0 in shape keeps data's (right-aligned) dim. */
int mx_infer_broadcast_to(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_broadcast_to *bp = p;
  const mx_desc *x = in[0];
  int nd = bp->shape.n;
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (nd < x->ndim)
    return mx_err(MX_EINVAL, "%s: shape %s has fewer dims than data of shape %s", def->name,
                  mx_shape_str(a, nd, bp->shape.v), mx_shape_str(b, x->ndim, x->shape));
  int64_t target[MX_MAX_DIM], al[MX_MAX_DIM];
  for (int d = 0; d < nd; d++) {
    int j = d - (nd - x->ndim);
    al[d] = j >= 0 ? x->shape[j] : 1;
    target[d] = bp->shape.v[d];
    if (target[d] == 0 && j >= 0) target[d] = al[d];
    if (target[d] < 0)
      return mx_err(MX_EINVAL, "%s: shape %s has a negative dim", def->name,
                    mx_shape_str(a, nd, bp->shape.v));
  }
  int rc = check_bcast(def->name, x, nd, al, target);
  if (rc) return rc;
  mx_out_set(&out[0], nd, target, x->dtype);
  return MX_OK;
}

/* MXNet's broadcast_like(lhs, rhs, lhs_axes, rhs_axes): lhs's shape with each
 * lhs_axes[i] (size 1) set to rhs's size on rhs_axes[i]; the kernels broadcast lhs (its
 * own rank) to it. */
static int bcast_like_axes(const mx_op_def *def, const struct mx_params_broadcast_like *bp,
                           mx_desc *const *in, mx_desc *out, mx_op_info *info) {
  const mx_desc *x = in[0], *l = in[1];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (bp->axis.n >= 0)
    return mx_err(MX_EINVAL, "%s: give axis or lhs_axes/rhs_axes, not both", def->name);
  if (bp->lhs_axes.n < 0 || bp->rhs_axes.n < 0 || bp->lhs_axes.n != bp->rhs_axes.n)
    return mx_err(MX_EINVAL, "%s: lhs_axes and rhs_axes go together, with the same length "
                  "(got %d and %d axes)", def->name, bp->lhs_axes.n < 0 ? 0 : bp->lhs_axes.n,
                  bp->rhs_axes.n < 0 ? 0 : bp->rhs_axes.n);
  int64_t s[MX_MAX_DIM];
  bool seen[MX_MAX_DIM] = { false };
  memcpy(s, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  for (int i = 0; i < bp->lhs_axes.n; i++) {
    int f, t;
    int rc = mx_norm_axis(def->name, "lhs_axes", (int)bp->lhs_axes.v[i], x->ndim, &f);
    if (!rc) rc = mx_norm_axis(def->name, "rhs_axes", (int)bp->rhs_axes.v[i], l->ndim, &t);
    if (rc) return rc;
    if (seen[f])
      return mx_err(MX_EINVAL, "%s: lhs_axes names axis %d twice", def->name, f + 1);
    seen[f] = true;
    if (x->shape[f] != 1) /* MXNet's check: only size-1 axes grow, even to their own size */
      return mx_err(MX_EINVAL, "%s: axis %d of data %s has size %lld, not 1: it cannot be "
                    "broadcast to axis %d of like %s (size %lld)", def->name, f + 1,
                    mx_shape_str(a, x->ndim, x->shape), (long long)x->shape[f], t + 1,
                    mx_shape_str(b, l->ndim, l->shape), (long long)l->shape[t]);
    s[f] = l->shape[t];
  }
  memcpy(info->align, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  info->align_ndim = x->ndim;
  mx_out_set(&out[0], x->ndim, s, x->dtype);
  return MX_OK;
}

/* broadcast_like(data, like, {axis=}): like's shape, data's dtype. */
int mx_infer_broadcast_like(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_broadcast_like *bp = p;
  int64_t *al = info->align; /* the kernels' view of data on like's rank */
  if (bp->lhs_axes.n >= 0 || bp->rhs_axes.n >= 0) return bcast_like_axes(def, bp, in, out, info);
  int rc = mx_aligned_shape(def->name, in[0], in[1]->ndim, &bp->axis, al);
  if (rc) return rc;
  info->align_ndim = in[1]->ndim;
  rc = check_bcast(def->name, in[0], in[1]->ndim, al, in[1]->shape);
  if (rc) return rc;
  mx_out_set(&out[0], in[1]->ndim, in[1]->shape, in[0]->dtype);
  return MX_OK;
}

/* add_n(args...): every input has the first one's shape; dtype = their promotion. */
int mx_infer_add_n(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nout; (void)info;
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  int dt = in[0]->dtype;
  for (int i = 1; i < nin; i++) {
    bool same = in[i]->ndim == in[0]->ndim;
    for (int d = 0; same && d < in[0]->ndim; d++) same = in[i]->shape[d] == in[0]->shape[d];
    if (!same)
      return mx_err(MX_EINVAL, "%s: input %d of shape %s must have input 1's shape %s", def->name,
                    i + 1, mx_shape_str(a, in[i]->ndim, in[i]->shape),
                    mx_shape_str(b, in[0]->ndim, in[0]->shape));
    dt = mx_dtype_promote(dt, in[i]->dtype);
  }
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, dt);
  return MX_OK;
}

/* arctan2, ldexp: broadcast like the binary ops; integer results become float32 (NumPy). */
int mx_infer_broadcast_float(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int64_t shape[MX_MAX_DIM];
  int n, rc = mx_broadcast_shape(def->name, in[0], in[1], &n, shape);
  if (rc) return rc;
  int dt = mx_dtype_promote(in[0]->dtype, in[1]->dtype);
  mx_out_set(&out[0], n, shape, mx_dtype_is_float(dt) ? dt : MX_F32);
  return MX_OK;
}
