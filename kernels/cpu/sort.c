/* kernels/cpu/sort.c — sort/argsort/topk: per row along the axis (info.axis), the keys
 * gathered with their positions and qsort'ed; the position breaks ties, which makes the
 * unstable qsort stable (MXNet's std::stable_sort order) and equal to the reference.
 * NaN is larger than every number; int64 keys compare exactly (doubles would tie distinct
 * values above 2^53), every other dtype is exact in double. Index outputs are 1-based. */
#include "internal.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <stdlib.h>
#include <string.h>

typedef struct { double v; int64_t i; } key_f;
typedef struct { int64_t v; int64_t i; } key_i;

static int cmp_pos(int64_t a, int64_t b) { return (a > b) - (a < b); }
/* ascending with NaN last; descending is the reversed value order, NaN first */
static int cmp_f(double a, double b) {
  bool na = a != a, nb = b != b;
  if (na || nb) return (int)na - (int)nb;
  return (a > b) - (a < b);
}
static int asc_f(const void *x, const void *y) {
  const key_f *a = x, *b = y;
  int c = cmp_f(a->v, b->v);
  return c ? c : cmp_pos(a->i, b->i);
}
static int desc_f(const void *x, const void *y) {
  const key_f *a = x, *b = y;
  int c = cmp_f(b->v, a->v);
  return c ? c : cmp_pos(a->i, b->i);
}
static int asc_i(const void *x, const void *y) {
  const key_i *a = x, *b = y;
  int c = (a->v > b->v) - (a->v < b->v);
  return c ? c : cmp_pos(a->i, b->i);
}
static int desc_i(const void *x, const void *y) {
  const key_i *a = x, *b = y;
  int c = (b->v > a->v) - (b->v < a->v);
  return c ? c : cmp_pos(a->i, b->i);
}

/* The first k of each row's order: values (vo), 1-based positions (io), a mask (mo). */
static int run(const mx_kctx *ctx, const mx_tensor *x, bool asc, int64_t k, mx_tensor *vo,
               mx_tensor *io, mx_tensor *mo) {
  int a = ctx->info.axis;
  int64_t n = x->shape[a], inner = 1;
  for (int d = a + 1; d < x->ndim; d++) inner *= x->shape[d];
  if (mo) memset(mx_ptr(mo), 0, (size_t)mo->size * mx_dtype_size(mo->dtype));
  if (n == 0 || x->size == 0) return MX_OK;
  int64_t outer = x->size / (n * inner);
  bool exact = x->dtype == MX_I64;
  size_t ks = exact ? sizeof(key_i) : sizeof(key_f);
  void *keys = malloc((size_t)n * ks);
  if (!keys) return mx_err(MX_ENOMEM, "sort: no memory for %lld keys", (long long)n);
  int (*cmp)(const void *, const void *) =
      exact ? (asc ? asc_i : desc_i) : (asc ? asc_f : desc_f);
  size_t es = mx_dtype_size(x->dtype);
  const char *px = mx_ptr(x);
  key_f *kf = keys;
  key_i *ki = keys;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i, obase = o * k * inner + i;
      for (int64_t r = 0; r < n; r++) {
        if (exact) ki[r] = (key_i){ ((const int64_t *)px)[base + r * inner], r };
        else kf[r] = (key_f){ mx_load_f64(px, x->dtype, base + r * inner), r };
      }
      qsort(keys, (size_t)n, ks, cmp);
      for (int64_t j = 0; j < k; j++) {
        int64_t pos = exact ? ki[j].i : kf[j].i;
        int64_t src = base + pos * inner, dst = obase + j * inner;
        if (vo) memcpy((char *)mx_ptr(vo) + dst * es, px + src * es, es);
        if (io) {
          if (io->dtype == MX_I64) ((int64_t *)mx_ptr(io))[dst] = pos + 1;
          else mx_store_f64(mx_ptr(io), io->dtype, dst, (double)(pos + 1));
        }
        if (mo) mx_store_f64(mx_ptr(mo), mo->dtype, src, 1);
      }
    }
  free(keys);
  return MX_OK;
}

int mx_cpu_sort(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_sort *P = p;
  return run(ctx, in[0], P->is_ascend, in[0]->shape[ctx->info.axis], out[0], NULL, NULL);
}

int mx_cpu_argsort(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_argsort *P = p;
  return run(ctx, in[0], P->is_ascend, in[0]->shape[ctx->info.axis], NULL, out[0], NULL);
}

int mx_cpu_topk(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_topk *P = p;
  const mx_tensor *x = in[0];
  int64_t n = x->shape[ctx->info.axis], k = P->k < 1 ? n : P->k; /* k < 1: all (MXNet) */
  switch (P->ret_typ) {
  case MX_TOPK_RET_TYP_VALUE: return run(ctx, x, P->is_ascend, k, out[0], NULL, NULL);
  case MX_TOPK_RET_TYP_INDICES: return run(ctx, x, P->is_ascend, k, NULL, out[0], NULL);
  case MX_TOPK_RET_TYP_MASK: return run(ctx, x, P->is_ascend, k, NULL, NULL, out[0]);
  default: return run(ctx, x, P->is_ascend, k, out[0], out[1], NULL);
  }
}
