/* kernels/cpu/sparse_elemwise.c — add, sub and mul of two row_sparse or two csr
 * operands, and row_sparse to dense, on float32/float64 (kernels/ref/sparse_elemwise.c
 * and sparse.c are the reference: the same union / intersection of the stored rows or
 * entries, the same values; the reference goes element by element through double
 * loads and stores, these through typed loops and row copies). The merge of the index
 * arrays is serial (it decides where every output row goes); the values are then
 * filled with rows split across the intra-op pool. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum { OP_ADD, OP_SUB, OP_MUL };

static bool same_float(const mx_desc *in, int nin, const mx_desc *out, const char **why) {
  int dt = in[0].dtype;
  bool ok = (dt == MX_F32 || dt == MX_F64) && out[0].dtype == dt;
  for (int i = 1; i < nin; i++) ok = ok && in[i].dtype == dt;
  if (!ok) *why = "the cpu sparse elementwise kernels take float32 or float64 operands of one dtype";
  return ok;
}

#define SUPPORTS(name, nin_)                                                                 \
  bool mx_cpu_##name##_supports(const mx_op_def *def, const void *params,                   \
                                const mx_op_info *info, int nin, const mx_desc *in, int nout, \
                                const mx_desc *out, const char **why) {                     \
    (void)def, (void)params, (void)info, (void)nin, (void)nout;                             \
    return same_float(in, nin_, out, why);                                                  \
  }
SUPPORTS(add_rsp_rsp, 2)
SUPPORTS(sub_rsp_rsp, 2)
SUPPORTS(mul_rsp_rsp, 2)
SUPPORTS(add_csr_csr, 2)
SUPPORTS(sub_csr_csr, 2)
SUPPORTS(mul_csr_csr, 2)
SUPPORTS(cast_storage_rsp_dns, 1)

/* ---- row_sparse op row_sparse ------------------------------------------------------ */

/* Output row k is a's row ia[k] and/or b's row ib[k] (-1: absent). */
typedef struct {
  int op;
  const int64_t *ia, *ib;
  const void *va, *vb;
  void *vo;
  int64_t row;
} rsp_fill;

#define RSP_FILL(name, T)                                                              \
  static void name(int64_t k0, int64_t k1, void *vc) {                                 \
    const rsp_fill *c = vc;                                                            \
    const T *a = c->va, *b = c->vb;                                                    \
    T *o = c->vo;                                                                      \
    int64_t row = c->row;                                                              \
    for (int64_t k = k0; k < k1; k++) {                                                \
      T *dst = o + k * row;                                                            \
      int64_t i = c->ia[k], j = c->ib[k];                                              \
      const T *x = i >= 0 ? a + i * row : NULL, *y = j >= 0 ? b + j * row : NULL;      \
      if (x && y) {                                                                    \
        if (c->op == OP_ADD)                                                           \
          for (int64_t e = 0; e < row; e++) dst[e] = x[e] + y[e];                      \
        else if (c->op == OP_SUB)                                                      \
          for (int64_t e = 0; e < row; e++) dst[e] = x[e] - y[e];                      \
        else                                                                           \
          for (int64_t e = 0; e < row; e++) dst[e] = x[e] * y[e];                      \
      } else if (x) {                                                                  \
        memcpy(dst, x, sizeof(T) * (size_t)row);                                       \
      } else if (c->op == OP_SUB) {                                                    \
        for (int64_t e = 0; e < row; e++) dst[e] = (T)0 - y[e];                        \
      } else {                                                                         \
        memcpy(dst, y, sizeof(T) * (size_t)row);                                       \
      }                                                                                \
    }                                                                                  \
  }
RSP_FILL(rsp_fill_f32, float)
RSP_FILL(rsp_fill_f64, double)

static int rsp_rsp(int op, const mx_tensor *a, const mx_tensor *b, mx_tensor *o) {
  int64_t na = mx_sparse_count(a), nb = mx_sparse_count(b), row = mx_sparse_row_elems(a);
  const int64_t *ra = na ? mx_sparse_index(a, 0) : NULL, *rb = nb ? mx_sparse_index(b, 0) : NULL;
  int64_t cap = op == OP_MUL ? (na < nb ? na : nb) : na + nb;
  int64_t *ia = malloc(sizeof *ia * (size_t)(2 * cap + 2));
  if (!ia) return mx_err(MX_ENOMEM, "sparse elementwise: out of memory for %lld rows",
                         (long long)cap);
  int64_t *ib = ia + cap + 1, n = 0, i = 0, j = 0;
  while (i < na || j < nb) {
    bool ta = i < na && (j >= nb || ra[i] <= rb[j]);
    bool tb = j < nb && (i >= na || rb[j] <= ra[i]);
    if (op != OP_MUL || (ta && tb)) {
      ia[n] = ta ? i : -1;
      ib[n] = tb ? j : -1;
      n++;
    }
    i += ta;
    j += tb;
  }
  int rc = mx_sparse_alloc_rsp(o, n);
  if (!rc && n) {
    int64_t *out_ids = mx_sparse_index(o, 0);
    for (int64_t k = 0; k < n; k++) out_ids[k] = ia[k] >= 0 ? ra[ia[k]] : rb[ib[k]];
    rsp_fill c = { op, ia, ib, na ? mx_sparse_values(a) : NULL, nb ? mx_sparse_values(b) : NULL,
                   mx_sparse_values(o), row };
    /* a team only for work worth waking one (memory-bound: ~128K elements a share) */
    mx_parallel_for(n, 1 + (128 << 10) / (row + 1), a->dtype == MX_F32 ? rsp_fill_f32
                    : rsp_fill_f64, &c);
  }
  free(ia);
  return rc;
}

/* ---- csr op csr --------------------------------------------------------------------- */

typedef struct {
  int op;
  const int64_t *pa, *ca, *pb, *cb, *po;
  const void *va, *vb;
  void *vo;
  int64_t *co;
} csr_fill;

/* the merged entry count of row r (count) or the entries themselves (fill) */
#define CSR_ROW(name, T)                                                                 \
  static int64_t name(const csr_fill *c, int64_t r, bool fill) {                         \
    int64_t i = c->pa[r], ie = c->pa[r + 1], j = c->pb[r], je = c->pb[r + 1];            \
    int64_t k = fill ? c->po[r] : 0, k0 = k;                                             \
    const T *a = c->va, *b = c->vb;                                                      \
    T *o = c->vo;                                                                        \
    while (i < ie || j < je) {                                                           \
      bool ta = i < ie && (j >= je || c->ca[i] <= c->cb[j]);                             \
      bool tb = j < je && (i >= ie || c->cb[j] <= c->ca[i]);                             \
      if (c->op != OP_MUL || (ta && tb)) {                                               \
        if (fill) {                                                                      \
          c->co[k] = ta ? c->ca[i] : c->cb[j];                                           \
          T x = ta ? a[i] : (T)0, y = tb ? b[j] : (T)0;                                  \
          o[k] = c->op == OP_ADD ? x + y : c->op == OP_SUB ? x - y : x * y;              \
        }                                                                                \
        k++;                                                                             \
      }                                                                                  \
      i += ta;                                                                           \
      j += tb;                                                                           \
    }                                                                                    \
    return k - k0;                                                                       \
  }                                                                                      \
  static void name##_range(int64_t r0, int64_t r1, void *vc) {                           \
    for (int64_t r = r0; r < r1; r++) name(vc, r, true);                                 \
  }                                                                                      \
  static void name##_count(int64_t r0, int64_t r1, void *vc) {                           \
    const csr_fill *c = vc;                                                              \
    for (int64_t r = r0; r < r1; r++) c->co[r + 1] = name(vc, r, false);                 \
  }
CSR_ROW(csr_row_f32, float)
CSR_ROW(csr_row_f64, double)

static int csr_csr(int op, const mx_tensor *a, const mx_tensor *b, mx_tensor *o) {
  int64_t rows = a->shape[0];
  bool f32 = a->dtype == MX_F32;
  csr_fill c = { op, mx_sparse_index(a, 0), mx_sparse_index(a, 1), mx_sparse_index(b, 0),
                 mx_sparse_index(b, 1), NULL, NULL, NULL, NULL, NULL };
  int64_t *cnt = malloc(sizeof *cnt * (size_t)(rows + 1));
  if (!cnt) return mx_err(MX_ENOMEM, "sparse elementwise: out of memory for %lld rows",
                          (long long)rows);
  /* each row's merged count (rows in parallel; co points at the counts meanwhile), then
   * their prefix sums: the output indptr */
  int64_t in_nnz = mx_sparse_count(a) + mx_sparse_count(b);
  c.co = cnt;
  mx_parallel_for(rows, 1 + (64 << 10) / (in_nnz / (rows ? rows : 1) + 1),
                  f32 ? csr_row_f32_count : csr_row_f64_count, &c);
  int64_t nnz = 0;
  cnt[0] = 0;
  for (int64_t r = 0; r < rows; r++) {
    nnz += cnt[r + 1];
    cnt[r + 1] = nnz;
  }
  int rc = mx_sparse_alloc_csr(o, nnz);
  if (!rc) {
    memcpy(mx_sparse_index(o, 0), cnt, sizeof *cnt * (size_t)(rows + 1));
    if (nnz) {
      c.po = cnt;
      c.va = mx_sparse_count(a) ? mx_sparse_values(a) : NULL;
      c.vb = mx_sparse_count(b) ? mx_sparse_values(b) : NULL;
      c.vo = mx_sparse_values(o);
      c.co = mx_sparse_index(o, 1);
      int64_t per_row = rows ? nnz / rows + 1 : 1;
      mx_parallel_for(rows, 1 + (64 << 10) / (per_row + 1), f32 ? csr_row_f32_range
                      : csr_row_f64_range, &c);
    }
  }
  free(cnt);
  return rc;
}

#define KERNEL(name, body)                                                                  \
  int mx_cpu_##name(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,       \
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

/* ---- row_sparse -> dense: zeros, then each stored row copied to its place ---------- */

typedef struct {
  const int64_t *ids;
  const char *src;
  char *dst;
  size_t rowbytes;
} rsp_dns;

static void rsp_dns_range(int64_t k0, int64_t k1, void *vc) {
  const rsp_dns *c = vc;
  for (int64_t k = k0; k < k1; k++)
    memcpy(c->dst + (size_t)c->ids[k] * c->rowbytes, c->src + (size_t)k * c->rowbytes,
           c->rowbytes);
}

int mx_cpu_cast_storage_rsp_dns(const mx_kctx *ctx, const void *p, int nin,
                                mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *x = in[0];
  mx_tensor *o = out[0];
  size_t esz = mx_dtype_size(o->dtype);
  memset(mx_ptr(o), 0, esz * (size_t)o->size);
  int64_t n = mx_sparse_count(x), row = mx_sparse_row_elems(x);
  if (n == 0 || row == 0) return MX_OK;
  rsp_dns c = { mx_sparse_index(x, 0), mx_sparse_values(x), mx_ptr(o), esz * (size_t)row };
  mx_parallel_for(n, 1 + (512 << 10) / (int64_t)(c.rowbytes + 1), rsp_dns_range, &c);
  return MX_OK;
}
