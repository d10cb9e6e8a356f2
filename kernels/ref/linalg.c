/* kernels/ref/linalg.c — reference GEMM-family kernels, accumulating in double.
 * Matrices are row-major; with a transpose flag an operand is stored transposed:
 * lhs (M, K) or (K, M), rhs (K, N) or (N, K), out (M, N). */
#include "mx_ops_gen.h"
#include "mx_kernels_gen.h"
#include "ref.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

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
  if (P->act_type != MX_FULLY_CONNECTED_ACT_TYPE_NONE)
    for (int64_t i = 0; i < out[0]->size; i++) {
      double v = mx_load_f64(mx_ptr(out[0]), out[0]->dtype, i), r;
      switch (P->act_type) {
      case MX_FULLY_CONNECTED_ACT_TYPE_RELU: r = v > 0 ? v : 0; break;
      case MX_FULLY_CONNECTED_ACT_TYPE_GELU: r = 0.5 * v * (1.0 + erf(v / sqrt(2.0))); break;
      default: /* gelu_tanh */
        r = 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      }
      mx_store_f64(mx_ptr(out[0]), out[0]->dtype, i, r);
    }
  return MX_OK;
}

/* ---- linalg_* (MXNet's la_op): textbook algorithms on one double copy of each matrix,
 * independent of LAPACK (the cpu kernels' check). Matrices are the trailing two axes. */

static void la_load(const mx_tensor *t, int64_t off, int64_t n, double *w) {
  for (int64_t i = 0; i < n; i++) w[i] = mx_load_f64(mx_ptr(t), t->dtype, off + i);
}
static void la_store(mx_tensor *t, int64_t off, int64_t n, const double *w) {
  for (int64_t i = 0; i < n; i++) mx_store_f64(mx_ptr(t), t->dtype, off + i, w[i]);
}

/* alpha * op(A) . op(B) (+ beta * C) per batch element */
static int la_gemm(const mx_tensor *a, const mx_tensor *b, const mx_tensor *c, bool ta, bool tb,
                   double alpha, double beta, mx_tensor *o) {
  int n = o->ndim;
  int64_t M = o->shape[n - 2], N = o->shape[n - 1], K = a->shape[n - (ta ? 2 : 1)];
  int64_t batch = M * N != 0 ? o->size / (M * N) : 0;
  const void *pa = mx_ptr(a), *pb = mx_ptr(b);
  for (int64_t i = 0; i < batch; i++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++)
          s += mx_load_f64(pa, a->dtype, i * M * K + (ta ? k * M + m : m * K + k)) *
               mx_load_f64(pb, b->dtype, i * K * N + (tb ? j * K + k : k * N + j));
        int64_t at = i * M * N + m * N + j;
        double v = alpha * s;
        if (c) v += beta * mx_load_f64(mx_ptr(c), c->dtype, at);
        mx_store_f64(mx_ptr(o), o->dtype, at, v);
      }
  return MX_OK;
}

int mx_ref_linalg_gemm2(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_gemm2 *P = p;
  return la_gemm(in[0], in[1], NULL, P->transpose_a, P->transpose_b, P->alpha, 0, out[0]);
}

int mx_ref_linalg_gemm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_gemm *P = p;
  return la_gemm(in[0], in[1], in[2], P->transpose_a, P->transpose_b, P->alpha, P->beta,
                 out[0]);
}

/* the batch's matrix size n (trailing axes n x n) and count */
static int64_t la_dims(const mx_tensor *a, int64_t *count) {
  int64_t n = a->shape[a->ndim - 1];
  *count = n ? a->size / (n * n) : 0;
  return n;
}

/* Cholesky-Banachiewicz on w (n x n, row-major): L in the lower triangle, zeros above.
 * Returns false when a pivot is not positive (A not positive definite). */
static bool la_cholesky(double *w, int64_t n) {
  for (int64_t j = 0; j < n; j++) {
    double d = w[j * n + j];
    for (int64_t k = 0; k < j; k++) d -= w[j * n + k] * w[j * n + k];
    if (!(d > 0)) return false;
    d = sqrt(d);
    w[j * n + j] = d;
    for (int64_t i = j + 1; i < n; i++) {
      double s = w[i * n + j];
      for (int64_t k = 0; k < j; k++) s -= w[i * n + k] * w[j * n + k];
      w[i * n + j] = s / d;
    }
    for (int64_t k = j + 1; k < n; k++) w[j * n + k] = 0;
  }
  return true;
}

int mx_ref_linalg_potrf(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t cnt, n = la_dims(in[0], &cnt);
  double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n * n : 1));
  if (!w) return mx_err(MX_ENOMEM, "linalg_potrf: out of memory");
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, w);
    if (!la_cholesky(w, n)) {
      free(w);
      return mx_err(MX_EINVAL, "linalg_potrf: matrix %lld of the batch (0-based, flattened "
                    "leading dims) is not positive definite", (long long)b);
    }
    la_store(out[0], b * n * n, n * n, w);
  }
  free(w);
  return MX_OK;
}

/* The pivot size under which a matrix counts as (numerically) singular: n * eps of the
 * dtype * max|a| (LAPACK's and this LU's rounding differ; below it their results are
 * noise, so both kernels call such a matrix singular). Returns -1 for a matrix with a
 * NaN or Inf, whose results are NaN. */
static double la_singular_tol(const double *w, int64_t n, int dtype) {
  double m = 0;
  for (int64_t i = 0; i < n * n; i++) {
    if (!isfinite(w[i])) return -1;
    if (fabs(w[i]) > m) m = fabs(w[i]);
  }
  return (double)n * (dtype == MX_F32 ? FLT_EPSILON : DBL_EPSILON) * m;
}

/* LU with partial pivoting in place; returns the permutation's sign, 0 when singular
 * (a pivot at or under tol). */
static int la_lu(double *w, int64_t n, int64_t *piv, double tol) {
  int sign = 1;
  for (int64_t k = 0; k < n; k++) {
    int64_t r = k;
    for (int64_t i = k + 1; i < n; i++)
      if (fabs(w[i * n + k]) > fabs(w[r * n + k])) r = i;
    piv[k] = r;
    if (fabs(w[r * n + k]) <= tol) return 0;
    if (r != k) {
      sign = -sign;
      for (int64_t j = 0; j < n; j++) {
        double t = w[k * n + j]; w[k * n + j] = w[r * n + j]; w[r * n + j] = t;
      }
    }
    for (int64_t i = k + 1; i < n; i++) {
      double f = w[i * n + k] / w[k * n + k];
      w[i * n + k] = f;
      for (int64_t j = k + 1; j < n; j++) w[i * n + j] -= f * w[k * n + j];
    }
  }
  return sign;
}

int mx_ref_linalg_inverse(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t cnt, n = la_dims(in[0], &cnt);
  size_t nn = (size_t)(n > 0 ? n * n : 1);
  double *w = malloc(sizeof(double) * 2 * nn);
  int64_t *piv = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!w || !piv) { free(w); free(piv); return mx_err(MX_ENOMEM, "linalg_inverse: out of memory"); }
  double *x = w + nn;
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, w);
    double tol = la_singular_tol(w, n, in[0]->dtype);
    if (tol < 0) { /* NaN/Inf in: NaN out */
      for (int64_t i = 0; i < n * n; i++) mx_store_f64(mx_ptr(out[0]), out[0]->dtype, b * n * n + i, NAN);
      continue;
    }
    if (la_lu(w, n, piv, tol) == 0) {
      free(w); free(piv);
      return mx_err(MX_EINVAL, "linalg_inverse: matrix %lld of the batch (0-based, flattened "
                    "leading dims) is singular", (long long)b);
    }
    /* solve L U X = P I column by column */
    for (int64_t c = 0; c < n; c++) {
      double *col = x; /* x's first row as scratch column (n values) reused per c */
      for (int64_t i = 0; i < n; i++) col[i] = i == c;
      for (int64_t k = 0; k < n; k++) { double t = col[k]; col[k] = col[piv[k]]; col[piv[k]] = t; }
      for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < i; k++) col[i] -= w[i * n + k] * col[k];
      for (int64_t i = n - 1; i >= 0; i--) {
        for (int64_t k = i + 1; k < n; k++) col[i] -= w[i * n + k] * col[k];
        col[i] /= w[i * n + i];
      }
      for (int64_t i = 0; i < n; i++)
        mx_store_f64(mx_ptr(out[0]), out[0]->dtype, b * n * n + i * n + c, col[i]);
    }
  }
  free(w); free(piv);
  return MX_OK;
}

/* det (nout 1) or sign and log|det| (nout 2) per matrix */
static int la_det(const char *op, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  int64_t cnt, n = la_dims(in[0], &cnt);
  double *w = malloc(sizeof(double) * (size_t)(n > 0 ? n * n : 1));
  int64_t *piv = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!w || !piv) { free(w); free(piv); return mx_err(MX_ENOMEM, "%s: out of memory", op); }
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, w);
    double tol = la_singular_tol(w, n, in[0]->dtype);
    if (tol < 0) { /* NaN/Inf in: NaN out */
      for (int k = 0; k < nout; k++) mx_store_f64(mx_ptr(out[k]), out[k]->dtype, b, NAN);
      continue;
    }
    int sign = la_lu(w, n, piv, tol);
    double det = sign, logabs = 0;
    for (int64_t i = 0; sign && i < n; i++) {
      double d = w[i * n + i];
      det *= d;
      logabs += log(fabs(d));
      if (d < 0) sign = -sign;
    }
    if (nout == 1) {
      mx_store_f64(mx_ptr(out[0]), out[0]->dtype, b, sign ? det : 0);
    } else {
      mx_store_f64(mx_ptr(out[0]), out[0]->dtype, b, sign);
      mx_store_f64(mx_ptr(out[1]), out[1]->dtype, b, sign ? logabs : -INFINITY);
    }
  }
  free(w); free(piv);
  return MX_OK;
}

int mx_ref_linalg_det(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin;
  return la_det("linalg_det", in, nout, out);
}

int mx_ref_linalg_slogdet(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin;
  return la_det("linalg_slogdet", in, nout, out);
}

/* potrf's gradient, MXNet's formula: dA = 0.5 * L^-T . copyLTU(L^T . dL) . L^-1, where
 * copyLTU mirrors the lower triangle (with the diagonal) into the upper. */
int mx_ref_linalg_potrf_backward(const mx_kctx *ctx, const void *p, int nin,
                                 mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t cnt, n = la_dims(in[0], &cnt);
  size_t nn = (size_t)(n > 0 ? n * n : 1);
  double *L = malloc(sizeof(double) * 3 * nn);
  if (!L) return mx_err(MX_ENOMEM, "linalg_potrf_backward: out of memory");
  double *G = L + nn, *M = G + nn;
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, L);
    la_load(in[1], b * n * n, n * n, G);
    for (int64_t i = 0; i < n; i++) /* M = L^T G, lower part mirrored */
      for (int64_t j = 0; j <= i; j++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += L[k * n + i] * G[k * n + j];
        M[i * n + j] = M[j * n + i] = s;
      }
    /* M <- M L^-1: solve X L = M row by row (L lower: back substitution over columns) */
    for (int64_t r = 0; r < n; r++)
      for (int64_t j = n - 1; j >= 0; j--) {
        double s = M[r * n + j];
        for (int64_t k = j + 1; k < n; k++) s -= M[r * n + k] * L[k * n + j];
        M[r * n + j] = s / L[j * n + j];
      }
    /* M <- L^-T M: solve L^T Y = M column by column (L^T upper) */
    for (int64_t c = 0; c < n; c++)
      for (int64_t i = n - 1; i >= 0; i--) {
        double s = M[i * n + c];
        for (int64_t k = i + 1; k < n; k++) s -= L[k * n + i] * M[k * n + c];
        M[i * n + c] = s / L[i * n + i];
      }
    for (int64_t i = 0; i < n * n; i++) M[i] *= 0.5;
    la_store(out[0], b * n * n, n * n, M);
  }
  free(L);
  return MX_OK;
}

/* syrk: alpha * A . A^T (or A^T . A) per batch element */
int mx_ref_linalg_syrk(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_syrk *P = p;
  /* A . A^T is gemm(A, A, tb); A^T . A is gemm(A, A, ta) */
  return la_gemm(in[0], in[0], NULL, P->transpose, !P->transpose, P->alpha, 0, out[0]);
}

/* the offset diagonal's element d of an m x m matrix: (row, col) */
static void la_diag_at(int64_t offset, int64_t d, int64_t *r, int64_t *c) {
  *r = offset < 0 ? d - offset : d;
  *c = offset > 0 ? d + offset : d;
}

int mx_ref_linalg_extractdiag(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                              int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  int64_t off = ((const struct mx_params_linalg_extractdiag *)p)->offset;
  const mx_tensor *a = in[0];
  mx_tensor *o = out[0];
  int64_t n = a->shape[a->ndim - 1], k = o->shape[o->ndim - 1];
  int64_t cnt = k ? o->size / k : 0;
  for (int64_t b = 0; b < cnt; b++)
    for (int64_t d = 0; d < k; d++) {
      int64_t r, c;
      la_diag_at(off, d, &r, &c);
      mx_store_f64(mx_ptr(o), o->dtype, b * k + d,
                   mx_load_f64(mx_ptr(a), a->dtype, b * n * n + r * n + c));
    }
  return MX_OK;
}

int mx_ref_linalg_makediag(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  int64_t off = ((const struct mx_params_linalg_makediag *)p)->offset;
  const mx_tensor *a = in[0];
  mx_tensor *o = out[0];
  int64_t k = a->shape[a->ndim - 1], m = o->shape[o->ndim - 1];
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, 0);
  int64_t cnt = k ? a->size / k : 0;
  for (int64_t b = 0; b < cnt; b++)
    for (int64_t d = 0; d < k; d++) {
      int64_t r, c;
      la_diag_at(off, d, &r, &c);
      mx_store_f64(mx_ptr(o), o->dtype, b * m * m + r * m + c,
                   mx_load_f64(mx_ptr(a), a->dtype, b * k + d));
    }
  return MX_OK;
}

/* ---- extracttrian / maketrian: the triangle packed row by row. Lower (offset < 0, or
 * offset 0 with lower): row r holds r + 1 values at (r + |offset|, 0..r); upper: row r
 * holds k - r values at (r, r + offset..k - 1 + offset). */
static void la_trian_copy(int64_t offset, bool lower, int64_t k, int64_t n, const mx_tensor *src,
                          mx_tensor *dst, bool to_trian, int64_t b) {
  bool lo = offset < 0 || (offset == 0 && lower);
  int64_t o = offset < 0 ? -offset : offset, t = 0, tb = b * (k * (k + 1) / 2), fb = b * n * n;
  for (int64_t r = 0; r < k; r++)
    for (int64_t c = lo ? 0 : r; c < (lo ? r + 1 : k); c++, t++) {
      int64_t f = lo ? (r + o) * n + c : r * n + c + o;
      if (to_trian)
        mx_store_f64(mx_ptr(dst), dst->dtype, tb + t, mx_load_f64(mx_ptr(src), src->dtype, fb + f));
      else
        mx_store_f64(mx_ptr(dst), dst->dtype, fb + f, mx_load_f64(mx_ptr(src), src->dtype, tb + t));
    }
}

int mx_ref_linalg_extracttrian(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                               int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_extracttrian *P = p;
  const mx_tensor *a = in[0];
  int64_t n = a->shape[a->ndim - 1], o = P->offset < 0 ? -P->offset : P->offset;
  int64_t k = n > o ? n - o : 0, cnt = n ? a->size / (n * n) : 0;
  for (int64_t b = 0; b < cnt; b++) la_trian_copy(P->offset, P->lower, k, n, a, out[0], true, b);
  return MX_OK;
}

int mx_ref_linalg_maketrian(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                            int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_maketrian *P = p;
  mx_tensor *o = out[0];
  int64_t n = o->shape[o->ndim - 1], off = P->offset < 0 ? -P->offset : P->offset;
  int64_t k = n - off, cnt = n ? o->size / (n * n) : 0;
  for (int64_t i = 0; i < o->size; i++) mx_store_f64(mx_ptr(o), o->dtype, i, 0);
  for (int64_t b = 0; b < cnt; b++) la_trian_copy(P->offset, P->lower, k, n, in[0], o, false, b);
  return MX_OK;
}

/* ---- trsm: T = op(A's triangle) as a full matrix, then substitution per column of B
 * (left) or per row (right: x T = b is T^T x^T = b^T) */
int mx_ref_linalg_trsm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_trsm *P = p;
  const mx_tensor *b = in[1];
  mx_tensor *o = out[0];
  int64_t cnt, m = la_dims(in[0], &cnt);
  int nd = b->ndim;
  int64_t R = b->shape[nd - 2], C = b->shape[nd - 1], bs = R * C;
  size_t mm = (size_t)(m > 0 ? m * m : 1);
  double *T = malloc(sizeof(double) * (mm + (size_t)(bs > 0 ? bs : 1)));
  if (!T) return mx_err(MX_ENOMEM, "linalg_trsm: out of memory");
  double *X = T + mm;
  /* the system solved per vector is S x = v with S = T (left) or T^T (right) */
  for (int64_t k = 0; k < cnt; k++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) {
        bool in_tri = P->lower ? j <= i : j >= i;
        double v = in_tri ? mx_load_f64(mx_ptr(in[0]), in[0]->dtype, k * m * m + i * m + j) : 0;
        int64_t r = P->transpose ? j : i, c = P->transpose ? i : j;
        if (P->rightside) { int64_t t = r; r = c; c = t; }
        T[r * m + c] = v; /* T holds S */
      }
    bool slow = P->lower != (P->transpose != P->rightside); /* S is lower */
    la_load(b, k * bs, bs, X);
    int64_t nv = P->rightside ? R : C, st = P->rightside ? 1 : C; /* vectors, element stride */
    for (int64_t v = 0; v < nv; v++) {
      double *x = X + (P->rightside ? v * C : v);
      for (int64_t s = 0; s < m; s++) {
        int64_t i = slow ? s : m - 1 - s;
        double acc = P->alpha * x[i * st];
        if (slow)
          for (int64_t j = 0; j < i; j++) acc -= T[i * m + j] * x[j * st];
        else
          for (int64_t j = i + 1; j < m; j++) acc -= T[i * m + j] * x[j * st];
        x[i * st] = acc / T[i * m + i];
      }
    }
    la_store(o, k * bs, bs, X);
  }
  free(T);
  return MX_OK;
}

/* ---- potri: (L L^T)^-1 = L^-T L^-1 with L^-1 by forward substitution (L's lower
 * triangle only; NaN/Inf there gives a NaN matrix) */
int mx_ref_linalg_potri(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t cnt, n = la_dims(in[0], &cnt);
  size_t nn = (size_t)(n > 0 ? n * n : 1);
  double *L = malloc(sizeof(double) * 3 * nn);
  if (!L) return mx_err(MX_ENOMEM, "linalg_potri: out of memory");
  double *V = L + nn, *Y = V + nn;
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, L);
    bool bad = false; /* NaN/Inf in the triangle: NaN out, as inverse */
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) bad = bad || !isfinite(L[i * n + j]);
    if (bad) {
      for (int64_t i = 0; i < n * n; i++) Y[i] = NAN;
      la_store(out[0], b * n * n, n * n, Y);
      continue;
    }
    for (int64_t i = 0; i < n; i++)
      if (L[i * n + i] == 0) {
        free(L);
        return mx_err(MX_EINVAL, "linalg_potri: matrix %lld of the batch (0-based, flattened "
                      "leading dims) has a zero on its diagonal", (long long)b);
      }
    for (int64_t c = 0; c < n; c++) /* column c of V = L^-1 */
      for (int64_t i = 0; i < n; i++) {
        double s = i == c;
        for (int64_t k = c; k < i; k++) s -= L[i * n + k] * V[k * n + c];
        V[i * n + c] = i < c ? 0 : s / L[i * n + i];
      }
    for (int64_t i = 0; i < n; i++) /* Y = V^T V */
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += V[k * n + i] * V[k * n + j];
        Y[i * n + j] = s;
      }
    la_store(out[0], b * n * n, n * n, Y);
  }
  free(L);
  return MX_OK;
}

/* ---- trmm, gelqf, syevd (plain loops in double, independent of LAPACK) ---- */

/* trmm: S = op(A's triangle) as a full matrix, then alpha S . B (or alpha B . S) */
int mx_ref_linalg_trmm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  (void)ctx; (void)nin; (void)nout;
  const struct mx_params_linalg_trmm *P = p;
  const mx_tensor *b = in[1];
  mx_tensor *o = out[0];
  int64_t cnt, m = la_dims(in[0], &cnt);
  int nd = b->ndim;
  int64_t R = b->shape[nd - 2], C = b->shape[nd - 1], bs = R * C;
  size_t mm = (size_t)(m > 0 ? m * m : 1), bb = (size_t)(bs > 0 ? bs : 1);
  double *S = malloc(sizeof(double) * (mm + 2 * bb));
  if (!S) return mx_err(MX_ENOMEM, "linalg_trmm: out of memory");
  double *X = S + mm, *Y = X + bb;
  for (int64_t k = 0; k < cnt; k++) {
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) {
        bool in_tri = P->lower ? j <= i : j >= i;
        double v = in_tri ? mx_load_f64(mx_ptr(in[0]), in[0]->dtype, k * m * m + i * m + j) : 0;
        if (P->transpose) S[j * m + i] = v;
        else S[i * m + j] = v;
      }
    la_load(b, k * bs, bs, X);
    /* the sums run over S's triangle only (as BLAS trmm): the zeros outside it never meet
     * an Inf of B. S is lower when the stored triangle, transposed or not, lands below. */
    bool slow = P->lower != P->transpose;
    for (int64_t r = 0; r < R; r++)
      for (int64_t c = 0; c < C; c++) {
        double s = 0;
        if (P->rightside) /* sum_t X[r, t] S[t, c], t over column c of S's triangle */
          for (int64_t t = slow ? c : 0; t < (slow ? m : c + 1); t++) s += X[r * C + t] * S[t * m + c];
        else /* sum_t S[r, t] X[t, c], t over row r of S's triangle */
          for (int64_t t = slow ? 0 : r; t < (slow ? r + 1 : m); t++) s += S[r * m + t] * X[t * C + c];
        Y[r * C + c] = P->alpha * s;
      }
    la_store(o, k * bs, bs, Y);
  }
  free(S);
  return MX_OK;
}

/* gelqf: Householder reflections applied from the right to the rows of A (LAPACK's
 * convention: the reflector of row i maps its tail onto beta e_i with beta =
 * -sign(alpha) |x|, none when the tail below the diagonal is zero), so L and Q agree
 * with LAPACK's geqrf of A^T, as MXNet computes them. A H_0 ... H_{m-1} = [L 0] gives
 * Q = [I 0] H_{m-1} ... H_0. */
int mx_ref_linalg_gelqf(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  const mx_tensor *a = in[0];
  int nd = a->ndim;
  int64_t m = a->shape[nd - 2], n = a->shape[nd - 1], mn = m * n;
  int64_t cnt = mn ? a->size / mn : 0;
  size_t w = (size_t)(mn > 0 ? mn : 1);
  double *W = malloc(sizeof(double) * (3 * w + (size_t)(m > 0 ? m * m : 1) + (size_t)m + 1));
  if (!W) return mx_err(MX_ENOMEM, "linalg_gelqf: out of memory");
  double *V = W + w, *Qm = V + w, *L = Qm + w, *tau = L + (m > 0 ? m * m : 1);
  for (int64_t b = 0; b < cnt; b++) {
    la_load(a, b * mn, mn, W);
    for (int64_t i = 0; i < m; i++) {
      double *x = W + i * n, alpha = x[i], xn = 0;
      for (int64_t j = i + 1; j < n; j++) xn = hypot(xn, x[j]);
      double *v = V + i * n;
      for (int64_t j = 0; j < n; j++) v[j] = 0;
      v[i] = 1;
      if (xn == 0) { tau[i] = 0; continue; }
      double beta = -copysign(hypot(alpha, xn), alpha);
      tau[i] = (beta - alpha) / beta;
      for (int64_t j = i + 1; j < n; j++) v[j] = x[j] / (alpha - beta);
      x[i] = beta;
      for (int64_t j = i + 1; j < n; j++) x[j] = 0;
      for (int64_t r = i + 1; r < m; r++) { /* row r <- row r (I - tau v v^T) */
        double *y = W + r * n, d = 0;
        for (int64_t j = i; j < n; j++) d += y[j] * v[j];
        for (int64_t j = i; j < n; j++) y[j] -= tau[i] * d * v[j];
      }
    }
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < m; j++) L[i * m + j] = j <= i ? W[i * n + j] : 0;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) Qm[i * n + j] = i == j;
    for (int64_t h = m - 1; h >= 0; h--) { /* Q <- Q H_h, h = m-1 first */
      const double *v = V + h * n;
      for (int64_t r = 0; r < m; r++) {
        double *y = Qm + r * n, d = 0;
        for (int64_t j = h; j < n; j++) d += y[j] * v[j];
        for (int64_t j = h; j < n; j++) y[j] -= tau[h] * d * v[j];
      }
    }
    la_store(out[0], b * mn, mn, Qm);
    la_store(out[1], b * m * m, m * m, L);
  }
  free(W);
  return MX_OK;
}

/* MXNet's eigenvector sign rule (SyevdEigenVecSigns): each row's first largest-magnitude
 * entry is made positive. Shared by nothing else: the cpu kernel has its own copy. */
static void la_eig_signs(double *U, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    double *u = U + i * n, mx = fabs(u[0]);
    int64_t k = 0;
    for (int64_t j = 1; j < n; j++)
      if (fabs(u[j]) > mx) { mx = fabs(u[j]); k = j; }
    if (u[k] < 0)
      for (int64_t j = 0; j < n; j++) u[j] = -u[j];
  }
}

/* syevd: cyclic Jacobi rotations on the symmetric matrix built from A's lower triangle
 * until the off-diagonal mass is below rounding; V accumulates the rotations (columns:
 * eigenvectors), then ascending order, rows of U, MXNet's signs. NaN/Inf in the triangle
 * gives NaN outputs. */
int mx_ref_linalg_syevd(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t cnt, n = la_dims(in[0], &cnt);
  size_t nn = (size_t)(n > 0 ? n * n : 1);
  double *A = malloc(sizeof(double) * (3 * nn + (size_t)n + 1));
  int64_t *ord = malloc(sizeof(int64_t) * (size_t)(n + 1));
  if (!A || !ord) { free(A); free(ord); return mx_err(MX_ENOMEM, "linalg_syevd: out of memory"); }
  double *V = A + nn, *U = V + nn, *lam = U + nn;
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, A);
    bool bad = false;
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j <= i; j++) {
        bad = bad || !isfinite(A[i * n + j]);
        A[j * n + i] = A[i * n + j];
      }
    for (int64_t i = 0; i < n * n; i++) V[i] = (i / n) == (i % n);
    for (int sweep = 0; !bad && sweep < 100; sweep++) {
      double off = 0, tot = 0;
      for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
          tot += A[i * n + j] * A[i * n + j];
          if (i != j) off += A[i * n + j] * A[i * n + j];
        }
      if (off <= 1e-32 * tot || off == 0) break;
      for (int64_t pi = 0; pi < n - 1; pi++)
        for (int64_t q = pi + 1; q < n; q++) {
          double apq = A[pi * n + q];
          if (apq == 0) continue;
          double th = (A[q * n + q] - A[pi * n + pi]) / (2 * apq);
          double t = copysign(1.0, th) / (fabs(th) + sqrt(th * th + 1));
          double c = 1 / sqrt(t * t + 1), s = t * c;
          for (int64_t k = 0; k < n; k++) { /* columns pi, q */
            double x = A[k * n + pi], y = A[k * n + q];
            A[k * n + pi] = c * x - s * y;
            A[k * n + q] = s * x + c * y;
          }
          for (int64_t k = 0; k < n; k++) { /* rows pi, q */
            double x = A[pi * n + k], y = A[q * n + k];
            A[pi * n + k] = c * x - s * y;
            A[q * n + k] = s * x + c * y;
          }
          for (int64_t k = 0; k < n; k++) {
            double x = V[k * n + pi], y = V[k * n + q];
            V[k * n + pi] = c * x - s * y;
            V[k * n + q] = s * x + c * y;
          }
        }
    }
    for (int64_t i = 0; i < n; i++) { ord[i] = i; lam[i] = bad ? NAN : A[i * n + i]; }
    for (int64_t i = 1; i < n; i++) /* insertion sort: stable, n is small */
      for (int64_t j = i; j > 0 && lam[ord[j]] < lam[ord[j - 1]]; j--) {
        int64_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t;
      }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) U[i * n + j] = bad ? NAN : V[j * n + ord[i]];
    la_eig_signs(U, n);
    for (int64_t i = 0; i < n; i++) A[i] = lam[ord[i]];
    la_store(out[0], b * n * n, n * n, U);
    la_store(out[1], b * n, n, A);
  }
  free(A);
  free(ord);
  return MX_OK;
}

/* syevd_backward (MXNet's SyevdBackHelper): X = dU U^T, Y_ij = Y_ji = (X_ij - X_ji) /
 * (2 max(lambda_i - lambda_j, eps)) for i > j, Y_ii = dlambda_i, dA = U^T Y U */
int mx_ref_linalg_syevd_backward(const mx_kctx *ctx, const void *p, int nin,
                                 mx_tensor *const *in, int nout, mx_tensor *const *out) {
  (void)ctx; (void)p; (void)nin; (void)nout;
  int64_t cnt, n = la_dims(in[0], &cnt);
  size_t nn = (size_t)(n > 0 ? n * n : 1);
  double *U = malloc(sizeof(double) * (4 * nn + 2 * (size_t)n + 2));
  if (!U) return mx_err(MX_ENOMEM, "linalg_syevd_backward: out of memory");
  double *dU = U + nn, *X = dU + nn, *Y = X + nn, *lam = Y + nn, *dl = lam + n + 1;
  double eps = in[0]->dtype == MX_F32 ? 1e-30 : 1e-100;
  for (int64_t b = 0; b < cnt; b++) {
    la_load(in[0], b * n * n, n * n, U);
    la_load(in[1], b * n, n, lam);
    la_load(in[2], b * n * n, n * n, dU);
    la_load(in[3], b * n, n, dl);
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += dU[i * n + k] * U[j * n + k];
        X[i * n + j] = s;
      }
    for (int64_t i = 0; i < n; i++) {
      Y[i * n + i] = dl[i];
      for (int64_t j = 0; j < i; j++) {
        double d = lam[i] - lam[j];
        if (d < eps) d = eps;
        Y[i * n + j] = Y[j * n + i] = (X[i * n + j] - X[j * n + i]) / (2 * d);
      }
    }
    for (int64_t i = 0; i < n; i++) /* X = U^T Y */
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += U[k * n + i] * Y[k * n + j];
        X[i * n + j] = s;
      }
    for (int64_t i = 0; i < n; i++) /* dA = X U */
      for (int64_t j = 0; j < n; j++) {
        double s = 0;
        for (int64_t k = 0; k < n; k++) s += X[i * n + k] * U[k * n + j];
        Y[i * n + j] = s;
      }
    la_store(out[0], b * n * n, n * n, Y);
  }
  free(U);
  return MX_OK;
}
