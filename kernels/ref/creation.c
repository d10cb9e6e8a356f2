/* kernels/ref/creation.c — reference creation kernels: out[0] of params.shape/dtype. */
#include "mx_ops_gen.h"
#include "ref.h"

static int fill(mx_tensor *o, double v) {
  void *p = mx_ptr(o);
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(p, o->dtype, i, v);
  return MX_OK;
}

int mx_ref_zeros(const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 0);
}
int mx_ref_ones(const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 1);
}
int mx_ref_full(const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  return fill(out[0], ((const struct mx_params_full *)p)->value);
}
