/* gemm.h — the BLAS layer of the CPU kernels (gemm.c): one GEMM for every kernel that
 * multiplies matrices (linalg.c, linalg_lapack.c, rnn.c, the attention ops). Row-major;
 * ta/tb mean "stored transposed". f32 runs on oneDNN's sgemm when built with it
 * (kernels/dnnl/gemm.c: ~93% of the FMA peak here, OpenBLAS under the machine's Haswell
 * setting half of it), else OpenBLAS; f64 on OpenBLAS; bf16 (packed products only) on
 * oneDNN's bf16 matmul. Not installed. */
#ifndef MX_CPU_GEMM_H
#define MX_CPU_GEMM_H
#include "internal.h"

/* Whether the GEMM takes (M, N, K) in dtype: f32/f64 (bf16 with oneDNN), every extent
 * within BLAS's int. */
bool mx_cpu_blas_ok(int dtype, int64_t M, int64_t N, int64_t K);

/* Before a thread's first OpenBLAS call: OpenBLAS single-threaded (one OpenMP pool for
 * the process) and the ~128 MB of address space its GEMM buffer takes checked, so a tight
 * `ulimit -v` is a clear error naming op instead of a hang. */
int mx_cpu_blas_ready(const char *op);

/* C (M, N) = A . B + beta C, packed operands (lda = K or M, ldb = N or K, ldc = N):
 * products of at most 1024 multiply-adds as a plain loop (double sums), rank-K updates
 * with K <= 4 as axpy passes, the rest on BLAS threaded by the flop count. */
int mx_cpu_gemm(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                const void *B, float beta, void *C);

/* C (M, N; row stride ldc) = alpha op(A) . op(B) + beta C with row strides lda/ldb: one
 * BLAS call (f32/f64). op names the caller in errors. */
int mx_cpu_gemm_ld(const char *op, int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                   double alpha, const void *A, int64_t lda, const void *B, int64_t ldb,
                   double beta, void *C, int64_t ldc);
/* The same on OpenBLAS whatever the build: the linalg_* ops, whose alpha OpenBLAS applies
 * to the products as the reference kernels do (oneDNN's sgemm turns an infinite alpha
 * times a zero into NaN where they give inf). */
int mx_cpu_blas_gemm_ld(const char *op, int dtype, bool ta, bool tb, int64_t M, int64_t N,
                        int64_t K, double alpha, const void *A, int64_t lda, const void *B,
                        int64_t ldb, double beta, void *C, int64_t ldc);

#endif
