/* kernels/cpu/sparse.c — the sparse products on the hot paths (linear models over sparse
 * features, graph aggregation): float32/float64 loops over the csr parts, rows split
 * across the intra-op pool. Shapes as kernels/ref/sparse_dot.c:
 *   dot(csr A (M, K), dense B (K, N))   -> dense (M, N): row r = sum_j v_j * B[col_j]
 *   dot(csr A (M, K)^T, dense B (M, N)) -> row_sparse (K, N), the columns A uses
 * The index parts are int64, values and B one float dtype (promoted before dispatch). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool float_pair(const mx_desc *in, const mx_desc *out, const char **why) {
  int dt = in[0].dtype;
  if ((dt == MX_F32 || dt == MX_F64) && in[1].dtype == dt && out[0].dtype == dt) return true;
  *why = "the cpu sparse products take float32 or float64 operands of one dtype";
  return false;
}

bool mx_cpu_dot_csr_dns_supports(const mx_op_def *def, const void *params,
                                 const mx_op_info *info, int nin, const mx_desc *in, int nout,
                                 const mx_desc *out, const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout;
  return float_pair(in, out, why);
}
bool mx_cpu_dot_csrt_dns_supports(const mx_op_def *def, const void *params,
                                  const mx_op_info *info, int nin, const mx_desc *in, int nout,
                                  const mx_desc *out, const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout;
  return float_pair(in, out, why);
}

typedef struct {
  const int64_t *ptr, *col;
  const void *val, *b;
  void *o;
  int64_t n;
} spmm_ctx;

#define SPMM_RANGE(name, T)                                                  \
  static void name(int64_t r0, int64_t r1, void *vc) {                       \
    const spmm_ctx *c = vc;                                                  \
    const T *val = c->val, *b = c->b;                                        \
    T *o = c->o;                                                             \
    int64_t n = c->n;                                                        \
    for (int64_t r = r0; r < r1; r++) {                                      \
      T *dst = o + r * n;                                                    \
      memset(dst, 0, sizeof(T) * (size_t)n);                                 \
      for (int64_t j = c->ptr[r]; j < c->ptr[r + 1]; j++) {                  \
        const T v = val[j], *src = b + c->col[j] * n;                        \
        for (int64_t k = 0; k < n; k++) dst[k] += v * src[k];                \
      }                                                                      \
    }                                                                        \
  }
SPMM_RANGE(spmm_f32, float)
SPMM_RANGE(spmm_f64, double)

int mx_cpu_dot_csr_dns(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  int64_t m = a->shape[0], n = b->shape[1];
  if (out[0]->size == 0) return MX_OK;
  spmm_ctx c = { mx_sparse_index(a, 0), mx_sparse_index(a, 1),
                 mx_sparse_count(a) ? mx_sparse_values(a) : NULL, mx_ptr(b), mx_ptr(out[0]), n };
  int64_t nnz = mx_sparse_count(a), per_row = m ? (nnz / m + 1) * n : 1;
  mx_parallel_for(m, 1 + (32 << 10) / (per_row + 1), a->dtype == MX_F32 ? spmm_f32 : spmm_f64,
                  &c);
  return MX_OK;
}

/* A^T B into the rows A's columns name: a column's slot, then each entry (r, k, v) adds
 * v * B[r] into slot[k]'s row (serial: entries of one column come from many rows) */
#define CSRT(name, T)                                                                 \
  static void name(const mx_tensor *a, const mx_tensor *b, T *o, const int64_t *slot) { \
    const int64_t *ptr = mx_sparse_index(a, 0), *col = mx_sparse_index(a, 1);        \
    const T *val = mx_sparse_values(a), *bb = mx_ptr(b);                              \
    int64_t n = b->shape[1];                                                          \
    for (int64_t r = 0; r < a->shape[0]; r++)                                         \
      for (int64_t j = ptr[r]; j < ptr[r + 1]; j++) {                                 \
        T *dst = o + slot[col[j]] * n;                                                \
        const T v = val[j], *src = bb + r * n;                                        \
        for (int64_t k = 0; k < n; k++) dst[k] += v * src[k];                         \
      }                                                                               \
  }
CSRT(csrt_f32, float)
CSRT(csrt_f64, double)

int mx_cpu_dot_csrt_dns(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t k = a->shape[1], n = b->shape[1], nnr = 0, nnz = mx_sparse_count(a);
  int64_t *slot = malloc(sizeof *slot * (size_t)(k ? k : 1));
  if (!slot) return mx_err(MX_ENOMEM, "dot: out of memory");
  for (int64_t c = 0; c < k; c++) slot[c] = -1;
  const int64_t *col = nnz ? mx_sparse_index(a, 1) : NULL;
  for (int64_t j = 0; j < nnz; j++) slot[col[j]] = 0;
  for (int64_t c = 0; c < k; c++)
    if (slot[c] == 0) slot[c] = nnr++;
  int rc = mx_sparse_alloc_rsp(o, nnr);
  if (!rc && nnr) {
    int64_t *ids = mx_sparse_index(o, 0);
    for (int64_t c = 0; c < k; c++)
      if (slot[c] >= 0) ids[slot[c]] = c;
    void *dst = mx_sparse_values(o);
    memset(dst, 0, mx_dtype_size(o->dtype) * (size_t)(nnr * n));
    if (a->dtype == MX_F32) csrt_f32(a, b, dst, slot);
    else csrt_f64(a, b, dst, slot);
  }
  free(slot);
  return rc;
}

/* ---- embedding's row_sparse gradient: the looked-up rows, repeated ids summed --------
 * (kernels/ref/sparse_dot.c's embedding_backward_rsp: the same rows and sums in the same
 * order, typed; the ids of any dtype read once each) */
bool mx_cpu_embedding_backward_rsp_supports(const mx_op_def *def, const void *params,
                                            const mx_op_info *info, int nin,
                                            const mx_desc *in, int nout, const mx_desc *out,
                                            const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout;
  int dt = in[2].dtype;
  if ((dt == MX_F32 || dt == MX_F64) && out[0].dtype == dt) return true;
  *why = "the cpu embedding gradient takes float32 or float64 gradients";
  return false;
}

#define EMB_SUM(name, T)                                                                 \
  static void name(const int64_t *row_of, int64_t n, const int64_t *slot, const T *g,   \
                   T *o, int64_t cols) {                                                 \
    for (int64_t m = 0; m < n; m++) {                                                    \
      T *dst = o + slot[row_of[m]] * cols;                                               \
      const T *src = g + m * cols;                                                       \
      for (int64_t c = 0; c < cols; c++) dst[c] += src[c];                               \
    }                                                                                    \
  }
EMB_SUM(emb_sum_f32, float)
EMB_SUM(emb_sum_f64, double)

int mx_cpu_embedding_backward_rsp(const mx_kctx *ctx, const void *p, int nin,
                                  mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  const mx_tensor *ids = in[0], *g = in[2];
  mx_tensor *o = out[0];
  int64_t rows = o->shape[0], cols = o->shape[1], n = ids->size, nnr = 0;
  int64_t *slot = malloc(sizeof *slot * (size_t)((rows ? rows : 1) + (n ? n : 1)));
  if (!slot) return mx_err(MX_ENOMEM, "embedding_backward: out of memory");
  int64_t *row_of = slot + (rows ? rows : 1);
  for (int64_t r = 0; r < rows; r++) slot[r] = -1;
  const void *ip = mx_ptr(ids);
  for (int64_t m = 0; m < n; m++) {
    double v = mx_load_f64(ip, ids->dtype, m), t = trunc(v);
    if (!(t >= 0 && t < (double)rows)) {
      free(slot);
      return mx_err(MX_EINVAL, "embedding_backward: data[%lld] = %g is not a token id in "
                    "[0, %lld) (input_dim %lld; ids are 0-based)", (long long)m, v,
                    (long long)rows, (long long)rows);
    }
    row_of[m] = (int64_t)t;
    slot[row_of[m]] = 0;
  }
  for (int64_t r = 0; r < rows; r++)
    if (slot[r] == 0) slot[r] = nnr++;
  int rc = mx_sparse_alloc_rsp(o, nnr);
  if (!rc && nnr) {
    int64_t *oid = mx_sparse_index(o, 0);
    for (int64_t r = 0; r < rows; r++)
      if (slot[r] >= 0) oid[slot[r]] = r;
    void *dst = mx_sparse_values(o);
    memset(dst, 0, mx_dtype_size(o->dtype) * (size_t)(nnr * cols));
    if (g->dtype == MX_F32) emb_sum_f32(row_of, n, slot, mx_ptr(g), dst, cols);
    else emb_sum_f64(row_of, n, slot, mx_ptr(g), dst, cols);
  }
  free(slot);
  return rc;
}
