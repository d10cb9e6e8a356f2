/* kernels/cpu/gnn.c — fast gspmm / gsddmm (and their gradients) and edge_softmax for
 * float32 and float64 (other dtypes run the reference; supports says so).
 * Forward: the destination rows split over the intra-op pool; each edge's message row is
 * formed once (the copy of an unbroadcast operand reads it in place) and reduced into its
 * destination's output row in the operand dtype, as DGL's cpu kernels do. Backward: a
 * gradient whose rows are the csr's own (target v, or e: every edge sits in one row) splits
 * over rows without conflicts; one at the sources (u) is a scatter, split over output
 * features when the operand is not broadcast (each thread owns its columns), else one
 * thread. max / min find each (row, feature)'s first winning edge again in the backward
 * pass instead of storing it. Sum / mean of in-place and per-block messages, their
 * gradients and the in-place gsddmm take gnn_fast.c's paths first; the loops here run the
 * rest. */
#include "gnn_fast.h"
#include "mx_kernels_gen.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool fdt(int dt) { return dt == MX_F32 || dt == MX_F64; }

bool mx_cpu_gspmm_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                           int nin, const mx_desc *in, int nout, const mx_desc *out,
                           const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout, (void)out;
  if (fdt(in[3].dtype)) return true;
  *why = "the cpu kernel takes float32 and float64";
  return false;
}
bool mx_cpu_gsddmm_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                            int nin, const mx_desc *in, int nout, const mx_desc *out,
                            const char **why) {
  return mx_cpu_gspmm_supports(def, params, info, nin, in, nout, out, why);
}
bool mx_cpu_gspmm_backward_supports(const mx_op_def *def, const void *params,
                                    const mx_op_info *info, int nin, const mx_desc *in, int nout,
                                    const mx_desc *out, const char **why) {
  return mx_cpu_gspmm_supports(def, params, info, nin, in + 1, nout, out, why);
}
bool mx_cpu_gsddmm_backward_supports(const mx_op_def *def, const void *params,
                                     const mx_op_info *info, int nin, const mx_desc *in,
                                     int nout, const mx_desc *out, const char **why) {
  return mx_cpu_gspmm_supports(def, params, info, nin, in + 1, nout, out, why);
}
bool mx_cpu_edge_softmax_supports(const mx_op_def *def, const void *params,
                                  const mx_op_info *info, int nin, const mx_desc *in, int nout,
                                  const mx_desc *out, const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout, (void)out;
  if (fdt(in[2].dtype)) return true;
  *why = "the cpu kernel takes float32 and float64";
  return false;
}
bool mx_cpu_edge_softmax_backward_supports(const mx_op_def *def, const void *params,
                                           const mx_op_info *info, int nin, const mx_desc *in,
                                           int nout, const mx_desc *out, const char **why) {
  (void)def, (void)params, (void)info, (void)nin, (void)nout, (void)out;
  if (fdt(in[0].dtype)) return true;
  *why = "the cpu kernel takes float32 and float64";
  return false;
}


static int gjob_init(gjob *j, const char *op, int binary, int lt, int rt,
                     mx_tensor *const *graph, const mx_tensor *l, const mx_tensor *r) {
  memset(j, 0, sizeof *j);
  j->binary = binary, j->lt = lt, j->rt = rt;
  j->N = graph[0]->shape[0] - 1;
  j->E = graph[1]->shape[0];
  j->ip = mx_ptr(graph[0]), j->ix = mx_ptr(graph[1]), j->ei = mx_ptr(graph[2]);
  j->tip = graph[0], j->tix = graph[1];
  j->L = mx_ptr(l), j->R = r ? mx_ptr(r) : NULL;
  j->f64 = l->dtype == MX_F64;
  int rc = mx_gnn_geometry(op, binary, l->ndim, l->shape, r ? r->ndim : -1, r ? r->shape : NULL,
                           &j->g);
  if (rc) return rc;
  int64_t urows = lt == MX_GNN_U ? l->shape[0] : -1;
  if (r && rt == MX_GNN_U && (urows < 0 || r->shape[0] < urows)) urows = r->shape[0];
  rc = mx_cpu_gnn_check(op, graph[0], graph[1], graph[2], urows);
  if (rc) return rc;
  j->loff = malloc(sizeof(int64_t) * (size_t)(2 * j->g.P + 1));
  if (!j->loff) return mx_err(MX_ENOMEM, "%s: out of memory", op);
  j->roff = j->loff + j->g.P;
  mx_gnn_offsets(&j->g, binary, l->ndim, l->shape, j->loff);
  if (r) mx_gnn_offsets(&j->g, binary, r->ndim, r->shape, j->roff);
  j->lid = j->g.lrow == j->g.P * j->g.K;
  for (int64_t f = 0; j->lid && f < j->g.P; f++) j->lid = j->loff[f] == f * j->g.K;
  j->blk = 0;
  if (r && binary != MX_GNN_DOT && j->g.P > 0) {
    bool rid = j->g.rrow == j->g.P;
    for (int64_t f = 0; rid && f < j->g.P; f++) rid = j->roff[f] == f;
    /* the other operand's rows divide P, element f / B feeding output f */
    for (int side = 0; side < 2 && !j->blk; side++) {
      bool in_place = side == 0 ? j->lid : rid;
      int64_t orow = side == 0 ? j->g.rrow : j->g.lrow;
      const int64_t *oo = side == 0 ? j->roff : j->loff;
      if (!in_place || orow < 1 || j->g.P % orow) continue;
      int64_t B = j->g.P / orow;
      bool ok = true;
      for (int64_t f = 0; ok && f < j->g.P; f++) ok = oo[f] == f / B;
      if (ok) j->blk = side == 0 ? B : -B;
    }
  }
  j->f1 = j->g.P;
  return MX_OK;
}


/* Everything typed: instantiated for float and double. */
#define GNN_TYPED(T, S, EXP)                                                                    \
  /* the message row of one edge into m (or the lhs row itself for an in-place copy) */         \
  static const T *msg_##S(const gjob *j, int64_t v, int64_t u, int64_t e, T *m) {               \
    const T *a = (const T *)j->L + mx_gnn_row(j->lt, v, u, e) * j->g.lrow;                      \
    const int64_t P = j->g.P, *lo = j->loff, *ro = j->roff;                                     \
    if (j->binary == MX_GNN_COPY) {                                                             \
      if (j->lid) return a;                                                                     \
      for (int64_t f = 0; f < P; f++) m[f] = a[lo[f]];                                          \
      return m;                                                                                 \
    }                                                                                           \
    const T *b = (const T *)j->R + mx_gnn_row(j->rt, v, u, e) * j->g.rrow;                      \
    if (j->blk == 1) { /* both rows in place */                                                 \
      switch (j->binary) {                                                                      \
      case MX_GNN_ADD: for (int64_t f = 0; f < P; f++) m[f] = a[f] + b[f]; break;               \
      case MX_GNN_SUB: for (int64_t f = 0; f < P; f++) m[f] = a[f] - b[f]; break;               \
      case MX_GNN_MUL: for (int64_t f = 0; f < P; f++) m[f] = a[f] * b[f]; break;               \
      default: for (int64_t f = 0; f < P; f++) m[f] = a[f] / b[f];                              \
      }                                                                                         \
      return m;                                                                                 \
    }                                                                                           \
    if (j->blk) { /* one operand in place, the other's elements each repeated blk times */      \
      const T *x = j->blk > 0 ? a : b, *y = j->blk > 0 ? b : a;                                 \
      int64_t B = j->blk > 0 ? j->blk : -j->blk, nb = P / B;                                    \
      bool swap = j->blk < 0; /* x is the rhs */                                                \
      for (int64_t h = 0; h < nb; h++) {                                                        \
        const T yv = y[h], *xs = x + h * B;                                                     \
        T *ms = m + h * B;                                                                      \
        switch (j->binary) {                                                                    \
        case MX_GNN_ADD: for (int64_t k = 0; k < B; k++) ms[k] = xs[k] + yv; break;             \
        case MX_GNN_MUL: for (int64_t k = 0; k < B; k++) ms[k] = xs[k] * yv; break;             \
        case MX_GNN_SUB:                                                                        \
          if (swap) for (int64_t k = 0; k < B; k++) ms[k] = yv - xs[k];                         \
          else for (int64_t k = 0; k < B; k++) ms[k] = xs[k] - yv;                              \
          break;                                                                                \
        default:                                                                                \
          if (swap) for (int64_t k = 0; k < B; k++) ms[k] = yv / xs[k];                         \
          else for (int64_t k = 0; k < B; k++) ms[k] = xs[k] / yv;                              \
        }                                                                                       \
      }                                                                                         \
      return m;                                                                                 \
    }                                                                                           \
    switch (j->binary) {                                                                        \
    case MX_GNN_ADD: for (int64_t f = 0; f < P; f++) m[f] = a[lo[f]] + b[ro[f]]; break;         \
    case MX_GNN_SUB: for (int64_t f = 0; f < P; f++) m[f] = a[lo[f]] - b[ro[f]]; break;         \
    case MX_GNN_MUL: for (int64_t f = 0; f < P; f++) m[f] = a[lo[f]] * b[ro[f]]; break;         \
    case MX_GNN_DIV: for (int64_t f = 0; f < P; f++) m[f] = a[lo[f]] / b[ro[f]]; break;         \
    default:                                                                                    \
      for (int64_t f = 0; f < P; f++) {                                                         \
        const T *x = a + lo[f], *y = b + ro[f];                                                 \
        T s = 0;                                                                                \
        for (int64_t k = 0; k < j->g.K; k++) s += x[k] * y[k];                                  \
        m[f] = s;                                                                               \
      }                                                                                         \
    }                                                                                           \
    return m;                                                                                   \
  }                                                                                             \
  static void spmm_##S(int64_t b0, int64_t b1, void *vj) {                                      \
    gjob *j = vj;                                                                               \
    const int64_t P = j->g.P;                                                                   \
    T *m = malloc(sizeof(T) * (size_t)(P ? P : 1));                                             \
    if (!m) { j->failed = 1; return; }                                                          \
    bool ext = j->reduce == MX_GSPMM_REDUCE_OP_MAX || j->reduce == MX_GSPMM_REDUCE_OP_MIN;      \
    bool mx = j->reduce == MX_GSPMM_REDUCE_OP_MAX;                                              \
    for (int64_t v = b0; v < b1; v++) {                                                         \
      T *o = (T *)j->O + v * P;                                                                 \
      int64_t q0 = j->ip[v], q1 = j->ip[v + 1];                                                 \
      if (q0 == q1 || !ext) memset(o, 0, sizeof(T) * (size_t)P);                                \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        const T *x = msg_##S(j, v, j->ix[q], j->ei[q], m);                                      \
        if (!ext) for (int64_t f = 0; f < P; f++) o[f] += x[f];                                 \
        else if (q == q0) memcpy(o, x, sizeof(T) * (size_t)P);                                  \
        else if (mx) { for (int64_t f = 0; f < P; f++) if (x[f] > o[f]) o[f] = x[f]; }          \
        else for (int64_t f = 0; f < P; f++) if (x[f] < o[f]) o[f] = x[f];                      \
      }                                                                                         \
      if (j->reduce == MX_GSPMM_REDUCE_OP_MEAN && q1 > q0) {                                    \
        T s = (T)1 / (T)(q1 - q0);                                                              \
        for (int64_t f = 0; f < P; f++) o[f] *= s;                                              \
      }                                                                                         \
    }                                                                                           \
    free(m);                                                                                    \
  }                                                                                             \
  static void sddmm_##S(int64_t b0, int64_t b1, void *vj) {                                     \
    gjob *j = vj;                                                                               \
    const int64_t P = j->g.P;                                                                   \
    for (int64_t v = b0; v < b1; v++)                                                           \
      for (int64_t q = j->ip[v]; q < j->ip[v + 1]; q++) {                                       \
        T *o = (T *)j->O + j->ei[q] * P;                                                        \
        const T *x = msg_##S(j, v, j->ix[q], j->ei[q], o);                                      \
        if (x != o) memcpy(o, x, sizeof(T) * (size_t)P);                                        \
      }                                                                                         \
  }                                                                                             \
  /* one edge's gradient when the message reads one operand in place (x) and the other (y)      \
   * repeated in blocks of B (j->blk): elementwise into x's gradient, or each block summed      \
   * into y's; features [f0, f1) */                                                             \
  static void back_blk_##S(const gjob *j, const T *g, const T *a, const T *b, T *o, T s,        \
                           int64_t f0, int64_t f1) {                                            \
    int64_t B = j->blk > 0 ? j->blk : -j->blk;                                                  \
    const T *x = j->blk > 0 ? a : b, *y = j->blk > 0 ? b : a;                                   \
    bool inpl = (j->blk > 0) == !j->rhs, xl = j->blk > 0; /* xl: x is the lhs */                \
    for (int64_t h = f0 / B; h * B < f1; h++) {                                                 \
      int64_t k0 = h * B < f0 ? f0 - h * B : 0, k1 = (h + 1) * B > f1 ? f1 - h * B : B;         \
      const T yv = y[h], *xs = x + h * B, *gs = g + h * B;                                      \
      if (inpl) {                                                                               \
        T *ds = o + h * B;                                                                      \
        switch (j->binary) {                                                                    \
        case MX_GNN_ADD: for (int64_t k = k0; k < k1; k++) ds[k] += s * gs[k]; break;           \
        case MX_GNN_SUB: {                                                                      \
          T t = j->rhs ? -s : s;                                                                \
          for (int64_t k = k0; k < k1; k++) ds[k] += t * gs[k];                                 \
          break;                                                                                \
        }                                                                                       \
        case MX_GNN_MUL: for (int64_t k = k0; k < k1; k++) ds[k] += s * yv * gs[k]; break;      \
        default:                                                                                \
          if (xl) for (int64_t k = k0; k < k1; k++) ds[k] += s * gs[k] / yv;                    \
          else for (int64_t k = k0; k < k1; k++) ds[k] -= s * gs[k] * yv / (xs[k] * xs[k]);     \
        }                                                                                       \
      } else {                                                                                  \
        T acc = 0;                                                                              \
        switch (j->binary) {                                                                    \
        case MX_GNN_ADD: for (int64_t k = k0; k < k1; k++) acc += gs[k]; break;                 \
        case MX_GNN_SUB:                                                                        \
          for (int64_t k = k0; k < k1; k++) acc += gs[k];                                       \
          if (j->rhs) acc = -acc;                                                               \
          break;                                                                                \
        case MX_GNN_MUL: for (int64_t k = k0; k < k1; k++) acc += gs[k] * xs[k]; break;         \
        default:                                                                                \
          if (xl) for (int64_t k = k0; k < k1; k++) acc -= gs[k] * xs[k] / (yv * yv);           \
          else for (int64_t k = k0; k < k1; k++) acc += gs[k] / xs[k];                          \
        }                                                                                       \
        o[h] += s * acc;                                                                        \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  /* rows [b0, b1), features [j->f0, j->f1): gradient contributions of every edge */            \
  static void back_##S(int64_t b0, int64_t b1, void *vj) {                                      \
    gjob *j = vj;                                                                               \
    const int64_t P = j->g.P, K = j->g.K, f0 = j->f0, f1 = j->f1;                               \
    bool ext = j->spmm && (j->reduce == MX_GSPMM_REDUCE_OP_MAX ||                               \
                           j->reduce == MX_GSPMM_REDUCE_OP_MIN);                                \
    int64_t *win = NULL;                                                                        \
    T *best = NULL;                                                                             \
    if (ext) {                                                                                  \
      win = malloc(sizeof(int64_t) * (size_t)(P ? P : 1));                                      \
      best = malloc(sizeof(T) * (size_t)(2 * P + 1));                                           \
      if (!win || !best) { free(win); free(best); j->failed = 1; return; }                      \
    }                                                                                           \
    const int64_t *wo = j->rhs ? j->roff : j->loff;                                             \
    int64_t wrow = j->rhs ? j->g.rrow : j->g.lrow;                                              \
    int wt = j->rhs ? j->rt : j->lt;                                                            \
    for (int64_t v = b0; v < b1; v++) {                                                         \
      int64_t q0 = j->ip[v], q1 = j->ip[v + 1];                                                 \
      if (q0 == q1) continue;                                                                   \
      T scale = j->spmm && j->reduce == MX_GSPMM_REDUCE_OP_MEAN ? (T)1 / (T)(q1 - q0) : 1;      \
      if (ext) {                                                                                \
        bool mx = j->reduce == MX_GSPMM_REDUCE_OP_MAX;                                          \
        T *m = best + P;                                                                        \
        for (int64_t q = q0; q < q1; q++) {                                                     \
          const T *x = msg_##S(j, v, j->ix[q], j->ei[q], m);                                    \
          for (int64_t f = f0; f < f1; f++)                                                     \
            if (q == q0 || (mx ? x[f] > best[f] : x[f] < best[f])) best[f] = x[f], win[f] = q;  \
        }                                                                                       \
      }                                                                                         \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        int64_t u = j->ix[q], e = j->ei[q];                                                     \
        const T *g = (const T *)j->G + (j->spmm ? v : e) * P;                                   \
        const T *a = (const T *)j->L + mx_gnn_row(j->lt, v, u, e) * j->g.lrow;                  \
        const T *b = j->R ? (const T *)j->R + mx_gnn_row(j->rt, v, u, e) * j->g.rrow : NULL;    \
        T *o = (T *)j->O + mx_gnn_row(wt, v, u, e) * wrow;                                      \
        if ((j->blk > 1 || j->blk < -1) && !ext) {                                              \
          back_blk_##S(j, g, a, b, o, scale, f0, f1);                                           \
          continue;                                                                             \
        }                                                                                       \
        for (int64_t f = f0; f < f1; f++) {                                                     \
          if (ext && win[f] != q) continue;                                                     \
          T w = g[f] * scale;                                                                   \
          T *d = o + wo[f];                                                                     \
          switch (j->binary) {                                                                  \
          case MX_GNN_COPY: case MX_GNN_ADD: d[0] += w; break;                                  \
          case MX_GNN_SUB: d[0] += j->rhs ? -w : w; break;                                      \
          case MX_GNN_MUL: d[0] += w * (j->rhs ? a[j->loff[f]] : b[j->roff[f]]); break;         \
          case MX_GNN_DIV: {                                                                    \
            T y = b[j->roff[f]];                                                                \
            d[0] += j->rhs ? -w * a[j->loff[f]] / (y * y) : w / y;                              \
            break;                                                                              \
          }                                                                                     \
          default: {                                                                            \
            const T *x = j->rhs ? a + j->loff[f] : b + j->roff[f];                              \
            for (int64_t k = 0; k < K; k++) d[k] += w * x[k];                                   \
          }                                                                                     \
          }                                                                                     \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    free(win);                                                                                  \
    free(best);                                                                                 \
  }                                                                                             \
  static void back_cols_##S(int64_t c0, int64_t c1, void *vj) {                                 \
    gjob j = *(gjob *)vj;                                                                       \
    j.f0 = c0, j.f1 = c1;                                                                       \
    back_##S(0, j.N, &j);                                                                       \
    if (j.failed) ((gjob *)vj)->failed = 1;                                                     \
  }                                                                                             \
  static void esm_##S(int64_t b0, int64_t b1, void *vj) {                                       \
    gjob *j = vj;                                                                               \
    const int64_t F = j->g.P;                                                                   \
    T *mxs = malloc(sizeof(T) * (size_t)(2 * F + 1));                                           \
    if (!mxs) { j->failed = 1; return; }                                                        \
    T *sum = mxs + F;                                                                           \
    const T *x = j->L;                                                                          \
    T *o = j->O;                                                                                \
    for (int64_t v = b0; v < b1; v++) {                                                         \
      int64_t q0 = j->ip[v], q1 = j->ip[v + 1];                                                 \
      if (q0 == q1) continue;                                                                   \
      for (int64_t f = 0; f < F; f++) mxs[f] = -INFINITY, sum[f] = 0;                           \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        const T *r = x + j->ei[q] * F;                                                          \
        for (int64_t f = 0; f < F; f++) mxs[f] = r[f] > mxs[f] ? r[f] : mxs[f];                 \
      }                                                                                         \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        const T *r = x + j->ei[q] * F;                                                          \
        T *restrict y = o + j->ei[q] * F;                                                       \
        for (int64_t f = 0; f < F; f++) y[f] = EXP(r[f] - mxs[f]);                              \
        for (int64_t f = 0; f < F; f++) sum[f] += y[f];                                         \
      }                                                                                         \
      for (int64_t f = 0; f < F; f++) sum[f] = (T)1 / sum[f];                                   \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        T *y = o + j->ei[q] * F;                                                                \
        for (int64_t f = 0; f < F; f++) y[f] *= sum[f];                                         \
      }                                                                                         \
    }                                                                                           \
    free(mxs);                                                                                  \
  }                                                                                             \
  static void esm_back_##S(int64_t b0, int64_t b1, void *vj) {                                  \
    gjob *j = vj;                                                                               \
    const int64_t F = j->g.P;                                                                   \
    T *sum = malloc(sizeof(T) * (size_t)(F ? F : 1));                                           \
    if (!sum) { j->failed = 1; return; }                                                        \
    const T *g = j->G, *y = j->L;                                                               \
    T *o = j->O;                                                                                \
    for (int64_t v = b0; v < b1; v++) {                                                         \
      int64_t q0 = j->ip[v], q1 = j->ip[v + 1];                                                 \
      memset(sum, 0, sizeof(T) * (size_t)F);                                                    \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        int64_t i = j->ei[q] * F;                                                               \
        for (int64_t f = 0; f < F; f++) sum[f] += y[i + f] * g[i + f];                          \
      }                                                                                         \
      for (int64_t q = q0; q < q1; q++) {                                                       \
        int64_t i = j->ei[q] * F;                                                               \
        for (int64_t f = 0; f < F; f++) o[i + f] = y[i + f] * (g[i + f] - sum[f]);              \
      }                                                                                         \
    }                                                                                           \
    free(sum);                                                                                  \
  }

GNN_TYPED(float, f32, v_expf)
GNN_TYPED(double, f64, v_exp)

static int finish(const char *op, gjob *j) {
  free(j->loff);
  return j->failed ? mx_err(MX_ENOMEM, "%s: out of memory", op) : MX_OK;
}

int mx_cpu_gspmm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gspmm *sp = p;
  gjob j;
  int rc = gjob_init(&j, "gspmm", sp->binary_op, sp->lhs_target, sp->rhs_target, in, in[3],
                     nin > 4 ? in[4] : NULL);
  if (rc) return rc;
  j.reduce = sp->reduce_op, j.spmm = true, j.O = mx_ptr(out[0]);
  bool done;
  rc = mx_cpu_gnn_fast(&j, "gspmm", 0, NULL, j.O, j.N, &done);
  if (done) {
    free(j.loff);
    return rc;
  }
  int64_t per = j.N ? (j.E / j.N + 1) * j.g.P * j.g.K : 1;
  mx_parallel_for(j.N, mx_gnn_grain(per), j.f64 ? spmm_f64 : spmm_f32, &j);
  return finish("gspmm", &j);
}

int mx_cpu_gsddmm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                  mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gsddmm *sp = p;
  gjob j;
  int rc = gjob_init(&j, "gsddmm", sp->binary_op, sp->lhs_target, sp->rhs_target, in, in[3],
                     nin > 4 ? in[4] : NULL);
  if (rc) return rc;
  j.reduce = -1, j.O = mx_ptr(out[0]);
  memset(j.O, 0, mx_nbytes(out[0])); /* rows of ids no edge names stay defined */
  int64_t per = j.N ? (j.E / j.N + 1) * j.g.P * j.g.K : 1;
  mx_range_fn fast = mx_cpu_gnn_fast_sddmm(&j);
  mx_parallel_for(j.N, mx_gnn_grain(per), fast ? fast : j.f64 ? sddmm_f64 : sddmm_f32, &j);
  return finish("gsddmm", &j);
}

static int backward(const char *op, int binary, int lt, int rt, int reduce, bool spmm, bool rhs,
                    int nin, mx_tensor *const *in, mx_tensor *out) {
  gjob j;
  int rc = gjob_init(&j, op, binary, lt, rt, in + 1, in[4], nin > 5 ? in[5] : NULL);
  if (rc) return rc;
  j.reduce = reduce, j.spmm = spmm, j.rhs = rhs, j.G = mx_ptr(in[0]), j.O = mx_ptr(out);
  bool done;
  rc = mx_cpu_gnn_fast(&j, op, rhs ? 2 : 1, j.G, j.O, out->size, &done);
  if (done) {
    free(j.loff);
    return rc;
  }
  memset(j.O, 0, mx_nbytes(out));
  int t = rhs ? rt : lt;
  int64_t per = j.N ? (j.E / j.N + 1) * j.g.P * j.g.K : 1;
  if (t != MX_GNN_U) {
    mx_parallel_for(j.N, mx_gnn_grain(per), j.f64 ? back_f64 : back_f32, &j);
  } else {
    /* a scatter into the sources: columns are disjoint when the operand is not broadcast */
    const int64_t *wo = rhs ? j.roff : j.loff;
    bool own = (rhs ? j.g.rrow : j.g.lrow) == j.g.P * j.g.K;
    for (int64_t f = 0; own && f < j.g.P; f++) own = wo[f] == f * j.g.K;
    if (own && j.g.P > 1)
      mx_parallel_for(j.g.P, mx_gnn_grain(j.E * j.g.K), j.f64 ? back_cols_f64 : back_cols_f32, &j);
    else
      (j.f64 ? back_f64 : back_f32)(0, j.N, &j);
  }
  return finish(op, &j);
}

int mx_cpu_gspmm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gspmm_backward *sp = p;
  return backward("gspmm_backward", sp->binary_op, sp->lhs_target, sp->rhs_target,
                  sp->reduce_op, true, sp->wrt == MX_GSPMM_BACKWARD_WRT_RHS, nin, in, out[0]);
}

int mx_cpu_gsddmm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gsddmm_backward *sp = p;
  return backward("gsddmm_backward", sp->binary_op, sp->lhs_target, sp->rhs_target, -1, false,
                  sp->wrt == MX_GSDDMM_BACKWARD_WRT_RHS, nin, in, out[0]);
}

/* edge_softmax(_backward): x (the logits or out) in L, ograd in G */
static int softmax(const char *op, mx_tensor *ip, mx_tensor *ei, mx_tensor *x, mx_tensor *g,
                   mx_tensor *out, bool back) {
  gjob j;
  memset(&j, 0, sizeof j);
  j.N = ip->shape[0] - 1, j.E = ei->shape[0];
  j.ip = mx_ptr(ip), j.ei = mx_ptr(ei);
  int rc = mx_cpu_gnn_check(op, ip, NULL, ei, -1);
  if (rc) return rc;
  j.g.P = j.E ? x->size / j.E : 0;
  j.L = mx_ptr(x), j.G = g ? mx_ptr(g) : NULL, j.O = mx_ptr(out);
  bool f64 = j.f64 = x->dtype == MX_F64;
  int64_t per = j.N ? (j.E / j.N + 1) * j.g.P : 1;
  mx_range_fn fast = mx_cpu_gnn_fast_softmax(&j, back);
  mx_parallel_for(j.N, mx_gnn_grain(per), fast ? fast : back ? (f64 ? esm_back_f64 : esm_back_f32)
                                                : (f64 ? esm_f64 : esm_f32), &j);
  return j.failed ? mx_err(MX_ENOMEM, "%s: out of memory", op) : MX_OK;
}

int mx_cpu_edge_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  return softmax("edge_softmax", in[0], in[1], in[2], NULL, out[0], false);
}

int mx_cpu_edge_softmax_backward(const mx_kctx *ctx, const void *p, int nin,
                                 mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  return softmax("edge_softmax_backward", in[1], in[2], in[3], in[0], out[0], true);
}
