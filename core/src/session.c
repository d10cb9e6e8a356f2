/* session.c — sessions: what one Lua state (or one C host thread) owns in a process
 * shared with others: its byte counter, its random stream, its wait scope. A thread's
 * current session is a thread-local pointer (the default session until bound), so the
 * per-op paths read it for free and no API takes a session argument. */
#include "session.h"

#include <stdlib.h>

#define SEED0 0x853c49e6748fea9bULL /* a fresh session's stream (seed 0 re-seeds to 0) */

static mx_session default_session = { .rng_seed = SEED0 };
static _Thread_local mx_session *tl_session;

mx_session *mx_session_cur(void) {
  mx_session *s = tl_session;
  return s ? s : &default_session;
}

mx_session *mx_session_new(void) {
  mx_session *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  atomic_init(&s->bytes, 0);
  atomic_init(&s->rng_seed, SEED0);
  atomic_init(&s->rng_counter, 0);
  return s;
}

void mx_session_bind(mx_session *s) { tl_session = s == &default_session ? NULL : s; }
mx_session *mx_session_current(void) { return mx_session_cur(); }
mx_session *mx_session_default(void) { return &default_session; }

/* A session outlives its owner while storages charged to it live (a tensor handed to
 * another state, one held by a queued op). No reference count per storage (two more
 * atomics on every 1-element op): the owner's free and the release that brings `bytes`
 * to 0 both try to reclaim; the exchange on `reclaimed` makes exactly one of them win. */
void mx_session_try_reclaim(mx_session *s) {
  if (s != &default_session && atomic_load(&s->freed) && atomic_load(&s->bytes) == 0 &&
      !atomic_exchange(&s->reclaimed, true))
    free(s);
}

void mx_session_release(mx_session *s) {
  atomic_store(&s->freed, true);
  mx_session_try_reclaim(s);
}

int64_t mx_session_bytes(const mx_session *s) {
  return atomic_load_explicit(&((mx_session *)s)->bytes, memory_order_relaxed);
}

/* ---- random: a counter-based stream per session --------------------------------- */
void mx_random_seed(uint64_t seed) {
  mx_session *s = mx_session_cur();
  atomic_store(&s->rng_seed, seed);
  atomic_store(&s->rng_counter, 0);
}

uint64_t mx_random_reserve(uint64_t n, uint64_t *seed) {
  mx_session *s = mx_session_cur();
  *seed = atomic_load(&s->rng_seed);
  return atomic_fetch_add(&s->rng_counter, n);
}

uint64_t mx_random_reserve_counters(uint64_t n, uint64_t *seed) {
  return mx_random_reserve(n, seed);
}

uint64_t mx_random_next(void) {
  uint64_t s, c = mx_random_reserve(1, &s);
  return mx_random_bits(s, c);
}
