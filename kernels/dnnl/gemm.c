/* kernels/dnnl/gemm.c — oneDNN as the BLAS of the CPU kernels (kernels/cpu/gemm.c): its
 * sgemm for f32 and its matmul primitive for bf16. Not kernels of the registry: the GEMM
 * that kernels/cpu's GEMM-based kernels call. */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdatomic.h>
#include <string.h>

/* A GEMM gets one thread per MX_DNNL_FLOPS_PER_THREAD flops (up to the engine's budget):
 * the MLP's 64x256x256 layer (8.4 MFLOP) gets 2. At 16e6 its layers all ran on one thread
 * and 2-thread training gained nothing (63.7k samples/s at 1 and 2 threads; 90.8k at 2
 * with 4e6). On a machine busy with other work fork/join can cost far more than it saves
 * (64x784x256 once took 24 ms on 2 threads against 0.8 ms on 1): set MX_NUM_THREADS=1
 * there. */
int mx_dnnl_sgemm(const char *op, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                  const void *A, int64_t lda, const void *B, int64_t ldb, float beta, void *C,
                  int64_t ldc) {
  if (!mx_dnnl_note_use()) return MX_DECLINE; /* oneDNN cannot start (address space) */
  int prev, nt = mx_dnnl_team_begin(2.0 * (double)M * (double)N * (double)K, &prev);
  dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                beta, C, ldc);
  mx_dnnl_team_end(nt, prev);
  if (st == dnnl_out_of_memory)
    return mx_err(MX_ENOMEM, "%s: out of memory in oneDNN's sgemm (%lldx%lldx%lld)", op,
                  (long long)M, (long long)N, (long long)K);
  if (st != dnnl_success)
    return mx_err(MX_EINVAL, "%s: oneDNN's sgemm failed for %lldx%lldx%lld (%s)", op,
                  (long long)M, (long long)N, (long long)K, dnnl_status2str(st));
  return MX_OK;
}

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

static atomic_bool bf16_matmul_missing; /* oneDNN refused the primitive once: it will again */

int mx_dnnl_gemm_bf16(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                      const void *B, float beta, void *C) {
  if (atomic_load_explicit(&bf16_matmul_missing, memory_order_relaxed)) return MX_DECLINE;
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
  if (!p) { /* no bf16 matmul for this CPU (for good: below avx512_core in oneDNN 2.6, or
             * ONEDNN_MAX_CPU_ISA=AVX2), or oneDNN cannot start yet: the caller widens */
    if (e) mx_dnnl_cache_put(e);
    if (mx_dnnl_engine()) atomic_store(&bf16_matmul_missing, true);
    return MX_DECLINE;
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
      int prev, nt = mx_dnnl_team_begin(2.0 * (double)M * (double)N * (double)K, &prev);
      ok = dnnl_primitive_execute(p, s, 3, ea) == dnnl_success && dnnl_stream_wait(s) == dnnl_success;
      mx_dnnl_team_end(nt, prev);
    }
    for (int i = 0; i < 3; i++)
      if (m[i]) dnnl_memory_destroy(m[i]);
  }
  if (tmp && p) dnnl_primitive_destroy(p);
  if (e) mx_dnnl_cache_put(e);
  return ok ? MX_OK : mx_err(MX_EINVAL, "gemm: oneDNN's bf16 matmul failed for %lldx%lldx%lld",
                             (long long)M, (long long)N, (long long)K);
}
#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_gemm_c_not_empty; /* ISO C: no empty translation unit */
