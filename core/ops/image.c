/* image.c — inference for the image ops (to_tensor). */
#include "mx_ops_gen.h"
#include "infer.h"

/* to_tensor: (H, W, C) -> (C, H, W), (N, H, W, C) -> (N, C, H, W); float32 out */
int mx_infer_to_tensor(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
    mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout;
  const mx_desc *x = in[0];
  int n = x->ndim;
  if (n != 3 && n != 4)
    return mx_err(MX_EINVAL, "%s: expected an image (H, W, C) or a batch (N, H, W, C), got %d-d "
                  "data", def->name, n);
  int64_t s[4];
  if (n == 4) s[0] = x->shape[0];
  s[n - 3] = x->shape[n - 1];
  s[n - 2] = x->shape[n - 3];
  s[n - 1] = x->shape[n - 2];
  mx_out_set(&out[0], n, s, MX_F32);
  return MX_OK;
}
