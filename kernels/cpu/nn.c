/* kernels/cpu/nn.c — dropout for f32 (mask generation and the product in one pass
 * when no axes are shared; counter-based RNG, so the mask equals the ref kernel's
 * for the same seed). Other dtypes and shared-axes masks run the ref kernel. */
#include "mx_ops_gen.h"
#include "internal.h"

#include <string.h>

int mx_ref_dropout(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

typedef struct job {
  const float *x;
  float *y, *m;
  uint64_t seed, first;
  double p;
  float scale;
} job;

static void drop_range(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  for (int64_t i = b; i < e; i++) {
    double u = mx_random_unit(mx_random_bits(j->seed, j->first + (uint64_t)i));
    float k = u >= j->p ? j->scale : 0.0f;
    j->m[i] = k;
    j->y[i] = j->x[i] * k;
  }
}

int mx_cpu_dropout(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  const struct mx_params_dropout *p = params;
  const mx_tensor *x = in[0], *y = out[0], *m = out[1];
  bool active = (p->training || p->mode == MX_DROPOUT_MODE_ALWAYS) && p->p > 0;
  if (x->dtype != MX_F32 || m->size != y->size || !active || p->p >= 1)
    return mx_ref_dropout(ctx, params, nin, in, nout, out);
  /* counters reserved at dispatch (its inference counts them), in program order */
  job j = {mx_ptr(x), mx_ptr(y), mx_ptr(m), ctx->rng_seed, ctx->rng_first, p->p,
           (float)(1.0 / (1.0 - p->p))};
  mx_parallel_for(y->size, 65536, drop_range, &j); /* RNG-bound: worth a thread sooner */
  return MX_OK;
}
