/* session.h — a session's state, shared by session.c, engine.c, storage.c and random.c
 * (not installed). See mx.h "sessions" for the user's view. session.c keeps the data
 * (bytes, random stream) and calls nothing above it; the engine owns the fields it
 * fills (pending ops, recorded errors) and a session's teardown (mx_session_free). */
#ifndef MX_SESSION_H
#define MX_SESSION_H

#include "internal.h"

#define MX_SESSION_ERRS 16

struct eerr;
struct mx_session {
  _Atomic int64_t bytes;     /* bytes of live storages charged to it (GC stepping) */
  _Atomic uint64_t rng_seed;
  _Atomic uint64_t rng_counter;
  /* engine.c, under its mutex: ops queued and not finished; failures since the last
   * wait_all (the wait scope) */
  int64_t pending;
  struct eerr *errs[MX_SESSION_ERRS];
  int nerrs;
  atomic_bool freed;         /* the owner let go (mx_session_free) */
  atomic_bool reclaimed;     /* the struct is being freed (session.c) */
};

/* The calling thread's current session (never NULL). */
mx_session *mx_session_cur(void);
/* Bytes of a storage charged to / released from s (storage.c); the release that empties
 * a freed session reclaims it. Inline: they run on every allocation and release. */
void mx_session_try_reclaim(mx_session *s);
static inline void mx_session_charge(mx_session *s, int64_t n) {
  atomic_fetch_add_explicit(&s->bytes, n, memory_order_relaxed);
}
static inline void mx_session_uncharge(mx_session *s, int64_t n) {
  if (MX_UNLIKELY(atomic_fetch_sub(&s->bytes, n) == n)) mx_session_try_reclaim(s);
}
/* The owner lets s go (mx_session_free, engine.c, after the engine has drained s's ops
 * and dropped its errors): s is reclaimed now, or by the release of the last storage
 * charged to it. */
void mx_session_release(mx_session *s);

#endif
