/* sequence.c — shape/dtype inference for the sequence family: sequence_mask/last/reverse
 * (data (T, N, ...) or (N, T, ...), sequence_length (N) read only with
 * use_sequence_length) and ctc_loss (data (T, N, C), label (N, L), optional lengths (N)).
 * The length VALUES are checked by the kernels (inference sees only shapes). */
#include "infer.h"

#include "mx_ops_gen.h"

/* The layout checks shared by the three sequence ops (all their param structs start with
 * use_sequence_length; the axis sits elsewhere, so it is passed). Sets info->axis to the
 * time axis (0 or 1). */
static int seq_check(const mx_op_def *def, bool use_len, int64_t axis, int nin,
                     mx_desc *const *in, int first, mx_op_info *info) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *x = in[first];
  if (x->ndim < 2)
    return mx_err(MX_EINVAL, "%s: data must have at least 2 dims (time and batch), got shape %s",
                  def->name, mx_shape_str(b, x->ndim, x->shape));
  int ax;
  int rc = mx_norm_axis(def->name, "axis", axis, x->ndim, &ax);
  if (rc) return rc;
  if (ax > 1)
    return mx_err(MX_EINVAL, "%s: axis must be 1 (data (T, N, ...)) or 2 (data (N, T, ...)), "
                  "got %d", def->name, ax + 1);
  info->axis = ax;
  if (use_len && nin < first + 2)
    return mx_err(MX_EINVAL, "%s: use_sequence_length is true but no sequence_length input "
                  "was given", def->name);
  if (!use_len && nin > first + 1)
    return mx_err(MX_EINVAL, "%s: a sequence_length input was given but use_sequence_length "
                  "is false (pass use_sequence_length = true)", def->name);
  if (use_len) {
    const mx_desc *l = in[first + 1];
    int64_t n = x->shape[1 - ax];
    if (l->ndim != 1 || l->shape[0] != n)
      return mx_err(MX_EINVAL, "%s: sequence_length must have shape (%lld) (the batch size of "
                    "data %s), got %s", def->name, (long long)n,
                    mx_shape_str(b, x->ndim, x->shape), mx_shape_str(c, l->ndim, l->shape));
  }
  return MX_OK;
}

/* sequence_mask, sequence_reverse: out like data. */
int mx_infer_sequence_mask(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                           int nout, mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_sequence_mask *sp = p;
  int rc = seq_check(def, sp->use_sequence_length, sp->axis, nin, in, 0, info);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}
int mx_infer_sequence_reverse(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                              int nout, mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_sequence_reverse *sp = p;
  int rc = seq_check(def, sp->use_sequence_length, sp->axis, nin, in, 0, info);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

/* sequence_last: data's shape without the time axis. */
int mx_infer_sequence_last(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                           int nout, mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_sequence_last *sp = p;
  char b[MX_SHAPE_BUF];
  int rc = seq_check(def, sp->use_sequence_length, sp->axis, nin, in, 0, info);
  if (rc) return rc;
  const mx_desc *x = in[0];
  if (x->shape[info->axis] == 0)
    return mx_err(MX_EINVAL, "%s: data %s has no time steps (axis %d): no last step", def->name,
                  mx_shape_str(b, x->ndim, x->shape), info->axis + 1);
  int64_t s[MX_MAX_DIM];
  int k = 0;
  for (int d = 0; d < x->ndim; d++)
    if (d != info->axis) s[k++] = x->shape[d];
  mx_out_set(&out[0], k, s, x->dtype);
  return MX_OK;
}

/* sequence_last_backward(ograd, data, sequence_length?): ograd of sequence_last's output
 * shape; out like data (ograd's dtype). */
int mx_infer_sequence_last_backward(const mx_op_def *def, const void *p, int nin,
                                    mx_desc *const *in, int nout, mx_desc *out,
                                    mx_op_info *info) {
  (void)nout;
  const struct mx_params_sequence_last_backward *sp = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int rc = seq_check(def, sp->use_sequence_length, sp->axis, nin, in, 1, info);
  if (rc) return rc;
  const mx_desc *g = in[0], *x = in[1];
  bool ok = g->ndim == x->ndim - 1;
  for (int d = 0, k = 0; ok && d < x->ndim; d++)
    if (d != info->axis) ok = g->shape[k++] == x->shape[d];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd has shape %s, expected data %s without axis %d",
                  def->name, mx_shape_str(b, g->ndim, g->shape),
                  mx_shape_str(c, x->ndim, x->shape), info->axis + 1);
  mx_out_set(&out[0], x->ndim, x->shape, g->dtype);
  return MX_OK;
}

/* ctc_loss inputs from position `first`: data (T, N, C) float, label (N, L), then
 * data_lengths / label_lengths (N) as the flags say. */
static int ctc_check(const mx_op_def *def, const struct mx_params_ctc_loss *sp, int nin,
                     mx_desc *const *in, int first) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *x = in[first], *l = in[first + 1];
  if (x->ndim != 3)
    return mx_err(MX_EINVAL, "%s: data must be (T, N, C) (steps, batch, classes), got shape %s",
                  def->name, mx_shape_str(b, x->ndim, x->shape));
  if (!mx_dtype_is_float(x->dtype))
    return mx_err(MX_EINVAL, "%s: data must be a float dtype, got %s", def->name,
                  mx_dtype_name(x->dtype));
  if (x->shape[2] < 1)
    return mx_err(MX_EINVAL, "%s: data needs at least 1 class (the blank), got shape %s",
                  def->name, mx_shape_str(b, x->ndim, x->shape));
  if (l->ndim != 2 || l->shape[0] != x->shape[1])
    return mx_err(MX_EINVAL, "%s: label must be (N, L) with N = %lld (data %s), got shape %s",
                  def->name, (long long)x->shape[1], mx_shape_str(b, x->ndim, x->shape),
                  mx_shape_str(c, l->ndim, l->shape));
  int want = first + 2 + sp->use_data_lengths + sp->use_label_lengths;
  if (nin != want)
    return mx_err(MX_EINVAL, "%s: with use_data_lengths=%s and use_label_lengths=%s it takes "
                  "%d input(s) (data, label%s%s), got %d", def->name,
                  sp->use_data_lengths ? "true" : "false", sp->use_label_lengths ? "true" : "false",
                  want - first, sp->use_data_lengths ? ", data_lengths" : "",
                  sp->use_label_lengths ? ", label_lengths" : "", nin - first);
  for (int i = first + 2; i < nin; i++) {
    const mx_desc *v = in[i];
    const char *what = i == first + 2 && sp->use_data_lengths ? "data_lengths" : "label_lengths";
    if (v->ndim != 1 || v->shape[0] != x->shape[1])
      return mx_err(MX_EINVAL, "%s: %s must have shape (%lld) (the batch size), got %s",
                    def->name, what, (long long)x->shape[1], mx_shape_str(b, v->ndim, v->shape));
  }
  return MX_OK;
}

int mx_infer_ctc_loss(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                      mx_desc *out, mx_op_info *info) {
  (void)nout; (void)info;
  int rc = ctc_check(def, p, nin, in, 0);
  if (rc) return rc;
  mx_out_set(&out[0], 1, &in[0]->shape[1], in[0]->dtype);
  return MX_OK;
}

/* ctc_loss_backward(ograd (N), data, label, lengths...): out like data. */
int mx_infer_ctc_loss_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                               int nout, mx_desc *out, mx_op_info *info) {
  (void)nout; (void)info;
  char b[MX_SHAPE_BUF];
  int rc = ctc_check(def, p, nin, in, 1);
  if (rc) return rc;
  const mx_desc *g = in[0], *x = in[1];
  if (g->ndim != 1 || g->shape[0] != x->shape[1])
    return mx_err(MX_EINVAL, "%s: ograd must have shape (%lld) (the loss's), got %s", def->name,
                  (long long)x->shape[1], mx_shape_str(b, g->ndim, g->shape));
  mx_out_set(&out[0], 3, x->shape, x->dtype);
  return MX_OK;
}
