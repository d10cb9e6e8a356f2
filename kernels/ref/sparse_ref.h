/* sparse_ref.h — what the sparse family's reference kernels share (kernels/ref/sparse*.c):
 * element access in double through mx_load_f64/mx_store_f64, and the parts of sparse
 * tensors (internal.h mx_sparse_*). Plain loops: the oracle the cpu kernels are
 * checked against. */
#ifndef MX_SPARSE_REF_H
#define MX_SPARSE_REF_H
#include "ref.h"

static inline double sp_ld(const mx_tensor *t, int64_t i) { return mx_load_f64(mx_ptr(t), t->dtype, i); }
static inline void sp_st(mx_tensor *t, int64_t i, double v) { mx_store_f64(mx_ptr(t), t->dtype, i, v); }
/* value i of a sparse tensor's data part */
static inline double sp_val(const mx_tensor *t, int64_t i) {
  return mx_load_f64(mx_sparse_values(t), t->dtype, i);
}
static inline void sp_set(mx_tensor *t, int64_t i, double v) {
  mx_store_f64(mx_sparse_values(t), t->dtype, i, v);
}
static inline void sp_zero(mx_tensor *t) {
  for (int64_t i = 0; i < t->size; i++) sp_st(t, i, 0);
}
/* the number of rows and stored-row ids of a row_sparse tensor */
static inline int64_t sp_nnr(const mx_tensor *t) { return mx_sparse_count(t); }
static inline const int64_t *sp_rows(const mx_tensor *t) { return mx_sparse_index(t, 0); }
static inline const int64_t *sp_indptr(const mx_tensor *t) { return mx_sparse_index(t, 0); }
static inline const int64_t *sp_cols(const mx_tensor *t) { return mx_sparse_index(t, 1); }

/* Where the row-major element at coords lands in a reduction's output: the reduced axes
 * (mask) dropped (keepdims' 1s do not change the flat position). */
static inline int64_t sp_reduced_pos(int ndim, const int64_t *shape, const bool *mask,
                                     const int64_t *coord) {
  int64_t pos = 0;
  for (int d = 0; d < ndim; d++)
    if (!mask[d]) pos = pos * shape[d] + coord[d];
  return pos;
}
#endif
