/* kernels/ref/nn.c — reference kernels for the nn op family.
 *
 * dropout: in[0] data (any shape, float) -> out[0] (data's shape): data * mask, and
 *   out[1] mask (data's shape with the `axes` dims set to 1, broadcast over them):
 *   1/(1-p) where kept, 0 where dropped. Element i of the mask keeps iff
 *   unit(bits(seed, first + i)) >= p, with seed/first reserved when the op was
 *   dispatched (the kernel context's rng_seed, rng_first; counter-based: the same seed gives the same mask
 *   for any thread count or engine order, ref or cpu). Outside
 *   training (training=false and mode "training") or with p == 0 the op is the
 *   identity and the mask is all ones; no random numbers are drawn then.
 * activation: in[0] -> out[0] same shape: act_type relu | sigmoid | tanh | softrelu
 *   (log(1+e^x)) | softsign (x/(1+|x|)). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>

int mx_ref_dropout(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  const struct mx_params_dropout *p = params;
  (void)nin; (void)nout;
  const mx_tensor *x = in[0], *y = out[0], *m = out[1];
  bool active = (p->training || p->mode == MX_DROPOUT_MODE_ALWAYS) && p->p > 0;
  if (!active) {
    for (int64_t i = 0; i < m->size; i++) mx_store_f64(mx_ptr(m), m->dtype, i, 1.0);
    for (int64_t i = 0; i < y->size; i++)
      mx_store_f64(mx_ptr(y), y->dtype, i, mx_load_f64(mx_ptr(x), x->dtype, i));
    return MX_OK;
  }
  /* counters reserved at dispatch (its inference counts them), in program order */
  uint64_t seed = ctx->rng_seed, first = ctx->rng_first;
  double scale = p->p >= 1 ? 0.0 : 1.0 / (1.0 - p->p);
  for (int64_t i = 0; i < m->size; i++) {
    double u = mx_random_unit(mx_random_bits(seed, first + (uint64_t)i));
    mx_store_f64(mx_ptr(m), m->dtype, i, u >= p->p ? scale : 0.0);
  }
  for (int64_t i = 0; i < y->size; i++) {
    int64_t j = mx_ref_bcast_offset(i, y->ndim, y->shape, m->ndim, m->shape);
    double v = mx_load_f64(mx_ptr(x), x->dtype, i) * mx_load_f64(mx_ptr(m), m->dtype, j);
    mx_store_f64(mx_ptr(y), y->dtype, i, v);
  }
  return MX_OK;
}

static double act(int type, double x) {
  switch (type) {
  case MX_ACTIVATION_ACT_TYPE_RELU: return x > 0 ? x : 0;
  case MX_ACTIVATION_ACT_TYPE_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case MX_ACTIVATION_ACT_TYPE_TANH: return tanh(x);
  case MX_ACTIVATION_ACT_TYPE_SOFTRELU: /* stable softplus */
    return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
  default: return x / (1.0 + fabs(x)); /* MX_ACTIVATION_ACT_TYPE_SOFTSIGN */
  }
}

int mx_ref_activation(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  const struct mx_params_activation *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < out[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i,
                 act(p->act_type, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i)));
  return MX_OK;
}

/* ---- activations: leaky_relu (MXNet's LeakyReLU) and the elementwise
 * activations, each with its backward. Plain double loops over any float dtype.
 *
 * leaky_relu: in[0] data, in[1] gamma (prelu: (1) or (C), C = data's dim 1) -> out[0]:
 *   leaky x > 0 ? x : slope*x; prelu the same with gamma[c]; elu x > 0 ? x : slope*(e^x-1);
 *   selu lambda*(x > 0 ? x : alpha*(e^x-1)); gelu x*Phi(x) (erf); rrelu x > 0 ? x : s*x with
 *   s = lower + (upper-lower)*unit(bits(seed, first + i)) in train mode, (lower+upper)/2
 *   otherwise; out[1] mask: s per element (rrelu in train mode), else (1) holding the
 *   negative slope (leaky: slope, rrelu: the mean, 0 otherwise).
 * leaky_relu_backward: in ograd, data, mask, gamma? -> out[0] ddata, out[1] dgamma (prelu:
 *   sum of ograd*min(x,0) per channel; zeros otherwise). rrelu's slope is the mask's.
 * <act>(data) and <act>_backward(ograd, data) -> ograd * act'(data); NaN data gives NaN. */
#define SELU_LAMBDA 1.0507009873554804934193349852946
#define SELU_ALPHA 1.6732632423543772848170429916717
#define SQRT1_2 0.70710678118654752440
#define INV_SQRT_2PI 0.39894228040143267794
#define SQRT_2_PI 0.79788456080286535588

static double gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x * SQRT1_2)); }
static double gelu_erf_d(double x) {
  return 0.5 * (1.0 + erf(x * SQRT1_2)) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}

static int64_t chan_inner(const mx_tensor *x) {
  int64_t inner = 1;
  for (int d = 2; d < x->ndim; d++) inner *= x->shape[d];
  return inner;
}

int mx_ref_leaky_relu(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  const struct mx_params_leaky_relu *p = params;
  (void)nout;
  const mx_tensor *x = in[0], *y = out[0], *m = out[1];
  const mx_tensor *g = nin > 1 ? in[1] : NULL;
  int64_t inner = chan_inner(x), C = g ? g->size : 1;
  double mid = 0.5 * (p->lower_bound + p->upper_bound);
  bool draw = p->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU && p->training;
  if (!draw)
    mx_store_f64(mx_ptr(m), m->dtype, 0, p->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU ? mid
                                         : p->act_type == MX_LEAKY_RELU_ACT_TYPE_LEAKY ? p->slope
                                         : 0.0);
  for (int64_t i = 0; i < y->size; i++) {
    double v = mx_load_f64(mx_ptr(x), x->dtype, i), r;
    switch (p->act_type) {
    case MX_LEAKY_RELU_ACT_TYPE_PRELU: {
      int64_t c = C == 1 ? 0 : (i / inner) % C;
      r = v > 0 ? v : mx_load_f64(mx_ptr(g), g->dtype, c) * v;
      break;
    }
    case MX_LEAKY_RELU_ACT_TYPE_ELU: r = v > 0 ? v : p->slope * expm1(v); break;
    case MX_LEAKY_RELU_ACT_TYPE_SELU: r = SELU_LAMBDA * (v > 0 ? v : SELU_ALPHA * expm1(v)); break;
    case MX_LEAKY_RELU_ACT_TYPE_GELU: r = gelu_erf(v); break;
    case MX_LEAKY_RELU_ACT_TYPE_RRELU: {
      double s = mid;
      if (draw) { /* counters reserved at dispatch, in program order */
        s = p->lower_bound + (p->upper_bound - p->lower_bound) *
            mx_random_unit(mx_random_bits(ctx->rng_seed, ctx->rng_first + (uint64_t)i));
        mx_store_f64(mx_ptr(m), m->dtype, i, s);
      }
      r = v > 0 ? v : s * v;
      break;
    }
    default: r = v > 0 ? v : p->slope * v;
    }
    mx_store_f64(mx_ptr(y), y->dtype, i, r);
  }
  return MX_OK;
}

int mx_ref_leaky_relu_backward(const mx_kctx *ctx, const void *params, int nin,
                               mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_leaky_relu_backward *p = params;
  (void)ctx; (void)nout;
  const mx_tensor *og = in[0], *x = in[1], *m = in[2], *dx = out[0], *dg = out[1];
  bool per_elem = m->size == x->size;
  const mx_tensor *g = nin > 3 ? in[3] : NULL;
  int64_t inner = chan_inner(x), C = g ? g->size : 1;
  for (int64_t c = 0; c < dg->size; c++) mx_store_f64(mx_ptr(dg), dg->dtype, c, 0.0);
  for (int64_t i = 0; i < x->size; i++) {
    double v = mx_load_f64(mx_ptr(x), x->dtype, i), o = mx_load_f64(mx_ptr(og), og->dtype, i), d;
    switch (p->act_type) {
    case MX_LEAKY_RELU_ACT_TYPE_PRELU: {
      int64_t c = C == 1 ? 0 : (i / inner) % C;
      d = v > 0 ? 1.0 : mx_load_f64(mx_ptr(g), g->dtype, c);
      double acc = mx_load_f64(mx_ptr(dg), dg->dtype, c) + (v > 0 ? 0.0 : o * v);
      mx_store_f64(mx_ptr(dg), dg->dtype, c, acc);
      break;
    }
    case MX_LEAKY_RELU_ACT_TYPE_ELU: d = v > 0 ? 1.0 : p->slope * exp(v); break;
    case MX_LEAKY_RELU_ACT_TYPE_SELU: d = SELU_LAMBDA * (v > 0 ? 1.0 : SELU_ALPHA * exp(v)); break;
    case MX_LEAKY_RELU_ACT_TYPE_GELU: d = gelu_erf_d(v); break;
    case MX_LEAKY_RELU_ACT_TYPE_RRELU:
      d = v > 0 ? 1.0 : mx_load_f64(mx_ptr(m), m->dtype, per_elem ? i : 0);
      break;
    default: d = v > 0 ? 1.0 : p->slope;
    }
    if (isnan(v)) d = v;
    mx_store_f64(mx_ptr(dx), dx->dtype, i, o * d);
  }
  return MX_OK;
}

enum { A_HSIG, A_SILU, A_HSWISH, A_GELU_ERF, A_GELU_TANH, A_LOGSIG, A_MISH };

static double softplus(double x) { return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)); }

static double act_f(int k, const double *a, double x) {
  switch (k) {
  case A_HSIG: { double v = a[0] * x + a[1]; return v < 0 ? 0.0 : v > 1 ? 1.0 : v; }
  case A_SILU: return x / (1.0 + exp(-a[0] * x));
  case A_HSWISH: { double r = x + 3; r = r < 0 ? 0.0 : r > 6 ? 6.0 : r; return x * r / 6.0; }
  case A_GELU_ERF: return gelu_erf(x);
  case A_GELU_TANH: return 0.5 * x * (1.0 + tanh(SQRT_2_PI * (x + 0.044715 * x * x * x)));
  case A_LOGSIG: return (x < 0 ? x : 0.0) - log1p(exp(-fabs(x)));
  default: return x * tanh(softplus(x)); /* A_MISH */
  }
}

static double act_d(int k, const double *a, double x) {
  switch (k) {
  case A_HSIG: { double v = a[0] * x + a[1]; return v > 0 && v < 1 ? a[0] : 0.0; }
  case A_SILU: { /* an infinite beta*x: the limit (t*s*(1-s) would be inf*0) */
    double t = a[0] * x, s = 1.0 / (1.0 + exp(-t));
    return isinf(t) ? (t > 0 ? 1.0 : 0.0) : s + t * s * (1 - s);
  }
  case A_HSWISH: return x < -3 ? 0.0 : x > 3 ? 1.0 : (2 * x + 3) / 6.0;
  case A_GELU_ERF: return gelu_erf_d(x);
  case A_GELU_TANH: {
    double t = tanh(SQRT_2_PI * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * SQRT_2_PI * (1 + 3 * 0.044715 * x * x);
  }
  case A_LOGSIG: return 1.0 / (1.0 + exp(x));
  default: { /* A_MISH */
    double t = tanh(softplus(x));
    return t + x * (1 - t * t) / (1.0 + exp(-x));
  }
  }
}

static int act_fw(int k, const double *a, mx_tensor *const *in, mx_tensor *const *out) {
  for (int64_t i = 0; i < out[0]->size; i++)
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i,
                 act_f(k, a, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i)));
  return MX_OK;
}

static int act_bw(int k, const double *a, mx_tensor *const *in, mx_tensor *const *out) {
  for (int64_t i = 0; i < out[0]->size; i++) {
    double x = mx_load_f64(mx_ptr(in[1]), in[1]->dtype, i);
    double d = isnan(x) ? x : act_d(k, a, x);
    mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, mx_load_f64(mx_ptr(in[0]), in[0]->dtype, i) * d);
  }
  return MX_OK;
}

#define ACT_KERNELS(name, KIND, A0, A1)                                                          \
  int mx_ref_##name(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,       \
                    int nout, mx_tensor *const *out) {                                           \
    (void)ctx; (void)nin; (void)nout; (void)params;                                              \
    double a[2] = {A0, A1};                                                                      \
    return act_fw(KIND, a, in, out);                                                             \
  }                                                                                              \
  int mx_ref_##name##_backward(const mx_kctx *ctx, const void *params, int nin,                  \
                               mx_tensor *const *in, int nout, mx_tensor *const *out) {          \
    (void)ctx; (void)nin; (void)nout; (void)params;                                              \
    double a[2] = {A0, A1};                                                                      \
    return act_bw(KIND, a, in, out);                                                             \
  }
/* <act>_backward's param struct has the forward's fields in the same order (the op table
 * gives both the same params), so both read them through the forward's struct. */
#define P_(name, f) (((const struct mx_params_##name *)params)->f)
ACT_KERNELS(hard_sigmoid, A_HSIG, P_(hard_sigmoid, alpha), P_(hard_sigmoid, beta))
ACT_KERNELS(silu, A_SILU, P_(silu, beta), 0)
ACT_KERNELS(hard_swish, A_HSWISH, 0, 0)
ACT_KERNELS(gelu, P_(gelu, approximation) == MX_GELU_APPROXIMATION_TANH ? A_GELU_TANH : A_GELU_ERF,
            0, 0)
ACT_KERNELS(log_sigmoid, A_LOGSIG, 0, 0)
ACT_KERNELS(mish, A_MISH, 0, 0)
