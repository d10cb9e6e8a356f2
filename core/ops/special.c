/* special.c — inference for the special family's three-argument op (betainc): the inputs
 * broadcast together (NumPy rules, right-aligned) and promote to one dtype, at least
 * float32. The two-argument ops use elemwise's broadcast_float. */
#include "infer.h"

int mx_infer_broadcast3_float(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int64_t s01[MX_MAX_DIM], shape[MX_MAX_DIM];
  int n01, n, rc = mx_broadcast_shape(def->name, in[0], in[1], &n01, s01);
  if (rc) return rc;
  mx_desc ab = *in[0];
  ab.ndim = n01;
  for (int i = 0; i < n01; i++) ab.shape[i] = s01[i];
  rc = mx_broadcast_shape(def->name, &ab, in[2], &n, shape);
  if (rc) return rc;
  int dt = mx_dtype_promote(mx_dtype_promote(in[0]->dtype, in[1]->dtype), in[2]->dtype);
  mx_out_set(&out[0], n, shape, mx_dtype_is_float(dt) ? dt : MX_F32);
  return MX_OK;
}
