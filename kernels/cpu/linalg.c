/* kernels/cpu/linalg.c — the GEMM-family kernels on the BLAS layer (gemm.h): dot,
 * batch_dot, matmul, fully_connected, linalg_gemm/gemm2/syrk and MXNet's interleaved
 * attention matmuls. Layouts as in kernels/ref/linalg.c: row-major, flags mean "stored
 * transposed". The LAPACK-based linalg_* ops are in linalg_lapack.c. */
#include "gemm.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"
#include "vmath.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The GEMM ops' shapes, as each kernel reads them, from descriptors: what the BLAS
 * layer takes (mx_cpu_blas_ok) is decided before the call is queued. */
static int64_t desc_size(const mx_desc *d) {
  int64_t n = 1;
  for (int i = 0; i < d->ndim; i++) n *= d->shape[i];
  return n;
}
static bool blas_takes(int dtype, int64_t M, int64_t N, int64_t K, const char **why) {
  if (mx_cpu_blas_ok(dtype, M, N, K)) return true;
  *why = "the BLAS path takes float32/float64 (bfloat16 with oneDNN) within int extents";
  return false;
}
bool mx_cpu_dot_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                         int nin, const mx_desc *in, int nout, const mx_desc *out,
                         const char **why) {
  const struct mx_params_dot *P = params;
  int64_t K = in[0].shape[P->transpose_a ? 0 : in[0].ndim - 1];
  int64_t M = K ? desc_size(&in[0]) / K : 0, N = K ? desc_size(&in[1]) / K : 0;
  return blas_takes(in[0].dtype, M, N, K, why);
}
bool mx_cpu_batch_dot_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                               int nin, const mx_desc *in, int nout, const mx_desc *out,
                               const char **why) {
  const struct mx_params_batch_dot *P = params;
  int n = out[0].ndim;
  return blas_takes(in[0].dtype, out[0].shape[n - 2], out[0].shape[n - 1],
                    in[0].shape[n - (P->transpose_a ? 2 : 1)], why);
}
bool mx_cpu_matmul_supports(const mx_op_def *def, const void *params, const mx_op_info *info,
                            int nin, const mx_desc *in, int nout, const mx_desc *out,
                            const char **why) {
  const mx_desc *a = &in[0], *b = &in[1];
  int64_t M = a->ndim > 1 ? a->shape[a->ndim - 2] : 1, K = a->shape[a->ndim - 1];
  int64_t N = b->ndim > 1 ? b->shape[b->ndim - 1] : 1;
  return blas_takes(a->dtype, M, N, K, why);
}
bool mx_cpu_fully_connected_supports(const mx_op_def *def, const void *params,
                                     const mx_op_info *info, int nin, const mx_desc *in,
                                     int nout, const mx_desc *out, const char **why) {
  int64_t H = in[1].shape[0], U = in[1].shape[1];
  int act = ((const struct mx_params_fully_connected *)params)->act_type;
  if (act >= MX_FULLY_CONNECTED_ACT_TYPE_GELU && in[0].dtype != MX_F32 && in[0].dtype != MX_F64) {
    *why = "gelu after the product: float32/float64";
    return false;
  }
  return blas_takes(in[0].dtype, H ? desc_size(&out[0]) / H : 0, H, U, why);
}

int mx_cpu_dot(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  const struct mx_params_dot *P = p;
  const mx_tensor *a = in[0], *b = in[1];
  int64_t K = a->shape[P->transpose_a ? 0 : a->ndim - 1];
  int64_t M = K ? a->size / K : 1, N = K ? b->size / K : 1;
  if (K == 0) { M = 0; N = 0; }
  if (K == 0) {
    memset(mx_ptr(out[0]), 0, mx_nbytes(out[0]));
    return MX_OK;
  }
  return mx_cpu_gemm(a->dtype, P->transpose_a, P->transpose_b, M, N, K, mx_ptr(a), mx_ptr(b), 0,
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
    int rc = mx_cpu_gemm(c->dtype, c->ta, c->tb, c->M, c->N, c->K, c->A + (size_t)(ia * c->sa) * es,
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

/* gelu in place over fully_connected's f32/f64 result (supports admitted no other) */
#define GELU_LOOP(T, ERF, TANH)                                                         \
  {                                                                                     \
    T *v = (T *)mx_ptr(o);                                                              \
    if (tanh_form)                                                                      \
      for (int64_t i = 0; i < o->size; i++) {                                           \
        T x = v[i];                                                                     \
        v[i] = (T)0.5 * x *                                                             \
               ((T)1 + TANH((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)));    \
      }                                                                                 \
    else                                                                                \
      for (int64_t i = 0; i < o->size; i++)                                             \
        v[i] = (T)0.5 * v[i] * ((T)1 + ERF(v[i] * (T)0.7071067811865476));             \
  }
static void fc_gelu(mx_tensor *o, bool tanh_form) {
  if (o->dtype == MX_F32) GELU_LOOP(float, v_erff, v_tanhf)
  else GELU_LOOP(double, erf, tanh)
}

/* fully_connected: out (rows, H) = [act] (data (rows, U) . weight (H, U)^T + bias).
 * f32 with oneDNN: its matmul primitive (kernels/dnnl/linalg.c, the activation as a
 * post-op); otherwise the bias is copied into every row, the GEMM accumulates onto it
 * (beta 1) and the activation runs as a second pass. blas_ok admitted f32/f64 (and bf16
 * with oneDNN; gelu: f32/f64). */
int mx_cpu_fully_connected(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                           mx_tensor *const *out) {
  const mx_tensor *d = in[0], *w = in[1];
  mx_tensor *o = out[0];
  int64_t H = w->shape[0], U = w->shape[1];
  int64_t rows = H ? o->size / H : 0;
  if (rows == 0 || H == 0) return MX_OK;
  int act = ((const struct mx_params_fully_connected *)p)->act_type;
  bool relu = act == MX_FULLY_CONNECTED_ACT_TYPE_RELU;
  size_t row_bytes = (size_t)H * mx_dtype_size(o->dtype);
  char *po = mx_ptr(o);
  if (nin > 2)
    for (int64_t r = 0; r < rows; r++) memcpy(po + (size_t)r * row_bytes, mx_ptr(in[2]), row_bytes);
  int rc = mx_cpu_gemm(d->dtype, false, true, rows, H, U, mx_ptr(d), mx_ptr(w), nin > 2 ? 1.0f : 0.0f, po);
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
  if (rc == MX_OK && act >= MX_FULLY_CONNECTED_ACT_TYPE_GELU)
    fc_gelu(o, act == MX_FULLY_CONNECTED_ACT_TYPE_GELU_TANH);
  return rc;
}

/* ---- linalg_gemm, linalg_gemm2, linalg_syrk (MXNet's la_op) ------------------------- */

/* alpha op(A) op(B) + beta C per batch element (C copied to out first); -1 when the BLAS
 * layer cannot take the shapes */
static int la_cpu_gemm(const mx_tensor *a, const mx_tensor *b, const mx_tensor *c, bool ta,
                       bool tb, double alpha, double beta, mx_tensor *o) {
  int n = o->ndim;
  int64_t M = o->shape[n - 2], N = o->shape[n - 1], K = a->shape[n - (ta ? 2 : 1)];
  if (!mx_cpu_blas_ok(o->dtype, M, N, K)) return -1;
  int64_t batch = M * N != 0 ? o->size / (M * N) : 0;
  if (batch == 0) return MX_OK;
  int rc = mx_cpu_blas_ready("linalg_gemm");
  if (rc) return rc;
  if (c) memcpy(mx_ptr(o), mx_ptr(c), (size_t)o->size * mx_dtype_size(o->dtype));
  else beta = 0;
  int64_t lda = ta ? M : K, ldb = tb ? K : N;
  if (lda < 1) lda = 1;
  if (ldb < 1) ldb = 1;
  size_t es = mx_dtype_size(o->dtype);
  for (int64_t i = 0; i < batch && !rc; i++)
    rc = mx_cpu_blas_gemm_ld("linalg_gemm", o->dtype, ta, tb, M, N, K, alpha,
                             (const char *)mx_ptr(a) + (size_t)(i * M * K) * es, lda,
                             (const char *)mx_ptr(b) + (size_t)(i * K * N) * es, ldb, beta,
                             (char *)mx_ptr(o) + (size_t)(i * M * N) * es, N);
  return rc;
}

int mx_cpu_linalg_gemm2(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_gemm2 *P = p;
  int rc = la_cpu_gemm(in[0], in[1], NULL, P->transpose_a, P->transpose_b, P->alpha, 0, out[0]);
  return rc < 0 ? MX_DECLINE : rc;
}

int mx_cpu_linalg_gemm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_gemm *P = p;
  int rc = la_cpu_gemm(in[0], in[1], in[2], P->transpose_a, P->transpose_b, P->alpha, P->beta,
                       out[0]);
  return rc < 0 ? MX_DECLINE : rc;
}

/* syrk as a GEMM of A with itself (the full symmetric result, as MXNet's output) */
int mx_cpu_linalg_syrk(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_syrk *P = p;
  int rc = la_cpu_gemm(in[0], in[0], NULL, P->transpose, !P->transpose, P->alpha, 0, out[0]);
  return rc < 0 ? MX_DECLINE : rc;
}


/* ---- MXNet's interleaved attention matmuls ---------------------------------------------
 * Every one is a batch of N*heads GEMMs on strided operands, read in place: a head's
 * queries are T rows of D values, each row `ld` elements after the last, head b's first
 * row `bs` elements after head b-1's (qkv: ld = N*H*3*D, bs = 3*D). BLAS takes the row
 * stride as lda, so no interleaved copy is ever made. Layouts: kernels/ref/linalg.c. */

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
    int rc = mx_cpu_gemm_ld("attention", c->dtype, c->ta, c->tb, c->M, c->N, c->K, c->alpha,
                            c->a.p + (size_t)(i * c->a.bs) * es, c->a.ld,
                            c->b.p + (size_t)(i * c->b.bs) * es, c->b.ld, 0.0,
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
  return mx_cpu_blas_ok(g->dtype, g->Tq, g->Tk, L) && g->B && g->Tq && g->D &&
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
  return mx_cpu_blas_ok(g->dtype, g->Tk, g->Tk, L) && g->B && g->Tk && g->D &&
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

/* a geometry the BLAS path cannot take: dispatch runs the next backend */
#define ATT_FALLBACK(op) return MX_DECLINE

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

