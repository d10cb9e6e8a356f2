/* kernels/ref/amp.c — reference kernels of the amp family: out[i] = in[i] converted to
 * out's dtype element by element (row-major, any shape), through double (copied when the dtype stays). Inference has
 * chosen each output's dtype (integers keep theirs). */
#include "mx_ops_gen.h"
#include "ref.h"

#include <string.h>

static void convert(const mx_tensor *x, mx_tensor *o) {
  const void *src = mx_ptr(x);
  void *dst = mx_ptr(o);
  if (x->dtype == o->dtype) { /* integers keep their dtype: exact (int64 beyond 2^53) */
    memcpy(dst, src, (size_t)x->size * mx_dtype_size(x->dtype));
    return;
  }
  for (int64_t i = 0; i < x->size; i++) mx_store_f64(dst, o->dtype, i, mx_load_f64(src, x->dtype, i));
}

int mx_ref_amp_cast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  convert(in[0], out[0]);
  return MX_OK;
}

int mx_ref_amp_multicast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nout;
  for (int i = 0; i < nin; i++) convert(in[i], out[i]);
  return MX_OK;
}
