/* shape.c — shape/dtype inference for the layout ops (reshape, transpose, concat,
 * slice, tile, ...). Axes arrive 0-based (possibly negative); messages speak the
 * Lua API's 1-based convention through mx_norm_axis. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "shape.h"

#include <string.h>

/* Axis params on a 0-d input: mx_norm_axis accepts 1/-1 there (reductions), but
 * these ops index the axis's length, which a 0-d tensor does not have. */
static int need_dims(const char *op, const mx_desc *x) {
  if (x->ndim == 0) return mx_err(MX_EINVAL, "%s: the input is 0-d (it has no axis to use)", op);
  return MX_OK;
}

int mx_shape_check_size(const char *op, int ndim, const int64_t *shape) {
  char b[MX_SHAPE_BUF];
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (shape[i] && n > (INT64_MAX / 16) / shape[i]))
      return mx_err(MX_EINVAL, "%s: result shape %s is too large or negative", op,
                    mx_shape_str(b, ndim, shape));
    n *= shape[i];
  }
  return MX_OK;
}

#define NONE MX_SLICE_NONE

static const char *shp(char *buf, const mx_desc *t) { return mx_shape_str(buf, t->ndim, t->shape); }

/* MXNet's reshape codes: 0 copy this dim, -1 infer, -2 copy all remaining dims,
 * -3 merge the next two input dims, -4 split one input dim into the next two
 * codes (one of which may be -1). reverse: match codes from the right. */
static int reshape_codes(const char *op, const mx_desc *x, const mx_tuple *sh, bool reverse,
                         int *ndim, int64_t *out) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  int n = sh->n < 0 ? 0 : sh->n, xn = x->ndim;
  int64_t code[MX_MAX_DIM], in[MX_MAX_DIM], res[MX_MAX_DIM * 3] = { 0 };
  for (int i = 0; i < n; i++) code[i] = sh->v[reverse ? n - 1 - i : i];
  for (int i = 0; i < xn; i++) in[i] = x->shape[reverse ? xn - 1 - i : i];
  int j = 0, m = 0, infer_at = -1;
  for (int i = 0; i < n; i++) {
    int64_t c = code[i];
    if (c > 0) {
      res[m++] = c;
      j++;
    } else if (c == 0) {
      if (j >= xn) goto bad;
      res[m++] = in[j++];
    } else if (c == -1) {
      if (infer_at >= 0) return mx_err(MX_EINVAL, "%s: shape %s has more than one -1", op,
                                       mx_shape_str(b, n, sh->v));
      infer_at = m;
      res[m++] = 1;
      j++;
    } else if (c == -2) {
      while (j < xn) res[m++] = in[j++];
    } else if (c == -3) {
      if (j + 1 >= xn) goto bad;
      res[m++] = in[j] * in[j + 1];
      j += 2;
    } else if (c == -4) {
      if (j >= xn || i + 2 >= n) goto bad;
      int64_t d1 = code[i + 1], d2 = code[i + 2], d = in[j++];
      if (d1 == -1 && d2 > 0) d1 = d2 ? d / d2 : 0;
      if (d2 == -1 && d1 > 0) d2 = d1 ? d / d1 : 0;
      if (d1 < 0 || d2 < 0 || d1 * d2 != d) goto bad;
      res[m++] = d1;
      res[m++] = d2;
      i += 2;
    } else {
      goto bad;
    }
    if (m > MX_MAX_DIM) goto bad;
  }
  if (infer_at >= 0) {
    int64_t known = 1;
    for (int i = 0; i < m; i++) if (i != infer_at) known *= res[i];
    if (known == 0 || mx_shape_prod(x->ndim, x->shape) % known) goto bad;
    res[infer_at] = mx_shape_prod(x->ndim, x->shape) / known;
  }
  if (mx_shape_prod(m, res) != mx_shape_prod(x->ndim, x->shape)) goto bad;
  for (int i = 0; i < m; i++) out[i] = res[reverse ? m - 1 - i : i];
  *ndim = m;
  return MX_OK;
bad:
  return mx_err(MX_EINVAL, "%s: cannot reshape %s (%lld elements) to %s%s", op, shp(a, x),
                (long long)mx_shape_prod(x->ndim, x->shape), mx_shape_str(b, n, sh->v), reverse ? " (reverse)" : "");
}

int mx_infer_reshape(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_reshape *P = p;
  int64_t s[MX_MAX_DIM];
  int n = 0, rc = reshape_codes(def->name, in[0], &P->shape, P->reverse, &n, s);
  if (rc) return rc;
  mx_out_set(&out[0], n, s, in[0]->dtype);
  return MX_OK;
}

/* lhs's data with rhs's shape */
int mx_infer_reshape_like(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (mx_shape_prod(in[0]->ndim, in[0]->shape) != mx_shape_prod(in[1]->ndim, in[1]->shape))
    return mx_err(MX_EINVAL, "%s: lhs %s has %lld elements but rhs %s has %lld", def->name,
                  shp(a, in[0]), (long long)mx_shape_prod(in[0]->ndim, in[0]->shape), shp(b, in[1]), (long long)mx_shape_prod(in[1]->ndim, in[1]->shape));
  mx_out_set(&out[0], in[1]->ndim, in[1]->shape, in[0]->dtype);
  return MX_OK;
}

/* shape_array: (ndim) int64; size_array: (1) int64 */
int mx_infer_shape_array(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)def; (void)p; (void)nin; (void)nout; (void)info;
  int64_t n = in[0]->ndim;
  mx_out_set(&out[0], 1, &n, MX_I64);
  return MX_OK;
}

int mx_infer_size_array(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)def; (void)p; (void)nin; (void)nout; (void)info;
  int64_t n = 1;
  mx_out_set(&out[0], 1, &n, MX_I64);
  return MX_OK;
}

/* Normalise a permutation (NULL/n<0: reverse the axes) into info->perm's form. */
static int shape_perm(const char *op, const mx_tuple *axes, int ndim, int *perm) {
  char b[MX_SHAPE_BUF];
  if (axes->n < 0 || (axes->n == 0 && ndim > 0)) {
    for (int i = 0; i < ndim; i++) perm[i] = ndim - 1 - i;
    return MX_OK;
  }
  if (axes->n != ndim)
    return mx_err(MX_EINVAL, "%s: axes %s must list all %d axes of the input", op,
                  mx_shape_str(b, axes->n, axes->v), ndim);
  bool seen[MX_MAX_DIM] = { false };
  for (int i = 0; i < ndim; i++) {
    int a, rc = mx_norm_axis(op, "axes", axes->v[i], ndim, &a);
    if (rc) return rc;
    if (seen[a]) return mx_err(MX_EINVAL, "%s: axes lists axis %d twice", op, a + 1);
    seen[a] = true;
    perm[i] = a;
  }
  return MX_OK;
}

int mx_infer_transpose(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_transpose *P = p;
  int perm[MX_MAX_DIM], rc = shape_perm(def->name, &P->axes, in[0]->ndim, perm);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < in[0]->ndim; i++) s[i] = in[0]->shape[perm[i]];
  memcpy(info->perm, perm, sizeof(int) * (size_t)in[0]->ndim);
  mx_out_set(&out[0], in[0]->ndim, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_swapaxes(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_swapaxes *P = p;
  int a, b, rc = need_dims(def->name, in[0]);
  if (!rc) rc = mx_norm_axis(def->name, "dim1", P->dim1, in[0]->ndim, &a);
  if (!rc) rc = mx_norm_axis(def->name, "dim2", P->dim2, in[0]->ndim, &b);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  memcpy(s, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
  s[a] = in[0]->shape[b];
  s[b] = in[0]->shape[a];
  for (int i = 0; i < in[0]->ndim; i++) info->perm[i] = i;
  info->perm[a] = b;
  info->perm[b] = a;
  mx_out_set(&out[0], in[0]->ndim, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_expand_dims(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_expand_dims *P = p;
  const mx_desc *x = in[0];
  if (!P->has_axis) return mx_err(MX_EINVAL, "%s: axis is required", def->name);
  if (x->ndim >= MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: input already has %d dims (at most %d)", def->name, x->ndim,
                  MX_MAX_DIM);
  int a, rc = mx_norm_axis(def->name, "axis", P->axis, x->ndim + 1, &a);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  for (int i = 0, j = 0; i <= x->ndim; i++) s[i] = i == a ? 1 : x->shape[j++];
  mx_out_set(&out[0], x->ndim + 1, s, x->dtype);
  return MX_OK;
}

int mx_infer_squeeze(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_squeeze *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  bool mask[MX_MAX_DIM];
  int rc = mx_norm_axes(def->name, "axis", &P->axis, x->ndim, mask);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  int n = 0;
  for (int i = 0; i < x->ndim; i++) {
    if (mask[i] && x->shape[i] != 1) {
      if (P->axis.n < 0) { s[n++] = x->shape[i]; continue; }
      return mx_err(MX_EINVAL, "%s: axis %d of %s has size %lld, not 1", def->name, i + 1,
                    shp(b, x), (long long)x->shape[i]);
    }
    if (!mask[i]) s[n++] = x->shape[i];
  }
  mx_out_set(&out[0], n, s, x->dtype);
  return MX_OK;
}

/* MXNet's Flatten: (d1, d2*...*dk); a 1-d input becomes (d1, 1), 0-d (1, 1). */
int mx_infer_flatten(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)def; (void)p; (void)nin; (void)nout;
  const mx_desc *x = in[0];
  int64_t s[2] = { x->ndim ? x->shape[0] : 1, 1 };
  for (int i = 1; i < x->ndim; i++) s[1] *= x->shape[i];
  mx_out_set(&out[0], 2, s, x->dtype);
  return MX_OK;
}

/* concat (dim) and stack (axis): every input shares the first input's dtype and shape
 * (except along dim for concat). */
static int same_inputs(const mx_op_def *def, int nin, mx_desc *const *in, int skip) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  for (int i = 1; i < nin; i++) {
    bool ok = in[i]->ndim == in[0]->ndim;
    for (int d = 0; ok && d < in[0]->ndim; d++)
      if (d != skip && in[i]->shape[d] != in[0]->shape[d]) ok = false;
    if (!ok)
      return mx_err(MX_EINVAL, "%s: input %d has shape %s, incompatible with input 1's %s%s",
                    def->name, i + 1, shp(a, in[i]), shp(b, in[0]),
                    skip >= 0 ? " (only the concat dim may differ)" : "");
    if (in[i]->dtype != in[0]->dtype)
      return mx_err(MX_EINVAL, "%s: input %d has dtype %s but input 1 has %s", def->name, i + 1,
                    mx_dtype_name(in[i]->dtype), mx_dtype_name(in[0]->dtype));
  }
  return MX_OK;
}

int mx_infer_concat(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_concat *P = p;
  if (in[0]->ndim == 0) return mx_err(MX_EINVAL, "%s: cannot concatenate 0-d tensors", def->name);
  int a, rc = mx_norm_axis(def->name, "dim", P->dim, in[0]->ndim, &a);
  if (!rc) rc = same_inputs(def, nin, in, a);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  memcpy(s, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
  for (int i = 1; i < nin; i++) s[a] += in[i]->shape[a];
  info->axis = a;
  mx_out_set(&out[0], in[0]->ndim, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_stack(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_stack *P = p;
  if (in[0]->ndim >= MX_MAX_DIM) return mx_err(MX_EINVAL, "%s: inputs have too many dims", def->name);
  int a, rc = mx_norm_axis(def->name, "axis", P->axis, in[0]->ndim + 1, &a);
  if (!rc) rc = same_inputs(def, nin, in, -1);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  for (int i = 0, j = 0; i <= in[0]->ndim; i++) s[i] = i == a ? nin : in[0]->shape[j++];
  info->axis = a;
  mx_out_set(&out[0], in[0]->ndim + 1, s, in[0]->dtype);
  return MX_OK;
}

/* split: num_outputs equal pieces along axis; squeeze_axis drops the axis (the pieces
 * must then have size 1 there). info->axis: the normalised axis, for the kernels.
 * (The output count itself was checked by dispatch: mx_op_nout.) */
int mx_infer_split(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin;
  const struct mx_params_split *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  int a, rc = need_dims(def->name, x);
  if (!rc) rc = mx_norm_axis(def->name, "axis", P->axis, x->ndim, &a);
  if (rc) return rc;
  if (!P->has_num_outputs || P->num_outputs != nout)
    return mx_err(MX_EINVAL, "%s: num_outputs is required (1..64)", def->name);
  int64_t len = x->shape[a];
  if (len != MX_DIM_UNKNOWN && len % nout != 0)
    return mx_err(MX_EINVAL, "%s: axis %d of shape %s has size %lld, not divisible by "
                  "num_outputs=%d", def->name, a + 1, shp(b, x), (long long)len, nout);
  int64_t piece = len == MX_DIM_UNKNOWN ? MX_DIM_UNKNOWN : len / nout;
  if (P->squeeze_axis && piece != 1 && piece != MX_DIM_UNKNOWN)
    return mx_err(MX_EINVAL, "%s: squeeze_axis needs pieces of size 1 along axis %d, but "
                  "splitting %s into %d gives pieces of size %lld", def->name, a + 1, shp(b, x),
                  nout, (long long)piece);
  int64_t s[MX_MAX_DIM];
  int n = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d != a) s[n++] = x->shape[d];
    else if (!P->squeeze_axis) s[n++] = piece;
  }
  for (int k = 0; k < nout; k++) mx_out_set(&out[k], n, s, x->dtype);
  info->axis = a;
  return MX_OK;
}

/* Python slice bounds for one axis: begin/end may be NONE; clamps like NumPy. */
static void slice_axis_bounds(int64_t dim, int64_t b, int64_t e, int64_t step, int64_t *begin,
                              int64_t *len) {
  if (step > 0) {
    b = b == NONE ? 0 : b < 0 ? b + dim : b;
    e = e == NONE ? dim : e < 0 ? e + dim : e;
    b = b < 0 ? 0 : b > dim ? dim : b;
    e = e < 0 ? 0 : e > dim ? dim : e;
    *len = e > b ? (e - b + step - 1) / step : 0;
  } else {
    b = b == NONE ? dim - 1 : b < 0 ? b + dim : b;
    e = e == NONE ? -1 : e < 0 ? e + dim : e;
    b = b < -1 ? -1 : b > dim - 1 ? dim - 1 : b;
    e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    *len = b > e ? (b - e - step - 1) / -step : 0;
  }
  *begin = b;
}

/* begin/end/step lists (up to ndim entries, later axes whole) -> per-axis begin,
 * step and output shape. */
static int slice_resolve(const char *op, const mx_desc *x, const mx_tuple *B, const mx_tuple *E,
                         const mx_tuple *S, int64_t *begin, int64_t *step, int64_t *shape) {
  char a[MX_SHAPE_BUF];
  int nb = B->n < 0 ? 0 : B->n, ne = E->n < 0 ? 0 : E->n, ns = S->n < 0 ? 0 : S->n;
  int n = nb > ne ? nb : ne;
  if (ns > n) n = ns;
  if (n > x->ndim)
    return mx_err(MX_EINVAL, "%s: %d bounds given for the %d-d input %s", op, n, x->ndim,
                  shp(a, x));
  for (int d = 0; d < x->ndim; d++) {
    int64_t s = d < ns ? S->v[d] : 1;
    if (s == NONE) s = 1;
    if (s == 0) return mx_err(MX_EINVAL, "%s: step along axis %d is 0", op, d + 1);
    int64_t b = d < nb ? B->v[d] : NONE, e = d < ne ? E->v[d] : NONE;
    slice_axis_bounds(x->shape[d], b, e, s, &begin[d], &shape[d]);
    step[d] = s;
  }
  return MX_OK;
}

int mx_infer_slice(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_slice *P = p;
  int rc = slice_resolve(def->name, in[0], &P->begin, &P->end, &P->step, info->begin,
                            info->step, info->extent);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, info->extent, in[0]->dtype);
  return MX_OK;
}

int mx_infer_slice_axis(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_slice_axis *P = p;
  const mx_desc *x = in[0];
  int a, rc = need_dims(def->name, x);
  if (!rc) rc = mx_norm_axis(def->name, "axis", P->axis, x->ndim, &a);
  if (rc) return rc;
  for (int d = 0; d < x->ndim; d++) { /* the box: axis a's range, every other axis whole */
    info->begin[d] = 0;
    info->step[d] = 1;
    info->extent[d] = x->shape[d];
  }
  slice_axis_bounds(x->shape[a], P->begin, P->has_end ? P->end : NONE, 1, &info->begin[a],
                       &info->extent[a]);
  mx_out_set(&out[0], x->ndim, info->extent, x->dtype);
  return MX_OK;
}

/* slice_assign(data, value): data's shape; value must broadcast to the region. */
int mx_infer_slice_assign(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_slice_assign *P = p;
  char a[MX_SHAPE_BUF], c[MX_SHAPE_BUF], d[MX_SHAPE_BUF];
  int64_t *s = info->extent;
  int rc = slice_resolve(def->name, in[0], &P->begin, &P->end, &P->step, info->begin,
                            info->step, s);
  if (rc) return rc;
  if (nin > 1) {
    const mx_desc *v = in[1];
    bool ok = v->ndim <= in[0]->ndim;
    for (int i = 0; ok && i < v->ndim; i++) {
      int64_t dv = v->shape[v->ndim - 1 - i], dr = s[in[0]->ndim - 1 - i];
      if (dv != dr && dv != 1) ok = false;
    }
    if (!ok)
      return mx_err(MX_EINVAL, "%s: value %s does not broadcast to the selected region %s of %s",
                    def->name, shp(a, v), mx_shape_str(c, in[0]->ndim, s), shp(d, in[0]));
  }
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

/* slice_assign_scalar shares the layout of slice_assign's first three params. */
int mx_infer_slice_assign_scalar(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nout; (void)nin;
  const struct mx_params_slice_assign_scalar *P = p;
  int rc = slice_resolve(def->name, in[0], &P->begin, &P->end, &P->step, info->begin,
                            info->step, info->extent);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

/* tile: reps shorter than ndim pad with 1 on the left, longer ones promote the input
 * with leading unit dims (NumPy). */
int mx_infer_tile(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_tile *P = p;
  const mx_desc *x = in[0];
  int nr = P->reps.n < 0 ? 0 : P->reps.n;
  if (nr > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: reps has %d entries; results have at most %d dims", def->name,
                  nr, MX_MAX_DIM);
  int n = nr > x->ndim ? nr : x->ndim;
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < n; i++) {
    int ix = i - (n - x->ndim), ir = i - (n - nr);
    int64_t r = ir >= 0 ? P->reps.v[ir] : 1;
    /* a 0 rep is an error, as in MXNet (NumPy would give an empty result) */
    if (r < 1) return mx_err(MX_EINVAL, "%s: reps entries must be >= 1, got %lld (reps[%d])",
                             def->name, (long long)r, ir + 1);
    int64_t dim = ix >= 0 ? x->shape[ix] : 1;
    info->align[i] = dim;
    if (dim && r > INT64_MAX / 16 / dim) r = -1; /* reported below as too large */
    s[i] = r < 0 ? -1 : dim * r;
  }
  int rc = mx_shape_check_size(def->name, n, s);
  if (rc) return rc;
  info->align_ndim = n;
  mx_out_set(&out[0], n, s, x->dtype);
  return MX_OK;
}

/* repeat: each element `repeats` times along axis (no axis: of the flattened input). */
int mx_infer_repeat(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_repeat *P = p;
  const mx_desc *x = in[0];
  if (P->repeats < 0)
    return mx_err(MX_EINVAL, "%s: repeats must be >= 0, got %lld", def->name,
                  (long long)P->repeats);
  if (mx_shape_prod(x->ndim, x->shape) && P->repeats > INT64_MAX / 16 / mx_shape_prod(x->ndim, x->shape))
    return mx_err(MX_EINVAL, "%s: repeats=%lld makes the result too large", def->name,
                  (long long)P->repeats);
  if (!P->has_axis) {
    int64_t s = mx_shape_prod(x->ndim, x->shape) * P->repeats;
    info->axis = 0; /* the kernels repeat along the flattened input */
    info->align_ndim = 1;
    info->align[0] = mx_shape_prod(x->ndim, x->shape);
    mx_out_set(&out[0], 1, &s, x->dtype);
    return MX_OK;
  }
  int a, rc = need_dims(def->name, x);
  if (!rc) rc = mx_norm_axis(def->name, "axis", P->axis, x->ndim, &a);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  memcpy(s, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  s[a] *= P->repeats;
  info->axis = a;
  info->align_ndim = x->ndim;
  memcpy(info->align, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  mx_out_set(&out[0], x->ndim, s, x->dtype);
  return MX_OK;
}

int mx_infer_flip(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_flip *P = p;
  int rc = P->axis.n > 0 ? need_dims(def->name, in[0]) : MX_OK;
  if (!rc) rc = mx_norm_axes(def->name, "axis", &P->axis, in[0]->ndim, info->axes);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

int mx_infer_cast(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_cast *P = p;
  if (!P->has_dtype || P->dtype < 0) return mx_err(MX_EINVAL, "%s: dtype is required", def->name);
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, P->dtype);
  return MX_OK;
}

/* ---- pad, moveaxis, depth_to_space, space_to_depth, broadcast_axis ---- */

/* MXNet's Pad: 4-D or 5-D, pad_width flat (before, after) per axis with axes 0 and 1
 * unpadded (MXNet's own restriction, kept so the same calls work and fail alike).
 * info->begin[d]: the before pad of axis d; info->extent[d]: the input's length there. */
int mx_infer_pad(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_pad *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF], w[MX_SHAPE_BUF];
  int n = P->pad_width.n < 0 ? 0 : P->pad_width.n;
  if (x->ndim != 4 && x->ndim != 5)
    return mx_err(MX_EINVAL, "%s: the input must be 4-D or 5-D (as in MXNet), got %s", def->name,
                  shp(b, x));
  /* 2 pad_width entries per axis must fit the tuple (16: any rank up to 8) */
  int cap = (int)(sizeof P->pad_width.v / sizeof P->pad_width.v[0]);
  if (2 * x->ndim > cap)
    return mx_err(MX_EINVAL, "%s: %d-D inputs are not supported yet (pad_width holds at most %d "
                  "entries), got %s", def->name, x->ndim, cap, shp(b, x));
  if (n != 2 * x->ndim)
    return mx_err(MX_EINVAL, "%s: pad_width %s must have 2*ndim = %d entries (before, after per "
                  "axis) for input %s", def->name, mx_shape_str(w, n, P->pad_width.v),
                  2 * x->ndim, shp(b, x));
  for (int i = 0; i < 4; i++)
    if (P->pad_width.v[i] != 0)
      return mx_err(MX_EINVAL, "%s: pad_width %s pads axis %d; only axes 3.. may be padded (as "
                    "in MXNet)", def->name, mx_shape_str(w, n, P->pad_width.v), i / 2 + 1);
  int64_t s[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) {
    int64_t pb = P->pad_width.v[2 * d], pa = P->pad_width.v[2 * d + 1], dim = x->shape[d];
    if (pb < 0 || pa < 0 || pb > INT64_MAX / 16 || pa > INT64_MAX / 16)
      return mx_err(MX_EINVAL, "%s: pad_width entries must be >= 0, got %s", def->name,
                    mx_shape_str(w, n, P->pad_width.v));
    if (P->mode == MX_PAD_MODE_REFLECT && (pb >= dim || pa >= dim) && (pb || pa))
      return mx_err(MX_EINVAL, "%s: mode reflect needs pads smaller than the axis: axis %d of "
                    "%s has size %lld, pads (%lld, %lld)", def->name, d + 1, shp(b, x),
                    (long long)dim, (long long)pb, (long long)pa);
    if (P->mode == MX_PAD_MODE_EDGE && dim == 0 && (pb || pa))
      return mx_err(MX_EINVAL, "%s: mode edge cannot pad the empty axis %d of %s", def->name,
                    d + 1, shp(b, x));
    info->begin[d] = pb;
    info->extent[d] = dim;
    s[d] = dim + pb + pa;
  }
  int rc = mx_shape_check_size(def->name, x->ndim, s);
  if (rc) return rc;
  mx_out_set(&out[0], x->ndim, s, x->dtype);
  return MX_OK;
}

/* NumPy's moveaxis as a permutation (info->perm): the unmoved axes keep their order
 * and the moved ones are inserted at their destinations, smallest destination first. */
int mx_infer_moveaxis(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_moveaxis *P = p;
  const mx_desc *x = in[0];
  char a[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int ns = P->source.n < 0 ? 0 : P->source.n, nd = P->destination.n < 0 ? 0 : P->destination.n;
  if (P->source.n < 0 || P->destination.n < 0)
    return mx_err(MX_EINVAL, "%s: source and destination are required", def->name);
  if (ns != nd)
    return mx_err(MX_EINVAL, "%s: source %s and destination %s must have the same number of "
                  "axes", def->name, mx_shape_str(a, ns, P->source.v),
                  mx_shape_str(c, nd, P->destination.v));
  int src[MX_MAX_DIM], dst[MX_MAX_DIM], perm[MX_MAX_DIM];
  bool used_s[MX_MAX_DIM] = { false }, used_d[MX_MAX_DIM] = { false };
  for (int i = 0; i < ns; i++) {
    int rc = mx_norm_axis(def->name, "source", P->source.v[i], x->ndim, &src[i]);
    if (!rc) rc = mx_norm_axis(def->name, "destination", P->destination.v[i], x->ndim, &dst[i]);
    if (rc) return rc;
    if (used_s[src[i]] || used_d[dst[i]])
      return mx_err(MX_EINVAL, "%s: %s lists axis %d twice", def->name,
                    used_s[src[i]] ? "source" : "destination",
                    (used_s[src[i]] ? src[i] : dst[i]) + 1);
    used_s[src[i]] = used_d[dst[i]] = true;
    perm[dst[i]] = src[i];
  }
  for (int d = 0, k = 0; d < x->ndim; d++) { /* the rest fill the free slots in order */
    if (used_s[d]) continue;
    while (used_d[k]) k++;
    perm[k++] = d;
  }
  int64_t s[MX_MAX_DIM];
  for (int d = 0; d < x->ndim; d++) {
    info->perm[d] = perm[d];
    s[d] = x->shape[perm[d]];
  }
  mx_out_set(&out[0], x->ndim, s, x->dtype);
  return MX_OK;
}

/* depth_to_space / space_to_depth: NCHW with a block size b (MXNet's DCR order). */
static int block_check(const mx_op_def *def, const mx_desc *x, bool has, int64_t bs) {
  char b[MX_SHAPE_BUF];
  if (!has) return mx_err(MX_EINVAL, "%s: block_size is required", def->name);
  if (bs < 1 || bs > (1 << 20))
    return mx_err(MX_EINVAL, "%s: block_size must be in 1..2^20, got %lld", def->name,
                  (long long)bs);
  if (x->ndim != 4)
    return mx_err(MX_EINVAL, "%s: the input must be 4-D (N, C, H, W), got %s", def->name,
                  shp(b, x));
  return MX_OK;
}

int mx_infer_depth_to_space(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_depth_to_space *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  int rc = block_check(def, x, P->has_block_size, P->block_size);
  if (rc) return rc;
  int64_t bs = P->block_size;
  if (x->shape[1] % (bs * bs))
    return mx_err(MX_EINVAL, "%s: channels %lld of %s are not divisible by block_size^2 = %lld",
                  def->name, (long long)x->shape[1], shp(b, x), (long long)(bs * bs));
  int64_t s[4] = { x->shape[0], x->shape[1] / (bs * bs), x->shape[2] * bs, x->shape[3] * bs };
  rc = mx_shape_check_size(def->name, 4, s);
  if (rc) return rc;
  mx_out_set(&out[0], 4, s, x->dtype);
  return MX_OK;
}

int mx_infer_space_to_depth(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_space_to_depth *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  int rc = block_check(def, x, P->has_block_size, P->block_size);
  if (rc) return rc;
  int64_t bs = P->block_size;
  if (x->shape[2] % bs || x->shape[3] % bs)
    return mx_err(MX_EINVAL, "%s: height and width of %s are not divisible by block_size = %lld",
                  def->name, shp(b, x), (long long)bs);
  int64_t s[4] = { x->shape[0], x->shape[1] * bs * bs, x->shape[2] / bs, x->shape[3] / bs };
  rc = mx_shape_check_size(def->name, 4, s);
  if (rc) return rc;
  mx_out_set(&out[0], 4, s, x->dtype);
  return MX_OK;
}

/* broadcast_axis: the size-1 axes `axis` become `size`; info->axes marks them. */
int mx_infer_broadcast_axis(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_broadcast_axis *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF], a[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int na = P->axis.n < 0 ? 0 : P->axis.n, nz = P->size.n < 0 ? 0 : P->size.n;
  if (na != nz)
    return mx_err(MX_EINVAL, "%s: axis %s and size %s must have the same length", def->name,
                  mx_shape_str(a, na, P->axis.v), mx_shape_str(c, nz, P->size.v));
  int64_t s[MX_MAX_DIM];
  memcpy(s, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  for (int i = 0; i < na; i++) {
    int d, rc = need_dims(def->name, x);
    if (!rc) rc = mx_norm_axis(def->name, "axis", P->axis.v[i], x->ndim, &d);
    if (rc) return rc;
    if (info->axes[d]) return mx_err(MX_EINVAL, "%s: axis lists axis %d twice", def->name, d + 1);
    if (x->shape[d] != 1)
      return mx_err(MX_EINVAL, "%s: axis %d of %s has size %lld; only size-1 axes broadcast",
                    def->name, d + 1, shp(b, x), (long long)x->shape[d]);
    if (P->size.v[i] < 1)
      return mx_err(MX_EINVAL, "%s: size entries must be >= 1, got %lld (size[%d])", def->name,
                    (long long)P->size.v[i], i + 1);
    info->axes[d] = true;
    s[d] = P->size.v[i];
  }
  int rc = mx_shape_check_size(def->name, x->ndim, s);
  if (rc) return rc;
  mx_out_set(&out[0], x->ndim, s, x->dtype);
  return MX_OK;
}

/* ---- split_v2 ---- */

/* split_v2's pieces: sections > 0: that many equal pieces; else indices (MXNet's
 * _split_v2 attribute: the start of each piece, nd.split_v2's tuple after a leading 0),
 * piece k = [indices[k], indices[k+1]) and the last to the axis' end. -1: bad params. */
int mx_nout_split_v2(const void *params) {
  const struct mx_params_split_v2 *P = params;
  if (P->sections < 0) return -1;
  if (P->sections > 0) return P->sections > 64 ? -1 : (int)P->sections;
  return P->indices.n > 0 ? P->indices.n : -1;
}

/* the start of piece k along an axis of length len (inference has checked the params) */
int64_t mx_split_v2_start(const void *params, int64_t len, int k) {
  const struct mx_params_split_v2 *P = params;
  return P->sections > 0 ? (int64_t)k * (len / P->sections) : P->indices.v[k];
}

int mx_infer_split_v2(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin;
  const struct mx_params_split_v2 *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF], w[MX_SHAPE_BUF];
  int a, rc = need_dims(def->name, x);
  if (!rc) rc = mx_norm_axis(def->name, "axis", P->axis, x->ndim, &a);
  if (rc) return rc;
  if (mx_nout_split_v2(p) != nout)
    return mx_err(MX_EINVAL, "%s: give sections (1..64) or indices (a non-empty list of piece "
                  "starts)", def->name);
  int64_t len = x->shape[a];
  if (len == MX_DIM_UNKNOWN)
    return mx_err(MX_EINVAL, "%s: axis %d of %s must be known", def->name, a + 1, shp(b, x));
  if (P->sections > 0 && len % P->sections != 0)
    return mx_err(MX_EINVAL, "%s: axis %d of shape %s has size %lld, not divisible by "
                  "sections=%lld (array split does not result in an equal division)", def->name,
                  a + 1, shp(b, x), (long long)len, (long long)P->sections);
  if (P->sections == 0)
    for (int k = 0; k < nout; k++) {
      int64_t s = P->indices.v[k], e = k + 1 < nout ? P->indices.v[k + 1] : len;
      if (s < 0 || s > e || e > len)
        return mx_err(MX_EINVAL, "%s: indices %s must be non-decreasing within 0..%lld (the "
                      "size of axis %d of %s); piece %d would be [%lld, %lld)", def->name,
                      mx_shape_str(w, P->indices.n, P->indices.v), (long long)len, a + 1,
                      shp(b, x), k + 1, (long long)s, (long long)e);
    }
  for (int k = 0; k < nout; k++) {
    int64_t s = mx_split_v2_start(p, len, k);
    int64_t e = k + 1 < nout ? mx_split_v2_start(p, len, k + 1) : len, piece = e - s;
    if (P->squeeze_axis && piece != 1)
      return mx_err(MX_EINVAL, "%s: squeeze_axis needs pieces of size 1 along axis %d, but "
                    "piece %d of %s has size %lld", def->name, a + 1, k + 1, shp(b, x),
                    (long long)piece);
    int64_t sh[MX_MAX_DIM];
    int n = 0;
    for (int d = 0; d < x->ndim; d++) {
      if (d != a) sh[n++] = x->shape[d];
      else if (!P->squeeze_axis) sh[n++] = piece;
    }
    mx_out_set(&out[k], n, sh, x->dtype);
  }
  info->axis = a;
  return MX_OK;
}
