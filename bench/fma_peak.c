/* bench/fma_peak.c — the FP32 FMA peak of this CPU, the denominator of the "% of peak"
 * numbers in RESULTS.md. Picks the widest FMA the CPU it runs on has (AVX-512 zmm, else
 * AVX2 ymm; `--isa=avx2` forces the narrower one) and runs 12 independent chains per
 * thread, on 1..T threads at once (one chain set per thread).
 *   cc -O2 -pthread bench/fma_peak.c -o /tmp/fma_peak && /tmp/fma_peak [--threads=2] [--isa=avx2]
 * Prints `RESULT<TAB>fma_peak<TAB>luamx<TAB>GFLOP/s<TAB>...` lines (bench/harness format)
 * for 1 thread and for T threads: over wall time, and over the CPU time the threads got
 * (the core's own rate on a machine other work shares). Built without -m flags: each kernel carries its own
 * target attribute, so one binary runs on any x86-64. */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

#define ITERS 40000000L
#define CHAINS 12

/* Each returns a checksum so the chains are not dead code; distinct start values keep
 * the compiler from merging them. FLOPs per call: ITERS * CHAINS * lanes * 2. */
__attribute__((target("avx512f"))) static float run_zmm(long it) {
  __m512 a0 = _mm512_set1_ps(1.00f), a1 = _mm512_set1_ps(1.01f), a2 = _mm512_set1_ps(1.02f),
         a3 = _mm512_set1_ps(1.03f), a4 = _mm512_set1_ps(1.04f), a5 = _mm512_set1_ps(1.05f),
         a6 = _mm512_set1_ps(1.06f), a7 = _mm512_set1_ps(1.07f), a8 = _mm512_set1_ps(1.08f),
         a9 = _mm512_set1_ps(1.09f), a10 = _mm512_set1_ps(1.10f), a11 = _mm512_set1_ps(1.11f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < it; i++) {
    a0 = _mm512_fmadd_ps(a0, m, c); a1 = _mm512_fmadd_ps(a1, m, c);
    a2 = _mm512_fmadd_ps(a2, m, c); a3 = _mm512_fmadd_ps(a3, m, c);
    a4 = _mm512_fmadd_ps(a4, m, c); a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c); a7 = _mm512_fmadd_ps(a7, m, c);
    a8 = _mm512_fmadd_ps(a8, m, c); a9 = _mm512_fmadd_ps(a9, m, c);
    a10 = _mm512_fmadd_ps(a10, m, c); a11 = _mm512_fmadd_ps(a11, m, c);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) static float run_ymm(long it) {
  __m256 a0 = _mm256_set1_ps(1.00f), a1 = _mm256_set1_ps(1.01f), a2 = _mm256_set1_ps(1.02f),
         a3 = _mm256_set1_ps(1.03f), a4 = _mm256_set1_ps(1.04f), a5 = _mm256_set1_ps(1.05f),
         a6 = _mm256_set1_ps(1.06f), a7 = _mm256_set1_ps(1.07f), a8 = _mm256_set1_ps(1.08f),
         a9 = _mm256_set1_ps(1.09f), a10 = _mm256_set1_ps(1.10f), a11 = _mm256_set1_ps(1.11f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < it; i++) {
    a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c);
    a2 = _mm256_fmadd_ps(a2, m, c); a3 = _mm256_fmadd_ps(a3, m, c);
    a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c);
    a8 = _mm256_fmadd_ps(a8, m, c); a9 = _mm256_fmadd_ps(a9, m, c);
    a10 = _mm256_fmadd_ps(a10, m, c); a11 = _mm256_fmadd_ps(a11, m, c);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                           _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
  float o[8];
  _mm256_storeu_ps(o, s);
  return o[0];
}

typedef struct job { float (*fn)(long); long it; double secs, cpu; float sum; } job;

static void *worker(void *p) {
  job *j = p;
  double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
  j->sum = j->fn(j->it);
  j->secs = clock_s(CLOCK_MONOTONIC) - t0;
  j->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
  return NULL;
}

/* T threads at once; GFLOP/s over the slowest thread's wall time, and (*per_cpu) per
 * second of CPU time the threads got: on a shared machine the core's own rate. */
static double peak(float (*fn)(long), int lanes, int nt, double *per_cpu) {
  job jobs[64];
  pthread_t th[64];
  for (int k = 0; k < nt; k++) jobs[k] = (job){.fn = fn, .it = ITERS};
  for (int k = 1; k < nt; k++) pthread_create(&th[k], NULL, worker, &jobs[k]);
  worker(&jobs[0]);
  double worst = jobs[0].secs, cpu = jobs[0].cpu;
  for (int k = 1; k < nt; k++) {
    pthread_join(th[k], NULL);
    if (jobs[k].secs > worst) worst = jobs[k].secs;
    cpu += jobs[k].cpu;
  }
  volatile float sink = jobs[0].sum;
  (void)sink;
  double flop = (double)ITERS * CHAINS * lanes * 2.0 * nt;
  *per_cpu = flop / cpu * nt / 1e9;
  return flop / worst / 1e9;
}

int main(int argc, char **argv) {
  int nt = 1;
  const char *isa = NULL;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--threads=", 10) == 0) nt = atoi(argv[i] + 10);
    else if (strncmp(argv[i], "--isa=", 6) == 0) isa = argv[i] + 6;
  }
  if (nt < 1 || nt > 64) nt = 1;
  __builtin_cpu_init();
  bool zmm = __builtin_cpu_supports("avx512f") && !(isa && strcmp(isa, "avx2") == 0);
  if (!zmm && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    fprintf(stderr, "fma_peak: this CPU has neither AVX-512F nor AVX2+FMA\n");
    return 1;
  }
  float (*fn)(long) = zmm ? run_zmm : run_ymm;
  int lanes = zmm ? 16 : 8;
  const char *name = zmm ? "avx512 zmm" : "avx2 ymm";
  fn(ITERS / 8); /* warm-up: clocks up, pages in */
  for (int t = 1; t <= nt; t += nt > 1 ? nt - 1 : 1) {
    double c, p = peak(fn, lanes, t, &c);
    printf("RESULT\tfma_peak\tluamx\t%.1f\tGFLOP/s\tthreads=%d %s\n", p, t, name);
    printf("RESULT\tfma_peak_cpu\tluamx\t%.1f\tGFLOP/s\tthreads=%d %s, per CPU-second "
           "the threads got\n", c, t, name);
  }
  return 0;
}
