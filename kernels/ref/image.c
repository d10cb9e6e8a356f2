/* kernels/ref/image.c — reference to_tensor: data (N, H, W, C) (N = 1 for a 3-d
 * image), uint8 or float32, row-major; out (N, C, H, W) float32,
 * out[n, c, h, w] = data[n, h, w, c] / 255 computed in double and rounded once. */
#include "mx_ops_gen.h"
#include "ref.h"

int mx_ref_to_tensor(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *x = in[0];
  int n = x->ndim;
  int64_t N = n == 4 ? x->shape[0] : 1, H = x->shape[n - 3], W = x->shape[n - 2],
          Cc = x->shape[n - 1];
  float *o = mx_ptr(out[0]);
  for (int64_t b = 0; b < N; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t w = 0; w < W; w++)
        for (int64_t c = 0; c < Cc; c++) {
          int64_t src = ((b * H + h) * W + w) * Cc + c, dst = ((b * Cc + c) * H + h) * W + w;
          o[dst] = (float)(mx_load_f64(mx_ptr(x), x->dtype, src) / 255.0);
        }
  return MX_OK;
}
