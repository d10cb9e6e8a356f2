/* kernels/cpu/creation.c — fills across the pool. One element is converted to the
 * dtype once and then replicated; zero is a memset. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <string.h>

typedef struct {
  char *p;
  size_t es;
  uint64_t one; /* the value, already in the dtype's bytes */
} fill_ctx;

static void fill_range(int64_t b, int64_t e, void *vc) {
  const fill_ctx *c = vc;
  switch (c->es) {
  case 1: memset(c->p + b, (int)(uint8_t)c->one, (size_t)(e - b)); break;
  case 2: { uint16_t v = (uint16_t)c->one, *y = (uint16_t *)c->p; for (int64_t i = b; i < e; i++) y[i] = v; } break;
  case 4: { uint32_t v = (uint32_t)c->one, *y = (uint32_t *)c->p; for (int64_t i = b; i < e; i++) y[i] = v; } break;
  default: { uint64_t v = c->one, *y = (uint64_t *)c->p; for (int64_t i = b; i < e; i++) y[i] = v; } break;
  }
}

static int fill(mx_tensor *o, double v) {
  fill_ctx c = { mx_ptr(o), mx_dtype_size(o->dtype), 0 };
  mx_store_f64(&c.one, o->dtype, 0, v);
  mx_parallel_for(o->size, 1 << 16, fill_range, &c);
  return MX_OK;
}

int mx_cpu_zeros(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 0);
}
int mx_cpu_ones(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 1);
}
int mx_cpu_full(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  return fill(out[0], ((const struct mx_params_full *)p)->value);
}
int mx_cpu_zeros_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 0);
}
int mx_cpu_ones_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)p; (void)nin; (void)in; (void)nout;
  return fill(out[0], 1);
}
int mx_cpu_full_like(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)nin; (void)in; (void)nout;
  return fill(out[0], ((const struct mx_params_full_like *)p)->value);
}
