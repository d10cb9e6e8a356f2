/* gnn_fast.h — what kernels/cpu/gnn.c shares with its fast paths (gnn_fast.c): one call's
 * geometry and data, and the paths' entry points. */
#ifndef MX_CPU_GNN_FAST_H
#define MX_CPU_GNN_FAST_H
#include "gnn.h"

/* One call's geometry and data, shared by the range functions. */
typedef struct {
  int binary, lt, rt, reduce; /* reduce: -1 for gsddmm */
  bool spmm, rhs, f64;        /* rhs: the backward's operand */
  int64_t N, E;
  const int64_t *ip, *ix, *ei;
  const mx_tensor *tip, *tix; /* the csr's indptr and indices tensors */
  const void *L, *R, *G;      /* operands, ograd */
  void *O;
  mx_gnn_geom g;
  int64_t *loff, *roff;
  bool lid;                   /* loff[f] == f: lhs row read in place by copy */
  int64_t blk;                /* > 0: lhs read in place and rhs element f / blk; < 0: the
                                 other way round (block -blk); 0: the general gather */
  int64_t f0, f1;             /* the backward's feature range when split by features */
  int failed;
} gjob;

/* items per thread of a node loop whose nodes each cost `per` */
static inline int64_t mx_gnn_grain(int64_t per) {
  return per >= 2048 ? 1 : 2048 / (per ? per : 1);
}

/* The fast path of a gspmm (wrt 0; sum / mean) or of the gradient (wrt 1: lhs, 2: rhs) of a
 * gspmm (ograd G at v) or gsddmm (G at e) into O (osize elements; the forward's N rows):
 * *done false where the general loops run (nothing was written). */
int mx_cpu_gnn_fast(const gjob *j, const char *op, int wrt, const void *G, void *O,
                    int64_t osize, bool *done);
/* The range function of a gsddmm that reads both rows in place (or copies), else NULL. */
mx_range_fn mx_cpu_gnn_fast_sddmm(const gjob *j);
/* The range function of an edge_softmax (back: its gradient) whose rows are whole
 * vectors, else NULL (j: N, E, ip, ei, g.P = features per edge, L, G, O, f64). */
mx_range_fn mx_cpu_gnn_fast_softmax(const gjob *j, bool back);
/* mx_gnn_check_csr of a csr (indices NULL: unchecked; urows < 0: any row), its result
 * kept for the tensors' current states (a layer checks its graph at every call). */
int mx_cpu_gnn_check(const char *op, const mx_tensor *indptr, const mx_tensor *indices,
                     const mx_tensor *eids, int64_t urows);
#endif
