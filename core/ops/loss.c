/* loss.c — shape/dtype inference for MXNet's loss heads (core/ops/loss.lua): SoftmaxOutput
 * and its backward, the regression outputs. Partial: with data known, an unknown label is
 * filled in (MXNet's infer_shape gives softmax_label from data alone). */
#include "infer.h"

#include "mx_ops_gen.h"

static bool known(const mx_desc *t) {
  if (t->ndim < 0) return false;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0) return false;
  return true;
}

static bool same_shape(const mx_desc *a, const mx_desc *b) {
  if (a->ndim != b->ndim) return false;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != b->shape[i]) return false;
  return true;
}

/* The rows SoftmaxOutput normalises: data as (outer, k, inner) and how many labels a
 * class-id label holds (outer * inner). */
static void softmax_output_geometry(const struct mx_params_softmax_output *P, const mx_desc *d,
                                    int64_t *outer, int64_t *k, int64_t *inner) {
  int64_t size = mx_shape_prod(d->ndim, d->shape);
  int64_t n = d->ndim > 0 ? d->shape[0] : 1;
  if (P->multi_output && d->ndim >= 2) {
    *outer = n;
    *k = d->shape[1];
    *inner = n && *k ? size / n / *k : 0;
  } else if (P->preserve_shape) {
    *k = d->ndim > 0 ? d->shape[d->ndim - 1] : 1;
    *outer = *k ? size / *k : 0;
    *inner = 1;
  } else {
    *outer = n;
    *k = n ? size / n : 0;
    *inner = 1;
  }
}

/* data, label: the label holds probabilities (data's shape) or one class id per row. */
static int check_softmax_label(const mx_op_def *def, const struct mx_params_softmax_output *P,
                               const mx_desc *d, mx_desc *l) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int64_t outer, k, inner;
  softmax_output_geometry(P, d, &outer, &k, &inner);
  if (l->ndim < 0) { /* partial: MXNet's default label shape */
    if (P->multi_output) {
      l->ndim = 2;
      l->shape[0] = outer;
      l->shape[1] = inner;
    } else if (P->preserve_shape && d->ndim > 1) {
      l->ndim = d->ndim - 1;
      for (int i = 0; i + 1 < d->ndim; i++) l->shape[i] = d->shape[i];
    } else {
      l->ndim = 1;
      l->shape[0] = outer;
    }
    if (l->dtype < 0) l->dtype = d->dtype;
    return MX_OK;
  }
  if (!known(l)) return MX_OK;
  if (same_shape(d, l)) return MX_OK; /* probabilities */
  if (mx_shape_prod(l->ndim, l->shape) != outer * inner ||
      (P->multi_output && l->ndim > 0 && l->shape[0] != outer))
    return mx_err(MX_EINVAL, "%s: label %s must hold one class id per %s (%lld of them%s) or "
                  "be probabilities of data's shape %s", def->name,
                  mx_shape_str(b, l->ndim, l->shape),
                  P->multi_output ? "sample and position" : P->preserve_shape ? "row" : "sample",
                  (long long)(outer * inner), P->multi_output ? ", first dim the batch" : "",
                  mx_shape_str(c, d->ndim, d->shape));
  return MX_OK;
}

static int check_data(const mx_op_def *def, const mx_desc *d) {
  char b[MX_SHAPE_BUF];
  if (d->ndim < 1)
    return mx_err(MX_EINVAL, "%s: data must have at least 1 dim, got %s", def->name,
                  mx_shape_str(b, d->ndim, d->shape));
  if (!mx_dtype_is_float(d->dtype))
    return mx_err(MX_EINVAL, "%s: data must be floating-point, got %s", def->name,
                  mx_dtype_name(d->dtype));
  return MX_OK;
}

/* softmax_output: data (n, ...), label (see check_softmax_label) -> out, data's shape. */
int mx_infer_softmax_output(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                            int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_softmax_output *P = p;
  const mx_desc *d = in[0];
  if (!known(d) || d->dtype < 0) return MX_OK; /* nothing to say yet */
  int rc = check_data(def, d);
  if (!rc) rc = check_softmax_label(def, P, d, in[1]);
  if (rc) return rc;
  if (!(P->smooth_alpha >= 0 && P->smooth_alpha <= 1))
    return mx_err(MX_EINVAL, "%s: smooth_alpha must be in [0, 1], got %g", def->name,
                  P->smooth_alpha);
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  return MX_OK;
}

/* softmax_output_backward: out, label, ograd (out's shape) -> d data, out's shape. */
int mx_infer_softmax_output_backward(const mx_op_def *def, const void *p, int nin,
                                     mx_desc *const *in, int nout, mx_desc *out,
                                     mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_softmax_output *P = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *y = in[0];
  int rc = check_data(def, y);
  if (!rc) rc = check_softmax_label(def, P, y, in[1]);
  if (rc) return rc;
  if (!same_shape(y, in[2]))
    return mx_err(MX_EINVAL, "%s: ograd %s must have out's shape %s", def->name,
                  mx_shape_str(b, in[2]->ndim, in[2]->shape), mx_shape_str(c, y->ndim, y->shape));
  mx_out_set(&out[0], y->ndim, y->shape, y->dtype);
  return MX_OK;
}

/* Linear/Logistic/MAERegressionOutput: data (n, ...), label of data's size with the same
 * first dim ((n) for (n, 1) data when filled in) -> out, data's shape. */
int mx_infer_regression_output(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                               int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *d = in[0];
  mx_desc *l = in[1];
  if (!known(d) || d->dtype < 0) return MX_OK;
  int rc = check_data(def, d);
  if (rc) return rc;
  if (l->ndim < 0) {
    if (d->ndim == 2 && d->shape[1] == 1) {
      l->ndim = 1;
      l->shape[0] = d->shape[0];
    } else {
      l->ndim = d->ndim;
      for (int i = 0; i < d->ndim; i++) l->shape[i] = d->shape[i];
    }
    if (l->dtype < 0) l->dtype = d->dtype;
  } else if (known(l) && (l->ndim < 1 || l->shape[0] != d->shape[0] ||
                          mx_shape_prod(l->ndim, l->shape) != mx_shape_prod(d->ndim, d->shape))) {
    return mx_err(MX_EINVAL, "%s: label %s must have data %s's size and first dim", def->name,
                  mx_shape_str(b, l->ndim, l->shape), mx_shape_str(c, d->ndim, d->shape));
  }
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  return MX_OK;
}
