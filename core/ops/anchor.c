/* anchor.c — shape/dtype inference for the anchor family: multibox_prior (data (B, C, H, W)
 * -> (1, H*W*A, 4)), multibox_target, multibox_detection and proposal / multi_proposal
 * (both take struct mx_params_proposal: the two ops declare the same params). */
#include "infer.h"

#include "mx_ops_gen.h"

#include <math.h>

static int need_float(const mx_op_def *def, const char *what, const mx_desc *d) {
  if (d->dtype != MX_F32 && d->dtype != MX_F64)
    return mx_err(MX_EINVAL, "%s: %s must be float32 or float64, got %s", def->name, what,
                  mx_dtype_name(d->dtype));
  return MX_OK;
}

static int same_dtype(const mx_op_def *def, const char *what, const mx_desc *d,
                      const mx_desc *ref, const char *ref_name) {
  if (d->dtype != ref->dtype)
    return mx_err(MX_EINVAL, "%s: %s is %s, %s %s", def->name, what, mx_dtype_name(d->dtype),
                  ref_name, mx_dtype_name(ref->dtype));
  return MX_OK;
}

/* every entry finite, and positive where pos */
static int check_list(const mx_op_def *def, const char *name, const mx_ftuple *t, int nmin,
                      int nmax, bool pos) {
  if (t->n < nmin || t->n > nmax) {
    if (nmin == nmax)
      return mx_err(MX_EINVAL, "%s: %s must hold %d numbers, got %d", def->name, name, nmin,
                    t->n);
    return mx_err(MX_EINVAL, "%s: %s must hold %d to %d numbers, got %d", def->name, name,
                  nmin, nmax, t->n);
  }
  for (int i = 0; i < t->n; i++)
    if (!isfinite(t->v[i]) || (pos && !(t->v[i] > 0)))
      return mx_err(MX_EINVAL, "%s: %s[%d] must be a %snumber, got %g", def->name, name, i + 1,
                    pos ? "positive " : "finite ", t->v[i]);
  return MX_OK;
}

int mx_infer_multibox_prior(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                            int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_multibox_prior *P = p;
  char b[MX_SHAPE_BUF];
  const mx_desc *x = in[0];
  if (x->ndim != 4)
    return mx_err(MX_EINVAL, "multibox_prior: data must be a feature map (B, C, H, W), got %s",
                  mx_shape_str(b, x->ndim, x->shape));
  int rc;
  if ((rc = need_float(def, "data", x)) || (rc = check_list(def, "sizes", &P->sizes, 1, 16, true)) ||
      (rc = check_list(def, "ratios", &P->ratios, 1, 16, true)) ||
      (rc = check_list(def, "steps", &P->steps, 2, 2, false)) ||
      (rc = check_list(def, "offsets", &P->offsets, 2, 2, false)))
    return rc;
  int64_t a = P->sizes.n + P->ratios.n - 1, hw = x->shape[2] * x->shape[3];
  if (x->shape[2] > (int64_t)1 << 24 || x->shape[3] > (int64_t)1 << 24)
    return mx_err(MX_EINVAL, "multibox_prior: a feature map of %s is too large",
                  mx_shape_str(b, x->ndim, x->shape));
  const int64_t s[] = { 1, hw * a, 4 };
  mx_out_set(&out[0], 3, s, x->dtype);
  return MX_OK;
}

int mx_infer_multibox_target(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                             int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_multibox_target *P = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF], d[MX_SHAPE_BUF];
  const mx_desc *a = in[0], *l = in[1], *cp = in[2];
  if (a->ndim != 3 || a->shape[0] != 1 || a->shape[2] != 4 || l->ndim != 3 || l->shape[2] < 5 ||
      cp->ndim != 3 || cp->shape[2] != a->shape[1] || cp->shape[0] != l->shape[0] ||
      cp->shape[1] < 1)
    return mx_err(MX_EINVAL, "multibox_target: anchor must be (1, N, 4), label (B, M, W >= 5) "
                  "and cls_pred (B, C, N), got %s, %s and %s", mx_shape_str(b, a->ndim, a->shape),
                  mx_shape_str(c, l->ndim, l->shape), mx_shape_str(d, cp->ndim, cp->shape));
  int rc;
  if ((rc = need_float(def, "anchor", a)) || (rc = same_dtype(def, "label", l, a, "anchor")) ||
      (rc = same_dtype(def, "cls_pred", cp, a, "anchor")) ||
      (rc = check_list(def, "variances", &P->variances, 4, 4, true)))
    return rc;
  if (P->negative_mining_ratio > 0 && !(P->negative_mining_thresh > 0))
    return mx_err(MX_EINVAL, "multibox_target: negative mining needs negative_mining_thresh > 0, "
                  "got %g", P->negative_mining_thresh);
  const int64_t s4[] = { l->shape[0], a->shape[1] * 4 }, s1[] = { l->shape[0], a->shape[1] };
  mx_out_set(&out[0], 2, s4, a->dtype);
  mx_out_set(&out[1], 2, s4, a->dtype);
  mx_out_set(&out[2], 2, s1, a->dtype);
  return MX_OK;
}

int mx_infer_multibox_detection(const mx_op_def *def, const void *p, int nin,
                                mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_multibox_detection *P = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF], d[MX_SHAPE_BUF];
  const mx_desc *cp = in[0], *lp = in[1], *a = in[2];
  if (cp->ndim != 3 || cp->shape[1] < 2 || lp->ndim != 2 || lp->shape[0] != cp->shape[0] ||
      lp->shape[1] != cp->shape[2] * 4 || a->ndim != 3 || a->shape[0] != 1 ||
      a->shape[1] != cp->shape[2] || a->shape[2] != 4)
    return mx_err(MX_EINVAL, "multibox_detection: cls_prob must be (B, C >= 2, N), loc_pred "
                  "(B, N * 4) and anchor (1, N, 4), got %s, %s and %s",
                  mx_shape_str(b, cp->ndim, cp->shape), mx_shape_str(c, lp->ndim, lp->shape),
                  mx_shape_str(d, a->ndim, a->shape));
  int rc;
  if ((rc = need_float(def, "cls_prob", cp)) ||
      (rc = same_dtype(def, "loc_pred", lp, cp, "cls_prob")) ||
      (rc = same_dtype(def, "anchor", a, cp, "cls_prob")) ||
      (rc = check_list(def, "variances", &P->variances, 4, 4, true)))
    return rc;
  if (P->background_id < 0 || P->background_id >= cp->shape[1])
    return mx_err(MX_EINVAL, "multibox_detection: background_id %lld is not a class of "
                  "cls_prob's %lld", (long long)P->background_id, (long long)cp->shape[1]);
  const int64_t s[] = { cp->shape[0], cp->shape[2], 6 };
  mx_out_set(&out[0], 3, s, cp->dtype);
  return MX_OK;
}

int mx_nout_proposal(const void *params) {
  const struct mx_params_proposal *P = params;
  return P->output_score ? 2 : 1;
}

/* proposal / multi_proposal: the same params (the struct of proposal read for both) */
int mx_infer_proposal(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                      int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)info;
  const struct mx_params_proposal *P = p;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF], d[MX_SHAPE_BUF];
  const mx_desc *cp = in[0], *bp = in[1], *im = in[2];
  bool multi = def->name[0] == 'm';
  if (cp->ndim != 4 || cp->shape[1] % 2 != 0 || bp->ndim != 4 || bp->shape[0] != cp->shape[0] ||
      bp->shape[1] != cp->shape[1] * 2 || bp->shape[2] != cp->shape[2] ||
      bp->shape[3] != cp->shape[3] || im->ndim != 2 || im->shape[0] != cp->shape[0] ||
      im->shape[1] != 3)
    return mx_err(MX_EINVAL, "%s: cls_prob must be (B, 2A, H, W), bbox_pred (B, 4A, H, W) and "
                  "im_info (B, 3), got %s, %s and %s", def->name,
                  mx_shape_str(b, cp->ndim, cp->shape), mx_shape_str(c, bp->ndim, bp->shape),
                  mx_shape_str(d, im->ndim, im->shape));
  if (!multi && cp->shape[0] != 1)
    return mx_err(MX_EINVAL, "proposal: takes one image (cls_prob (1, 2A, H, W)), got a batch "
                  "of %lld: use multi_proposal", (long long)cp->shape[0]);
  int rc;
  if ((rc = need_float(def, "cls_prob", cp)) ||
      (rc = same_dtype(def, "bbox_pred", bp, cp, "cls_prob")) ||
      (rc = same_dtype(def, "im_info", im, cp, "cls_prob")) ||
      (rc = check_list(def, "scales", &P->scales, 1, 16, true)) ||
      (rc = check_list(def, "ratios", &P->ratios, 1, 16, true)))
    return rc;
  if (cp->shape[1] / 2 != (int64_t)P->scales.n * P->ratios.n)
    return mx_err(MX_EINVAL, "%s: cls_prob has %lld anchors per cell (2A = %lld channels), "
                  "#ratios * #scales = %d", def->name, (long long)(cp->shape[1] / 2),
                  (long long)cp->shape[1], P->scales.n * P->ratios.n);
  if (P->rpn_post_nms_top_n < 1 || P->rpn_post_nms_top_n > (int64_t)1 << 24)
    return mx_err(MX_EINVAL, "%s: rpn_post_nms_top_n must be 1 to 2^24, got %lld", def->name,
                  (long long)P->rpn_post_nms_top_n);
  if (P->feature_stride < 1 || P->feature_stride > 4096)
    return mx_err(MX_EINVAL, "%s: feature_stride must be 1 to 4096, got %lld", def->name,
                  (long long)P->feature_stride);
  if (!(P->threshold >= 0 && P->threshold <= 1))
    return mx_err(MX_EINVAL, "%s: threshold must be in [0, 1], got %g", def->name, P->threshold);
  if (P->rpn_min_size < 0 || P->rpn_min_size > (int64_t)1 << 24)
    return mx_err(MX_EINVAL, "%s: rpn_min_size must be 0 to 2^24, got %lld", def->name,
                  (long long)P->rpn_min_size);
  if (nout != (P->output_score ? 2 : 1))
    return mx_err(MX_EINVAL, "%s: %d outputs, output_score=%s gives %d", def->name, nout,
                  P->output_score ? "true" : "false", P->output_score ? 2 : 1);
  int64_t rows = cp->shape[0] * P->rpn_post_nms_top_n;
  const int64_t s5[] = { rows, 5 }, s1[] = { rows, 1 };
  mx_out_set(&out[0], 2, s5, cp->dtype);
  if (nout > 1) mx_out_set(&out[1], 2, s1, cp->dtype);
  return MX_OK;
}
