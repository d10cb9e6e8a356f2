/* bcast_geom.h — broadcast geometry for the CUDA elementwise kernels (host code,
 * plain C++, tested on the CPU by tools/test_bcast_geom.cpp via spec/cuda_host_spec.lua).
 * An output of shape[ndim] (row-major) reads inputs a and b through per-dim element
 * strides sa/sb (0 where the input is broadcast). Coalescing drops size-1 dims and
 * merges neighbours that are contiguous for both inputs, so the kernel's per-element
 * div/mod loop runs over as few dims as possible (often 1 or 2). */
#ifndef MX_BCAST_GEOM_H
#define MX_BCAST_GEOM_H
#include <stdint.h>

#define MX_BCAST_MAX_DIM 8

struct bcast_geom {
  int ndim;
  int64_t shape[MX_BCAST_MAX_DIM];
  int64_t sa[MX_BCAST_MAX_DIM];
  int64_t sb[MX_BCAST_MAX_DIM];
};

/* Element strides of an input of shape in[in_ndim] broadcast (right-aligned) to
 * out[out_ndim]: 0 along dims where the input has size 1 or is missing. */
static inline void bcast_strides(int in_ndim, const int64_t *in, int out_ndim, int64_t *s) {
  int64_t stride = 1;
  for (int d = out_ndim - 1; d >= 0; d--) {
    int id = d - (out_ndim - in_ndim);
    s[d] = (id >= 0 && in[id] != 1) ? stride : 0;
    if (id >= 0) stride *= in[id];
  }
}

/* Fills g for out = a (op) b and coalesces it. */
static inline void bcast_geom_make(bcast_geom *g, int ondim, const int64_t *oshape, int andim,
                                   const int64_t *ashape, int bndim, const int64_t *bshape) {
  int64_t sa[MX_BCAST_MAX_DIM], sb[MX_BCAST_MAX_DIM];
  bcast_strides(andim, ashape, ondim, sa);
  bcast_strides(bndim, bshape, ondim, sb);
  /* right to left into a reversed list, then flip */
  int64_t rs[MX_BCAST_MAX_DIM], ra[MX_BCAST_MAX_DIM], rb[MX_BCAST_MAX_DIM];
  int n = 0;
  for (int d = ondim - 1; d >= 0; d--) {
    if (oshape[d] == 1) continue;
    if (n > 0 && sa[d] == ra[n - 1] * rs[n - 1] && sb[d] == rb[n - 1] * rs[n - 1]) {
      rs[n - 1] *= oshape[d];
      continue;
    }
    rs[n] = oshape[d];
    ra[n] = sa[d];
    rb[n] = sb[d];
    n++;
  }
  g->ndim = n;
  for (int j = 0; j < n; j++) {
    g->shape[j] = rs[n - 1 - j];
    g->sa[j] = ra[n - 1 - j];
    g->sb[j] = rb[n - 1 - j];
  }
}
#endif
