/* engine.c — MXNet's dependency engine, for the CPU.
 *
 * Every storage may own a variable (mx_var, created the first time an op is queued
 * on it). An op is pushed with the storages of its inputs as reads and of its
 * outputs as writes. Per variable, ops are granted in push order: readers run
 * together, a writer waits for every earlier reader and writer. An op whose grants
 * are all in runs on a worker thread. All dependency bookkeeping happens under one
 * mutex: on the 2-4 core machines this targets, one short critical section per
 * queued op costs less than finer locking would.
 *
 * The fast path is what makes tiny ops cheap: when no variable the op touches has a
 * pending op (one relaxed pointer load and, when a variable exists, one acquire load
 * per tensor) and the op is small, the kernel runs inline on the caller's thread,
 * with no allocation and no lock. Storages that never saw a queued op have no
 * variable at all.
 *
 * Errors: a kernel that fails on a worker leaves an error record on its outputs'
 * variables; ops that later touch those variables are skipped and pass the record
 * on. Sync points (mx_engine_wait_storage, mx_engine_wait_all) return MX_EASYNC with
 * the record's message, which names the op, its input shapes and the Lua line that
 * queued it (the binding fills that in right after the push: see mx_engine_queued).
 */
#include "engine.h"
#include "profiler.h"
#include "session.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_WORKERS 64
#define INLINE_MAX_DEFAULT 12288 /* elements in + out: measured, see docs/engine.md */
/* Back-pressure: a pusher that runs ahead of the workers waits once this many ops or
 * output bytes are in flight, or a loop of queued temporaries would hold unbounded
 * memory (the queue keeps every tensor it touches alive). */
#define MAX_PENDING_OPS 256
#define MAX_PENDING_BYTES ((int64_t)256 << 20)

/* ---- records ---------------------------------------------------------------- */

/* Where an op was queued from: filled by the binding after the push, read when an
 * error is raised. Shared (refcounted) by the op, the thread's last-push slot and
 * the error records that name it. */
typedef struct site {
  atomic_int ref;
  char *where; /* under mu */
} site;

typedef struct eerr {
  atomic_int ref;
  char *msg;   /* the kernel's message + the op's description */
  site *site;  /* may be NULL */
  uint64_t seq; /* the failing op's push order: waitall raises the earliest */
  bool reported;
} eerr;

struct eop;
typedef struct dep {
  struct dep *next;
  struct eop *op;
  struct mx_var *var;
  bool write;
} dep;

typedef struct mx_var {
  dep *head, *tail;     /* waiting grants, push order (under mu) */
  int running_reads;    /* granted reads not yet completed (under mu) */
  bool running_write;   /* a granted write not yet completed (under mu) */
  int pending_writes;   /* queued writes not yet completed (under mu) */
  atomic_int pending;   /* queued ops touching this var not yet completed */
  eerr *err;            /* written under mu before `pending` drops */
} mx_var;

typedef struct eop {
  struct eop *next;     /* ready queue */
  const char *name;     /* the op's (static) or the pushed function's (owned) name */
  bool own_name;
  mx_kernel_fn k;       /* an op's kernel, run with ctx; NULL: a pushed function */
  mx_kctx ctx;
  int (*fn)(void *);    /* mx_engine_push_fn */
  void *arg;
  void (*free_arg)(void *);
  mx_session *session;  /* whose wait scope the op belongs to */
  void *params;
  int nin, nout, ndeps, wait;
  mx_tensor **in, **out;
  site *site;
  int64_t bytes;        /* output bytes, for back-pressure */
  bool prof;            /* the profiler was running at push time */
  uint64_t seq;         /* push order (under mu) */
  dep deps[];
} eop;

/* ---- state ------------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* One ready queue per device (cpu(0) .. cpu(MX_MAX_CPU_DEVICES - 1), then the GPUs):
 * workers serve the non-empty queues in turn, so one device's stream of ready ops
 * (a long backward on cpu(0)) does not hold back another's (the copy feeding cpu(1)),
 * as MXNet's per-device queues do. The workers themselves are shared. */
#ifndef MX_MAX_CPU_DEVICES
#define MX_MAX_CPU_DEVICES 16
#endif
#define NREADY (MX_MAX_CPU_DEVICES + 8)
static eop *ready_head[NREADY], *ready_tail[NREADY]; /* under mu */
static int nready;                                    /* ops in all ready queues (under mu) */
static int ready_next;                                /* the queue served next (under mu) */
static inline int ready_index(const mx_kctx *c) {
  int i = c->dev_type == MX_CPU ? c->dev_id : MX_MAX_CPU_DEVICES + c->dev_id;
  return i >= 0 && i < NREADY ? i : 0;
}
static _Atomic int64_t total_pending; /* changed under mu; read lock-free by push */
static int64_t pending_bytes;          /* under mu */
static uint64_t push_seq;              /* under mu */
static int waiters;                    /* threads blocked on done_cv (under mu) */
static int running;                    /* workers holding an op (under mu) */
static int nworkers;                   /* under mu */
static pthread_t workers[MAX_WORKERS];
static bool shutting_down;             /* under mu */

static atomic_int mode = MX_ENGINE_THREADED;
static atomic_llong inline_max = INLINE_MAX_DEFAULT;
static atomic_bool nan_check;
static atomic_llong st_queued, st_skipped, st_failed;

static _Thread_local bool tl_worker;
/* reads + writes of one pushed function (mx.h) */
enum { MAX_FN_DEPS = 4096 };
static _Thread_local int64_t tl_inline;  /* ops run inline by this thread (no atomic: hot) */
static _Thread_local site *tl_last_site; /* this thread's last queued op, site not yet named */

static void engine_shutdown(void);

static void engine_init(void) {
  const char *e = getenv("MX_ENGINE");
  if (e && (strcmp(e, "naive") == 0 || strcmp(e, "NaiveEngine") == 0))
    atomic_store(&mode, MX_ENGINE_NAIVE);
  if ((e = getenv("MX_ENGINE_INLINE_MAX"))) atomic_store(&inline_max, atoll(e));
  if ((e = getenv("MX_ENGINE_DEBUG_NAN")) && e[0] && strcmp(e, "0") != 0)
    atomic_store(&nan_check, true);
  atexit(engine_shutdown);
}

static atomic_bool inited;
/* One acquire load on the hot path; pthread_once only until the first push. */
static inline void ensure_init(void) {
  if (MX_LIKELY(atomic_load_explicit(&inited, memory_order_acquire))) return;
  pthread_once(&init_once, engine_init);
  atomic_store_explicit(&inited, true, memory_order_release);
}

/* ---- records: refcounting ------------------------------------------------------ */

static site *site_new(void) {
  site *s = malloc(sizeof *s);
  if (!s) return NULL;
  atomic_init(&s->ref, 1);
  s->where = NULL;
  return s;
}
static void site_unref(site *s) {
  if (s && atomic_fetch_sub(&s->ref, 1) == 1) { free(s->where); free(s); }
}
static void err_ref(eerr *e) { if (e) atomic_fetch_add(&e->ref, 1); }
static void err_unref(eerr *e) {
  if (e && atomic_fetch_sub(&e->ref, 1) == 1) {
    site_unref(e->site);
    free(e->msg);
    free(e);
  }
}

/* "(2, 3) float32, (3,) float32" */
static void describe_inputs(char *buf, size_t n, int nin, mx_tensor *const *in) {
  char sb[MX_SHAPE_BUF];
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < nin && k + 1 < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%s %s", i ? ", " : "",
                          mx_shape_str(sb, in[i]->ndim, in[i]->shape),
                          mx_dtype_name(in[i]->dtype));
  if (nin == 0) snprintf(buf, n, "none");
}

/* A record for a kernel failure (the thread's message holds the kernel's words). */
static eerr *err_new(const eop *op) {
  eerr *e = malloc(sizeof *e);
  if (!e) return NULL;
  char ins[1024];
  describe_inputs(ins, sizeof ins, op->nin, op->in);
  const char *km = mx_last_error();
  size_t n = strlen(km) + strlen(ins) + strlen(op->name) + 64;
  e->msg = malloc(n);
  if (e->msg) snprintf(e->msg, n, "%s [async op %s, inputs %s]", km, op->name, ins);
  atomic_init(&e->ref, 1);
  e->site = op->site;
  if (e->site) atomic_fetch_add(&e->site->ref, 1);
  e->seq = op->seq;
  e->reported = false;
  return e;
}

/* Sets the thread's message from e; returns MX_EASYNC. */
static int raise_err(eerr *e) {
  pthread_mutex_lock(&mu);
  const char *where = e->site && e->site->where ? e->site->where : NULL;
  mx_err(MX_EASYNC, "%s; queued at %s", e->msg ? e->msg : "asynchronous op failed",
         where ? where : "an unknown line (set MX_ENGINE_DEBUG=1 or queue it from Lua)");
  e->reported = true;
  pthread_mutex_unlock(&mu);
  return MX_EASYNC;
}

/* ---- variables ------------------------------------------------------------------ */

static inline mx_var *var_of(const mx_tensor *t) {
  return __atomic_load_n((mx_var **)&t->storage->engine_var, __ATOMIC_ACQUIRE);
}

/* Under mu. NULL when out of memory. */
static mx_var *var_get(mx_storage *s) {
  mx_var *v = s->engine_var;
  if (v) return v;
  v = calloc(1, sizeof *v);
  if (!v) return NULL;
  atomic_init(&v->pending, 0);
  __atomic_store_n((mx_var **)&s->engine_var, v, __ATOMIC_RELEASE);
  return v;
}

/* Frees a storage's variable when the last reference to the storage goes (no op can be
 * pending then: every queued op holds a reference); storage.c calls it through the hook
 * set at load. */
static void var_free(void *p) {
  mx_var *v = p;
  if (!v) return;
  err_unref(v->err);
  free(v);
}
__attribute__((constructor)) static void var_free_hook(void) { mx_storage_on_var_free(var_free); }

/* Under mu: e replaces v's error. */
static void var_set_err(mx_var *v, eerr *e) {
  if (v->err == e) return;
  err_ref(e);
  err_unref(v->err);
  v->err = e;
}

/* ---- kernels ---------------------------------------------------------------------- */

static bool has_nan(const mx_tensor *t) {
  /* device memory is not host-readable; the check covers CPU outputs only */
  if (mx_dev(t) != MX_CPU) return false;
  const void *p = mx_ptr(t);
  int64_t n = t->size;
  switch (t->dtype) {
  case MX_F32: { const float *x = p; for (int64_t i = 0; i < n; i++) if (x[i] != x[i]) return true; break; }
  case MX_F64: { const double *x = p; for (int64_t i = 0; i < n; i++) if (x[i] != x[i]) return true; break; }
  case MX_F16: { const uint16_t *x = p;
    for (int64_t i = 0; i < n; i++) if ((x[i] & 0x7c00) == 0x7c00 && (x[i] & 0x03ff)) return true;
    break; }
  case MX_BF16: { const uint16_t *x = p;
    for (int64_t i = 0; i < n; i++) if ((x[i] & 0x7f80) == 0x7f80 && (x[i] & 0x007f)) return true;
    break; }
  default: break;
  }
  return false;
}

/* Kernel run with the profiler or the NaN check on (kept out of the inline path). */
static int run_kernel_slow(const mx_kctx *ctx, mx_kernel_fn k, const void *params, int nin,
                           mx_tensor *const *in, int nout, mx_tensor *const *out, bool async,
                           bool prof) {
  const mx_op_def *def = ctx->def;
  int64_t t0 = prof ? mx_profiler_now() : 0;
  int rc = k(ctx, params, nin, in, nout, out);
  if (MX_UNLIKELY(rc == MX_DECLINE) && ctx->decline)
    rc = ctx->decline(ctx, params, nin, in, nout, out);
  if (atomic_load_explicit(&nan_check, memory_order_relaxed) && rc == MX_OK) {
    for (int i = 0; i < nout; i++)
      if (has_nan(out[i])) {
        rc = mx_err(MX_EINVAL, "%s: output %d contains NaN (NaN check on: MX_ENGINE_DEBUG_NAN)",
                    def->name, i + 1);
        break;
      }
  }
  if (t0) mx_profiler_record(def->name, t0, mx_profiler_now(), async, tl_worker);
  return rc;
}

static inline int run_kernel(const mx_kctx *ctx, mx_kernel_fn k, const void *params,
                             int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  bool prof = mx_profiler_on();
  if (MX_LIKELY(!prof && !atomic_load_explicit(&nan_check, memory_order_relaxed))) {
    int rc = k(ctx, params, nin, in, nout, out);
    if (MX_UNLIKELY(rc == MX_DECLINE) && ctx->decline)
      rc = ctx->decline(ctx, params, nin, in, nout, out);
    return rc;
  }
  return run_kernel_slow(ctx, k, params, nin, in, nout, out, false, prof);
}

/* A pushed function (mx_engine_push_fn), profiled like a kernel. */
static int run_fn(const eop *op, bool prof) {
  int64_t t0 = prof ? mx_profiler_now() : 0;
  /* While a pushed function runs, its thread acts as a worker: the ops it issues run
   * inline before it returns (its reads and writes are already granted; a graph
   * executor runs its nodes this way), and waits inside it do not block. */
  bool was = tl_worker;
  tl_worker = true;
  int rc = op->fn(op->arg);
  tl_worker = was;
  if (rc != MX_OK && !mx_last_error()[0]) mx_err(rc, "%s failed", op->name);
  if (t0) mx_profiler_record(op->name, t0, mx_profiler_now(), true, was);
  return rc;
}

/* ---- the ready queue and workers ---------------------------------------------------- */

/* Under mu. */
/* wake: signal a sleeping worker. Grants made by a worker finishing an op do not:
 * that worker takes the next ready op itself a moment later (and wakes a helper if
 * more than one is ready), which saves a futex wake-up per op of a dependent chain. */
static void ready_push(eop *op, bool wake) {
  int q = ready_index(&op->ctx);
  op->next = NULL;
  if (ready_tail[q]) ready_tail[q]->next = op; else ready_head[q] = op;
  ready_tail[q] = op;
  nready++;
  if (wake) pthread_cond_signal(&work_cv);
}

/* Under mu: one of op's dependencies was granted. */
static void grant(eop *op) {
  if (--op->wait == 0) ready_push(op, false);
}

/* Under mu: grant what v's queue allows now. */
static void var_advance(mx_var *v) {
  while (v->head) {
    dep *d = v->head;
    if (d->write) {
      if (v->running_write || v->running_reads) return;
      v->running_write = true;
    } else {
      if (v->running_write) return;
      v->running_reads++;
    }
    v->head = d->next;
    if (!v->head) v->tail = NULL;
    grant(d->op);
  }
}

static int thread_limit(void) {
  int t = mx_get_num_threads();
  return t < 1 ? 1 : t;
}

/* CPU worker threads (MX_CPU_WORKER_NTHREADS, mx_engine_set_num_workers; default 1,
 * MXNet's default). More workers overlap independent ops, but every worker that
 * runs an OpenMP region owns a team, and once libgomp manages more threads than
 * there are cores it stops spinning between regions: each region then pays futex
 * wake-ups (measured here: a 1M-element op 87 us with 1 worker, 165 us with 2).
 * One worker with the whole intra-op budget is the better default for chains of
 * big ops, which is what training is. */
static atomic_int worker_limit;
static int workers_wanted(void) {
  int n = atomic_load(&worker_limit);
  if (n <= 0) {
    const char *e = getenv("MX_CPU_WORKER_NTHREADS");
    n = e && atoi(e) > 0 ? atoi(e) : 1;
    atomic_store(&worker_limit, n);
  }
  return n > MAX_WORKERS ? MAX_WORKERS : n;
}
/* Ops running on workers at once: the worker count, within the thread budget. */
static int run_limit(void) {
  int w = workers_wanted(), t = thread_limit();
  return w < t ? w : t;
}

static void execute(eop *op) {
  eerr *inherited = NULL, *failed = NULL;
  for (int i = 0; i < op->ndeps && !inherited; i++) inherited = op->deps[i].var->err;
  if (!inherited) {
    /* profiled if the profiler ran when the op was queued */
    int rc = op->k ? run_kernel_slow(&op->ctx, op->k, op->params, op->nin, op->in, op->nout,
                                     op->out, true, op->prof)
                   : run_fn(op, op->prof);
    if (rc != MX_OK) {
      failed = err_new(op);
      atomic_fetch_add(&st_failed, 1);
    }
  } else {
    atomic_fetch_add(&st_skipped, 1);
  }
  eerr *e = failed ? failed : inherited;

  pthread_mutex_lock(&mu);
  for (int i = 0; i < op->ndeps; i++) {
    dep *d = &op->deps[i];
    mx_var *v = d->var;
    if (d->write) {
      if (e) var_set_err(v, e);
      v->running_write = false;
      v->pending_writes--;
    } else {
      v->running_reads--;
    }
    atomic_fetch_sub_explicit(&v->pending, 1, memory_order_release);
    var_advance(v);
  }
  mx_session *se = op->session;
  if (failed && se->nerrs < MX_SESSION_ERRS) { err_ref(failed); se->errs[se->nerrs++] = failed; }
  if (waiters) pthread_cond_broadcast(&done_cv); /* per-variable waiters */
  pthread_mutex_unlock(&mu);

  /* Drop the op's references before it stops counting as pending, so that after
   * wait_all / wait_idle every storage only the engine held is back in the pool. */
  err_unref(failed);
  if (op->free_arg) op->free_arg(op->arg);
  for (int i = 0; i < op->nin; i++) mx_tensor_release(op->in[i]);
  for (int i = 0; i < op->nout; i++) mx_tensor_release(op->out[i]);
  site_unref(op->site);
  int64_t bytes = op->bytes;
  if (op->own_name) free((void *)op->name);
  free(op);

  pthread_mutex_lock(&mu);
  se->pending--;
  total_pending--;
  pending_bytes -= bytes;
  if (waiters) pthread_cond_broadcast(&done_cv);
  pthread_mutex_unlock(&mu);
}

static void *worker_main(void *arg) {
  (void)arg;
  tl_worker = true;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!shutting_down && (!nready || running >= run_limit()))
      pthread_cond_wait(&work_cv, &mu);
    if (!nready) break; /* shutting down, nothing left */
    int q = ready_next;
    while (!ready_head[q]) q = q + 1 == NREADY ? 0 : q + 1;
    ready_next = q + 1 == NREADY ? 0 : q + 1;
    eop *op = ready_head[q];
    ready_head[q] = op->next;
    if (!ready_head[q]) ready_tail[q] = NULL;
    nready--;
    running++;
    if (nready && running < run_limit()) pthread_cond_signal(&work_cv);
    pthread_mutex_unlock(&mu);
    execute(op);
    pthread_mutex_lock(&mu);
    running--;
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

/* Under mu. */
static int start_workers(void) {
  int n = workers_wanted();
  /* workers start with every signal blocked: the application's handlers (LuaJIT's
   * profiler among them) must run on its own threads (see parallel.c) */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = 0;
  for (int i = nworkers; i < n; i++) {
    if ((rc = pthread_create(&workers[i], NULL, worker_main, NULL)) != 0) break;
    nworkers++; /* a partial start runs on the workers it has; the next push tries again */
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return nworkers ? MX_OK
                  : mx_err(MX_EDEVICE, "engine: could not start a worker thread (%s); "
                                       "mx.engine.set(\"naive\") runs ops on the calling thread",
                           strerror(rc));
}

/* At exit: drain every session's queued ops (their effects may be files), then join the
 * workers. Registered at the first push, and again (mx_engine_register_exit) after a
 * library's first use creates the statics its kernels run on (oneDNN's JIT code):
 * atexit handlers run in reverse order, so the later registration drains before those
 * statics' destructors run, while workers may still be executing their code. */
static void engine_shutdown(void) {
  if (tl_worker) return;
  mx_engine_wait_idle();
  pthread_mutex_lock(&mu);
  if (nworkers == 0) { pthread_mutex_unlock(&mu); return; }
  shutting_down = true;
  pthread_cond_broadcast(&work_cv);
  int n = nworkers;
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; i++) pthread_join(workers[i], NULL);
  pthread_mutex_lock(&mu);
  nworkers = 0;
  shutting_down = false;
  pthread_mutex_unlock(&mu);
}

void mx_engine_register_exit(void) {
  ensure_init();
  atexit(engine_shutdown);
}

/* ---- push ---------------------------------------------------------------------------- */

/* An input or output already carries an error: skip the op, pass the error on. */
static int skip_with(eerr *e, int nout, mx_tensor *const *out) {
  pthread_mutex_lock(&mu);
  for (int i = 0; i < nout; i++) {
    mx_var *v = var_get(out[i]->storage);
    if (v) var_set_err(v, e);
  }
  pthread_mutex_unlock(&mu);
  atomic_fetch_add(&st_skipped, 1);
  return MX_OK;
}

static int push_async(const mx_kctx *ctx, const char *name, mx_kernel_fn k,
                      const void *params, size_t psize, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out, int (*fn)(void *), void *arg,
                      void (*free_arg)(void *)) {
  int nt = nin + nout;
  size_t sz = sizeof(eop) + (size_t)nt * sizeof(dep) + (size_t)nt * sizeof(mx_tensor *) + psize;
  eop *op = malloc(sz);
  if (!op) return mx_err(MX_ENOMEM, "%s: out of host memory queuing the op", name);
  op->name = name;
  op->own_name = false;
  op->k = k;
  if (ctx) op->ctx = *ctx; else memset(&op->ctx, 0, sizeof op->ctx);
  op->fn = fn;
  op->arg = arg;
  op->free_arg = free_arg;
  op->session = mx_session_cur();
  op->nin = nin;
  op->nout = nout;
  op->in = (mx_tensor **)(op->deps + nt);
  op->out = op->in + nin;
  op->params = psize ? (void *)(op->out + nout) : NULL;
  if (psize) memcpy(op->params, params, psize);
  op->wait = 0;
  op->ndeps = 0;
  op->bytes = 0;
  op->prof = mx_profiler_on();
  for (int i = 0; i < nout; i++) op->bytes += (int64_t)mx_nbytes(out[i]);
  op->site = site_new();
  for (int i = 0; i < nin; i++) { op->in[i] = in[i]; mx_tensor_retain(in[i]); }
  for (int i = 0; i < nout; i++) { op->out[i] = out[i]; mx_tensor_retain(out[i]); }

  /* One dependency per distinct storage; a storage both read and written is a write.
   * Ops have at most 2 * 64 tensors; pushed functions (a whole graph) up to
   * MAX_FN_DEPS, whose lists live on the heap. */
  mx_storage *st_small[2 * 64], **st = st_small;
  bool wr_small[2 * 64], *wr = wr_small;
  mx_var *vs_small[2 * 64], **vs = vs_small;
  if (nt > 2 * 64) {
    st = malloc((size_t)nt * sizeof *st);
    wr = malloc((size_t)nt * sizeof *wr);
    vs = malloc((size_t)nt * sizeof *vs);
    if (!st || !wr || !vs) {
      free(st);
      free(wr);
      free(vs);
      for (int i = 0; i < nt; i++) mx_tensor_release(i < nin ? in[i] : out[i - nin]);
      site_unref(op->site);
      free(op);
      return mx_err(MX_ENOMEM, "%s: out of host memory queuing the op", name);
    }
  }
  int nd = 0;
  for (int i = 0; i < nt; i++) {
    mx_storage *s = i < nin ? in[i]->storage : out[i - nin]->storage;
    bool w = i >= nin;
    int j = 0;
    while (j < nd && st[j] != s) j++;
    if (j == nd) { st[nd] = s; wr[nd] = w; nd++; }
    else if (w) wr[j] = true;
  }

  pthread_mutex_lock(&mu);
  if (total_pending >= MAX_PENDING_OPS || pending_bytes >= MAX_PENDING_BYTES) {
    waiters++;
    while (total_pending >= MAX_PENDING_OPS / 2 ||
           (pending_bytes >= MAX_PENDING_BYTES / 2 && total_pending > 0))
      pthread_cond_wait(&done_cv, &mu);
    waiters--;
  }
  if (nworkers < workers_wanted()) {
    int rc = start_workers();
    if (rc && !nworkers) {
      pthread_mutex_unlock(&mu);
      if (st != st_small) {
        free(st);
        free(wr);
        free(vs);
      }
      for (int i = 0; i < nt; i++) mx_tensor_release(i < nin ? in[i] : out[i - nin]);
      site_unref(op->site);
      free(op);
      return rc;
    }
  }
  for (int j = 0; j < nd; j++) {
    if (!(vs[j] = var_get(st[j]))) { /* before any state changes: nothing to undo */
      pthread_mutex_unlock(&mu);
      if (st != st_small) {
        free(st);
        free(wr);
        free(vs);
      }
      for (int i = 0; i < nt; i++) mx_tensor_release(i < nin ? in[i] : out[i - nin]);
      site_unref(op->site);
      free(op);
      return mx_err(MX_ENOMEM, "%s: out of host memory queuing the op", name);
    }
  }
  for (int j = 0; j < nd; j++) {
    mx_var *v = vs[j];
    dep *d = &op->deps[op->ndeps++];
    d->next = NULL;
    d->op = op;
    d->var = v;
    d->write = wr[j];
    atomic_fetch_add_explicit(&v->pending, 1, memory_order_relaxed);
    if (d->write) v->pending_writes++;
    bool now = !v->head && !v->running_write && (!d->write || v->running_reads == 0);
    if (now) {
      if (d->write) v->running_write = true; else v->running_reads++;
    } else {
      if (v->tail) v->tail->next = d; else v->head = d;
      v->tail = d;
      op->wait++;
    }
  }
  /* The thread's reference to the site, taken before a worker may finish and free
   * the op (as soon as it is ready and mu is released). */
  site *si = op->site;
  if (si) atomic_fetch_add(&si->ref, 1);
  total_pending++;
  op->session->pending++;
  pending_bytes += op->bytes;
  op->seq = ++push_seq;
  if (op->wait == 0) ready_push(op, true);
  pthread_mutex_unlock(&mu);
  if (st != st_small) {
    free(st);
    free(wr);
    free(vs);
  }

  atomic_fetch_add(&st_queued, 1);
  site_unref(tl_last_site);
  tl_last_site = si;
  return MX_OK;
}

/* Ops that must not be queued: tensors wrapping memory the caller owns with no
 * deleter (a Lua buffer the GC may free once the tensor's box is gone) and device
 * tensors (their kernels are already asynchronous on the device's stream). */
static inline bool must_sync(const mx_storage *s) {
  return MX_UNLIKELY(s->dev_type != MX_CPU || (s->external && !s->deleter));
}

/* The one push path of ops (k != NULL, with ctx) and pushed functions (fn). */
static int push(const mx_kctx *ctx, const char *name, mx_kernel_fn k, const void *params,
                size_t params_size, int nin, mx_tensor *const *in, int nout,
                mx_tensor *const *out, int (*fn)(void *), void *arg, void (*free_arg)(void *)) {
  ensure_init();
  bool ready = true, sync = false, shared = false;
  eerr *e = NULL;
  int64_t work = 0;
  for (int i = 0; i < nin; i++) {
    mx_var *v = var_of(in[i]);
    if (MX_UNLIKELY(v != NULL)) {
      if (atomic_load_explicit(&v->pending, memory_order_acquire)) ready = false;
      else if (v->err) e = v->err;
    }
    sync |= must_sync(in[i]->storage);
    shared |= __atomic_load_n(&in[i]->storage->shared, __ATOMIC_RELAXED);
    work += in[i]->size;
  }
  for (int i = 0; i < nout; i++) {
    mx_var *v = var_of(out[i]);
    if (MX_UNLIKELY(v != NULL)) {
      if (atomic_load_explicit(&v->pending, memory_order_acquire)) ready = false;
      else if (v->err) e = v->err;
    }
    sync |= must_sync(out[i]->storage);
    shared |= __atomic_load_n(&out[i]->storage->shared, __ATOMIC_RELAXED);
    work += out[i]->size;
  }
  int m = atomic_load_explicit(&mode, memory_order_relaxed);
  if (MX_UNLIKELY(shared) && !tl_worker && !sync) {
    /* A storage other states use too: the inline path's "nothing pending" is only this
     * thread's view (another thread may be inside an inline kernel on it), so the op is
     * ordered through the storage's variable like any queued op, whichever state holds
     * the tensor. In naive mode the caller still sees it done on return. (A worker runs
     * a pushed function's ops inline: their tensors are granted to it already.) */
    int rc = push_async(ctx, name, k, params, params_size, nin, in, nout, out, fn, arg, free_arg);
    for (int i = 0; rc == MX_OK && m == MX_ENGINE_NAIVE && i < nout; i++)
      rc = mx_engine_wait_storage(out[i]->storage, false);
    return rc;
  }
  bool now = false;
  if (ready) {
    if (MX_UNLIKELY(e != NULL)) {
      if (free_arg) free_arg(arg);
      return skip_with(e, nout, out);
    }
    /* A ready op also runs inline, whatever its size, when nothing is queued and
     * there is a single worker: handing it over would only add a thread wake-up
     * (the caller's next op depends on it or has to wait for the worker anyway).
     * Measured on the MLP example: 47k samples/s this way, 35k when queued. With
     * more workers, queueing buys overlap of independent ops and is kept; an
     * inline limit of 0 (set_inline_max(0)) queues everything. */
    int64_t imax = atomic_load_explicit(&inline_max, memory_order_relaxed);
    now = m == MX_ENGINE_NAIVE || tl_worker || sync || work <= imax ||
          (imax > 0 && atomic_load_explicit(&total_pending, memory_order_relaxed) == 0 &&
           workers_wanted() == 1);
  } else if (m == MX_ENGINE_NAIVE || tl_worker || sync) {
    /* Ops still queued on these tensors (from threaded mode, or before a sync-only
     * op): wait for them, then run here. */
    int rc = MX_OK;
    for (int i = 0; i < nin && !rc; i++) rc = mx_engine_wait_storage(in[i]->storage, true);
    for (int i = 0; i < nout && !rc; i++) rc = mx_engine_wait_storage(out[i]->storage, false);
    if (rc) {
      if (free_arg) free_arg(arg);
      return rc;
    }
    now = true;
  }
  if (now) {
    tl_inline++;
    if (MX_LIKELY(k != NULL)) return run_kernel(ctx, k, params, nin, in, nout, out);
    eop tmp = {.name = name, .fn = fn, .arg = arg};
    int rc = run_fn(&tmp, mx_profiler_on());
    if (free_arg) free_arg(arg);
    /* returned at once, not at a sync point: the message must still name the function
     * (a queued one's does, through its async record) */
    if (rc != MX_OK && !strstr(mx_last_error(), name)) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", mx_last_error());
      mx_err(rc, "%s: %s", name, msg);
    }
    return rc;
  }
  return push_async(ctx, name, k, params, params_size, nin, in, nout, out, fn, arg, free_arg);
}

int mx_engine_push(const mx_kctx *ctx, mx_kernel_fn k, const void *params, size_t params_size,
                   int nin, mx_tensor *const *in, int nout, mx_tensor *const *out) {
  return push(ctx, ctx->def->name, k, params, params_size, nin, in, nout, out, NULL, NULL, NULL);
}

int mx_engine_push_fn(const char *name, int (*fn)(void *arg), void *arg,
                      void (*free_arg)(void *arg), int nread, mx_tensor *const *reads,
                      int nwrite, mx_tensor *const *writes, int dev_type, int dev_id,
                      void *stream) {
  int rc = MX_OK;
  if (!fn) rc = mx_err(MX_EINVAL, "engine_push_fn: fn is NULL");
  else if (nread < 0 || nwrite < 0 || nread + nwrite > MAX_FN_DEPS)
    rc = mx_err(MX_EINVAL, "engine_push_fn: %d reads and %d writes (0..%d in all)", nread, nwrite,
                MAX_FN_DEPS);
  for (int i = 0; !rc && i < nread + nwrite; i++) {
    mx_tensor *t = i < nread ? reads[i] : writes[i - nread];
    if (!t) rc = mx_err(MX_EINVAL, "engine_push_fn: %s %d is NULL", i < nread ? "read" : "write",
                        i < nread ? i + 1 : i - nread + 1);
  }
  if (!rc) rc = mx_device_check("engine_push_fn", dev_type, dev_id);
  if (rc) {
    if (free_arg) free_arg(arg);
    return rc;
  }
  /* the op records its device and stream (ctx), as ops do, so that the engine can come to
   * wait on the stream's completion instead of the function's return */
  mx_kctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.dev_type = dev_type;
  ctx.dev_id = dev_id;
  ctx.stream = stream;
  ctx.session = mx_session_cur();
  const char *nm = name ? name : "pushed function";
  return push(&ctx, nm, NULL, NULL, 0, nread, reads, nwrite, writes, fn, arg, free_arg);
}

/* ---- waits ------------------------------------------------------------------------------ */

int mx_engine_wait_storage(mx_storage *s, bool read) {
  if (tl_worker) return MX_OK;
  mx_var *v = __atomic_load_n((mx_var **)&s->engine_var, __ATOMIC_ACQUIRE);
  if (!v) return MX_OK;
  if (atomic_load_explicit(&v->pending, memory_order_acquire)) {
    pthread_mutex_lock(&mu);
    waiters++;
    while (read ? v->pending_writes > 0 : atomic_load(&v->pending) > 0)
      pthread_cond_wait(&done_cv, &mu);
    waiters--;
    pthread_mutex_unlock(&mu);
  }
  eerr *e = v->err;
  return e ? raise_err(e) : MX_OK;
}

void mx_engine_wait_idle(void) {
  if (tl_worker) return;
  pthread_mutex_lock(&mu);
  waiters++;
  while (total_pending > 0) pthread_cond_wait(&done_cv, &mu);
  waiters--;
  pthread_mutex_unlock(&mu);
}

int mx_engine_wait_all(void) {
  if (tl_worker) return MX_OK;
  mx_session *se = mx_session_cur();
  pthread_mutex_lock(&mu);
  waiters++;
  while (se->pending > 0) pthread_cond_wait(&done_cv, &mu);
  waiters--;
  eerr *first = NULL; /* the earliest queued of the session's unreported failures */
  for (int i = 0; i < se->nerrs; i++)
    if (!se->errs[i]->reported && (!first || se->errs[i]->seq < first->seq)) first = se->errs[i];
  for (int i = 0; i < se->nerrs; i++)
    if (se->errs[i] != first) err_unref(se->errs[i]);
  se->nerrs = 0;
  pthread_mutex_unlock(&mu);
  if (!first) return MX_OK;
  int rc = raise_err(first);
  err_unref(first);
  return rc;
}

/* A session's teardown: its ops drained, the errors the engine recorded for it dropped,
 * then the session itself let go (session.c reclaims it once no storage holds it). */
void mx_session_free(mx_session *se) {
  if (!se || se == mx_session_default()) return;
  mx_session *prev = mx_session_current();
  mx_session_bind(se); /* wait for (and forget the errors of) se's ops, not the caller's */
  mx_engine_wait_all();
  pthread_mutex_lock(&mu);
  for (int i = 0; i < se->nerrs; i++) err_unref(se->errs[i]);
  se->nerrs = 0;
  pthread_mutex_unlock(&mu);
  mx_session_bind(prev == se ? NULL : prev);
  mx_session_release(se);
}

int mx_tensor_wait_to_read(mx_tensor *t) {
  if (!t) return mx_err(MX_EINVAL, "wait_to_read: tensor is NULL");
  return mx_engine_wait_storage(t->storage, true);
}

int mx_tensor_wait_to_write(mx_tensor *t) {
  if (!t) return mx_err(MX_EINVAL, "wait_to_write: tensor is NULL");
  return mx_engine_wait_storage(t->storage, false);
}

/* ---- the binding's side ------------------------------------------------------------------ */

bool mx_engine_queued(void) { return tl_last_site != NULL; }

void mx_engine_set_site(const char *where) {
  site *s = tl_last_site;
  if (!s) return;
  tl_last_site = NULL;
  char *w = where ? strdup(where) : NULL;
  pthread_mutex_lock(&mu);
  free(s->where);
  s->where = w;
  pthread_mutex_unlock(&mu);
  site_unref(s);
}

/* ---- settings ------------------------------------------------------------------------------- */

int mx_engine_set_mode(int m) {
  if (m != MX_ENGINE_NAIVE && m != MX_ENGINE_THREADED)
    return mx_err(MX_EINVAL, "engine: unknown mode %d (0 naive, 1 threaded)", m);
  ensure_init();
  int rc = mx_engine_wait_all();
  atomic_store(&mode, m);
  return rc;
}

int mx_engine_set_num_workers(int n) {
  if (n < 1 || n > MAX_WORKERS)
    return mx_err(MX_EINVAL, "engine: worker count must be 1..%d, got %d", MAX_WORKERS, n);
  ensure_init();
  pthread_mutex_lock(&mu);
  atomic_store(&worker_limit, n); /* threads already started beyond n just idle */
  pthread_cond_broadcast(&work_cv);
  pthread_mutex_unlock(&mu);
  return MX_OK;
}

int mx_engine_get_num_workers(void) { return workers_wanted(); }

int mx_engine_get_mode(void) {
  ensure_init();
  return atomic_load(&mode);
}

void mx_engine_set_inline_max(int64_t n) {
  ensure_init();
  atomic_store(&inline_max, n);
}

int64_t mx_engine_get_inline_max(void) {
  ensure_init();
  return atomic_load(&inline_max);
}

void mx_engine_set_nan_check(bool on) {
  ensure_init();
  atomic_store(&nan_check, on);
}

bool mx_engine_get_nan_check(void) {
  ensure_init();
  return atomic_load(&nan_check);
}

void mx_engine_get_stats(mx_engine_stats *out) {
  memset(out, 0, sizeof *out);
  out->ops_inline = tl_inline;
  out->ops_queued = atomic_load(&st_queued);
  out->ops_skipped = atomic_load(&st_skipped);
  out->ops_failed = atomic_load(&st_failed);
  pthread_mutex_lock(&mu);
  out->pending = total_pending;
  out->workers = nworkers;
  pthread_mutex_unlock(&mu);
}

/* ---- threads ----------------------------------------------------------------------------------- */

bool mx_engine_on_worker(void) { return tl_worker; }

int mx_engine_intra_threads(void) { return mx_threads_available(); }
