/* queue.c — bounded blocking queues of tensor handles between threads (mx.h "data loader
 * queues"; docs/design/data.md "Worker threads").
 *
 * The DataLoader's main Lua state pushes jobs (an int64 index tensor) and worker
 * states push results (batch tensors, or an error text) through these. Each Lua state
 * polls its own queue through the FFI: nothing here calls into Lua, and a handle is
 * moved, not copied (push takes over the pusher's references, pop hands them on).
 * A ring under one mutex with two condition variables; waits are bounded (timeouts on
 * CLOCK_MONOTONIC) so a stuck peer is an error, never a hang. */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct mx_queue {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  int cap, head, count, closed;
  atomic_int refs;
  mx_queue_item *ring;
};

static void item_clear(mx_queue_item *it) {
  for (int k = 0; k < it->n && k < MX_QUEUE_MAX_FIELDS; k++) {
    mx_tensor_release(it->t[k]);
    it->t[k] = NULL;
  }
  free(it->msg);
  it->msg = NULL;
  it->n = 0;
}

mx_queue *mx_queue_new(int capacity) {
  if (capacity < 1) capacity = 1;
  mx_queue *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->ring = calloc((size_t)capacity, sizeof *q->ring);
  if (!q->ring) { free(q); return NULL; }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  /* monotonic: a wall-clock jump must not shorten or stretch a timeout */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->not_empty, &ca);
  pthread_cond_init(&q->not_full, &ca);
  pthread_condattr_destroy(&ca);
  q->cap = capacity;
  atomic_init(&q->refs, 1);
  return q;
}

void mx_queue_retain(mx_queue *q) {
  if (q) atomic_fetch_add(&q->refs, 1);
}

void mx_queue_release(mx_queue *q) {
  if (!q || atomic_fetch_sub(&q->refs, 1) != 1) return;
  /* last owner: items nobody popped give their references back */
  for (int i = 0; i < q->count; i++) item_clear(&q->ring[(q->head + i) % q->cap]);
  pthread_cond_destroy(&q->not_empty);
  pthread_cond_destroy(&q->not_full);
  pthread_mutex_destroy(&q->mu);
  free(q->ring);
  free(q);
}

void mx_queue_close(mx_queue *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->closed = 1;
  pthread_cond_broadcast(&q->not_empty);
  pthread_cond_broadcast(&q->not_full);
  pthread_mutex_unlock(&q->mu);
}

int mx_queue_count(mx_queue *q) {
  if (!q) return 0;
  pthread_mutex_lock(&q->mu);
  int n = q->count;
  pthread_mutex_unlock(&q->mu);
  return n;
}

static void deadline(struct timespec *ts, double timeout_s) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  if (timeout_s > 1e9) timeout_s = 1e9;
  time_t sec = (time_t)timeout_s;
  long ns = (long)((timeout_s - (double)sec) * 1e9);
  ts->tv_sec += sec;
  ts->tv_nsec += ns;
  if (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}

/* Waits on cv until ready(q) or closed or the deadline; 0 ready, 1 timed out. */
static int wait_for(mx_queue *q, pthread_cond_t *cv, int want_items, double timeout_s) {
  struct timespec ts;
  if (timeout_s > 0) deadline(&ts, timeout_s);
  for (;;) {
    int ready = want_items ? q->count > 0 : q->count < q->cap;
    if (ready || q->closed) return 0;
    if (timeout_s <= 0) return 1;
    if (pthread_cond_timedwait(cv, &q->mu, &ts) == ETIMEDOUT) {
      ready = want_items ? q->count > 0 : q->count < q->cap;
      return (ready || q->closed) ? 0 : 1;
    }
  }
}

int mx_queue_push(mx_queue *q, const mx_queue_item *item, double timeout_s) {
  if (!q || !item) return mx_err(MX_EINVAL, "mx_queue_push: NULL queue or item");
  if (item->n < 0 || item->n > MX_QUEUE_MAX_FIELDS)
    return mx_err(MX_EINVAL, "mx_queue_push: %d tensors (at most %d per item)", item->n,
                  MX_QUEUE_MAX_FIELDS);
  char *msg = NULL;
  if (item->msg) {
    msg = strdup(item->msg);
    if (!msg) return mx_err(MX_ENOMEM, "mx_queue_push: out of memory for the message");
  }
  pthread_mutex_lock(&q->mu);
  int timed_out = wait_for(q, &q->not_full, 0, timeout_s);
  if (q->closed || timed_out) {
    int closed = q->closed;
    pthread_mutex_unlock(&q->mu);
    free(msg);
    if (closed) return MX_QUEUE_CLOSED;
    return MX_QUEUE_TIMEOUT;
  }
  mx_queue_item *slot = &q->ring[(q->head + q->count) % q->cap];
  *slot = *item;
  slot->msg = msg;
  q->count++;
  pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
  return MX_OK;
}

int mx_queue_pop(mx_queue *q, mx_queue_item *out, double timeout_s) {
  if (!q || !out) return mx_err(MX_EINVAL, "mx_queue_pop: NULL queue or item");
  pthread_mutex_lock(&q->mu);
  int timed_out = wait_for(q, &q->not_empty, 1, timeout_s);
  if (q->count == 0) {
    /* a closed queue still hands out what it holds, then says closed */
    int closed = q->closed;
    pthread_mutex_unlock(&q->mu);
    (void)timed_out;
    return closed ? MX_QUEUE_CLOSED : MX_QUEUE_TIMEOUT;
  }
  *out = q->ring[q->head];
  memset(&q->ring[q->head], 0, sizeof q->ring[q->head]);
  q->head = (q->head + 1) % q->cap;
  q->count--;
  pthread_cond_signal(&q->not_full);
  pthread_mutex_unlock(&q->mu);
  return MX_OK;
}

void mx_queue_item_clear(mx_queue_item *item) {
  if (item) item_clear(item);
}
