/* kernels/cpu/amp.c — the amp family's casts on the CPU: each output (row-major, the input's
 * shape, the dtype inference chose) converted in parallel blocks; f32 <-> bf16 (the casts
 * bf16 training makes around every target op) by loops the compiler vectorises, the other
 * pairs by mx_convert; an output of the input's dtype is a copy. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <string.h>

typedef struct {
  const char *src;
  char *dst;
  int sdt, ddt;
} conv_ctx;

/* round to nearest even; a NaN stays a quiet NaN (mx_f32_to_bf16's rule): branch-free so
 * that the loop vectorises */
static void f32_to_bf16(uint16_t *restrict d, const uint32_t *restrict s, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint32_t x = s[i];
    uint32_t r = (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x400000u)
                                                : x + 0x7fffu + ((x >> 16) & 1u);
    d[i] = (uint16_t)(r >> 16);
  }
}

static void bf16_to_f32(uint32_t *restrict d, const uint16_t *restrict s, int64_t n) {
  for (int64_t i = 0; i < n; i++) d[i] = (uint32_t)s[i] << 16;
}

static void conv_range(int64_t b, int64_t e, void *vc) {
  const conv_ctx *c = vc;
  size_t ss = mx_dtype_size(c->sdt), ds = mx_dtype_size(c->ddt);
  char *d = c->dst + b * (int64_t)ds;
  const char *s = c->src + b * (int64_t)ss;
  if (c->sdt == c->ddt) memcpy(d, s, (size_t)(e - b) * ss);
  else if (c->sdt == MX_F32 && c->ddt == MX_BF16)
    f32_to_bf16((uint16_t *)(void *)d, (const uint32_t *)(const void *)s, e - b);
  else if (c->sdt == MX_BF16 && c->ddt == MX_F32)
    bf16_to_f32((uint32_t *)(void *)d, (const uint16_t *)(const void *)s, e - b);
  else mx_convert(d, c->ddt, s, c->sdt, e - b);
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
