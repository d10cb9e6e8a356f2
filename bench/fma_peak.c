/* bench/fma_peak.c — FP32 FMA peak of one core (zmm, 12 independent chains), the
 * denominator of the matmul "% of peak" numbers in RESULTS.md.
 *   gcc -O2 -mavx512f -mfma bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak
 * (run it twice in parallel for the 2-core peak). */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  /* distinct start values: identical chains would be merged by the compiler */
  __m512 a[12];
  for (int k = 0; k < 12; k++) a[k] = _mm512_set1_ps(1.0f + 0.01f * k);
  __m512 a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], a4 = a[4], a5 = a[5], a6 = a[6],
         a7 = a[7], a8 = a[8], a9 = a[9], a10 = a[10], a11 = a[11];
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  const long it = 50000000;
  double t0 = now();
  for (long i = 0; i < it; i++) {
    a0 = _mm512_fmadd_ps(a0, m, c); a1 = _mm512_fmadd_ps(a1, m, c);
    a2 = _mm512_fmadd_ps(a2, m, c); a3 = _mm512_fmadd_ps(a3, m, c);
    a4 = _mm512_fmadd_ps(a4, m, c); a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c); a7 = _mm512_fmadd_ps(a7, m, c);
    a8 = _mm512_fmadd_ps(a8, m, c); a9 = _mm512_fmadd_ps(a9, m, c);
    a10 = _mm512_fmadd_ps(a10, m, c); a11 = _mm512_fmadd_ps(a11, m, c);
  }
  double t = now() - t0;
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  float o[16];
  _mm512_storeu_ps(o, s);
  printf("zmm FMA, 1 thread: %.1f GFLOP/s (checksum %g)\n", it * 12.0 * 16 * 2 / t / 1e9, o[0]);
  return 0;
}
