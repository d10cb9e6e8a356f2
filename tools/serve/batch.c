/* batch.c — a version's queue, dynamic batching and the proxy threads.
 *
 * Each worker process has a proxy thread here. It takes the oldest job and then keeps
 * taking jobs until it holds batch_size of them or max_batch_delay has passed since the
 * first one was queued (a job that already waited that long goes at once with whatever
 * is queued), sends the batch to its process and splits the answer back per request.
 * Several proxies of one version share its queue, so a busy worker never holds up jobs
 * another could take. A connection sends its next request only after its answer (HTTP/1.1
 * without pipelining, and libmicrohttpd reads a pipelined request only after answering the
 * one before), so answers keep each connection's order.
 *
 * Faults: a job whose deadline passes is answered 504 at once, queued or running; when
 * every job of a running batch has expired the worker is killed (it is stuck) and
 * restarted. A worker process that dies has its batch answered 500 and is restarted
 * with a growing delay; the handler raising answers the batch 500 with its message and
 * the worker keeps serving. */
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 4096

static void abstime(double at_mono, struct timespec *ts) {
  /* the condition variables use CLOCK_MONOTONIC (models.c initialises them so) */
  ts->tv_sec = (time_t)at_mono;
  ts->tv_nsec = (long)((at_mono - (double)ts->tv_sec) * 1e9);
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

void mxs_job_free(mxs_job *j) {
  if (!j) return;
  if (j->v) mxs_version_unref(j->v);
  free(j->meta);
  free(j->blob);
  free(j->ctype);
  free(j->body);
  free(j);
}

static void set_answer(mxs_job *j, int status, const char *ctype, char *body, size_t len) {
  free(j->ctype);
  free(j->body);
  j->status = status;
  j->ctype = mxs_strdup(ctype ? ctype : "application/octet-stream");
  j->body = body;
  j->body_len = len;
  j->retry_after = status == 503 ? 1 : 0;
  if (j->v) {
    atomic_fetch_add_explicit(&j->v->m.status[mxs_code_index(status)], 1, memory_order_relaxed);
    mxs_hist_observe(&j->v->m.h[MXS_H_LATENCY], MXS_H_LATENCY, mxs_now() - j->t_arrive);
  }
}

void mxs_job_answer(mxs_job *j, int status, const char *ctype, char *body, size_t len) {
  set_answer(j, status, ctype, body, len);
  if (j->suspended) {
    atomic_store(&j->done, 1);
    mxs_http_resume(j);
  }
}

static char *error_body(const mxs_job *j, int status, const char *msg, size_t *len) {
  json_t *o;
  if (j->kind == MXS_KIND_V2) {
    o = json_pack("{s:s}", "error", msg);
  } else {
    const char *type = status == 504 ? "RequestTimeoutException"
                       : status == 503 ? "ServiceUnavailableException"
                       : status == 413 ? "RequestEntityTooLargeException"
                       : status == 400 ? "BadRequestException"
                       : status > 400 && status < 500 ? "ClientErrorException"
                       : "InternalServerException";
    o = json_pack("{s:i,s:s,s:s}", "code", status, "type", type, "message", msg);
  }
  char *t = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  *len = t ? strlen(t) : 0;
  return t;
}

void mxs_job_fail(mxs_job *j, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = mxs_vprintf(fmt, ap);
  va_end(ap);
  size_t len;
  char *body = error_body(j, status, msg ? msg : "error", &len);
  free(msg);
  mxs_job_answer(j, status, "application/json", body, len);
}

int mxs_active_workers(mxs_version *v) {
  int n = 0;
  for (int i = 0; i < v->nworkers; i++) n += !atomic_load(&v->workers[i]->stop);
  return n;
}

int mxs_enqueue_suspend(mxs_version *v, mxs_job *j, void (*suspend)(void *), void *arg) {
  pthread_mutex_lock(&v->mu);
  int st = 0;
  if (v->draining) {
    st = 1;
  } else if (mxs_active_workers(v) == 0) {
    st = 503;
    mxs_job_fail(j, 503, "no worker is available to serve model %s version %s (scale it up: PUT "
                 "/models/%s?min_worker=1)", v->name, v->version, v->name);
  } else if (atomic_load(&v->state) == MXS_V_FAILED) {
    st = 503;
    mxs_job_fail(j, 503, "model %s version %s has no worker running: %s", v->name, v->version,
                 v->fail_msg);
  } else if (v->qlen >= v->queue_cap) {
    st = 503;
    atomic_fetch_add_explicit(&v->m.rejected_full, 1, memory_order_relaxed);
    mxs_job_fail(j, 503, "the queue of model %s version %s is full (%d requests): retry later",
                 v->name, v->version, v->queue_cap);
  } else {
    suspend(arg);
    j->suspended = 1;
    j->t_enqueue = mxs_now();
    if (j->t_deadline <= 0) j->t_deadline = j->t_enqueue + v->deadline_ms / 1000.0;
    v->q[(v->qhead + v->qlen) % v->queue_cap] = j;
    v->qlen++;
    pthread_cond_broadcast(&v->cv);
  }
  pthread_mutex_unlock(&v->mu);
  return st;
}

static mxs_job *pop(mxs_version *v) {
  mxs_job *j = v->q[v->qhead];
  v->qhead = (v->qhead + 1) % v->queue_cap;
  v->qlen--;
  return j;
}

static void expire(mxs_version *v, mxs_job *j, const char *where) {
  atomic_fetch_add_explicit(&v->m.deadline_expired, 1, memory_order_relaxed);
  mxs_job_fail(j, 504, "the request's deadline (%d ms) passed while it %s", v->deadline_ms, where);
}

/* The next batch for w: blocks until there is work; 0 when w stops or the version is
 * drained. */
static int take_batch(mxs_worker *w, mxs_job **out, int cap) {
  mxs_version *v = w->v;
  pthread_mutex_lock(&v->mu);
  int n = 0;
  for (;;) {
    while (v->qlen == 0 && !atomic_load(&w->stop) && !v->draining) pthread_cond_wait(&v->cv, &v->mu);
    if (v->qlen == 0 || atomic_load(&w->stop)) break;
    double now = mxs_now();
    mxs_job *j = pop(v);
    if (now > j->t_deadline) {
      expire(v, j, "was queued");
      continue;
    }
    out[n++] = j;
    double until = j->t_enqueue + v->max_batch_delay_ms / 1000.0;
    int bs = v->batch_size < cap ? v->batch_size : cap;
    while (n < bs) {
      if (v->qlen) {
        mxs_job *k = pop(v);
        if (mxs_now() > k->t_deadline) expire(v, k, "was queued");
        else out[n++] = k;
        continue;
      }
      if (atomic_load(&w->stop) || v->draining || mxs_now() >= until) break;
      struct timespec ts;
      abstime(until, &ts);
      pthread_cond_timedwait(&v->cv, &v->mu, &ts);
    }
    break;
  }
  v->inflight += n;
  pthread_mutex_unlock(&v->mu);
  return n;
}

static void batch_done(mxs_version *v, int n) {
  pthread_mutex_lock(&v->mu);
  v->inflight -= n;
  pthread_cond_broadcast(&v->state_cv);
  pthread_mutex_unlock(&v->mu);
}

/* 0: the worker can go on; -1: its process is gone or was killed (restart it). */
static int run_batch(mxs_worker *w, mxs_job **jobs, int n, uint64_t id) {
  mxs_version *v = w->v;
  double t0 = mxs_now();
  for (int i = 0; i < n; i++) mxs_hist_observe(&v->m.h[MXS_H_QUEUE], MXS_H_QUEUE, t0 - jobs[i]->t_enqueue);
  mxs_hist_observe(&v->m.h[MXS_H_BATCH], MXS_H_BATCH, n);
  char msg[400] = "";
  if (mxs_wproc_send(w, id, jobs, n)) {
    mxs_wproc_reap(w, msg, sizeof msg);
    atomic_fetch_add_explicit(&v->m.worker_crashes, 1, memory_order_relaxed);
    for (int i = 0; i < n; i++)
      mxs_job_fail(jobs[i], 500, "worker %d of model %s died (%s) before running this request; "
                   "it is being restarted", w->id, v->name, msg);
    return -1;
  }
  mxs_batch_out outs[MAX_BATCH];
  int open = n;
  int live[MAX_BATCH];
  for (int i = 0; i < n; i++) live[i] = 1;
  for (;;) {
    double dl = 0;
    for (int i = 0; i < n; i++)
      if (live[i] && (dl == 0 || jobs[i]->t_deadline < dl)) dl = jobs[i]->t_deadline;
    char *err = NULL;
    memset(outs, 0, sizeof outs[0] * (size_t)n);
    int raised = 0;
    int rc = mxs_wproc_recv(w, id, n, outs, &raised, &err, dl, msg, sizeof msg);
    if (rc == -2) {
      double now = mxs_now();
      for (int i = 0; i < n; i++)
        if (live[i] && jobs[i]->t_deadline <= now) {
          expire(v, jobs[i], "ran in the worker");
          live[i] = 0;
          open--;
        }
      if (open > 0) continue;
      mxs_log("model %s version %s: worker %d (pid %d) ran a batch past every request's deadline: "
              "killed and restarted", v->name, v->version, w->id, (int)atomic_load(&w->pid));
      pid_t pid = atomic_load(&w->pid);
      if (pid > 0) kill(pid, SIGKILL);
      mxs_wproc_reap(w, msg, sizeof msg);
      return -1;
    }
    double dt = mxs_now() - t0;
    if (rc == 0) {
      mxs_hist_observe(&v->m.h[MXS_H_INFER], MXS_H_INFER, dt);
      if (raised) atomic_fetch_add_explicit(&v->m.handler_errors, 1, memory_order_relaxed);
      for (int i = 0; i < n; i++) {
        if (live[i]) mxs_job_answer(jobs[i], outs[i].status, outs[i].ctype, outs[i].body, outs[i].body_len);
        else free(outs[i].body);
        free(outs[i].ctype);
      }
      return 0;
    }
    if (rc == 1) {
      mxs_hist_observe(&v->m.h[MXS_H_INFER], MXS_H_INFER, dt);
      atomic_fetch_add_explicit(&v->m.handler_errors, 1, memory_order_relaxed);
      for (int i = 0; i < n; i++)
        if (live[i]) mxs_job_fail(jobs[i], 500, "%s", err ? err : "the handler failed");
      free(err);
      return 0;
    }
    atomic_fetch_add_explicit(&v->m.worker_crashes, 1, memory_order_relaxed);
    mxs_log("model %s version %s: worker %d %s while running a batch of %d; restarting it", v->name,
            v->version, w->id, msg, n);
    for (int i = 0; i < n; i++)
      if (live[i])
        mxs_job_fail(jobs[i], 500, "worker %d of model %s %s while running this request's batch; "
                     "it is being restarted", w->id, v->name, msg);
    return -1;
  }
}

static void sleep_unless_stopped(mxs_worker *w, double secs) {
  double until = mxs_now() + secs;
  while (!atomic_load(&w->stop) && !w->v->draining && mxs_now() < until) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

void *mxs_worker_thread(void *arg) {
  mxs_worker *w = arg;
  mxs_version *v = w->v;
  static _Atomic uint64_t batch_ids;
  double backoff = 0.25;
  mxs_job **jobs = malloc(sizeof *jobs * MAX_BATCH);
  while (jobs && !atomic_load(&w->stop)) {
    pthread_mutex_lock(&v->mu);
    int drained = v->draining && v->qlen == 0;
    pthread_mutex_unlock(&v->mu);
    if (drained) break;
    atomic_store(&w->state, MXS_W_STARTING);
    char msg[512];
    if (mxs_wproc_start(w, msg, sizeof msg)) {
      pthread_mutex_lock(&v->mu);
      snprintf(v->fail_msg, sizeof v->fail_msg, "%s", msg);
      snprintf(w->last_error, sizeof w->last_error, "%s", msg);
      int ready = 0;
      for (int i = 0; i < v->nworkers; i++) {
        int st = atomic_load(&v->workers[i]->state);
        ready += st == MXS_W_READY || st == MXS_W_BUSY;
      }
      if (!ready && atomic_load(&v->state) != MXS_V_STOPPING) atomic_store(&v->state, MXS_V_FAILED);
      pthread_cond_broadcast(&v->state_cv);
      pthread_mutex_unlock(&v->mu);
      mxs_log("model %s version %s: worker %d failed to start: %s (retry in %.2g s)", v->name,
              v->version, w->id, msg, backoff);
      atomic_store(&w->state, MXS_W_RESTARTING);
      atomic_fetch_add(&w->restarts, 1);
      sleep_unless_stopped(w, backoff);
      backoff = backoff * 2 > 10 ? 10 : backoff * 2;
      continue;
    }
    backoff = 0.25;
    pthread_mutex_lock(&v->mu);
    atomic_store(&w->state, MXS_W_READY);
    if (atomic_load(&v->state) != MXS_V_STOPPING) atomic_store(&v->state, MXS_V_READY);
    pthread_cond_broadcast(&v->state_cv);
    pthread_mutex_unlock(&v->mu);
    int alive = 1;
    for (;;) {
      int n = take_batch(w, jobs, MAX_BATCH);
      if (n == 0) break;
      atomic_store(&w->state, MXS_W_BUSY);
      int rc = run_batch(w, jobs, n, atomic_fetch_add(&batch_ids, 1) + 1);
      atomic_store(&w->state, MXS_W_READY);
      batch_done(v, n);
      if (rc) {
        alive = 0;
        atomic_store(&w->state, MXS_W_RESTARTING);
        atomic_fetch_add(&w->restarts, 1);
        break;
      }
    }
    if (alive) {
      mxs_wproc_stop(w, 5.0);
      break;
    }
  }
  free(jobs);
  pthread_mutex_lock(&v->mu);
  atomic_store(&w->state, MXS_W_STOPPED);
  pthread_cond_broadcast(&v->state_cv);
  pthread_mutex_unlock(&v->mu);
  return NULL;
}

int mxs_worker_add(mxs_version *v) {
  if (v->nworkers == v->wcap) {
    int cap = v->wcap ? v->wcap * 2 : 4;
    mxs_worker **nw = realloc(v->workers, (size_t)cap * sizeof *nw);
    if (!nw) return -1;
    v->workers = nw;
    v->wcap = cap;
  }
  mxs_worker *w = calloc(1, sizeof *w);
  if (!w) return -1;
  w->v = v;
  w->id = v->next_worker_id++;
  w->fd = -1;
  atomic_init(&w->state, MXS_W_STARTING);
  if (pthread_create(&w->th, NULL, mxs_worker_thread, w)) {
    free(w);
    return -1;
  }
  v->workers[v->nworkers++] = w;
  return 0;
}

void mxs_worker_stop_one(mxs_version *v) {
  for (int i = v->nworkers - 1; i >= 0; i--)
    if (!atomic_load(&v->workers[i]->stop)) {
      atomic_store(&v->workers[i]->stop, 1);
      pthread_cond_broadcast(&v->cv);
      return;
    }
}

void mxs_worker_reap(mxs_version *v) {
  for (;;) {
    mxs_worker *w = NULL;
    pthread_mutex_lock(&v->mu);
    for (int i = 0; i < v->nworkers; i++)
      if (atomic_load(&v->workers[i]->state) == MXS_W_STOPPED) {
        w = v->workers[i];
        v->workers[i] = v->workers[--v->nworkers];
        break;
      }
    pthread_mutex_unlock(&v->mu);
    if (!w) return;
    pthread_join(w->th, NULL);
    free(w);
  }
}
