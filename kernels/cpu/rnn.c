/* kernels/cpu/rnn.c — the rnn family's fast CPU kernels, GEMM-based: per layer and
 * direction one GEMM of the whole sequence's inputs by the i2h weights, then per step one
 * GEMM of the states by the h2h weights and the gate math fused over the batch. The
 * backward recomputes that forward keeping every step's gates, runs the steps backwards
 * with one (N x GH) . (GH x H) GEMM each, then forms the weight and input gradients of
 * the whole sequence with three large GEMMs. Inference without sequence lengths runs
 * everything transposed instead (fwd_dir_t: gates (GH, T*N),
 * step GEMM Wh . h^T), which suits the sgemm better. GEMMs on the BLAS layer (gemm.h).
 * lstm state clipping is not this kernel's (its supports: dispatch runs the ref kernel).
 * The body below is compiled twice, for float and double (this file includes itself). */
#ifndef RNN_REAL
#include "rnn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "mx_kernels_gen.h"

/* the per-call constants both bodies use */
typedef struct rnn_call {
  const mx_rnn_geom *g;
  const int64_t *len;   /* (N) valid steps */
  bool train;           /* keep the history for the backward */
} rnn_call;

static int lengths(const mx_tensor *sl, const mx_rnn_geom *g, int64_t *len) {
  for (int64_t n = 0; n < g->N; n++) {
    int64_t v = g->T;
    if (sl) {
      double d = mx_load_f64(mx_ptr(sl), sl->dtype, n);
      if (!(d >= 0 && d <= (double)g->T) || d != floor(d))
        return mx_err(MX_EINVAL, "rnn: sequence_length[%lld] = %g must be an integer in "
                      "0..%lld (seq_len)", (long long)n + 1, d, (long long)g->T);
      v = (int64_t)d;
    }
    len[n] = v;
  }
  return MX_OK;
}

/* Vectorised gate nonlinearities for float (the loops auto-vectorise; AVX-512 clone at
 * run time): exp by range reduction x = k ln2 + r, a degree-6 polynomial for e^r on
 * |r| <= ln2/2 and 2^k from the exponent bits (~2 ulp on the range used);
 * sigmoid = 1/(1+e^-x), tanh(x) = 2 sigmoid(2x) - 1 (absolute error ~1e-7). libm's
 * expf/tanhf per element were 40% of the LSTM forward. */
#ifdef __SANITIZE_THREAD__ /* ThreadSanitizer cannot run the ifunc resolvers clones need */
#define HEAVY
#else
#define HEAVY __attribute__((target_clones("avx512f", "default")))
#endif
static inline float fast_expf(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float kf = x * 1.44269504088896341f;
  kf = (kf + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = x - kf * 0.693145751953125f - kf * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = ((int32_t)kf + 127) << 23;
  float sc;
  memcpy(&sc, &bits, sizeof sc);
  return p * sc;
}
HEAVY static void vsig_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + fast_expf(-x[i]));
}
HEAVY static void vtanh_f32(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 2.0f / (1.0f + fast_expf(-2.0f * x[i])) - 1.0f;
}
static void vsig_f64(double *y, const double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = 1.0 / (1.0 + exp(-x[i]));
}
static void vtanh_f64(double *y, const double *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = tanh(x[i]);
}
/* y = a + b over n */
HEAVY static void vadd_f32(float *y, const float *a, const float *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}
static void vadd_f64(double *y, const double *a, const double *b, int64_t n) {
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

/* The inference path's step math in the transposed layout (rnn_fwd_t below): gate k of
 * unit u for the N samples is the row a + (k*H + u)*ld (the step's bias b[k*H + u] is
 * added here, not in a pass of its own); the cell is (H, N), the state is written as
 * rows h + u*ldh. One pass per step, the batch innermost (vectorised over the samples). */
HEAVY static void lstm_step_f32(const float *a, int64_t ld, const float *b, int64_t H,
                                int64_t N, float *c, float *h, int64_t ldh) {
  for (int64_t u = 0; u < H; u++) {
    const float *ai = a + u * ld, *af = ai + H * ld, *ag = af + H * ld, *ao = ag + H * ld;
    float bi = b[u], bf = b[H + u], bg = b[2 * H + u], bo = b[3 * H + u];
    float *cu = c + u * N, *hu = h + u * ldh;
    for (int64_t n = 0; n < N; n++) {
      float ig = 1.0f / (1.0f + fast_expf(-(ai[n] + bi)));
      float fg = 1.0f / (1.0f + fast_expf(-(af[n] + bf)));
      float gg = 2.0f / (1.0f + fast_expf(-2.0f * (ag[n] + bg))) - 1.0f;
      float og = 1.0f / (1.0f + fast_expf(-(ao[n] + bo)));
      float cv = fg * cu[n] + ig * gg;
      cu[n] = cv;
      hu[n] = og * (2.0f / (1.0f + fast_expf(-2.0f * cv)) - 1.0f);
    }
  }
}
static void lstm_step_f64(const double *a, int64_t ld, const double *b, int64_t H, int64_t N,
                          double *c, double *h, int64_t ldh) {
  for (int64_t u = 0; u < H; u++) {
    const double *ai = a + u * ld, *af = ai + H * ld, *ag = af + H * ld, *ao = ag + H * ld;
    double *cu = c + u * N, *hu = h + u * ldh;
    for (int64_t n = 0; n < N; n++) {
      double ig = 1.0 / (1.0 + exp(-(ai[n] + b[u]))), fg = 1.0 / (1.0 + exp(-(af[n] + b[H + u])));
      double og = 1.0 / (1.0 + exp(-(ao[n] + b[3 * H + u])));
      double cv = fg * cu[n] + ig * tanh(ag[n] + b[2 * H + u]);
      cu[n] = cv;
      hu[n] = og * tanh(cv);
    }
  }
}
/* rnn_tanh / rnn_relu: h = f(a + b) */
HEAVY static void act_step_f32(const float *a, int64_t ld, const float *b, int64_t H, int64_t N,
                               bool th, float *h, int64_t ldh) {
  for (int64_t u = 0; u < H; u++) {
    const float *au = a + u * ld;
    float bu = b[u], *hu = h + u * ldh;
    if (th)
      for (int64_t n = 0; n < N; n++)
        hu[n] = 2.0f / (1.0f + fast_expf(-2.0f * (au[n] + bu))) - 1.0f;
    else
      for (int64_t n = 0; n < N; n++) hu[n] = au[n] + bu > 0 ? au[n] + bu : 0;
  }
}
static void act_step_f64(const double *a, int64_t ld, const double *b, int64_t H, int64_t N,
                         bool th, double *h, int64_t ldh) {
  for (int64_t u = 0; u < H; u++) {
    const double *au = a + u * ld;
    double *hu = h + u * ldh;
    for (int64_t n = 0; n < N; n++) {
      double v = au[n] + b[u];
      hu[n] = th ? tanh(v) : (v > 0 ? v : 0);
    }
  }
}
/* gru: r, z from the i2h rows a plus the h2h rows g (ld N) plus both biases; the new gate
 * n = tanh(a_n + bx_n + r * (g_n + bh_n)); h = (1 - z) n + z h_prev (rows hp + u*ldp) */
HEAVY static void gru_step_f32(const float *a, int64_t ld, const float *g, const float *bx,
                               const float *bh, int64_t H, int64_t N, const float *hp,
                               int64_t ldp, float *h, int64_t ldh) {
  for (int64_t u = 0; u < H; u++) {
    const float *ar = a + u * ld, *az = ar + H * ld, *an = az + H * ld;
    const float *gr = g + u * N, *gz = gr + H * N, *gn = gz + H * N, *pu = hp + u * ldp;
    float br = bx[u] + bh[u], bz = bx[H + u] + bh[H + u], bn = bx[2 * H + u],
          bhn = bh[2 * H + u], *hu = h + u * ldh;
    for (int64_t n = 0; n < N; n++) {
      float rg = 1.0f / (1.0f + fast_expf(-(ar[n] + gr[n] + br)));
      float zg = 1.0f / (1.0f + fast_expf(-(az[n] + gz[n] + bz)));
      float v = an[n] + bn + rg * (gn[n] + bhn);
      float ng = 2.0f / (1.0f + fast_expf(-2.0f * v)) - 1.0f;
      hu[n] = (1 - zg) * ng + zg * pu[n];
    }
  }
}
static void gru_step_f64(const double *a, int64_t ld, const double *g, const double *bx,
                         const double *bh, int64_t H, int64_t N, const double *hp, int64_t ldp,
                         double *h, int64_t ldh) {
  for (int64_t u = 0; u < H; u++) {
    const double *ar = a + u * ld, *az = ar + H * ld, *an = az + H * ld;
    const double *gr = g + u * N, *gz = gr + H * N, *gn = gz + H * N, *pu = hp + u * ldp;
    double *hu = h + u * ldh;
    for (int64_t n = 0; n < N; n++) {
      double rg = 1.0 / (1.0 + exp(-(ar[n] + gr[n] + bx[u] + bh[u])));
      double zg = 1.0 / (1.0 + exp(-(az[n] + gz[n] + bx[H + u] + bh[H + u])));
      double ng = tanh(an[n] + bx[2 * H + u] + rg * (gn[n] + bh[2 * H + u]));
      hu[n] = (1 - zg) * ng + zg * pu[n];
    }
  }
}
/* dst (C x R, ldd) = src (R x C, lds)^T, in 16 x 16 tiles (both sides stay in cache) */
#define TRANSPOSE(S, T)                                                                    \
  static void S(T *dst, int64_t ldd, const T *src, int64_t lds, int64_t R, int64_t C) {    \
    for (int64_t r0 = 0; r0 < R; r0 += 16)                                                 \
      for (int64_t c0 = 0; c0 < C; c0 += 16) {                                             \
        int64_t r1 = r0 + 16 < R ? r0 + 16 : R, c1 = c0 + 16 < C ? c0 + 16 : C;            \
        for (int64_t c = c0; c < c1; c++)                                                  \
          for (int64_t r = r0; r < r1; r++) dst[c * ldd + r] = src[r * lds + c];           \
      }                                                                                    \
  }
TRANSPOSE(transpose_f32, float)
TRANSPOSE(transpose_f64, double)
#undef TRANSPOSE

#define RNN_REAL float
#define RNN_S(x) x##_f32
#include "rnn.c"
#undef RNN_REAL
#undef RNN_S
#define RNN_REAL double
#define RNN_S(x) x##_f64
#include "rnn.c"

/* lstm state clipping (lstm_state_clip_min/max) and the projection (LSTMP) are the ref
 * kernel's */
bool mx_cpu_rnn_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                         int nin, const mx_desc *in, int nout, const mx_desc *out,
                         const char **why) {
  mx_rnn_geom g;
  if (mx_rnn_geom_fwd("rnn", params, in[0].shape, &g) || (!g.clip && !g.proj)) return true;
  *why = "lstm state clipping and projection_size run the reference kernel";
  return false;
}
bool mx_cpu_rnn_backward_supports(const mx_op_def *def, const void *params,
                                  const mx_op_info *info, int nin, const mx_desc *in, int nout,
                                  const mx_desc *out, const char **why) {
  mx_rnn_geom g;
  if (mx_rnn_geom_bwd("rnn_backward", params, in[0].shape, &g) || (!g.clip && !g.proj))
    return true;
  *why = "lstm state clipping and projection_size run the reference kernel";
  return false;
}

int mx_cpu_rnn(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in, int nout,
               mx_tensor *const *out) {
  const struct mx_params_rnn *P = params;
  mx_rnn_geom g;
  int rc = mx_rnn_geom_fwd("rnn", P, in[0]->shape, &g);
  if (rc || (rc = mx_cpu_blas_ready("rnn"))) return rc;
  bool lstm = g.mode == MX_RNN_MODE_LSTM;
  int k = P->state_outputs ? (lstm ? 3 : 2) : 1;
  bool dropout = P->training && g.p > 0 && g.L > 1;
  const mx_tensor *mask = dropout ? out[k] : NULL;
  const mx_tensor *reserve = P->training ? out[nout - 1] : NULL;
  if (mask) { /* the same draws as the ref kernel: counter i -> mask element i */
    double keep = 1.0 / (1.0 - g.p);
    for (int64_t i = 0; i < mask->size; i++) {
      double u = mx_random_unit(mx_random_bits(ctx->rng_seed, ctx->rng_first + (uint64_t)i));
      mx_store_f64(mx_ptr(mask), mask->dtype, i, u >= g.p ? keep : 0.0);
    }
  }
  const mx_tensor *c0 = lstm ? in[3] : NULL, *sl = g.seqlen ? in[nin - 1] : NULL;
  const mx_tensor *hy = P->state_outputs ? out[1] : NULL;
  const mx_tensor *cy = P->state_outputs && lstm ? out[2] : NULL;
  if (in[0]->dtype == MX_F32)
    return rnn_forward_f32(ctx, &g, in[0], in[1], in[2], c0, sl, mask, out[0], hy, cy, reserve);
  return rnn_forward_f64(ctx, &g, in[0], in[1], in[2], c0, sl, mask, out[0], hy, cy, reserve);
}

int mx_cpu_rnn_backward(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  const struct mx_params_rnn_backward *P = params;
  mx_rnn_geom g;
  int rc = mx_rnn_geom_bwd("rnn_backward", P, in[0]->shape, &g);
  if (rc || (rc = mx_cpu_blas_ready("rnn_backward"))) return rc;
  if (in[0]->dtype == MX_F32)
    return rnn_backward_f32(ctx, &g, P->use_mask, P->use_reserve, P->data_grad, in, out);
  return rnn_backward_f64(ctx, &g, P->use_mask, P->use_reserve, P->data_grad, in, out);
}

#else /* ---------------------------------------------------------------- typed body */
typedef RNN_REAL RNN_S(real);
#define real RNN_S(real)

/* C (M x N, ldc) = op(A) . op(B) + beta C, row-major; op = transpose when ta/tb. */
static void RNN_S(gemm)(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const real *A,
                        int64_t lda, const real *B, int64_t ldb, real beta, real *C,
                        int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) C[m * ldc + n] = beta == 0 ? 0 : beta * C[m * ldc + n];
    return;
  }
  /* cannot fail: mx_cpu_rnn / mx_cpu_rnn_backward made the BLAS ready on this thread */
  mx_cpu_gemm_ld("rnn", sizeof(real) == 4 ? MX_F32 : MX_F64, ta, tb, M, N, K, 1.0, A, lda, B,
                 ldb, (double)beta, C, ldc);
}

/* The history of one layer and direction, rows t*N + n (training only but act). */
typedef struct RNN_S(hist) {
  real *act;   /* (TN, GH): pre-activations, then the gate activations */
  real *hp;    /* (TN, H): the state before the step */
  real *cp;    /* lstm: the cell before the step */
  real *aux;   /* lstm: tanh(c'); gru: W_hn h + b_hn */
} RNN_S(hist);

/* The scratch of a call, carved from one block: sizes in elements. */
typedef struct RNN_S(ws) {
  RNN_S(hist) *h;       /* [L*D] */
  real **y;             /* y[l]: layer l's output (TN, DH); the top one is `out` */
  real **in;            /* in[l]: layer l's input (TN, in_l) */
  real *hs, *cs, *hg;   /* (N, H), (N, H), (N, GH) */
  real *tc;             /* (H): tanh(c') / W_hn h + b_hn at inference */
  real *yt;             /* rnn_fwd_t's top layer output (DH, TN), else NULL */
} RNN_S(ws);

/* One layer and direction at inference without sequence lengths (every mode), in the
 * transposed layout: the gates are (GH, TN) = Wx . X^T, and each step
 * adds Wh (GH x H) . h^T (H x N) into its N columns. That step GEMM (M = GH, N = batch)
 * runs ~1.3x faster in oneDNN's sgemm than the row-major (N x H) . (H x GH)^T one (235 vs
 * 180 GFLOP/s at 1024 x 32 x 256, one thread), and it is half the forward's work. The
 * layer's output is kept transposed too, YT (DH, TN): a step's state is its N columns
 * there (the next step's GEMM operand as is), and YT is the next layer's X^T; only the
 * top layer's is transposed back (rnn_forward). A zero initial state skips the first
 * step's h2h GEMM. XT: this layer's input transposed (NULL for layer 0: x as given). */
static void RNN_S(fwd_dir_t)(const mx_rnn_geom *g, RNN_S(ws) *w, int l, int d, const real *W,
                             const real *X, const real *XT, real *YT, const real *h0,
                             const real *c0, real *hy, real *cy) {
  int64_t T = g->T, N = g->N, H = g->H, GH = (int64_t)g->G * H, TN = T * N,
          in = mx_rnn_in(g, l);
  bool lstm = g->mode == MX_RNN_MODE_LSTM, th = g->mode == MX_RNN_MODE_RNN_TANH,
       gru = g->mode == MX_RNN_MODE_GRU;
  int64_t owx, owh, obx, obh;
  mx_rnn_offsets(g, l, d, &owx, &owh, &obx, &obh);
  const real *Wx = W + owx, *Wh = W + owh, *bx = W + obx, *bh = W + obh;
  /* (the combined bias in the scratch hg: gru uses hg for its h2h product instead) */
  real *A = w->h[0].act, *h0T = w->hs, *cT = w->cs, *b = w->hg;
  if (XT)
    RNN_S(gemm)(false, false, GH, TN, in, Wx, in, XT, TN, 0, A, TN);
  else
    RNN_S(gemm)(false, true, GH, TN, in, Wx, in, X, in, 0, A, TN);
  if (!gru)
    for (int64_t j = 0; j < GH; j++) b[j] = bx[j] + bh[j];
  int64_t so = (int64_t)(l * g->D + d) * N * H;
  bool zero = true;
  for (int64_t i = 0; i < N * H; i++) zero = zero && h0[so + i] == 0;
  RNN_S(transpose)(h0T, N, h0 + so, H, N, H);
  if (lstm) RNN_S(transpose)(cT, N, c0 + so, H, N, H);
  real *Yd = YT + d * H * TN; /* this direction's rows of YT */
  const real *hp = h0T;
  int64_t ldp = N;
  for (int64_t s = 0; s < T; s++) {
    int64_t t = d == 0 ? s : T - 1 - s;
    real *a = A + t * N, *hn = Yd + t * N;
    if (gru) { /* W_hn h stays apart (inside r * (.)): the h2h product in scratch */
      real *G = w->hg;
      if (s > 0 || !zero)
        RNN_S(gemm)(false, false, GH, N, H, Wh, H, hp, ldp, 0, G, N);
      else
        memset(G, 0, sizeof(real) * (size_t)(GH * N));
      RNN_S(gru_step)(a, TN, G, bx, bh, H, N, hp, ldp, hn, TN);
    } else {
      if (s > 0 || !zero) RNN_S(gemm)(false, false, GH, N, H, Wh, H, hp, ldp, 1, a, TN);
      if (lstm)
        RNN_S(lstm_step)(a, TN, b, H, N, cT, hn, TN);
      else
        RNN_S(act_step)(a, TN, b, H, N, th, hn, TN);
    }
    hp = hn;
    ldp = TN;
  }
  if (hy) RNN_S(transpose)(hy + so, H, hp, ldp, H, N);
  if (cy && lstm) RNN_S(transpose)(cy + so, H, cT, N, H, N);
}

/* Runs the forward over every layer; the history in w (allocated by the caller). */
static void RNN_S(fwd_layers)(const rnn_call *rc, RNN_S(ws) *w, const real *W, const real *h0,
                              const real *c0, const real *mask, real *hy, real *cy) {
  const mx_rnn_geom *g = rc->g;
  int64_t T = g->T, N = g->N, H = g->H, GH = (int64_t)g->G * H, DH = (int64_t)g->D * H,
          TN = T * N;
  int L = g->L, D = g->D, mode = g->mode;
  bool lstm = mode == MX_RNN_MODE_LSTM, gru = mode == MX_RNN_MODE_GRU;
  const int64_t *len = rc->len;
  if (w->yt) { /* inference without lengths: rnn_fwd_t's transposed layout */
    for (int l = 0; l < L; l++) {
      real *YT = l < L - 1 ? w->in[l + 1] : w->yt;
      for (int d = 0; d < D; d++)
        RNN_S(fwd_dir_t)(g, w, l, d, W, w->in[0], l > 0 ? w->in[l] : NULL, YT, h0, c0, hy, cy);
    }
    RNN_S(transpose)(w->y[L - 1], DH, w->yt, TN, DH, TN);
    return;
  }
  for (int l = 0; l < L; l++) {
    int64_t in = mx_rnn_in(g, l);
    if (l > 0 && mask) { /* in place: in[l] is y[l - 1] */
      const real *m = mask + (int64_t)(l - 1) * TN * DH;
      real *v = w->in[l];
      for (int64_t i = 0; i < TN * DH; i++) v[i] *= m[i];
    }
    const real *X = w->in[l];
    real *Y = w->y[l];
    if (g->seqlen) memset(Y, 0, sizeof(real) * (size_t)(TN * DH));
    for (int d = 0; d < D; d++) {
      RNN_S(hist) *q = &w->h[l * D + d];
      int64_t owx, owh, obx, obh;
      mx_rnn_offsets(g, l, d, &owx, &owh, &obx, &obh);
      const real *Wx = W + owx, *Wh = W + owh, *bx = W + obx, *bh = W + obh;
      real *A = q->act;
      RNN_S(gemm)(false, true, TN, GH, in, X, in, Wx, in, 0, A, GH);
      int64_t nb = gru ? 2 * H : GH; /* gru's b_hn goes inside r*(.) */
      for (int64_t r = 0; r < TN; r++) {
        real *a = A + r * GH;
        for (int64_t j = 0; j < nb; j++) a[j] += bx[j] + bh[j];
        for (int64_t j = nb; j < GH; j++) a[j] += bx[j];
      }
      if (rc->train && g->seqlen) memset(q->hp, 0, sizeof(real) * (size_t)(TN * H));
      int64_t so = (int64_t)(l * D + d) * N * H;
      real *hs = w->hs, *cs = w->cs, *hg = w->hg;
      memcpy(hs, h0 + so, sizeof(real) * (size_t)(N * H));
      if (lstm) memcpy(cs, c0 + so, sizeof(real) * (size_t)(N * H));
      /* the step's rows are one block (every sample at the same t) unless a reverse
       * direction runs over lengths: then the h2h GEMM adds into them in place (gru
       * keeps W_hn h apart) */
      bool fuse = !gru && (d == 0 || !g->seqlen);
      for (int64_t s = 0; s < T; s++) {
        if (fuse)
          RNN_S(gemm)(false, true, N, GH, H, hs, H, Wh, H, 1, A + (d == 0 ? s : T - 1 - s) * N * GH,
                      GH);
        else
          RNN_S(gemm)(false, true, N, GH, H, hs, H, Wh, H, 0, hg, GH);
        for (int64_t n = 0; n < N; n++) {
          if (s >= len[n]) continue;
          int64_t t = d == 0 ? s : len[n] - 1 - s, row = t * N + n;
          real *a = A + row * GH, *hn = hs + n * H, *cn = cs + n * H;
          const real *b = fuse ? NULL : hg + n * GH;
          real *yv = Y + row * DH + d * H;
          if (rc->train) {
            memcpy(q->hp + row * H, hn, sizeof(real) * (size_t)H);
            if (lstm) memcpy(q->cp + row * H, cn, sizeof(real) * (size_t)H);
          }
          if (lstm) {
            real *ax = rc->train ? q->aux + row * H : w->tc;
            if (b) RNN_S(vadd)(a, a, b, GH);
            RNN_S(vsig)(a, a, 2 * H);
            RNN_S(vtanh)(a + 2 * H, a + 2 * H, H);
            RNN_S(vsig)(a + 3 * H, a + 3 * H, H);
            for (int64_t u = 0; u < H; u++) cn[u] = a[H + u] * cn[u] + a[u] * a[2 * H + u];
            RNN_S(vtanh)(ax, cn, H);
            for (int64_t u = 0; u < H; u++) yv[u] = hn[u] = a[3 * H + u] * ax[u];
          } else if (gru) {
            real *ax = rc->train ? q->aux + row * H : w->tc;
            RNN_S(vadd)(a, a, b, 2 * H);
            RNN_S(vsig)(a, a, 2 * H);
            RNN_S(vadd)(ax, b + 2 * H, bh + 2 * H, H);
            for (int64_t u = 0; u < H; u++) a[2 * H + u] += a[u] * ax[u];
            RNN_S(vtanh)(a + 2 * H, a + 2 * H, H);
            for (int64_t u = 0; u < H; u++) {
              real zg = a[H + u];
              yv[u] = hn[u] = (1 - zg) * a[2 * H + u] + zg * hn[u];
            }
          } else if (mode == MX_RNN_MODE_RNN_TANH) {
            if (b) RNN_S(vadd)(a, a, b, H);
            RNN_S(vtanh)(a, a, H);
            for (int64_t u = 0; u < H; u++) yv[u] = hn[u] = a[u];
          } else {
            for (int64_t u = 0; u < H; u++) {
              real v = a[u] + (b ? b[u] : 0);
              yv[u] = hn[u] = a[u] = v > 0 ? v : 0;
            }
          }
        }
      }
      if (hy) memcpy(hy + so, hs, sizeof(real) * (size_t)(N * H));
      if (cy && lstm) memcpy(cy + so, cs, sizeof(real) * (size_t)(N * H));
    }
  }
}

/* Carves the scratch; false when out of memory. out: the top layer's output buffer.
 * train: keep every layer's history in rnn.h's reserve layout, in `reserve` when given,
 * else in the scratch. Layer l's output is layer l+1's input buffer (the dropout mask is
 * applied in place: nothing reads the unmasked output of a lower layer). extra elements
 * of scratch more at *extra_p. */
static bool RNN_S(ws_make)(const mx_kctx *ctx, const mx_rnn_geom *g, bool train,
                           const real *x, real *out, real *reserve, RNN_S(ws) *w, size_t extra,
                           real **extra_p) {
  int64_t T = g->T, N = g->N, H = g->H, GH = (int64_t)g->G * H, DH = (int64_t)g->D * H,
          TN = T * N;
  int L = g->L, D = g->D;
  bool lstm = g->mode == MX_RNN_MODE_LSTM, gru = g->mode == MX_RNN_MODE_GRU;
  size_t rlen = (size_t)mx_rnn_reserve_len(g), inl = (size_t)(L - 1) * (size_t)(TN * DH);
  size_t nreal = (train ? (reserve ? 0 : rlen) : (size_t)(TN * GH) + inl) +
                 (size_t)(N * H) * 2 + (size_t)(N * GH) + (size_t)H + extra + 80;
  size_t bytes = nreal * sizeof(real) + (size_t)(L * D) * sizeof(RNN_S(hist)) +
                 (size_t)L * 2 * sizeof(real *) + 64;
  char *b = mx_kctx_workspace(ctx, bytes);
  if (!b) return false;
  w->h = (RNN_S(hist) *)b;
  b += (size_t)(L * D) * sizeof(RNN_S(hist));
  w->y = (real **)b;
  w->in = w->y + L;
  b += (size_t)L * 2 * sizeof(real *);
  b = (char *)(((uintptr_t)b + 63) & ~(uintptr_t)63);
  real *p = (real *)b;
  if (train && !reserve) { reserve = p; p += rlen; }
  real *hb = train ? reserve : p; /* the history, then the layer inputs */
  for (int k = 0; k < L * D; k++) {
    RNN_S(hist) *q = &w->h[k];
    if (!train && k > 0) { *q = w->h[0]; continue; }
    q->act = hb; hb += TN * GH;
    q->hp = q->cp = q->aux = NULL;
    if (train) {
      q->hp = hb; hb += TN * H;
      if (lstm) { q->cp = hb; hb += TN * H; }
      if (lstm || gru) { q->aux = hb; hb += TN * H; }
    }
  }
  w->in[0] = (real *)x;
  for (int l = 1; l < L; l++) { w->in[l] = hb; hb += TN * DH; }
  for (int l = 0; l < L - 1; l++) w->y[l] = w->in[l + 1];
  w->y[L - 1] = out;
  if (!train) p = hb;
  w->hs = p; p += N * H;
  w->cs = p; p += N * H;
  w->hg = p; p += N * GH;
  w->tc = p; p += H;
  w->yt = NULL;
  if (extra_p) *extra_p = p;
  return true;
}

static int RNN_S(rnn_forward)(const mx_kctx *ctx, const mx_rnn_geom *g, const mx_tensor *x,
                              const mx_tensor *w, const mx_tensor *h0, const mx_tensor *c0,
                              const mx_tensor *sl, const mx_tensor *mask, const mx_tensor *out,
                              const mx_tensor *hy, const mx_tensor *cy,
                              const mx_tensor *reserve) {
  int64_t *len = malloc(sizeof(int64_t) * (size_t)(g->N > 0 ? g->N : 1));
  if (!len) return mx_err(MX_ENOMEM, "rnn: out of memory");
  int rc = lengths(sl, g, len);
  if (rc) { free(len); return rc; }
  rnn_call c = {g, len, reserve != NULL};
  RNN_S(ws) ws;
  /* inference without lengths: the transposed path, whose top layer needs
   * its output transposed in scratch */
  bool tr = !reserve && !g->seqlen;
  real *yt = NULL;
  if (!RNN_S(ws_make)(ctx, g, reserve != NULL, mx_ptr(x), mx_ptr(out),
                      reserve ? mx_ptr(reserve) : NULL, &ws,
                      tr ? (size_t)(g->T * g->N * g->D * g->H) : 0, tr ? &yt : NULL)) {
    free(len);
    return mx_err(MX_ENOMEM, "rnn: out of memory for the scratch");
  }
  ws.yt = yt;
  RNN_S(fwd_layers)(&c, &ws, mx_ptr(w), mx_ptr(h0), c0 ? mx_ptr(c0) : NULL,
                    mask ? mx_ptr(mask) : NULL, hy ? mx_ptr(hy) : NULL, cy ? mx_ptr(cy) : NULL);
  free(len);
  return MX_OK;
}

/* in: data, parameters, state, state_cell, sequence_length, mask, dout, dhy, dcy */
static int RNN_S(rnn_backward)(const mx_kctx *ctx, const mx_rnn_geom *g, bool use_mask,
                               bool use_reserve, bool data_grad, mx_tensor *const *in,
                               mx_tensor *const *out) {
  int64_t T = g->T, N = g->N, H = g->H, GH = (int64_t)g->G * H, DH = (int64_t)g->D * H,
          TN = T * N, NI = g->I;
  int L = g->L, D = g->D, mode = g->mode;
  bool lstm = mode == MX_RNN_MODE_LSTM, gru = mode == MX_RNN_MODE_GRU;
  int64_t *len = malloc(sizeof(int64_t) * (size_t)(N > 0 ? N : 1));
  if (!len) return mx_err(MX_ENOMEM, "rnn_backward: out of memory");
  int rc = lengths(g->seqlen ? in[4] : NULL, g, len);
  if (rc) { free(len); return rc; }
  int64_t maxin = NI > DH ? NI : DH;
  /* backward scratch: dA, dAh (gru), dIn, dY, the top output, dh, dc, gather, tmp */
  size_t extra = (size_t)(TN * GH) * (gru ? 2 : 1) + (size_t)(TN * maxin) +
                 (size_t)(TN * DH) * 2 + (size_t)(N * H) * 3 + (size_t)(N * GH) + 64;
  real *e;
  RNN_S(ws) ws;
  const real *mask = use_mask ? mx_ptr(in[5]) : NULL;
  /* the top layer's output goes to scratch (the backward needs no copy of it) */
  real *reserve = use_reserve ? mx_ptr(in[9]) : NULL;
  if (!RNN_S(ws_make)(ctx, g, true, mx_ptr(in[0]), NULL, reserve, &ws, extra, &e)) {
    free(len);
    return mx_err(MX_ENOMEM, "rnn_backward: out of memory for the scratch");
  }
  real *dA = e; e += TN * GH;
  real *dAh = dA;
  if (gru) { dAh = e; e += TN * GH; }
  real *dIn = e; e += TN * maxin;
  real *dY = e; e += TN * DH;
  ws.y[L - 1] = e; e += TN * DH;
  real *dh = e; e += N * H;
  real *dc = e; e += N * H;
  real *tmp = e; e += N * H;
  real *gb = e;
  rnn_call c = {g, len, true};
  const real *W = mx_ptr(in[1]);
  if (!reserve) /* recompute the forward's history */
    RNN_S(fwd_layers)(&c, &ws, W, mx_ptr(in[2]), lstm ? mx_ptr(in[3]) : NULL, mask, NULL, NULL);
  real *dW = mx_ptr(out[1]);
  memset(dW, 0, sizeof(real) * (size_t)g->nparam);
  real *dh0 = mx_ptr(out[2]), *dc0 = mx_ptr(out[3]);
  memset(dc0, 0, sizeof(real) * (size_t)(L * D * N * H));
  const real *dout = mx_ptr(in[6]), *dhy = mx_ptr(in[7]), *dcy = mx_ptr(in[8]);
  memcpy(dY, dout, sizeof(real) * (size_t)(TN * DH));
  for (int l = L - 1; l >= 0; l--) {
    int64_t inl = mx_rnn_in(g, l);
    real *dX = l == 0 ? (real *)mx_ptr(out[0]) : dIn;
    for (int d = 0; d < D; d++) {
      RNN_S(hist) *q = &ws.h[l * D + d];
      int64_t owx, owh, obx, obh;
      mx_rnn_offsets(g, l, d, &owx, &owh, &obx, &obh);
      const real *Wx = W + owx, *Wh = W + owh;
      if (g->seqlen) {
        memset(dA, 0, sizeof(real) * (size_t)(TN * GH));
        if (gru) memset(dAh, 0, sizeof(real) * (size_t)(TN * GH));
      }
      int64_t so = (int64_t)(l * D + d) * N * H;
      memcpy(dh, dhy + so, sizeof(real) * (size_t)(N * H));
      if (lstm) memcpy(dc, dcy + so, sizeof(real) * (size_t)(N * H));
      for (int64_t s = T - 1; s >= 0; s--) {
        for (int64_t n = 0; n < N; n++) {
          real *gr = gb + n * GH;
          if (s >= len[n]) { memset(gr, 0, sizeof(real) * (size_t)GH); continue; }
          int64_t t = d == 0 ? s : len[n] - 1 - s, row = t * N + n;
          const real *a = q->act + row * GH, *dy = dY + row * DH + d * H;
          real *da = dA + row * GH, *dn = dh + n * H;
          for (int64_t u = 0; u < H; u++) dn[u] += dy[u];
          if (lstm) {
            const real *tc = q->aux + row * H, *cp = q->cp + row * H;
            real *dcn = dc + n * H;
            for (int64_t u = 0; u < H; u++) {
              real ig = a[u], fg = a[H + u], gg = a[2 * H + u], og = a[3 * H + u];
              real dct = dcn[u] + dn[u] * og * (1 - tc[u] * tc[u]);
              da[u] = dct * gg * ig * (1 - ig);
              da[H + u] = dct * cp[u] * fg * (1 - fg);
              da[2 * H + u] = dct * ig * (1 - gg * gg);
              da[3 * H + u] = dn[u] * tc[u] * og * (1 - og);
              dcn[u] = dct * fg;
              dn[u] = 0;
            }
            memcpy(gr, da, sizeof(real) * (size_t)GH);
          } else if (gru) {
            const real *hp = q->hp + row * H, *hnv = q->aux + row * H;
            real *dah = dAh + row * GH;
            for (int64_t u = 0; u < H; u++) {
              real rg = a[u], zg = a[H + u], ng = a[2 * H + u];
              real dan = dn[u] * (1 - zg) * (1 - ng * ng);
              da[u] = dah[u] = dan * hnv[u] * rg * (1 - rg);
              da[H + u] = dah[H + u] = dn[u] * (hp[u] - ng) * zg * (1 - zg);
              da[2 * H + u] = dan;
              dah[2 * H + u] = dan * rg;
              dn[u] = dn[u] * zg;
            }
            memcpy(gr, dah, sizeof(real) * (size_t)GH);
          } else {
            bool th = mode == MX_RNN_MODE_RNN_TANH;
            for (int64_t u = 0; u < H; u++) {
              real hv = a[u];
              da[u] = dn[u] * (th ? 1 - hv * hv : (hv > 0 ? 1 : 0));
              dn[u] = 0;
            }
            memcpy(gr, da, sizeof(real) * (size_t)GH);
          }
        }
        /* dh += gather . Wh for the samples that took this step */
        RNN_S(gemm)(false, false, N, H, GH, gb, GH, Wh, H, 0, tmp, H);
        for (int64_t n = 0; n < N; n++) {
          if (s >= len[n]) continue;
          for (int64_t u = 0; u < H; u++) dh[n * H + u] += tmp[n * H + u];
        }
      }
      memcpy(dh0 + so, dh, sizeof(real) * (size_t)(N * H));
      if (lstm) memcpy(dc0 + so, dc, sizeof(real) * (size_t)(N * H));
      /* the whole sequence's weight, bias and input gradients */
      RNN_S(gemm)(true, false, GH, inl, TN, dA, GH, ws.in[l], inl, 0, dW + owx, inl);
      RNN_S(gemm)(true, false, GH, H, TN, dAh, GH, q->hp, H, 0, dW + owh, H);
      real *gbx = dW + obx, *gbh = dW + obh;
      for (int64_t r = 0; r < TN; r++) {
        const real *x1 = dA + r * GH, *x2 = dAh + r * GH;
        for (int64_t j = 0; j < GH; j++) { gbx[j] += x1[j]; gbh[j] += x2[j]; }
      }
      if (l > 0 || data_grad)
        RNN_S(gemm)(false, false, TN, inl, GH, dA, GH, Wx, inl, d == 0 ? 0 : 1, dX, inl);
      else if (d == 0)
        memset(dX, 0, sizeof(real) * (size_t)(TN * inl));
    }
    if (l > 0) {
      const real *m = mask ? mask + (int64_t)(l - 1) * TN * DH : NULL;
      for (int64_t i = 0; i < TN * DH; i++) dY[i] = m ? dIn[i] * m[i] : dIn[i];
    }
  }
  free(len);
  return MX_OK;
}
#undef real
#endif
