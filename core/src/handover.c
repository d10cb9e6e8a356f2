/* handover.c — tensors handed from one Lua state (session) to another: a process-wide
 * registry of live exports (mx.h "sessions"), so that an import redeems only what was
 * exported, as many times as it was exported, and a wrong number is an error. Tokens
 * are not addresses: a stale or made-up number names nothing instead of a freed or
 * foreign object. Exports are few (a handful per hand-over): a list under a mutex. */
#include "internal.h"
#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define TOKEN_MASK ((UINT64_C(1) << 53) - 1) /* exact in a Lua number */

typedef struct export_entry {
  struct export_entry *next;
  uint64_t token;
  mx_tensor *t;  /* the registry's reference */
  int64_t left;  /* imports still allowed */
  bool adopted;  /* the first import moved the charge */
} export_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static export_entry *live;
static uint64_t counter, salt;

/* Under mu. */
static export_entry **find(uint64_t token) {
  export_entry **p = &live;
  while (*p && (*p)->token != token) p = &(*p)->next;
  return p;
}

void mx_tensor_share(mx_tensor *t) {
  if (t && t->storage) __atomic_store_n(&t->storage->shared, true, __ATOMIC_RELEASE);
}

int mx_tensor_export(mx_tensor *t, int64_t imports, uint64_t *token) {
  if (!t || !token) return mx_err(MX_EINVAL, "mx_tensor_export: the tensor and token must not be NULL");
  if (imports < 1)
    return mx_err(MX_EINVAL, "mx_tensor_export: imports must be at least 1, got %lld",
                  (long long)imports);
  export_entry *e = malloc(sizeof *e);
  if (!e) return mx_err(MX_ENOMEM, "mx_tensor_export: out of memory");
  mx_tensor_share(t);
  mx_tensor_retain(t);
  e->t = t;
  e->left = imports;
  e->adopted = false;
  pthread_mutex_lock(&mu);
  if (!salt) salt = ((uint64_t)time(NULL) * UINT64_C(0x9E3779B97F4A7C15)) ^ (uint64_t)(uintptr_t)&live;
  uint64_t k;
  do k = ((++counter * UINT64_C(0xD1B54A32D192ED03)) ^ salt) & TOKEN_MASK;
  while (k == 0 || *find(k));
  e->token = k;
  e->next = live;
  live = e;
  pthread_mutex_unlock(&mu);
  *token = k;
  return MX_OK;
}

static int not_live(const char *fn, uint64_t token) {
  return mx_err(MX_EINVAL, "%s: %llu is not a live export (never exported, already imported as "
                "many times as exported, or revoked)", fn, (unsigned long long)token);
}

int mx_tensor_import(uint64_t token, mx_tensor **out) {
  if (!out) return mx_err(MX_EINVAL, "mx_tensor_import: out must not be NULL");
  *out = NULL;
  pthread_mutex_lock(&mu);
  export_entry **p = find(token), *e = *p;
  if (!e) {
    pthread_mutex_unlock(&mu);
    return not_live("mx_tensor_import", token);
  }
  mx_tensor *t = e->t;
  if (!e->adopted) {
    /* under mu: a second import cannot adopt at the same time; the exporter's own
     * reference may go meanwhile, the registry's keeps the storage */
    mx_tensor_adopt(t, mx_session_cur());
    e->adopted = true;
  }
  if (--e->left == 0) {
    *p = e->next; /* the registry's reference becomes the caller's */
    free(e);
  } else {
    mx_tensor_retain(t);
  }
  pthread_mutex_unlock(&mu);
  *out = t;
  return MX_OK;
}

int mx_tensor_export_revoke(uint64_t token) {
  pthread_mutex_lock(&mu);
  export_entry **p = find(token), *e = *p;
  if (e) *p = e->next;
  pthread_mutex_unlock(&mu);
  if (!e) return not_live("mx_tensor_export_revoke", token);
  mx_tensor_release(e->t);
  free(e);
  return MX_OK;
}

int64_t mx_tensor_export_left(uint64_t token) {
  pthread_mutex_lock(&mu);
  export_entry *e = *find(token);
  int64_t n = e ? e->left : 0;
  pthread_mutex_unlock(&mu);
  return n;
}
