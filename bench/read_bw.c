/* bench/read_bw.c — the memory read bandwidth of this machine: a 512 MB float array
 * summed with AVX2 loads (4 independent sums), on 1..T threads at once (each its own
 * part). The denominator of a memory-bound bench: batch-1 decoding reads every weight
 * once a token (GPT-2 124M: 497 MB), so tokens/s cannot pass this rate / that size.
 *   cc -O2 -fopenmp bench/read_bw.c -o /tmp/read_bw && /tmp/read_bw [--threads=2]
 * Prints `RESULT<TAB>read_bw<TAB>luamx<TAB>GB/s<TAB>threads=T, 4k|huge pages` lines
 * (bench/harness format), the best of 5 passes per thread count, on 4 kB pages and on
 * transparent huge pages (madvised, as libmx's storage does for big blocks). */
#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((target("avx2"))) static float sum(const float *a, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(a + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(a + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(a + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(a + i + 24));
  }
  float o[8];
  _mm256_storeu_ps(o, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  return o[0] + o[1] + o[2] + o[3] + o[4] + o[5] + o[6] + o[7];
}

int main(int argc, char **argv) {
  int T = 1;
  for (int i = 1; i < argc; i++)
    if (!strncmp(argv[i], "--threads=", 10)) T = atoi(argv[i] + 10);
  size_t n = (size_t)128 << 20;
  float check = 0;
  for (int huge = 0; huge < 2; huge++) {
    float *a = aligned_alloc((size_t)2 << 20, n * sizeof(float));
    if (!a) return 1;
    if (huge) madvise(a, n * sizeof(float), MADV_HUGEPAGE);
    for (size_t i = 0; i < n; i++) a[i] = 1;
    for (int t = 1; t <= T; t++) {
      double best = 0;
      for (int r = 0; r < 5; r++) {
        float s = 0;
        double t0 = now();
#pragma omp parallel num_threads(t) reduction(+ : s)
        {
          size_t part = n / (size_t)t / 32 * 32;
          s += sum(a + (size_t)omp_get_thread_num() * part, part);
        }
        double bytes = (double)(n / (size_t)t / 32 * 32 * (size_t)t) * sizeof(float);
        double bw = bytes / (now() - t0) / 1e9;
        if (bw > best) best = bw;
        check += s;
      }
      printf("RESULT\tread_bw\tluamx\t%.1f\tGB/s\tthreads=%d, %s pages\n", best, t,
             huge ? "huge" : "4k");
    }
    free(a);
  }
  return check == 0; /* the sums are used: not dead code */
}
