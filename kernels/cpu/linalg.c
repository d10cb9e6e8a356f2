/* kernels/cpu/linalg.c — GEMM-family kernels on BLAS.
 * f32: oneDNN's dnnl_sgemm when built with it (it reaches ~93% of the FMA peak here
 * whatever OPENBLAS_CORETYPE says; OpenBLAS under the machine's Haswell setting
 * gets half), else cblas_sgemm. f64: cblas_dgemm. Other dtypes: the ref kernels.
 * Layouts as in kernels/ref/linalg.c: row-major, flags mean "stored transposed". */
#include "mx_ops_gen.h"
#include "engine.h"

#include <limits.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include "onednn.h"
#ifdef MX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl_debug.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

int mx_ref_dot(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_batch_dot(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_matmul(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_fully_connected(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

/* OpenBLAS would otherwise start its own pthread pool next to OpenMP's (oneDNN and
 * our kernels): two busy pools on 2 cores run ~10x slower (perf-anchors.md §3).
 * Its GEMMs run single-threaded; parallelism comes from the one OpenMP pool. */
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_init(void) { openblas_set_num_threads(1); }
#if defined(__GNUC__)
/* at load too, so BLAS calls from any other kernel also stay on one thread */
__attribute__((constructor)) static void blas_init_at_load(void) { pthread_once(&blas_once, blas_init); }
#endif

/* A GEMM gets one thread per this many flops (up to the engine's budget): the MLP's
 * 64x256x256 layer (8.4 MFLOP) gets 2. At 16e6 its layers all ran on one thread and
 * 2-thread training gained nothing (63.7k samples/s at 1 and 2 threads; 90.8k at 2
 * with 4e6). On a machine busy with other work fork/join can cost far more than it
 * saves (64x784x256 once took 24 ms on 2 threads against 0.8 ms on 1): set
 * MX_NUM_THREADS=1 there. (The rule is MX_DNNL_FLOPS_PER_THREAD, onednn.h, shared by
 * every oneDNN-backed kernel.) */

static bool blas_ok(int dtype, int64_t M, int64_t N, int64_t K) {
#ifdef MX_HAVE_ONEDNN
  if (dtype == MX_BF16) return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
#endif
  if (dtype != MX_F32 && dtype != MX_F64) return false;
  return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX;
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

#ifdef MX_HAVE_ONEDNN
/* the team of an M x N x K product (onednn.h: mx_dnnl_team_begin/end) */
static int gemm_team_begin(int64_t M, int64_t N, int64_t K, int *prev) {
  return mx_dnnl_team_begin(2.0 * (double)M * (double)N * (double)K, prev);
}
#define gemm_team_end mx_dnnl_team_end
#endif

/* OpenBLAS takes a ~128 MB buffer per thread at its first GEMM and, when the address
 * space cannot give it (a tight `ulimit -v`), retries forever: the caller hangs. Before a
 * thread's first OpenBLAS call, check that such a mapping can be had (reserved and given
 * back at once: PROT_NONE costs no memory) and fail with a clear error instead. */
static _Thread_local bool blas_room_ok;
static int blas_room(const char *op) {
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

#ifdef MX_HAVE_ONEDNN
/* bf16 A and B, products summed in f32 by oneDNN's matmul primitive (AVX-512 BF16 where
 * the CPU has it; oneDNN 2.6 has no bf16 GEMM function), C written as bf16 (rounded once);
 * beta != 0 adds beta C as oneDNN's sum post-op. Primitives cached by shape. */
typedef struct { int64_t M, N, K; int ta, tb; float beta; } bf16_key;

static void *bf16_build(const void *key, void *arg) {
  (void)arg;
  const bf16_key *k = key;
  dnnl_engine_t eng = mx_dnnl_engine();
  if (!eng) return NULL;
  dnnl_memory_desc_t a, b, c;
  dnnl_dims_t ad = {k->M, k->K}, bd = {k->K, k->N}, cd = {k->M, k->N};
  dnnl_dims_t as = {k->ta ? 1 : k->K, k->ta ? k->M : 1}, bs = {k->tb ? 1 : k->N, k->tb ? k->K : 1};
  dnnl_dims_t cs = {k->N, 1};
  dnnl_matmul_desc_t d;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_t p = NULL;
  bool ok = dnnl_memory_desc_init_by_strides(&a, 2, ad, dnnl_bf16, as) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&b, 2, bd, dnnl_bf16, bs) == dnnl_success &&
            dnnl_memory_desc_init_by_strides(&c, 2, cd, dnnl_bf16, cs) == dnnl_success &&
            dnnl_matmul_desc_init(&d, &a, &b, NULL, &c) == dnnl_success &&
            dnnl_primitive_attr_create(&attr) == dnnl_success;
  if (ok && k->beta != 0)
    ok = dnnl_post_ops_create(&po) == dnnl_success &&
         dnnl_post_ops_append_sum(po, k->beta) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  if (ok && (dnnl_primitive_desc_create(&pd, &d, attr, eng, NULL) != dnnl_success ||
             dnnl_primitive_create(&p, pd) != dnnl_success))
    p = NULL;
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return p;
}
static void bf16_destroy(void *p) { dnnl_primitive_destroy(p); }

static int gemm(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                const void *B, float beta, void *C);

/* Where oneDNN has no bf16 matmul for this CPU (2.6 implements it from avx512_core up, so
 * an AVX2 machine or ONEDNN_MAX_CPU_ISA=AVX2 refuses the primitive): the same arithmetic by
 * hand, bf16 widened to f32 (exact), f32 sums, C rounded to bf16 once. A result must not
 * depend on which CPU runs it. */
static int gemm_bf16_widened(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t *A,
                             const uint16_t *B, float beta, uint16_t *C) {
  size_t na = (size_t)(M * K), nb = (size_t)(K * N), nc = (size_t)(M * N);
  float *w = malloc(sizeof(float) * (na + nb + nc + 1));
  if (!w) return mx_err(MX_ENOMEM, "gemm: out of memory for a %lldx%lldx%lld bf16 product",
                        (long long)M, (long long)N, (long long)K);
  float *wa = w, *wb = w + na, *wc = w + na + nb;
  for (size_t i = 0; i < na; i++) wa[i] = mx_bf16_to_f32(A[i]);
  for (size_t i = 0; i < nb; i++) wb[i] = mx_bf16_to_f32(B[i]);
  if (beta != 0)
    for (size_t i = 0; i < nc; i++) wc[i] = mx_bf16_to_f32(C[i]);
  int rc = gemm(MX_F32, ta, tb, M, N, K, wa, wb, beta, wc);
  if (rc == MX_OK)
    for (size_t i = 0; i < nc; i++) C[i] = mx_f32_to_bf16(wc[i]);
  free(w);
  return rc;
}

static int sgemm_failed(const char *op, dnnl_status_t st, int64_t M, int64_t N, int64_t K) {
  if (st == dnnl_out_of_memory)
    return mx_err(MX_ENOMEM, "%s: out of memory in oneDNN's sgemm (%lldx%lldx%lld)", op,
                  (long long)M, (long long)N, (long long)K);
  return mx_err(MX_EINVAL, "%s: oneDNN's sgemm failed for %lldx%lldx%lld (%s)", op, (long long)M,
                (long long)N, (long long)K, dnnl_status2str(st));
}

static atomic_bool bf16_matmul_missing; /* oneDNN refused the primitive once: it will again */

static int gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                     const void *B, float beta, void *C) {
  if (atomic_load_explicit(&bf16_matmul_missing, memory_order_relaxed))
    return gemm_bf16_widened(ta, tb, M, N, K, A, B, beta, C);
  bf16_key k;
  memset(&k, 0, sizeof k); /* the key's padding bytes are compared too */
  k.M = M, k.N = N, k.K = K, k.ta = ta, k.tb = tb, k.beta = beta;
  mx_dnnl_entry *e = NULL;
  dnnl_primitive_t p = mx_dnnl_cache_get(MX_DNNL_FC + 0x100, &k, sizeof k, bf16_build,
                                         bf16_destroy, NULL, &e);
  bool tmp = false;
  if (!p) { /* busy entry (another thread holds it), or none built: a primitive of our own */
    p = bf16_build(&k, NULL);
    tmp = true;
  }
  if (!p) { /* no primitive for this CPU (for good), or oneDNN cannot start yet */
    if (e) mx_dnnl_cache_put(e);
    if (mx_dnnl_engine()) atomic_store(&bf16_matmul_missing, true);
    return gemm_bf16_widened(ta, tb, M, N, K, A, B, beta, C);
  }
  bool ok = p != NULL;
  if (ok) {
    dnnl_engine_t eng = mx_dnnl_engine();
    dnnl_stream_t s = mx_dnnl_stream();
    const_dnnl_primitive_desc_t pd;
    dnnl_memory_t m[3] = {NULL, NULL, NULL};
    int args[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    void *data[3] = {(void *)A, (void *)B, C};
    ok = s && dnnl_primitive_get_primitive_desc(p, &pd) == dnnl_success;
    for (int i = 0; ok && i < 3; i++) {
      const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, args[i]);
      ok = md && dnnl_memory_create(&m[i], md, eng, data[i]) == dnnl_success;
    }
    if (ok) {
      dnnl_exec_arg_t ea[3] = {{args[0], m[0]}, {args[1], m[1]}, {args[2], m[2]}};
      mx_dnnl_note_use();
      int prev, nt = gemm_team_begin(M, N, K, &prev);
      ok = dnnl_primitive_execute(p, s, 3, ea) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
      gemm_team_end(nt, prev);
    }
    for (int i = 0; i < 3; i++)
      if (m[i]) dnnl_memory_destroy(m[i]);
  }
  if (tmp && p) dnnl_primitive_destroy(p);
  if (e) mx_dnnl_cache_put(e);
  return ok ? MX_OK : mx_err(MX_EINVAL, "gemm: oneDNN's bf16 matmul failed for %lldx%lldx%lld",
                             (long long)M, (long long)N, (long long)K);
}
#endif

/* C (M, N) = A . B + beta C, A/B stored transposed when ta/tb; dtype f32 or f64 (bf16
 * with oneDNN). */
static int gemm(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                const void *B, float beta, void *C) {
  if (M == 0 || N == 0) return MX_OK;
#ifdef MX_HAVE_ONEDNN
  if (dtype == MX_BF16) return gemm_bf16(ta, tb, M, N, K, A, B, beta, C);
#endif
  if (M * N * K <= SMALL_GEMM_MNK) {
    if (dtype == MX_F32) SMALL_LOOP(float) else SMALL_LOOP(double)
    return MX_OK;
  }
  size_t es = mx_dtype_size(dtype);
  if (K == 0) {
    if (beta == 0) memset(C, 0, (size_t)(M * N) * es);
    return MX_OK;
  }
  int64_t lda = ta ? M : K, ldb = tb ? K : N;
  if (dtype == MX_F32 && !tb && K <= RANK_K_MAX) {
    rank_k_ctx c = {ta, M, N, K, A, B, beta, C};
    mx_parallel_for(M, (1 << 18) / (N + 1) + 1, rank_k_rows, &c);
    return MX_OK;
  }
  if (dtype == MX_F32) {
#ifdef MX_HAVE_ONEDNN
    if (mx_dnnl_note_use()) { /* else oneDNN cannot start (address space): OpenBLAS */
      int prev, nt = gemm_team_begin(M, N, K, &prev);
      dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B,
                                    ldb, beta, C, N);
      gemm_team_end(nt, prev);
      if (st != dnnl_success) return sgemm_failed("gemm", st, M, N, K);
      return MX_OK;
    }
#endif
    pthread_once(&blas_once, blas_init);
    int rc = blas_room("gemm");
    if (rc) return rc;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, beta, C, (int)N);
    return MX_OK;
  }
  pthread_once(&blas_once, blas_init);
  int rc = blas_room("gemm");
  if (rc) return rc;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)M, (int)N, (int)K, 1.0, A, (int)lda, B, (int)ldb, beta, C, (int)N);
  return MX_OK;
}

int mx_cpu_dot(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_dot *P = p;
  const mx_tensor *a = in[0], *b = in[1];
  int64_t K = a->shape[P->transpose_a ? 0 : a->ndim - 1];
  int64_t M = K ? a->size / K : 1, N = K ? b->size / K : 1;
  if (K == 0) { M = 0; N = 0; }
  if (!blas_ok(a->dtype, M, N, K)) return mx_ref_dot(ctx, p, nin, in, nout, out);
  if (K == 0) {
    memset(mx_ptr(out[0]), 0, mx_nbytes(out[0]));
    return MX_OK;
  }
  return gemm(a->dtype, P->transpose_a, P->transpose_b, M, N, K, mx_ptr(a), mx_ptr(b), 0,
              mx_ptr(out[0]));
}

/* A batch of small GEMMs: one matrix per task across the pool (each GEMM then
 * runs single-threaded: oneDNN and OpenBLAS see they are inside a parallel
 * region); big matrices: one after another, each GEMM threaded itself. */
typedef struct {
  int dtype;
  bool ta, tb;
  int64_t M, N, K, sa, sb, so;
  const int64_t *ia, *ib; /* per-batch operand indices (matmul broadcasting) or NULL */
  const char *A, *B;
  char *O;
  int rc;
} batch_ctx;

static void batch_range(int64_t begin, int64_t end, void *vc) {
  batch_ctx *c = vc;
  size_t es = mx_dtype_size(c->dtype);
  for (int64_t i = begin; i < end; i++) {
    int64_t ia = c->ia ? c->ia[i] : i, ib = c->ib ? c->ib[i] : i;
    int rc = gemm(c->dtype, c->ta, c->tb, c->M, c->N, c->K, c->A + (size_t)(ia * c->sa) * es,
                  c->B + (size_t)(ib * c->sb) * es, 0, c->O + (size_t)(i * c->so) * es);
    if (rc) c->rc = rc;
  }
}

static int run_batch(batch_ctx *c, int64_t batch) {
  c->rc = MX_OK;
  double flops = 2.0 * (double)c->M * (double)c->N * (double)c->K;
  if (flops < 2.0 * 128 * 128 * 128 && batch > 1)
    mx_parallel_for(batch, 1 + (int64_t)(4e5 / (flops + 1)), batch_range, c);
  else
    batch_range(0, batch, c);
  return c->rc;
}

int mx_cpu_batch_dot(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  const struct mx_params_batch_dot *P = p;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int n = o->ndim;
  int64_t M = o->shape[n - 2], N = o->shape[n - 1];
  int64_t K = a->shape[n - (P->transpose_a ? 2 : 1)];
  if (!blas_ok(a->dtype, M, N, K)) return mx_ref_batch_dot(ctx, p, nin, in, nout, out);
  int64_t batch = 1;
  for (int i = 0; i < n - 2; i++) batch *= o->shape[i];
  batch_ctx c = { a->dtype, P->transpose_a, P->transpose_b, M, N, K, M * K, K * N, M * N, NULL,
                  NULL, mx_ptr(a), mx_ptr(b), mx_ptr(o), 0 };
  return run_batch(&c, batch);
}

int mx_cpu_matmul(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t M = a->ndim > 1 ? a->shape[a->ndim - 2] : 1, K = a->shape[a->ndim - 1];
  int64_t N = b->ndim > 1 ? b->shape[b->ndim - 1] : 1;
  if (!blas_ok(a->dtype, M, N, K)) return mx_ref_matmul(ctx, p, nin, in, nout, out);
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = o->ndim - (a->ndim > 1) - (b->ndim > 1);
  int64_t batch = 1;
  for (int i = 0; i < nb; i++) batch *= o->shape[i];
  if (batch == 0) return MX_OK;
  batch_ctx c = { a->dtype, false, false, M, N, K, M * K, K * N, M * N, NULL, NULL, mx_ptr(a),
                  mx_ptr(b), mx_ptr(o), 0 };
  /* a (rows, K) . b (K, N) with no batch dims on b: one GEMM over all of a's rows */
  if (bb == 0 && a->ndim > 1) {
    c.M = M * batch;
    return run_batch(&c, 1);
  }
  int64_t *idx = NULL;
  if (ba != nb || bb != nb || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)nb)) {
    idx = malloc(sizeof(int64_t) * (size_t)batch * 2);
    if (!idx) return mx_err(MX_ENOMEM, "matmul: out of memory for %lld batch indices",
                            (long long)batch);
    /* the offset of each broadcast batch index in an operand's own batch dims */
    for (int64_t i = 0; i < batch; i++) {
      int64_t r = i, oa = 0, ob = 0, sa = 1, sb = 1;
      for (int d = nb - 1; d >= 0; d--) {
        int64_t ci = r % o->shape[d];
        r /= o->shape[d];
        int da = d - (nb - ba), db = d - (nb - bb);
        if (da >= 0) { if (a->shape[da] != 1) oa += ci * sa; sa *= a->shape[da]; }
        if (db >= 0) { if (b->shape[db] != 1) ob += ci * sb; sb *= b->shape[db]; }
      }
      idx[i] = oa;
      idx[batch + i] = ob;
    }
    c.ia = idx;
    c.ib = idx + batch;
  }
  int rc = run_batch(&c, batch);
  free(idx);
  return rc;
}

#ifdef MX_HAVE_ONEDNN
/* fully_connected through oneDNN's matmul primitive: its brgemm kernel reads the
 * (H, U) weight as it is stored and adds the bias in the same pass. Measured here, 1
 * thread, batch 64: 784->256 240 us against 253 us for dnnl_sgemm (plus the bias
 * copy), 256->10 5.1 against 8.5 us. Creating a primitive costs ~0.1-1 ms, so they
 * are cached by shape and thread count (a primitive is built for a team size) in the
 * shared oneDNN cache (onednn.c); each entry has its memory objects and lock
 * (concurrent same-shape calls take turns; a busy entry falls back to sgemm rather
 * than wait); the stream is the calling thread's. */
typedef struct fc_key { int64_t M, N, K; int nt; bool bias, relu; } fc_key;
typedef struct fc_prim {
  dnnl_primitive_t prim;
  dnnl_memory_t src, wei, b, dst;
} fc_prim;

static void fc_destroy(void *v) {
  fc_prim *e = v;
  if (e->prim) dnnl_primitive_destroy(e->prim);
  dnnl_memory_t ms[4] = {e->src, e->wei, e->b, e->dst};
  for (int i = 0; i < 4; i++)
    if (ms[i]) dnnl_memory_destroy(ms[i]);
  free(e);
}

/* Builds the primitive for (M, N, K, bias, relu) on nt threads; NULL if oneDNN
 * declines. relu is a post-op: applied to each output block while it is in cache. */
static void *fc_build(const void *key, void *arg) {
  (void)arg;
  const fc_key *k = key;
  dnnl_engine_t eng = mx_dnnl_engine();
  fc_prim *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  dnnl_memory_desc_t a, w, b, c;
  dnnl_dims_t da = {k->M, k->K}, dw = {k->K, k->N}, db = {1, k->N}, dc = {k->M, k->N};
  dnnl_primitive_desc_t pd = NULL;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_matmul_desc_t md;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
            (!k->relu || (dnnl_post_ops_create(&po) == dnnl_success &&
                          dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0) ==
                              dnnl_success &&
                          dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success)) &&
            dnnl_memory_desc_init_by_tag(&a, 2, da, dnnl_f32, dnnl_ab) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&w, 2, dw, dnnl_f32, dnnl_ba) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&b, 2, db, dnnl_f32, dnnl_ab) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&c, 2, dc, dnnl_f32, dnnl_ab) == dnnl_success &&
            dnnl_matmul_desc_init(&md, &a, &w, k->bias ? &b : NULL, &c) == dnnl_success &&
            dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL) == dnnl_success &&
            dnnl_primitive_create(&e->prim, pd) == dnnl_success &&
            dnnl_memory_create(&e->src, &a, eng, DNNL_MEMORY_NONE) == dnnl_success &&
            dnnl_memory_create(&e->wei, &w, eng, DNNL_MEMORY_NONE) == dnnl_success &&
            dnnl_memory_create(&e->dst, &c, eng, DNNL_MEMORY_NONE) == dnnl_success &&
            (!k->bias || dnnl_memory_create(&e->b, &b, eng, DNNL_MEMORY_NONE) == dnnl_success);
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (!ok) { fc_destroy(e); return NULL; }
  return e;
}

/* out (M, N) = [relu] (data (M, K) . weight (N, K)^T [+ bias (N)]); true when it ran. */
static bool fc_dnnl(int64_t M, int64_t N, int64_t K, const float *data, const float *weight,
                    const float *bias, bool relu, float *out) {
  int prev, nt = gemm_team_begin(M, N, K, &prev);
  fc_key key;
  memset(&key, 0, sizeof key); /* padding bytes are part of the cache key */
  key.M = M, key.N = N, key.K = K, key.nt = nt, key.bias = bias != NULL, key.relu = relu;
  mx_dnnl_entry *h;
  fc_prim *e = mx_dnnl_cache_get(MX_DNNL_FC, &key, sizeof key, fc_build, fc_destroy, NULL, &h);
  dnnl_stream_t s = e ? mx_dnnl_stream() : NULL;
  bool ran = false;
  if (e && s) {
    dnnl_memory_set_data_handle(e->src, (void *)data);
    dnnl_memory_set_data_handle(e->wei, (void *)weight);
    dnnl_memory_set_data_handle(e->dst, out);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->src}, {DNNL_ARG_WEIGHTS, e->wei},
                               {DNNL_ARG_DST, e->dst}, {DNNL_ARG_BIAS, e->b}};
    if (bias) dnnl_memory_set_data_handle(e->b, (void *)bias);
    ran = dnnl_primitive_execute(e->prim, s, bias ? 4 : 3, args) == dnnl_success &&
          dnnl_stream_wait(s) == dnnl_success;
  }
  mx_dnnl_cache_put(h);
  gemm_team_end(nt, prev);
  return ran;
}
#endif

/* fully_connected: out (rows, H) = [relu] (data (rows, U) . weight (H, U)^T + bias).
 * f32 with oneDNN: the matmul primitive above (relu as its post-op); otherwise the
 * bias is copied into every row, the GEMM accumulates onto it (beta 1) and relu runs
 * as a second pass. blas_ok admitted f32/f64 only. */
int mx_cpu_fully_connected(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                           mx_tensor *const *out) {
  const mx_tensor *d = in[0], *w = in[1];
  mx_tensor *o = out[0];
  int64_t H = w->shape[0], U = w->shape[1];
  int64_t rows = H ? o->size / H : 0;
  if (!blas_ok(d->dtype, rows, H, U)) return mx_ref_fully_connected(ctx, p, nin, in, nout, out);
  if (rows == 0 || H == 0) return MX_OK;
  bool relu = ((const struct mx_params_fully_connected *)p)->act_type ==
              MX_FULLY_CONNECTED_ACT_TYPE_RELU;
#ifdef MX_HAVE_ONEDNN
  /* under 16 rows (a GEMV-like product) dnnl_sgemm is faster: 1x784 . 784x256 took
   * 11.6 us there against 27.6 us on the primitive */
  if (d->dtype == MX_F32 && U > 0 && rows >= 16 && rows * H * U > SMALL_GEMM_MNK &&
      fc_dnnl(rows, H, U, mx_ptr(d), mx_ptr(w), nin > 2 ? mx_ptr(in[2]) : NULL, relu, mx_ptr(o)))
    return MX_OK;
#endif
  size_t row_bytes = (size_t)H * mx_dtype_size(o->dtype);
  char *po = mx_ptr(o);
  if (nin > 2)
    for (int64_t r = 0; r < rows; r++) memcpy(po + (size_t)r * row_bytes, mx_ptr(in[2]), row_bytes);
  int rc = gemm(d->dtype, false, true, rows, H, U, mx_ptr(d), mx_ptr(w), nin > 2 ? 1.0f : 0.0f, po);
  if (rc == MX_OK && relu) {
    if (o->dtype == MX_F32) {
      float *v = (float *)po;
      for (int64_t i = 0; i < o->size; i++) v[i] = v[i] > 0 ? v[i] : 0;
    } else if (o->dtype == MX_BF16) { /* negative (and -0) to +0, NaN kept */
      uint16_t *v = (uint16_t *)po;
      for (int64_t i = 0; i < o->size; i++)
        if ((v[i] & 0x8000u) && (v[i] & 0x7fffu) <= 0x7f80u) v[i] = 0;
    } else {
      double *v = (double *)po;
      for (int64_t i = 0; i < o->size; i++) v[i] = v[i] > 0 ? v[i] : 0;
    }
  }
  return rc;
}

/* ---- linalg_* (MXNet's la_op) on BLAS/LAPACK (kernels/cpu/lapack.h). LAPACK is
 * column-major: a row-major matrix is its transpose there, which the kernels use (the
 * Cholesky factor of A^T = A as U^T U is L read row-major; inv(A^T) and det(A^T) read
 * row-major are inv(A) and det(A)). Matrices too big for LAPACK's int: the ref kernels. */
#include <float.h>
#include <math.h>
#include "lapack.h"

/* As kernels/ref/linalg.c's la_singular_tol: n * eps(dtype) * max|a|, -1 for NaN/Inf. */
static double la_singular_tol(const char *m, int n, int dtype) {
  double mx = 0;
  for (int64_t i = 0; i < (int64_t)n * n; i++) {
    double v = dtype == MX_F32 ? (double)((const float *)(const void *)m)[i]
                               : ((const double *)(const void *)m)[i];
    if (!isfinite(v)) return -1;
    if (fabs(v) > mx) mx = fabs(v);
  }
  return (double)n * (dtype == MX_F32 ? FLT_EPSILON : DBL_EPSILON) * mx;
}
/* a pivot of the LU in m at or under tol */
static bool la_lu_singular(const char *m, int n, int dtype, double tol) {
  for (int i = 0; i < n; i++) {
    double d = dtype == MX_F32 ? (double)((const float *)(const void *)m)[(size_t)i * n + i]
                               : ((const double *)(const void *)m)[(size_t)i * n + i];
    if (fabs(d) <= tol) return true;
  }
  return false;
}

int mx_ref_linalg_gemm2(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_gemm(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_potrf(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_inverse(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_det(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_slogdet(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

/* alpha op(A) op(B) + beta C per batch element through cblas (C copied to out first) */
static int la_cpu_gemm(const mx_tensor *a, const mx_tensor *b, const mx_tensor *c, bool ta,
                       bool tb, double alpha, double beta, mx_tensor *o) {
  int n = o->ndim;
  int64_t M = o->shape[n - 2], N = o->shape[n - 1], K = a->shape[n - (ta ? 2 : 1)];
  if (!blas_ok(o->dtype, M, N, K)) return -1;
  int64_t batch = M * N != 0 ? o->size / (M * N) : 0;
  if (batch == 0) return MX_OK;
  int rc = blas_room("linalg_gemm");
  if (rc) return rc;
  pthread_once(&blas_once, blas_init);
  if (c) memcpy(mx_ptr(o), mx_ptr(c), (size_t)o->size * mx_dtype_size(o->dtype));
  else beta = 0;
  enum CBLAS_TRANSPOSE A_ = ta ? CblasTrans : CblasNoTrans, B_ = tb ? CblasTrans : CblasNoTrans;
  int lda = (int)(ta ? M : K), ldb = (int)(tb ? K : N);
  if (lda < 1) lda = 1;
  if (ldb < 1) ldb = 1;
  for (int64_t i = 0; i < batch; i++) {
    if (o->dtype == MX_F32)
      cblas_sgemm(CblasRowMajor, A_, B_, (int)M, (int)N, (int)K, (float)alpha,
                  (const float *)mx_ptr(a) + i * M * K, lda, (const float *)mx_ptr(b) + i * K * N,
                  ldb, (float)beta, (float *)mx_ptr(o) + i * M * N, (int)N);
    else
      cblas_dgemm(CblasRowMajor, A_, B_, (int)M, (int)N, (int)K, alpha,
                  (const double *)mx_ptr(a) + i * M * K, lda,
                  (const double *)mx_ptr(b) + i * K * N, ldb, beta,
                  (double *)mx_ptr(o) + i * M * N, (int)N);
  }
  return MX_OK;
}

int mx_cpu_linalg_gemm2(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_gemm2 *P = p;
  int rc = la_cpu_gemm(in[0], in[1], NULL, P->transpose_a, P->transpose_b, P->alpha, 0, out[0]);
  return rc < 0 ? mx_ref_linalg_gemm2(ctx, p, nin, in, nout, out) : rc;
}

int mx_cpu_linalg_gemm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_gemm *P = p;
  int rc = la_cpu_gemm(in[0], in[1], in[2], P->transpose_a, P->transpose_b, P->alpha, P->beta,
                       out[0]);
  return rc < 0 ? mx_ref_linalg_gemm(ctx, p, nin, in, nout, out) : rc;
}

/* the matrices' order n when LAPACK's int can hold the sizes, else -1 */
static int la_order(const mx_tensor *a, int64_t *count) {
  int64_t n = a->shape[a->ndim - 1];
  *count = n ? a->size / (n * n) : 0;
  return n * n <= INT_MAX ? (int)n : -1;
}

int mx_cpu_linalg_potrf(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  int64_t cnt;
  int n = la_order(in[0], &cnt), lda = n > 1 ? n : 1, info = 0;
  if (n < 0) return mx_ref_linalg_potrf(ctx, p, nin, in, nout, out);
  mx_tensor *o = out[0];
  size_t es = mx_dtype_size(o->dtype);
  if (o->size) memcpy(mx_ptr(o), mx_ptr(in[0]), (size_t)o->size * es);
  for (int64_t b = 0; b < cnt; b++) {
    char *m = (char *)mx_ptr(o) + (size_t)b * (size_t)n * (size_t)n * es;
    if (o->dtype == MX_F32) spotrf_("U", &n, (float *)(void *)m, &lda, &info);
    else dpotrf_("U", &n, (double *)(void *)m, &lda, &info);
    if (info != 0)
      return mx_err(MX_EINVAL, "linalg_potrf: matrix %lld of the batch (0-based, flattened "
                    "leading dims) is not positive definite", (long long)b);
    /* zero the upper triangle (row-major), which LAPACK leaves as it was */
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) {
        if (o->dtype == MX_F32) ((float *)(void *)m)[i * n + j] = 0;
        else ((double *)(void *)m)[i * n + j] = 0;
      }
  }
  return MX_OK;
}

int mx_cpu_linalg_inverse(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  int64_t cnt;
  int n = la_order(in[0], &cnt), lda = n > 1 ? n : 1, info = 0;
  if (n < 0) return mx_ref_linalg_inverse(ctx, p, nin, in, nout, out);
  mx_tensor *o = out[0];
  size_t es = mx_dtype_size(o->dtype);
  if (o->size == 0) return MX_OK;
  memcpy(mx_ptr(o), mx_ptr(in[0]), (size_t)o->size * es);
  int lwork = 64 * lda;
  int *piv = malloc(sizeof(int) * (size_t)lda);
  void *work = malloc(es * (size_t)lwork);
  if (!piv || !work) { free(piv); free(work); return mx_err(MX_ENOMEM, "linalg_inverse: out of memory"); }
  for (int64_t b = 0; b < cnt && info == 0; b++) {
    char *m = (char *)mx_ptr(o) + (size_t)b * (size_t)n * (size_t)n * es;
    double tol = la_singular_tol(m, n, o->dtype);
    if (tol < 0) { /* NaN/Inf in: NaN out (LAPACK's results there vary) */
      for (int64_t i = 0; i < (int64_t)n * n; i++) {
        if (o->dtype == MX_F32) ((float *)(void *)m)[i] = NAN;
        else ((double *)(void *)m)[i] = NAN;
      }
      continue;
    }
    if (o->dtype == MX_F32) {
      sgetrf_(&n, &n, (float *)(void *)m, &lda, piv, &info);
      if (info == 0 && la_lu_singular(m, n, o->dtype, tol)) info = 1;
      if (info == 0) sgetri_(&n, (float *)(void *)m, &lda, piv, work, &lwork, &info);
    } else {
      dgetrf_(&n, &n, (double *)(void *)m, &lda, piv, &info);
      if (info == 0 && la_lu_singular(m, n, o->dtype, tol)) info = 1;
      if (info == 0) dgetri_(&n, (double *)(void *)m, &lda, piv, work, &lwork, &info);
    }
    if (info != 0) {
      free(piv); free(work);
      return mx_err(MX_EINVAL, "linalg_inverse: matrix %lld of the batch (0-based, flattened "
                    "leading dims) is singular", (long long)b);
    }
  }
  free(piv); free(work);
  return MX_OK;
}

/* det (nout 1) or sign, log|det| (nout 2) from getrf's LU */
static int la_cpu_det(const char *op, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  int64_t cnt;
  int n = la_order(in[0], &cnt), lda = n > 1 ? n : 1, info = 0;
  const mx_tensor *a = in[0];
  size_t es = mx_dtype_size(a->dtype);
  double *w = malloc(sizeof(double) * (size_t)lda * (size_t)lda);
  int *piv = malloc(sizeof(int) * (size_t)lda);
  if (!w || !piv) { free(w); free(piv); return mx_err(MX_ENOMEM, "%s: out of memory", op); }
  for (int64_t b = 0; b < cnt; b++) {
    /* f64 LU for both dtypes: an f32 det over- or underflows long before its log does */
    for (int64_t i = 0; i < (int64_t)n * n; i++)
      w[i] = a->dtype == MX_F32 ? (double)((const float *)mx_ptr(a))[b * n * n + i]
                                : ((const double *)mx_ptr(a))[b * n * n + i];
    double tol = la_singular_tol((const char *)w, n, MX_F64);
    if (a->dtype == MX_F32 && tol > 0) tol *= (double)FLT_EPSILON / DBL_EPSILON;
    if (n > 0 && tol >= 0) dgetrf_(&n, &n, w, &lda, piv, &info);
    double sign = 1, logabs = 0, det = 1;
    if (info > 0 || (tol >= 0 && la_lu_singular((const char *)w, n, MX_F64, tol)))
      sign = 0; /* singular */
    if (tol < 0) sign = det = logabs = NAN; /* NaN/Inf in: NaN out */
    for (int i = 0; sign != 0 && tol >= 0 && i < n; i++) {
      double d = w[(size_t)i * (size_t)n + (size_t)i];
      if (piv[i] != i + 1) { sign = -sign; det = -det; } /* a row swap */
      if (d < 0) sign = -sign;
      det *= d;
      logabs += log(fabs(d));
    }
    info = 0;
    double v0 = nout == 1 ? (sign != 0 ? det : 0) : sign;
    double v1 = sign != 0 ? logabs : -INFINITY;
    if (a->dtype == MX_F32) {
      ((float *)mx_ptr(out[0]))[b] = (float)v0;
      if (nout == 2) ((float *)mx_ptr(out[1]))[b] = (float)v1;
    } else {
      ((double *)mx_ptr(out[0]))[b] = v0;
      if (nout == 2) ((double *)mx_ptr(out[1]))[b] = v1;
    }
  }
  (void)es;
  free(w); free(piv);
  return MX_OK;
}

int mx_cpu_linalg_det(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  int64_t cnt;
  if (la_order(in[0], &cnt) < 0) return mx_ref_linalg_det(ctx, p, nin, in, nout, out);
  return la_cpu_det("linalg_det", in, nout, out);
}

int mx_cpu_linalg_slogdet(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  int64_t cnt;
  if (la_order(in[0], &cnt) < 0) return mx_ref_linalg_slogdet(ctx, p, nin, in, nout, out);
  return la_cpu_det("linalg_slogdet", in, nout, out);
}

/* syrk through cblas_?gemm (the full symmetric result, as MXNet's output) */
int mx_ref_linalg_syrk(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_cpu_linalg_syrk(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_syrk *P = p;
  int rc = la_cpu_gemm(in[0], in[0], NULL, P->transpose, !P->transpose, P->alpha, 0, out[0]);
  return rc < 0 ? mx_ref_linalg_syrk(ctx, p, nin, in, nout, out) : rc;
}

/* ---- trsm through cblas_dtrsm in place on a copy of B (row-major: the triangle and
 * transpose flags mean what they say). f32 is solved in double too: a triangular solve
 * amplifies rounding by A's condition number, and the conversion is O(m^2 + mn) against
 * the solve's O(m^2 n); the result then agrees with the ref kernel's double arithmetic. */
int mx_ref_linalg_trsm(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

int mx_cpu_linalg_trsm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_trsm *P = p;
  mx_tensor *o = out[0];
  int nd = o->ndim;
  int64_t cnt, R = o->shape[nd - 2], C = o->shape[nd - 1];
  int m = la_order(in[0], &cnt);
  if (m < 0 || !blas_ok(o->dtype, R, C, m)) return mx_ref_linalg_trsm(ctx, p, nin, in, nout, out);
  if (o->size == 0) return MX_OK;
  int rc = blas_room("linalg_trsm");
  if (rc) return rc;
  pthread_once(&blas_once, blas_init);
  bool f32 = o->dtype == MX_F32;
  int64_t mm = (int64_t)m * m, bs = R * C;
  double *w = NULL;
  if (f32) {
    w = malloc(sizeof(double) * (size_t)(mm + bs));
    if (!w) return mx_err(MX_ENOMEM, "linalg_trsm: out of memory");
  } else {
    memcpy(mx_ptr(o), mx_ptr(in[1]), (size_t)o->size * sizeof(double));
  }
  enum CBLAS_SIDE side = P->rightside ? CblasRight : CblasLeft;
  enum CBLAS_UPLO uplo = P->lower ? CblasLower : CblasUpper;
  enum CBLAS_TRANSPOSE tr = P->transpose ? CblasTrans : CblasNoTrans;
  int lda = m > 1 ? m : 1, ldb = C > 1 ? (int)C : 1;
  for (int64_t k = 0; k < cnt; k++) {
    const double *A;
    double *X;
    if (!f32) {
      A = (const double *)mx_ptr(in[0]) + k * mm;
      X = (double *)mx_ptr(o) + k * bs;
    } else {
      const float *fa = (const float *)mx_ptr(in[0]) + k * mm, *fb = (const float *)mx_ptr(in[1]) + k * bs;
      for (int64_t i = 0; i < mm; i++) w[i] = fa[i];
      for (int64_t i = 0; i < bs; i++) w[mm + i] = fb[i];
      A = w;
      X = w + mm;
    }
    cblas_dtrsm(CblasRowMajor, side, uplo, tr, CblasNonUnit, (int)R, (int)C, P->alpha, A, lda,
                X, ldb);
    if (f32) {
      float *fo = (float *)mx_ptr(o) + k * bs;
      for (int64_t i = 0; i < bs; i++) fo[i] = (float)X[i];
    }
  }
  free(w);
  /* an overflow inside BLAS (huge alpha, a tiny pivot) gives Inf/NaN that depend on its
   * order of operations: redo such a result in the ref kernel's plain substitution */
  for (int64_t i = 0; i < o->size; i++) {
    double v = f32 ? (double)((const float *)mx_ptr(o))[i] : ((const double *)mx_ptr(o))[i];
    if (!isfinite(v)) return mx_ref_linalg_trsm(ctx, p, nin, in, nout, out);
  }
  return MX_OK;
}

/* ---- potri on LAPACK's ?potri. Row-major lower L is column-major upper U = L^T, and
 * (U^T U)^-1 = (L L^T)^-1: potri("U") leaves the inverse's row-major lower triangle,
 * which is mirrored into the upper. */
int mx_ref_linalg_potri(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

int mx_cpu_linalg_potri(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  int64_t cnt;
  int n = la_order(in[0], &cnt), lda = n > 1 ? n : 1, info = 0;
  if (n < 0) return mx_ref_linalg_potri(ctx, p, nin, in, nout, out);
  mx_tensor *o = out[0];
  size_t es = mx_dtype_size(o->dtype);
  if (o->size) memcpy(mx_ptr(o), mx_ptr(in[0]), (size_t)o->size * es);
  for (int64_t b = 0; b < cnt; b++) {
    char *m = (char *)mx_ptr(o) + (size_t)b * (size_t)n * (size_t)n * es;
    /* NaN/Inf in L's triangle or in LAPACK's result (a denormal pivot overflows): the
     * ref kernel's answer (NaN matrix / plain arithmetic), not LAPACK's order-dependent one */
    for (int i = 0; i < n; i++)
      for (int j = 0; j <= i; j++) {
        double v = o->dtype == MX_F32 ? (double)((float *)(void *)m)[i * n + j]
                                      : ((double *)(void *)m)[i * n + j];
        if (!isfinite(v)) return mx_ref_linalg_potri(ctx, p, nin, in, nout, out);
      }
    if (o->dtype == MX_F32) spotri_("U", &n, (float *)(void *)m, &lda, &info);
    else dpotri_("U", &n, (double *)(void *)m, &lda, &info);
    if (info != 0)
      return mx_err(MX_EINVAL, "linalg_potri: matrix %lld of the batch (0-based, flattened "
                    "leading dims) has a zero on its diagonal", (long long)b);
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) {
        if (o->dtype == MX_F32) ((float *)(void *)m)[i * n + j] = ((float *)(void *)m)[j * n + i];
        else ((double *)(void *)m)[i * n + j] = ((double *)(void *)m)[j * n + i];
      }
    for (int i = 0; i < n * n; i++) {
      double v = o->dtype == MX_F32 ? (double)((float *)(void *)m)[i] : ((double *)(void *)m)[i];
      if (!isfinite(v)) return mx_ref_linalg_potri(ctx, p, nin, in, nout, out);
    }
  }
  return MX_OK;
}

/* ---- issue 14: trmm, gelqf, syevd on BLAS/LAPACK, in double for both dtypes (the
 * results then agree with the ref kernels' double arithmetic) ---- */
int mx_ref_linalg_trmm(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_gelqf(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_linalg_syevd(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

static void la_cpu_load(const mx_tensor *t, int64_t off, int64_t n, double *w) {
  if (t->dtype == MX_F32)
    for (int64_t i = 0; i < n; i++) w[i] = ((const float *)mx_ptr(t))[off + i];
  else memcpy(w, (const double *)mx_ptr(t) + off, sizeof(double) * (size_t)n);
}
static void la_cpu_store(mx_tensor *t, int64_t off, int64_t n, const double *w) {
  if (t->dtype == MX_F32)
    for (int64_t i = 0; i < n; i++) ((float *)mx_ptr(t))[off + i] = (float)w[i];
  else memcpy((double *)mx_ptr(t) + off, w, sizeof(double) * (size_t)n);
}

int mx_cpu_linalg_trmm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_trmm *P = p;
  mx_tensor *o = out[0];
  int nd = o->ndim;
  int64_t cnt, R = o->shape[nd - 2], C = o->shape[nd - 1];
  int m = la_order(in[0], &cnt);
  if (m < 0 || !blas_ok(o->dtype, R, C, m)) return mx_ref_linalg_trmm(ctx, p, nin, in, nout, out);
  if (o->size == 0) return MX_OK;
  int rc = blas_room("linalg_trmm");
  if (rc) return rc;
  pthread_once(&blas_once, blas_init);
  int64_t mm = (int64_t)m * m, bs = R * C;
  double *w = malloc(sizeof(double) * (size_t)(mm + bs));
  if (!w) return mx_err(MX_ENOMEM, "linalg_trmm: out of memory");
  int lda = m > 1 ? m : 1, ldb = C > 1 ? (int)C : 1;
  for (int64_t k = 0; k < cnt; k++) {
    la_cpu_load(in[0], k * mm, mm, w);
    la_cpu_load(in[1], k * bs, bs, w + mm);
    cblas_dtrmm(CblasRowMajor, P->rightside ? CblasRight : CblasLeft,
                P->lower ? CblasLower : CblasUpper, P->transpose ? CblasTrans : CblasNoTrans,
                CblasNonUnit, (int)R, (int)C, P->alpha, w, lda, w + mm, ldb);
    la_cpu_store(o, k * bs, bs, w + mm);
  }
  free(w);
  /* Inf/NaN in the result depend on BLAS's order of operations (alpha applied first or
   * last): redo such a result in the ref kernel's plain sums */
  for (int64_t i = 0; i < o->size; i++) {
    double v = o->dtype == MX_F32 ? (double)((const float *)mx_ptr(o))[i] : ((const double *)mx_ptr(o))[i];
    if (!isfinite(v)) return mx_ref_linalg_trmm(ctx, p, nin, in, nout, out);
  }
  return MX_OK;
}

/* gelqf as MXNet does it: row-major A (m, n) is column-major A^T (n, m); geqrf of A^T
 * leaves R = L^T in its upper triangle (L's lower, read row-major) and orgqr turns the
 * reflectors into Q^T (n, m) column-major, Q read row-major. */
int mx_cpu_linalg_gelqf(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  const mx_tensor *a = in[0];
  int nd = a->ndim;
  int64_t m64 = a->shape[nd - 2], n64 = a->shape[nd - 1], mn = m64 * n64;
  if (mn == 0) return mx_ref_linalg_gelqf(ctx, p, nin, in, nout, out);
  if (mn > INT_MAX) return mx_ref_linalg_gelqf(ctx, p, nin, in, nout, out);
  pthread_once(&blas_once, blas_init);
  int m = (int)m64, n = (int)n64, info = 0, lwork = -1;
  int64_t cnt = a->size / mn;
  for (int64_t i = 0; i < a->size; i++) { /* NaN/Inf: the ref kernel's plain arithmetic */
    double v = a->dtype == MX_F32 ? (double)((const float *)mx_ptr(a))[i]
                                  : ((const double *)mx_ptr(a))[i];
    if (!isfinite(v)) return mx_ref_linalg_gelqf(ctx, p, nin, in, nout, out);
  }
  double q1 = 0, q2 = 0, *W = malloc(sizeof(double) * (size_t)(mn + m64 * m64 + m64));
  if (!W) return mx_err(MX_ENOMEM, "linalg_gelqf: out of memory");
  double *L = W + mn, *tau = L + m64 * m64;
  dgeqrf_(&n, &m, W, &n, tau, &q1, &lwork, &info);
  dorgqr_(&n, &m, &m, W, &n, tau, &q2, &lwork, &info);
  lwork = (int)(q1 > q2 ? q1 : q2);
  if (lwork < 1) lwork = 1;
  double *work = malloc(sizeof(double) * (size_t)lwork);
  if (!work) { free(W); return mx_err(MX_ENOMEM, "linalg_gelqf: out of memory"); }
  for (int64_t b = 0; b < cnt && info == 0; b++) {
    la_cpu_load(a, b * mn, mn, W);
    dgeqrf_(&n, &m, W, &n, tau, work, &lwork, &info);
    for (int i = 0; i < m; i++)
      for (int j = 0; j < m; j++) L[i * m + j] = j <= i ? W[i * n + j] : 0;
    /* a (nearly) rank-deficient A: Q's rows past the rank come from rounding noise, so any
     * answer is as valid as another; the ref kernel's is the one both kernels give */
    double dmax = 0;
    for (int i = 0; i < m; i++) dmax = fmax(dmax, fabs(L[i * m + i]));
    for (int i = 0; i < m; i++)
      if (!(fabs(L[i * m + i]) > 1e-9 * dmax)) {
        free(W); free(work);
        return mx_ref_linalg_gelqf(ctx, p, nin, in, nout, out);
      }
    if (info == 0) dorgqr_(&n, &m, &m, W, &n, tau, work, &lwork, &info);
    la_cpu_store(out[0], b * mn, mn, W);
    la_cpu_store(out[1], b * m64 * m64, m64 * m64, L);
  }
  free(W); free(work);
  if (info != 0) return mx_err(MX_EINVAL, "linalg_gelqf: LAPACK geqrf/orgqr failed (info %d)", info);
  return MX_OK;
}

/* syevd on dsyevd: row-major A's lower triangle is column-major's upper ("U"); the
 * eigenvectors come back as column-major columns, i.e. row-major rows (MXNet's U). Then
 * MXNet's sign rule: each row's first largest-magnitude entry positive. */
int mx_cpu_linalg_syevd(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  int64_t cnt;
  int n = la_order(in[0], &cnt), lda, info = 0, lwork = -1, liwork = -1, qi = 0;
  if (n <= 0) return mx_ref_linalg_syevd(ctx, p, nin, in, nout, out);
  lda = n;
  const mx_tensor *a = in[0];
  int64_t nn = (int64_t)n * n;
  for (int64_t b = 0; b < cnt; b++) /* NaN/Inf in a triangle: the ref kernel's NaN outputs */
    for (int i = 0; i < n; i++)
      for (int j = 0; j <= i; j++) {
        int64_t at = b * nn + (int64_t)i * n + j;
        double v = a->dtype == MX_F32 ? (double)((const float *)mx_ptr(a))[at]
                                      : ((const double *)mx_ptr(a))[at];
        if (!isfinite(v)) return mx_ref_linalg_syevd(ctx, p, nin, in, nout, out);
      }
  pthread_once(&blas_once, blas_init);
  double q = 0, *W = malloc(sizeof(double) * (size_t)(nn + n));
  if (!W) return mx_err(MX_ENOMEM, "linalg_syevd: out of memory");
  double *lam = W + nn;
  dsyevd_("V", "U", &n, W, &lda, lam, &q, &lwork, &qi, &liwork, &info);
  lwork = (int)q > 1 ? (int)q : 1;
  liwork = qi > 1 ? qi : 1;
  double *work = malloc(sizeof(double) * (size_t)lwork);
  int *iwork = malloc(sizeof(int) * (size_t)liwork);
  if (!work || !iwork) {
    free(W); free(work); free(iwork);
    return mx_err(MX_ENOMEM, "linalg_syevd: out of memory");
  }
  int64_t bad = -1;
  for (int64_t b = 0; b < cnt; b++) {
    la_cpu_load(a, b * nn, nn, W);
    info = 0;
    dsyevd_("V", "U", &n, W, &lda, lam, work, &lwork, iwork, &liwork, &info);
    if (info != 0) { bad = b; break; }
    /* repeated (or nearly repeated) eigenvalues: their eigenvectors span a subspace in
     * which any orthonormal basis is valid; the ref kernel's is the one both kernels give */
    double lmax = fmax(fabs(lam[0]), fabs(lam[n - 1]));
    for (int i = 0; i + 1 < n; i++)
      if (!(lam[i + 1] - lam[i] > 1e-9 * lmax)) {
        free(W); free(work); free(iwork);
        return mx_ref_linalg_syevd(ctx, p, nin, in, nout, out);
      }
    for (int i = 0; i < n; i++) {
      double *u = W + (int64_t)i * n, mx = fabs(u[0]);
      int k = 0;
      for (int j = 1; j < n; j++)
        if (fabs(u[j]) > mx) { mx = fabs(u[j]); k = j; }
      if (u[k] < 0)
        for (int j = 0; j < n; j++) u[j] = -u[j];
    }
    la_cpu_store(out[0], b * nn, nn, W);
    la_cpu_store(out[1], b * n, n, lam);
  }
  free(W); free(work); free(iwork);
  if (bad >= 0)
    return mx_err(MX_EINVAL, "linalg_syevd: matrix %lld of the batch (0-based, flattened "
                  "leading dims) did not converge (LAPACK syevd info %d)", (long long)bad, info);
  return MX_OK;
}

/* ---- issue 12: MXNet's interleaved attention matmuls (owner: i12-attn) ------------------
 * Every one is a batch of N*heads GEMMs on strided operands, read in place: a head's
 * queries are T rows of D values, each row `ld` elements after the last, head b's first
 * row `bs` elements after head b-1's (qkv: ld = N*H*3*D, bs = 3*D). BLAS takes the row
 * stride as lda, so no interleaved copy is ever made. Layouts: kernels/ref/linalg.c. */
int mx_ref_interleaved_matmul_selfatt_qk(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_selfatt_valatt(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_encdec_qk(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_encdec_valatt(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_selfatt_qk_backward(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_selfatt_valatt_backward(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_encdec_qk_backward(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);
int mx_ref_interleaved_matmul_encdec_valatt_backward(const mx_kctx *, const void *, int, mx_tensor *const *, int, mx_tensor *const *);

/* C = alpha op(A) . op(B) (beta 0) with row strides: the one BLAS call of this block */
static int gemm_ld(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                   const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc) {
  if (dtype == MX_F32) {
#ifdef MX_HAVE_ONEDNN
    if (mx_dnnl_note_use()) { /* else oneDNN cannot start (address space): OpenBLAS */
      int prev, nt = gemm_team_begin(M, N, K, &prev);
      dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, (float)alpha, A,
                                    lda, B, ldb, 0.0f, C, ldc);
      gemm_team_end(nt, prev);
      if (st != dnnl_success) return sgemm_failed("attention", st, M, N, K);
      return MX_OK;
    }
#endif
    pthread_once(&blas_once, blas_init);
    int rc = blas_room("attention");
    if (rc) return rc;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, (float)alpha, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
    return MX_OK;
  }
  pthread_once(&blas_once, blas_init);
  int rc = blas_room("attention");
  if (rc) return rc;
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, 0.0, C, (int)ldc);
  return MX_OK;
}

typedef struct { char *p; int64_t ld, bs; } att_opnd; /* p: element 0 of batch 0, row 0 */
typedef struct {
  int dtype;
  bool ta, tb;
  int64_t M, N, K;
  double alpha;
  att_opnd a, b, c;
  int rc;
} sbatch_ctx;

static void sbatch_range(int64_t begin, int64_t end, void *vc) {
  sbatch_ctx *c = vc;
  size_t es = mx_dtype_size(c->dtype);
  for (int64_t i = begin; i < end; i++) {
    int rc = gemm_ld(c->dtype, c->ta, c->tb, c->M, c->N, c->K, c->alpha,
                     c->a.p + (size_t)(i * c->a.bs) * es, c->a.ld,
                     c->b.p + (size_t)(i * c->b.bs) * es, c->b.ld,
                     c->c.p + (size_t)(i * c->c.bs) * es, c->c.ld);
    if (rc) c->rc = rc;
  }
}

/* Small GEMMs (a head's T x T x D): one per task across the pool, each single-threaded;
 * big ones one after another, each threaded by the BLAS (run_batch's rule). */
static int sbatch(int dtype, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                  att_opnd a, att_opnd b, att_opnd c, int64_t batch) {
  sbatch_ctx x = { dtype, ta, tb, M, N, K, alpha, a, b, c, MX_OK };
  double flops = 2.0 * (double)M * (double)N * (double)K;
  if (flops < 2.0 * 128 * 128 * 128 && batch > 1)
    mx_parallel_for(batch, 1 + (int64_t)(4e5 / (flops + 1)), sbatch_range, &x);
  else
    sbatch_range(0, batch, &x);
  return x.rc;
}

/* zeroes a part of width D of every (row, batch) of a sequence operand */
typedef struct { att_opnd o; int64_t B, D; size_t es; } zero_ctx;
static void zero_rows(int64_t b, int64_t e, void *vc) {
  const zero_ctx *z = vc;
  for (int64_t t = b; t < e; t++)
    for (int64_t h = 0; h < z->B; h++)
      memset(z->o.p + (size_t)(t * z->o.ld + h * z->o.bs) * z->es, 0, (size_t)z->D * z->es);
}
static void zero_part(int dtype, att_opnd o, int64_t T, int64_t B, int64_t D) {
  zero_ctx z = { o, B, D, mx_dtype_size(dtype) };
  mx_parallel_for(T, 1 + (1 << 16) / (B * D + 1), zero_rows, &z);
}

/* One problem: B heads, Tq queries against Tk keys of width D; q, k, v, o as operands. */
typedef struct {
  int dtype;
  int64_t B, Tq, Tk, D;
  double scale;
  att_opnd q, k, v;
} att_geo;

static att_opnd opnd(const mx_tensor *t, int64_t ld, int64_t bs, int64_t off) {
  att_opnd o = { (char *)mx_ptr(t) + (size_t)off * mx_dtype_size(t->dtype), ld, bs };
  return o;
}
static att_opnd amap(const mx_tensor *t, const att_geo *g) { /* attention (B, Tq, Tk) */
  return opnd(t, g->Tk, g->Tq * g->Tk, 0);
}
static att_opnd orow(const mx_tensor *t, const att_geo *g) { /* (Tq, N, H*D) */
  return opnd(t, g->B * g->D, g->D, 0);
}

/* self: qkv (T, N, 3HD); encdec: q (Tq, N, HD) and kv (Tk, N, 2HD) */
static bool att_self(const mx_tensor *qkv, int64_t heads, att_geo *g) {
  g->dtype = qkv->dtype;
  g->B = qkv->shape[1] * heads, g->Tq = g->Tk = qkv->shape[0];
  g->D = qkv->shape[2] / (3 * heads);
  int64_t L = 3 * g->B * g->D;
  g->q = opnd(qkv, L, 3 * g->D, 0), g->k = opnd(qkv, L, 3 * g->D, g->D);
  g->v = opnd(qkv, L, 3 * g->D, 2 * g->D);
  g->scale = g->D ? 1 / sqrt((double)g->D) : 1;
  return blas_ok(g->dtype, g->Tq, g->Tk, L) && g->B && g->Tq && g->D &&
         (g->dtype == MX_F32 || g->dtype == MX_F64);
}
static bool att_encdec(const mx_tensor *q, const mx_tensor *kv, int64_t heads, att_geo *g) {
  g->dtype = kv->dtype;
  g->B = kv->shape[1] * heads, g->Tk = kv->shape[0];
  g->D = kv->shape[2] / (2 * heads);
  g->Tq = q ? q->shape[0] : 0;
  int64_t L = 2 * g->B * g->D;
  if (q) g->q = opnd(q, g->B * g->D, g->D, 0);
  g->k = opnd(kv, L, 2 * g->D, 0), g->v = opnd(kv, L, 2 * g->D, g->D);
  g->scale = g->D ? 1 / sqrt((double)g->D) : 1;
  return blas_ok(g->dtype, g->Tk, g->Tk, L) && g->B && g->Tk && g->D &&
         (g->dtype == MX_F32 || g->dtype == MX_F64);
}

static int att_qk(const att_geo *g, const mx_tensor *a) {
  return sbatch(g->dtype, false, true, g->Tq, g->Tk, g->D, g->scale, g->q, g->k, amap(a, g), g->B);
}
static int att_av(const att_geo *g, const mx_tensor *a, const mx_tensor *o) {
  return sbatch(g->dtype, false, false, g->Tq, g->D, g->Tk, 1, amap(a, g), g->v, orow(o, g), g->B);
}
/* dQ = scale G . K, dK = scale G^T . Q */
static int att_qk_bwd(const att_geo *g, const mx_tensor *G, att_opnd dq, att_opnd dk) {
  int rc = sbatch(g->dtype, false, false, g->Tq, g->D, g->Tk, g->scale, amap(G, g), g->k, dq, g->B);
  if (!rc) rc = sbatch(g->dtype, true, false, g->Tk, g->D, g->Tq, g->scale, amap(G, g), g->q, dk, g->B);
  return rc;
}
/* dA = G . V^T, dV = A^T . G */
static int att_av_bwd(const att_geo *g, const mx_tensor *G, const mx_tensor *a,
                      const mx_tensor *da, att_opnd dv) {
  int rc = sbatch(g->dtype, false, true, g->Tq, g->Tk, g->D, 1, orow(G, g), g->v, amap(da, g), g->B);
  if (!rc) rc = sbatch(g->dtype, true, false, g->Tk, g->D, g->Tq, 1, amap(a, g), orow(G, g), dv, g->B);
  return rc;
}

#define ATT_FALLBACK(op) return mx_ref_##op(ctx, p, nin, in, nout, out)

int mx_cpu_interleaved_matmul_selfatt_qk(const mx_kctx *ctx, const void *p, int nin,
                                         mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_selfatt_qk *P = p;
  att_geo g = {0};
  if (!att_self(in[0], P->heads, &g)) ATT_FALLBACK(interleaved_matmul_selfatt_qk);
  return att_qk(&g, out[0]);
}
int mx_cpu_interleaved_matmul_selfatt_valatt(const mx_kctx *ctx, const void *p, int nin,
                                             mx_tensor *const *in, int nout,
                                             mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_selfatt_valatt *P = p;
  att_geo g = {0};
  if (!att_self(in[0], P->heads, &g)) ATT_FALLBACK(interleaved_matmul_selfatt_valatt);
  return att_av(&g, in[1], out[0]);
}
int mx_cpu_interleaved_matmul_encdec_qk(const mx_kctx *ctx, const void *p, int nin,
                                        mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_encdec_qk *P = p;
  att_geo g = {0};
  if (!att_encdec(in[0], in[1], P->heads, &g) || !g.Tq)
    ATT_FALLBACK(interleaved_matmul_encdec_qk);
  return att_qk(&g, out[0]);
}
int mx_cpu_interleaved_matmul_encdec_valatt(const mx_kctx *ctx, const void *p, int nin,
                                            mx_tensor *const *in, int nout,
                                            mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_encdec_valatt *P = p;
  att_geo g = {0};
  if (!att_encdec(NULL, in[0], P->heads, &g) || !in[1]->shape[1])
    ATT_FALLBACK(interleaved_matmul_encdec_valatt);
  g.Tq = in[1]->shape[1];
  return att_av(&g, in[1], out[0]);
}

int mx_cpu_interleaved_matmul_selfatt_qk_backward(const mx_kctx *ctx, const void *p, int nin,
                                                  mx_tensor *const *in, int nout,
                                                  mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_selfatt_qk_backward *P = p;
  att_geo g, d;
  if (!att_self(in[1], P->heads, &g)) ATT_FALLBACK(interleaved_matmul_selfatt_qk_backward);
  att_self(out[0], P->heads, &d);
  zero_part(g.dtype, d.v, g.Tq, g.B, g.D);
  return att_qk_bwd(&g, in[0], d.q, d.k);
}
int mx_cpu_interleaved_matmul_selfatt_valatt_backward(const mx_kctx *ctx, const void *p, int nin,
                                                      mx_tensor *const *in, int nout,
                                                      mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_selfatt_valatt_backward *P = p;
  att_geo g, d;
  if (!att_self(in[1], P->heads, &g)) ATT_FALLBACK(interleaved_matmul_selfatt_valatt_backward);
  att_self(out[0], P->heads, &d);
  zero_part(g.dtype, d.q, g.Tq, g.B, 2 * g.D); /* q and k sit side by side */
  return att_av_bwd(&g, in[0], in[2], out[1], d.v);
}
int mx_cpu_interleaved_matmul_encdec_qk_backward(const mx_kctx *ctx, const void *p, int nin,
                                                 mx_tensor *const *in, int nout,
                                                 mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_encdec_qk_backward *P = p;
  att_geo g, d;
  if (!att_encdec(in[1], in[2], P->heads, &g) || !g.Tq)
    ATT_FALLBACK(interleaved_matmul_encdec_qk_backward);
  att_encdec(out[0], out[1], P->heads, &d);
  zero_part(g.dtype, d.v, g.Tk, g.B, g.D);
  return att_qk_bwd(&g, in[0], d.q, d.k);
}
int mx_cpu_interleaved_matmul_encdec_valatt_backward(const mx_kctx *ctx, const void *p, int nin,
                                                     mx_tensor *const *in, int nout,
                                                     mx_tensor *const *out) {
  const struct mx_params_interleaved_matmul_encdec_valatt_backward *P = p;
  att_geo g, d;
  if (!att_encdec(NULL, in[1], P->heads, &g) || !in[2]->shape[1])
    ATT_FALLBACK(interleaved_matmul_encdec_valatt_backward);
  g.Tq = in[2]->shape[1];
  att_encdec(NULL, out[0], P->heads, &d);
  zero_part(g.dtype, d.k, g.Tk, g.B, g.D);
  return att_av_bwd(&g, in[0], in[2], out[1], d.v);
}
