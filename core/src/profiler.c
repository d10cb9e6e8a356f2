/* profiler.c — records one event per kernel run while running (name, thread, start,
 * duration) and writes them as a Chrome trace (chrome://tracing, Perfetto) or as an
 * aggregate table per op. Events go to one mutex-protected array: a kernel run costs
 * far more than the lock, and a stopped profiler costs one relaxed load per op. */
#include "profiler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_EVENTS ((size_t)1 << 24) /* 16 M events (~640 MB would be absurd: stop there) */

typedef struct event {
  const char *name;
  int64_t t0, t1;
  int tid;
  bool async;
} event;

atomic_bool mx_profiler_running;

static pthread_mutex_t pmu = PTHREAD_MUTEX_INITIALIZER;
static event *events;
static size_t nevents, cap;
static int64_t dropped;
static int64_t t_origin;
static atomic_int next_tid;
static _Thread_local int tl_tid;       /* 0: not assigned yet */
static _Thread_local bool tl_tid_worker;

int64_t mx_profiler_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t t = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  return t ? t : 1;
}

void mx_profiler_record(const char *name, int64_t t0, int64_t t1, bool async, bool worker) {
  if (!tl_tid) {
    tl_tid = atomic_fetch_add(&next_tid, 1) + 1;
    tl_tid_worker = worker;
  }
  pthread_mutex_lock(&pmu);
  if (nevents == cap && cap < MAX_EVENTS) {
    size_t nc = cap ? 2 * cap : 4096;
    event *ne = realloc(events, nc * sizeof *ne);
    if (ne) { events = ne; cap = nc; }
  }
  if (nevents < cap) {
    event *e = &events[nevents++];
    e->name = name;
    e->t0 = t0;
    e->t1 = t1;
    e->tid = tl_tid * (tl_tid_worker ? -1 : 1);
    e->async = async;
  } else {
    dropped++;
  }
  pthread_mutex_unlock(&pmu);
}

void mx_profiler_set_state(int run) {
  pthread_mutex_lock(&pmu);
  if (run && !t_origin) t_origin = mx_profiler_now();
  pthread_mutex_unlock(&pmu);
  atomic_store(&mx_profiler_running, run != 0);
}

int mx_profiler_get_state(void) { return atomic_load(&mx_profiler_running) ? 1 : 0; }

void mx_profiler_reset(void) {
  pthread_mutex_lock(&pmu);
  nevents = 0;
  dropped = 0;
  t_origin = mx_profiler_running ? mx_profiler_now() : 0;
  pthread_mutex_unlock(&pmu);
}

int64_t mx_profiler_num_events(void) {
  pthread_mutex_lock(&pmu);
  int64_t n = (int64_t)nevents;
  pthread_mutex_unlock(&pmu);
  return n;
}

int mx_profiler_dump(const char *path) {
  if (!path || !*path) return mx_err(MX_EINVAL, "profiler: dump needs a file name");
  FILE *f = fopen(path, "w");
  if (!f) return mx_err(MX_EIO, "profiler: cannot open %s for writing", path);
  pthread_mutex_lock(&pmu);
  fprintf(f, "{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n");
  /* thread names, once per thread seen */
  int seen[256];
  int nseen = 0;
  for (size_t i = 0; i < nevents; i++) {
    int tid = events[i].tid;
    int j = 0;
    while (j < nseen && seen[j] != tid) j++;
    if (j < nseen || nseen == 256) continue;
    seen[nseen++] = tid;
    fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
               "\"args\": {\"name\": \"%s %d\"}},\n", tid < 0 ? -tid : tid,
            tid < 0 ? "engine worker" : "caller thread", tid < 0 ? -tid : tid);
  }
  for (size_t i = 0; i < nevents; i++) {
    const event *e = &events[i];
    fprintf(f, "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, "
               "\"dur\": %.3f, \"pid\": 0, \"tid\": %d}%s\n",
            e->name, e->async ? "async" : "inline", (double)(e->t0 - t_origin) / 1e3,
            (double)(e->t1 - e->t0) / 1e3, e->tid < 0 ? -e->tid : e->tid,
            i + 1 < nevents ? "," : "");
  }
  fprintf(f, "]}\n");
  pthread_mutex_unlock(&pmu);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) return mx_err(MX_EIO, "profiler: error writing %s", path);
  return MX_OK;
}

typedef struct agg {
  const char *name;
  int64_t count, total, min, max;
} agg;

static int agg_cmp(const void *a, const void *b) {
  const agg *x = a, *y = b;
  return x->total < y->total ? 1 : x->total > y->total ? -1 : strcmp(x->name, y->name);
}

char *mx_profiler_dumps(int reset) {
  pthread_mutex_lock(&pmu);
  agg *a = NULL;
  size_t na = 0, ca = 0;
  for (size_t i = 0; i < nevents; i++) {
    const event *e = &events[i];
    size_t j = 0;
    while (j < na && a[j].name != e->name && strcmp(a[j].name, e->name) != 0) j++;
    if (j == na) {
      if (na == ca) {
        size_t nc = ca ? 2 * ca : 32;
        agg *n2 = realloc(a, nc * sizeof *a);
        if (!n2) continue;
        a = n2;
        ca = nc;
      }
      a[na++] = (agg){e->name, 0, 0, INT64_MAX, 0};
    }
    int64_t d = e->t1 - e->t0;
    a[j].count++;
    a[j].total += d;
    if (d < a[j].min) a[j].min = d;
    if (d > a[j].max) a[j].max = d;
  }
  int64_t drop = dropped;
  if (reset) { nevents = 0; dropped = 0; }
  pthread_mutex_unlock(&pmu);
  if (na) qsort(a, na, sizeof *a, agg_cmp);
  size_t cap2 = 256 + na * 128;
  char *s = malloc(cap2);
  if (!s) { free(a); return NULL; }
  size_t k = (size_t)snprintf(s, cap2, "%-24s %10s %14s %12s %12s %12s\n", "op", "count",
                              "total (us)", "min (us)", "max (us)", "avg (us)");
  for (size_t j = 0; j < na; j++)
    k += (size_t)snprintf(s + k, cap2 - k, "%-24s %10lld %14.3f %12.3f %12.3f %12.3f\n",
                          a[j].name, (long long)a[j].count, a[j].total / 1e3, a[j].min / 1e3,
                          a[j].max / 1e3, (double)a[j].total / (double)a[j].count / 1e3);
  if (drop) snprintf(s + k, cap2 - k, "(%lld events dropped: buffer full)\n", (long long)drop);
  free(a);
  return s;
}

/* Free the event buffer when libmx is unloaded (clean leak-checker runs). */
__attribute__((destructor)) static void profiler_free_at_unload(void) {
  free(events);
  events = NULL;
  nevents = cap = 0;
}
