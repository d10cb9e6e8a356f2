/* kernels/cpu/gemm.c — the BLAS layer of the CPU kernels (gemm.h). */
#include "gemm.h"
#include "mx_kernels_gen.h"
#include "dnnl.h"
#include "vmath.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cblas.h>

/* OpenBLAS would otherwise start its own pthread pool next to OpenMP's (oneDNN and
 * our kernels): two busy pools on 2 cores run ~10x slower (perf-anchors.md §3).
 * Its GEMMs run single-threaded; parallelism comes from the one OpenMP pool. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_init(void) { openblas_set_num_threads(1); }
/* at load too, so BLAS calls from any other kernel also stay on one thread */
__attribute__((constructor)) static void blas_init_at_load(void) { pthread_once(&blas_once, blas_init); }

/* OpenBLAS takes a ~128 MB buffer per thread at its first GEMM and, when the address
 * space cannot give it (a tight `ulimit -v`), retries forever: the caller hangs. Before a
 * thread's first OpenBLAS call, check that such a mapping can be had (reserved and given
 * back at once: PROT_NONE costs no memory) and fail with a clear error instead. */
static _Thread_local bool blas_room_ok;
int mx_cpu_blas_ready(const char *op) {
  pthread_once(&blas_once, blas_init);
  if (MX_LIKELY(blas_room_ok)) return MX_OK;
  size_t n = (size_t)160 << 20;
  void *p = mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return mx_err(MX_ENOMEM, "%s: out of address space: OpenBLAS needs about 128 MB of it for "
                  "its GEMM buffer (is `ulimit -v` tight?)", op);
  munmap(p, n);
  blas_room_ok = true;
  return MX_OK;
}

bool mx_cpu_blas_ok(int dtype, int64_t M, int64_t N, int64_t K) {
#ifdef MX_HAVE_ONEDNN
  if (dtype == MX_BF16) return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
#endif
  if (dtype != MX_F32 && dtype != MX_F64) return false;
  return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
}

int mx_cpu_gemm_ld(const char *op, int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                   double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                   double beta, void *C, int64_t ldc) {
#ifdef MX_HAVE_ONEDNN
  if (dtype == MX_F32) {
    int rc = mx_dnnl_sgemm(op, ta, tb, M, N, K, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
    if (rc != MX_DECLINE) return rc;
  }
#endif
  return mx_cpu_blas_gemm_ld(op, dtype, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

int mx_cpu_blas_gemm_ld(const char *op, int dtype, bool ta, bool tb, int64_t M, int64_t N,
                        int64_t K, double alpha, const void *A, int64_t lda, const void *B,
                        int64_t ldb, double beta, void *C, int64_t ldc) {
  int rc = mx_cpu_blas_ready(op);
  if (rc) return rc;
  enum CBLAS_TRANSPOSE A_ = ta ? CblasTrans : CblasNoTrans, B_ = tb ? CblasTrans : CblasNoTrans;
  if (dtype == MX_F32)
    cblas_sgemm(CblasRowMajor, A_, B_, (int)M, (int)N, (int)K, (float)alpha, A, (int)lda, B,
                (int)ldb, (float)beta, C, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, A_, B_, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb,
                beta, C, (int)ldc);
  return MX_OK;
}

/* Tiny products: a plain loop (double accumulation) beats the ~3 us a BLAS call
 * costs to set up. */
#define SMALL_GEMM_MNK 1024
#define SMALL_LOOP(T)                                                                      \
  {                                                                                        \
    const T *a = A, *b = B;                                                                \
    T *c = C;                                                                              \
    for (int64_t m = 0; m < M; m++)                                                        \
      for (int64_t n = 0; n < N; n++) {                                                    \
        double acc = beta != 0 ? (double)c[m * N + n] : 0;                                 \
        for (int64_t k = 0; k < K; k++)                                                    \
          acc += (double)a[ta ? k * M + m : m * K + k] * (double)b[tb ? n * K + k : k * N + n]; \
        c[m * N + n] = (T)acc;                                                             \
      }                                                                                    \
  }

/* Rank-K update for small K with B's rows contiguous (!tb), f32: C (M, N) = A (M, K) .
 * B (K, N) + beta C as K axpy passes over each row of C. A weight gradient at batch 1
 * is such an outer product (K = 1); dnnl_sgemm's packing made it 5x slower than the
 * memory traffic it needs. */
#define RANK_K_MAX 4
typedef struct { bool ta; int64_t M, N, K; const float *A, *B; float beta; float *C; } rank_k_ctx;
static void rank_k_rows(int64_t m0, int64_t m1, void *vc) {
  const rank_k_ctx *c = vc;
  for (int64_t m = m0; m < m1; m++) {
    float *restrict row = c->C + m * c->N;
    for (int64_t k = 0; k < c->K; k++) {
      float a = c->ta ? c->A[k * c->M + m] : c->A[m * c->K + k];
      const float *restrict b = c->B + k * c->N;
      if (k == 0 && c->beta == 0) /* one pass: no zeroing first */
        for (int64_t n = 0; n < c->N; n++) row[n] = a * b[n];
      else if (k == 0 && c->beta != 1)
        for (int64_t n = 0; n < c->N; n++) row[n] = c->beta * row[n] + a * b[n];
      else
        for (int64_t n = 0; n < c->N; n++) row[n] += a * b[n];
    }
  }
}

/* One row times B^T, f32: y (N) = a (K) . B (N, K)^T + beta y, the product of a batch-1
 * fully_connected layer (a GPT-2 token's 49 of them read 497 MB of weights). It does 2
 * flops per 4 bytes of B, so the read rate is all that counts: B's rows are taken one
 * after another, the order they lie in (the stream the hardware prefetcher follows
 * best), lines asked for 8 kB ahead of the loads, against two 16-lane partial sums (a
 * in L1); rows split across the team, each row's sum in one fixed order whatever the
 * thread count. GPT-2 generation at batch 1 went from 38-45 to 50-55 tokens/s on Zen 5
 * with it (dnnl_sgemm's M = 1 path before; bench/RESULTS.md, "GluonNLP and audio"). */
#define GEMV_MIN_K 64
#define GEMV_LANES 16
#define GEMV_AHEAD 2048 /* floats */
typedef struct { int64_t K; const float *a, *B; float beta; float *y; } gemv_ctx;
HEAVY static void gemv_rows(int64_t n0, int64_t n1, void *vc) {
  const gemv_ctx *c = vc;
  const int64_t K = c->K, K2 = K / (2 * GEMV_LANES) * (2 * GEMV_LANES);
  const float *restrict a = c->a;
  for (int64_t n = n0; n < n1; n++) {
    const float *restrict b = c->B + n * K;
    float s0[GEMV_LANES] = {0}, s1[GEMV_LANES] = {0};
    int64_t k = 0;
    for (; k < K2; k += 2 * GEMV_LANES) {
      __builtin_prefetch(b + k + GEMV_AHEAD);
      for (int i = 0; i < GEMV_LANES; i++) {
        s0[i] += a[k + i] * b[k + i];
        s1[i] += a[k + GEMV_LANES + i] * b[k + GEMV_LANES + i];
      }
    }
    float t = 0;
    for (int i = 0; i < GEMV_LANES; i++) t += s0[i] + s1[i];
    for (; k < K; k++) t += a[k] * b[k];
    c->y[n] = c->beta == 0 ? t : c->beta * c->y[n] + t;
  }
}

/* Where oneDNN has no bf16 matmul for this CPU: the same arithmetic by hand, bf16
 * widened to f32 (exact), f32 sums, C rounded to bf16 once. A result must not depend on
 * which CPU runs it. */
static int gemm_bf16_widened(bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                             const uint16_t *A, const uint16_t *B, float beta, uint16_t *C) {
  size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
  float *w = malloc(sizeof(float) * (na + nb + nc + 1));
  if (!w) return mx_err(MX_ENOMEM, "gemm: out of memory for a %lldx%lldx%lld bf16 product",
                        (long long)M, (long long)N, (long long)K);
  float *wa = w, *wb = w + na, *wc = w + na + nb;
  for (size_t i = 0; i < na; i++) wa[i] = mx_bf16_to_f32(A[i]);
  for (size_t i = 0; i < nb; i++) wb[i] = mx_bf16_to_f32(B[i]);
  if (beta != 0)
    for (size_t i = 0; i < nc; i++) wc[i] = mx_bf16_to_f32(C[i]);
  int rc = mx_cpu_gemm(MX_F32, ta, tb, M, N, K, wa, wb, beta, wc);
  if (rc == MX_OK)
    for (size_t i = 0; i < nc; i++) C[i] = mx_f32_to_bf16(wc[i]);
  free(w);
  return rc;
}

int mx_cpu_gemm(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                const void *B, float beta, void *C) {
  if (M == 0 || N == 0) return MX_OK;
#ifdef MX_HAVE_ONEDNN
  if (dtype == MX_BF16) {
    int rc = mx_dnnl_gemm_bf16(ta, tb, M, N, K, A, B, beta, C);
    return rc != MX_DECLINE ? rc : gemm_bf16_widened(ta, tb, M, N, K, A, B, beta, C);
  }
#endif
  if (M * N * K <= SMALL_GEMM_MNK) {
    if (dtype == MX_F32) SMALL_LOOP(float) else SMALL_LOOP(double)
    return MX_OK;
  }
  if (K == 0) {
    if (beta == 0) memset(C, 0, (size_t)(M * N) * mx_dtype_size(dtype));
    return MX_OK;
  }
  if (dtype == MX_F32 && M == 1 && tb && K >= GEMV_MIN_K) {
    /* a (1, K) A is the same K floats whether stored transposed or not */
    gemv_ctx c = {K, A, B, beta, C};
    /* 64 kB of B a thread at least: below, a hand-off costs more than it saves */
    mx_parallel_for(N, (1 << 14) / K + 1, gemv_rows, &c);
    return MX_OK;
  }
  if (dtype == MX_F32 && !tb && K <= RANK_K_MAX) {
    rank_k_ctx c = {ta, M, N, K, A, B, beta, C};
    mx_parallel_for(M, (1 << 18) / (N + 1) + 1, rank_k_rows, &c);
    return MX_OK;
  }
  return mx_cpu_gemm_ld("gemm", dtype, ta, tb, M, N, K, 1.0, A, ta ? M : K, B, tb ? K : N, beta,
                        C, N);
}
