/* kernels/cpu/linalg_lapack.c — linalg_* (MXNet's la_op) on BLAS/LAPACK (lapack.h). LAPACK is
 * column-major: a row-major matrix is its transpose there, which the kernels use (the
 * Cholesky factor of A^T = A as U^T U is L read row-major; inv(A^T) and det(A^T) read
 * row-major are inv(A) and det(A)). Matrices too big for LAPACK's int, and inputs whose
 * NaN/Inf or near-degeneracy LAPACK answers in an order-dependent way, are declined
 * (MX_DECLINE): dispatch runs the reference kernels' plain arithmetic, which is then the
 * answer on every machine. */
#include "gemm.h"
#include "lapack.h"
#include "mx_kernels_gen.h"
#include "mx_ops_gen.h"

#include <cblas.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
  if (n < 0) return MX_DECLINE;
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
  if (n < 0) return MX_DECLINE;
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
  if (la_order(in[0], &cnt) < 0) return MX_DECLINE;
  return la_cpu_det("linalg_det", in, nout, out);
}

int mx_cpu_linalg_slogdet(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                          int nout, mx_tensor *const *out) {
  int64_t cnt;
  if (la_order(in[0], &cnt) < 0) return MX_DECLINE;
  return la_cpu_det("linalg_slogdet", in, nout, out);
}

/* syrk through cblas_?gemm (the full symmetric result, as MXNet's output) */

/* ---- trsm through cblas_dtrsm in place on a copy of B (row-major: the triangle and
 * transpose flags mean what they say). f32 is solved in double too: a triangular solve
 * amplifies rounding by A's condition number, and the conversion is O(m^2 + mn) against
 * the solve's O(m^2 n); the result then agrees with the ref kernel's double arithmetic. */

int mx_cpu_linalg_trsm(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                       int nout, mx_tensor *const *out) {
  const struct mx_params_linalg_trsm *P = p;
  mx_tensor *o = out[0];
  int nd = o->ndim;
  int64_t cnt, R = o->shape[nd - 2], C = o->shape[nd - 1];
  int m = la_order(in[0], &cnt);
  if (m < 0 || !mx_cpu_blas_ok(o->dtype, R, C, m)) return MX_DECLINE;
  if (o->size == 0) return MX_OK;
  int rc = mx_cpu_blas_ready("linalg_trsm");
  if (rc) return rc;
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
    if (!isfinite(v)) return MX_DECLINE;
  }
  return MX_OK;
}

/* ---- potri on LAPACK's ?potri. Row-major lower L is column-major upper U = L^T, and
 * (U^T U)^-1 = (L L^T)^-1: potri("U") leaves the inverse's row-major lower triangle,
 * which is mirrored into the upper. */

int mx_cpu_linalg_potri(const mx_kctx *ctx, const void *p, int nin, mx_tensor *const *in,
                        int nout, mx_tensor *const *out) {
  int64_t cnt;
  int n = la_order(in[0], &cnt), lda = n > 1 ? n : 1, info = 0;
  if (n < 0) return MX_DECLINE;
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
        if (!isfinite(v)) return MX_DECLINE;
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
      if (!isfinite(v)) return MX_DECLINE;
    }
  }
  return MX_OK;
}

/* ---- trmm, gelqf, syevd on BLAS/LAPACK, in double for both dtypes (the results then
 * agree with the ref kernels' double arithmetic) ---- */

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
  if (m < 0 || !mx_cpu_blas_ok(o->dtype, R, C, m)) return MX_DECLINE;
  if (o->size == 0) return MX_OK;
  int rc = mx_cpu_blas_ready("linalg_trmm");
  if (rc) return rc;
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
    if (!isfinite(v)) return MX_DECLINE;
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
  if (mn == 0) return MX_DECLINE;
  if (mn > INT_MAX) return MX_DECLINE;
  int rc = mx_cpu_blas_ready("linalg_gelqf");
  if (rc) return rc;
  int m = (int)m64, n = (int)n64, info = 0, lwork = -1;
  int64_t cnt = a->size / mn;
  for (int64_t i = 0; i < a->size; i++) { /* NaN/Inf: the ref kernel's plain arithmetic */
    double v = a->dtype == MX_F32 ? (double)((const float *)mx_ptr(a))[i]
                                  : ((const double *)mx_ptr(a))[i];
    if (!isfinite(v)) return MX_DECLINE;
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
        return MX_DECLINE;
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
  if (n <= 0) return MX_DECLINE;
  lda = n;
  const mx_tensor *a = in[0];
  int64_t nn = (int64_t)n * n;
  for (int64_t b = 0; b < cnt; b++) /* NaN/Inf in a triangle: the ref kernel's NaN outputs */
    for (int i = 0; i < n; i++)
      for (int j = 0; j <= i; j++) {
        int64_t at = b * nn + (int64_t)i * n + j;
        double v = a->dtype == MX_F32 ? (double)((const float *)mx_ptr(a))[at]
                                      : ((const double *)mx_ptr(a))[at];
        if (!isfinite(v)) return MX_DECLINE;
      }
  int rc = mx_cpu_blas_ready("linalg_syevd");
  if (rc) return rc;
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
        return MX_DECLINE;
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

