/* kernels/ref/nn.c — reference kernels for the nn op family.
 *
 * dropout: in[0] data (any shape, float) -> out[0] (data's shape): data * mask, and
 *   out[1] mask (data's shape with the `axes` dims set to 1, broadcast over them):
 *   1/(1-p) where kept, 0 where dropped. Element i of the mask keeps iff
 *   unit(bits(seed, first + i)) >= p, with seed/first reserved when the op was
 *   dispatched (the kernel context's rng_seed, rng_first; counter-based: the same seed gives the same mask
 *   for any thread count or engine order, ref or cpu). Outside
 *   training (training=false and mode "training") or with p == 0 the op is the
 *   identity and the mask is all ones; no random numbers are drawn then.
 * activation: in[0] -> out[0] same shape: act_type relu | sigmoid | tanh | softrelu
 *   (log(1+e^x)) | softsign (x/(1+|x|)). */
#include "mx_ops_gen.h"
#include "ref.h"

#include <math.h>

int mx_ref_dropout(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  const struct mx_params_dropout *p = params;
  (void)nin; (void)nout;
  const mx_tensor *x = in[0], *y = out[0], *m = out[1];
  bool active = (p->training || p->mode == MX_DROPOUT_MODE_ALWAYS) && p->p > 0;
  if (!active) {
    for (int64_t i = 0; i < m->size; i++) mx_store_f64(mx_ptr(m), m->dtype, i, 1.0);
    for (int64_t i = 0; i < y->size; i++)
      mx_store_f64(mx_ptr(y), y->dtype, i, mx_load_f64(mx_ptr(x), x->dtype, i));
    return MX_OK;
  }
  /* counters reserved at dispatch (its inference counts them), in program order */
  uint64_t seed = ctx->rng_seed, first = ctx->rng_first;
  double scale = p->p >= 1 ? 0.0 : 1.0 / (1.0 - p->p);
  for (int64_t i = 0; i < m->size; i++) {
    double u = mx_random_unit(mx_random_bits(seed, first + (uint64_t)i));
    mx_store_f64(mx_ptr(m), m->dtype, i, u >= p->p ? scale : 0.0);
  }
  for (int64_t i = 0; i < y->size; i++) {
    int64_t j = mx_ref_bcast_offset(i, y->ndim, y->shape, m->ndim, m->shape);
    double v = mx_load_f64(mx_ptr(x), x->dtype, i) * mx_load_f64(mx_ptr(m), m->dtype, j);
    mx_store_f64(mx_ptr(y), y->dtype, i, v);
  }
  return MX_OK;
}

static double act(int type, double x) {
  switch (type) {
  case MX_ACTIVATION_ACT_TYPE_RELU: return x > 0 ? x : 0;
  case MX_ACTIVATION_ACT_TYPE_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case MX_ACTIVATION_ACT_TYPE_TANH: return tanh(x);
  case MX_ACTIVATION_ACT_TYPE_SOFTRELU: /* stable softplus */
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  default: return x / (1.0 + fabs(x)); /* MX_ACTIVATION_ACT_TYPE_SOFTSIGN */
  }
}

int mx_ref_activation(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  const struct mx_params_activation *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < out[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i,
                 act(p->act_type, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i)));
  return MX_OK;
}
