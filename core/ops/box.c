/* box.c — shape/dtype inference for the box family: box_nms (data (..., N, K) -> out like
 * data, index (..., N)), box_iou, bipartite_matching, box_encode/box_decode and roi_align.
 * Params that name a position in a row (coord_start, score_index, id_index) are 0-based
 * here (the Lua wrapper converted them); the kernels read them from the params. */
#include "infer.h"

#include "mx_ops_gen.h"

static int need_float(const mx_op_def *def, const char *what, const mx_desc *d) {
  if (d->dtype != MX_F32 && d->dtype != MX_F64)
    return mx_err(MX_EINVAL, "%s: %s must be float32 or float64, got %s", def->name, what,
                  mx_dtype_name(d->dtype));
  return MX_OK;
}

int mx_infer_box_nms(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                     mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_box_nms *P = p;
  char b[MX_SHAPE_BUF];
  const mx_desc *x = in[0];
  if (x->ndim < 2)
    return mx_err(MX_EINVAL, "box_nms: data must be (..., N, K) with at least 2 dims, got %s",
                  mx_shape_str(b, x->ndim, x->shape));
  int64_t k = x->shape[x->ndim - 1];
  if (P->coord_start < 0 || P->coord_start + 4 > k)
    return mx_err(MX_EINVAL, "box_nms: coord_start %lld (1-based) needs 4 coordinates within "
                  "rows of %lld values (data %s)", (long long)P->coord_start + 1, (long long)k,
                  mx_shape_str(b, x->ndim, x->shape));
  if (P->score_index < 0 || P->score_index >= k)
    return mx_err(MX_EINVAL, "box_nms: score_index %lld (1-based) is outside rows of %lld "
                  "values", (long long)P->score_index + 1, (long long)k);
  if (P->id_index >= k)
    return mx_err(MX_EINVAL, "box_nms: id_index %lld (1-based) is outside rows of %lld values",
                  (long long)P->id_index + 1, (long long)k);
  int rc = need_float(def, "data", x);
  if (rc) return rc;
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  mx_out_set(&out[1], x->ndim - 1, x->shape, MX_I64);
  return MX_OK;
}

/* box_nms_backward(ograd (..., N, K), index (..., N)) -> (..., N, K) */
int mx_infer_box_nms_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                              int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *g = in[0], *ix = in[1];
  bool ok = g->ndim >= 2 && ix->ndim == g->ndim - 1;
  for (int d = 0; ok && d < ix->ndim; d++) ok = ix->shape[d] == g->shape[d];
  if (!ok)
    return mx_err(MX_EINVAL, "box_nms_backward: index %s must be ograd %s without its last dim",
                  mx_shape_str(b, ix->ndim, ix->shape), mx_shape_str(c, g->ndim, g->shape));
  int rc = need_float(def, "ograd", g);
  if (rc) return rc;
  mx_out_set(&out[0], g->ndim, g->shape, g->dtype);
  return MX_OK;
}

int mx_infer_box_iou(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                     mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *l = in[0], *r = in[1];
  if (l->ndim < 1 || r->ndim < 1 || l->shape[l->ndim - 1] != 4 || r->shape[r->ndim - 1] != 4)
    return mx_err(MX_EINVAL, "box_iou: lhs %s and rhs %s must both end in 4 coordinates",
                  mx_shape_str(b, l->ndim, l->shape), mx_shape_str(c, r->ndim, r->shape));
  if (l->ndim + r->ndim - 2 > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "box_iou: the result would have more than %d dims", MX_MAX_DIM);
  if (l->dtype != r->dtype)
    return mx_err(MX_EINVAL, "box_iou: lhs is %s, rhs %s", mx_dtype_name(l->dtype),
                  mx_dtype_name(r->dtype));
  int rc = need_float(def, "lhs", l);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  int n = 0;
  for (int d = 0; d < l->ndim - 1; d++) s[n++] = l->shape[d];
  for (int d = 0; d < r->ndim - 1; d++) s[n++] = r->shape[d];
  mx_out_set(&out[0], n, s, l->dtype);
  return MX_OK;
}

int mx_infer_bipartite_matching(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                                int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_bipartite_matching *P = p;
  char b[MX_SHAPE_BUF];
  const mx_desc *x = in[0];
  if (!P->has_threshold)
    return mx_err(MX_EINVAL, "bipartite_matching: threshold is required");
  if (x->ndim < 2)
    return mx_err(MX_EINVAL, "bipartite_matching: data must be (..., N, M), got %s",
                  mx_shape_str(b, x->ndim, x->shape));
  int rc = need_float(def, "data", x);
  if (rc) return rc;
  int64_t s[MX_MAX_DIM];
  for (int d = 0; d < x->ndim - 1; d++) s[d] = x->shape[d];
  mx_out_set(&out[0], x->ndim - 1, s, x->dtype);
  s[x->ndim - 2] = x->shape[x->ndim - 1];
  mx_out_set(&out[1], x->ndim - 1, s, x->dtype);
  return MX_OK;
}

static bool is_shape(const mx_desc *d, int ndim, const int64_t *s) {
  if (d->ndim != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (s[i] >= 0 && d->shape[i] != s[i]) return false;
  return true;
}

/* box_encode(samples (B, N), matches (B, N), anchors (B, N, 4), refs (B, M, 4), means (4),
 * stds (4)) -> targets, masks (B, N, 4) */
int mx_infer_box_encode(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                        int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char b[MX_SHAPE_BUF];
  const mx_desc *sm = in[0];
  if (sm->ndim != 2)
    return mx_err(MX_EINVAL, "box_encode: samples must be (B, N), got %s",
                  mx_shape_str(b, sm->ndim, sm->shape));
  int64_t B = sm->shape[0], N = sm->shape[1];
  const int64_t s2[] = { B, N }, s3[] = { B, N, 4 }, sr[] = { B, -1, 4 }, s4[] = { 4 };
  const char *names[] = { "samples", "matches", "anchors", "refs", "means", "stds" };
  const int nd[] = { 2, 2, 3, 3, 1, 1 };
  const int64_t *want[] = { s2, s2, s3, sr, s4, s4 };
  const char *form[] = { "(B, N)", "(B, N)", "(B, N, 4)", "(B, M, 4)", "(4)", "(4)" };
  for (int i = 0; i < 6; i++) {
    if (!is_shape(in[i], nd[i], want[i]))
      return mx_err(MX_EINVAL, "box_encode: %s must be %s with B=%lld, N=%lld, got %s", names[i],
                    form[i], (long long)B, (long long)N,
                    mx_shape_str(b, in[i]->ndim, in[i]->shape));
    int rc = need_float(def, names[i], in[i]);
    if (rc) return rc;
  }
  mx_out_set(&out[0], 3, s3, in[2]->dtype);
  mx_out_set(&out[1], 3, s3, in[2]->dtype);
  return MX_OK;
}

/* box_decode(data (B, N, 4), anchors (1 or B, N, 4)) -> (B, N, 4) */
int mx_infer_box_decode(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                        int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *x = in[0], *a = in[1];
  if (x->ndim != 3 || x->shape[2] != 4 || a->ndim != 3 || a->shape[2] != 4 ||
      a->shape[1] != x->shape[1] || (a->shape[0] != 1 && a->shape[0] != x->shape[0]))
    return mx_err(MX_EINVAL, "box_decode: data must be (B, N, 4) and anchors (1 or B, N, 4), "
                  "got %s and %s", mx_shape_str(b, x->ndim, x->shape),
                  mx_shape_str(c, a->ndim, a->shape));
  int rc = need_float(def, "data", x);
  if (rc) return rc;
  if (a->dtype != x->dtype)
    return mx_err(MX_EINVAL, "box_decode: anchors are %s, data %s", mx_dtype_name(a->dtype),
                  mx_dtype_name(x->dtype));
  mx_out_set(&out[0], 3, x->shape, x->dtype);
  return MX_OK;
}

/* the checks roi_align and its backward share; *c_out: the output channel count */
static int roi_check(const mx_op_def *def, const mx_tuple *ps, bool has_scale, double scale,
                     int64_t ratio, bool psr, const mx_desc *x, const mx_desc *r,
                     int64_t *c_out) {
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  if (ps->n != 2 || ps->v[0] < 1 || ps->v[1] < 1)
    return mx_err(MX_EINVAL, "%s: pooled_size must be 2 positive sizes (height, width)",
                  def->name);
  if (!has_scale) return mx_err(MX_EINVAL, "%s: spatial_scale is required", def->name);
  if (!(scale > 0 && scale < 1e15))
    return mx_err(MX_EINVAL, "%s: spatial_scale must be a positive number, got %g", def->name,
                  scale);
  if (ratio > 1024)
    return mx_err(MX_EINVAL, "%s: sample_ratio must be at most 1024 samples per bin side, got "
                  "%lld", def->name, (long long)ratio);
  if (x->ndim != 4 || r->ndim != 2 || r->shape[1] != 5)
    return mx_err(MX_EINVAL, "%s: data must be (N, C, H, W) and rois (R, 5), got %s and %s",
                  def->name, mx_shape_str(b, x->ndim, x->shape),
                  mx_shape_str(c, r->ndim, r->shape));
  int rc = need_float(def, "data", x);
  if (rc) return rc;
  if (r->dtype != x->dtype)
    return mx_err(MX_EINVAL, "%s: rois are %s, data %s", def->name, mx_dtype_name(r->dtype),
                  mx_dtype_name(x->dtype));
  int64_t bins = ps->v[0] * ps->v[1];
  if (psr && x->shape[1] % bins != 0)
    return mx_err(MX_EINVAL, "%s: position_sensitive needs channels (%lld) divisible by "
                  "ph * pw = %lld", def->name, (long long)x->shape[1], (long long)bins);
  *c_out = psr ? x->shape[1] / bins : x->shape[1];
  return MX_OK;
}

int mx_infer_roi_align(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                       int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_roi_align *P = p;
  int64_t c;
  int rc = roi_check(def, &P->pooled_size, P->has_spatial_scale, P->spatial_scale,
                     P->sample_ratio, P->position_sensitive, in[0], in[1], &c);
  if (rc) return rc;
  const int64_t s[] = { in[1]->shape[0], c, P->pooled_size.v[0], P->pooled_size.v[1] };
  mx_out_set(&out[0], 4, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_roi_align_backward(const mx_op_def *def, const void *p, int nin,
                                mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_roi_align_backward *P = p;
  char b[MX_SHAPE_BUF];
  int64_t c;
  int rc = roi_check(def, &P->pooled_size, P->has_spatial_scale, P->spatial_scale,
                     P->sample_ratio, P->position_sensitive, in[1], in[2], &c);
  if (rc) return rc;
  const int64_t s[] = { in[2]->shape[0], c, P->pooled_size.v[0], P->pooled_size.v[1] };
  if (!is_shape(in[0], 4, s) || in[0]->dtype != in[1]->dtype)
    return mx_err(MX_EINVAL, "roi_align_backward: ograd must be (%lld, %lld, %lld, %lld) %s, "
                  "got %s", (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3],
                  mx_dtype_name(in[1]->dtype), mx_shape_str(b, in[0]->ndim, in[0]->shape));
  mx_out_set(&out[0], 4, in[1]->shape, in[1]->dtype);
  return MX_OK;
}

int mx_infer_roi_pooling(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                         int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_roi_pooling *P = p;
  int64_t c;
  int rc = roi_check(def, &P->pooled_size, P->has_spatial_scale, P->spatial_scale, 0, false,
                     in[0], in[1], &c);
  if (rc) return rc;
  const int64_t s[] = { in[1]->shape[0], c, P->pooled_size.v[0], P->pooled_size.v[1] };
  mx_out_set(&out[0], 4, s, in[0]->dtype);
  mx_out_set(&out[1], 4, s, MX_I64);
  return MX_OK;
}

/* roi_pooling_backward(ograd (R, C, ph, pw), data (N, C, H, W), argmax like ograd) -> ddata */
int mx_infer_roi_pooling_backward(const mx_op_def *def, const void *p, int nin,
                                  mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  char b[MX_SHAPE_BUF], c[MX_SHAPE_BUF];
  const mx_desc *g = in[0], *x = in[1], *am = in[2];
  int rc = need_float(def, "ograd", g);
  if (rc) return rc;
  if (!is_shape(am, g->ndim, g->shape) || x->ndim != 4 || g->ndim != 4 || g->shape[1] != x->shape[1])
    return mx_err(MX_EINVAL, "roi_pooling_backward: ograd %s and argmax %s must be (R, C, ph, "
                  "pw) with data's C", mx_shape_str(b, g->ndim, g->shape),
                  mx_shape_str(c, am->ndim, am->shape));
  mx_out_set(&out[0], 4, x->shape, g->dtype);
  return MX_OK;
}
