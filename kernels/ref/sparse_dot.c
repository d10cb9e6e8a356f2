/* sparse_dot.c — reference kernels of dot with sparse operands and of embedding's
 * row_sparse gradient (the sparse family's storage-type kernels of linalg's dot and
 * indexing's embedding_backward). Matrices are 2-d:
 *   dot(csr A (M, K), dense B (K, N))             -> dense (M, N)
 *   dot(csr A (M, K)^T, dense B (M, N))           -> row_sparse (K, N) (the columns A uses),
 *                                                    or dense (an out= slot)
 *   dot(csr A (M, K), row_sparse B (K, N))        -> dense (M, N)
 *   dot(dense A (M, K), csr B (K, N))             -> csr (M, N) (B's columns in every row),
 *                                                    or dense (an out= slot)
 *   embedding_backward(ids, weight (V, D), ograd) -> row_sparse (V, D): the ids' rows */
#include "mx_kernels_gen.h"
#include "sparse_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int mx_ref_dot_csr_dns(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t m = a->shape[0], n = b->shape[1];
  sp_zero(o);
  for (int64_t r = 0; r < m; r++)
    for (int64_t j = sp_indptr(a)[r]; j < sp_indptr(a)[r + 1]; j++)
      for (int64_t c = 0; c < n; c++)
        sp_st(o, r * n + c, sp_ld(o, r * n + c) + sp_val(a, j) * sp_ld(b, sp_cols(a)[j] * n + c));
  return MX_OK;
}

/* A^T B: row k of the result sums v * B[r] over A's entries (r, k, v) */
static void csrt_dense_into(const mx_tensor *a, const mx_tensor *b, mx_tensor *o,
                            const int64_t *slot) {
  int64_t n = b->shape[1];
  for (int64_t r = 0; r < a->shape[0]; r++)
    for (int64_t j = sp_indptr(a)[r]; j < sp_indptr(a)[r + 1]; j++) {
      int64_t k = slot ? slot[sp_cols(a)[j]] : sp_cols(a)[j];
      for (int64_t c = 0; c < n; c++) {
        int64_t at = k * n + c;
        double v = sp_val(a, j) * sp_ld(b, r * n + c);
        if (slot) sp_set(o, at, sp_val(o, at) + v);
        else sp_st(o, at, sp_ld(o, at) + v);
      }
    }
}

int mx_ref_dot_csrt_dns(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t k = a->shape[1], n = b->shape[1], nnr = 0;
  int64_t *slot = malloc(sizeof *slot * (size_t)(k ? k : 1));
  if (!slot) return mx_err(MX_ENOMEM, "dot: out of memory");
  for (int64_t c = 0; c < k; c++) slot[c] = -1;
  for (int64_t j = 0; j < mx_sparse_count(a); j++) slot[sp_cols(a)[j]] = 0;
  for (int64_t c = 0; c < k; c++)
    if (slot[c] == 0) slot[c] = nnr++;
  int rc = mx_sparse_alloc_rsp(o, nnr);
  if (!rc) {
    for (int64_t c = 0; c < k; c++)
      if (slot[c] >= 0) mx_sparse_index(o, 0)[slot[c]] = c;
    for (int64_t i = 0; i < nnr * n; i++) sp_set(o, i, 0);
    csrt_dense_into(a, b, o, slot);
  }
  free(slot);
  return rc;
}

int mx_ref_dot_csrt_dns_dns(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  sp_zero(out[0]);
  csrt_dense_into(in[0], in[1], out[0], NULL);
  return MX_OK;
}

/* the slot of row id k among a row_sparse tensor's sorted ids, -1 when not stored */
static int64_t find_row(const mx_tensor *s, int64_t k) {
  int64_t lo = 0, hi = sp_nnr(s) - 1;
  while (lo <= hi) {
    int64_t mid = lo + (hi - lo) / 2, v = sp_rows(s)[mid];
    if (v == k) return mid;
    if (v < k) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

int mx_ref_dot_csr_rsp(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t m = a->shape[0], n = b->shape[1];
  sp_zero(o);
  for (int64_t r = 0; r < m; r++)
    for (int64_t j = sp_indptr(a)[r]; j < sp_indptr(a)[r + 1]; j++) {
      int64_t s = find_row(b, sp_cols(a)[j]);
      if (s < 0) continue;
      for (int64_t c = 0; c < n; c++)
        sp_st(o, r * n + c, sp_ld(o, r * n + c) + sp_val(a, j) * sp_val(b, s * n + c));
    }
  return MX_OK;
}

int mx_ref_dot_dns_csr(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  sp_zero(o);
  for (int64_t i = 0; i < m; i++)
    for (int64_t r = 0; r < k; r++)
      for (int64_t j = sp_indptr(b)[r]; j < sp_indptr(b)[r + 1]; j++) {
        int64_t at = i * n + sp_cols(b)[j];
        sp_st(o, at, sp_ld(o, at) + sp_ld(a, i * k + r) * sp_val(b, j));
      }
  return MX_OK;
}

/* dot(dense A, csr B) -> csr, as MXNet's cpu kernel: every row of the result stores the
 * columns B uses (sorted), zeros included */
int mx_ref_dot_dns_csr_csr(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1], nc = 0;
  int64_t *slot = malloc(sizeof *slot * (size_t)(n ? n : 1));
  if (!slot) return mx_err(MX_ENOMEM, "dot: out of memory");
  for (int64_t c = 0; c < n; c++) slot[c] = -1;
  for (int64_t j = 0; j < mx_sparse_count(b); j++) slot[sp_cols(b)[j]] = 0;
  for (int64_t c = 0; c < n; c++)
    if (slot[c] == 0) slot[c] = nc++;
  int rc = m && nc > INT64_MAX / m ? mx_err(MX_ENOMEM, "dot: result too large")
                                   : mx_sparse_alloc_csr(o, m * nc);
  if (!rc) {
    int64_t *ptr = mx_sparse_index(o, 0), *col = mx_sparse_index(o, 1);
    for (int64_t i = 0; i <= m; i++) ptr[i] = i * nc;
    for (int64_t i = 0; i < m; i++)
      for (int64_t c = 0; c < n; c++)
        if (slot[c] >= 0) col[i * nc + slot[c]] = c;
    for (int64_t e = 0; e < m * nc; e++) sp_set(o, e, 0);
    for (int64_t i = 0; i < m; i++)
      for (int64_t r = 0; r < k; r++)
        for (int64_t j = sp_indptr(b)[r]; j < sp_indptr(b)[r + 1]; j++) {
          int64_t at = i * nc + slot[sp_cols(b)[j]];
          sp_set(o, at, sp_val(o, at) + sp_ld(a, i * k + r) * sp_val(b, j));
        }
  }
  free(slot);
  return rc;
}

/* ---- embedding's row_sparse gradient ------------------------------------------------- */

static int id_of(const mx_tensor *ids, int64_t m, int64_t rows, int64_t *r) {
  double v = sp_ld(ids, m), t = trunc(v);
  if (!(t >= 0 && t < (double)rows))
    return mx_err(MX_EINVAL, "embedding_backward: data[%lld] = %g is not a token id in [0, %lld) "
                  "(input_dim %lld; ids are 0-based)", (long long)m, v, (long long)rows,
                  (long long)rows);
  *r = (int64_t)t;
  return MX_OK;
}

int mx_ref_embedding_backward_rsp(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *ids = in[0], *g = in[2];
  mx_tensor *o = out[0];
  int64_t rows = o->shape[0], cols = o->shape[1], nnr = 0;
  int64_t *slot = malloc(sizeof *slot * (size_t)(rows ? rows : 1));
  if (!slot) return mx_err(MX_ENOMEM, "embedding_backward: out of memory");
  for (int64_t r = 0; r < rows; r++) slot[r] = -1;
  int rc = MX_OK;
  for (int64_t m = 0; m < ids->size && !rc; m++) {
    int64_t r = 0;
    if (!(rc = id_of(ids, m, rows, &r))) slot[r] = 0;
  }
  for (int64_t r = 0; r < rows && !rc; r++)
    if (slot[r] == 0) slot[r] = nnr++;
  if (!rc) rc = mx_sparse_alloc_rsp(o, nnr);
  if (!rc) {
    for (int64_t r = 0; r < rows; r++)
      if (slot[r] >= 0) mx_sparse_index(o, 0)[slot[r]] = r;
    for (int64_t i = 0; i < nnr * cols; i++) sp_set(o, i, 0);
    for (int64_t m = 0; m < ids->size; m++) {
      int64_t r = 0;
      id_of(ids, m, rows, &r);
      for (int64_t c = 0; c < cols; c++)
        sp_set(o, slot[r] * cols + c, sp_val(o, slot[r] * cols + c) + sp_ld(g, m * cols + c));
    }
  }
  free(slot);
  return rc;
}
