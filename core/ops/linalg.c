/* linalg.c — shape/dtype inference for dot, batch_dot, matmul and fully_connected.
 * Both operands must share one dtype (MXNet refuses mixed GEMMs too); the result
 * keeps it. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "shape.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static int same_dtype(const char *op, const mx_desc *a, const mx_desc *b) {
  if (a->dtype != b->dtype)
    return mx_err(MX_EINVAL, "%s: lhs has dtype %s but rhs has dtype %s (cast one with astype)",
                  op, mx_dtype_name(a->dtype), mx_dtype_name(b->dtype));
  return MX_OK;
}

/* MXNet's dot: contract lhs's last axis (its first with transpose_a) with rhs's
 * first axis (its last with transpose_b); the output is lhs's other dims followed
 * by rhs's other dims, and (1,) for two 1-d operands. */
int mx_infer_dot(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_dot *P = p;
  const mx_desc *a = in[0], *b = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (a->ndim == 0 || b->ndim == 0)
    return mx_err(MX_EINVAL, "%s: operands must have at least 1 dim, got lhs %s and rhs %s",
                  def->name, mx_shape_str(x, a->ndim, a->shape), mx_shape_str(y, b->ndim, b->shape));
  int rc = same_dtype(def->name, a, b);
  if (rc) return rc;
  int ca = P->transpose_a ? 0 : a->ndim - 1, cb = P->transpose_b ? b->ndim - 1 : 0;
  if (a->shape[ca] != b->shape[cb])
    return mx_err(MX_EINVAL,
                  "%s: lhs %s%s and rhs %s%s do not match: contracted dims %lld vs %lld", def->name,
                  mx_shape_str(x, a->ndim, a->shape), P->transpose_a ? " (transpose_a)" : "",
                  mx_shape_str(y, b->ndim, b->shape), P->transpose_b ? " (transpose_b)" : "",
                  (long long)a->shape[ca], (long long)b->shape[cb]);
  int64_t s[MX_MAX_DIM * 2];
  int n = 0;
  if (a->ndim > 1)
    for (int i = 0; i < a->ndim; i++) if (i != ca) s[n++] = a->shape[i];
  if (b->ndim > 1)
    for (int i = 0; i < b->ndim; i++) if (i != cb) s[n++] = b->shape[i];
  if (n == 0) s[n++] = 1;
  if (n > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: result of lhs %s and rhs %s would have %d dims (at most %d)",
                  def->name, mx_shape_str(x, a->ndim, a->shape), mx_shape_str(y, b->ndim, b->shape),
                  n, MX_MAX_DIM);
  rc = mx_shape_check_size(def->name, n, s);
  if (rc) return rc;
  mx_out_set(&out[0], n, s, a->dtype);
  return MX_OK;
}

/* batch_dot: (B..., M, K) x (B..., K, N) -> (B..., M, N); the flags transpose the
 * last two axes of an operand. Batch dims must be equal (no broadcasting). */
int mx_infer_batch_dot(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_batch_dot *P = p;
  const mx_desc *a = in[0], *b = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  mx_shape_str(x, a->ndim, a->shape);
  mx_shape_str(y, b->ndim, b->shape);
  if (a->ndim < 3 || a->ndim != b->ndim)
    return mx_err(MX_EINVAL, "%s: operands must both be 3-d or more with equal ndim, got lhs %s "
                  "and rhs %s", def->name, x, y);
  int rc = same_dtype(def->name, a, b);
  if (rc) return rc;
  int n = a->ndim;
  for (int i = 0; i < n - 2; i++)
    if (a->shape[i] != b->shape[i])
      return mx_err(MX_EINVAL, "%s: batch dims differ: lhs %s, rhs %s (axis %d)", def->name, x, y,
                    i + 1);
  int64_t m = a->shape[n - (P->transpose_a ? 1 : 2)], ka = a->shape[n - (P->transpose_a ? 2 : 1)];
  int64_t kb = b->shape[n - (P->transpose_b ? 1 : 2)], nn = b->shape[n - (P->transpose_b ? 2 : 1)];
  if (ka != kb)
    return mx_err(MX_EINVAL, "%s: lhs %s%s and rhs %s%s do not match: contracted dims %lld vs %lld",
                  def->name, x, P->transpose_a ? " (transpose_a)" : "", y,
                  P->transpose_b ? " (transpose_b)" : "", (long long)ka, (long long)kb);
  int64_t s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)(n - 2));
  s[n - 2] = m;
  s[n - 1] = nn;
  mx_out_set(&out[0], n, s, a->dtype);
  return MX_OK;
}

/* NumPy matmul: 1-d operands gain a unit axis (removed again from the result);
 * batch dims broadcast. */
int mx_infer_matmul(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  const mx_desc *a = in[0], *b = in[1];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  mx_shape_str(x, a->ndim, a->shape);
  mx_shape_str(y, b->ndim, b->shape);
  if (a->ndim == 0 || b->ndim == 0)
    return mx_err(MX_EINVAL, "%s: operands must have at least 1 dim, got lhs %s and rhs %s",
                  def->name, x, y);
  int rc = same_dtype(def->name, a, b);
  if (rc) return rc;
  int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim == 1 ? 0 : b->ndim - 2];
  if (ka != kb)
    return mx_err(MX_EINVAL, "%s: lhs %s and rhs %s do not match: contracted dims %lld vs %lld",
                  def->name, x, y, (long long)ka, (long long)kb);
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = ba > bb ? ba : bb;
  int64_t s[MX_MAX_DIM + 2];
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - ba), ib = i - (nb - bb);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return mx_err(MX_EINVAL, "%s: batch dims of lhs %s and rhs %s cannot be broadcast "
                    "(%lld vs %lld)", def->name, x, y, (long long)da, (long long)db);
    s[i] = da == 1 ? db : da;
  }
  int n = nb;
  if (a->ndim > 1) s[n++] = a->shape[a->ndim - 2];
  if (b->ndim > 1) s[n++] = b->shape[b->ndim - 1];
  if (n > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: result would have %d dims", def->name, n);
  rc = mx_shape_check_size(def->name, n, s);
  if (rc) return rc;
  mx_out_set(&out[0], n, s, a->dtype);
  return MX_OK;
}

/* A descriptor with an unknown rank or dim. */
static bool unknown(const mx_desc *t) {
  if (t->ndim < 0) return true;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0) return true;
  return false;
}

/* FullyConnected: data (N, ...) with flatten (or (..., in_units) without), weight
 * (num_hidden, in_units), bias (num_hidden) unless no_bias. Partial: with data known, an
 * unknown weight or bias is filled in (Gluon's deferred initialisation, infer_shape);
 * with data unknown the output stays unknown. */
int mx_infer_fully_connected(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_fully_connected *P = p;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (nin != (P->no_bias ? 2 : 3))
    return mx_err(MX_EINVAL, "%s: takes %d inputs (data, weight%s) with no_bias=%s, got %d",
                  def->name, P->no_bias ? 2 : 3, P->no_bias ? "" : ", bias",
                  P->no_bias ? "true" : "false", nin);
  /* MXNet's lower bound: checked before any shape is known (a symbol file's bad
   * num_hidden is named when it loads, not by the weight it cannot infer) */
  if (P->has_num_hidden && P->num_hidden < 1)
    return mx_err(MX_EINVAL, "%s: num_hidden must be >= 1, got %lld", def->name,
                  (long long)P->num_hidden);
  mx_desc *d = in[0], *w = in[1];
  if (unknown(d) || d->dtype < 0) return MX_OK; /* nothing to say yet */
  if (d->ndim < 1)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got %s", def->name,
                  mx_shape_str(x, d->ndim, d->shape));
  /* MXNet: with flatten, batch = dim 1 and units = the product of the rest (1 for
   * 1-d data) */
  int64_t units = 1;
  if (P->flatten)
    for (int i = 1; i < d->ndim; i++) units *= d->shape[i];
  else
    units = d->shape[d->ndim - 1];
  if (w->ndim < 0) { /* unknown rank: a 2-d weight of unknown dims */
    w->ndim = 2;
    w->shape[0] = w->shape[1] = MX_DIM_UNKNOWN;
  }
  if (w->ndim == 2) {
    if (w->shape[0] < 0 && P->has_num_hidden) w->shape[0] = P->num_hidden;
    if (w->shape[1] < 0) w->shape[1] = units;
    if (w->dtype < 0) w->dtype = d->dtype;
  }
  if (!P->no_bias) {
    mx_desc *bd = in[2];
    if (bd->ndim < 0) {
      bd->ndim = 1;
      bd->shape[0] = MX_DIM_UNKNOWN;
    }
    if (bd->ndim == 1 && bd->shape[0] < 0) bd->shape[0] = w->ndim == 2 ? w->shape[0] : -1;
    if (bd->ndim == 1 && w->ndim == 2 && w->shape[0] < 0) w->shape[0] = bd->shape[0];
    if (bd->dtype < 0) bd->dtype = d->dtype;
  }
  if (w->ndim != 2)
    return mx_err(MX_EINVAL, "%s: weight must be 2-d (num_hidden, in_units), got %s", def->name,
                  mx_shape_str(x, w->ndim, w->shape));
  if (w->shape[0] < 0) return MX_OK; /* num_hidden not known yet */
  for (int i = 1; i < nin; i++)
    if (in[i]->dtype != d->dtype)
      return mx_err(MX_EINVAL, "%s: %s has dtype %s but data has dtype %s", def->name,
                    i == 1 ? "weight" : "bias", mx_dtype_name(in[i]->dtype),
                    mx_dtype_name(d->dtype));
  if (w->shape[1] != units)
    return mx_err(MX_EINVAL, "%s: data %s gives %lld input units%s but weight %s expects %lld",
                  def->name, mx_shape_str(x, d->ndim, d->shape), (long long)units,
                  P->flatten ? " (flattened)" : "", mx_shape_str(y, w->ndim, w->shape),
                  (long long)w->shape[1]);
  int64_t h = w->shape[0];
  if (P->has_num_hidden && P->num_hidden != h)
    return mx_err(MX_EINVAL, "%s: num_hidden=%lld but weight %s has %lld rows", def->name,
                  (long long)P->num_hidden, mx_shape_str(y, w->ndim, w->shape), (long long)h);
  if (!P->no_bias && (in[2]->ndim != 1 || in[2]->shape[0] != h))
    return mx_err(MX_EINVAL, "%s: bias must have shape (%lld), got %s", def->name, (long long)h,
                  mx_shape_str(x, in[2]->ndim, in[2]->shape));
  int64_t s[MX_MAX_DIM];
  int n;
  if (P->flatten) {
    n = 2;
    s[0] = d->shape[0];
    s[1] = h;
  } else {
    n = d->ndim;
    memcpy(s, d->shape, sizeof(int64_t) * (size_t)n);
    s[n - 1] = h;
  }
  mx_out_set(&out[0], n, s, d->dtype);
  return MX_OK;
}

/* ---- linalg_* (MXNet's la_op): the trailing two axes are the matrices, the leading
 * dims a batch that must match exactly between operands (MXNet does not broadcast). */

/* A is a batch of matrices: at least 2-d, f32/f64 (the op table's dtypes). */
static int la_matrix(const char *op, const char *arg, const mx_desc *a) {
  char x[MX_SHAPE_BUF];
  if (a->ndim < 2)
    return mx_err(MX_EINVAL, "%s: %s must have at least 2 dims (a batch of matrices), got %s",
                  op, arg, mx_shape_str(x, a->ndim, a->shape));
  return MX_OK;
}

/* A batch of square matrices. */
static int la_square(const char *op, const mx_desc *a) {
  int rc = la_matrix(op, "A", a);
  if (rc) return rc;
  char x[MX_SHAPE_BUF];
  if (a->shape[a->ndim - 1] != a->shape[a->ndim - 2])
    return mx_err(MX_EINVAL, "%s: A must be square in its last two axes, got %s", op,
                  mx_shape_str(x, a->ndim, a->shape));
  return MX_OK;
}

/* op(A) . op(B) of two batches: the result's shape into s (n dims) */
static int la_product(const char *op, const mx_desc *a, const mx_desc *b, bool ta, bool tb,
                      int64_t *s) {
  int rc = la_matrix(op, "A", a);
  if (!rc) rc = la_matrix(op, "B", b);
  if (!rc) rc = same_dtype(op, a, b);
  if (rc) return rc;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  mx_shape_str(x, a->ndim, a->shape);
  mx_shape_str(y, b->ndim, b->shape);
  int n = a->ndim;
  if (b->ndim != n)
    return mx_err(MX_EINVAL, "%s: A %s and B %s must have the same number of dims", op, x, y);
  for (int i = 0; i < n - 2; i++)
    if (a->shape[i] != b->shape[i])
      return mx_err(MX_EINVAL, "%s: batch dims differ: A %s, B %s (axis %d)", op, x, y, i + 1);
  int64_t m = a->shape[n - (ta ? 1 : 2)], ka = a->shape[n - (ta ? 2 : 1)];
  int64_t kb = b->shape[n - (tb ? 1 : 2)], nn = b->shape[n - (tb ? 2 : 1)];
  if (ka != kb)
    return mx_err(MX_EINVAL, "%s: A %s%s and B %s%s do not match: contracted dims %lld vs %lld",
                  op, x, ta ? " (transpose_a)" : "", y, tb ? " (transpose_b)" : "",
                  (long long)ka, (long long)kb);
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)(n - 2));
  s[n - 2] = m;
  s[n - 1] = nn;
  return MX_OK;
}

int mx_infer_linalg_gemm2(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_gemm2 *P = p;
  int64_t s[MX_MAX_DIM];
  int rc = la_product(def->name, in[0], in[1], P->transpose_a, P->transpose_b, s);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_linalg_gemm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_gemm *P = p;
  int64_t s[MX_MAX_DIM];
  int rc = la_product(def->name, in[0], in[1], P->transpose_a, P->transpose_b, s);
  if (rc) return rc;
  const mx_desc *c = in[2];
  int n = in[0]->ndim;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (c->dtype != in[0]->dtype)
    return mx_err(MX_EINVAL, "%s: C has dtype %s but A has dtype %s", def->name,
                  mx_dtype_name(c->dtype), mx_dtype_name(in[0]->dtype));
  bool ok = c->ndim == n;
  for (int i = 0; ok && i < n; i++) ok = c->shape[i] == s[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: C must have the product's shape %s, got %s", def->name,
                  mx_shape_str(x, n, s), mx_shape_str(y, c->ndim, c->shape));
  mx_out_set(&out[0], n, s, in[0]->dtype);
  return MX_OK;
}

/* potrf, inverse: square matrices in, the same shape out */
int mx_infer_linalg_square(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int rc = la_square(def->name, in[0]);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

/* potrf_backward: L and its ograd, both square batches of one shape */
int mx_infer_linalg_potrf_backward(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int rc = la_square(def->name, in[0]);
  if (!rc) rc = same_dtype(def->name, in[0], in[1]);
  if (rc) return rc;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  bool ok = in[1]->ndim == in[0]->ndim;
  for (int i = 0; ok && i < in[0]->ndim; i++) ok = in[1]->shape[i] == in[0]->shape[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd %s must have L's shape %s", def->name,
                  mx_shape_str(x, in[1]->ndim, in[1]->shape),
                  mx_shape_str(y, in[0]->ndim, in[0]->shape));
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

/* det, slogdet: one value per matrix, shape A's leading dims; (1,) for one matrix (MXNet) */
int mx_infer_linalg_det(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)info;
  const mx_desc *a = in[0];
  int rc = la_square(def->name, a);
  if (rc) return rc;
  int64_t one = 1;
  for (int k = 0; k < nout; k++) {
    if (a->ndim == 2) mx_out_set(&out[k], 1, &one, a->dtype);
    else mx_out_set(&out[k], a->ndim - 2, a->shape, a->dtype);
  }
  return MX_OK;
}

/* syrk: A (..., m, n) -> (..., m, m), or (..., n, n) with transpose */
int mx_infer_linalg_syrk(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_syrk *P = p;
  const mx_desc *a = in[0];
  int rc = la_matrix(def->name, "A", a);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  int64_t k = a->shape[a->ndim - (P->transpose ? 1 : 2)];
  s[a->ndim - 2] = s[a->ndim - 1] = k;
  mx_out_set(&out[0], a->ndim, s, a->dtype);
  return MX_OK;
}

/* The square input of extractdiag/extracttrian and its diagonal offset: *n the matrix size,
 * *o |offset|, which must leave a diagonal (an empty matrix takes any offset). */
static int la_offset(const char *op, const mx_desc *a, int64_t offset, int64_t *n, int64_t *o) {
  int rc = la_square(op, a);
  if (rc) return rc;
  *n = a->shape[a->ndim - 1];
  *o = offset < 0 ? -offset : offset;
  char x[MX_SHAPE_BUF];
  if (*o >= *n && *n > 0)
    return mx_err(MX_EINVAL, "%s: offset %lld is out of range for A %s (|offset| < %lld)", op,
                  (long long)offset, mx_shape_str(x, a->ndim, a->shape), (long long)*n);
  return MX_OK;
}

/* The input of makediag/maketrian, which gain a dim: 1 to MX_MAX_DIM - 1 dims. */
static int la_growable(const char *op, const mx_desc *a) {
  char x[MX_SHAPE_BUF];
  if (a->ndim < 1 || a->ndim >= MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: A must have 1 to %d dims, got %s", op, MX_MAX_DIM - 1,
                  mx_shape_str(x, a->ndim, a->shape));
  return MX_OK;
}

/* extractdiag: square (..., n, n) -> (..., n - |offset|); the offset must leave a diagonal */
int mx_infer_linalg_extractdiag(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_extractdiag *P = p;
  const mx_desc *a = in[0];
  int64_t n, o;
  int rc = la_offset(def->name, a, P->offset, &n, &o);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  s[a->ndim - 2] = n > o ? n - o : 0;
  mx_out_set(&out[0], a->ndim - 1, s, a->dtype);
  return MX_OK;
}

/* makediag: (..., n) -> (..., n + |offset|, n + |offset|) */
int mx_infer_linalg_makediag(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_makediag *P = p;
  const mx_desc *a = in[0];
  int rc = la_growable(def->name, a);
  if (rc) return rc;
  int64_t o = P->offset < 0 ? -P->offset : P->offset, m = a->shape[a->ndim - 1] + o;
  int64_t s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  s[a->ndim - 1] = m;
  s[a->ndim] = m;
  rc = mx_shape_check_size(def->name, a->ndim + 1, s);
  if (rc) return rc;
  mx_out_set(&out[0], a->ndim + 1, s, a->dtype);
  return MX_OK;
}

/* ---- extracttrian / maketrian: a triangle of k = n - |offset| rows packs into
 * k (k + 1) / 2 values */

/* extracttrian: square (..., n, n) -> (..., k (k + 1) / 2); the offset must leave a triangle */
int mx_infer_linalg_extracttrian(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_extracttrian *P = p;
  const mx_desc *a = in[0];
  int64_t n, o;
  int rc = la_offset(def->name, a, P->offset, &n, &o);
  if (rc) return rc;
  int64_t k = n > o ? n - o : 0, s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  s[a->ndim - 2] = k * (k + 1) / 2;
  mx_out_set(&out[0], a->ndim - 1, s, a->dtype);
  return MX_OK;
}

/* maketrian: (..., t) with t = k (k + 1) / 2 -> (..., k + |offset|, k + |offset|) */
int mx_infer_linalg_maketrian(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_linalg_maketrian *P = p;
  const mx_desc *a = in[0];
  char x[MX_SHAPE_BUF];
  int rc = la_growable(def->name, a);
  if (rc) return rc;
  int64_t t = a->shape[a->ndim - 1];
  /* sqrt's estimate, then exact integer steps (doubles round large t) */
  int64_t k = (int64_t)((sqrt(8.0 * (double)t + 1.0) - 1.0) / 2.0);
  while (k > 0 && k * (k + 1) / 2 > t) k--;
  while (k * (k + 1) / 2 < t) k++;
  if (k * (k + 1) / 2 != t)
    return mx_err(MX_EINVAL, "%s: the last axis of A %s must hold a triangle, k (k + 1) / 2 "
                  "values for some k, got %lld", def->name, mx_shape_str(x, a->ndim, a->shape),
                  (long long)t);
  int64_t o = P->offset < 0 ? -P->offset : P->offset;
  if (o > INT64_MAX / 4 - k)
    return mx_err(MX_EINVAL, "%s: offset %lld is too large", def->name, (long long)P->offset);
  int64_t m = k + o, s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  s[a->ndim - 1] = m;
  s[a->ndim] = m;
  rc = mx_shape_check_size(def->name, a->ndim + 1, s);
  if (rc) return rc;
  mx_out_set(&out[0], a->ndim + 1, s, a->dtype);
  return MX_OK;
}

/* trsm: A square (..., m, m), B (..., m, n) ((..., n, m) with rightside), same batch and
 * dtype; the result has B's shape */
static int la_tri_infer(const mx_op_def *def, bool rightside, mx_desc *const *in, mx_desc *out) {
  const mx_desc *a = in[0], *b = in[1];
  int rc = la_square(def->name, a);
  if (!rc) rc = la_matrix(def->name, "B", b);
  if (!rc) rc = same_dtype(def->name, a, b);
  if (rc) return rc;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  mx_shape_str(x, a->ndim, a->shape);
  mx_shape_str(y, b->ndim, b->shape);
  int n = a->ndim;
  if (b->ndim != n)
    return mx_err(MX_EINVAL, "%s: A %s and B %s must have the same number of dims", def->name,
                  x, y);
  for (int i = 0; i < n - 2; i++)
    if (a->shape[i] != b->shape[i])
      return mx_err(MX_EINVAL, "%s: batch dims differ: A %s, B %s (axis %d)", def->name, x, y,
                    i + 1);
  int64_t m = a->shape[n - 1], bm = b->shape[rightside ? n - 1 : n - 2];
  if (bm != m)
    return mx_err(MX_EINVAL, "%s: A %s and B %s%s do not match: B's %s must be %lld, got %lld",
                  def->name, x, y, rightside ? " (rightside)" : "",
                  rightside ? "columns" : "rows", (long long)m, (long long)bm);
  mx_out_set(&out[0], b->ndim, b->shape, b->dtype);
  return MX_OK;
}

int mx_infer_linalg_trsm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  return la_tri_infer(def, ((const struct mx_params_linalg_trsm *)p)->rightside, in, out);
}

/* ---- trmm, gelqf, syevd ---- */

/* trmm: as trsm (A square, B (..., m, n) or (..., n, m) with rightside), B's shape out */
int mx_infer_linalg_trmm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  return la_tri_infer(def, ((const struct mx_params_linalg_trmm *)p)->rightside, in, out);
}

/* gelqf: A (..., m, n) with m <= n (MXNet's restriction: L is square) -> Q (..., m, n),
 * L (..., m, m) */
int mx_infer_linalg_gelqf(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *a = in[0];
  int rc = la_matrix(def->name, "A", a);
  if (rc) return rc;
  char x[MX_SHAPE_BUF];
  int n = a->ndim;
  int64_t rows = a->shape[n - 2], cols = a->shape[n - 1];
  if (rows > cols)
    return mx_err(MX_EINVAL, "%s: A %s must have no more rows than columns (m <= n), got m = "
                  "%lld, n = %lld", def->name, mx_shape_str(x, n, a->shape), (long long)rows,
                  (long long)cols);
  int64_t s[MX_MAX_DIM];
  memcpy(s, a->shape, sizeof(int64_t) * (size_t)n);
  mx_out_set(&out[0], n, s, a->dtype);
  s[n - 1] = rows;
  mx_out_set(&out[1], n, s, a->dtype);
  return MX_OK;
}

/* syevd: square A (..., n, n) -> U (..., n, n), lambda (..., n) */
int mx_infer_linalg_syevd(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *a = in[0];
  int rc = la_square(def->name, a);
  if (rc) return rc;
  mx_out_set(&out[0], a->ndim, a->shape, a->dtype);
  mx_out_set(&out[1], a->ndim - 1, a->shape, a->dtype);
  return MX_OK;
}

/* syevd_backward: U (..., n, n), lambda (..., n), dU, dlambda of those shapes -> dA */
int mx_infer_linalg_syevd_backward(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *u = in[0], *l = in[1];
  int rc = la_square(def->name, u);
  for (int i = 1; !rc && i < 4; i++) rc = same_dtype(def->name, u, in[i]);
  if (rc) return rc;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  bool ok = l->ndim == u->ndim - 1 && in[3]->ndim == l->ndim && in[2]->ndim == u->ndim;
  for (int d = 0; ok && d < u->ndim; d++) {
    ok = in[2]->shape[d] == u->shape[d];
    if (d < l->ndim) ok = ok && l->shape[d] == u->shape[d] && in[3]->shape[d] == u->shape[d];
  }
  if (!ok)
    return mx_err(MX_EINVAL, "%s: U %s and lambda %s (and their gradients) do not match: "
                  "lambda must be U's shape without the last axis", def->name,
                  mx_shape_str(x, u->ndim, u->shape), mx_shape_str(y, l->ndim, l->shape));
  mx_out_set(&out[0], u->ndim, u->shape, u->dtype);
  return MX_OK;
}

/* ---- MXNet's interleaved attention matmuls ---------------
 * Layouts (MXNet's src/operator/contrib/transformer.cc): sequences are time-major.
 * qkv (T, N, 3*H*D) holds, per head, its query, key and value rows side by side, i.e.
 * viewed as (T, N, H, 3, D); q (Tq, N, H*D); kv (Tk, N, 2*H*D) as (Tk, N, H, 2, D);
 * attention (N*H, Tq, Tk) with batch index n*H + h. */
enum { ATT_SELF_QK, ATT_SELF_VALATT, ATT_ENCDEC_QK, ATT_ENCDEC_VALATT };

static int att_3d(const mx_op_def *def, const char *what, const mx_desc *t) {
  char x[MX_SHAPE_BUF];
  if (t->ndim != 3)
    return mx_err(MX_EINVAL, "%s: %s must be 3-d, got %s", def->name, what,
                  mx_shape_str(x, t->ndim, t->shape));
  return MX_OK;
}

/* Checks the forward's inputs fin[] and sets the forward's output shape s. */
static int att_check(const mx_op_def *def, int kind, bool has_heads, int64_t heads,
                     mx_desc *const *fin, int64_t *s) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (!has_heads || heads < 1)
    return mx_err(MX_EINVAL, "%s: heads must be given and >= 1, got %lld", def->name,
                  has_heads ? (long long)heads : 0LL);
  const mx_desc *a = fin[0], *b = kind == ATT_SELF_QK ? NULL : fin[1];
  static const char *const first[] = {"queries_keys_values", "queries_keys_values", "queries",
                                      "keys_values"};
  int rc = att_3d(def, first[kind], a);
  if (!rc && b) rc = att_3d(def, kind == ATT_ENCDEC_QK ? "keys_values" : "attention", b);
  if (rc) return rc;
  if (b && a->dtype != b->dtype)
    return mx_err(MX_EINVAL, "%s: inputs have dtypes %s and %s", def->name,
                  mx_dtype_name(a->dtype), mx_dtype_name(b->dtype));
  int64_t per = kind <= ATT_SELF_VALATT ? 3 : kind == ATT_ENCDEC_QK ? 1 : 2;
  if (a->shape[2] % (per * heads))
    return mx_err(MX_EINVAL, "%s: %s %s: its last dim must be a multiple of %lld (%s%lld heads)",
                  def->name, first[kind], mx_shape_str(x, 3, a->shape), (long long)(per * heads),
                  per == 1 ? "" : per == 2 ? "2 x " : "3 x ", (long long)heads);
  int64_t nh = a->shape[1] * heads, hd = a->shape[2] / per;
  switch (kind) {
  case ATT_SELF_QK:
    s[0] = nh, s[1] = a->shape[0], s[2] = a->shape[0];
    break;
  case ATT_ENCDEC_QK:
    if (b->shape[1] != a->shape[1] || b->shape[2] != 2 * a->shape[2])
      return mx_err(MX_EINVAL, "%s: keys_values %s must have shape (Tk, %lld, %lld) for "
                    "queries %s", def->name, mx_shape_str(x, 3, b->shape), (long long)a->shape[1],
                    (long long)(2 * a->shape[2]), mx_shape_str(y, 3, a->shape));
    s[0] = nh, s[1] = a->shape[0], s[2] = b->shape[0];
    break;
  default: /* valatt: attention (N*H, Tq, Tk) */
    if (b->shape[0] != nh || b->shape[2] != a->shape[0] ||
        (kind == ATT_SELF_VALATT && b->shape[1] != a->shape[0]))
      return mx_err(MX_EINVAL, "%s: attention %s must have shape (%lld, %s, %lld) for %s %s "
                    "and %lld heads", def->name, mx_shape_str(x, 3, b->shape), (long long)nh,
                    kind == ATT_SELF_VALATT ? "T" : "Tq", (long long)a->shape[0], first[kind],
                    mx_shape_str(y, 3, a->shape), (long long)heads);
    s[0] = b->shape[1], s[1] = a->shape[1], s[2] = hd;
  }
  return mx_shape_check_size(def->name, 3, s);
}

static int att_fwd(const mx_op_def *def, int kind, bool has_heads, int64_t heads,
                   mx_desc *const *in, mx_desc *out) {
  int64_t s[3];
  int rc = att_check(def, kind, has_heads, heads, in, s);
  if (rc) return rc;
  mx_out_set(&out[0], 3, s, in[0]->dtype);
  return MX_OK;
}

/* The backward ops: (ograd, forward inputs...) -> one gradient per forward input. */
static int att_bwd(const mx_op_def *def, int kind, bool has_heads, int64_t heads, int nout,
                   mx_desc *const *in, mx_desc *out) {
  int64_t s[3];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  int rc = att_check(def, kind, has_heads, heads, in + 1, s);
  if (rc) return rc;
  const mx_desc *g = in[0];
  if (g->ndim != 3 || memcmp(g->shape, s, sizeof s))
    return mx_err(MX_EINVAL, "%s: ograd %s must have the forward output's shape %s", def->name,
                  mx_shape_str(x, g->ndim, g->shape), mx_shape_str(y, 3, s));
  for (int k = 0; k < nout; k++) mx_out_set(&out[k], 3, in[k + 1]->shape, in[k + 1]->dtype);
  return MX_OK;
}

#define ATT_INFER(op, kind, fwd)                                                             \
  int mx_infer_##op(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,       \
                    int nout, mx_desc *out, mx_op_info *info) {                            \
    (void)nin; (void)info;                                                                  \
    const struct mx_params_##op *P = p;                                                     \
    return fwd ? att_fwd(def, kind, P->has_heads, P->heads, in, out)                        \
               : att_bwd(def, kind, P->has_heads, P->heads, nout, in, out);                 \
  }
ATT_INFER(interleaved_matmul_selfatt_qk, ATT_SELF_QK, 1)
ATT_INFER(interleaved_matmul_selfatt_valatt, ATT_SELF_VALATT, 1)
ATT_INFER(interleaved_matmul_encdec_qk, ATT_ENCDEC_QK, 1)
ATT_INFER(interleaved_matmul_encdec_valatt, ATT_ENCDEC_VALATT, 1)
ATT_INFER(interleaved_matmul_selfatt_qk_backward, ATT_SELF_QK, 0)
ATT_INFER(interleaved_matmul_selfatt_valatt_backward, ATT_SELF_VALATT, 0)
ATT_INFER(interleaved_matmul_encdec_qk_backward, ATT_ENCDEC_QK, 0)
ATT_INFER(interleaved_matmul_encdec_valatt_backward, ATT_ENCDEC_VALATT, 0)
