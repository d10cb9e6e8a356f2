/* kernels/cpu/optimizer.c — fused optimizer updates, f32/f64 typed loops split over
 * the intra-op pool (one pass over each parameter). Formulas and layouts as in
 * kernels/ref/optimizer.c (inputs weight, grad, states of one shape; outputs weight,
 * states, possibly aliasing the inputs). f16/bf16 run the ref kernels. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <math.h>
#include <immintrin.h>
#include <stdint.h>


/* updates are memory-bound: below ~256k elements a second thread costs more (wake-up,
 * barrier) than it saves */
#define GRAIN 262144

typedef struct job {
  const void *p;
  mx_tensor *const *in;
  mx_tensor *const *out;
} job;

#define CLIP(x, c) ((c) >= 0 ? ((x) > (c) ? (c) : (x) < -(c) ? -(c) : (x)) : (x))

/* One range function per (op, type). BODY uses w, g (loaded), and the typed pointers
 * I0..I4 (inputs) and O0..O3 (outputs); T is the element type. */
#define DEFINE_RANGE(op, T, BODY)                                                        \
  static void op##_##T(int64_t b, int64_t e, void *ctx) {                                \
    const job *j = ctx;                                                                  \
    const struct mx_params_##op *p = j->p;                                               \
    const T *I0 = mx_ptr(j->in[0]), *I1 = mx_ptr(j->in[1]);                              \
    T *O0 = mx_ptr(j->out[0]);                                                           \
    BODY                                                                                 \
  }

#define SGD_BODY(T)                                                                      \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c);                                                                      \
    O0[i] = w - lr * (g + wd * w);                                                       \
  }
DEFINE_RANGE(sgd_update, float, SGD_BODY(float))
DEFINE_RANGE(sgd_update, double, SGD_BODY(double))

#define SGD_MOM_BODY(T)                                                                  \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  T *O1 = mx_ptr(j->out[1]);                                                             \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T mu = (T)p->momentum;                                                           \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c);                                                                      \
    T m = mu * I2[i] - lr * (g + wd * w);                                                \
    O1[i] = m;                                                                           \
    O0[i] = w + m;                                                                       \
  }
DEFINE_RANGE(sgd_mom_update, float, SGD_MOM_BODY(float))
DEFINE_RANGE(sgd_mom_update, double, SGD_MOM_BODY(double))

#define NAG_BODY(T)                                                                      \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  T *O1 = mx_ptr(j->out[1]);                                                             \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T mu = (T)p->momentum;                                                           \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c) + wd * w;                                                             \
    T m = mu * I2[i] - lr * g;                                                           \
    O1[i] = m;                                                                           \
    O0[i] = w + mu * m - lr * g;                                                         \
  }
DEFINE_RANGE(nag_mom_update, float, NAG_BODY(float))
DEFINE_RANGE(nag_mom_update, double, NAG_BODY(double))

#define ADAM_BODY(T, SQRT)                                                               \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  const T *I3 = mx_ptr(j->in[3]);                                                        \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T b1 = (T)p->beta1, b2 = (T)p->beta2, eps = (T)p->epsilon;                       \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i] + wd * w;                                                \
    g = CLIP(g, c);                                                                      \
    T m = b1 * I2[i] + (1 - b1) * g, v = b2 * I3[i] + (1 - b2) * g * g;                  \
    O1[i] = m;                                                                           \
    O2[i] = v;                                                                           \
    O0[i] = w - lr * m / (SQRT(v) + eps);                                                \
  }
DEFINE_RANGE(adam_update, float, ADAM_BODY(float, sqrtf))
DEFINE_RANGE(adam_update, double, ADAM_BODY(double, sqrt))

#define ADAMW_BODY(T, SQRT)                                                              \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  const T *I3 = mx_ptr(j->in[3]);                                                        \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T b1 = (T)p->beta1, b2 = (T)p->beta2, eps = (T)p->epsilon, eta = (T)p->eta;      \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c);                                                                      \
    T m = b1 * I2[i] + (1 - b1) * g, v = b2 * I3[i] + (1 - b2) * g * g;                  \
    O1[i] = m;                                                                           \
    O2[i] = v;                                                                           \
    O0[i] = w - eta * (lr * m / (SQRT(v) + eps) + wd * w);                               \
  }
DEFINE_RANGE(adamw_update, float, ADAMW_BODY(float, sqrtf))
DEFINE_RANGE(adamw_update, double, ADAMW_BODY(double, sqrt))

#define RMSPROP_BODY(T, SQRT)                                                            \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  T *O1 = mx_ptr(j->out[1]);                                                             \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T rho = (T)p->rho, eps = (T)p->epsilon, cw = (T)p->clip_weights;                 \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i] + wd * w;                                                \
    g = CLIP(g, c);                                                                      \
    T n = rho * I2[i] + (1 - rho) * g * g;                                               \
    O1[i] = n;                                                                           \
    w = w - lr * g / SQRT(n + eps);                                                      \
    O0[i] = CLIP(w, cw);                                                                 \
  }
DEFINE_RANGE(rmsprop_update, float, RMSPROP_BODY(float, sqrtf))
DEFINE_RANGE(rmsprop_update, double, RMSPROP_BODY(double, sqrt))

#define RMSPROPALEX_BODY(T, SQRT)                                                        \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  const T *I3 = mx_ptr(j->in[3]), *I4 = mx_ptr(j->in[4]);                                \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]), *O3 = mx_ptr(j->out[3]);           \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T rho = (T)p->rho, eps = (T)p->epsilon, cw = (T)p->clip_weights;                 \
  const T mu = (T)p->momentum;                                                           \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i] + wd * w;                                                \
    g = CLIP(g, c);                                                                      \
    T n = rho * I2[i] + (1 - rho) * g * g;                                               \
    T gm = rho * I3[i] + (1 - rho) * g;                                                  \
    T d = mu * I4[i] - lr * g / SQRT(n - gm * gm + eps);                                 \
    O1[i] = n;                                                                           \
    O2[i] = gm;                                                                          \
    O3[i] = d;                                                                           \
    w = w + d;                                                                           \
    O0[i] = CLIP(w, cw);                                                                 \
  }
DEFINE_RANGE(rmspropalex_update, float, RMSPROPALEX_BODY(float, sqrtf))
DEFINE_RANGE(rmspropalex_update, double, RMSPROPALEX_BODY(double, sqrt))

#define ADAGRAD_BODY(T, SQRT)                                                            \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  T *O1 = mx_ptr(j->out[1]);                                                             \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T eps = (T)p->epsilon;                                                           \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c) + wd * w;                                                             \
    T h = I2[i] + g * g;                                                                 \
    O1[i] = h;                                                                           \
    O0[i] = w - lr * g / (SQRT(h) + eps);                                                \
  }
DEFINE_RANGE(adagrad_update, float, ADAGRAD_BODY(float, sqrtf))
DEFINE_RANGE(adagrad_update, double, ADAGRAD_BODY(double, sqrt))

/* AVX2 f32 loops for the updates with a square root: sqrtf keeps errno semantics,
 * which stops GCC from vectorising it, so these spell the vectors out (8 lanes, scalar
 * tail through the generic body). Same formulas as the scalar bodies above. */

static inline __m256 clip8(__m256 x, float c) {
  if (c < 0) return x;
  __m256 cv = _mm256_set1_ps(c);
  return _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), cv), _mm256_min_ps(cv, x));
}

static void adam_update_avx(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  const struct mx_params_adam_update *p = j->p;
  const float *I0 = mx_ptr(j->in[0]), *I1 = mx_ptr(j->in[1]), *I2 = mx_ptr(j->in[2]),
              *I3 = mx_ptr(j->in[3]);
  float *O0 = mx_ptr(j->out[0]), *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);
  const float c = (float)p->clip_gradient;
  const __m256 lr = _mm256_set1_ps((float)p->lr), wd = _mm256_set1_ps((float)p->wd),
               rs = _mm256_set1_ps((float)p->rescale_grad), b1 = _mm256_set1_ps((float)p->beta1),
               b2 = _mm256_set1_ps((float)p->beta2), c1 = _mm256_set1_ps((float)(1 - p->beta1)),
               c2 = _mm256_set1_ps((float)(1 - p->beta2)), eps = _mm256_set1_ps((float)p->epsilon);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 w = _mm256_loadu_ps(I0 + i);
    __m256 g = clip8(_mm256_fmadd_ps(rs, _mm256_loadu_ps(I1 + i), _mm256_mul_ps(wd, w)), c);
    __m256 m = _mm256_fmadd_ps(b1, _mm256_loadu_ps(I2 + i), _mm256_mul_ps(c1, g));
    __m256 v = _mm256_fmadd_ps(b2, _mm256_loadu_ps(I3 + i), _mm256_mul_ps(c2, _mm256_mul_ps(g, g)));
    _mm256_storeu_ps(O1 + i, m);
    _mm256_storeu_ps(O2 + i, v);
    __m256 d = _mm256_div_ps(m, _mm256_add_ps(_mm256_sqrt_ps(v), eps));
    _mm256_storeu_ps(O0 + i, _mm256_fnmadd_ps(lr, d, w));
  }
  if (i < e) adam_update_float(i, e, ctx);
}

static void adamw_update_avx(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  const struct mx_params_adamw_update *p = j->p;
  const float *I0 = mx_ptr(j->in[0]), *I1 = mx_ptr(j->in[1]), *I2 = mx_ptr(j->in[2]),
              *I3 = mx_ptr(j->in[3]);
  float *O0 = mx_ptr(j->out[0]), *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);
  const float c = (float)p->clip_gradient;
  const __m256 lr = _mm256_set1_ps((float)p->lr), wd = _mm256_set1_ps((float)p->wd),
               rs = _mm256_set1_ps((float)p->rescale_grad), b1 = _mm256_set1_ps((float)p->beta1),
               b2 = _mm256_set1_ps((float)p->beta2), c1 = _mm256_set1_ps((float)(1 - p->beta1)),
               c2 = _mm256_set1_ps((float)(1 - p->beta2)), eps = _mm256_set1_ps((float)p->epsilon),
               eta = _mm256_set1_ps((float)p->eta);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 w = _mm256_loadu_ps(I0 + i);
    __m256 g = clip8(_mm256_mul_ps(rs, _mm256_loadu_ps(I1 + i)), c);
    __m256 m = _mm256_fmadd_ps(b1, _mm256_loadu_ps(I2 + i), _mm256_mul_ps(c1, g));
    __m256 v = _mm256_fmadd_ps(b2, _mm256_loadu_ps(I3 + i), _mm256_mul_ps(c2, _mm256_mul_ps(g, g)));
    _mm256_storeu_ps(O1 + i, m);
    _mm256_storeu_ps(O2 + i, v);
    __m256 d = _mm256_div_ps(m, _mm256_add_ps(_mm256_sqrt_ps(v), eps));
    __m256 step = _mm256_fmadd_ps(lr, d, _mm256_mul_ps(wd, w));
    _mm256_storeu_ps(O0 + i, _mm256_fnmadd_ps(eta, step, w));
  }
  if (i < e) adamw_update_float(i, e, ctx);
}

static void rmsprop_update_avx(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  const struct mx_params_rmsprop_update *p = j->p;
  const float *I0 = mx_ptr(j->in[0]), *I1 = mx_ptr(j->in[1]), *I2 = mx_ptr(j->in[2]);
  float *O0 = mx_ptr(j->out[0]), *O1 = mx_ptr(j->out[1]);
  const float c = (float)p->clip_gradient, cw = (float)p->clip_weights;
  const __m256 lr = _mm256_set1_ps((float)p->lr), wd = _mm256_set1_ps((float)p->wd),
               rs = _mm256_set1_ps((float)p->rescale_grad), rho = _mm256_set1_ps((float)p->rho),
               c1 = _mm256_set1_ps((float)(1 - p->rho)), eps = _mm256_set1_ps((float)p->epsilon);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 w = _mm256_loadu_ps(I0 + i);
    __m256 g = clip8(_mm256_fmadd_ps(rs, _mm256_loadu_ps(I1 + i), _mm256_mul_ps(wd, w)), c);
    __m256 n = _mm256_fmadd_ps(rho, _mm256_loadu_ps(I2 + i), _mm256_mul_ps(c1, _mm256_mul_ps(g, g)));
    _mm256_storeu_ps(O1 + i, n);
    __m256 d = _mm256_div_ps(g, _mm256_sqrt_ps(_mm256_add_ps(n, eps)));
    _mm256_storeu_ps(O0 + i, clip8(_mm256_fnmadd_ps(lr, d, w), cw));
  }
  if (i < e) rmsprop_update_float(i, e, ctx);
}

static void adagrad_update_avx(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  const struct mx_params_adagrad_update *p = j->p;
  const float *I0 = mx_ptr(j->in[0]), *I1 = mx_ptr(j->in[1]), *I2 = mx_ptr(j->in[2]);
  float *O0 = mx_ptr(j->out[0]), *O1 = mx_ptr(j->out[1]);
  const float c = (float)p->clip_gradient;
  const __m256 lr = _mm256_set1_ps((float)p->lr), wd = _mm256_set1_ps((float)p->wd),
               rs = _mm256_set1_ps((float)p->rescale_grad), eps = _mm256_set1_ps((float)p->epsilon);
  int64_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256 w = _mm256_loadu_ps(I0 + i);
    __m256 g = _mm256_fmadd_ps(wd, w, clip8(_mm256_mul_ps(rs, _mm256_loadu_ps(I1 + i)), c));
    __m256 h = _mm256_fmadd_ps(g, g, _mm256_loadu_ps(I2 + i));
    _mm256_storeu_ps(O1 + i, h);
    __m256 d = _mm256_div_ps(g, _mm256_add_ps(_mm256_sqrt_ps(h), eps));
    _mm256_storeu_ps(O0 + i, _mm256_fnmadd_ps(lr, d, w));
  }
  if (i < e) adagrad_update_float(i, e, ctx);
}

/* The f32 kernels compute in float. With the usual hyper-parameters (|lr|, |wd|,
 * |rescale_grad|, clip <= 2^30) no float intermediate overflows for gradients below ~1e9;
 * beyond that the call takes the double reference kernel, so the result is the one the
 * math gives, not a float overflow's. (Every update op's params start with these four.) */
static bool f32_safe(const void *params) {
  const struct mx_params_sgd_update *P = params;
  const double B = 1073741824.0;
  return fabs(P->lr) <= B && fabs(P->wd) <= B && fabs(P->rescale_grad) <= B &&
         P->clip_gradient <= B;
}

#define DEFINE_KERNEL(op, F32)                                                           \
  int mx_cpu_##op(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,          \
                  mx_tensor *const *out) {                                               \
    job j = {params, in, out};                                                           \
    int dt = in[0]->dtype;                                                               \
    if (dt == MX_F32 && !f32_safe(params)) return MX_DECLINE;                            \
    if (dt == MX_F32) mx_parallel_for(in[0]->size, GRAIN, F32, &j);                      \
    else if (dt == MX_F64) mx_parallel_for(in[0]->size, GRAIN, op##_double, &j);         \
    else return MX_DECLINE;                                                              \
    return MX_OK;                                                                        \
  }
DEFINE_KERNEL(sgd_update, sgd_update_float)
DEFINE_KERNEL(sgd_mom_update, sgd_mom_update_float)
DEFINE_KERNEL(nag_mom_update, nag_mom_update_float)
DEFINE_KERNEL(adam_update, adam_update_avx)
DEFINE_KERNEL(adamw_update, adamw_update_avx)
DEFINE_KERNEL(rmsprop_update, rmsprop_update_avx)
DEFINE_KERNEL(rmspropalex_update, rmspropalex_update_float)
DEFINE_KERNEL(adagrad_update, adagrad_update_avx)

/* ---------------------------------------------------------------- 
 * signsgd, signum, ftrl, adamax, nadam, adadelta: plain typed loops (formulas as in
 * kernels/ref/optimizer.c). */

#define SIGN(x) (((x) > 0) - ((x) < 0)) /* an int: promoted by the arithmetic around it */

#define SIGNSGD_BODY(T)                                                                  \
  const T lr = (T)p->lr, k = (T)(1 - p->lr * p->wd);                                     \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T g = I1[i];                                                                         \
    O0[i] = k * I0[i] - lr * SIGN(g);                                                    \
  }
DEFINE_RANGE(signsgd_update, float, SIGNSGD_BODY(float))
DEFINE_RANGE(signsgd_update, double, SIGNSGD_BODY(double))

/* Signum computes in double whatever T is: the step is lr*sign(mom), and a momentum that
 * underflows to 0 in float (a denormal rescale_grad or clip, tiny products) would flip the
 * step from +-lr to 0. Memory-bound either way. */
#define SIGNUM_BODY(T)                                                                   \
  const T *I2 = mx_ptr(j->in[2]);                                                         \
  T *O1 = mx_ptr(j->out[1]);                                                             \
  const double lr = p->lr, wd = p->wd, rs = p->rescale_grad, c = p->clip_gradient;       \
  const double mu = p->momentum, k = 1 - p->lr * p->wd_lh;                               \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    double w = I0[i], g = rs * I1[i];                                                    \
    g = CLIP(g, c);                                                                      \
    double m = mu * I2[i] - (1 - mu) * (wd * w + g);                                     \
    O1[i] = (T)m;                                                                        \
    O0[i] = (T)(k * w + lr * SIGN(m));                                                   \
  }
DEFINE_RANGE(signum_update, float, SIGNUM_BODY(float))
DEFINE_RANGE(signum_update, double, SIGNUM_BODY(double))

#define FTRL_BODY(T, SQRT, FABS)                                                         \
  const T *I2 = mx_ptr(j->in[2]), *I3 = mx_ptr(j->in[3]);                                \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T l1 = (T)p->lamda1, beta = (T)p->beta;                                          \
  for (int64_t i = b; i < e; i++) {                                                      \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c);                                                                      \
    T n0 = I3[i], n = n0 + g * g;                                                        \
    T s = SQRT(n) + SQRT(n0), dn = s > 0 ? g * g / s : (T)0;                             \
    T z = I2[i] + g - dn * w / lr;                                                       \
    O1[i] = z;                                                                           \
    O2[i] = n;                                                                           \
    O0[i] = FABS(z) > l1 ? (SIGN(z) * l1 - z) / ((beta + SQRT(n)) / lr + wd) : (T)0;     \
  }
DEFINE_RANGE(ftrl_update, float, FTRL_BODY(float, sqrtf, fabsf))
DEFINE_RANGE(ftrl_update, double, FTRL_BODY(double, sqrt, fabs))

#define ADAMAX_BODY(T, FABS, FMAX)                                                       \
  const T *I2 = mx_ptr(j->in[2]), *I3 = mx_ptr(j->in[3]);                                \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T b1 = (T)p->beta1, b2 = (T)p->beta2;                                            \
  _Pragma("omp simd") for (int64_t i = b; i < e; i++) {                                 \
    T w = I0[i], g = rs * I1[i] + wd * w;                                                \
    g = CLIP(g, c);                                                                      \
    T m = b1 * I2[i] + (1 - b1) * g, u = FMAX(b2 * I3[i], FABS(g));                      \
    O1[i] = m;                                                                           \
    O2[i] = u;                                                                           \
    O0[i] = w - lr * m / u;                                                              \
  }
DEFINE_RANGE(adamax_update, float, ADAMAX_BODY(float, fabsf, fmaxf))
DEFINE_RANGE(adamax_update, double, ADAMAX_BODY(double, fabs, fmax))

#define NADAM_BODY(T, SQRT)                                                              \
  const T *I2 = mx_ptr(j->in[2]), *I3 = mx_ptr(j->in[3]);                                \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T b1 = (T)p->beta1, b2 = (T)p->beta2, eps = (T)p->epsilon;                       \
  const T gc = (T)p->g_coef, mc = (T)p->m_coef, vc = (T)p->v_coef;                       \
  for (int64_t i = b; i < e; i++) {                                                      \
    T w = I0[i], g = rs * I1[i] + wd * w;                                                \
    g = CLIP(g, c);                                                                      \
    T m = b1 * I2[i] + (1 - b1) * g, v = b2 * I3[i] + (1 - b2) * g * g;                  \
    O1[i] = m;                                                                           \
    O2[i] = v;                                                                           \
    O0[i] = w - lr * (gc * g + mc * m) / (SQRT(vc * v) + eps);                           \
  }
DEFINE_RANGE(nadam_update, float, NADAM_BODY(float, sqrtf))
DEFINE_RANGE(nadam_update, double, NADAM_BODY(double, sqrt))

#define ADADELTA_BODY(T, SQRT)                                                           \
  const T *I2 = mx_ptr(j->in[2]), *I3 = mx_ptr(j->in[3]);                                \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T lr = (T)p->lr, wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient; \
  const T rho = (T)p->rho, eps = (T)p->epsilon;                                          \
  for (int64_t i = b; i < e; i++) {                                                      \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c);                                                                      \
    T ag = rho * I2[i] + (1 - rho) * g * g, ad0 = I3[i];                                 \
    T d = SQRT(ad0 + eps) / SQRT(ag + eps) * g;                                          \
    O1[i] = ag;                                                                          \
    O2[i] = rho * ad0 + (1 - rho) * d * d;                                               \
    O0[i] = w - lr * (d + wd * w);                                                       \
  }
DEFINE_RANGE(adadelta_update, float, ADADELTA_BODY(float, sqrtf))
DEFINE_RANGE(adadelta_update, double, ADADELTA_BODY(double, sqrt))

DEFINE_KERNEL(signsgd_update, signsgd_update_float)
DEFINE_KERNEL(signum_update, signum_update_float)
DEFINE_KERNEL(ftrl_update, ftrl_update_float)
DEFINE_KERNEL(adamax_update, adamax_update_float)
DEFINE_KERNEL(nadam_update, nadam_update_float)
DEFINE_KERNEL(adadelta_update, adadelta_update_float)


/* lamb_update_phase1: the bias corrections (pow) once per call, in double */
#define LAMB1_BODY(T, SQRT)                                                              \
  const T *I2 = mx_ptr(j->in[2]), *I3 = mx_ptr(j->in[3]);                                \
  T *O1 = mx_ptr(j->out[1]), *O2 = mx_ptr(j->out[2]);                                    \
  const T wd = (T)p->wd, rs = (T)p->rescale_grad, c = (T)p->clip_gradient;               \
  const T b1 = (T)p->beta1, b2 = (T)p->beta2, eps = (T)p->epsilon;                       \
  T cm = 1, cv = 1;                                                                      \
  if (p->bias_correction) {                                                              \
    cm = (T)(1 / (1 - pow(p->beta1, (double)p->t)));                                     \
    cv = (T)(1 / (1 - pow(p->beta2, (double)p->t)));                                     \
  }                                                                                      \
  for (int64_t i = b; i < e; i++) {                                                      \
    T w = I0[i], g = rs * I1[i];                                                         \
    g = CLIP(g, c);                                                                      \
    T m = b1 * I2[i] + (1 - b1) * g, v = b2 * I3[i] + (1 - b2) * g * g;                  \
    O1[i] = m;                                                                           \
    O2[i] = v;                                                                           \
    O0[i] = m * cm / (SQRT(v * cv) + eps) + wd * w;                                      \
  }
DEFINE_RANGE(lamb_update_phase1, float, LAMB1_BODY(float, sqrtf))
DEFINE_RANGE(lamb_update_phase1, double, LAMB1_BODY(double, sqrt))
/* (no lr field, so not DEFINE_KERNEL/f32_safe: the same bound on what it has) */
int mx_cpu_lamb_update_phase1(const mx_kctx *ctx, const void *params, int nin,
                              mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_lamb_update_phase1 *P = params;
  const double B = 1073741824.0;
  job j = {params, in, out};
  int dt = in[0]->dtype;
  bool safe = fabs(P->wd) <= B && fabs(P->rescale_grad) <= B && P->clip_gradient <= B;
  if (dt == MX_F32 && safe) mx_parallel_for(in[0]->size, GRAIN, lamb_update_phase1_float, &j);
  else if (dt == MX_F64) mx_parallel_for(in[0]->size, GRAIN, lamb_update_phase1_double, &j);
  else return MX_DECLINE;
  return MX_OK;
}

/* ---- multi-precision SGD: mp_sgd_update, mp_sgd_mom_update across the pool.
 * The step on the float32 master copy is computed in double and rounded to float32,
 * as the ref does, so both give the same bits; grad and the weight are f16/bf16 (or
 * f32/f64) read and written through the dtype's conversion. ---- */

static inline double mp_ld(const void *p, int dt, int64_t i) {
  switch (dt) {
  case MX_F16: return (double)mx_f16_to_f32(((const uint16_t *)p)[i]);
  case MX_BF16: return (double)mx_bf16_to_f32(((const uint16_t *)p)[i]);
  case MX_F32: return (double)((const float *)p)[i];
  default: return ((const double *)p)[i];
  }
}
static inline void mp_st(void *p, int dt, int64_t i, float v) {
  switch (dt) {
  case MX_F16: ((uint16_t *)p)[i] = mx_f32_to_f16(v); break;
  case MX_BF16: ((uint16_t *)p)[i] = mx_f32_to_bf16(v); break;
  case MX_F32: ((float *)p)[i] = v; break;
  default: ((double *)p)[i] = (double)v; break;
  }
}
static inline double mp_clip(double x, double c) { return c < 0 ? x : x > c ? c : x < -c ? -c : x; }

static void mp_sgd_range(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  const struct mx_params_mp_sgd_update *p = j->p;
  const mx_tensor *gt = j->in[1];
  const float *W32 = mx_ptr(j->in[2]);
  float *O32 = mx_ptr(j->out[1]);
  void *O = mx_ptr(j->out[0]);
  int wdt = j->out[0]->dtype;
  for (int64_t i = b; i < e; i++) {
    double w = W32[i], g = mp_clip(p->rescale_grad * mp_ld(mx_ptr(gt), gt->dtype, i), p->clip_gradient);
    float n = (float)(w - p->lr * (g + p->wd * w));
    O32[i] = n;
    mp_st(O, wdt, i, n);
  }
}

static void mp_sgd_mom_range(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  const struct mx_params_mp_sgd_mom_update *p = j->p;
  const mx_tensor *gt = j->in[1];
  const float *M = mx_ptr(j->in[2]), *W32 = mx_ptr(j->in[3]);
  float *OM = mx_ptr(j->out[1]), *O32 = mx_ptr(j->out[2]);
  void *O = mx_ptr(j->out[0]);
  int wdt = j->out[0]->dtype;
  for (int64_t i = b; i < e; i++) {
    double w = W32[i], g = mp_clip(p->rescale_grad * mp_ld(mx_ptr(gt), gt->dtype, i), p->clip_gradient);
    float m = (float)(p->momentum * M[i] - p->lr * (g + p->wd * w));
    float n = (float)(w + m);
    OM[i] = m;
    O32[i] = n;
    mp_st(O, wdt, i, n);
  }
}

int mx_cpu_mp_sgd_update(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                         int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  job j = { params, in, out };
  mx_parallel_for(in[0]->size, GRAIN / 4, mp_sgd_range, &j);
  return MX_OK;
}

int mx_cpu_mp_sgd_mom_update(const mx_kctx *ctx, const void *params, int nin,
                             mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  job j = { params, in, out };
  mx_parallel_for(in[0]->size, GRAIN / 4, mp_sgd_mom_range, &j);
  return MX_OK;
}
