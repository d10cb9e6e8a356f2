/* image.c — inference for the image ops (to_tensor). */
#include "mx_ops_gen.h"
#include "infer.h"
#include "shape.h"

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

/* ---- image ops (imresize, copy_make_border, colour ops, imrotate) ---- */
/* data: (H, W, C) or (N, H, W, C); rgb: C must be 3 */
static int image_check(const mx_op_def *def, const mx_desc *x, int rgb) {
  if (x->ndim != 3 && x->ndim != 4)
    return mx_err(MX_EINVAL, "%s: expected an image (H, W, C) or a batch (N, H, W, C), got "
                  "%d-d data", def->name, x->ndim);
  if (rgb && x->shape[x->ndim - 1] != 3)
    return mx_err(MX_EINVAL, "%s: expected 3 channels (RGB) in the last axis, got %lld",
                  def->name, (long long)x->shape[x->ndim - 1]);
  return MX_OK;
}

int mx_infer_image_same(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  int rc = image_check(def, in[0], 0);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

int mx_infer_image_rgb(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  int rc = image_check(def, in[0], 1);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  return MX_OK;
}

#define MX_IMG_MAX_SIDE (INT64_C(1) << 20)

int mx_infer_imresize(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_imresize *P = p;
  const mx_desc *x = in[0];
  int rc = image_check(def, x, 0);
  if (rc) return rc;
  if (!P->has_w || !P->has_h) return mx_err(MX_EINVAL, "%s: w and h are required", def->name);
  if (P->w <= 0 || P->h <= 0 || P->w > MX_IMG_MAX_SIDE || P->h > MX_IMG_MAX_SIDE)
    return mx_err(MX_EINVAL, "%s: w=%lld, h=%lld must be in 1..2^20", def->name,
                  (long long)P->w, (long long)P->h);
  if (P->interp < 0 || P->interp > 3)
    return mx_err(MX_EINVAL, "%s: interp=%lld: expected 0 (nearest), 1 (bilinear), 2 (bicubic) or "
                  "3 (area)", def->name, (long long)P->interp);
  int n = x->ndim;
  if (x->shape[n - 3] == 0 || x->shape[n - 2] == 0)
    return mx_err(MX_EINVAL, "%s: the image is empty (%lldx%lld)", def->name,
                  (long long)x->shape[n - 2], (long long)x->shape[n - 3]);
  int64_t s[4];
  for (int i = 0; i < n; i++) s[i] = x->shape[i];
  s[n - 3] = P->h;
  s[n - 2] = P->w;
  if ((rc = mx_shape_check_size(def->name, n, s))) return rc;
  mx_out_set(&out[0], n, s, x->dtype);
  return MX_OK;
}

int mx_infer_copy_make_border(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_copy_make_border *P = p;
  const mx_desc *x = in[0];
  int rc = image_check(def, x, 0);
  if (rc) return rc;
  const int64_t b[4] = { P->top, P->bot, P->left, P->right };
  for (int i = 0; i < 4; i++)
    if (b[i] < 0 || b[i] > MX_IMG_MAX_SIDE)
      return mx_err(MX_EINVAL, "%s: top/bot/left/right must be in 0..2^20, got %lld", def->name,
                    (long long)b[i]);
  if (P->type < 0 || P->type > 4)
    return mx_err(MX_EINVAL, "%s: type=%lld: expected 0 (constant), 1 (replicate), 2 (reflect), "
                  "3 (wrap) or 4 (reflect_101)", def->name, (long long)P->type);
  int n = x->ndim;
  if (P->type != 0 && (x->shape[n - 3] == 0 || x->shape[n - 2] == 0) &&
      (b[0] || b[1] || b[2] || b[3]))
    return mx_err(MX_EINVAL, "%s: an empty image has no pixels to extend (type %lld)",
                  def->name, (long long)P->type);
  int64_t s[4];
  for (int i = 0; i < n; i++) s[i] = x->shape[i];
  s[n - 3] += b[0] + b[1];
  s[n - 2] += b[2] + b[3];
  if ((rc = mx_shape_check_size(def->name, n, s))) return rc;
  mx_out_set(&out[0], n, s, x->dtype);
  return MX_OK;
}
