/* parallel.c — the one intra-op thread pool (OpenMP: the same runtime oneDNN
 * uses), so our kernels and oneDNN share threads instead of oversubscribing.
 *
 * Thread policy (docs/engine.md): the budget T (cores, MX_NUM_THREADS or
 * mx_set_num_threads) bounds the threads doing kernel work at once. The engine runs
 * at most min(workers, T) ops at a time (1 worker by default), and each kernel gets T
 * minus the other busy workers as its intra-op team (re-read at every parallel
 * region, so a lone big op gets every core and two concurrent ones one each). OpenBLAS is kept at one
 * thread of its own (its pthread pool would sit on top of ours); GEMM goes through
 * oneDNN, which uses the calling thread's OpenMP team size. */
#include "engine.h"

#include <signal.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int num_threads = 0; /* 0: not set yet */

static int ncores(void) {
#ifdef _OPENMP
  return omp_get_num_procs();
#else
  return 1;
#endif
}

void mx_set_num_threads(int n) {
  if (n <= 0) n = ncores();
  num_threads = n;
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
}

int mx_get_num_threads(void) {
  if (num_threads == 0) {
    const char *e = getenv("MX_NUM_THREADS");
    mx_set_num_threads(e ? atoi(e) : 0);
  }
  return num_threads;
}

/* Process-directed signals (SIGPROF from LuaJIT's profiler, SIGINT, an embedding
 * application's timers) must land on the application's own threads: a handler
 * running on a pool thread would touch the Lua state from the wrong thread. OpenMP
 * threads inherit the signal mask of the thread that opens the region creating them,
 * so each thread grows its team here, with every signal blocked, before a region
 * would need more threads than it has started. */
static _Thread_local int team_size = 1;

void mx_parallel_start_team(int nt) {
#ifdef _OPENMP
  if (nt <= team_size || omp_in_parallel()) return;
  team_size = nt;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
#pragma omp parallel num_threads(nt)
  { /* only starts the threads */ }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
#else
  (void)nt;
#endif
}

void mx_parallel_for(int64_t n, int64_t grain, mx_range_fn fn, void *ctx) {
  if (n <= 0) return;
  int nt = mx_engine_intra_threads();
  if (grain < 1) grain = 1;
  int64_t chunks = n / grain;
  if (chunks > nt) chunks = nt;
#ifdef _OPENMP
  if (chunks >= 2 && !omp_in_parallel()) {
    if (chunks > team_size) mx_parallel_start_team((int)chunks);
#pragma omp parallel num_threads((int)chunks)
    {
      int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
      int64_t b = n * t / k, e = n * (t + 1) / k;
      if (b < e) fn(b, e, ctx);
    }
    return;
  }
#endif
  fn(0, n, ctx);
}
