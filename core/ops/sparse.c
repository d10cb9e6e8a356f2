/* sparse.c — the sparse family's inference (sparse_retain) and the predicates that pick
 * storage-type kernels (the op table's `applies`, core/ops/sparse.lua): pure functions
 * of params and input descriptors. */
#include "infer.h"

#include "mx_ops_gen.h"

#include <string.h>

/* sparse_retain(data, indices): data's shape and dtype; indices 1-d integers. */
int mx_infer_sparse_retain(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                           int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char a[MX_SHAPE_BUF];
  const mx_desc *d = in[0], *ix = in[1];
  if (d->ndim < 1) return mx_err(MX_EINVAL, "%s: data must have at least 1 dimension", def->name);
  if (ix->ndim != 1)
    return mx_err(MX_EINVAL, "%s: indices must be 1-d, got shape %s", def->name,
                  mx_shape_str(a, ix->ndim, ix->shape));
  if (mx_dtype_is_float(ix->dtype) || ix->dtype == MX_BOOL)
    return mx_err(MX_EINVAL, "%s: indices must be integers, got %s", def->name,
                  mx_dtype_name(ix->dtype));
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  return MX_OK;
}

static int cast_target(const void *p) {
  return ((const struct mx_params_cast_storage *)p)->stype;
}
bool mx_stype_applies_to_dns(const void *p, int nin, const mx_desc *in) {
  (void)nin, (void)in;
  return cast_target(p) == MX_CAST_STORAGE_STYPE_DEFAULT;
}
bool mx_stype_applies_to_rsp(const void *p, int nin, const mx_desc *in) {
  (void)nin, (void)in;
  return cast_target(p) == MX_CAST_STORAGE_STYPE_ROW_SPARSE;
}
bool mx_stype_applies_to_csr(const void *p, int nin, const mx_desc *in) {
  (void)nin;
  return cast_target(p) == MX_CAST_STORAGE_STYPE_CSR && in[0].ndim == 2;
}

/* dot on two matrices, lhs as it is (nn) or transposed (tn), rhs never transposed. */
bool mx_stype_applies_dot_nn(const void *p, int nin, const mx_desc *in) {
  (void)nin;
  const struct mx_params_dot *d = p;
  return !d->transpose_a && !d->transpose_b && in[0].ndim == 2 && in[1].ndim == 2;
}
bool mx_stype_applies_dot_tn(const void *p, int nin, const mx_desc *in) {
  (void)nin;
  const struct mx_params_dot *d = p;
  return d->transpose_a && !d->transpose_b && in[0].ndim == 2 && in[1].ndim == 2;
}

/* elementwise on operands of one shape (no broadcasting of sparse operands) */
bool mx_stype_applies_same_shape(const void *p, int nin, const mx_desc *in) {
  (void)p, (void)nin;
  return in[0].ndim == in[1].ndim &&
         memcmp(in[0].shape, in[1].shape, sizeof(int64_t) * (size_t)in[0].ndim) == 0;
}
bool mx_stype_applies_where_same(const void *p, int nin, const mx_desc *in) {
  (void)p, (void)nin;
  return in[0].ndim == in[1].ndim &&
         memcmp(in[0].shape, in[1].shape, sizeof(int64_t) * (size_t)in[0].ndim) == 0;
}

/* slice with unit steps (the csr kernel keeps a box of rows and columns) */
bool mx_stype_applies_slice_unit_step(const void *p, int nin, const mx_desc *in) {
  (void)nin, (void)in;
  const struct mx_params_slice *s = p;
  for (int i = 0; i < s->step.n; i++)
    if (s->step.v[i] != 1) return false;
  return true;
}

bool mx_stype_applies_sparse_grad(const void *p, int nin, const mx_desc *in) {
  (void)nin, (void)in;
  return ((const struct mx_params_embedding_backward *)p)->sparse_grad;
}

/* square_sum of a row_sparse matrix along its second axis, keepdims: row_sparse rows */
bool mx_stype_applies_square_sum_rows(const void *p, int nin, const mx_desc *in) {
  (void)nin;
  const struct mx_params_square_sum *s = p;
  return in[0].ndim == 2 && s->keepdims && s->axis.n == 1 &&
         (s->axis.v[0] == 1 || s->axis.v[0] == -1);
}
