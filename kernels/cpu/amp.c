/* kernels/cpu/amp.c — the amp family's casts on the CPU: each output (row-major, the input's
 * shape, the dtype inference chose) converted in parallel blocks by mx_convert (vectorised
 * f32 <-> bf16/f16); an output of the input's dtype is a copy. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <string.h>

typedef struct {
  const char *src;
  char *dst;
  int sdt, ddt;
} conv_ctx;

static void conv_range(int64_t b, int64_t e, void *vc) {
  const conv_ctx *c = vc;
  size_t ss = mx_dtype_size(c->sdt), ds = mx_dtype_size(c->ddt);
  if (c->sdt == c->ddt) memcpy(c->dst + b * ds, c->src + b * ss, (size_t)(e - b) * ss);
  else mx_convert(c->dst + b * (int64_t)ds, c->ddt, c->src + b * (int64_t)ss, c->sdt, e - b);
}

static void convert(const mx_tensor *x, mx_tensor *o) {
  conv_ctx c = { mx_ptr(x), mx_ptr(o), x->dtype, o->dtype };
  mx_parallel_for(x->size, 1 << 16, conv_range, &c);
}

int mx_cpu_amp_cast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                    mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  convert(in[0], out[0]);
  return MX_OK;
}

int mx_cpu_amp_multicast(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nout;
  for (int i = 0; i < nin; i++) convert(in[i], out[i]);
  return MX_OK;
}
