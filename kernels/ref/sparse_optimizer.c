/* sparse_optimizer.c — reference lazy updates (MXNet's lazy_update): the optimizer
 * updates with a row_sparse gradient change the weight and the states at the gradient's
 * stored rows only, by the dense formulas (kernels/ref/optimizer.c); every other row
 * keeps its value (no weight decay, no momentum step there). Inputs (weight dense, grad
 * row_sparse, states dense...), outputs (weight, states...), all of one shape; outputs may
 * be their inputs (the in-place update Trainer runs). */
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "sparse_ref.h"

#include <math.h>

static double clipv(double x, double c) {
  if (c < 0) return x;
  return x > c ? c : x < -c ? -c : x;
}

/* one element: v[0] the weight, v[1..] the states, updated in place from gradient g */
typedef void (*elem_fn)(const void *p, double *v, double g);

/* copies weight/states into their outputs when not in place, then applies f at the
 * gradient's stored elements */
static int lazy(const void *p, mx_tensor *const *in, int nin, mx_tensor *const *out, elem_fn f) {
  const mx_tensor *g = in[1];
  int nv = nin - 1; /* weight + states */
  for (int k = 0; k < nv; k++) {
    const mx_tensor *src = in[k == 0 ? 0 : k + 1];
    if (mx_ptr(src) != mx_ptr(out[k]))
      for (int64_t i = 0; i < src->size; i++) sp_st(out[k], i, sp_ld(src, i));
  }
  int64_t row = mx_sparse_row_elems(g);
  double v[8];
  for (int64_t s = 0; s < sp_nnr(g); s++)
    for (int64_t e = 0; e < row; e++) {
      int64_t i = sp_rows(g)[s] * row + e;
      for (int k = 0; k < nv; k++) v[k] = sp_ld(out[k], i);
      f(p, v, sp_val(g, s * row + e));
      for (int k = 0; k < nv; k++) sp_st(out[k], i, v[k]);
    }
  return MX_OK;
}

static void sgd(const void *pp, double *v, double gr) {
  const struct mx_params_sgd_update *p = pp;
  double g = clipv(p->rescale_grad * gr, p->clip_gradient);
  v[0] -= p->lr * (g + p->wd * v[0]);
}
static void sgd_mom(const void *pp, double *v, double gr) {
  const struct mx_params_sgd_mom_update *p = pp;
  double g = clipv(p->rescale_grad * gr, p->clip_gradient);
  v[1] = p->momentum * v[1] - p->lr * (g + p->wd * v[0]);
  v[0] += v[1];
}
static void adam(const void *pp, double *v, double gr) {
  const struct mx_params_adam_update *p = pp;
  double g = clipv(p->rescale_grad * gr + p->wd * v[0], p->clip_gradient);
  v[1] = p->beta1 * v[1] + (1 - p->beta1) * g;
  v[2] = p->beta2 * v[2] + (1 - p->beta2) * g * g;
  v[0] -= p->lr * v[1] / (sqrt(v[2]) + p->epsilon);
}
static void adagrad(const void *pp, double *v, double gr) {
  const struct mx_params_adagrad_update *p = pp;
  double g = clipv(p->rescale_grad * gr, p->clip_gradient) + p->wd * v[0];
  v[1] += g * g;
  v[0] -= p->lr * g / (sqrt(v[1]) + p->epsilon);
}
#define LAZY(name, f)                                                                       \
  int mx_ref_##name##_lazy(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, \
                           int nout, mx_tensor *const *out) {                               \
    (void)ctx, (void)nout;                                                                  \
    return lazy(p, in, nin, out, f);                                                        \
  }
LAZY(sgd_update, sgd)
LAZY(sgd_mom_update, sgd_mom)
LAZY(adam_update, adam)
LAZY(adagrad_update, adagrad)
