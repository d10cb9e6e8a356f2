/* amp.c — inference of the amp family (core/ops/amp.lua): shapes kept, dtypes chosen. */
#include "infer.h"
#include "mx_ops_gen.h"

/* float dtypes ranked by width: f16 and bf16 both narrow (bf16 the wider range) */
static int rank(int dt) {
  switch (dt) {
  case MX_F16: return 1;
  case MX_BF16: return 2;
  case MX_F32: return 3;
  case MX_F64: return 4;
  default: return 0;
  }
}

int mx_infer_amp_cast(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_amp_cast *P = p;
  if (!P->has_dtype || P->dtype < 0) return mx_err(MX_EINVAL, "%s: dtype is required", def->name);
  if (!mx_dtype_is_float(P->dtype))
    return mx_err(MX_EINVAL, "%s: dtype must be a float dtype, got %s", def->name,
                  mx_dtype_name(P->dtype));
  int dt = mx_dtype_is_float(in[0]->dtype) ? P->dtype : in[0]->dtype;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, dt);
  return MX_OK;
}

int mx_infer_amp_multicast(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)info;
  const struct mx_params_amp_multicast *P = p;
  if (!P->has_num_outputs || P->num_outputs != nin || nout != nin)
    return mx_err(MX_EINVAL, "%s: num_outputs must equal the number of inputs (%d)", def->name,
                  nin);
  int best = -1;
  for (int i = 0; i < nin; i++) {
    int r = rank(in[i]->dtype);
    if (!r) continue;
    if (best < 0 || (P->cast_narrow ? r < rank(best) : r > rank(best))) best = in[i]->dtype;
  }
  for (int i = 0; i < nin; i++)
    mx_out_set(&out[i], in[i]->ndim, in[i]->shape, rank(in[i]->dtype) ? best : in[i]->dtype);
  return MX_OK;
}
