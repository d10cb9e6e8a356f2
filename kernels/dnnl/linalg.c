/* kernels/dnnl/linalg.c — fully_connected on oneDNN's matmul primitive (MX_BACKEND_DNNL). */
#include "dnnl.h"

#ifdef MX_HAVE_ONEDNN
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <stdlib.h>
#include <string.h>

/* fully_connected through oneDNN's matmul primitive: its brgemm kernel reads the
 * (H, U) weight as it is stored and adds the bias in the same pass. Measured here, 1
 * thread, batch 64: 784->256 240 us against 253 us for dnnl_sgemm (plus the bias
 * copy), 256->10 5.1 against 8.5 us. Creating a primitive costs ~0.1-1 ms, so they
 * are cached by shape and thread count (a primitive is built for a team size) in the
 * shared oneDNN cache (dnnl.c); each entry has its memory objects and lock
 * (concurrent same-shape calls take turns; a busy entry declines the call, which the
 * cpu kernel's GEMM then runs, rather than wait); the stream is the calling thread's. */
typedef struct fc_key { int64_t M, N, K; int nt, act, dt; bool bias; } fc_key;
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

/* Builds the primitive for (M, N, K, bias, act, dtype) on nt threads; NULL if oneDNN
 * declines. The activation (relu, gelu erf or tanh) is a post-op: applied to each
 * output block while it is in cache. bf16 (every tensor bf16: what mx.amp's casts give)
 * accumulates in f32 and rounds the output once, after bias and activation. */
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
  dnnl_alg_kind_t alg = k->act == MX_FULLY_CONNECTED_ACT_TYPE_RELU   ? dnnl_eltwise_relu
                        : k->act == MX_FULLY_CONNECTED_ACT_TYPE_GELU ? dnnl_eltwise_gelu_erf
                                                                     : dnnl_eltwise_gelu_tanh;
  bool act = k->act != MX_FULLY_CONNECTED_ACT_TYPE_NONE;
  dnnl_data_type_t dt = k->dt == MX_BF16 ? dnnl_bf16 : dnnl_f32;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success &&
            (!act || (dnnl_post_ops_create(&po) == dnnl_success &&
                          dnnl_post_ops_append_eltwise(po, 1.0f, alg, 0, 0) ==
                              dnnl_success &&
                          dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success)) &&
            dnnl_memory_desc_init_by_tag(&a, 2, da, dt, dnnl_ab) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&w, 2, dw, dt, dnnl_ba) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&b, 2, db, dt, dnnl_ab) == dnnl_success &&
            dnnl_memory_desc_init_by_tag(&c, 2, dc, dt, dnnl_ab) == dnnl_success &&
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

/* out (M, N) = [act] (data (M, K) . weight (N, K)^T [+ bias (N)]); true when it ran. */
static bool fc_dnnl(int64_t M, int64_t N, int64_t K, int dt, const void *data,
                    const void *weight, const void *bias, int act, void *out) {
  int prev, nt = mx_dnnl_team_begin(2.0 * (double)M * (double)N * (double)K, &prev);
  fc_key key;
  memset(&key, 0, sizeof key); /* padding bytes are part of the cache key */
  key.M = M, key.N = N, key.K = K, key.nt = nt, key.bias = bias != NULL, key.act = act;
  key.dt = dt;
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
  mx_dnnl_team_end(nt, prev);
  return ran;
}

static int64_t desc_size(const mx_desc *d) {
  int64_t n = 1;
  for (int i = 0; i < d->ndim; i++) n *= d->shape[i];
  return n;
}

/* f32 (or all-bf16) products of 16 rows or more and over 1024 multiply-adds: under 16
 * rows (a GEMV-like product) dnnl_sgemm, the cpu kernel's, is faster (1x784 . 784x256 took
 * 11.6 us there against 27.6 us on the primitive), and tiny ones run as plain loops there.
 * bf16 here spares the cpu kernel's bias copy, beta-1 accumulation and separate relu pass
 * (a bf16 primitive oneDNN refuses, on a CPU without bf16, declines at the call). */
bool mx_dnnl_fully_connected_supports(const mx_op_def *def, const void *params,
                                      const mx_op_info *info, int nin, const mx_desc *in,
                                      int nout, const mx_desc *out, const char **why) {
  int dt = in[0].dtype;
  if (dt != MX_F32 && dt != MX_BF16) return false;
  for (int i = 0; i < nin; i++)
    if (in[i].dtype != dt) return false;
  if (out[0].dtype != dt) return false;
  /* its gelu_tanh post-op ran 1.6x slower than the cpu kernel's GEMM and tanh pass */
  if (((const struct mx_params_fully_connected *)params)->act_type ==
      MX_FULLY_CONNECTED_ACT_TYPE_GELU_TANH)
    return false;
  int64_t H = in[1].shape[0], U = in[1].shape[1];
  int64_t rows = H ? desc_size(&out[0]) / H : 0;
  return U > 0 && rows >= 16 && rows * H * U > 1024 && rows <= INT32_MAX && H <= INT32_MAX &&
         U <= INT32_MAX && mx_dnnl_engine() != NULL;
}

/* out (rows, H) = [act] (data (rows, U) . weight (H, U)^T + bias), the activation as
 * the primitive's post-op. */
int mx_dnnl_fully_connected(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  const mx_tensor *d = in[0], *w = in[1];
  mx_tensor *o = out[0];
  int64_t H = w->shape[0], U = w->shape[1], rows = o->size / H;
  int act = ((const struct mx_params_fully_connected *)p)->act_type;
  return fc_dnnl(rows, H, U, d->dtype, mx_ptr(d), mx_ptr(w), nin > 2 ? mx_ptr(in[2]) : NULL, act,
                 mx_ptr(o))
             ? MX_OK : MX_DECLINE;
}
#endif /* MX_HAVE_ONEDNN */
typedef int mx_dnnl_linalg_c_not_empty; /* ISO C: no empty translation unit */
