/* quantize.c — inference of the quantize family (core/ops/quantize.lua): the quantized
 * layers' shapes are their float ops' (their params start with the float op's params, so
 * the float op's inference reads them), their dtypes follow the ranges and out_type. */
#include "infer.h"
#include "mx_ops_gen.h"
#include "conv.h"

#include <stddef.h>

_Static_assert(offsetof(struct mx_params_quantized_conv, act_type) ==
               offsetof(struct mx_params_convolution, act_type),
               "quantized_conv's params must start with convolution's");
_Static_assert(offsetof(struct mx_params_quantized_fully_connected, act_type) ==
               offsetof(struct mx_params_fully_connected, act_type),
               "quantized_fully_connected's params must start with fully_connected's");
_Static_assert(offsetof(struct mx_params_quantized_pooling, layout) ==
               offsetof(struct mx_params_pooling, layout),
               "quantized_pooling's params must start with pooling's");

int mx_infer_convolution(const mx_op_def *, const void *, int, mx_desc *const *, int, mx_desc *,
                         mx_op_info *);
int mx_infer_fully_connected(const mx_op_def *, const void *, int, mx_desc *const *, int,
                             mx_desc *, mx_op_info *);
int mx_infer_pooling(const mx_op_def *, const void *, int, mx_desc *const *, int, mx_desc *,
                     mx_op_info *);

static const int64_t one[1] = {1};

static void set_ranges(mx_desc *out) {
  mx_out_set(&out[1], 1, one, MX_F32);
  mx_out_set(&out[2], 1, one, MX_F32);
}

static bool is_q8(int dt) { return dt == MX_I8 || dt == MX_U8; }

static int check_range(const mx_op_def *def, const char *what, const mx_desc *r) {
  if (r->dtype != MX_F32 || r->ndim != 1 || r->shape[0] != 1)
    return mx_err(MX_EINVAL, "%s: %s must be a float32 tensor of shape (1)", def->name, what);
  return MX_OK;
}

static int check_q8(const mx_op_def *def, const char *what, const mx_desc *d) {
  if (!is_q8(d->dtype))
    return mx_err(MX_EINVAL, "%s: %s must be int8 or uint8, got %s", def->name, what,
                  mx_dtype_name(d->dtype));
  return MX_OK;
}

static int calib_given(const mx_op_def *def, bool hmin, double mn, bool hmax, double mx) {
  if (hmin != hmax)
    return mx_err(MX_EINVAL, "%s: min_calib_range and max_calib_range go together", def->name);
  if (hmin && !(mn <= mx))
    return mx_err(MX_EINVAL, "%s: min_calib_range %g is above max_calib_range %g", def->name,
                  mn, mx);
  return MX_OK;
}

/* int8/uint8/auto (quantize_v2, requantize): auto is uint8 for a non-negative calibrated range */
static int q_dtype(int out_type, bool calib, double mn) {
  if (out_type == 1) return MX_U8;
  if (out_type == 2) return calib && mn >= 0 ? MX_U8 : MX_I8;
  return MX_I8;
}

/* auto/int8/uint8/float32 (the layers): a quantized output needs a calibrated range */
static int layer_dtype(const mx_op_def *def, int out_type, bool calib, double mn, int *dt) {
  if (out_type == 3 || (out_type == 0 && !calib)) *dt = MX_F32;
  else if (!calib)
    return mx_err(MX_EINVAL, "%s: out_type %s needs min_calib_range and max_calib_range",
                  def->name, out_type == 1 ? "int8" : "uint8");
  else if (out_type == 1) *dt = MX_I8;
  else if (out_type == 2) *dt = MX_U8;
  else *dt = mn >= 0 ? MX_U8 : MX_I8;
  return MX_OK;
}

int mx_infer_quantize_v2(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_quantize_v2 *P = p;
  int rc = calib_given(def, P->has_min_calib_range, P->min_calib_range, P->has_max_calib_range,
                       P->max_calib_range);
  if (rc) return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape,
             q_dtype(P->out_type, P->has_min_calib_range, P->min_calib_range));
  set_ranges(out);
  return MX_OK;
}

int mx_infer_dequantize(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int rc;
  if (!is_q8(in[0]->dtype) && in[0]->dtype != MX_I32)
    return mx_err(MX_EINVAL, "%s: data must be int8, uint8 or int32, got %s", def->name,
                  mx_dtype_name(in[0]->dtype));
  if ((rc = check_range(def, "min_range", in[1])) || (rc = check_range(def, "max_range", in[2])))
    return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, MX_F32);
  return MX_OK;
}

int mx_infer_requantize(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_requantize *P = p;
  int rc = calib_given(def, P->has_min_calib_range, P->min_calib_range, P->has_max_calib_range,
                       P->max_calib_range);
  if (rc) return rc;
  if (in[0]->dtype != MX_I32)
    return mx_err(MX_EINVAL, "%s: data must be int32, got %s", def->name,
                  mx_dtype_name(in[0]->dtype));
  if ((rc = check_range(def, "min_range", in[1])) || (rc = check_range(def, "max_range", in[2])))
    return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape,
             q_dtype(P->out_type, P->has_min_calib_range, P->min_calib_range));
  set_ranges(out);
  return MX_OK;
}

/* data, min_data, max_data, weight (int8), wscale (F float32) */
static int layer_inputs(const mx_op_def *def, mx_desc *const *in, int64_t F) {
  int rc;
  if ((rc = check_q8(def, "data", in[0])) || (rc = check_range(def, "min_data", in[1])) ||
      (rc = check_range(def, "max_data", in[2])))
    return rc;
  if (in[3]->dtype != MX_I8)
    return mx_err(MX_EINVAL, "%s: weight must be int8, got %s", def->name,
                  mx_dtype_name(in[3]->dtype));
  if (in[4]->dtype != MX_F32 || in[4]->ndim != 1 || in[4]->shape[0] != F)
    return mx_err(MX_EINVAL, "%s: wscale must be float32 of shape (%lld)", def->name, (long long)F);
  return MX_OK;
}

static void as_f32(mx_desc *dst, const mx_desc *src) {
  *dst = *src;
  dst->dtype = MX_F32;
}

/* The output may take over the residual (sum, after the optional bias) when the call has
 * one: the sum post-op then adds it where it lies, no copy into the output first. */
int mx_inplace_quantized_conv(const void *p, int nin, int k) {
  const struct mx_params_quantized_conv *P = p;
  int s = P->no_bias ? 5 : 6;
  return k == 0 && P->with_sum && nin == s + 3 ? s : -1;
}

int mx_infer_quantized_conv(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_quantized_conv *P = p;
  int want = 5 + (P->no_bias ? 0 : 1) + (P->with_sum ? 3 : 0);
  if (nin != want)
    return mx_err(MX_EINVAL, "%s: takes %d inputs with no_bias=%s, with_sum=%s, got %d",
                  def->name, want, P->no_bias ? "true" : "false", P->with_sum ? "true" : "false", nin);
  int rc = calib_given(def, P->has_min_calib_range, P->min_calib_range, P->has_max_calib_range,
                       P->max_calib_range);
  if (rc || (rc = layer_inputs(def, in, in[3]->ndim >= 1 ? in[3]->shape[0] : -1))) return rc;
  mx_desc d, w, b, *cin[3] = {&d, &w, &b};
  as_f32(&d, in[0]);
  as_f32(&w, in[3]);
  if (!P->no_bias) {
    if (in[5]->dtype != MX_F32)
      return mx_err(MX_EINVAL, "%s: bias must be float32", def->name);
    b = *in[5];
  }
  if ((rc = mx_infer_convolution(def, p, P->no_bias ? 2 : 3, cin, nout, out, info))) return rc;
  int dt = MX_F32;
  if ((rc = layer_dtype(def, P->out_type, P->has_min_calib_range, P->min_calib_range, &dt)))
    return rc;
  out[0].dtype = dt;
  if (P->with_sum) {
    int s = P->no_bias ? 5 : 6;
    bool same = in[s]->ndim == out[0].ndim;
    for (int i = 0; same && i < out[0].ndim; i++) same = in[s]->shape[i] == out[0].shape[i];
    if (!same || (dt != MX_F32 && !is_q8(in[s]->dtype)) || (dt == MX_F32 && in[s]->dtype != MX_F32 &&
                                                            !is_q8(in[s]->dtype)))
      return mx_err(MX_EINVAL, "%s: sum must have the output's shape and be int8, uint8 or "
                    "float32", def->name);
    if ((rc = check_range(def, "min_sum", in[s + 1])) || (rc = check_range(def, "max_sum", in[s + 2])))
      return rc;
  }
  set_ranges(out);
  return MX_OK;
}

int mx_infer_quantized_fully_connected(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  const struct mx_params_quantized_fully_connected *P = p;
  int want = P->no_bias ? 5 : 6;
  if (nin != want)
    return mx_err(MX_EINVAL, "%s: takes %d inputs with no_bias=%s, got %d", def->name, want,
                  P->no_bias ? "true" : "false", nin);
  int rc = calib_given(def, P->has_min_calib_range, P->min_calib_range, P->has_max_calib_range,
                       P->max_calib_range);
  if (rc || (rc = layer_inputs(def, in, in[3]->ndim >= 1 ? in[3]->shape[0] : -1))) return rc;
  mx_desc d, w, b, *cin[3] = {&d, &w, &b};
  as_f32(&d, in[0]);
  as_f32(&w, in[3]);
  if (!P->no_bias) {
    if (in[5]->dtype != MX_F32) return mx_err(MX_EINVAL, "%s: bias must be float32", def->name);
    b = *in[5];
  }
  if ((rc = mx_infer_fully_connected(def, p, P->no_bias ? 2 : 3, cin, 1, out, info))) return rc;
  int dt = MX_F32;
  if ((rc = layer_dtype(def, P->out_type, P->has_min_calib_range, P->min_calib_range, &dt)))
    return rc;
  out[0].dtype = dt;
  set_ranges(out);
  return MX_OK;
}

int mx_infer_quantized_pooling(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout;
  const struct mx_params_quantized_pooling *P = p;
  int rc;
  if ((rc = check_q8(def, "data", in[0])) || (rc = check_range(def, "min_data", in[1])) ||
      (rc = check_range(def, "max_data", in[2])))
    return rc;
  if (P->pool_type != MX_QUANTIZED_POOLING_POOL_TYPE_MAX &&
      P->pool_type != MX_QUANTIZED_POOLING_POOL_TYPE_AVG)
    return mx_err(MX_EINVAL, "%s: pool_type must be max or avg", def->name);
  mx_desc d, *cin[1] = {&d};
  as_f32(&d, in[0]);
  if ((rc = mx_infer_pooling(def, p, 1, cin, 1, out, info))) return rc;
  out[0].dtype = in[0]->dtype;
  set_ranges(out);
  return MX_OK;
}

/* quantized_act: same shape and dtype, the range passes */
int mx_infer_quantized_pass(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)p; (void)nin; (void)nout; (void)info;
  int rc;
  if ((rc = check_q8(def, "data", in[0])) || (rc = check_range(def, "min_data", in[1])) ||
      (rc = check_range(def, "max_data", in[2])))
    return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, in[0]->dtype);
  set_ranges(out);
  return MX_OK;
}

int mx_infer_quantized_flatten(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  int rc = mx_infer_quantized_pass(def, p, nin, in, nout, out, info);
  if (rc) return rc;
  if (in[0]->ndim < 1) return mx_err(MX_EINVAL, "%s: data must have at least 1 dim", def->name);
  int64_t s[2] = {in[0]->shape[0], 1};
  for (int i = 1; i < in[0]->ndim; i++) s[1] *= in[0]->shape[i];
  mx_out_set(&out[0], 2, s, in[0]->dtype);
  return MX_OK;
}

int mx_infer_quantized_elemwise_add(const mx_op_def *def, const void *p, int nin,
    mx_desc *const *in, int nout, mx_desc *out, mx_op_info *info) {
  (void)nin; (void)nout; (void)info;
  const struct mx_params_quantized_elemwise_add *P = p;
  int rc = calib_given(def, P->has_min_calib_range, P->min_calib_range, P->has_max_calib_range,
                       P->max_calib_range);
  if (rc || (rc = check_q8(def, "lhs", in[0])) || (rc = check_q8(def, "rhs", in[1]))) return rc;
  bool same = in[0]->ndim == in[1]->ndim;
  for (int i = 0; same && i < in[0]->ndim; i++) same = in[0]->shape[i] == in[1]->shape[i];
  if (!same) return mx_err(MX_EINVAL, "%s: lhs and rhs must have one shape", def->name);
  static const char *names[4] = {"lhs_min", "lhs_max", "rhs_min", "rhs_max"};
  for (int i = 0; i < 4; i++)
    if ((rc = check_range(def, names[i], in[2 + i]))) return rc;
  int dt = MX_F32;
  if ((rc = layer_dtype(def, P->out_type, P->has_min_calib_range, P->min_calib_range, &dt)))
    return rc;
  mx_out_set(&out[0], in[0]->ndim, in[0]->shape, dt);
  set_ranges(out);
  return MX_OK;
}

int mx_infer_quantized_concat(const mx_op_def *def, const void *p, int nin, mx_desc *const *in,
    int nout, mx_desc *out, mx_op_info *info) {
  (void)nout;
  const struct mx_params_quantized_concat *P = p;
  if (!P->has_num_args || P->num_args < 1 || nin != 3 * P->num_args)
    return mx_err(MX_EINVAL, "%s: takes num_args data inputs and a min and max for each "
                  "(3 * num_args inputs), got %d", def->name, nin);
  int n = (int)P->num_args, rc, a;
  if (in[0]->ndim == 0) return mx_err(MX_EINVAL, "%s: cannot concatenate 0-d tensors", def->name);
  if ((rc = mx_norm_axis(def->name, "dim", P->dim, in[0]->ndim, &a))) return rc;
  int64_t s[MX_MAX_DIM];
  bool any_i8 = false;
  for (int d = 0; d < in[0]->ndim; d++) s[d] = in[0]->shape[d];
  s[a] = 0;
  for (int i = 0; i < n; i++) {
    if ((rc = check_q8(def, "data", in[i])) || (rc = check_range(def, "min", in[n + 2 * i])) ||
        (rc = check_range(def, "max", in[n + 2 * i + 1])))
      return rc;
    bool ok = in[i]->ndim == in[0]->ndim;
    for (int d = 0; ok && d < in[0]->ndim; d++) ok = d == a || in[i]->shape[d] == in[0]->shape[d];
    if (!ok) return mx_err(MX_EINVAL, "%s: input %d's shape does not match input 1's but along "
                           "dim %d", def->name, i + 1, a + 1);
    s[a] += in[i]->shape[a];
    any_i8 |= in[i]->dtype == MX_I8;
  }
  mx_out_set(&out[0], in[0]->ndim, s, any_i8 ? MX_I8 : MX_U8);
  set_ranges(out);
  info->axis = a;
  return MX_OK;
}
