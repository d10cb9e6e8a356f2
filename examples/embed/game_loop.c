/* game_loop.c — a frame loop embedding both halves of luamx: a LuaJIT state running a
 * small Gluon policy network written in Lua (policy.lua) and a model exported to files
 * run by the C inference runtime (mx_runtime.h), every frame:
 *
 *   game_loop policy.lua model-symbol.json model-0000.params [frames] [hz]
 *
 * Each frame feeds an 8-float observation (a toy simulation) to the policy, its 4 actions
 * and the observation (12 floats) to the C-side model, then steps Lua's collector (kept
 * stopped otherwise, so it never runs at a time of its own choosing). Paced at hz frames a
 * second (0: as fast as possible). Reports the frame cost (work only, pacing excluded):
 * p50 / p99 / max, the longest collector step (wall; CPU time of the steps that took no page
 * fault, those that did apart), and the heap calls (malloc, calloc,
 * realloc, posix_memalign: glibc's functions interposed here) after the first 100 warm-up
 * frames, those inside the C model's runs apart, and who made the first few. Exit status
 * 0 when the model's runs made none and the frames fewer than one per 1000 frames. */
#define _GNU_SOURCE /* dladdr; clock_gettime, nanosleep under -std=c11 */
#include <mx_runtime.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <time.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
static long heap_calls; /* every thread's: a frame's work is this thread's and libmx's */
/* Who made the steady state's first heap calls (any thread): the caller's address only
 * (unwinding further would cross LuaJIT's frames, which have no unwind tables), named
 * with dladdr at the end. */
#define SITES 8
static void *site_pc[SITES];
static int nsites, watching;
static long model_heap_calls;      /* made on this thread inside mx_rt_run */
static _Thread_local int in_model; /* set around mx_rt_run */
#define NOTE_HEAP() note_heap(__builtin_return_address(0))
static void note_heap(void *pc) {
  __atomic_add_fetch(&heap_calls, 1, __ATOMIC_RELAXED);
  if (!__atomic_load_n(&watching, __ATOMIC_RELAXED)) return;
  if (in_model) __atomic_add_fetch(&model_heap_calls, 1, __ATOMIC_RELAXED);
  int i = __atomic_fetch_add(&nsites, 1, __ATOMIC_RELAXED);
  if (i < SITES) site_pc[i] = pc;
}
void *malloc(size_t n) { NOTE_HEAP(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { NOTE_HEAP(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { NOTE_HEAP(); return __libc_realloc(p, n); }
int posix_memalign(void **p, size_t a, size_t n) {
  NOTE_HEAP();
  *p = __libc_memalign(a, n);
  return *p ? 0 : 12;
}
void *aligned_alloc(size_t a, size_t n) { NOTE_HEAP(); return __libc_memalign(a, n); }

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* this thread's CPU time: a collector step's own cost, whatever the scheduler does */
static double cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* this thread's minor page faults: a step that maps fresh pages pays the kernel's first
 * touch (on a VM that backs memory lazily, 0.06-1.2 GB/s), not the collector's work */
static long minflt(void) {
  struct rusage u;
  return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_minflt : 0;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s policy.lua model-symbol.json model-0000.params [frames] [hz]\n", argv[0]);
    return 2;
  }
  int frames = argc > 4 ? atoi(argv[4]) : 10000;
  double hz = argc > 5 ? atof(argv[5]) : 60;
  if (frames < 200) frames = 200;

  /* the C-side model: 12 inputs (observation + actions) */
  int64_t shape[2] = {1, 12};
  mx_rt_input in = {"data", 2, shape, MX_RT_F32};
  mx_rt_options opt;
  mx_rt_options_init(&opt);
  opt.threads = 1; /* a frame's work stays on the game thread */
  opt.allow_reshape = 0;
  mx_rt_model *m;
  mx_rt_ctx *c;
  if (mx_rt_model_load(argv[2], argv[3], 1, &in, &opt, &m) || mx_rt_ctx_new(m, &c)) {
    fprintf(stderr, "model: %s\n", mx_rt_last_error());
    return 1;
  }
  float feed[12], out[64];
  size_t out_bytes = mx_rt_output_bytes(c, 0);
  if (out_bytes > sizeof out) {
    fprintf(stderr, "the model's output is larger than %zu bytes\n", sizeof out);
    return 1;
  }
  if (mx_rt_bind_input(c, 0, feed, sizeof feed) || mx_rt_bind_output(c, 0, out, out_bytes)) {
    fprintf(stderr, "bind: %s\n", mx_rt_last_error());
    return 1;
  }

  /* the Lua side */
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_dofile(L, argv[1]) || !lua_istable(L, -1)) {
    fprintf(stderr, "policy: %s\n", lua_tostring(L, -1));
    return 1;
  }
  lua_getfield(L, -1, "step");
  int step_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_pop(L, 1);
  lua_gc(L, LUA_GCCOLLECT, 0);
  lua_gc(L, LUA_GCSTOP, 0); /* stepped by the loop, inside the frame */

  double *cost = malloc(sizeof(double) * (size_t)frames);
  double gc_max = 0, gc_cpu_max = 0, gc_cpu_faulted = 0, sum_out = 0;
  int gc_over = 0, gc_faulted = 0;
  long heap_warm = 0;
  float state[8] = {0};
  double next = now_us();
  for (int f = 0; f < frames; f++) {
    if (f == 100) {
      heap_warm = __atomic_load_n(&heap_calls, __ATOMIC_RELAXED);
      __atomic_store_n(&watching, 1, __ATOMIC_RELAXED);
    }
    double t0 = now_us();
    for (int i = 0; i < 8; i++) state[i] = (float)sin(0.01 * f * (i + 1) + i);
    lua_rawgeti(L, LUA_REGISTRYINDEX, step_ref);
    lua_pushnumber(L, (lua_Number)(uintptr_t)state);
    lua_pushnumber(L, (lua_Number)(uintptr_t)(feed + 8));
    if (lua_pcall(L, 2, 0, 0)) {
      fprintf(stderr, "frame %d: policy: %s\n", f, lua_tostring(L, -1));
      return 1;
    }
    memcpy(feed, state, sizeof state);
    in_model = 1;
    int rc = mx_rt_run(c);
    in_model = 0;
    if (rc) {
      fprintf(stderr, "frame %d: model: %s\n", f, mx_rt_last_error());
      return 1;
    }
    sum_out += out[0];
    long f0 = minflt();
    double g0 = now_us(), c0 = cpu_us();
    lua_gc(L, LUA_GCSTEP, 0); /* one small incremental step per frame */
    double g1 = now_us(), c1 = cpu_us();
    bool faulted = minflt() != f0;
    if (f >= 100) {
      if (g1 - g0 > gc_max) gc_max = g1 - g0;
      if (!faulted && c1 - c0 > gc_cpu_max) gc_cpu_max = c1 - c0;
      if (faulted && c1 - c0 > gc_cpu_faulted) gc_cpu_faulted = c1 - c0;
      gc_faulted += faulted;
      gc_over += g1 - g0 > 1000;
    }
    cost[f] = g1 - t0;
    if (hz > 0) {
      next += 1e6 / hz;
      double wait = next - now_us();
      if (wait > 0) {
        struct timespec ts = {(time_t)(wait / 1e6), (long)(fmod(wait, 1e6) * 1e3)};
        nanosleep(&ts, NULL);
      }
    }
  }
  long heap_steady = __atomic_load_n(&heap_calls, __ATOMIC_RELAXED) - heap_warm;
  __atomic_store_n(&watching, 0, __ATOMIC_RELAXED);
  int n = frames - 100;
  qsort(cost + 100, (size_t)n, sizeof(double), cmp_d);
  printf("frames %d at %s: frame cost p50 %.1f us, p99 %.1f us, max %.1f us; "
         "longest GC step %.1f us (CPU %.1f us), %d step%s over 1 ms\n", frames,
         hz > 0 ? "60 Hz" : "full speed", cost[100 + n / 2], cost[100 + (int)(n * 0.99)],
         cost[frames - 1], gc_max, gc_cpu_max, gc_over, gc_over == 1 ? "" : "s");
  long model_steady = __atomic_load_n(&model_heap_calls, __ATOMIC_RELAXED);
  printf("GC steps that took page faults: %d (longest CPU %.1f us, the kernel's first touch "
         "included)\n", gc_faulted, gc_cpu_faulted);
  printf("heap calls after warm-up: %ld, %ld of them in the C model's runs (checksum %.4f)\n",
         heap_steady, model_steady, sum_out);
  fflush(stdout);
  int ns = nsites < SITES ? nsites : SITES;
  for (int i = 0; i < ns; i++) {
    Dl_info di;
    if (dladdr(site_pc[i], &di) && di.dli_fname)
      fprintf(stderr, "heap call %d after warm-up: from %s+%#lx (%s)\n", i + 1, di.dli_fname,
              (unsigned long)((char *)site_pc[i] - (char *)di.dli_fbase),
              di.dli_sname ? di.dli_sname : "a static function");
    else
      fprintf(stderr, "heap call %d after warm-up: from %p\n", i + 1, site_pc[i]);
  }
  luaL_unref(L, LUA_REGISTRYINDEX, step_ref);
  lua_close(L);
  mx_rt_ctx_free(c);
  mx_rt_model_free(m);
  free(cost);
  /* the collector's own work per step (CPU time: a loaded machine's preemptions
   * lengthen the wall time of whatever runs then; steps that faulted pages in are
   * reported apart, their time is the kernel's) */
  /* the runtime's promise is none at all; the Lua half's is none per frame (an op its
   * engine had to queue costs 3, rare: one in ~10 000 frames seen on a loaded machine) */
  bool heap_ok = model_steady == 0 && heap_steady * 1000 < n;
  return heap_ok && gc_cpu_max <= 1000 ? 0 : 3;
}
