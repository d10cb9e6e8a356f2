/* pool.c — inference for the pool family: pooling (+ backward), adaptive_avg_pooling2d,
 * upsampling and bilinear_resize2d (+ their backward ops), with MXNet 1.9's shape rules.
 *
 * pooling hands its kernels the resolved window geometry in mx_op_info, so ref, cpu and
 * oneDNN kernels never re-decode kernel/stride/pad/global_pool/layout:
 *   align_ndim  number of spatial dims (1..3)
 *   axis        1: channel-last data (NWC/NHWC/NDHWC), 0: channel-first
 *   extent[d]   window size of spatial dim d (global_pool: the whole dim)
 *   step[d]     stride, begin[d] the (leading and trailing) zero padding
 * Windows follow MXNet's pool.h for every convention: start = o*stride - pad, end =
 * min(start + kernel, size + pad), then clipped to the data; avg divides by the clipped-to-
 * padded-extent window (count_include_pad) or by the data cells in it. */
#include "mx_ops_gen.h"
#include "infer.h"

/* the backward ops' param structs are field-for-field the forward's (same param lists) */
_Static_assert(sizeof(struct mx_params_pooling) == sizeof(struct mx_params_pooling_backward),
               "pooling_backward params must match pooling's");
_Static_assert(sizeof(struct mx_params_bilinear_resize2d) ==
                   sizeof(struct mx_params_bilinear_resize2d_backward),
               "bilinear_resize2d_backward params must match");

static const char *const POOL_LAYOUTS[] = {"NCW", "NCHW", "NCDHW", "NWC", "NHWC", "NDHWC"};

/* The output shape of pooling data x under P; fills info's geometry. */
static int pool_shape(const mx_op_def *def, const struct mx_params_pooling *P, const mx_desc *x,
                      int64_t *os, mx_op_info *info) {
  char b[MX_SHAPE_BUF];
  int nd = x->ndim, ns = nd - 2;
  if (nd < 3 || nd > 5)
    return mx_err(MX_EINVAL, "%s: data must be 3-d (N, C, W), 4-d (N, C, H, W) or 5-d "
                  "(N, C, D, H, W), got %s", def->name, mx_shape_str(b, nd, x->shape));
  bool last = false;
  if (P->has_layout) {
    int l = P->layout;
    if (l % 3 != ns - 1)
      return mx_err(MX_EINVAL, "%s: layout %s does not fit %d-d data %s", def->name,
                    POOL_LAYOUTS[l], nd, mx_shape_str(b, nd, x->shape));
    last = l >= 3;
  }
  if (!P->global_pool) {
    if (P->kernel.n != ns)
      return mx_err(MX_EINVAL, "%s: kernel must give %d size%s for %d-d data %s (got %d; or "
                    "set global_pool)", def->name, ns, ns > 1 ? "s" : "", nd,
                    mx_shape_str(b, nd, x->shape), P->kernel.n < 0 ? 0 : P->kernel.n);
    if (P->stride.n > 0 && P->stride.n != ns)
      return mx_err(MX_EINVAL, "%s: stride has %d values, kernel %d", def->name, P->stride.n, ns);
    if (P->pad.n > 0 && P->pad.n != ns)
      return mx_err(MX_EINVAL, "%s: pad has %d values, kernel %d", def->name, P->pad.n, ns);
  }
  if (P->pool_type == MX_POOLING_POOL_TYPE_LP &&
      (!P->has_p_value || P->p_value < 1 || P->p_value > 3))
    return mx_err(MX_EINVAL, "%s: pool_type lp needs p_value 1, 2 or 3%s", def->name,
                  P->has_p_value ? "" : " (none given)");
  bool same = P->pooling_convention == MX_POOLING_POOLING_CONVENTION_SAME;
  if (same && ns != 1)
    return mx_err(MX_EINVAL, "%s: pooling_convention same supports 1-d pooling only (as "
                  "MXNet), got %d-d data", def->name, nd);
  info->align_ndim = ns;
  info->axis = last;
  os[0] = x->shape[0];
  os[last ? nd - 1 : 1] = x->shape[last ? nd - 1 : 1];
  for (int d = 0; d < ns; d++) {
    int ax = last ? 1 + d : 2 + d;
    int64_t n = x->shape[ax];
    int64_t k = P->global_pool ? n : P->kernel.v[d];
    int64_t s = P->global_pool || P->stride.n <= 0 ? 1 : P->stride.v[d];
    int64_t p = P->global_pool || P->pad.n <= 0 ? 0 : P->pad.v[d];
    if (!P->global_pool && k < 1)
      return mx_err(MX_EINVAL, "%s: kernel sizes must be >= 1, got %lld", def->name, (long long)k);
    if (s < 1)
      return mx_err(MX_EINVAL, "%s: strides must be >= 1, got %lld", def->name, (long long)s);
    if (p < 0)
      return mx_err(MX_EINVAL, "%s: pads must be >= 0, got %lld", def->name, (long long)p);
    if (same && p != 0)
      return mx_err(MX_EINVAL, "%s: pooling_convention same takes no pad (got %lld)", def->name,
                    (long long)p);
    if (P->global_pool) {
      os[ax] = n > 0 ? 1 : 0;
    } else {
      if (k > n + 2 * p)
        return mx_err(MX_EINVAL, "%s: kernel size %lld exceeds the input %lld (padded to %lld) "
                      "of data %s", def->name, (long long)k, (long long)n, (long long)(n + 2 * p),
                      mx_shape_str(b, nd, x->shape));
      if (P->pooling_convention == MX_POOLING_POOLING_CONVENTION_VALID)
        os[ax] = 1 + (n + 2 * p - k) / s;
      else if (P->pooling_convention == MX_POOLING_POOLING_CONVENTION_FULL)
        os[ax] = 1 + (n + 2 * p - k + s - 1) / s;
      else
        os[ax] = (n + s - 1) / s;
    }
    info->extent[d] = k;
    info->step[d] = s;
    info->begin[d] = p;
  }
  return MX_OK;
}

int mx_infer_pooling(const mx_op_def *def, const void *p, int nin, mx_desc *const *in, int nout,
                     mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  int64_t os[MX_MAX_DIM];
  int rc = pool_shape(def, p, in[0], os, info);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, os, in[0]->dtype);
  return MX_OK;
}

/* in[k] must have shape s (ndim n) and data's dtype */
static int want_shape(const mx_op_def *def, const char *what, const mx_desc *d, int n,
                      const int64_t *s, int dtype) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  bool ok = d->ndim == n;
  for (int i = 0; ok && i < n; i++) ok = d->shape[i] == s[i];
  if (!ok)
    return mx_err(MX_EINVAL, "%s: %s has shape %s, expected %s", def->name, what,
                  mx_shape_str(a, d->ndim, d->shape), mx_shape_str(b, n, s));
  if (d->dtype != dtype)
    return mx_err(MX_EINVAL, "%s: %s has dtype %s, data %s", def->name, what,
                  mx_dtype_name(d->dtype), mx_dtype_name(dtype));
  return MX_OK;
}

int mx_infer_pooling_backward(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                              int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const mx_desc *x = in[1];
  int64_t os[MX_MAX_DIM];
  int rc = pool_shape(def, p, x, os, info);
  if (!rc) rc = want_shape(def, "ograd", in[0], x->ndim, os, x->dtype);
  if (!rc) rc = want_shape(def, "out", in[2], x->ndim, os, x->dtype);
  if (rc) return rc;
  mx_out_set(&out[0], x->ndim, x->shape, x->dtype);
  return MX_OK;
}

/* ---- adaptive_avg_pooling2d ------------------------------------------------------- */

static int need_4d(const mx_op_def *def, const char *what, const mx_desc *x) {
  char b[MX_SHAPE_BUF];
  if (x->ndim != 4)
    return mx_err(MX_EINVAL, "%s: %s must be 4-d (N, C, H, W), got %s", def->name, what,
                  mx_shape_str(b, x->ndim, x->shape));
  return MX_OK;
}

static int adaptive_shape(const mx_op_def *def, const mx_tuple *o, const mx_desc *x,
                          int64_t *os) {
  int rc = need_4d(def, "data", x);
  if (rc) return rc;
  if (o->n > 2)
    return mx_err(MX_EINVAL, "%s: output_size takes 1 or 2 sizes, got %d", def->name, o->n);
  int64_t oh = o->n <= 0 ? 1 : o->v[0], ow = o->n <= 0 ? 1 : o->v[o->n - 1];
  if (oh < 1 || ow < 1)
    return mx_err(MX_EINVAL, "%s: output_size must be >= 1, got (%lld, %lld)", def->name,
                  (long long)oh, (long long)ow);
  os[0] = x->shape[0], os[1] = x->shape[1], os[2] = oh, os[3] = ow;
  return MX_OK;
}

int mx_infer_adaptive_avg_pooling2d(const mx_op_def *def, const void *p, int nin,
                                    mx_desc *const *in, int nout, mx_desc *out,
                                    mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  int64_t os[4];
  int rc = adaptive_shape(def, &((const struct mx_params_adaptive_avg_pooling2d *)p)->output_size,
                          in[0], os);
  if (rc) return rc;
  mx_out_set(&out[0], 4, os, in[0]->dtype);
  return MX_OK;
}

int mx_infer_adaptive_avg_pooling2d_backward(const mx_op_def *def, const void *p, int nin,
                                             mx_desc *const *in, int nout, mx_desc *out,
                                             mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  int64_t os[4];
  const struct mx_params_adaptive_avg_pooling2d_backward *P = p;
  int rc = adaptive_shape(def, &P->output_size, in[1], os);
  if (!rc) rc = want_shape(def, "ograd", in[0], 4, os, in[1]->dtype);
  if (rc) return rc;
  mx_out_set(&out[0], 4, in[1]->shape, in[1]->dtype);
  return MX_OK;
}

/* ---- upsampling ------------------------------------------------------------------- */

static int64_t bilinear_kernel(int64_t s) { return 2 * s - s % 2; }

int mx_infer_upsampling(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                        int nout, mx_desc *out, mx_op_info *info) {
  (void)nout; (void)info;
  const struct mx_params_upsampling *P = p;
  char b[MX_SHAPE_BUF];
  if (!P->has_scale || P->scale < 1)
    return mx_err(MX_EINVAL, "%s: scale must be given and >= 1%s", def->name,
                  P->has_scale ? "" : " (none given)");
  if (P->num_args != nin)
    return mx_err(MX_EINVAL, "%s: num_args=%lld but %d input%s given", def->name,
                  (long long)P->num_args, nin, nin == 1 ? "" : "s");
  const mx_desc *x = in[0];
  int rc = need_4d(def, "data", x);
  if (rc) return rc;
  int64_t s = P->scale, os[4] = {x->shape[0], x->shape[1], x->shape[2] * s, x->shape[3] * s};
  if (P->sample_type == MX_UPSAMPLING_SAMPLE_TYPE_BILINEAR) {
    if (nin != 2)
      return mx_err(MX_EINVAL, "%s: sample_type bilinear takes 2 inputs (data, weight), got %d",
                    def->name, nin);
    if (P->num_filter != 0 && P->num_filter != x->shape[1])
      return mx_err(MX_EINVAL, "%s: num_filter=%lld but data %s has %lld channels", def->name,
                    (long long)P->num_filter, mx_shape_str(b, 4, x->shape),
                    (long long)x->shape[1]);
    int64_t k = bilinear_kernel(s), ws[4] = {x->shape[1], 1, k, k};
    if ((rc = want_shape(def, "weight", in[1], 4, ws, x->dtype))) return rc;
  } else {
    for (int i = 1; i < nin; i++) {
      const mx_desc *d = in[i];
      if ((rc = need_4d(def, "every input", d))) return rc;
      if (d->dtype != x->dtype)
        return mx_err(MX_EINVAL, "%s: input %d has dtype %s, input 1 %s", def->name, i + 1,
                      mx_dtype_name(d->dtype), mx_dtype_name(x->dtype));
      bool sum = P->multi_input_mode == MX_UPSAMPLING_MULTI_INPUT_MODE_SUM;
      if (d->shape[0] != x->shape[0] || (sum && d->shape[1] != x->shape[1]) ||
          d->shape[2] == 0 || d->shape[3] == 0 || os[2] % d->shape[2] || os[3] % d->shape[3])
        return mx_err(MX_EINVAL, "%s: input %d %s cannot be upsampled to (%lld, %lld)%s",
                      def->name, i + 1, mx_shape_str(b, 4, d->shape), (long long)os[2],
                      (long long)os[3], sum ? " with input 1's channels (sum mode)" : "");
      if (os[2] / d->shape[2] != os[3] / d->shape[3])
        return mx_err(MX_EINVAL, "%s: input %d %s needs different height and width factors to "
                      "reach (%lld, %lld)", def->name, i + 1, mx_shape_str(b, 4, d->shape),
                      (long long)os[2], (long long)os[3]);
      if (!sum) os[1] += d->shape[1];
    }
  }
  mx_out_set(&out[0], 4, os, x->dtype);
  return MX_OK;
}

int mx_infer_upsampling_backward(const mx_op_def *def, const void *p, int nin,
                                 mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_upsampling_backward *P = p;
  const mx_desc *x = in[1];
  int rc = need_4d(def, "data", x);
  if (rc) return rc;
  if (P->scale < 1)
    return mx_err(MX_EINVAL, "%s: scale must be >= 1, got %lld", def->name, (long long)P->scale);
  int64_t s = P->scale, k = bilinear_kernel(s);
  int64_t os[4] = {x->shape[0], x->shape[1], x->shape[2] * s, x->shape[3] * s};
  int64_t ws[4] = {x->shape[1], 1, k, k};
  if ((rc = want_shape(def, "ograd", in[0], 4, os, x->dtype)) ||
      (rc = want_shape(def, "weight", in[2], 4, ws, x->dtype)))
    return rc;
  mx_out_set(&out[0], 4, x->shape, x->dtype);
  mx_out_set(&out[1], 4, ws, x->dtype);
  return MX_OK;
}

/* ---- bilinear_resize2d -------------------------------------------------------------- */

/* n resized by mode m's rule for one dim (odd_scale: f the factor) */
static int64_t resize_dim(int m, int64_t n, double f) {
  switch (m) {
  case MX_BILINEAR_RESIZE2D_MODE_ODD_SCALE:
    return n % 2 == 0 ? (int64_t)(n * f) : (int64_t)((n - 1) * f) + 1;
  case MX_BILINEAR_RESIZE2D_MODE_TO_EVEN_DOWN: return n % 2 == 0 ? n : n - 1;
  case MX_BILINEAR_RESIZE2D_MODE_TO_EVEN_UP: return n % 2 == 0 ? n : n + 1;
  case MX_BILINEAR_RESIZE2D_MODE_TO_ODD_DOWN: return n % 2 == 1 ? n : n - 1;
  default: return n % 2 == 1 ? n : n + 1; /* to_odd_up */
  }
}

int mx_infer_bilinear_resize2d(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
                               int nout, mx_desc *out, mx_op_info *info) {
  (void)nout; (void)info;
  const struct mx_params_bilinear_resize2d *P = p;
  const mx_desc *x = in[0];
  char b[MX_SHAPE_BUF];
  int rc = need_4d(def, "data", x);
  if (rc) return rc;
  if (nin > 2)
    return mx_err(MX_EINVAL, "%s: takes data and (mode like) one more input, got %d inputs",
                  def->name, nin);
  bool like = P->mode == MX_BILINEAR_RESIZE2D_MODE_LIKE;
  if (like != (nin == 2))
    return mx_err(MX_EINVAL, "%s: %s", def->name, like ? "mode like needs a second input (like)"
                  : "a second input (like) is taken only with mode like");
  int64_t oh, ow, h = x->shape[2], w = x->shape[3];
  if (like) {
    if ((rc = need_4d(def, "like", in[1]))) return rc;
    oh = in[1]->shape[2], ow = in[1]->shape[3];
  } else if (P->mode == MX_BILINEAR_RESIZE2D_MODE_SIZE) {
    if ((P->has_scale_height && !(P->scale_height > 0)) ||
        (P->has_scale_width && !(P->scale_width > 0)))
      return mx_err(MX_EINVAL, "%s: scale_height and scale_width must be > 0", def->name);
    oh = P->has_scale_height ? (int64_t)(P->scale_height * (double)h) : P->height;
    ow = P->has_scale_width ? (int64_t)(P->scale_width * (double)w) : P->width;
  } else if (P->mode == MX_BILINEAR_RESIZE2D_MODE_ODD_SCALE) {
    if (!P->has_scale_height || !P->has_scale_width || !(P->scale_height > 0) ||
        !(P->scale_width > 0))
      return mx_err(MX_EINVAL, "%s: mode odd_scale needs scale_height and scale_width > 0",
                    def->name);
    oh = resize_dim(P->mode, h, P->scale_height);
    ow = resize_dim(P->mode, w, P->scale_width);
  } else {
    oh = resize_dim(P->mode, h, 1);
    ow = resize_dim(P->mode, w, 1);
  }
  if (oh < 1 || ow < 1 || h < 1 || w < 1)
    return mx_err(MX_EINVAL, "%s: cannot resize data %s to (%lld, %lld)", def->name,
                  mx_shape_str(b, 4, x->shape), (long long)oh, (long long)ow);
  int64_t os[4] = {x->shape[0], x->shape[1], oh, ow};
  mx_out_set(&out[0], 4, os, x->dtype);
  return MX_OK;
}

int mx_infer_bilinear_resize2d_backward(const mx_op_def *def, const void *p, int nin,
                                        mx_desc *const *in, int nout, mx_desc *out,
                                        mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  const mx_desc *g = in[0], *x = in[1];
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  int rc = need_4d(def, "data", x);
  if (!rc) rc = need_4d(def, "ograd", g);
  if (rc) return rc;
  if (g->shape[0] != x->shape[0] || g->shape[1] != x->shape[1] || g->dtype != x->dtype ||
      x->shape[2] < 1 || x->shape[3] < 1)
    return mx_err(MX_EINVAL, "%s: ograd %s %s does not fit data %s %s", def->name,
                  mx_shape_str(a, 4, g->shape), mx_dtype_name(g->dtype),
                  mx_shape_str(b, 4, x->shape), mx_dtype_name(x->dtype));
  mx_out_set(&out[0], 4, x->shape, x->dtype);
  return MX_OK;
}
