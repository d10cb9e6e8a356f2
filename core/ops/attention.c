/* core/ops/attention.c — shape inference of the attention family (core/ops/attention.lua):
 * qkv (T, N, 3*H*D) time-major as MXNet's interleaved attention ops, valid_length (N). */
#include "infer.h"
#include "mx_ops_gen.h"
#include "shape.h"

#include <string.h>

/* Checks qkv and valid_length (when given) and sets the output shape (T, N, H*D). */
static int selfatt_check(const mx_op_def *def, bool has_heads, int64_t heads, const mx_desc *qkv,
                         const mx_desc *vl, int64_t *s) {
  char x[MX_SHAPE_BUF];
  if (!has_heads || heads < 1)
    return mx_err(MX_EINVAL, "%s: heads must be given and >= 1, got %lld", def->name,
                  has_heads ? (long long)heads : 0LL);
  if (qkv->ndim != 3)
    return mx_err(MX_EINVAL, "%s: queries_keys_values must be 3-d (T, N, 3*heads*D), got %s",
                  def->name, mx_shape_str(x, qkv->ndim, qkv->shape));
  if (!mx_dtype_is_float(qkv->dtype))
    return mx_err(MX_EINVAL, "%s: queries_keys_values must be a float tensor, got %s",
                  def->name, mx_dtype_name(qkv->dtype));
  if (qkv->shape[2] % (3 * heads))
    return mx_err(MX_EINVAL, "%s: queries_keys_values %s: its last dim must be a multiple of "
                  "%lld (3 x %lld heads)", def->name, mx_shape_str(x, 3, qkv->shape),
                  (long long)(3 * heads), (long long)heads);
  if (vl && (vl->ndim != 1 || vl->shape[0] != qkv->shape[1]))
    return mx_err(MX_EINVAL, "%s: valid_length %s must have shape (%lld): one length per "
                  "sequence", def->name, mx_shape_str(x, vl->ndim, vl->shape),
                  (long long)qkv->shape[1]);
  s[0] = qkv->shape[0], s[1] = qkv->shape[1], s[2] = qkv->shape[2] / 3;
  return mx_shape_check_size(def->name, 3, s);
}

int mx_infer_interleaved_selfatt(const mx_op_def *def, const void *p, int nin,
                                 mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nout; (void)info;
  const struct mx_params_interleaved_selfatt *P = p;
  int64_t s[3];
  int rc = selfatt_check(def, P->has_heads, P->heads, in[0], nin > 1 ? in[1] : NULL, s);
  if (rc) return rc;
  mx_out_set(&out[0], 3, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_interleaved_selfatt_backward(const mx_op_def *def, const void *p, int nin,
                                          mx_desc *const *in, int nout, mx_desc *out,
                                          mx_op_info *info) {
  (void)nout; (void)info;
  const struct mx_params_interleaved_selfatt_backward *P = p;
  int64_t s[3];
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  int rc = selfatt_check(def, P->has_heads, P->heads, in[1], nin > 2 ? in[2] : NULL, s);
  if (rc) return rc;
  const mx_desc *g = in[0];
  if (g->ndim != 3 || memcmp(g->shape, s, sizeof s))
    return mx_err(MX_EINVAL, "%s: ograd %s must have the forward output's shape %s", def->name,
                  mx_shape_str(x, g->ndim, g->shape), mx_shape_str(y, 3, s));
  mx_out_set(&out[0], 3, in[1]->shape, in[1]->dtype);
  return MX_OK;
}
