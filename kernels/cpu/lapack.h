/* kernels/cpu/lapack.h — the Fortran LAPACK routines the cpu kernels call. They come
 * from OpenBLAS's LAPACK (Debian's libopenblas ships them; CMake links it); there is no
 * lapacke.h on the build machines, so the symbols are declared here. Fortran ABI: every
 * argument by pointer, column-major matrices. */
#ifndef MX_LAPACK_H
#define MX_LAPACK_H

void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void spotri_(const char *uplo, const int *n, float *a, const int *lda, int *info);
void dpotri_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void sgetrf_(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
void sgetri_(const int *n, float *a, const int *lda, const int *ipiv, float *work,
             const int *lwork, int *info);
void dgetri_(const int *n, double *a, const int *lda, const int *ipiv, double *work,
             const int *lwork, int *info);
/* gelqf (as geqrf of A^T, MXNet's route) and syevd: double only (f32 is widened) */
void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work,
             const int *lwork, int *info);
void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda,
             const double *tau, double *work, const int *lwork, int *info);
void dsyevd_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda,
             double *w, double *work, const int *lwork, int *iwork, const int *liwork, int *info);

#endif
