/* gnn.c — shape/dtype inference for the gnn family (gspmm, gsddmm, edge_softmax and their
 * backward ops): the graph arrives as a destination-sorted csr (indptr (N + 1), indices
 * and eids (E), int64), the operands as (rows, features...) float tensors whose rows are
 * nodes or edges by target (core/ops/gnn.h has the feature geometry). Source-node ids are
 * values, so the kernels check them against the operand at u. */
#include "gnn.h"
#include "infer.h"

static int check_csr_desc(const mx_op_def *def, mx_desc *const *in, int first, bool indices,
                          int64_t *N, int64_t *E) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *ip = in[first], *ix = indices ? in[first + 1] : NULL,
                *ei = in[first + (indices ? 2 : 1)];
  if (ip->ndim != 1 || ip->shape[0] < 1 || ip->dtype != MX_I64)
    return mx_err(MX_EINVAL, "%s: indptr must be a non-empty 1-d int64 tensor (N + 1), got "
                  "shape %s", def->name, mx_shape_str(b, ip->ndim, ip->shape));
  if (ei->ndim != 1 || ei->dtype != MX_I64 ||
      (ix && (ix->ndim != 1 || ix->dtype != MX_I64 || ix->shape[0] != ei->shape[0])))
    return mx_err(MX_EINVAL, "%s: indices and eids must be 1-d int64 tensors of one length "
                  "(the edges), got %s and %s", def->name,
                  ix ? mx_shape_str(b, ix->ndim, ix->shape) : "-",
                  mx_shape_str(c, ei->ndim, ei->shape));
  *N = ip->shape[0] - 1;
  *E = ei->shape[0];
  return MX_OK;
}

static int check_float(const mx_op_def *def, const char *what, const mx_desc *x, int dtype) {
  if (!mx_dtype_is_float(x->dtype))
    return mx_err(MX_EINVAL, "%s: %s must be a float tensor, got %s", def->name, what,
                  mx_dtype_name(x->dtype));
  if (dtype >= 0 && x->dtype != dtype)
    return mx_err(MX_EINVAL, "%s: %s is %s, the other operand %s (cast one)", def->name, what,
                  mx_dtype_name(x->dtype), mx_dtype_name(dtype));
  return MX_OK;
}

static const char *const TNAME[] = { "u", "v", "e" };

/* An operand's rows must match its target: E at e, N at v (u: checked on the values). */
static int check_rows(const mx_op_def *def, const char *what, const mx_desc *x, int t,
                      int64_t N, int64_t E) {
  char b[MX_SHAPE_BUF];
  int64_t want = t == MX_GNN_E ? E : t == MX_GNN_V ? N : -1;
  if (x->ndim < 1 || (want >= 0 && x->shape[0] != want))
    return mx_err(MX_EINVAL, "%s: %s at target %s must have %lld rows (%s), got shape %s",
                  def->name, what, TNAME[t], (long long)want, t == MX_GNN_E ? "the edges" :
                  "the destination nodes", mx_shape_str(b, x->ndim, x->shape));
  return MX_OK;
}

/* The operands lhs = in[first], rhs = in[first + 1] (when given): dtypes, rows and the
 * feature geometry. */
static int check_operands(const mx_op_def *def, int nin, mx_desc *const *in, int first,
                          int binary, int lt, int rt, int64_t N, int64_t E, mx_gnn_geom *g) {
  const mx_desc *l = in[first], *r = nin > first + 1 ? in[first + 1] : NULL;
  int rc = check_float(def, "lhs", l, -1);
  if (!rc && r) rc = check_float(def, "rhs", r, l->dtype);
  if (!rc) rc = check_rows(def, "lhs", l, lt, N, E);
  if (!rc && r) rc = check_rows(def, "rhs", r, rt, N, E);
  if (!rc) rc = mx_gnn_geometry(def->name, binary, l->ndim, l->shape, r ? r->ndim : -1,
                                r ? r->shape : NULL, g);
  return rc;
}

static void out_rows(mx_desc *o, int64_t rows, const mx_gnn_geom *g, int dtype) {
  int64_t s[MX_MAX_DIM];
  s[0] = rows;
  for (int d = 0; d < g->fnd; d++) s[d + 1] = g->fshape[d];
  mx_out_set(o, g->fnd + 1, s, dtype);
}

/* ograd must have the forward's output shape */
static int check_ograd(const mx_op_def *def, const mx_desc *og, int64_t rows,
                       const mx_gnn_geom *g, int dtype) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  mx_desc want;
  out_rows(&want, rows, g, dtype);
  bool ok = og->ndim == want.ndim && og->dtype == dtype;
  for (int d = 0; ok && d < og->ndim; d++) ok = og->shape[d] == want.shape[d];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd must be %s %s (the forward's output), got %s %s",
                  def->name, mx_dtype_name(dtype), mx_shape_str(b, want.ndim, want.shape),
                  mx_dtype_name(og->dtype), mx_shape_str(c, og->ndim, og->shape));
  return MX_OK;
}

int mx_infer_gspmm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                   int nout, mx_desc *out, mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_gspmm *sp = p;
  int64_t N = 0, E = 0;
  mx_gnn_geom g;
  int rc = check_csr_desc(def, in, 0, true, &N, &E);
  if (!rc) rc = check_operands(def, nin, in, 3, sp->binary_op, sp->lhs_target, sp->rhs_target,
                               N, E, &g);
  if (rc) return rc;
  out_rows(&out[0], N, &g, in[3]->dtype);
  return MX_OK;
}

int mx_infer_gsddmm(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                    int nout, mx_desc *out, mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_gsddmm *sp = p;
  int64_t N = 0, E = 0;
  mx_gnn_geom g;
  int rc = check_csr_desc(def, in, 0, true, &N, &E);
  if (!rc) rc = check_operands(def, nin, in, 3, sp->binary_op, sp->lhs_target, sp->rhs_target,
                               N, E, &g);
  if (rc) return rc;
  out_rows(&out[0], E, &g, in[3]->dtype);
  return MX_OK;
}

/* the backward ops: out like the operand wrt names */
static int infer_backward(const mx_op_def *def, int nin, mx_desc *const *in, mx_desc *out,
                          int binary, int lt, int rt, int wrt, bool spmm) {
  int64_t N = 0, E = 0;
  mx_gnn_geom g;
  int rc = check_csr_desc(def, in, 1, true, &N, &E);
  if (!rc) rc = check_operands(def, nin, in, 4, binary, lt, rt, N, E, &g);
  if (!rc) rc = check_ograd(def, in[0], spmm ? N : E, &g, in[4]->dtype);
  if (rc) return rc;
  if (wrt == (int)MX_GSPMM_BACKWARD_WRT_RHS && nin < 6)
    return mx_err(MX_EINVAL, "%s: wrt rhs, but no rhs was given", def->name);
  const mx_desc *x = in[wrt == (int)MX_GSPMM_BACKWARD_WRT_RHS ? 5 : 4];
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  return MX_OK;
}

int mx_infer_gspmm_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                            int nout, mx_desc *out, mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_gspmm_backward *sp = p;
  return infer_backward(def, nin, in, out, sp->binary_op, sp->lhs_target, sp->rhs_target,
                        sp->wrt, true);
}

int mx_infer_gsddmm_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                             int nout, mx_desc *out, mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_gsddmm_backward *sp = p;
  return infer_backward(def, nin, in, out, sp->binary_op, sp->lhs_target, sp->rhs_target,
                        sp->wrt, false);
}

static int infer_softmax(const mx_op_def *def, mx_desc *const *in, int first, mx_desc *out) {
  char b[MX_SHAPE_BUF];
  int64_t N = 0, E = 0;
  int rc = check_csr_desc(def, in, first, false, &N, &E);
  if (rc) return rc;
  const mx_desc *x = in[first + 2];
  rc = check_float(def, "logits", x, -1);
  if (rc) return rc;
  if (x->ndim < 1 || x->shape[0] != E)
    return mx_err(MX_EINVAL, "%s: logits must have a row per edge (%lld), got shape %s",
                  def->name, (long long)E, mx_shape_str(b, x->ndim, x->shape));
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  return MX_OK;
}

int mx_infer_edge_softmax(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                          int nout, mx_desc *out, mx_op_info *info) {
  (void)p, (void)nin, (void)nout, (void)info;
  return infer_softmax(def, in, 0, out);
}

int mx_infer_edge_softmax_backward(const mx_op_def *def, const void *p, int nin,
                                   mx_desc *const *in, int nout, mx_desc *out,
                                   mx_op_info *info) {
  (void)p, (void)nin, (void)nout, (void)info;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  int rc = infer_softmax(def, in, 1, out);
  if (rc) return rc;
  const mx_desc *g = in[0], *y = in[3];
  bool ok = g->ndim == y->ndim && g->dtype == y->dtype;
  for (int d = 0; ok && d < g->ndim; d++) ok = g->shape[d] == y->shape[d];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd %s must match out %s", def->name,
                  mx_shape_str(b, g->ndim, g->shape), mx_shape_str(c, y->ndim, y->shape));
  return MX_OK;
}
