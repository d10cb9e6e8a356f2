/* kernels/ref/sort.c — reference sort/argsort/topk (+ sort_backward): per row along the
 * axis (inference's info.axis), a stable insertion sort of the positions. Order: NaN is
 * larger than every number; descending is the reversed comparison, still stable (ties
 * keep input order, as MXNet's std::stable_sort). int64 keys compare exactly. Index
 * outputs are 1-based. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <stdlib.h>
#include <string.h>

/* data viewed as (outer, n, inner) around axis a */
static void split3(const mx_tensor *d, int a, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < a; i++) *outer *= d->shape[i];
  for (int i = a + 1; i < d->ndim; i++) *inner *= d->shape[i];
  *n = d->shape[a];
}

/* element i strictly before element j in the order (asc or desc; NaN largest) */
static bool before(const mx_tensor *x, int64_t i, int64_t j, bool asc) {
  if (x->dtype == MX_I64) {
    const int64_t *p = mx_ptr(x);
    return asc ? p[i] < p[j] : p[i] > p[j];
  }
  double a = mx_load_f64(mx_ptr(x), x->dtype, i), b = mx_load_f64(mx_ptr(x), x->dtype, j);
  if (a != a) return !asc && b == b; /* NaN: before a number only descending */
  if (b != b) return asc;
  return asc ? a < b : a > b;
}

/* perm[0..n): the row's positions (0-based along the axis) in sorted order */
static void order_row(const mx_tensor *x, int64_t base, int64_t inner, int64_t n, bool asc,
                      int64_t *perm) {
  for (int64_t r = 0; r < n; r++) {
    int64_t q = r;
    while (q > 0 && before(x, base + r * inner, base + perm[q - 1] * inner, asc)) {
      perm[q] = perm[q - 1];
      q--;
    }
    perm[q] = r;
  }
}

enum { W_VALUE = 1, W_INDEX = 2, W_MASK = 4 };

/* The shared driver: for each row, the first k of the order as values (vo), 1-based
 * positions (io) and/or a mask (mo, data's shape). */
static int run(const mx_kctx *ctx, const mx_tensor *x, bool asc, int64_t k, mx_tensor *vo,
               mx_tensor *io, mx_tensor *mo) {
  int64_t outer, n, inner;
  split3(x, ctx->info.axis, &outer, &n, &inner);
  if (mo) memset(mx_ptr(mo), 0, (size_t)mo->size * mx_dtype_size(mo->dtype));
  if (n == 0 || x->size == 0) return MX_OK;
  int64_t *perm = malloc((size_t)n * sizeof *perm);
  if (!perm) return mx_err(MX_ENOMEM, "sort: no memory for %lld positions", (long long)n);
  size_t es = mx_dtype_size(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i, obase = o * k * inner + i;
      order_row(x, base, inner, n, asc, perm);
      for (int64_t j = 0; j < k; j++) {
        int64_t src = base + perm[j] * inner, dst = obase + j * inner;
        if (vo) memcpy((char *)mx_ptr(vo) + dst * es, (const char *)mx_ptr(x) + src * es, es);
        if (io) mx_store_f64(mx_ptr(io), io->dtype, dst, (double)(perm[j] + 1));
        if (mo) mx_store_f64(mx_ptr(mo), mo->dtype, src, 1);
      }
    }
  free(perm);
  return MX_OK;
}

int mx_ref_sort(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_sort *P = p;
  return run(ctx, in[0], P->is_ascend, in[0]->shape[ctx->info.axis], out[0], NULL, NULL);
}

int mx_ref_argsort(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_argsort *P = p;
  return run(ctx, in[0], P->is_ascend, in[0]->shape[ctx->info.axis], NULL, out[0], NULL);
}

int mx_ref_topk(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
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

/* sort_backward: zeros of data's shape, ograd added at the 1-based positions indices
 * names along the axis (clipped to it, as pick's default mode; NaN is position 1). */
int mx_ref_sort_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)nin; (void)nout; (void)p;
  const mx_tensor *x = in[0], *idx = in[1], *g = in[2];
  mx_tensor *r = out[0];
  int64_t outer, n, inner;
  split3(x, ctx->info.axis, &outer, &n, &inner);
  int64_t k = idx->shape[ctx->info.axis];
  for (int64_t i = 0; i < r->size; i++) mx_store_f64(mx_ptr(r), r->dtype, i, 0);
  if (n == 0) return MX_OK;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++)
      for (int64_t j = 0; j < k; j++) {
        int64_t s = (o * k + j) * inner + i;
        double v = mx_load_f64(mx_ptr(idx), idx->dtype, s);
        int64_t q = !(v >= 1) ? 0 : v >= (double)n ? n - 1 : (int64_t)v - 1;
        int64_t at = (o * n + q) * inner + i;
        mx_store_f64(mx_ptr(r), r->dtype, at,
                     mx_load_f64(mx_ptr(r), r->dtype, at) + mx_load_f64(mx_ptr(g), g->dtype, s));
      }
  return MX_OK;
}
