/* conv.c — shape/dtype inference for convolution and its backward ops, and the one
 * reading of their params (conv.h) that the kernels share. */
#include "conv.h"
#include "infer.h"

#include <string.h>

static const char *const LAYOUT_NAME[] = {"None", "NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC"};

/* A per-spatial-dim tuple: empty (default dflt) or exactly nsp values >= lo. */
static int tuple_dims(const char *op, const char *name, const mx_tuple *t, int nsp, int64_t dflt,
                      int64_t lo, int64_t *v) {
  char x[MX_SHAPE_BUF];
  if (t->n > 0 && t->n != nsp)
    return mx_err(MX_EINVAL, "%s: %s %s must have %d value(s), one per spatial dim of kernel",
                  op, name, mx_shape_str(x, t->n, t->v), nsp);
  for (int i = 0; i < 3; i++) {
    v[i] = i < nsp && t->n > 0 ? t->v[i] : (i < nsp ? dflt : (lo == 0 ? 0 : 1));
    if (v[i] < lo)
      return mx_err(MX_EINVAL, "%s: %s %s must be %s", op, name, mx_shape_str(x, t->n, t->v),
                    lo == 0 ? "non-negative" : "positive");
  }
  return MX_OK;
}

int mx_conv_geom_of(const char *op, const struct mx_params_convolution *P, int ndim,
                    const int64_t *dshape, int64_t F, mx_conv_geom *g) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  memset(g, 0, sizeof *g);
  int nsp = P->kernel.n;
  if (nsp < 1 || nsp > 3)
    return mx_err(MX_EINVAL, "%s: kernel must give 1 to 3 spatial dims, got %s", op,
                  nsp < 0 ? "none (kernel is required)" : mx_shape_str(x, nsp, P->kernel.v));
  g->nsp = nsp;
  int lay = P->layout;
  if (lay != MX_CONVOLUTION_LAYOUT_NONE) {
    int want = lay <= MX_CONVOLUTION_LAYOUT_NCDHW ? lay : lay - 3; /* spatial dims */
    if (want != nsp)
      return mx_err(MX_EINVAL, "%s: layout %s is for %d spatial dim(s) but kernel %s has %d",
                    op, LAYOUT_NAME[lay], want, mx_shape_str(x, nsp, P->kernel.v), nsp);
    g->last = lay > MX_CONVOLUTION_LAYOUT_NCDHW;
  }
  if (ndim != nsp + 2)
    return mx_err(MX_EINVAL, "%s: data must be %d-d (%s) for the %d-d kernel %s, got %s", op,
                  nsp + 2, g->last ? LAYOUT_NAME[nsp + 3] : LAYOUT_NAME[nsp], nsp,
                  mx_shape_str(x, nsp, P->kernel.v), mx_shape_str(y, ndim, dshape));
  int rc;
  if ((rc = tuple_dims(op, "kernel", &P->kernel, nsp, 1, 1, g->k)) ||
      (rc = tuple_dims(op, "stride", &P->stride, nsp, 1, 1, g->s)) ||
      (rc = tuple_dims(op, "dilate", &P->dilate, nsp, 1, 1, g->d)) ||
      (rc = tuple_dims(op, "pad", &P->pad, nsp, 0, 0, g->p)))
    return rc;
  g->N = dshape[0];
  g->C = g->last ? dshape[ndim - 1] : dshape[1];
  for (int i = 0; i < 3; i++) g->in[i] = i < nsp ? dshape[g->last ? 1 + i : 2 + i] : 1;
  if (P->num_group < 1)
    return mx_err(MX_EINVAL, "%s: num_group must be positive, got %d", op, (int)P->num_group);
  g->G = P->num_group;
  if (g->C % g->G != 0)
    return mx_err(MX_EINVAL, "%s: data %s has %lld channels, not divisible by num_group=%lld",
                  op, mx_shape_str(x, ndim, dshape), (long long)g->C, (long long)g->G);
  if (P->has_num_filter && P->num_filter < 1)
    return mx_err(MX_EINVAL, "%s: num_filter must be positive, got %lld", op,
                  (long long)P->num_filter);
  if (F < 0) F = P->has_num_filter ? P->num_filter : -1;
  g->F = F;
  if (F >= 0 && F % g->G != 0)
    return mx_err(MX_EINVAL, "%s: %lld filters are not divisible by num_group=%lld", op,
                  (long long)F, (long long)g->G);
  for (int i = 0; i < nsp; i++) {
    int64_t ext = g->d[i] * (g->k[i] - 1) + 1, padded = g->in[i] + 2 * g->p[i];
    if (ext > padded)
      return mx_err(MX_EINVAL, "%s: kernel %s (dilate %s) spans %lld along spatial dim %d but "
                    "data %s padded by %lld is only %lld there", op,
                    mx_shape_str(x, nsp, P->kernel.v),
                    P->dilate.n > 0 ? mx_shape_str(y, nsp, P->dilate.v) : "1", (long long)ext,
                    i + 1, mx_shape_str(y, ndim, dshape), (long long)g->p[i], (long long)padded);
    g->out[i] = (padded - ext) / g->s[i] + 1;
  }
  for (int i = nsp; i < 3; i++) g->out[i] = 1;
  return MX_OK;
}

int mx_conv_weight_shape(const mx_conv_geom *g, int64_t *s) {
  int n = g->nsp + 2;
  s[0] = g->F;
  s[g->last ? n - 1 : 1] = g->C / g->G;
  for (int i = 0; i < g->nsp; i++) s[g->last ? 1 + i : 2 + i] = g->k[i];
  return n;
}

int mx_conv_out_shape(const mx_conv_geom *g, int64_t *s) {
  int n = g->nsp + 2;
  s[0] = g->N;
  s[g->last ? n - 1 : 1] = g->F;
  for (int i = 0; i < g->nsp; i++) s[g->last ? 1 + i : 2 + i] = g->out[i];
  return n;
}

static bool unknown(const mx_desc *t) {
  if (t->ndim < 0) return true;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0) return true;
  return false;
}

static int same_dtype(const char *op, const char *name, const mx_desc *t, const mx_desc *d) {
  if (t->dtype != d->dtype)
    return mx_err(MX_EINVAL, "%s: %s has dtype %s but data has dtype %s", op, name,
                  mx_dtype_name(t->dtype), mx_dtype_name(d->dtype));
  return MX_OK;
}

static int check_weight(const char *op, const mx_conv_geom *g, const mx_desc *w) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  int64_t ws[5];
  int n = mx_conv_weight_shape(g, ws);
  bool ok = w->ndim == n;
  for (int i = 0; i < n && ok; i++) ok = w->shape[i] == ws[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: weight must have shape %s (num_filter, %s) for this data, "
                  "got %s", op, mx_shape_str(x, n, ws),
                  g->last ? "kernel..., channels/num_group" : "channels/num_group, kernel...",
                  mx_shape_str(y, w->ndim, w->shape));
  return MX_OK;
}

/* Convolution: data, weight, bias unless no_bias. Partial: with data known, an unknown
 * weight (needs num_filter) or bias is filled in (Gluon's deferred initialisation). */
int mx_infer_convolution(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                         int nout, mx_desc *out, mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_convolution *P = p;
  char x[MX_SHAPE_BUF];
  if (nin != (P->no_bias ? 2 : 3))
    return mx_err(MX_EINVAL, "%s: takes %d inputs (data, weight%s) with no_bias=%s, got %d",
                  def->name, P->no_bias ? 2 : 3, P->no_bias ? "" : ", bias",
                  P->no_bias ? "true" : "false", nin);
  mx_desc *d = in[0], *w = in[1];
  if (unknown(d) || d->dtype < 0) return MX_OK;
  mx_conv_geom g;
  int64_t F = -1;
  if (!unknown(w) && w->ndim >= 1) F = w->shape[0];
  else if (!P->no_bias && in[2]->ndim == 1 && in[2]->shape[0] >= 0) F = in[2]->shape[0];
  int rc = mx_conv_geom_of(def->name, P, d->ndim, d->shape, F, &g);
  if (rc) return rc;
  if (P->has_num_filter && F >= 0 && F != P->num_filter)
    return mx_err(MX_EINVAL, "%s: num_filter=%lld but weight/bias give %lld filters", def->name,
                  (long long)P->num_filter, (long long)F);
  if (g.F < 0) return MX_OK; /* the filter count is not known yet */
  if (unknown(w)) { /* fill the weight */
    w->ndim = mx_conv_weight_shape(&g, w->shape);
    if (w->dtype < 0) w->dtype = d->dtype;
  }
  if (!P->no_bias && unknown(in[2])) {
    in[2]->ndim = 1;
    in[2]->shape[0] = g.F;
    if (in[2]->dtype < 0) in[2]->dtype = d->dtype;
  }
  if ((rc = check_weight(def->name, &g, w)) || (rc = same_dtype(def->name, "weight", w, d)))
    return rc;
  if (!P->no_bias) {
    if (in[2]->ndim != 1 || in[2]->shape[0] != g.F)
      return mx_err(MX_EINVAL, "%s: bias must have shape (%lld), got %s", def->name,
                    (long long)g.F, mx_shape_str(x, in[2]->ndim, in[2]->shape));
    if ((rc = same_dtype(def->name, "bias", in[2], d))) return rc;
  }
  int64_t s[5];
  int n = mx_conv_out_shape(&g, s);
  mx_out_set(&out[0], n, s, d->dtype);
  return MX_OK;
}

/* ograd must have the forward's output shape for data (and the weight's filters). */
static int check_ograd(const char *op, const mx_conv_geom *g, const mx_desc *og) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  int64_t s[5];
  int n = mx_conv_out_shape(g, s);
  bool ok = og->ndim == n;
  for (int i = 0; i < n && ok; i++) ok = og->shape[i] == s[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: ograd must have the forward output's shape %s, got %s", op,
                  mx_shape_str(x, n, s), mx_shape_str(y, og->ndim, og->shape));
  return MX_OK;
}

/* backward_data: ograd, weight, data -> data's shape */
int mx_infer_convolution_backward_data(const mx_op_def *def, const void *p, int nin,
                                       mx_desc *const *in, int nout, mx_desc *out,
                                       mx_op_info *info) {
  (void)nin, (void)nout, (void)info;
  const mx_desc *og = in[0], *w = in[1], *d = in[2];
  mx_conv_geom g;
  int rc = mx_conv_geom_of(def->name, p, d->ndim, d->shape, w->ndim > 0 ? w->shape[0] : 0, &g);
  if (rc || (rc = check_weight(def->name, &g, w)) || (rc = check_ograd(def->name, &g, og)) ||
      (rc = same_dtype(def->name, "weight", w, d)) || (rc = same_dtype(def->name, "ograd", og, d)))
    return rc;
  mx_out_set(&out[0], d->ndim, d->shape, d->dtype);
  return MX_OK;
}

/* backward_weight: ograd, data -> the weight's shape (filters from ograd) */
int mx_infer_convolution_backward_weight(const mx_op_def *def, const void *p, int nin,
                                         mx_desc *const *in, int nout, mx_desc *out,
                                         mx_op_info *info) {
  (void)nin, (void)nout, (void)info;
  const struct mx_params_convolution *P = p;
  const mx_desc *og = in[0], *d = in[1];
  int64_t F = -1;
  if (og->ndim == d->ndim && og->ndim >= 3) {
    bool last = P->layout > MX_CONVOLUTION_LAYOUT_NCDHW;
    F = og->shape[last ? og->ndim - 1 : 1];
  }
  mx_conv_geom g;
  int rc = mx_conv_geom_of(def->name, P, d->ndim, d->shape, F, &g);
  if (rc || (rc = check_ograd(def->name, &g, og)) || (rc = same_dtype(def->name, "ograd", og, d)))
    return rc;
  int64_t s[5];
  int n = mx_conv_weight_shape(&g, s);
  mx_out_set(&out[0], n, s, d->dtype);
  return MX_OK;
}

/* ---- deconvolution ---------------------------------------------------------------- */

int mx_deconv_as_conv(const char *op, const struct mx_params_deconvolution *D, int ndim,
                      const int64_t *xshape, int64_t F, struct mx_params_convolution *cp,
                      int64_t *oshape) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  memset(cp, 0, sizeof *cp);
  cp->kernel = D->kernel, cp->stride = D->stride, cp->dilate = D->dilate;
  cp->num_group = D->num_group, cp->no_bias = true, cp->layout = D->layout;
  int nsp = D->kernel.n;
  if (nsp < 1 || nsp > 3)
    return mx_err(MX_EINVAL, "%s: kernel must give 1 to 3 spatial dims, got %s", op,
                  nsp < 0 ? "none (kernel is required)" : mx_shape_str(x, nsp, D->kernel.v));
  int lay = D->layout, want = lay <= MX_DECONVOLUTION_LAYOUT_NCDHW ? lay : lay - 3;
  if (lay != MX_DECONVOLUTION_LAYOUT_NONE && want != nsp)
    return mx_err(MX_EINVAL, "%s: layout %s is for %d spatial dim(s) but kernel %s has %d", op,
                  LAYOUT_NAME[lay], want, mx_shape_str(x, nsp, D->kernel.v), nsp);
  if (ndim != nsp + 2)
    return mx_err(MX_EINVAL, "%s: data must be %d-d for the %d-d kernel %s, got %s", op,
                  nsp + 2, nsp, mx_shape_str(x, nsp, D->kernel.v), mx_shape_str(y, ndim, xshape));
  mx_conv_geom g;
  int64_t k[3], s[3], d[3], pad[3], adj[3], tgt[3];
  int rc;
  if ((rc = tuple_dims(op, "kernel", &D->kernel, nsp, 1, 1, k)) ||
      (rc = tuple_dims(op, "stride", &D->stride, nsp, 1, 1, s)) ||
      (rc = tuple_dims(op, "dilate", &D->dilate, nsp, 1, 1, d)) ||
      (rc = tuple_dims(op, "pad", &D->pad, nsp, 0, 0, pad)) ||
      (rc = tuple_dims(op, "adj", &D->adj, nsp, 0, 0, adj)) ||
      (rc = tuple_dims(op, "target_shape", &D->target_shape, nsp, 0, 0, tgt)))
    return rc;
  bool last = D->layout > MX_DECONVOLUTION_LAYOUT_NCDHW;
  int64_t C = xshape[last ? ndim - 1 : 1];
  if (F < 0) F = D->has_num_filter ? D->num_filter : -1;
  oshape[0] = xshape[0];
  oshape[last ? ndim - 1 : 1] = F;
  cp->has_num_filter = true, cp->num_filter = C;
  cp->pad.n = nsp;
  for (int i = 0; i < nsp; i++) {
    int64_t in = xshape[last ? 1 + i : 2 + i], ext = d[i] * (k[i] - 1) + 1;
    if (D->target_shape.n > 0) {
      int64_t total = s[i] * (in - 1) + ext - tgt[i];
      if (total < 0 && total > -s[i]) { /* only adj can reach it */
        pad[i] = 0, adj[i] = -total;
      } else if (total < 0) {
        return mx_err(MX_EINVAL, "%s: target_shape %s is larger than data %s can give along "
                      "spatial dim %d (at most %lld)", op,
                      mx_shape_str(x, nsp, D->target_shape.v), mx_shape_str(y, ndim, xshape),
                      i + 1, (long long)(s[i] * (in - 1) + ext + s[i] - 1));
      } else {
        pad[i] = (total + 1) / 2, adj[i] = total % 2;
      }
    }
    if (adj[i] >= s[i])
      return mx_err(MX_EINVAL, "%s: adj %s must be smaller than stride along each dim", op,
                    mx_shape_str(x, nsp, D->adj.v));
    int64_t o = (in - 1) * s[i] - 2 * pad[i] + ext + adj[i];
    if (o < 1)
      return mx_err(MX_EINVAL, "%s: pad %s leaves no output along spatial dim %d for data %s", op,
                    mx_shape_str(x, nsp, D->pad.v), i + 1, mx_shape_str(y, ndim, xshape));
    cp->pad.v[i] = pad[i];
    oshape[last ? 1 + i : 2 + i] = o;
  }
  if (F >= 0 && (rc = mx_conv_geom_of(op, cp, ndim, oshape, C, &g))) return rc;
  return MX_OK;
}

/* Deconvolution: data (N, C, sp...), weight (C, F/G, k...), bias (F) unless no_bias.
 * Partial as convolution's (the weight needs num_filter). */
int mx_infer_deconvolution(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                           int nout, mx_desc *out, mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_deconvolution *D = p;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (nin != (D->no_bias ? 2 : 3))
    return mx_err(MX_EINVAL, "%s: takes %d inputs (data, weight%s) with no_bias=%s, got %d",
                  def->name, D->no_bias ? 2 : 3, D->no_bias ? "" : ", bias",
                  D->no_bias ? "true" : "false", nin);
  mx_desc *d = in[0], *w = in[1];
  if (unknown(d) || d->dtype < 0) return MX_OK;
  int nsp = d->ndim - 2;
  bool last = D->layout > MX_DECONVOLUTION_LAYOUT_NCDHW;
  int64_t G = D->num_group, F = -1;
  if (!unknown(w) && w->ndim == d->ndim) F = w->shape[last ? d->ndim - 1 : 1] * G;
  else if (!D->no_bias && in[2]->ndim == 1 && in[2]->shape[0] >= 0) F = in[2]->shape[0];
  struct mx_params_convolution cp;
  int64_t os[5];
  int rc = mx_deconv_as_conv(def->name, D, d->ndim, d->shape, F, &cp, os);
  if (rc) return rc;
  if (D->has_num_filter && F >= 0 && F != D->num_filter)
    return mx_err(MX_EINVAL, "%s: num_filter=%lld but weight/bias give %lld filters", def->name,
                  (long long)D->num_filter, (long long)F);
  if (F < 0) F = D->has_num_filter ? D->num_filter : -1;
  if (F < 0) return MX_OK;
  int64_t C = d->shape[last ? d->ndim - 1 : 1];
  int64_t ws[5];
  ws[0] = C;
  ws[last ? d->ndim - 1 : 1] = F / G;
  for (int i = 0; i < nsp; i++) ws[last ? 1 + i : 2 + i] = D->kernel.v[i];
  if (unknown(w)) {
    w->ndim = d->ndim;
    memcpy(w->shape, ws, sizeof(int64_t) * (size_t)d->ndim);
    if (w->dtype < 0) w->dtype = d->dtype;
  }
  if (!D->no_bias && unknown(in[2])) {
    in[2]->ndim = 1, in[2]->shape[0] = F;
    if (in[2]->dtype < 0) in[2]->dtype = d->dtype;
  }
  bool ok = w->ndim == d->ndim;
  for (int i = 0; i < d->ndim && ok; i++) ok = w->shape[i] == ws[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: weight must have shape %s (channels, num_filter/num_group, "
                  "kernel...) for this data, got %s", def->name, mx_shape_str(x, d->ndim, ws),
                  mx_shape_str(y, w->ndim, w->shape));
  if ((rc = same_dtype(def->name, "weight", w, d))) return rc;
  if (!D->no_bias) {
    if (in[2]->ndim != 1 || in[2]->shape[0] != F)
      return mx_err(MX_EINVAL, "%s: bias must have shape (%lld), got %s", def->name,
                    (long long)F, mx_shape_str(x, in[2]->ndim, in[2]->shape));
    if ((rc = same_dtype(def->name, "bias", in[2], d))) return rc;
  }
  mx_out_set(&out[0], d->ndim, os, d->dtype);
  return MX_OK;
}

/* ---- convolution_sum (conv + bias + residual, then act_type) ------------------------ */

/* data, weight, residual, bias unless no_bias: convolution's inference (partial too) on
 * (data, weight, bias), and the residual must be the output's shape and dtype (filled in
 * when unknown). The params are convolution's (one param list: the same struct layout). */
int mx_infer_convolution_sum(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                             int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_convolution *P = p;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  if (nin != (P->no_bias ? 3 : 4))
    return mx_err(MX_EINVAL, "%s: takes %d inputs (data, weight, residual%s) with no_bias=%s, "
                  "got %d", def->name, P->no_bias ? 3 : 4, P->no_bias ? "" : ", bias",
                  P->no_bias ? "true" : "false", nin);
  mx_desc *cin[3] = {in[0], in[1], P->no_bias ? NULL : in[3]};
  int rc = mx_infer_convolution(def, p, nin - 1, cin, nout, out, info);
  if (rc || out[0].ndim < 0) return rc;
  mx_desc *r = in[2];
  if (unknown(r)) {
    r->ndim = out[0].ndim;
    memcpy(r->shape, out[0].shape, sizeof(int64_t) * (size_t)out[0].ndim);
    if (r->dtype < 0) r->dtype = out[0].dtype;
  }
  bool ok = r->ndim == out[0].ndim && r->dtype == out[0].dtype;
  for (int i = 0; i < r->ndim && ok; i++) ok = r->shape[i] == out[0].shape[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: residual must have the convolution output's shape %s and "
                  "dtype %s, got %s %s", def->name, mx_shape_str(x, out[0].ndim, out[0].shape),
                  mx_dtype_name(out[0].dtype), mx_shape_str(y, r->ndim, r->shape),
                  r->dtype < 0 ? "(dtype unknown)" : mx_dtype_name(r->dtype));
  return MX_OK;
}
