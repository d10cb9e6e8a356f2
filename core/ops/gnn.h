/* gnn.h — what the gnn family's inference (core/ops/gnn.c) and its kernels share: the
 * feature geometry of a message (how the operands' feature dims broadcast, which element
 * of each row an output feature reads) and the checks of a graph's csr values. Both are
 * definitions of the ops, not computations of them, so the reference and the cpu kernels
 * computing the messages stay independent of each other. */
#ifndef MX_GNN_H
#define MX_GNN_H
#include "internal.h"
#include "mx_ops_gen.h"

/* The binary ops and targets share their codes across the family's param structs. */
_Static_assert((int)MX_GSPMM_BINARY_OP_DOT == (int)MX_GSDDMM_BINARY_OP_DOT &&
               (int)MX_GSPMM_BINARY_OP_COPY == (int)MX_GSDDMM_BACKWARD_BINARY_OP_COPY &&
               (int)MX_GSPMM_BINARY_OP_DIV == (int)MX_GSPMM_BACKWARD_BINARY_OP_DIV &&
               (int)MX_GSPMM_LHS_TARGET_E == (int)MX_GSDDMM_RHS_TARGET_E &&
               (int)MX_GSPMM_LHS_TARGET_V == (int)MX_GSDDMM_BACKWARD_LHS_TARGET_V &&
               (int)MX_GSPMM_BACKWARD_WRT_RHS == (int)MX_GSDDMM_BACKWARD_WRT_RHS,
               "gnn params share their enum codes");
enum { MX_GNN_U = MX_GSPMM_LHS_TARGET_U, MX_GNN_V = MX_GSPMM_LHS_TARGET_V,
       MX_GNN_E = MX_GSPMM_LHS_TARGET_E };
enum { MX_GNN_ADD = MX_GSPMM_BINARY_OP_ADD, MX_GNN_SUB = MX_GSPMM_BINARY_OP_SUB,
       MX_GNN_MUL = MX_GSPMM_BINARY_OP_MUL, MX_GNN_DIV = MX_GSPMM_BINARY_OP_DIV,
       MX_GNN_DOT = MX_GSPMM_BINARY_OP_DOT, MX_GNN_COPY = MX_GSPMM_BINARY_OP_COPY };

/* A message's feature geometry: the output has P elements per row (P = prod of the
 * broadcast feature dims fshape; dot's trailing 1 is appended to fshape);
 * output element f reads lhs row element loff[f] + k and rhs row element roff[f] + k for
 * k < K (K: dot's summed length, else 1). */
typedef struct mx_gnn_geom {
  int fnd;
  int64_t fshape[MX_MAX_DIM];
  int64_t P, K, lrow, rrow;
} mx_gnn_geom;

/* Feature geometry of operands of shapes (rows, ls...) and (rows, rs...) (rnd < 0: no
 * rhs, copy). Errors name op and the shapes. */
static inline int mx_gnn_geometry(const char *op, int binary, int lnd, const int64_t *ls,
                                  int rnd, const int64_t *rs, mx_gnn_geom *g) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  if (lnd < 1 || (rnd >= 0 && rnd < 1))
    return mx_err(MX_EINVAL, "%s: the operands need a row dim (nodes or edges) first", op);
  g->lrow = mx_shape_prod(lnd - 1, ls + 1);
  g->rrow = rnd >= 1 ? mx_shape_prod(rnd - 1, rs + 1) : 0;
  g->K = 1;
  if (binary == MX_GNN_COPY) {
    if (rnd >= 0)
      return mx_err(MX_EINVAL, "%s: binary_op copy takes lhs only (an rhs was given)", op);
    g->fnd = lnd - 1;
    for (int d = 1; d < lnd; d++) g->fshape[d - 1] = ls[d];
    g->P = g->lrow;
    return MX_OK;
  }
  if (rnd < 0) return mx_err(MX_EINVAL, "%s: this binary_op needs an rhs operand", op);
  int la = lnd - 1, ra = rnd - 1; /* feature dims taking part in broadcasting */
  if (binary == MX_GNN_DOT) {
    if (la < 1 || ra < 1 || ls[lnd - 1] != rs[rnd - 1])
      return mx_err(MX_EINVAL, "%s: dot needs operands whose last dims agree, got lhs %s and "
                    "rhs %s", op, mx_shape_str(b, lnd, ls), mx_shape_str(c, rnd, rs));
    g->K = ls[lnd - 1];
    la--, ra--;
  }
  int n = la > ra ? la : ra;
  if (n + (binary == MX_GNN_DOT) > MX_MAX_DIM - 1)
    return mx_err(MX_EINVAL, "%s: too many feature dims", op);
  for (int d = 0; d < n; d++) {
    int il = d - (n - la), ir = d - (n - ra);
    int64_t a = il >= 0 ? ls[1 + il] : 1, z = ir >= 0 ? rs[1 + ir] : 1;
    if (a != z && a != 1 && z != 1)
      return mx_err(MX_EINVAL, "%s: the feature dims of lhs %s and rhs %s do not broadcast", op,
                    mx_shape_str(b, lnd, ls), mx_shape_str(c, rnd, rs));
    g->fshape[d] = a == 1 ? z : a;
  }
  g->fnd = n;
  g->P = mx_shape_prod(n, g->fshape);
  if (binary == MX_GNN_DOT) g->fshape[g->fnd++] = 1;
  return MX_OK;
}

/* off[f] for f < g->P: where output feature f starts in a row of an operand of shape
 * (rows, s...) with nd dims (its dot dim excluded by the caller's K). */
static inline void mx_gnn_offsets(const mx_gnn_geom *g, int binary, int nd, const int64_t *s,
                                  int64_t *off) {
  int n = g->fnd - (binary == MX_GNN_DOT); /* broadcast dims */
  int a = nd - 1 - (binary == MX_GNN_DOT);  /* the operand's own */
  for (int64_t f = 0; f < g->P; f++) {
    int64_t i = f, o = 0, stride = 1;
    for (int d = n - 1; d >= 0; d--) {
      int64_t cd = i % g->fshape[d];
      i /= g->fshape[d];
      int id = d - (n - a);
      if (id >= 0) {
        if (s[1 + id] != 1) o += cd * stride;
        stride *= s[1 + id];
      }
    }
    off[f] = o * g->K;
  }
}

/* Checks a destination-sorted csr's values: indptr runs from 0 to E without decreasing,
 * every eid is in 0..E-1 and every source index below urows (urows < 0: unchecked). */
static inline int mx_gnn_check_csr(const char *op, const int64_t *indptr, int64_t N,
                                   const int64_t *indices, const int64_t *eids, int64_t E,
                                   int64_t urows) {
  if (indptr[0] != 0 || indptr[N] != E)
    return mx_err(MX_EINVAL, "%s: indptr must run from 0 to the edge count %lld, got %lld .. "
                  "%lld", op, (long long)E, (long long)indptr[0], (long long)indptr[N]);
  /* one branch-free pass (every call of a layer checks its graph); the position of a bad
   * value is looked for only when there is one */
  int bad = 0;
  for (int64_t v = 0; v < N; v++) bad |= indptr[v + 1] < indptr[v];
  if (eids)
    for (int64_t p = 0; p < E; p++) bad |= (uint64_t)eids[p] >= (uint64_t)E;
  if (indices && urows >= 0)
    for (int64_t p = 0; p < E; p++) bad |= (uint64_t)indices[p] >= (uint64_t)urows;
  if (!bad) return MX_OK;
  for (int64_t v = 0; v < N; v++)
    if (indptr[v + 1] < indptr[v])
      return mx_err(MX_EINVAL, "%s: indptr decreases at position %lld", op, (long long)v + 1);
  for (int64_t p = 0; p < E; p++) {
    if (eids && (eids[p] < 0 || eids[p] >= E))
      return mx_err(MX_EINVAL, "%s: eids[%lld] = %lld is not an edge id (0..%lld)", op,
                    (long long)p + 1, (long long)eids[p], (long long)E - 1);
    if (indices && urows >= 0 && (indices[p] < 0 || indices[p] >= urows))
      return mx_err(MX_EINVAL, "%s: indices[%lld] = %lld names no row of the source-node "
                    "operand (%lld rows)", op, (long long)p + 1, (long long)indices[p],
                    (long long)urows);
  }
  return MX_OK;
}

/* The row of an operand at target t for the edge at csr position p of row v. */
static inline int64_t mx_gnn_row(int t, int64_t v, int64_t u, int64_t e) {
  return t == MX_GNN_U ? u : t == MX_GNN_V ? v : e;
}
#endif
