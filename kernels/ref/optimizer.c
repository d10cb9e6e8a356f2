/* kernels/ref/optimizer.c — reference fused optimizer updates (MXNet's *_update ops).
 * Every op: inputs (weight, grad, states...) of one shape and float dtype, outputs
 * (weight, states...) of the same shape; out slots may alias the inputs (in-place
 * update: each element is read before it is written). Computed in double.
 * clip(x) = max(-c, min(c, x)) when clip_gradient >= 0, else x. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <math.h>

static double clipv(double x, double c) {
  if (c < 0) return x;
  return x > c ? c : x < -c ? -c : x;
}

#define LD(t, i) mx_load_f64(mx_ptr(t), (t)->dtype, i)
#define ST(t, i, v) mx_store_f64(mx_ptr(t), (t)->dtype, i, v)

/* sgd_update: w = w - lr * (clip(rescale*g) + wd*w) */
int mx_ref_sgd_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                      mx_tensor *const *out) {
  const struct mx_params_sgd_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    ST(out[0], i, w - p->lr * (g + p->wd * w));
  }
  return MX_OK;
}

/* sgd_mom_update: mom = momentum*mom - lr*(clip(rescale*g) + wd*w); w = w + mom */
int mx_ref_sgd_mom_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  const struct mx_params_sgd_mom_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    double m = p->momentum * LD(in[2], i) - p->lr * (g + p->wd * w);
    ST(out[1], i, m);
    ST(out[0], i, w + m);
  }
  return MX_OK;
}

/* nag_mom_update: g' = clip(rescale*g) + wd*w; mom = momentum*mom - lr*g';
 * w = w + momentum*mom - lr*g' */
int mx_ref_nag_mom_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  const struct mx_params_nag_mom_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient) + p->wd * w;
    double m = p->momentum * LD(in[2], i) - p->lr * g;
    ST(out[1], i, m);
    ST(out[0], i, w + p->momentum * m - p->lr * g);
  }
  return MX_OK;
}

/* adam_update (lr already bias-corrected by the caller):
 * g' = clip(rescale*g + wd*w); m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'^2;
 * w = w - lr * m / (sqrt(v) + epsilon) */
int mx_ref_adam_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                       mx_tensor *const *out) {
  const struct mx_params_adam_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i) + p->wd * w, p->clip_gradient);
    double m = p->beta1 * LD(in[2], i) + (1 - p->beta1) * g;
    double v = p->beta2 * LD(in[3], i) + (1 - p->beta2) * g * g;
    ST(out[1], i, m);
    ST(out[2], i, v);
    ST(out[0], i, w - p->lr * m / (sqrt(v) + p->epsilon));
  }
  return MX_OK;
}

/* adamw_update (decoupled weight decay): g' = clip(rescale*g); m, v as adam;
 * w = w - eta * (lr * m / (sqrt(v) + epsilon) + wd*w) */
int mx_ref_adamw_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                        mx_tensor *const *out) {
  const struct mx_params_adamw_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    double m = p->beta1 * LD(in[2], i) + (1 - p->beta1) * g;
    double v = p->beta2 * LD(in[3], i) + (1 - p->beta2) * g * g;
    ST(out[1], i, m);
    ST(out[2], i, v);
    ST(out[0], i, w - p->eta * (p->lr * m / (sqrt(v) + p->epsilon) + p->wd * w));
  }
  return MX_OK;
}

/* rmsprop_update (Tieleman & Hinton): g' = clip(rescale*g + wd*w);
 * n = rho*n + (1-rho)*g'^2; w = w - lr * g' / sqrt(n + epsilon); clip_weights */
int mx_ref_rmsprop_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  const struct mx_params_rmsprop_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i) + p->wd * w, p->clip_gradient);
    double n = p->rho * LD(in[2], i) + (1 - p->rho) * g * g;
    ST(out[1], i, n);
    ST(out[0], i, clipv(w - p->lr * g / sqrt(n + p->epsilon), p->clip_weights));
  }
  return MX_OK;
}

/* rmspropalex_update (centered, Graves 2013): g' = clip(rescale*g + wd*w);
 * n = rho*n + (1-rho)*g'^2; gm = rho*gm + (1-rho)*g';
 * delta = momentum*delta - lr * g' / sqrt(n - gm^2 + epsilon); w = w + delta */
int mx_ref_rmspropalex_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                              mx_tensor *const *out) {
  const struct mx_params_rmspropalex_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i) + p->wd * w, p->clip_gradient);
    double n = p->rho * LD(in[2], i) + (1 - p->rho) * g * g;
    double gm = p->rho * LD(in[3], i) + (1 - p->rho) * g;
    double d = p->momentum * LD(in[4], i) - p->lr * g / sqrt(n - gm * gm + p->epsilon);
    ST(out[1], i, n);
    ST(out[2], i, gm);
    ST(out[3], i, d);
    ST(out[0], i, clipv(w + d, p->clip_weights));
  }
  return MX_OK;
}

/* adagrad_update: g' = clip(rescale*g) + wd*w; h = h + g'^2;
 * w = w - lr * g' / (sqrt(h) + epsilon) */
int mx_ref_adagrad_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  const struct mx_params_adagrad_update *p = params;
  (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient) + p->wd * w;
    double h = LD(in[2], i) + g * g;
    ST(out[1], i, h);
    ST(out[0], i, w - p->lr * g / (sqrt(h) + p->epsilon));
  }
  return MX_OK;
}

/* ---------------------------------------------------------------- 
 * signsgd, signum, ftrl (MXNet's fused ops), adamax, nadam, adadelta (MXNet 1.9's
 * Python steps fused). */
static double signv(double x) { return (double)((x > 0) - (x < 0)); }

/* signsgd_update: w = (1 - lr*wd)*w - lr*sign(g) (MXNet: rescale and clip ignored) */
int mx_ref_signsgd_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  const struct mx_params_signsgd_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    ST(out[0], i, (1 - p->lr * p->wd) * w - p->lr * signv(LD(in[1], i)));
  }
  return MX_OK;
}

/* signum_update: mom = momentum*mom - (1-momentum)*(wd*w + clip(rescale*g));
 * w = (1 - lr*wd_lh)*w + lr*sign(mom) */
int mx_ref_signum_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  const struct mx_params_signum_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    double m = p->momentum * LD(in[2], i) - (1 - p->momentum) * (p->wd * w + g);
    ST(out[1], i, m);
    ST(out[0], i, (1 - p->lr * p->wd_lh) * w + p->lr * signv(m));
  }
  return MX_OK;
}

/* ftrl_update: g' = clip(rescale*g); z += g' - (sqrt(n + g'^2) - sqrt(n))*w/lr; n += g'^2;
 * w = (sign(z)*lamda1 - z) / ((beta + sqrt(n))/lr + wd) where |z| > lamda1, else 0 */
int mx_ref_ftrl_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_ftrl_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    double n0 = LD(in[3], i), n = n0 + g * g;
    /* dn = sqrt(n) - sqrt(n0) written without the cancellation (n0 >> g^2 loses it all);
     * s = 0 only when n = n0 = 0, where dn is 0 */
    double s = sqrt(n) + sqrt(n0), dn = s > 0 ? g * g / s : 0;
    double z = LD(in[2], i) + g - dn * w / p->lr;
    ST(out[1], i, z);
    ST(out[2], i, n);
    ST(out[0], i, fabs(z) > p->lamda1
                      ? (signv(z) * p->lamda1 - z) / ((p->beta + sqrt(n)) / p->lr + p->wd) : 0.0);
  }
  return MX_OK;
}

/* adamax_update (lr already divided by 1 - beta1^t): g' = clip(rescale*g + wd*w);
 * m = b1*m + (1-b1)*g'; u = max(b2*u, |g'|); w = w - lr*m/u */
int mx_ref_adamax_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  const struct mx_params_adamax_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i) + p->wd * w, p->clip_gradient);
    double m = p->beta1 * LD(in[2], i) + (1 - p->beta1) * g;
    double u = fmax(p->beta2 * LD(in[3], i), fabs(g));
    ST(out[1], i, m);
    ST(out[2], i, u);
    ST(out[0], i, w - p->lr * m / u);
  }
  return MX_OK;
}

/* nadam_update: g' = clip(rescale*g + wd*w); m, v as adam;
 * w = w - lr*(g_coef*g' + m_coef*m)/(sqrt(v_coef*v) + epsilon) */
int mx_ref_nadam_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  const struct mx_params_nadam_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i) + p->wd * w, p->clip_gradient);
    double m = p->beta1 * LD(in[2], i) + (1 - p->beta1) * g;
    double v = p->beta2 * LD(in[3], i) + (1 - p->beta2) * g * g;
    ST(out[1], i, m);
    ST(out[2], i, v);
    ST(out[0], i, w - p->lr * (p->g_coef * g + p->m_coef * m) / (sqrt(p->v_coef * v) + p->epsilon));
  }
  return MX_OK;
}

/* adadelta_update: g' = clip(rescale*g); ag = rho*ag + (1-rho)*g'^2;
 * d = sqrt(ad + eps)/sqrt(ag + eps)*g'; ad = rho*ad + (1-rho)*d^2; w = w - lr*(d + wd*w) */
int mx_ref_adadelta_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  const struct mx_params_adadelta_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    double ag = p->rho * LD(in[2], i) + (1 - p->rho) * g * g;
    double ad0 = LD(in[3], i);
    double d = sqrt(ad0 + p->epsilon) / sqrt(ag + p->epsilon) * g;
    ST(out[1], i, ag);
    ST(out[2], i, p->rho * ad0 + (1 - p->rho) * d * d);
    ST(out[0], i, w - p->lr * (d + p->wd * w));
  }
  return MX_OK;
}

/* lamb_update_phase1: g' = clip(rescale*g); m, v as adam;
 * out = m^/(sqrt(v^) + eps) + wd*w, m^ = m/(1-b1^t), v^ = v/(1-b2^t) under bias_correction */
int mx_ref_lamb_update_phase1(const mx_kctx *ctx, const void *params, int nin,
                              mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_lamb_update_phase1 *p = params;
  (void)ctx; (void)nin; (void)nout;
  double cm = 1, cv = 1;
  if (p->bias_correction) {
    cm = 1 / (1 - pow(p->beta1, (double)p->t));
    cv = 1 / (1 - pow(p->beta2, (double)p->t));
  }
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    double m = p->beta1 * LD(in[2], i) + (1 - p->beta1) * g;
    double v = p->beta2 * LD(in[3], i) + (1 - p->beta2) * g * g;
    ST(out[1], i, m);
    ST(out[2], i, v);
    ST(out[0], i, m * cm / (sqrt(v * cv) + p->epsilon) + p->wd * w);
  }
  return MX_OK;
}

/* ---- multi-precision SGD: the step on the float32 master copy (the last
 * input, rounded to float32 after the step like MXNet's float32 arithmetic), the weight
 * its cast ---- */
int mx_ref_mp_sgd_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  const struct mx_params_mp_sgd_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[2], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    float w32 = (float)(w - p->lr * (g + p->wd * w));
    ST(out[1], i, w32);
    ST(out[0], i, w32);
  }
  return MX_OK;
}

int mx_ref_mp_sgd_mom_update(const mx_kctx *ctx, const void *params, int nin,
                             mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_mp_sgd_mom_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[3], i), g = clipv(p->rescale_grad * LD(in[1], i), p->clip_gradient);
    float m = (float)(p->momentum * LD(in[2], i) - p->lr * (g + p->wd * w));
    float w32 = (float)(w + m);
    ST(out[1], i, m);
    ST(out[2], i, w32);
    ST(out[0], i, w32);
  }
  return MX_OK;
}

/* ftml_update (MXNet's FTMLKernel): g' = clip(rescale*g + wd*w); v = b2*v + (1-b2)*g'^2;
 * d' = (1 - b1^t)/lr * (sqrt(v/(1 - b2^t)) + eps); z = b1*z + (1-b1)*g' - (d' - b1*d)*w;
 * d = d'; w = -z/d'. Outputs w, d, v, z. */
int mx_ref_ftml_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_ftml_update *p = params;
  (void)ctx; (void)nin; (void)nout;
  double b1t = pow(p->beta1, (double)p->t), b2t = pow(p->beta2, (double)p->t);
  for (int64_t i = 0; i < in[0]->size; i++) {
    double w = LD(in[0], i);
    double g = clipv(p->rescale_grad * LD(in[1], i) + p->wd * w, p->clip_gradient);
    double v = p->beta2 * LD(in[3], i) + (1 - p->beta2) * g * g;
    double dt = (1 - b1t) / p->lr * (sqrt(v / (1 - b2t)) + p->epsilon);
    double z = p->beta1 * LD(in[4], i) + (1 - p->beta1) * g - (dt - p->beta1 * LD(in[2], i)) * w;
    ST(out[1], i, dt);
    ST(out[2], i, v);
    ST(out[3], i, z);
    ST(out[0], i, -z / dt);
  }
  return MX_OK;
}
