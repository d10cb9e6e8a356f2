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
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
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

static int team_cap;

void mx_set_num_threads(int n) {
  if (n <= 0) n = ncores();
  /* after a thread could not be created (team_grow) the budget stays at what could */
  int cap = __atomic_load_n(&team_cap, __ATOMIC_RELAXED);
  if (cap && n > cap) n = cap;
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
 * would need more threads than it has started.
 *
 * libgomp keeps one pool per thread that opens regions, sized by its last region: a
 * smaller region ends the surplus threads, a bigger one creates threads again. When
 * it cannot create one (a tight `ulimit -v`: each thread wants a whole stack of
 * address space) it kills the process (gomp_fatal, "Thread creation failed"), so we
 * never ask it for a thread we have not just created ourselves: growing the pool
 * starts the missing threads as plain pthreads with libgomp's stack size, all alive
 * at once, and joins them (glibc keeps their stacks cached for the threads libgomp
 * creates next). If some cannot start, the team is what we got, the budget drops to
 * that for good, and stderr says so once (mx.engine.get_num_threads() shows it). */
static _Thread_local int team_size = 1; /* this thread's libgomp pool, its own included */
/* team_cap (above): 0, or the most threads a team may have */
static pthread_mutex_t grow_mu = PTHREAD_MUTEX_INITIALIZER;

#ifdef _OPENMP
/* libgomp's stack size: OMP_STACKSIZE (K by default, or B/K/M/G), else GOMP_STACKSIZE
 * (K), else 0 (pthread's default, as libgomp uses then). */
static size_t gomp_stack_size(void) {
  const char *e = getenv("OMP_STACKSIZE");
  bool omp = e != NULL;
  if (!e) e = getenv("GOMP_STACKSIZE");
  if (!e) return 0;
  char *end;
  unsigned long long v = strtoull(e, &end, 10);
  if (end == e) return 0;
  while (*end == ' ') end++;
  int unit = omp ? *end : 'K';
  switch (unit) {
  case 'b': case 'B': break;
  case 'm': case 'M': v <<= 20; break;
  case 'g': case 'G': v <<= 30; break;
  default: v <<= 10; break;
  }
  return (size_t)v;
}

/* OMP_STACKSIZE / GOMP_STACKSIZE set: read once (getenv scans the environment) */
static bool big_stacks(void) {
  static atomic_int v = -1; /* every thread computes the same value: a plain race-free cache */
  int b = atomic_load_explicit(&v, memory_order_relaxed);
  if (b < 0) atomic_store_explicit(&v, b = gomp_stack_size() != 0, memory_order_relaxed);
  return b != 0;
}

static pthread_mutex_t probe_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t probe_cv = PTHREAD_COND_INITIALIZER;
static bool probe_go;

static void *probe_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&probe_mu);
  while (!probe_go) pthread_cond_wait(&probe_cv, &probe_mu);
  pthread_mutex_unlock(&probe_mu);
  return NULL;
}

/* Start up to k threads alive together (as many as libgomp is about to need), join
 * them; the number that started. Under grow_mu. */
static int probe_threads(int k) {
  pthread_t t[64];
  pthread_attr_t attr, *ap = NULL;
  size_t ss = gomp_stack_size();
  if (ss && pthread_attr_init(&attr) == 0) {
    ap = &attr;
    if (pthread_attr_setstacksize(ap, ss) != 0) { pthread_attr_destroy(ap); ap = NULL; }
  }
  probe_go = false;
  int got = 0;
  while (got < k && got < 64 && pthread_create(&t[got], ap, probe_main, NULL) == 0) got++;
  pthread_mutex_lock(&probe_mu);
  probe_go = true;
  pthread_cond_broadcast(&probe_cv);
  pthread_mutex_unlock(&probe_mu);
  for (int i = 0; i < got; i++) pthread_join(t[i], NULL);
  if (ap) pthread_attr_destroy(ap);
  return got;
}
#endif

/* Make this thread's pool nt threads (or as many as can be had); the team size to use. */
static int team_grow(int nt) {
#ifdef _OPENMP
  int cap = __atomic_load_n(&team_cap, __ATOMIC_RELAXED);
  if (cap && nt > cap) nt = cap;
  if (omp_in_parallel()) return nt; /* nested: a team of one, nothing created */
  /* team_size is the most this thread has had. Regrowing to it after a smaller region
   * (libgomp then recreates the threads it let go) needs no probe while thread creation
   * has never failed and stacks are the default size (glibc's stack cache serves them):
   * probing on every regrowth cost the 2-thread MLP a third of its speed (GEMM teams
   * alternate between 1 and 2 threads with their sizes and the budget). Once a probe has
   * failed, or with big stacks (OMP_STACKSIZE), every regrowth is probed again. */
  if (nt <= team_size) {
    if (cap != 0 || big_stacks()) team_size = nt; /* the pool shrinks: regrowth probes */
    return nt;
  }
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the probe threads' too: nothing to run */
  /* one grower at a time: two probes passing together would each count the other's
   * address space as free */
  pthread_mutex_lock(&grow_mu);
  int want = nt - team_size, got = probe_threads(want);
  if (got < want) {
    /* one thread fewer than could be had: the last stack-sized piece of address space
     * stays for the data (taking it all left tensors out of memory in ~1 run in 5) */
    if (got > 0) got--;
    nt = team_size + got;
    int c = __atomic_load_n(&team_cap, __ATOMIC_RELAXED);
    if (c == 0 || nt < c) {
      __atomic_store_n(&team_cap, nt, __ATOMIC_RELAXED);
      if (num_threads > nt) num_threads = nt;
      if (c == 0)
        fprintf(stderr, "mx: cannot create more threads (out of memory or a thread limit): "
                        "kernels now run with at most %d thread%s\n", nt, nt == 1 ? "" : "s");
    }
  }
  if (nt > team_size) {
#pragma omp parallel num_threads(nt)
    { /* only starts the threads */ }
  }
  team_size = nt;
  pthread_mutex_unlock(&grow_mu);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return nt;
#else
  (void)nt;
  return 1;
#endif
}

/* For a library (oneDNN) about to open regions of omp_get_max_threads(): when fewer
 * than nt threads can be had, it lowers that setting to what this thread's team has. */
void mx_parallel_start_team(int nt) {
#ifdef _OPENMP
  int got = team_grow(nt);
  if (got < nt) omp_set_num_threads(got);
  /* the library's regions are taken to be nt (they may be smaller, shrinking the pool
   * below team_size: libgomp then recreates threads on stacks the probe left cached) */
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
static _Thread_local int local_cap; /* mx_threads_set_local_cap: 0, none */

int mx_threads_set_local_cap(int n) {
  int prev = local_cap;
  local_cap = n > 0 ? n : 0;
  return prev;
}

int mx_threads_acquire(int want) {
  if (local_cap && want > local_cap) want = local_cap;
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
      int got = team_grow(nt);
      /* a smaller team than the budget gave: the surplus goes back at the end with the
       * rest (release takes what acquire gave) */
#pragma omp parallel num_threads(got)
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
