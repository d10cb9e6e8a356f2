/* kernels/ref/gnn.c — reference gspmm / gsddmm (and their gradients) and edge_softmax:
 * plain loops over the destination-sorted csr, one output element at a time, in double
 * through mx_load_f64 / mx_store_f64. The feature geometry (which operand element an output
 * feature reads) is core/ops/gnn.h's, the definition of the ops. */
#include "gnn.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
  const char *op;
  int binary, lt, rt;
  int64_t N, E;
  const int64_t *indptr, *indices, *eids;
  const mx_tensor *l, *r;
  mx_gnn_geom g;
  int64_t *loff, *roff; /* g.P each */
} gnn_call;

/* Reads the csr and the operands' geometry; checks the csr values. */
static int gnn_setup(gnn_call *c, const char *op, int binary, int lt, int rt,
                     mx_tensor *const *graph, const mx_tensor *l, const mx_tensor *r) {
  c->op = op, c->binary = binary, c->lt = lt, c->rt = rt, c->l = l, c->r = r;
  c->N = graph[0]->shape[0] - 1;
  c->E = graph[1]->shape[0];
  c->indptr = mx_ptr(graph[0]);
  c->indices = mx_ptr(graph[1]);
  c->eids = mx_ptr(graph[2]);
  int rc = mx_gnn_geometry(op, binary, l->ndim, l->shape, r ? r->ndim : -1,
                           r ? r->shape : NULL, &c->g);
  if (rc) return rc;
  int64_t urows = lt == MX_GNN_U ? l->shape[0] : -1;
  if (r && rt == MX_GNN_U && (urows < 0 || r->shape[0] < urows)) urows = r->shape[0];
  rc = mx_gnn_check_csr(op, c->indptr, c->N, c->indices, c->eids, c->E, urows);
  if (rc) return rc;
  c->loff = malloc(sizeof(int64_t) * (size_t)(2 * c->g.P + 1));
  if (!c->loff) return mx_err(MX_ENOMEM, "%s: out of memory", op);
  c->roff = c->loff + c->g.P;
  mx_gnn_offsets(&c->g, binary, l->ndim, l->shape, c->loff);
  if (r) mx_gnn_offsets(&c->g, binary, r->ndim, r->shape, c->roff);
  return MX_OK;
}

/* The message of output feature f on the edge (u -> v, e). */
static double gnn_msg(const gnn_call *c, int64_t v, int64_t u, int64_t e, int64_t f) {
  const void *L = mx_ptr(c->l);
  int64_t li = mx_gnn_row(c->lt, v, u, e) * c->g.lrow + c->loff[f];
  if (c->binary == MX_GNN_COPY) return mx_load_f64(L, c->l->dtype, li);
  const void *R = mx_ptr(c->r);
  int64_t ri = mx_gnn_row(c->rt, v, u, e) * c->g.rrow + c->roff[f];
  if (c->binary == MX_GNN_DOT) {
    double s = 0;
    for (int64_t k = 0; k < c->g.K; k++)
      s += mx_load_f64(L, c->l->dtype, li + k) * mx_load_f64(R, c->r->dtype, ri + k);
    return s;
  }
  double a = mx_load_f64(L, c->l->dtype, li), b = mx_load_f64(R, c->r->dtype, ri);
  switch (c->binary) {
  case MX_GNN_ADD: return a + b;
  case MX_GNN_SUB: return a - b;
  case MX_GNN_MUL: return a * b;
  default: return a / b;
  }
}

/* The winning csr position of row v's feature f for max (sign 1) or min (-1): the first
 * extreme message (NaN never wins); -1 for a row without edges. */
static int64_t gnn_arg(const gnn_call *c, int64_t v, int64_t f, double sign) {
  int64_t best = -1;
  double bv = 0;
  for (int64_t p = c->indptr[v]; p < c->indptr[v + 1]; p++) {
    double m = sign * gnn_msg(c, v, c->indices[p], c->eids[p], f);
    if (best < 0 || m > bv) best = p, bv = m;
  }
  return best;
}


int mx_ref_gspmm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                 mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gspmm *sp = p;
  gnn_call c;
  int rc = gnn_setup(&c, "gspmm", sp->binary_op, sp->lhs_target, sp->rhs_target, in, in[3],
                     nin > 4 ? in[4] : NULL);
  if (rc) return rc;
  void *o = mx_ptr(out[0]);
  for (int64_t v = 0; v < c.N; v++) {
    int64_t deg = c.indptr[v + 1] - c.indptr[v];
    for (int64_t f = 0; f < c.g.P; f++) {
      double s = 0;
      if (sp->reduce_op == MX_GSPMM_REDUCE_OP_MAX || sp->reduce_op == MX_GSPMM_REDUCE_OP_MIN) {
        int64_t a = gnn_arg(&c, v, f, sp->reduce_op == MX_GSPMM_REDUCE_OP_MAX ? 1 : -1);
        if (a >= 0) s = gnn_msg(&c, v, c.indices[a], c.eids[a], f);
      } else {
        for (int64_t q = c.indptr[v]; q < c.indptr[v + 1]; q++)
          s += gnn_msg(&c, v, c.indices[q], c.eids[q], f);
        if (sp->reduce_op == MX_GSPMM_REDUCE_OP_MEAN && deg > 0) s /= (double)deg;
      }
      mx_store_f64(o, out[0]->dtype, v * c.g.P + f, s);
    }
  }
  free(c.loff);
  return MX_OK;
}

int mx_ref_gsddmm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                  mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gsddmm *sp = p;
  gnn_call c;
  int rc = gnn_setup(&c, "gsddmm", sp->binary_op, sp->lhs_target, sp->rhs_target, in, in[3],
                     nin > 4 ? in[4] : NULL);
  if (rc) return rc;
  void *o = mx_ptr(out[0]);
  for (int64_t i = 0; i < c.E * c.g.P; i++) mx_store_f64(o, out[0]->dtype, i, 0);
  for (int64_t v = 0; v < c.N; v++)
    for (int64_t q = c.indptr[v]; q < c.indptr[v + 1]; q++)
      for (int64_t f = 0; f < c.g.P; f++)
        mx_store_f64(o, out[0]->dtype, c.eids[q] * c.g.P + f,
                     gnn_msg(&c, v, c.indices[q], c.eids[q], f));
  free(c.loff);
  return MX_OK;
}

/* d message / d operand element k of output feature f on the edge (wrt lhs or rhs) */
static double gnn_dmsg(const gnn_call *c, bool rhs, int64_t v, int64_t u, int64_t e, int64_t f,
                       int64_t k) {
  if (c->binary == MX_GNN_COPY || c->binary == MX_GNN_ADD) return 1;
  if (c->binary == MX_GNN_SUB) return rhs ? -1 : 1;
  const void *L = mx_ptr(c->l), *R = mx_ptr(c->r);
  double a = mx_load_f64(L, c->l->dtype, mx_gnn_row(c->lt, v, u, e) * c->g.lrow + c->loff[f] + k);
  double b = mx_load_f64(R, c->r->dtype, mx_gnn_row(c->rt, v, u, e) * c->g.rrow + c->roff[f] + k);
  if (c->binary == MX_GNN_MUL || c->binary == MX_GNN_DOT) return rhs ? a : b;
  return rhs ? -a / (b * b) : 1 / b; /* div */
}

/* Adds w * d message / d operand into the operand's gradient at the edge's row. */
static void gnn_acc(const gnn_call *c, bool rhs, double *acc, int64_t v, int64_t u, int64_t e,
                    int64_t f, double w) {
  int t = rhs ? c->rt : c->lt;
  int64_t row = mx_gnn_row(t, v, u, e) * (rhs ? c->g.rrow : c->g.lrow);
  int64_t at = row + (rhs ? c->roff : c->loff)[f];
  for (int64_t k = 0; k < c->g.K; k++) acc[at + k] += w * gnn_dmsg(c, rhs, v, u, e, f, k);
}

/* The gradient of lhs or rhs: accumulated in double, then stored. spmm: ograd per
 * destination row (reduce_op as given); else per edge. */
static int gnn_backward(const gnn_call *c, bool rhs, bool spmm, int reduce,
                        const mx_tensor *og, mx_tensor *out) {
  double *acc = calloc((size_t)(out->size ? out->size : 1), sizeof(double));
  if (!acc) return mx_err(MX_ENOMEM, "%s: out of memory", c->op);
  const void *G = mx_ptr(og);
  bool ext = reduce == MX_GSPMM_REDUCE_OP_MAX || reduce == MX_GSPMM_REDUCE_OP_MIN;
  for (int64_t v = 0; v < c->N; v++) {
    int64_t deg = c->indptr[v + 1] - c->indptr[v];
    for (int64_t f = 0; f < c->g.P; f++) {
      int64_t win = ext ? gnn_arg(c, v, f, reduce == MX_GSPMM_REDUCE_OP_MAX ? 1 : -1) : -1;
      for (int64_t q = c->indptr[v]; q < c->indptr[v + 1]; q++) {
        if (spmm && ext && q != win) continue;
        double w = mx_load_f64(G, og->dtype, (spmm ? v : c->eids[q]) * c->g.P + f);
        if (spmm && reduce == MX_GSPMM_REDUCE_OP_MEAN) w /= (double)deg;
        gnn_acc(c, rhs, acc, v, c->indices[q], c->eids[q], f, w);
      }
    }
  }
  void *o = mx_ptr(out);
  for (int64_t i = 0; i < out->size; i++) mx_store_f64(o, out->dtype, i, acc[i]);
  free(acc);
  return MX_OK;
}

int mx_ref_gspmm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gspmm_backward *sp = p;
  gnn_call c;
  int rc = gnn_setup(&c, "gspmm_backward", sp->binary_op, sp->lhs_target, sp->rhs_target,
                     in + 1, in[4], nin > 5 ? in[5] : NULL);
  if (rc) return rc;
  rc = gnn_backward(&c, sp->wrt == MX_GSPMM_BACKWARD_WRT_RHS, true, sp->reduce_op, in[0], out[0]);
  free(c.loff);
  return rc;
}

int mx_ref_gsddmm_backward(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)ctx, (void)nout;
  const struct mx_params_gsddmm_backward *sp = p;
  gnn_call c;
  int rc = gnn_setup(&c, "gsddmm_backward", sp->binary_op, sp->lhs_target, sp->rhs_target,
                     in + 1, in[4], nin > 5 ? in[5] : NULL);
  if (rc) return rc;
  rc = gnn_backward(&c, sp->wrt == MX_GSDDMM_BACKWARD_WRT_RHS, false, -1, in[0], out[0]);
  free(c.loff);
  return rc;
}

/* softmax over each row's edges, per feature: out[e] = exp(x[e] - max) / sum */
int mx_ref_edge_softmax(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  int64_t N = in[0]->shape[0] - 1, E = in[1]->shape[0];
  const int64_t *ip = mx_ptr(in[0]), *ei = mx_ptr(in[1]);
  int rc = mx_gnn_check_csr("edge_softmax", ip, N, NULL, ei, E, -1);
  if (rc) return rc;
  int64_t F = E ? in[2]->size / E : 0;
  const void *x = mx_ptr(in[2]);
  void *o = mx_ptr(out[0]);
  int dt = in[2]->dtype;
  for (int64_t v = 0; v < N; v++)
    for (int64_t f = 0; f < F; f++) {
      double m = -INFINITY, s = 0;
      for (int64_t q = ip[v]; q < ip[v + 1]; q++) m = fmax(m, mx_load_f64(x, dt, ei[q] * F + f));
      for (int64_t q = ip[v]; q < ip[v + 1]; q++) s += exp(mx_load_f64(x, dt, ei[q] * F + f) - m);
      for (int64_t q = ip[v]; q < ip[v + 1]; q++)
        mx_store_f64(o, dt, ei[q] * F + f, exp(mx_load_f64(x, dt, ei[q] * F + f) - m) / s);
    }
  return MX_OK;
}

int mx_ref_edge_softmax_backward(const mx_kctx *ctx, const void *p, int nin,
                                 mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx, (void)p, (void)nin, (void)nout;
  int64_t N = in[1]->shape[0] - 1, E = in[2]->shape[0];
  const int64_t *ip = mx_ptr(in[1]), *ei = mx_ptr(in[2]);
  int rc = mx_gnn_check_csr("edge_softmax_backward", ip, N, NULL, ei, E, -1);
  if (rc) return rc;
  int64_t F = E ? in[3]->size / E : 0;
  const void *g = mx_ptr(in[0]), *y = mx_ptr(in[3]);
  void *o = mx_ptr(out[0]);
  int dt = in[3]->dtype;
  for (int64_t v = 0; v < N; v++)
    for (int64_t f = 0; f < F; f++) {
      double s = 0;
      for (int64_t q = ip[v]; q < ip[v + 1]; q++) {
        int64_t i = ei[q] * F + f;
        s += mx_load_f64(y, dt, i) * mx_load_f64(g, dt, i);
      }
      for (int64_t q = ip[v]; q < ip[v + 1]; q++) {
        int64_t i = ei[q] * F + f;
        mx_store_f64(o, dt, i, mx_load_f64(y, dt, i) * (mx_load_f64(g, dt, i) - s));
      }
    }
  return MX_OK;
}
