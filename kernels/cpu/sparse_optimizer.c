/* kernels/cpu/sparse_optimizer.c — the lazy updates (a dense weight, a row_sparse
 * gradient: MXNet's lazy_update) of sgd, sgd with momentum, adam and adagrad on float32 /
 * float64: the formulas of kernels/cpu/optimizer.c's typed loops (float arithmetic for
 * float32), applied at the gradient's stored rows only, rows split across the intra-op
 * pool; every other row of the weight and the states keeps its value. The reference
 * (kernels/ref/sparse_optimizer.c) goes element by element in double. Inputs (weight,
 * grad, states...), outputs (weight, states...), outputs possibly aliasing inputs. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <math.h>
#include <string.h>

#define CLIP(x, c) ((c) >= 0 ? ((x) > (c) ? (c) : (x) < -(c) ? -(c) : (x)) : (x))

/* As kernels/cpu/optimizer.c: float32 only for hyper-parameters no float intermediate
 * overflows with; otherwise the double reference runs. (Every update op's params start
 * with lr, wd, rescale_grad, clip_gradient.) */
static bool lazy_supported(const void *params, int nin, const mx_desc *in, int nout,
                           const mx_desc *out, const char **why) {
  int dt = in[0].dtype;
  bool ok = dt == MX_F32 || dt == MX_F64;
  for (int i = 1; i < nin; i++) ok = ok && in[i].dtype == dt;
  for (int i = 0; i < nout; i++) ok = ok && out[i].dtype == dt;
  if (!ok) {
    *why = "the cpu lazy updates take float32 or float64 weights, gradients and states";
    return false;
  }
  const struct mx_params_sgd_update *P = params;
  const double B = 1073741824.0;
  if (dt == MX_F32 && !(fabs(P->lr) <= B && fabs(P->wd) <= B && fabs(P->rescale_grad) <= B &&
                        P->clip_gradient <= B)) {
    *why = "hyper-parameters beyond float range: the double reference runs";
    return false;
  }
  return true;
}

#define SUPPORTS(op)                                                                         \
  bool mx_cpu_##op##_lazy_supports(const mx_op_def *def, const void *params,                \
                                   const mx_op_info *info, int nin, const mx_desc *in,      \
                                   int nout, const mx_desc *out, const char **why) {        \
    (void)def, (void)info;                                                                  \
    return lazy_supported(params, nin, in, nout, out, why);                                 \
  }
SUPPORTS(sgd_update)
SUPPORTS(sgd_mom_update)
SUPPORTS(adam_update)
SUPPORTS(adagrad_update)

typedef struct {
  const void *p;
  mx_tensor *const *out;
  const int64_t *ids;
  const void *g;
  int64_t row;
} lazy_job;

/* One range function per (op, type) over stored rows [s0, s1): BODY sees i (the weight's
 * element), gi (the gradient's), W (the weight) and S1, S2 (the states), T the type. */
#define DEFINE_LAZY(op, T, BODY)                                                         \
  static void op##_lazy_##T(int64_t s0, int64_t s1, void *vc) {                          \
    const lazy_job *j = vc;                                                              \
    const struct mx_params_##op *p = j->p;                                               \
    const T *G = j->g;                                                                   \
    T *W = mx_ptr(j->out[0]);                                                            \
    T *S1 = j->out[1] ? mx_ptr(j->out[1]) : NULL;                                        \
    T *S2 = j->out[2] ? mx_ptr(j->out[2]) : NULL;                                        \
    (void)S1, (void)S2;                                                                  \
    const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
    for (int64_t s = s0; s < s1; s++) {                                                  \
      int64_t base = j->ids[s] * j->row, gbase = s * j->row;                             \
      for (int64_t e = 0; e < j->row; e++) {                                             \
        int64_t i = base + e, gi = gbase + e;                                            \
        BODY                                                                             \
      }                                                                                  \
    }                                                                                    \
  }

#define SGD_BODY(T)                                                                      \
  T w = W[i], g = rs * G[gi];                                                            \
  g = CLIP(g, c);                                                                        \
  W[i] = w - lr * (g + wd * w);
DEFINE_LAZY(sgd_update, float, SGD_BODY(float))
DEFINE_LAZY(sgd_update, double, SGD_BODY(double))

#define SGD_MOM_BODY(T)                                                                  \
  const T mu = (T)p->momentum;                                                           \
  T w = W[i], g = rs * G[gi];                                                            \
  g = CLIP(g, c);                                                                        \
  T m = mu * S1[i] - lr * (g + wd * w);                                                  \
  S1[i] = m;                                                                             \
  W[i] = w + m;
DEFINE_LAZY(sgd_mom_update, float, SGD_MOM_BODY(float))
DEFINE_LAZY(sgd_mom_update, double, SGD_MOM_BODY(double))

#define ADAM_BODY(T, SQRT)                                                               \
  const T b1 = (T)p->beta1, b2 = (T)p->beta2, eps = (T)p->epsilon;                       \
  T w = W[i], g = rs * G[gi] + wd * w;                                                   \
  g = CLIP(g, c);                                                                        \
  T m = b1 * S1[i] + (1 - b1) * g, v = b2 * S2[i] + (1 - b2) * g * g;                    \
  S1[i] = m;                                                                             \
  S2[i] = v;                                                                             \
  W[i] = w - lr * m / (SQRT(v) + eps);
DEFINE_LAZY(adam_update, float, ADAM_BODY(float, sqrtf))
DEFINE_LAZY(adam_update, double, ADAM_BODY(double, sqrt))

#define ADAGRAD_BODY(T, SQRT)                                                            \
  const T eps = (T)p->epsilon;                                                           \
  T w = W[i], g = rs * G[gi];                                                            \
  g = CLIP(g, c) + wd * w;                                                               \
  T h = S1[i] + g * g;                                                                   \
  S1[i] = h;                                                                             \
  W[i] = w - lr * g / (SQRT(h) + eps);
DEFINE_LAZY(adagrad_update, float, ADAGRAD_BODY(float, sqrtf))
DEFINE_LAZY(adagrad_update, double, ADAGRAD_BODY(double, sqrt))

/* the outputs start as the inputs (weight in[0], states in[2..]) when not in place, then
 * the stored rows are updated */
static int lazy(const void *p, int nin, mx_tensor *const *in, mx_tensor *const *out,
                mx_range_fn f32, mx_range_fn f64) {
  const mx_tensor *g = in[1];
  int nv = nin - 1;
  for (int k = 0; k < nv; k++) {
    const mx_tensor *src = in[k == 0 ? 0 : k + 1];
    if (mx_ptr(src) != mx_ptr(out[k]))
      memcpy(mx_ptr(out[k]), mx_ptr(src), mx_dtype_size(src->dtype) * (size_t)src->size);
  }
  int64_t n = mx_sparse_count(g), row = mx_sparse_row_elems(g);
  if (n == 0 || row == 0) return MX_OK;
  lazy_job j = { p, NULL, mx_sparse_index(g, 0), mx_sparse_values(g), row };
  mx_tensor *outs[3] = { out[0], nv > 1 ? out[1] : NULL, nv > 2 ? out[2] : NULL };
  j.out = outs;
  /* memory-bound, as the dense updates: a second thread only past ~256k elements */
  mx_parallel_for(n, 1 + 262144 / row, g->dtype == MX_F32 ? f32 : f64, &j);
  return MX_OK;
}

#define KERNEL(op)                                                                         \
  int mx_cpu_##op##_lazy(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, \
                         int nout, mx_tensor *const *out) {                                \
    (void)ctx, (void)nout;                                                                 \
    return lazy(p, nin, in, out, op##_lazy_float, op##_lazy_double);                       \
  }
KERNEL(sgd_update)
KERNEL(sgd_mom_update)
KERNEL(adam_update)
KERNEL(adagrad_update)
