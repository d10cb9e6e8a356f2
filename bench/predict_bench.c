/* predict_bench.c — batch-1 latency through MXNet's C predict API. The same source is
 * built against luamx (core/include + libmx) and against MXNet 1.9.1 (its
 * c_predict_api.h + libmxnet.so) by bench/runtime_run.sh, so both run exactly this code.
 *
 *   predict_bench model-symbol.json model-0000.params C H W [iters] [threads] [batch]
 *
 * Prints "median_ms <m> min_ms <m> cpu_ms <m>" over iters forwards of a batch (default
 * 1) after 5 warm-up ones, each forward = SetInput + Forward + GetOutput; cpu_ms is the
 * process's CPU time per forward (on a shared machine, what the forward itself cost).
 * threads > 1: that many predictors of one model (MXPredCreateMultiThread) run
 * concurrently, one per thread; prints the throughput. */
#define _POSIX_C_SOURCE 200809L
#include <stdbool.h> /* MXNet 1.9.1's header uses uint32_t and bool without including them */
#include <stdint.h>

#include <mxnet/c_predict_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_ms(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

static char *slurp(const char *p, long *n) {
  FILE *f = fopen(p, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)*n + 1);
  if (fread(b, 1, (size_t)*n, f) != (size_t)*n) { fclose(f); free(b); return NULL; }
  b[*n] = 0;
  fclose(f);
  return b;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct job { PredictorHandle h; float *in, *out; uint32_t nin, nout; int iters; double ms; } job;

static int forward(job *j) {
  return MXPredSetInput(j->h, "data", j->in, j->nin) || MXPredForward(j->h) ||
         MXPredGetOutput(j->h, 0, j->out, j->nout);
}

static void *loop(void *arg) {
  job *j = arg;
  double t0 = now_ms();
  for (int i = 0; i < j->iters; i++)
    if (forward(j)) { fprintf(stderr, "%s\n", MXGetLastError()); exit(1); }
  j->ms = now_ms() - t0;
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 6) return 2;
  long jl, pl;
  char *json = slurp(argv[1], &jl), *par = slurp(argv[2], &pl);
  if (!json || !par) return 1;
  int iters = argc > 6 ? atoi(argv[6]) : 50, nt = argc > 7 ? atoi(argv[7]) : 1;
  uint32_t batch = argc > 8 ? (uint32_t)atoi(argv[8]) : 1;
  uint32_t shape[4] = {batch, (uint32_t)atoi(argv[3]), (uint32_t)atoi(argv[4]), (uint32_t)atoi(argv[5])};
  const char *keys[1] = {"data"};
  uint32_t indptr[2] = {0, 4};
  PredictorHandle hs[64];
  int rc = nt == 1 ? MXPredCreate(json, par, (int)pl, 1, 0, 1, keys, indptr, shape, &hs[0])
                   : MXPredCreateMultiThread(json, par, (int)pl, 1, 0, 1, keys, indptr, shape, nt, hs);
  if (rc) { fprintf(stderr, "create: %s\n", MXGetLastError()); return 1; }
  uint32_t *os, ond;
  uint32_t nin = shape[0] * shape[1] * shape[2] * shape[3], nout = 1;
  job jobs[64];
  for (int k = 0; k < nt; k++) {
    jobs[k] = (job){hs[k], calloc(nin, 4), NULL, nin, 0, iters, 0};
    for (uint32_t i = 0; i < nin; i++) jobs[k].in[i] = (float)((i * 7919u) % 255) / 255.0f - 0.5f;
  }
  if (MXPredForward(hs[0]) || MXPredGetOutputShape(hs[0], 0, &os, &ond)) return 1;
  for (uint32_t i = 0; i < ond; i++) nout *= os[i];
  for (int k = 0; k < nt; k++) { jobs[k].out = malloc(nout * 4); jobs[k].nout = nout; }
  for (int k = 0; k < nt; k++)
    for (int w = 0; w < 5; w++)
      if (forward(&jobs[k])) { fprintf(stderr, "%s\n", MXGetLastError()); return 1; }
  if (nt == 1) {
    double *t = malloc(sizeof(double) * (size_t)iters);
    double c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
      double t0 = now_ms();
      if (forward(&jobs[0])) return 1;
      t[i] = now_ms() - t0;
    }
    double cpu = (clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters;
    qsort(t, (size_t)iters, sizeof *t, cmp);
    printf("median_ms %.3f min_ms %.3f cpu_ms %.3f\n", t[iters / 2], t[0], cpu);
  } else {
    pthread_t th[64];
    double t0 = now_ms();
    for (int k = 0; k < nt; k++) pthread_create(&th[k], NULL, loop, &jobs[k]);
    for (int k = 0; k < nt; k++) pthread_join(th[k], NULL);
    double wall = now_ms() - t0;
    printf("threads %d throughput_per_s %.2f\n", nt, nt * iters / (wall / 1e3));
  }
  return 0;
}
