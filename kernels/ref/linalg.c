/* kernels/ref/linalg.c — reference GEMM-family kernels, accumulating in double.
 * Matrices are row-major; with a transpose flag an operand is stored transposed:
 * lhs (M, K) or (K, M), rhs (K, N) or (N, K), out (M, N). */
#include "mx_ops_gen.h"
#include "ref.h"

/* out[co + m*N + n] = sum_k A(m, k) B(k, n) (+ bias[n] when bias) */
static void gemm(const mx_tensor *A, int64_t ao, bool ta, const mx_tensor *B, int64_t bo, bool tb,
                 const mx_tensor *bias, mx_tensor *O, int64_t co, int64_t M, int64_t N,
                 int64_t K) {
  const void *pa = mx_ptr(A), *pb = mx_ptr(B);
  void *po = mx_ptr(O);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double s = bias ? mx_load_f64(mx_ptr(bias), bias->dtype, n) : 0;
      for (int64_t k = 0; k < K; k++)
        s += mx_load_f64(pa, A->dtype, ao + (ta ? k * M + m : m * K + k)) *
             mx_load_f64(pb, B->dtype, bo + (tb ? n * K + k : k * N + n));
      mx_store_f64(po, O->dtype, co + m * N + n, s);
    }
}

/* dot: lhs any-d, rhs any-d; the contracted axis is lhs's last (first with
 * transpose_a) and rhs's first (last with transpose_b). */
int mx_ref_dot(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_dot *P = p;
  const mx_tensor *a = in[0], *b = in[1];
  int64_t K = a->shape[P->transpose_a ? 0 : a->ndim - 1];
  int64_t M = K ? a->size / K : 0, N = K ? b->size / K : 0;
  if (K == 0) { /* empty contraction: zeros of the inferred shape */
    for (int64_t i = 0; i < out[0]->size; i++) mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, 0);
    return MX_OK;
  }
  gemm(a, 0, P->transpose_a, b, 0, P->transpose_b, NULL, out[0], 0, M, N, K);
  return MX_OK;
}

/* batch_dot: (B..., M, K) x (B..., K, N) -> (B..., M, N), flags per operand */
int mx_ref_batch_dot(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                     mx_tensor *const *out) {
  (void)nin; (void)nout;
  const struct mx_params_batch_dot *P = p;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int n = o->ndim;
  int64_t M = o->shape[n - 2], N = o->shape[n - 1];
  int64_t K = a->shape[n - (P->transpose_a ? 2 : 1)];
  int64_t batch = M * N != 0 ? o->size / (M * N) : 0;
  for (int64_t i = 0; i < batch; i++) {
    if (K == 0) {
      for (int64_t j = 0; j < M * N; j++) mx_store_f64(mx_ptr(o), o->dtype, i * M * N + j, 0);
      continue;
    }
    gemm(a, i * M * K, P->transpose_a, b, i * K * N, P->transpose_b, NULL, o, i * M * N, M, N, K);
  }
  return MX_OK;
}

/* matmul: NumPy semantics; batch dims of each operand broadcast to the output's */
int mx_ref_matmul(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)p; (void)nin; (void)nout;
  const mx_tensor *a = in[0], *b = in[1];
  mx_tensor *o = out[0];
  int64_t M = a->ndim > 1 ? a->shape[a->ndim - 2] : 1, K = a->shape[a->ndim - 1];
  int64_t N = b->ndim > 1 ? b->shape[b->ndim - 1] : 1;
  int ba = a->ndim > 2 ? a->ndim - 2 : 0, bb = b->ndim > 2 ? b->ndim - 2 : 0;
  int nb = o->ndim - (a->ndim > 1) - (b->ndim > 1);
  int64_t batch = 1;
  for (int i = 0; i < nb; i++) batch *= o->shape[i];
  for (int64_t i = 0; i < batch; i++) {
    int64_t ia = mx_ref_bcast_offset(i, nb, o->shape, ba, a->shape);
    int64_t ib = mx_ref_bcast_offset(i, nb, o->shape, bb, b->shape);
    if (K == 0) {
      for (int64_t j = 0; j < M * N; j++) mx_store_f64(mx_ptr(o), o->dtype, i * M * N + j, 0);
      continue;
    }
    gemm(a, ia * M * K, false, b, ib * K * N, false, NULL, o, i * M * N, M, N, K);
  }
  return MX_OK;
}

/* fully_connected: out (rows, H) = data (rows, units) . weight(H, units)^T + bias */
int mx_ref_fully_connected(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in, int nout,
                           mx_tensor *const *out) {
  (void)nout;
  const mx_tensor *d = in[0], *w = in[1];
  int64_t H = w->shape[0], U = w->shape[1];
  int64_t rows = H ? out[0]->size / H : 0;
  gemm(d, 0, false, w, 0, true, nin > 2 ? in[2] : NULL, out[0], 0, rows, H, U);
  const struct mx_params_fully_connected *P = p;
  if (P->act_type == MX_FULLY_CONNECTED_ACT_TYPE_RELU)
    for (int64_t i = 0; i < out[0]->size; i++) {
      double v = mx_load_f64(mx_ptr(out[0]), out[0]->dtype, i);
      mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, v > 0 ? v : 0);
    }
  return MX_OK;
}
