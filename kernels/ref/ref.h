/* ref.h — helpers for the reference kernels: plain, obviously-correct C that
 * computes in double through mx_load_f64/mx_store_f64. They are the test oracle,
 * not the fast path. */
#ifndef MX_REF_H
#define MX_REF_H
#include "internal.h"

/* Offset of output element `i` (row-major over out_shape) inside an input of
 * shape in_shape broadcast to out_shape (in_ndim <= out_ndim, right-aligned). */
static inline int64_t mx_ref_bcast_offset(int64_t i, int out_ndim, const int64_t *out_shape,
                                          int in_ndim, const int64_t *in_shape) {
  int64_t off = 0, stride = 1;
  for (int d = out_ndim - 1; d >= 0; d--) {
    int64_t c = i % out_shape[d];
    i /= out_shape[d];
    int id = d - (out_ndim - in_ndim);
    if (id >= 0) {
      if (in_shape[id] != 1) off += c * stride;
      stride *= in_shape[id];
    }
  }
  return off;
}
#endif
