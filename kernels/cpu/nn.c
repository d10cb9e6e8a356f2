/* kernels/cpu/nn.c — dropout for f32 (mask generation and the product in one pass
 * when no axes are shared; counter-based RNG, so the mask equals the ref kernel's
 * for the same seed; other dtypes and shared-axes masks run the ref kernel), MXNet's
 * Activation on row-major data (the elementwise kernels of the same functions), and
 * leaky_relu's forms and their backward. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"

#include <string.h>
#include <float.h>
#include <math.h>

/* Activation's relu is MXNet's x > 0 ? x : 0, which maps NaN to 0 (the relu op keeps
 * NaN): float32 here, the other dtypes declined to the reference kernel */
typedef struct { const float *x; float *y; } relu0_job;
static void relu0_range(int64_t b, int64_t e, void *vj) {
  const relu0_job *j = vj;
  for (int64_t i = b; i < e; i++) j->y[i] = j->x[i] > 0 ? j->x[i] : 0.0f;
}

/* Activation(act_type) on any shape, row-major: the vectorised unary kernel of that
 * function (sigmoid, tanh, softrelu, softsign: the same dtypes, the same threads). */
int mx_cpu_activation(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  switch (((const struct mx_params_activation *)params)->act_type) {
  case MX_ACTIVATION_ACT_TYPE_RELU:
    if (in[0]->dtype != MX_F32 || out[0]->dtype != MX_F32) return MX_DECLINE;
    mx_parallel_for(in[0]->size, 1 << 15, relu0_range,
                    &(relu0_job){ mx_ptr(in[0]), mx_ptr(out[0]) });
    return MX_OK;
  case MX_ACTIVATION_ACT_TYPE_SIGMOID: return mx_cpu_sigmoid(ctx, NULL, nin, in, nout, out);
  case MX_ACTIVATION_ACT_TYPE_TANH: return mx_cpu_tanh(ctx, NULL, nin, in, nout, out);
  case MX_ACTIVATION_ACT_TYPE_SOFTRELU: return mx_cpu_softrelu(ctx, NULL, nin, in, nout, out);
  default: return mx_cpu_softsign(ctx, NULL, nin, in, nout, out);
  }
}

typedef struct job {
  const float *x;
  float *y, *m;
  uint64_t seed, first;
  double p;
  float scale;
} job;

static void drop_range(int64_t b, int64_t e, void *ctx) {
  const job *j = ctx;
  for (int64_t i = b; i < e; i++) {
    double u = mx_random_unit(mx_random_bits(j->seed, j->first + (uint64_t)i));
    float k = u >= j->p ? j->scale : 0.0f;
    j->m[i] = k;
    j->y[i] = j->x[i] * k;
  }
}

int mx_cpu_dropout(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
                   mx_tensor *const *out) {
  const struct mx_params_dropout *p = params;
  const mx_tensor *x = in[0], *y = out[0], *m = out[1];
  bool active = (p->training || p->mode == MX_DROPOUT_MODE_ALWAYS) && p->p > 0;
  if (x->dtype != MX_F32 || m->size != y->size || !active || p->p >= 1)
    return MX_DECLINE;
  /* counters reserved at dispatch (its inference counts them), in program order */
  job j = {mx_ptr(x), mx_ptr(y), mx_ptr(m), ctx->rng_seed, ctx->rng_first, p->p,
           (float)(1.0 / (1.0 - p->p))};
  mx_parallel_for(y->size, 65536, drop_range, &j); /* RNG-bound: worth a thread sooner */
  return MX_OK;
}

/* ---- activations: f32 loops that GCC vectorises (libmvec's expf/tanhf/erff
 * through asm aliases, an AVX-512 clone), split over the intra-op pool for large tensors.
 * Same formulas as kernels/ref/nn.c (which also covers the other dtypes); rrelu draws the
 * same counter-based slopes as the ref kernel. */

#define VDECL(T, name, sym) \
  __attribute__((simd("notinbranch"), const, nothrow)) T name(T) __asm__(sym);
VDECL(float, v_expf, "expf")
VDECL(float, v_tanhf, "tanhf")
VDECL(float, v_erff, "erff")
VDECL(float, v_log1pf, "log1pf")

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#ifdef __SANITIZE_THREAD__ /* ThreadSanitizer cannot run the ifunc resolvers clones need */
#define HEAVY
#else
#define HEAVY __attribute__((target_clones("avx512f", "default")))
#endif
#else
#define HEAVY
#endif

#define ACT_GRAIN ((int64_t)1 << 15)
#define SELU_L 1.05070098735548049f
#define SELU_A 1.67326324235437728f
#define SQRT1_2F 0.70710678118654752f
#define INV_SQRT_2PIF 0.39894228040143268f
#define SQRT_2_PIF 0.79788456080286536f

typedef struct act_job {
  const float *x, *og, *mk, *g;
  float *o, *dx, *m;
  float a, b;
  int64_t inner, C;
  uint64_t seed, first;
} act_job;

typedef void (*act_loop)(int64_t b, int64_t e, void *ctx);

/* A param the f32 loops can use: finite in float (others run the double ref kernel). */
static bool f32ok(double a) { return fabs(a) <= FLT_MAX; }

static int act_go(act_loop f, int64_t n, act_job *j) {
  if (n < 2 * ACT_GRAIN) f(0, n, j); /* small tensors: no pool hand-off */
  else mx_parallel_for(n, ACT_GRAIN, f, j);
  return MX_OK;
}

/* Loops y[i] = f(x[i]) and dx[i] = og[i] * f'(x[i]): BODY (statements over v, setting r)
 * keeps every libmvec call outside the conditionals, so GCC if-converts the selects and
 * vectorises (a call inside a ?: branch is control flow it cannot vectorise). NaN
 * propagates through the formulas; the selects that would hide it test v != v. */
#define FW_LOOP(nm, ...)                                                               \
  HEAVY static void nm(int64_t b, int64_t e, void *vc) {                              \
    const act_job *j = vc;                                                            \
    const float *restrict x = j->x;                                                   \
    float *restrict o = j->o;                                                         \
    const float A = j->a, B = j->b;                                                   \
    (void)A, (void)B;                                                                 \
    for (int64_t i = b; i < e; i++) {                                                 \
      float v = x[i], r;                                                              \
      __VA_ARGS__;                                                                    \
      o[i] = r;                                                                       \
    }                                                                                 \
  }
#define BW_LOOP(nm, ...)                                                               \
  HEAVY static void nm(int64_t b, int64_t e, void *vc) {                              \
    const act_job *j = vc;                                                            \
    const float *restrict x = j->x, *restrict og = j->og;                             \
    float *restrict o = j->dx;                                                        \
    const float A = j->a, B = j->b;                                                   \
    (void)A, (void)B;                                                                 \
    for (int64_t i = b; i < e; i++) {                                                 \
      float v = x[i], r;                                                              \
      __VA_ARGS__;                                                                    \
      o[i] = og[i] * r;                                                               \
    }                                                                                 \
  }

static inline float sigm(float v) { return 1.0f / (1.0f + v_expf(-v)); }
static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }
static inline float negpart(float v) { return v < 0 ? v : 0.0f; } /* NaN -> 0 */
static inline float pospart(float v) { return v > 0 ? v : 0.0f; }

FW_LOOP(fw_leaky, r = v * (v > 0 ? 1.0f : A))
FW_LOOP(fw_gelu_erf, r = 0.5f * v * (1.0f + v_erff(v * SQRT1_2F)))
FW_LOOP(fw_gelu_tanh, r = 0.5f * v * (1.0f + v_tanhf(SQRT_2_PIF * (v + 0.044715f * v * v * v))))
FW_LOOP(fw_hsig, r = clampf(A * v + B, 0.0f, 1.0f))
FW_LOOP(fw_silu, r = v * sigm(A * v))
FW_LOOP(fw_hswish, r = v * clampf(v + 3.0f, 0.0f, 6.0f) * (1.0f / 6.0f))
FW_LOOP(fw_logsig, float l = v_log1pf(v_expf(-fabsf(v))); r = negpart(v) - l)
FW_LOOP(fw_mish, float l = v_log1pf(v_expf(-fabsf(v))); r = v * v_tanhf(pospart(v) + l))

BW_LOOP(bw_leaky, r = v > 0 ? 1.0f : v != v ? v : A)
BW_LOOP(bw_gelu_erf, r = 0.5f * (1.0f + v_erff(v * SQRT1_2F)) +
                         v * INV_SQRT_2PIF * v_expf(-0.5f * v * v))
BW_LOOP(bw_gelu_tanh, float t = v_tanhf(SQRT_2_PIF * (v + 0.044715f * v * v * v));
        r = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * SQRT_2_PIF *
                                    (1.0f + 3.0f * 0.044715f * v * v))
BW_LOOP(bw_hsig, float u = A * v + B; r = (u > 0 && u < 1) ? A : v != v ? v : 0.0f)
/* beta*x clamped to [-40, 40]: sigmoid is 0 or 1 in float beyond, and the second term
 * then 0 (an infinite beta*x would make it inf*0) */
BW_LOOP(bw_silu, float t = clampf(A * v, -40.0f, 40.0f); float s = sigm(t);
        r = s + t * s * (1.0f - s))
BW_LOOP(bw_hswish, r = v < -3.0f ? 0.0f : v > 3.0f ? 1.0f : (2.0f * v + 3.0f) * (1.0f / 6.0f))
BW_LOOP(bw_logsig, r = 1.0f / (1.0f + v_expf(v)))
BW_LOOP(bw_mish, float l = v_log1pf(v_expf(-fabsf(v))); float t = v_tanhf(pospart(v) + l);
        float s = sigm(v); r = t + v * (1.0f - t * t) * s)

/* elu, selu: e^v in a first pass over a block (a pure call loop: vectorised), the selects
 * in a second (GCC threads a select feeding the call into branches it cannot vectorise).
 * NaN propagates: v > 0 is false and e^NaN is NaN. */
#define ACT_BLOCK 512
#define EXP2_LOOP(nm, GRAD, EXPR)                                                      \
  HEAVY static void nm(int64_t b, int64_t e, void *vc) {                              \
    const act_job *j = vc;                                                            \
    const float A = j->a;                                                             \
    (void)A;                                                                          \
    float t[ACT_BLOCK];                                                               \
    for (int64_t i0 = b; i0 < e; i0 += ACT_BLOCK) {                                   \
      int64_t n = e - i0 < ACT_BLOCK ? e - i0 : ACT_BLOCK;                            \
      const float *restrict x = j->x + i0;                                            \
      float *restrict o = (GRAD ? j->dx : j->o) + i0;                                 \
      for (int64_t k = 0; k < n; k++) t[k] = v_expf(x[k]);                            \
      for (int64_t k = 0; k < n; k++) {                                               \
        float v = x[k], ex = t[k];                                                    \
        o[k] = (EXPR) * (GRAD ? j->og[i0 + k] : 1.0f);                                \
      }                                                                               \
    }                                                                                 \
  }
EXP2_LOOP(fw_elu, 0, v > 0 ? v : A * (ex - 1.0f))
EXP2_LOOP(fw_selu, 0, SELU_L * (v > 0 ? v : SELU_A * (ex - 1.0f)))
EXP2_LOOP(bw_elu, 1, v > 0 ? 1.0f : A * ex)
EXP2_LOOP(bw_selu, 1, SELU_L * (v > 0 ? 1.0f : SELU_A * ex))

/* prelu and rrelu index per element (channel, counter): plain loops. */
static void fw_prelu(int64_t b, int64_t e, void *vc) {
  const act_job *j = vc;
  for (int64_t i = b; i < e; i++) {
    float v = j->x[i], s = j->g[j->C == 1 ? 0 : (i / j->inner) % j->C];
    j->o[i] = v > 0 ? v : s * v;
  }
}
static void fw_rrelu(int64_t b, int64_t e, void *vc) {
  const act_job *j = vc;
  double lo = j->a, span = (double)j->b - j->a;
  for (int64_t i = b; i < e; i++) {
    float v = j->x[i];
    float s = (float)(lo + span * mx_random_unit(mx_random_bits(j->seed, j->first + (uint64_t)i)));
    j->m[i] = s;
    j->o[i] = v > 0 ? v : s * v;
  }
}
static void bw_rrelu(int64_t b, int64_t e, void *vc) {
  const act_job *j = vc;
  for (int64_t i = b; i < e; i++) {
    float v = j->x[i];
    float d = v > 0 ? 1.0f : j->mk[i];
    j->dx[i] = j->og[i] * (v != v ? v : d);
  }
}


int mx_cpu_leaky_relu(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  const struct mx_params_leaky_relu *p = params;
  const mx_tensor *x = in[0];
  if (x->dtype != MX_F32 || !f32ok(p->slope) || !f32ok(p->lower_bound) ||
      !f32ok(p->upper_bound))
    return MX_DECLINE;
  act_job j = {.x = mx_ptr(x), .o = mx_ptr(out[0]), .m = mx_ptr(out[1]), .a = (float)p->slope};
  act_loop f = fw_leaky;
  bool draw = p->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU && p->training;
  if (!draw) /* the (1) mask: the negative slope */
    j.m[0] = p->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU
                 ? (float)(0.5 * (p->lower_bound + p->upper_bound))
                 : p->act_type == MX_LEAKY_RELU_ACT_TYPE_LEAKY ? (float)p->slope : 0.0f;
  switch (p->act_type) {
  case MX_LEAKY_RELU_ACT_TYPE_PRELU:
    f = fw_prelu;
    j.g = mx_ptr(in[1]);
    j.C = in[1]->size;
    j.inner = 1;
    for (int d = 2; d < x->ndim; d++) j.inner *= x->shape[d];
    break;
  case MX_LEAKY_RELU_ACT_TYPE_ELU: f = fw_elu; break;
  case MX_LEAKY_RELU_ACT_TYPE_SELU: f = fw_selu; break;
  case MX_LEAKY_RELU_ACT_TYPE_GELU: f = fw_gelu_erf; break;
  case MX_LEAKY_RELU_ACT_TYPE_RRELU:
    if (draw) {
      f = fw_rrelu;
      j.a = (float)p->lower_bound, j.b = (float)p->upper_bound;
      j.seed = ctx->rng_seed, j.first = ctx->rng_first; /* reserved at dispatch */
    } else {
      j.a = (float)(0.5 * (p->lower_bound + p->upper_bound));
    }
    break;
  default: break;
  }
  return act_go(f, x->size, &j);
}

int mx_cpu_leaky_relu_backward(const mx_kctx *ctx, const void *params, int nin,
                               mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_leaky_relu_backward *p = params;
  /* prelu's dgamma is a per-channel reduction: the ref kernel's single pass does it */
  bool rr = p->act_type == MX_LEAKY_RELU_ACT_TYPE_RRELU;
  if (in[1]->dtype != MX_F32 || p->act_type == MX_LEAKY_RELU_ACT_TYPE_PRELU || !f32ok(p->slope))
    return MX_DECLINE;
  act_job j = {.og = mx_ptr(in[0]), .x = mx_ptr(in[1]), .mk = mx_ptr(in[2]),
               .dx = mx_ptr(out[0]), .a = (float)p->slope};
  if (rr && in[2]->size != in[1]->size) { /* inference's (1) mask: one slope */
    rr = false;
    j.a = ((const float *)mx_ptr(in[2]))[0];
  }
  memset(mx_ptr(out[1]), 0, sizeof(float) * (size_t)out[1]->size);
  act_loop f = bw_leaky;
  switch (p->act_type) {
  case MX_LEAKY_RELU_ACT_TYPE_ELU: f = bw_elu; break;
  case MX_LEAKY_RELU_ACT_TYPE_SELU: f = bw_selu; break;
  case MX_LEAKY_RELU_ACT_TYPE_GELU: f = bw_gelu_erf; break;
  case MX_LEAKY_RELU_ACT_TYPE_RRELU: f = rr ? bw_rrelu : bw_leaky; break;
  default: break;
  }
  return act_go(f, in[1]->size, &j);
}

/* The forward/backward pair of an elementwise activation: f32 here, the rest declined. */
#define ACT_CPU(name, FW, BW, A0, A1)                                                          \
  int mx_cpu_##name(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,     \
                    int nout, mx_tensor *const *out) {                                         \
    double a0 = (A0), a1 = (A1);                                                               \
    if (in[0]->dtype != MX_F32 || out[0]->dtype != MX_F32 || !f32ok(a0) || !f32ok(a1))        \
      return MX_DECLINE;                                                                       \
    act_job j = {.x = mx_ptr(in[0]), .o = mx_ptr(out[0]), .a = (float)a0, .b = (float)a1};    \
    return act_go(FW, in[0]->size, &j);                                                        \
  }                                                                                            \
  int mx_cpu_##name##_backward(const mx_kctx *ctx, const void *params, int nin,                \
                               mx_tensor *const *in, int nout, mx_tensor *const *out) {        \
    double a0 = (A0), a1 = (A1);                                                               \
    if (in[1]->dtype != MX_F32 || !f32ok(a0) || !f32ok(a1))                                    \
      return MX_DECLINE;                                                                       \
    act_job j = {.og = mx_ptr(in[0]), .x = mx_ptr(in[1]), .dx = mx_ptr(out[0]),                \
                 .a = (float)a0, .b = (float)a1};                                              \
    return act_go(BW, in[1]->size, &j);                                                        \
  }
/* <act>_backward's params are the forward's, same order: read through the forward's struct */
#define PF_(name, f) (((const struct mx_params_##name *)params)->f)
#define IS_TANH (((const struct mx_params_gelu *)params)->approximation == MX_GELU_APPROXIMATION_TANH)
ACT_CPU(hard_sigmoid, fw_hsig, bw_hsig, PF_(hard_sigmoid, alpha), PF_(hard_sigmoid, beta))
ACT_CPU(silu, fw_silu, bw_silu, PF_(silu, beta), 0)
ACT_CPU(hard_swish, fw_hswish, bw_hswish, 0, 0)
ACT_CPU(gelu, IS_TANH ? fw_gelu_tanh : fw_gelu_erf, IS_TANH ? bw_gelu_tanh : bw_gelu_erf, 0, 0)
ACT_CPU(log_sigmoid, fw_logsig, bw_logsig, 0, 0)
ACT_CPU(mish, fw_mish, bw_mish, 0, 0)
