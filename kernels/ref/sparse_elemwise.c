/* sparse_elemwise.c — reference kernels of add, sub and mul with sparse operands (the
 * sparse family's storage-type kernels of elemwise ops; operands of one shape, one
 * dtype after promotion):
 *   rsp op rsp -> rsp, csr op csr -> csr: add/sub over the union of the stored rows
 *     (entries), mul over their intersection;
 *   add/sub with one dense operand -> dense; mul with one dense operand keeps the sparse
 *     operand's structure (its values times the dense values at their positions). */
#include "mx_kernels_gen.h"
#include "sparse_ref.h"

enum { OP_ADD, OP_SUB, OP_MUL };

static double apply(int op, double a, double b) {
  return op == OP_ADD ? a + b : op == OP_SUB ? a - b : a * b;
}

/* row_sparse op row_sparse: merges the sorted row ids (union, or intersection for mul) */
static int rsp_rsp(int op, const mx_tensor *a, const mx_tensor *b, mx_tensor *o) {
  int64_t na = sp_nnr(a), nb = sp_nnr(b), row = mx_sparse_row_elems(a), n = 0;
  const int64_t *ra = sp_rows(a), *rb = sp_rows(b);
  for (int pass = 0; pass < 2; pass++) {
    int64_t i = 0, j = 0, k = 0;
    while (i < na || j < nb) {
      bool ta = i < na && (j >= nb || ra[i] <= rb[j]);
      bool tb = j < nb && (i >= na || rb[j] <= ra[i]);
      if (op == OP_MUL && !(ta && tb)) { i += ta; j += tb; continue; }
      if (pass == 1) {
        mx_sparse_index(o, 0)[k] = ta ? ra[i] : rb[j];
        for (int64_t e = 0; e < row; e++) {
          double x = ta ? sp_val(a, i * row + e) : 0, y = tb ? sp_val(b, j * row + e) : 0;
          sp_set(o, k * row + e, apply(op, x, y));
        }
      }
      k++;
      i += ta;
      j += tb;
    }
    if (pass == 0) {
      n = k;
      int rc = mx_sparse_alloc_rsp(o, n);
      if (rc) return rc;
    }
  }
  return MX_OK;
}

/* csr op csr: the same merge within each row, over column ids */
static int csr_csr(int op, const mx_tensor *a, const mx_tensor *b, mx_tensor *o) {
  int64_t rows = a->shape[0];
  const int64_t *pa = sp_indptr(a), *ca = sp_cols(a), *pb = sp_indptr(b), *cb = sp_cols(b);
  for (int pass = 0; pass < 2; pass++) {
    int64_t k = 0;
    for (int64_t r = 0; r < rows; r++) {
      int64_t i = pa[r], j = pb[r];
      while (i < pa[r + 1] || j < pb[r + 1]) {
        bool ta = i < pa[r + 1] && (j >= pb[r + 1] || ca[i] <= cb[j]);
        bool tb = j < pb[r + 1] && (i >= pa[r + 1] || cb[j] <= ca[i]);
        if (op == OP_MUL && !(ta && tb)) { i += ta; j += tb; continue; }
        if (pass == 1) {
          mx_sparse_index(o, 1)[k] = ta ? ca[i] : cb[j];
          sp_set(o, k, apply(op, ta ? sp_val(a, i) : 0, tb ? sp_val(b, j) : 0));
        }
        k++;
        i += ta;
        j += tb;
      }
      if (pass == 1) mx_sparse_index(o, 0)[r + 1] = k;
    }
    if (pass == 0) {
      int rc = mx_sparse_alloc_csr(o, k);
      if (rc) return rc;
      mx_sparse_index(o, 0)[0] = 0;
    }
  }
  return MX_OK;
}

/* the dense position of stored value k of sparse s (row_sparse: k counts elements) */
static int64_t dense_pos(const mx_tensor *s, int64_t k, int64_t r) {
  if (s->stype == MX_STYPE_CSR) return r * s->shape[1] + sp_cols(s)[k];
  int64_t row = mx_sparse_row_elems(s);
  return sp_rows(s)[k / row] * row + k % row;
}
/* the number of stored values of s (row_sparse: rows times their elements) */
static int64_t stored(const mx_tensor *s) {
  return s->stype == MX_STYPE_CSR ? mx_sparse_count(s) : sp_nnr(s) * mx_sparse_row_elems(s);
}
/* the csr row of stored value k (advancing *r over empty rows), -1 for row_sparse */
static int64_t row_of(const mx_tensor *s, int64_t k, int64_t *r) {
  if (s->stype != MX_STYPE_CSR) return -1;
  while (sp_indptr(s)[*r + 1] <= k) (*r)++;
  return *r;
}

/* dense op sparse (sparse_rhs) or sparse op dense, add/sub: a dense result */
static int with_dense(int op, const mx_tensor *s, const mx_tensor *d, bool sparse_rhs,
                      mx_tensor *o) {
  for (int64_t i = 0; i < d->size; i++) {
    double v = sp_ld(d, i);
    sp_st(o, i, sparse_rhs || op == OP_ADD ? v : -v);
  }
  int64_t r = 0;
  for (int64_t k = 0; k < stored(s); k++) {
    int64_t at = dense_pos(s, k, row_of(s, k, &r));
    double v = sp_val(s, k);
    sp_st(o, at, sp_ld(o, at) + (sparse_rhs && op == OP_SUB ? -v : v));
  }
  return MX_OK;
}

/* sparse * dense: s's structure, values times d at their positions */
static int mul_dense(const mx_tensor *s, const mx_tensor *d, mx_tensor *o) {
  int64_t n = mx_sparse_count(s);
  int rc = s->stype == MX_STYPE_CSR ? mx_sparse_alloc_csr(o, n) : mx_sparse_alloc_rsp(o, n);
  if (rc) return rc;
  int nidx = s->stype == MX_STYPE_CSR ? 2 : 1;
  for (int a = 0; a < nidx; a++) {
    const mx_tensor *src = s->sparse->aux[a];
    for (int64_t i = 0; i < src->size; i++) mx_sparse_index(o, a)[i] = mx_sparse_index(s, a)[i];
  }
  int64_t r = 0;
  for (int64_t k = 0; k < stored(s); k++)
    sp_set(o, k, sp_val(s, k) * sp_ld(d, dense_pos(s, k, row_of(s, k, &r))));
  return MX_OK;
}

#define KERNEL(name, body)                                                                  \
  int mx_ref_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,       \
                    int nout, mx_tensor *const *out) {                                      \
    (void)ctx, (void)p, (void)nin, (void)nout;                                              \
    return body;                                                                            \
  }
KERNEL(add_rsp_rsp, rsp_rsp(OP_ADD, in[0], in[1], out[0]))
KERNEL(sub_rsp_rsp, rsp_rsp(OP_SUB, in[0], in[1], out[0]))
KERNEL(mul_rsp_rsp, rsp_rsp(OP_MUL, in[0], in[1], out[0]))
KERNEL(add_csr_csr, csr_csr(OP_ADD, in[0], in[1], out[0]))
KERNEL(sub_csr_csr, csr_csr(OP_SUB, in[0], in[1], out[0]))
KERNEL(mul_csr_csr, csr_csr(OP_MUL, in[0], in[1], out[0]))
KERNEL(add_rsp_dns, with_dense(OP_ADD, in[0], in[1], false, out[0]))
KERNEL(add_dns_rsp, with_dense(OP_ADD, in[1], in[0], true, out[0]))
KERNEL(add_csr_dns, with_dense(OP_ADD, in[0], in[1], false, out[0]))
KERNEL(add_dns_csr, with_dense(OP_ADD, in[1], in[0], true, out[0]))
KERNEL(sub_rsp_dns, with_dense(OP_SUB, in[0], in[1], false, out[0]))
KERNEL(sub_dns_rsp, with_dense(OP_SUB, in[1], in[0], true, out[0]))
KERNEL(sub_csr_dns, with_dense(OP_SUB, in[0], in[1], false, out[0]))
KERNEL(sub_dns_csr, with_dense(OP_SUB, in[1], in[0], true, out[0]))
KERNEL(mul_csr_dns, mul_dense(in[0], in[1], out[0]))
KERNEL(mul_dns_csr, mul_dense(in[1], in[0], out[0]))
KERNEL(mul_rsp_dns, mul_dense(in[0], in[1], out[0]))
KERNEL(mul_dns_rsp, mul_dense(in[1], in[0], out[0]))
