/* parallel.c — the one intra-op thread pool (OpenMP: the same runtime oneDNN
 * uses), so our kernels and oneDNN share threads instead of oversubscribing.
 *
 * Thread policy (docs/engine.md): the budget T (cores, MX_NUM_THREADS or
 * mx_set_num_threads) bounds the threads doing kernel work at once, process-wide:
 * every kernel that wants a team takes its threads from the budget and gives them
 * back (mx_threads_acquire), whichever session, engine worker or inline caller runs
 * it, so a lone big op gets every core, two concurrent ones share them, and N Lua
 * states in one process never open N full teams. A kernel always gets its own thread
 * (it is running anyway). OpenBLAS is kept at one
 * thread of its own (its pthread pool would sit on top of ours); GEMM goes through
 * oneDNN, which uses the calling thread's OpenMP team size. */
#include "engine.h"

#include <signal.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int num_threads = 0; /* 0: not set yet */
static atomic_int in_use;    /* threads held by running kernels' teams */
static atomic_int peak;      /* max of in_use since start / mx_threads_reset_peak */

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

int mx_threads_in_use(void) { return atomic_load_explicit(&in_use, memory_order_relaxed); }

int mx_threads_available(void) {
  int n = mx_get_num_threads() - atomic_load_explicit(&in_use, memory_order_relaxed);
  return n < 1 ? 1 : n;
}

/* A team holds its threads (the caller's included) in `in_use`, which never exceeds the
 * budget: when fewer than 2 are free the caller runs alone on its own thread, which it
 * holds anyway (a Lua thread, an engine worker), and takes nothing; acquire then
 * returns 1 and the matching release(1) is a no-op. */
int mx_threads_acquire(int want) {
  if (want < 2) return 1;
  int budget = mx_get_num_threads();
  int cur = atomic_load_explicit(&in_use, memory_order_relaxed);
  for (;;) {
    int g = budget - cur;
    if (g > want) g = want;
    if (g < 2) return 1;
    if (atomic_compare_exchange_weak_explicit(&in_use, &cur, cur + g, memory_order_acq_rel,
                                              memory_order_relaxed)) {
      /* the high-water mark (specs: N states never hold more than the budget) */
      int held = cur + g, p = atomic_load_explicit(&peak, memory_order_relaxed);
      while (held > p && !atomic_compare_exchange_weak_explicit(&peak, &p, held,
                                                                memory_order_relaxed,
                                                                memory_order_relaxed)) {}
      return g;
    }
  }
}

void mx_threads_release(int n) {
  if (n > 1) atomic_fetch_sub_explicit(&in_use, n, memory_order_acq_rel);
}

int mx_threads_peak(void) { return atomic_load_explicit(&peak, memory_order_relaxed); }
void mx_threads_reset_peak(void) {
  atomic_store_explicit(&peak, atomic_load(&in_use), memory_order_relaxed);
}

void mx_parallel_for(int64_t n, int64_t grain, mx_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t chunks = n / grain;
#ifdef _OPENMP
  if (chunks >= 2 && !omp_in_parallel()) {
    /* the budget is asked only when the work would split: small kernels pay nothing */
    int nt = mx_threads_acquire(chunks > 64 ? 64 : (int)chunks);
    if (nt >= 2) {
      if (nt > team_size) mx_parallel_start_team(nt);
#pragma omp parallel num_threads(nt)
      {
        int64_t t = omp_get_thread_num(), k = omp_get_num_threads();
        int64_t b = n * t / k, e = n * (t + 1) / k;
        if (b < e) fn(b, e, ctx);
      }
      mx_threads_release(nt);
      return;
    }
    mx_threads_release(nt);
  }
#endif
  fn(0, n, ctx);
}
