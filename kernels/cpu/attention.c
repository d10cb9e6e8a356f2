/* kernels/cpu/attention.c — fused self-attention (f32) on MXNet's interleaved layout:
 * one (sequence, head) per task across the intra-op pool. A task packs its keys
 * transposed and its values into small zero-padded buffers, then for each block of
 * queries computes the scores (block x keys) with a 6x16 AVX2 register-blocked
 * product, exponentiates them in place (row maximum subtracted) and multiplies them by
 * the values with the same product, dividing each output row by its row sum at the
 * end: the (N*H, T, T) scores never reach memory. Other dtypes run the reference.
 * Layouts: core/ops/attention.lua. */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "internal.h"
#include "vmath.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define QB 96 /* queries per block (a multiple of the kernel's 6 rows) */
#define NR 16 /* the kernel's columns */

/* C (rows x 16) = A (rows x K, row stride lda) . B (K x 16, row stride ldb), rows <= 6 */
static inline void mk_6x16(int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                           float *C, int64_t ldc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < K; k++) {
    __m256 b0 = _mm256_loadu_ps(B + k * ldb), b1 = _mm256_loadu_ps(B + k * ldb + 8), a;
    a = _mm256_broadcast_ss(A + k);
    c00 = _mm256_fmadd_ps(a, b0, c00), c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(A + lda + k);
    c10 = _mm256_fmadd_ps(a, b0, c10), c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(A + 2 * lda + k);
    c20 = _mm256_fmadd_ps(a, b0, c20), c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(A + 3 * lda + k);
    c30 = _mm256_fmadd_ps(a, b0, c30), c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(A + 4 * lda + k);
    c40 = _mm256_fmadd_ps(a, b0, c40), c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(A + 5 * lda + k);
    c50 = _mm256_fmadd_ps(a, b0, c50), c51 = _mm256_fmadd_ps(a, b1, c51);
  }
  _mm256_storeu_ps(C, c00), _mm256_storeu_ps(C + 8, c01);
  _mm256_storeu_ps(C + ldc, c10), _mm256_storeu_ps(C + ldc + 8, c11);
  _mm256_storeu_ps(C + 2 * ldc, c20), _mm256_storeu_ps(C + 2 * ldc + 8, c21);
  _mm256_storeu_ps(C + 3 * ldc, c30), _mm256_storeu_ps(C + 3 * ldc + 8, c31);
  _mm256_storeu_ps(C + 4 * ldc, c40), _mm256_storeu_ps(C + 4 * ldc + 8, c41);
  _mm256_storeu_ps(C + 5 * ldc, c50), _mm256_storeu_ps(C + 5 * ldc + 8, c51);
}
static inline void mk_1x16(int64_t K, const float *A, const float *B, int64_t ldb, float *C) {
  __m256 c0 = _mm256_setzero_ps(), c1 = c0;
  for (int64_t k = 0; k < K; k++) {
    __m256 a = _mm256_broadcast_ss(A + k);
    c0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(B + k * ldb), c0);
    c1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(B + k * ldb + 8), c1);
  }
  _mm256_storeu_ps(C, c0), _mm256_storeu_ps(C + 8, c1);
}
/* C (M x Nc) = A (M x K) . B (K x Nc), Nc a multiple of 16, all row-major */
static void mm(int64_t M, int64_t Nc, int64_t K, const float *A, int64_t lda, const float *B,
               int64_t ldb, float *C, int64_t ldc) {
  int64_t i = 0;
  for (; i + 6 <= M; i += 6)
    for (int64_t j = 0; j < Nc; j += NR) mk_6x16(K, A + i * lda, lda, B + j, ldb, C + i * ldc + j, ldc);
  for (; i < M; i++)
    for (int64_t j = 0; j < Nc; j += NR) mk_1x16(K, A + i * lda, B + j, ldb, C + i * ldc + j);
}

typedef struct {
  int64_t T, N, H, D, Lp, G, ngroups; /* G heads a task, ngroups tasks a sequence */
  const int64_t *L;
  const float *qkv;
  float *out;
  _Atomic int oom; /* a task could not get its buffers */
} sa_ctx;

static int64_t up16(int64_t x) { return (x + NR - 1) / NR * NR; }

/* exp(scale (s - max)) over a row's first L scores, in place, zero after them up to Lp;
 * the sum. The maximum and the sum in 8 lanes (a scalar chain was a third of a task). */
static float exp_row(float *s, int64_t L, int64_t Lp, float scale) {
  int64_t L8 = L / 8 * 8, j;
  __m256 m8 = _mm256_set1_ps(-INFINITY);
  for (j = 0; j < L8; j += 8) m8 = _mm256_max_ps(m8, _mm256_loadu_ps(s + j));
  float lane[8], mx = -INFINITY;
  _mm256_storeu_ps(lane, m8);
  for (int k = 0; k < 8; k++) mx = lane[k] > mx ? lane[k] : mx;
  for (; j < L; j++) mx = s[j] > mx ? s[j] : mx;
  for (j = 0; j < L; j++) s[j] = v_expf((s[j] - mx) * scale);
  __m256 s8 = _mm256_setzero_ps();
  for (j = 0; j < L8; j += 8) s8 = _mm256_add_ps(s8, _mm256_loadu_ps(s + j));
  _mm256_storeu_ps(lane, s8);
  float sum = 0;
  for (int k = 0; k < 8; k++) sum += lane[k];
  for (; j < L; j++) sum += s[j];
  for (j = L; j < Lp; j++) s[j] = 0;
  return sum;
}

/* kt (D x ldt) = the keys (L x D, row stride ld) transposed: 8x8 blocks in registers
 * (element stores a cache line apart were half of a task's packing) */
static void pack_kt(const float *k, int64_t ld, int64_t L, int64_t D, float *kt, int64_t ldt) {
  int64_t j = 0, D8 = D / 8 * 8;
  for (; j + 8 <= L; j += 8) {
    for (int64_t d = 0; d < D8; d += 8) {
      __m256 r0 = _mm256_loadu_ps(k + j * ld + d), r1 = _mm256_loadu_ps(k + (j + 1) * ld + d);
      __m256 r2 = _mm256_loadu_ps(k + (j + 2) * ld + d), r3 = _mm256_loadu_ps(k + (j + 3) * ld + d);
      __m256 r4 = _mm256_loadu_ps(k + (j + 4) * ld + d), r5 = _mm256_loadu_ps(k + (j + 5) * ld + d);
      __m256 r6 = _mm256_loadu_ps(k + (j + 6) * ld + d), r7 = _mm256_loadu_ps(k + (j + 7) * ld + d);
      __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
      __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
      __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
      __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
      float *o = kt + d * ldt + j;
      _mm256_storeu_ps(o, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(o + ldt, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(o + 2 * ldt, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(o + 3 * ldt, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(o + 4 * ldt, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(o + 5 * ldt, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(o + 6 * ldt, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(o + 7 * ldt, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
    for (int64_t d = D8; d < D; d++)
      for (int64_t r = 0; r < 8; r++) kt[d * ldt + j + r] = k[(j + r) * ld + d];
  }
  for (; j < L; j++)
    for (int64_t d = 0; d < D; d++) kt[d * ldt + j] = k[j * ld + d];
}

/* a task's buffers: raw (T x 3GD) its heads' rows of qkv; kt (D x Lp) one head's keys
 * transposed; v (Lp x Dp) its values when D is no multiple of 16; s (QB x Lp) scores;
 * o (QB x Dp); os (T x GD) the task's output rows */
static size_t sa_bytes(int64_t T, int64_t G, int64_t D, int64_t Lp) {
  int64_t Dp = up16(D);
  size_t n = sizeof(float) * (size_t)(T * 3 * G * D + D * Lp + Lp * Dp + QB * (Lp + Dp) + T * G * D);
  return (n + 63) / 64 * 64;
}

/* Task b: sequence b / ngroups, heads G * (b % ngroups) on. Its rows of qkv are copied
 * once (long contiguous reads; a head's own 3D values of every row, 147 kB apart in
 * MiniLM's batch, had the task waiting on memory), its output rows written once. */
static void sa_range(int64_t b0, int64_t b1, void *vc) {
  sa_ctx *c = vc;
  int64_t T = c->T, D = c->D, Lp = c->Lp, Dp = up16(D), G = c->G, HD = c->H * D;
  float scale = 1 / sqrtf((float)D);
  float *buf = aligned_alloc(64, sa_bytes(T, G, D, Lp));
  if (!buf) {
    c->oom = 1;
    return;
  }
  float *raw = buf, *kt = raw + T * 3 * G * D, *vp = kt + D * Lp, *s = vp + Lp * Dp;
  float *o = s + QB * Lp, *os = o + QB * Dp;
  for (int64_t b = b0; b < b1; b++) {
    int64_t n = b / c->ngroups, g0 = (b % c->ngroups) * G, L = c->L[n];
    int64_t gh = c->H - g0 < G ? c->H - g0 : G, rw = 3 * gh * D, ow = gh * D;
    if (gh <= 0) continue;
    float *ob = c->out + n * HD + g0 * D;
    if (L == 0) {
      for (int64_t t = 0; t < T; t++) memset(ob + t * c->N * HD, 0, sizeof(float) * (size_t)ow);
      continue;
    }
    for (int64_t t = 0; t < T; t++)
      memcpy(raw + t * rw, c->qkv + (t * c->N + n) * 3 * HD + g0 * 3 * D, sizeof(float) * (size_t)rw);
    int64_t Lq = up16(L);
    for (int64_t h = 0; h < gh; h++) {
      const float *q = raw + h * 3 * D, *v = q + 2 * D;
      int64_t ldv = rw;
      pack_kt(q + D, rw, L, D, kt, Lq);
      for (int64_t d = 0; d < D; d++) memset(kt + d * Lq + L, 0, sizeof(float) * (size_t)(Lq - L));
      if (D % NR) { /* the product's columns: D padded to 16 */
        for (int64_t j = 0; j < L; j++) {
          memcpy(vp + j * Dp, v + j * rw, sizeof(float) * (size_t)D);
          memset(vp + j * Dp + D, 0, sizeof(float) * (size_t)(Dp - D));
        }
        v = vp, ldv = Dp;
      }
      for (int64_t i0 = 0; i0 < T; i0 += QB) {
        int64_t m = T - i0 < QB ? T - i0 : QB;
        mm(m, Lq, D, q + i0 * rw, rw, kt, Lq, s, Lq);
        float sum[QB];
        for (int64_t i = 0; i < m; i++) sum[i] = exp_row(s + i * Lq, L, Lq, scale);
        mm(m, Dp, L, s, Lq, v, ldv, o, Dp);
        for (int64_t i = 0; i < m; i++) {
          float r = 1 / sum[i], *dst = os + (i0 + i) * ow + h * D;
          for (int64_t d = 0; d < D; d++) dst[d] = o[i * Dp + d] * r;
        }
      }
    }
    for (int64_t t = 0; t < T; t++)
      memcpy(ob + t * c->N * HD, os + t * ow, sizeof(float) * (size_t)ow);
  }
  free(buf);
}

int mx_cpu_interleaved_selfatt(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)ctx; (void)nout;
  const struct mx_params_interleaved_selfatt *P = p;
  const mx_tensor *qkv = in[0], *vl = nin > 1 ? in[1] : NULL;
  if (qkv->dtype != MX_F32) return MX_DECLINE;
  int64_t T = qkv->shape[0], N = qkv->shape[1], H = P->heads, D = qkv->shape[2] / (3 * H);
  if (out[0]->size == 0) return MX_OK;
  int64_t *L = malloc(sizeof(int64_t) * (size_t)N);
  if (!L) return mx_err(MX_ENOMEM, "interleaved_selfatt: out of memory");
  for (int64_t n = 0; n < N; n++) {
    double x = vl ? mx_load_f64(mx_ptr(vl), vl->dtype, n) : (double)T;
    if (!(x >= 0 && x <= (double)T) || x != floor(x)) {
      free(L);
      return mx_err(MX_EINVAL, "interleaved_selfatt: valid_length element %lld is %g, expected "
                    "an integer in 0..%lld (the sequence length)", (long long)n + 1, x, (long long)T);
    }
    L[n] = (int64_t)x;
  }
  /* all heads of a sequence a task, unless there are too few sequences to share out */
  int64_t ngroups = N >= 4 ? 1 : (4 + N - 1) / N < H ? (4 + N - 1) / N : H;
  int64_t G = (H + ngroups - 1) / ngroups;
  sa_ctx c = {T, N, H, D, up16(T), G, ngroups, L, mx_ptr(qkv), mx_ptr(out[0]), 0};
  mx_parallel_for(N * ngroups, 1, sa_range, &c);
  free(L);
  if (c.oom)
    return mx_err(MX_ENOMEM, "interleaved_selfatt: out of memory (%zu bytes a thread)",
                  sa_bytes(T, G, D, c.Lp));
  return MX_OK;
}
