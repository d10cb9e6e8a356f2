/* deformable.c — shape/dtype inference for the deformable convolutions (MXNet's contrib
 * DeformableConvolution and ModulatedDeformableConvolution) and their backward ops, and
 * the one reading of their params (deformable.h) that the kernels share. */
#include "deformable.h"
#include "infer.h"
#include "mx_ops_gen.h"

#include <string.h>

bool mx_dcn_modulated(const mx_op_def *def) { return strncmp(def->name, "modulated_", 10) == 0; }

/* a 2-value tuple or empty (dflt for both), each value >= lo */
static int pair(const char *op, const char *name, const mx_tuple *t, int64_t dflt, int64_t lo,
                int64_t *a, int64_t *b) {
  char x[MX_SHAPE_BUF];
  if (t->n > 0 && t->n != 2)
    return mx_err(MX_EINVAL, "%s: %s %s must have 2 values (height, width)", op, name,
                  mx_shape_str(x, t->n, t->v));
  *a = t->n > 0 ? t->v[0] : dflt, *b = t->n > 0 ? t->v[1] : dflt;
  if (*a < lo || *b < lo)
    return mx_err(MX_EINVAL, "%s: %s %s must be %s", op, name, mx_shape_str(x, t->n, t->v),
                  lo == 0 ? "non-negative" : "positive");
  return MX_OK;
}

int mx_dcn_geom_of(const mx_op_def *def, const void *params, int ndim, const int64_t *dshape,
                   mx_dcn_geom *g) {
  const char *op = def->name;
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  /* the modulated struct begins with the plain one's fields, in the same order */
  const struct mx_params_deformable_convolution *P = params;
  memset(g, 0, sizeof *g);
  g->modulated = mx_dcn_modulated(def);
  g->no_bias = P->no_bias;
  if (P->kernel.n != 2)
    return mx_err(MX_EINVAL, "%s: kernel must be (kh, kw): MXNet's deformable convolutions are "
                  "2-D only, got %s", op,
                  P->kernel.n < 0 ? "none (kernel is required)"
                                  : mx_shape_str(x, P->kernel.n, P->kernel.v));
  if (P->layout != MX_DEFORMABLE_CONVOLUTION_LAYOUT_NONE &&
      P->layout != MX_DEFORMABLE_CONVOLUTION_LAYOUT_NCHW)
    return mx_err(MX_EINVAL, "%s: layout %s is not supported: NCHW only (2-D, as MXNet)", op,
                  P->layout == MX_DEFORMABLE_CONVOLUTION_LAYOUT_NCW ? "NCW" : "NCDHW");
  if (ndim != 4)
    return mx_err(MX_EINVAL, "%s: data must be 4-d (N, C, H, W), got %s", op,
                  mx_shape_str(x, ndim, dshape));
  int rc;
  if ((rc = pair(op, "kernel", &P->kernel, 1, 1, &g->kh, &g->kw)) ||
      (rc = pair(op, "stride", &P->stride, 1, 1, &g->sh, &g->sw)) ||
      (rc = pair(op, "dilate", &P->dilate, 1, 1, &g->dh, &g->dw)) ||
      (rc = pair(op, "pad", &P->pad, 0, 0, &g->ph, &g->pw)))
    return rc;
  if (!P->has_num_filter)
    return mx_err(MX_EINVAL, "%s: num_filter is required", op);
  if (P->num_filter < 1)
    return mx_err(MX_EINVAL, "%s: num_filter must be positive, got %lld", op,
                  (long long)P->num_filter);
  if (P->num_group < 1)
    return mx_err(MX_EINVAL, "%s: num_group must be positive, got %lld", op,
                  (long long)P->num_group);
  if (P->num_deformable_group < 1)
    return mx_err(MX_EINVAL, "%s: num_deformable_group must be positive, got %lld", op,
                  (long long)P->num_deformable_group);
  g->N = dshape[0], g->C = dshape[1], g->H = dshape[2], g->W = dshape[3];
  g->F = P->num_filter, g->G = P->num_group, g->DG = P->num_deformable_group;
  if (g->C % g->G != 0)
    return mx_err(MX_EINVAL, "%s: data %s has %lld channels, not divisible by num_group=%lld",
                  op, mx_shape_str(x, ndim, dshape), (long long)g->C, (long long)g->G);
  if (g->F % g->G != 0)
    return mx_err(MX_EINVAL, "%s: num_filter=%lld is not divisible by num_group=%lld", op,
                  (long long)g->F, (long long)g->G);
  if (g->C % g->DG != 0)
    return mx_err(MX_EINVAL, "%s: data %s has %lld channels, not divisible by "
                  "num_deformable_group=%lld", op, mx_shape_str(x, ndim, dshape),
                  (long long)g->C, (long long)g->DG);
  if (g->modulated && g->F % g->DG != 0)
    return mx_err(MX_EINVAL, "%s: num_filter=%lld is not divisible by num_deformable_group=%lld "
                  "(as MXNet requires)", op, (long long)g->F, (long long)g->DG);
  int64_t eh = g->dh * (g->kh - 1) + 1, ew = g->dw * (g->kw - 1) + 1;
  if (eh > g->H + 2 * g->ph || ew > g->W + 2 * g->pw)
    return mx_err(MX_EINVAL, "%s: kernel %s (dilate %s) spans %lld x %lld but data %s padded by "
                  "(%lld, %lld) is only %lld x %lld", op, mx_shape_str(x, 2, P->kernel.v),
                  P->dilate.n > 0 ? mx_shape_str(y, 2, P->dilate.v) : "1", (long long)eh,
                  (long long)ew, mx_shape_str(y, ndim, dshape), (long long)g->ph,
                  (long long)g->pw, (long long)(g->H + 2 * g->ph),
                  (long long)(g->W + 2 * g->pw));
  g->Ho = (g->H + 2 * g->ph - eh) / g->sh + 1;
  g->Wo = (g->W + 2 * g->pw - ew) / g->sw + 1;
  return MX_OK;
}

static bool unknown(const mx_desc *t) {
  if (t->ndim < 0) return true;
  for (int i = 0; i < t->ndim; i++)
    if (t->shape[i] < 0) return true;
  return false;
}

static void fill(mx_desc *t, int n, const int64_t *s, int dtype) {
  if (!unknown(t)) return;
  t->ndim = n;
  memcpy(t->shape, s, sizeof(int64_t) * (size_t)n);
  if (t->dtype < 0) t->dtype = dtype;
}

/* t must have shape s (what, a description of it, for the message) and data's dtype */
static int check(const char *op, const char *name, const char *what, const mx_desc *t, int n,
                 const int64_t *s, int dtype) {
  char x[MX_SHAPE_BUF], y[MX_SHAPE_BUF];
  bool ok = t->ndim == n;
  for (int i = 0; i < n && ok; i++) ok = t->shape[i] == s[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: %s must have shape %s %s, got %s", op, name,
                  mx_shape_str(x, n, s), what, mx_shape_str(y, t->ndim, t->shape));
  if (t->dtype != dtype)
    return mx_err(MX_EINVAL, "%s: %s has dtype %s but data has dtype %s", op, name,
                  mx_dtype_name(t->dtype), mx_dtype_name(dtype));
  return MX_OK;
}

/* The shapes of the inputs besides data: offset, mask (modulated), weight, bias, output. */
typedef struct {
  int64_t off[4], mask[4], w[4], b[1], out[4];
} dcn_shapes;

static void shapes_of(const mx_dcn_geom *g, dcn_shapes *s) {
  int64_t taps = g->kh * g->kw;
  int64_t off[4] = {g->N, 2 * g->DG * taps, g->Ho, g->Wo}, mask[4] = {g->N, g->DG * taps, g->Ho,
                                                                     g->Wo};
  int64_t w[4] = {g->F, g->C / g->G, g->kh, g->kw}, out[4] = {g->N, g->F, g->Ho, g->Wo};
  memcpy(s->off, off, sizeof off), memcpy(s->mask, mask, sizeof mask);
  memcpy(s->w, w, sizeof w), memcpy(s->out, out, sizeof out);
  s->b[0] = g->F;
}

/* offset, mask (modulated), weight: in[first...] checked (filled when unknown, fill) */
static int check_inputs(const mx_op_def *def, const mx_dcn_geom *g, const dcn_shapes *s,
                        mx_desc *const *in, int first, int dtype, bool fill_unknown) {
  const char *op = def->name;
  mx_desc *off = in[first], *mask = g->modulated ? in[first + 1] : NULL;
  mx_desc *w = in[first + (g->modulated ? 2 : 1)];
  if (fill_unknown) {
    fill(off, 4, s->off, dtype), fill(w, 4, s->w, dtype);
    if (mask) fill(mask, 4, s->mask, dtype);
  }
  int rc;
  if ((rc = check(op, "offset", "(N, 2 num_deformable_group kh kw, Ho, Wo)", off, 4, s->off,
                  dtype)) ||
      (mask && (rc = check(op, "mask", "(N, num_deformable_group kh kw, Ho, Wo)", mask, 4,
                           s->mask, dtype))) ||
      (rc = check(op, "weight", "(num_filter, channels/num_group, kh, kw)", w, 4, s->w, dtype)))
    return rc;
  return MX_OK;
}

/* deformable_convolution / modulated_deformable_convolution: data, offset, (mask,) weight,
 * bias unless no_bias. Partial: with data known, unknown offset, mask, weight and bias are
 * filled in (Gluon's deferred initialisation). */
int mx_infer_deformable_convolution(const mx_op_def *def, const void *p, int nin,
                                    mx_desc *const *in, int nout, mx_desc *out,
                                    mx_op_info *info) {
  (void)nout, (void)info;
  const struct mx_params_deformable_convolution *P = p;
  bool mod = mx_dcn_modulated(def);
  int want = (mod ? 4 : 3) + (P->no_bias ? 0 : 1);
  if (nin != want)
    return mx_err(MX_EINVAL, "%s: takes %d inputs (data, offset, %sweight%s) with no_bias=%s, "
                  "got %d", def->name, want, mod ? "mask, " : "", P->no_bias ? "" : ", bias",
                  P->no_bias ? "true" : "false", nin);
  mx_desc *d = in[0];
  if (unknown(d) || d->dtype < 0) return MX_OK;
  mx_dcn_geom g;
  int rc = mx_dcn_geom_of(def, p, d->ndim, d->shape, &g);
  if (rc) return rc;
  dcn_shapes s;
  shapes_of(&g, &s);
  if ((rc = check_inputs(def, &g, &s, in, 1, d->dtype, true))) return rc;
  if (!P->no_bias) {
    mx_desc *b = in[nin - 1];
    fill(b, 1, s.b, d->dtype);
    if ((rc = check(def->name, "bias", "(num_filter)", b, 1, s.b, d->dtype))) return rc;
  }
  mx_out_set(&out[0], 4, s.out, d->dtype);
  return MX_OK;
}

/* the backward ops: ograd, data, offset, (mask,) weight -> the gradients of data, offset,
 * (mask,) weight, each of its input's shape */
int mx_infer_deformable_convolution_backward(const mx_op_def *def, const void *p, int nin,
                                             mx_desc *const *in, int nout, mx_desc *out,
                                             mx_op_info *info) {
  (void)nin, (void)info;
  mx_desc *og = in[0], *d = in[1];
  mx_dcn_geom g;
  int rc = mx_dcn_geom_of(def, p, d->ndim, d->shape, &g);
  if (rc) return rc;
  dcn_shapes s;
  shapes_of(&g, &s);
  if ((rc = check_inputs(def, &g, &s, in, 2, d->dtype, false)) ||
      (rc = check(def->name, "ograd", "(the forward output's)", og, 4, s.out, d->dtype)))
    return rc;
  for (int k = 0; k < nout; k++)
    mx_out_set(&out[k], in[1 + k]->ndim, in[1 + k]->shape, d->dtype);
  return MX_OK;
}
