/* indexing.c — inference for pick, take, one_hot, gather_nd, scatter_nd, slice_like,
 * diag and their backward ops. Index
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

/* ---- gather_nd, scatter_nd, slice_like, diag ---- */

/* indices (M, Y...) addressing the first M dims of a rank-`nd` shape: M in 1..nd */
static int nd_index_check(const char *op, const mx_desc *idx, int nd, const char *what) {
  char x[MX_SHAPE_BUF];
  if (idx->ndim < 1)
    return mx_err(MX_EINVAL, "%s: indices must have at least 1 dim (M, ...), got %s", op,
                  shp(x, idx));
  if (idx->shape[0] < 1 || idx->shape[0] > nd)
    return mx_err(MX_EINVAL, "%s: indices %s address %lld dims, but %s has %d", op, shp(x, idx),
                  (long long)idx->shape[0], what, nd);
  return MX_OK;
}

/* gather_nd(data, indices): indices.shape[1:] + data.shape[M:] */
int mx_infer_gather_nd(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  const mx_desc *d = in[0], *idx = in[1];
  int rc = nd_index_check(def->name, idx, d->ndim, "data");
  if (rc) return rc;
  int m = (int)idx->shape[0], n = 0;
  int64_t s[MX_MAX_DIM];
  if (idx->ndim - 1 + d->ndim - m > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: the result would have more than %d dims", def->name, MX_MAX_DIM);
  for (int i = 1; i < idx->ndim; i++) s[n++] = idx->shape[i];
  for (int i = m; i < d->ndim; i++) s[n++] = d->shape[i];
  mx_out_set(&out[0], n, s, d->dtype);
  return MX_OK;
}

/* gather_nd_backward(data, indices, ograd) -> data's shape; ograd as gather_nd's output */
int mx_infer_gather_nd_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  const mx_desc *d = in[0], *idx = in[1], *g = in[2];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  int rc = nd_index_check(def->name, idx, d->ndim, "data");
  if (rc) return rc;
  int64_t want = mx_shape_prod(idx->ndim, idx->shape) / (idx->shape[0] ? idx->shape[0] : 1);
  for (int i = (int)idx->shape[0]; i < d->ndim; i++) want *= d->shape[i];
  if (mx_shape_prod(g->ndim, g->shape) != want)
    return mx_err(MX_EINVAL, "%s: ograd %s does not match gather_nd's output for data %s",
                  def->name, shp(x, g), shp(y, d));
  mx_out_set(&out[0], d->ndim, d->shape, g->dtype);
  return MX_OK;
}

/* scatter_nd(data, indices, shape): data must be indices.shape[1:] + shape[M:] */
int mx_infer_scatter_nd(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_scatter_nd *P = p;
  const mx_desc *d = in[0], *idx = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF], z[MX_SHAPE_BUF];
  if (P->shape.n < 1)
    return mx_err(MX_EINVAL, "%s: shape (the output's shape) is required", def->name);
  for (int i = 0; i < P->shape.n; i++)
    if (P->shape.v[i] < 0)
      return mx_err(MX_EINVAL, "%s: shape %s has a negative dim", def->name,
                    mx_shape_str(z, P->shape.n, P->shape.v));
  int rc = nd_index_check(def->name, idx, P->shape.n, "shape");
  if (rc) return rc;
  int m = (int)idx->shape[0], n = 0;
  int64_t s[2 * MX_MAX_DIM];
  for (int i = 1; i < idx->ndim; i++) s[n++] = idx->shape[i];
  for (int i = m; i < P->shape.n; i++) s[n++] = P->shape.v[i];
  bool ok = n == d->ndim;
  /* unknown dims (graph inference) match anything */
  for (int i = 0; ok && i < n; i++)
    ok = s[i] == d->shape[i] || s[i] == MX_DIM_UNKNOWN || d->shape[i] == MX_DIM_UNKNOWN;
  if (!ok)
    return mx_err(MX_EINVAL, "%s: data %s must have shape indices.shape[2:] + shape[M+1:] "
                  "(indices %s, shape %s)", def->name, shp(x, d), shp(y, idx),
                  mx_shape_str(z, P->shape.n, P->shape.v));
  rc = mx_shape_check_size(def->name, P->shape.n, P->shape.v);
  if (rc) return rc;
  mx_out_set(&out[0], P->shape.n, P->shape.v, d->dtype);
  return MX_OK;
}

/* slice_like(data, shape_like): data's shape with shape_like's dims on the chosen axes */
int mx_infer_slice_like(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_slice_like *P = p;
  const mx_desc *d = in[0], *l = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  bool mask[MX_MAX_DIM];
  if (P->axes.n < 0 && d->ndim != l->ndim)
    return mx_err(MX_EINVAL, "%s: without axes data %s and shape_like %s must have the same "
                  "number of dims", def->name, shp(x, d), shp(y, l));
  int rc = mx_norm_axes(def->name, "axes", &P->axes, d->ndim, mask);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < d->ndim; i++) {
    s[i] = d->shape[i];
    if (!mask[i]) continue;
    if (i >= l->ndim)
      return mx_err(MX_EINVAL, "%s: axis %d is beyond shape_like %s", def->name, i + 1, shp(x, l));
    if (l->shape[i] > d->shape[i] && d->shape[i] != MX_DIM_UNKNOWN)
      return mx_err(MX_EINVAL, "%s: shape_like %s is larger than data %s on axis %d", def->name,
                    shp(x, l), shp(y, d), i + 1);
    s[i] = l->shape[i];
  }
  mx_out_set(&out[0], d->ndim, s, d->dtype);
  return MX_OK;
}

/* length of the k-th diagonal of an (r, c) matrix (0 when k is past the edge) */
static int64_t diag_len(int64_t r, int64_t c, int64_t k) {
  int64_t n = k >= 0 ? (c - k < r ? c - k : r) : (r + k < c ? r + k : c);
  return n > 0 ? n : 0;
}

/* diag: (n) -> (n+|k|, n+|k|); (r, c) -> (diag_len) */
int mx_infer_diag(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_diag *P = p;
  const mx_desc *d = in[0];
  char x[MX_SHAPE_BUF];
  if (d->ndim == 1) {
    if (P->k < -(INT64_C(1) << 40) || P->k > (INT64_C(1) << 40))
      return mx_err(MX_EINVAL, "%s: k=%lld is too large", def->name, (long long)P->k);
    int64_t ak = P->k < 0 ? -P->k : P->k;
    int64_t s[2] = { d->shape[0] + ak, d->shape[0] + ak };
    int rc = mx_shape_check_size(def->name, 2, s);
    if (rc) return rc;
    mx_out_set(&out[0], 2, s, d->dtype);
    return MX_OK;
  }
  if (d->ndim != 2)
    return mx_err(MX_EINVAL, "%s: data must be 1-D or 2-D, got %s", def->name, shp(x, d));
  int64_t s[1] = { diag_len(d->shape[0], d->shape[1], P->k) };
  mx_out_set(&out[0], 1, s, d->dtype);
  return MX_OK;
}

/* diag_backward(data (r, c), ograd (diag_len)) -> data's shape */
int mx_infer_diag_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_diag_backward *P = p;
  const mx_desc *d = in[0], *g = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (d->ndim != 2)
    return mx_err(MX_EINVAL, "%s: data must be 2-D, got %s", def->name, shp(x, d));
  if (P->k < -d->shape[0] - 1 || P->k > d->shape[1] + 1 ||
      mx_shape_prod(g->ndim, g->shape) != diag_len(d->shape[0], d->shape[1], P->k))
    return mx_err(MX_EINVAL, "%s: ograd %s does not match the diagonal k=%lld of data %s",
                  def->name, shp(x, g), (long long)P->k, shp(y, d));
  mx_out_set(&out[0], 2, d->shape, g->dtype);
  return MX_OK;
}

/* ---- index_copy ---- */

/* index_copy(old, index, new): old (N, ...), index 1-D (M), new (M, ...) of old's dtype;
 * out: old's shape and dtype. Unknown dims (graph inference) match anything. */
int mx_infer_index_copy(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *o = in[0], *idx = in[1], *n = in[2];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF], z[MX_SHAPE_BUF];
  if (o->ndim < 1)
    return mx_err(MX_EINVAL, "%s: old must have at least 1 dim, got %s", def->name, shp(x, o));
  if (idx->ndim != 1)
    return mx_err(MX_EINVAL, "%s: index must be 1-D, got %s", def->name, shp(x, idx));
  bool ok = n->ndim == o->ndim;
  for (int i = 0; ok && i < n->ndim; i++) {
    int64_t want = i == 0 ? idx->shape[0] : o->shape[i];
    ok = n->shape[i] == want || want == MX_DIM_UNKNOWN || n->shape[i] == MX_DIM_UNKNOWN;
  }
  if (!ok)
    return mx_err(MX_EINVAL, "%s: new %s must have shape (index length,) + old.shape[2:] "
                  "(old %s, index %s)", def->name, shp(x, n), shp(y, o), shp(z, idx));
  if (n->dtype != o->dtype)
    return mx_err(MX_EINVAL, "%s: new's dtype %s must equal old's %s", def->name,
                  mx_dtype_name(n->dtype), mx_dtype_name(o->dtype));
  mx_out_set(&out[0], o->ndim, o->shape, o->dtype);
  return MX_OK;
}

/* ---- embedding ---- */

static bool emb_unknown(const mx_desc *t) {
  if (t->ndim < 0 || t->dtype < 0) return true;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0) return true;
  return false;
}

/* embedding(data, weight): data any shape (token ids), weight (input_dim, output_dim);
 * out data.shape + (output_dim) of weight's dtype. Partial: an unknown weight is filled
 * from input_dim/output_dim (and dtype, default float32): Gluon's deferred init. */
int mx_infer_embedding(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_embedding *P = p;
  mx_desc *d = in[0], *w = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (P->has_input_dim && P->input_dim < 1)
    return mx_err(MX_EINVAL, "%s: input_dim must be >= 1, got %lld", def->name,
                  (long long)P->input_dim);
  if (P->has_output_dim && P->output_dim < 1)
    return mx_err(MX_EINVAL, "%s: output_dim must be >= 1, got %lld", def->name,
                  (long long)P->output_dim);
  if (w->ndim < 0) {
    w->ndim = 2;
    w->shape[0] = w->shape[1] = MX_DIM_UNKNOWN;
  }
  if (w->ndim == 2 && w->shape[0] < 0 && P->has_input_dim) w->shape[0] = P->input_dim;
  if (w->ndim == 2 && w->shape[1] < 0 && P->has_output_dim) w->shape[1] = P->output_dim;
  if (w->dtype < 0) w->dtype = P->has_dtype ? (int)P->dtype : MX_F32;
  if (w->ndim != 2)
    return mx_err(MX_EINVAL, "%s: weight must be 2-d (input_dim, output_dim), got %s",
                  def->name, shp(x, w));
  if (P->has_input_dim && w->shape[0] >= 0 && w->shape[0] != P->input_dim)
    return mx_err(MX_EINVAL, "%s: weight %s does not match input_dim %lld", def->name,
                  shp(x, w), (long long)P->input_dim);
  if (P->has_output_dim && w->shape[1] >= 0 && w->shape[1] != P->output_dim)
    return mx_err(MX_EINVAL, "%s: weight %s does not match output_dim %lld", def->name,
                  shp(x, w), (long long)P->output_dim);
  if (P->has_dtype && w->dtype != (int)P->dtype)
    return mx_err(MX_EINVAL, "%s: weight has dtype %s but dtype=%s", def->name,
                  mx_dtype_name(w->dtype), mx_dtype_name((int)P->dtype));
  if (emb_unknown(d) || emb_unknown(w)) return MX_OK;
  if (d->ndim + 1 > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: data %s gives more than %d dims", def->name, shp(x, d),
                  MX_MAX_DIM);
  if (w->shape[0] == 0 && mx_shape_prod(d->ndim, d->shape) > 0)
    return mx_err(MX_EINVAL, "%s: cannot look data %s up in an empty weight %s", def->name,
                  shp(x, d), shp(y, w));
  int64_t s[MX_MAX_DIM];
  memcpy(s, d->shape, sizeof(int64_t) * (size_t)d->ndim);
  s[d->ndim] = w->shape[1];
  int rc = mx_shape_check_size(def->name, d->ndim + 1, s);
  if (rc) return rc;
  mx_out_set(&out[0], d->ndim + 1, s, w->dtype);
  return MX_OK;
}

/* embedding_backward(data, weight, ograd): ograd has data.shape + (output_dim); the
 * gradient has weight's shape (weight is read for its shape only) and ograd's dtype. */
int mx_infer_embedding_backward(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *d = in[0], *w = in[1], *g = in[2];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF], z[MX_SHAPE_BUF];
  if (w->ndim != 2)
    return mx_err(MX_EINVAL, "%s: weight must be 2-d (input_dim, output_dim), got %s",
                  def->name, shp(x, w));
  bool ok = g->ndim == d->ndim + 1 && g->shape[d->ndim] == w->shape[1];
  for (int i = 0; ok && i < d->ndim; i++) ok = g->shape[i] == d->shape[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd %s must have shape data.shape + (output_dim) "
                  "(data %s, weight %s)", def->name, shp(x, g), shp(y, d), shp(z, w));
  mx_out_set(&out[0], 2, w->shape, g->dtype);
  return MX_OK;
}
