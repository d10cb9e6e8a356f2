/* infer.c — shape and dtype inference shared by op families. Each function is named
 * mx_infer_<kind> and referenced by `infer = "<kind>"` in core/ops/optable.lua. */
#include "infer.h"

#include <string.h>

int mx_norm_axis(const char *op, const char *pname, int64_t axis, int ndim, int *out) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= (ndim ? ndim : 1) || (ndim == 0 && axis != 0 && axis != -1))
    /* messages use the Lua (1-based) convention: that is what the user typed */
    /* 1-based for the user: axis + 1 through uint64 (axis may be INT64_MAX) */
    return mx_err(MX_EINVAL, "%s: %s=%s%llu is out of range for a %d-d input (valid: 1..%d or -%d..-1)",
                  op, pname, axis < 0 ? "-" : "",
                  axis < 0 ? 0ull - (unsigned long long)axis : (unsigned long long)axis + 1, ndim,
                  ndim, ndim);
  *out = (int)a;
  return MX_OK;
}

int mx_norm_axes(const char *op, const char *pname, const mx_tuple *axes, int ndim,
                 bool *mask) {
  for (int i = 0; i < ndim; i++) mask[i] = axes->n < 0;
  for (int i = 0; i < axes->n; i++) {
    int a;
    int rc = mx_norm_axis(op, pname, axes->v[i], ndim, &a);
    if (rc) return rc;
    if (mask[a])
      return mx_err(MX_EINVAL, "%s: %s lists axis %d twice", op, pname, a + 1);
    mask[a] = true;
  }
  return MX_OK;
}

void mx_out_set(mx_desc *o, int ndim, const int64_t *shape, int dtype) {
  o->ndim = ndim;
  if (ndim) memcpy(o->shape, shape, sizeof(int64_t) * (size_t)ndim);
  o->dtype = dtype;
}

int mx_broadcast_shape(const char *op, const mx_desc *a, const mx_desc *b, int *ndim,
                       int64_t *shape) {
  int n = a->ndim > b->ndim ? a->ndim : b->ndim;
  for (int i = 0; i < n; i++) {
    int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
      return mx_err(MX_EINVAL,
                    "%s: shapes %s and %s cannot be broadcast together (axis %d: %lld vs %lld)",
                    op, mx_shape_str(x, a->ndim, a->shape), mx_shape_str(y, b->ndim, b->shape),
                    i + 1, (long long)da, (long long)db);
    }
    shape[i] = da == 1 ? db : da;
  }
  *ndim = n;
  return MX_OK;
}

int mx_aligned_shape(const char *op, const mx_desc *x, int ndim, const mx_tuple *axis,
                     int64_t *shape) {
  char b[MX_SHAPE_BUF];
  if (axis->n < 0) {
    if (x->ndim > ndim)
      return mx_err(MX_EINVAL, "%s: data of shape %s has more dims than the target (%d)", op,
                    mx_shape_str(b, x->ndim, x->shape), ndim);
    for (int d = 0; d < ndim; d++)
      shape[d] = d < ndim - x->ndim ? 1 : x->shape[d - (ndim - x->ndim)];
    return MX_OK;
  }
  bool ins[MX_MAX_DIM];
  int rc = mx_norm_axes(op, "axis", axis, ndim, ins);
  if (rc) return rc;
  if (x->ndim != ndim - axis->n)
    return mx_err(MX_EINVAL, "%s: data of shape %s must have %d dims (target %d dims minus %d axes)",
                  op, mx_shape_str(b, x->ndim, x->shape), ndim - axis->n, ndim, axis->n);
  for (int d = 0, j = 0; d < ndim; d++) shape[d] = ins[d] ? 1 : x->shape[j++];
  return MX_OK;
}

/* Elementwise unary: output like the input. */
int mx_infer_same(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)def; (void)p; (void)nin;
  for (int i = 0; i < nout; i++) mx_out_set(&out[i], in[0]->ndim, in[0]->shape, in[0]->dtype);
  info->rng_draws = mx_shape_prod(in[0]->ndim, in[0]->shape); /* random *_like ops */
  return MX_OK;
}

/* Elementwise unary that produces floats: integer inputs give float32 (exp, log...). */
int mx_infer_same_float(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)def; (void)p; (void)nin;
  int dt = mx_dtype_is_float(in[0]->dtype) ? in[0]->dtype : MX_F32;
  for (int i = 0; i < nout; i++) mx_out_set(&out[i], in[0]->ndim, in[0]->shape, dt);
  return MX_OK;
}

/* Binary with NumPy broadcasting and dtype promotion. */
int mx_infer_broadcast(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  int64_t shape[MX_MAX_DIM];
  int n, rc = mx_broadcast_shape(def->name, in[0], in[1], &n, shape);
  if (rc) return rc;
  mx_out_set(&out[0], n, shape, mx_dtype_promote(in[0]->dtype, in[1]->dtype));
  return MX_OK;
}

/* Creation ops: params start with {dev_type, dev_id}, then a `shape` tuple and a
 * `dtype` (see the optable entries); both found through the param table. */
int mx_infer_creation(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)in; (void)nout;
  const mx_tuple *shape = NULL;
  int32_t dtype = MX_F32;
  for (int i = 0; i < def->nparams; i++) {
    const char *base = (const char *)p + def->params[i].offset;
    if (strcmp(def->params[i].name, "shape") == 0) shape = (const mx_tuple *)base;
    if (strcmp(def->params[i].name, "dtype") == 0) dtype = *(const int32_t *)base;
  }
  if (!shape) return mx_err(MX_EINVAL, "%s: op table entry lacks a shape param", def->name);
  if (dtype < 0) dtype = MX_F32;
  char b[MX_SHAPE_BUF];
  for (int i = 0; i < shape->n; i++)
    if (shape->v[i] < 0)
      return mx_err(MX_EINVAL, "%s: negative dimension in shape %s", def->name,
                    mx_shape_str(b, shape->n, shape->v));
  /* the element count must fit before anything multiplies the dims (signed overflow) */
  int rc = mx_shape_check(def->name, shape->n < 0 ? 0 : shape->n, shape->v, dtype);
  if (rc) return rc;
  mx_out_set(&out[0], shape->n < 0 ? 0 : shape->n, shape->v, dtype);
  info->rng_draws = mx_shape_prod(out[0].ndim, out[0].shape); /* random ops */
  return MX_OK;
}
