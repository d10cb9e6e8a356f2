/* kernels/cpu/indexing.c — take and its backward as row copies: data viewed as
 * (outer, n, inner), each index moves one contiguous run of `inner` elements
 * (an embedding row). Positions as in kernels/ref/indexing.c. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


#define I64_LIM 9223372036854775808.0 /* 2^63, exact in double */

/* 0-based positions of the 1-based index values; false when raise finds one out of range */
static bool positions(const struct mx_params_take *P, const mx_tensor *idx, int64_t n,
                      int64_t *pos) {
  for (int64_t m = 0; m < idx->size; m++) {
    double v = mx_load_f64(mx_ptr(idx), idx->dtype, m);
    double t = v != v ? 1 : trunc(v);
    /* beyond int64 (Inf included): the conversion would be undefined; raise rejects it,
     * clip takes the nearest end, wrap takes a finite one modulo n exactly, Inf to 0 */
    if (!(t > -I64_LIM && t < I64_LIM)) {
      if (P->mode == 2) return false;
      if (P->mode != 1) t = t < 0 ? 1 : (double)n;
      else t = n == 0 || isinf(t) ? 1 : fmod(t, (double)n);
    }
    int64_t i = (int64_t)t - 1; /* t > -2^63: no overflow */
    if (P->mode == 1) i = n ? ((i % n) + n) % n : 0;
    else if (P->mode == 2 && (i < 0 || i >= n)) return false;
    else i = i < 0 ? 0 : i >= n ? n - 1 : i;
    pos[m] = i;
  }
  return true;
}

typedef struct {
  const char *src;
  char *dst;
  const int64_t *pos;
  int64_t nidx, n, row; /* row: bytes per (index, outer) run */
} take_ctx;

static void take_range(int64_t b, int64_t e, void *vc) {
  const take_ctx *c = vc;
  for (int64_t k = b; k < e; k++) { /* k = o * nidx + m */
    int64_t o = k / c->nidx, m = k % c->nidx;
    memcpy(c->dst + k * c->row, c->src + (o * c->n + c->pos[m]) * c->row, (size_t)c->row);
  }
}

int mx_cpu_take(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_take *P = p;
  const mx_tensor *d = in[0], *idx = in[1];
  int a = (int)(P->axis < 0 ? P->axis + d->ndim : P->axis);
  int64_t outer = 1, inner = 1, n = d->shape[a];
  for (int i = 0; i < a; i++) outer *= d->shape[i];
  for (int i = a + 1; i < d->ndim; i++) inner *= d->shape[i];
  if (out[0]->size == 0) return MX_OK;
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(idx->size ? idx->size : 1));
  if (!pos) return mx_err(MX_ENOMEM, "take: out of memory");
  if (!positions(P, idx, n, pos)) {
    free(pos);
    return MX_DECLINE; /* reports the bad index */
  }
  take_ctx c = { mx_ptr(d), mx_ptr(out[0]), pos, idx->size, n,
                 inner * (int64_t)mx_dtype_size(d->dtype) };
  mx_parallel_for(outer * idx->size, 1 + (64 << 10) / (c.row + 16), take_range, &c);
  free(pos);
  return MX_OK;
}

/* Rows may repeat in indices, so the sum runs serially per outer index. */
int mx_cpu_take_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                         mx_tensor *const *out) {
  const struct mx_params_take_backward *P = p;
  const mx_tensor *d = in[0], *idx = in[1], *g = in[2];
  mx_tensor *r = out[0];
  if (g->dtype != MX_F32 || r->dtype != MX_F32)
    return MX_DECLINE;
  int a = (int)(P->axis < 0 ? P->axis + d->ndim : P->axis);
  int64_t outer = 1, inner = 1, n = d->shape[a];
  for (int i = 0; i < a; i++) outer *= d->shape[i];
  for (int i = a + 1; i < d->ndim; i++) inner *= d->shape[i];
  memset(mx_ptr(r), 0, mx_nbytes(r));
  if (r->size == 0 || idx->size == 0) return MX_OK;
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)idx->size);
  if (!pos) return mx_err(MX_ENOMEM, "take_backward: out of memory");
  struct mx_params_take tp = { P->axis, P->mode };
  bool ok = positions(&tp, idx, n, pos);
  const float *pg = mx_ptr(g);
  float *pr = mx_ptr(r);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t m = 0; m < idx->size; m++) {
      if (!ok) { /* raise mode with a bad index: skip it, as the ref does */
        double v = mx_load_f64(mx_ptr(idx), idx->dtype, m);
        int64_t i = (int64_t)trunc(v) - 1;
        if (i < 0 || i >= n) continue;
        pos[m] = i;
      }
      float *dst = pr + (o * n + pos[m]) * inner;
      const float *src = pg + (o * idx->size + m) * inner;
      for (int64_t i = 0; i < inner; i++) dst[i] += src[i];
    }
  free(pos);
  return MX_OK;
}

/* ---- embedding ----------------------------------------------
 * Forward: the token ids checked once into 0-based rows, then row copies across the pool.
 * Backward: the (input_dim, output_dim) gradient split into blocks of rows, one task each:
 * the ids are bucketed by block first (one stable counting sort), then a task zeroes its
 * rows and adds in the ograd rows of its ids, in id order, so no two threads ever write
 * one row (no atomics) and sums do not depend on the thread count.
 * sparse_grad: the same dense result; this is where a row_sparse gradient (the unique
 * rows + their sums) will be produced once that storage exists (docs/attention.md). */

/* 0-based rows of the ids; false at the first id outside [0, rows) (the ref reports it) */
static bool emb_rows(const mx_tensor *d, int64_t rows, int64_t *pos) {
  const void *p = mx_ptr(d);
  int64_t n = d->size;
  if (d->dtype == MX_I64 || d->dtype == MX_I32) {
    for (int64_t m = 0; m < n; m++) {
      int64_t v = d->dtype == MX_I64 ? ((const int64_t *)p)[m] : ((const int32_t *)p)[m];
      if (v < 0 || v >= rows) return false;
      pos[m] = v;
    }
    return true;
  }
  for (int64_t m = 0; m < n; m++) {
    double t = trunc(mx_load_f64(p, d->dtype, m));
    if (!(t >= 0 && t < (double)rows)) return false;
    pos[m] = (int64_t)t;
  }
  return true;
}

int mx_cpu_embedding(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  const mx_tensor *d = in[0], *w = in[1];
  if (out[0]->size == 0) return MX_OK;
  int64_t *pos = mx_kctx_workspace(ctx, sizeof(int64_t) * (size_t)d->size);
  if (!pos) return mx_err(MX_ENOMEM, "embedding: out of memory (workspace)");
  if (!emb_rows(d, w->shape[0], pos)) return MX_DECLINE;
  take_ctx c = { mx_ptr(w), mx_ptr(out[0]), pos, d->size, w->shape[0],
                 w->shape[1] * (int64_t)mx_dtype_size(w->dtype) };
  mx_parallel_for(d->size, 1 + (64 << 10) / (c.row + 16), take_range, &c);
  return MX_OK;
}

typedef struct {
  const int64_t *pos, *order, *start; /* ids bucketed by block, in id order */
  int64_t rows, cols, per;
  const float *g;
  float *o;
} emb_bwd_ctx;

static void emb_bwd_blocks(int64_t b0, int64_t b1, void *vc) {
  const emb_bwd_ctx *c = vc;
  for (int64_t b = b0; b < b1; b++) {
    int64_t r0 = b * c->per, r1 = r0 + c->per < c->rows ? r0 + c->per : c->rows;
    int64_t cols = c->cols;
    memset(c->o + r0 * cols, 0, sizeof(float) * (size_t)((r1 - r0) * cols));
    for (int64_t q = c->start[b]; q < c->start[b + 1]; q++) {
      int64_t m = c->order[q];
      float *restrict dst = c->o + c->pos[m] * cols;
      const float *restrict src = c->g + m * cols;
      for (int64_t j = 0; j < cols; j++) dst[j] += src[j];
    }
  }
}

int mx_cpu_embedding_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  const mx_tensor *d = in[0], *g = in[2];
  mx_tensor *o = out[0];
  if (g->dtype != MX_F32 || o->dtype != MX_F32 || o->size == 0)
    return MX_DECLINE;
  int64_t rows = o->shape[0], cols = o->shape[1], n = d->size;
  /* blocks of ~256 KB of gradient */
  int64_t per = 1 + (256 << 10) / (4 * cols + 1);
  int64_t nb = (rows + per - 1) / per;
  /* one workspace: positions (n), their order by block (n), block starts (nb + 1) */
  int64_t *pos = mx_kctx_workspace(ctx, sizeof(int64_t) * (size_t)(2 * n + nb + 1));
  if (!pos) return mx_err(MX_ENOMEM, "embedding_backward: out of memory (workspace)");
  if (!emb_rows(d, rows, pos)) return MX_DECLINE;
  int64_t *order = pos + n, *start = order + n;
  /* a stable counting sort of the ids by block: each block then sees only its ids, in
   * id order (sums independent of the thread count) */
  memset(start, 0, sizeof(int64_t) * (size_t)(nb + 1));
  for (int64_t m = 0; m < n; m++) start[pos[m] / per + 1]++;
  for (int64_t b = 0; b < nb; b++) start[b + 1] += start[b];
  for (int64_t m = 0; m < n; m++) order[start[pos[m] / per]++] = m;
  for (int64_t b = nb; b > 0; b--) start[b] = start[b - 1]; /* back to block starts */
  start[0] = 0;
  emb_bwd_ctx c = { pos, order, start, rows, cols, per, mx_ptr(g), mx_ptr(o) };
  mx_parallel_for(nb, 1, emb_bwd_blocks, &c);
  return MX_OK;
}
