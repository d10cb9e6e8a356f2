/* indexing.c — inference for pick, take, one_hot and their backward ops. Index
 * tensors hold 1-based positions (docs/ops-notes.md), any numeric dtype. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "shape.h"

#include <string.h>

static const char *shp(char *b, const mx_desc *t) { return mx_shape_str(b, t->ndim, t->shape); }

/* pick(data, index): index has data's shape without `axis` (or with it as 1). */
static int pick_shape(const char *op, const mx_desc *d, const mx_desc *idx, int64_t axis,
                      bool keepdims, int *a) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (d->ndim == 0) return mx_err(MX_EINVAL, "%s: data must have at least 1 dim", op);
  int rc = mx_norm_axis(op, "axis", axis, d->ndim, a);
  if (rc) return rc;
  bool ok = idx->ndim == d->ndim - 1 || idx->ndim == d->ndim;
  for (int i = 0, j = 0; ok && i < d->ndim; i++) {
    if (i == *a) {
      if (idx->ndim == d->ndim && idx->shape[j++] != 1) ok = false;
      continue;
    }
    if (idx->shape[j++] != d->shape[i]) ok = false;
  }
  (void)keepdims;
  if (!ok)
    return mx_err(MX_EINVAL, "%s: index %s must have data %s's shape without axis %d", op,
                  shp(x, idx), shp(y, d), *a + 1);
  return MX_OK;
}

int mx_infer_pick(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_pick *P = p;
  int a, rc = pick_shape(def->name, in[0], in[1], P->axis, P->keepdims, &a);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  int n = 0;
  for (int i = 0; i < in[0]->ndim; i++) {
    if (i == a && !P->keepdims) continue;
    s[n++] = i == a ? 1 : in[0]->shape[i];
  }
  mx_out_set(&out[0], n, s, in[0]->dtype);
  return MX_OK;
}

/* pick_backward(data, index, ograd) -> data's shape */
int mx_infer_pick_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_pick_backward *P = p;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  int a, rc = pick_shape(def->name, in[0], in[1], P->axis, P->keepdims, &a);
  if (rc) return rc;
  if (mx_shape_prod(in[2]->ndim, in[2]->shape) != mx_shape_prod(in[1]->ndim, in[1]->shape))
    return mx_err(MX_EINVAL, "%s: ograd %s does not match index %s", def->name, shp(x, in[2]),
                  shp(y, in[1]));
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[2]->dtype);
  return MX_OK;
}

/* take(a, indices): a.shape[:axis] + indices.shape + a.shape[axis+1:] */
int mx_infer_take(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_take *P = p;
  const mx_desc *d = in[0], *idx = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (d->ndim == 0) return mx_err(MX_EINVAL, "%s: data must have at least 1 dim", def->name);
  int a, rc = mx_norm_axis(def->name, "axis", P->axis, d->ndim, &a);
  if (rc) return rc;
  if (d->ndim - 1 + idx->ndim > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: data %s with indices %s gives more than %d dims", def->name,
                  shp(x, d), shp(y, idx), MX_MAX_DIM);
  if (d->shape[a] == 0 && mx_shape_prod(idx->ndim, idx->shape) > 0)
    return mx_err(MX_EINVAL, "%s: cannot take from an empty axis %d of %s", def->name, a + 1,
                  shp(x, d));
  int64_t s[MX_MAX_DIM];
  int n = 0;
  for (int i = 0; i < a; i++) s[n++] = d->shape[i];
  for (int i = 0; i < idx->ndim; i++) s[n++] = idx->shape[i];
  for (int i = a + 1; i < d->ndim; i++) s[n++] = d->shape[i];
  rc = mx_shape_check_size(def->name, n, s);
  if (rc) return rc;
  mx_out_set(&out[0], n, s, d->dtype);
  return MX_OK;
}

int mx_infer_take_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_take_backward *P = p;
  const mx_desc *d = in[0], *idx = in[1], *g = in[2];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (d->ndim == 0) return mx_err(MX_EINVAL, "%s: data must have at least 1 dim", def->name);
  int a, rc = mx_norm_axis(def->name, "axis", P->axis, d->ndim, &a);
  if (rc) return rc;
  int64_t want = mx_shape_prod(idx->ndim, idx->shape);
  for (int i = 0; i < d->ndim; i++) if (i != a) want *= d->shape[i];
  if (mx_shape_prod(g->ndim, g->shape) != want)
    return mx_err(MX_EINVAL, "%s: ograd %s does not match take's output for data %s", def->name,
                  shp(x, g), shp(y, d));
  mx_out_set(&out[0], d->ndim, d->shape, g->dtype);
  return MX_OK;
}

/* one_hot(indices) -> indices.shape + (depth) */
int mx_infer_one_hot(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_one_hot *P = p;
  if (P->depth < 0) return mx_err(MX_EINVAL, "%s: depth must be >= 0, got %lld", def->name,
                                  (long long)P->depth);
  if (in[0]->ndim >= MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: indices have too many dims", def->name);
  int64_t s[MX_MAX_DIM];
  memcpy(s, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
  s[in[0]->ndim] = P->depth;
  int rc = mx_shape_check_size(def->name, in[0]->ndim + 1, s);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim + 1, s, P->dtype < 0 ? MX_F32 : P->dtype);
  return MX_OK;
}
