/* mxworker.c — libmxworker: OS threads that each run their own LuaJIT state (the
 * DataLoader's workers; docs/design/data.md "Worker threads").
 *
 * A separate small library, not part of libmx: libmx has no Lua in it (a C embedder
 * links it without LuaJIT), while this one links libluajit-5.1 and is ffi.load-ed by
 * lua/mx/gluon/data/dataloader.lua only when num_workers > 0. The thread makes a
 * fresh lua_State, gives it the parent's package.path/cpath, and calls
 * require("mx.gluon.data.worker")(arg, self) — that Lua loop (gluon/data/worker.lua)
 * talks to the parent only through libmx's mx_queue (C handles, no callbacks into any
 * other state).
 *
 * Shutdown: mxw_cancel sets a flag the worker loop polls between its bounded queue
 * waits, and a count hook that raises an error in Lua code that never returns to the
 * loop (an endless get). mxw_join waits a grace period; a thread still running after
 * it (stuck in C, e.g. sleeping) is detached and frees itself when it ends. Built with
 * -z nodelete: a state closing dlcloses what it ffi.load-ed, and threads may still be
 * executing this code. */
#define _GNU_SOURCE
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mxw_thread mxw_thread;
struct mxw_thread {
  pthread_t tid;
  pthread_mutex_t mu;
  lua_State *L;        /* while the state is open (guarded by mu): the cancel hook's target */
  int cancel, finished, abandoned;
  char *path, *cpath, *arg;
  char err[4096];      /* the state's own failure (not a job's: those go through queues) */
  mxw_thread *next;    /* the live list (at-exit cancellation) */
};

static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static mxw_thread *live_head;
static atomic_int live_count;

static void live_remove(mxw_thread *t) {
  pthread_mutex_lock(&live_mu);
  for (mxw_thread **p = &live_head; *p; p = &(*p)->next)
    if (*p == t) { *p = t->next; break; }
  pthread_mutex_unlock(&live_mu);
}

static void cancel_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_error(L, "DataLoader worker cancelled (the loader was closed)");
}

static void free_thread(mxw_thread *t) {
  pthread_mutex_destroy(&t->mu);
  free(t->path);
  free(t->cpath);
  free(t->arg);
  free(t);
}

static void *thread_main(void *p) {
  mxw_thread *t = p;
  lua_State *L = luaL_newstate();
  if (!L) {
    snprintf(t->err, sizeof t->err, "DataLoader worker: out of memory creating a Lua state");
  } else {
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_pushstring(L, t->path);
    lua_setfield(L, -2, "path");
    lua_pushstring(L, t->cpath);
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    pthread_mutex_lock(&t->mu);
    t->L = L;
    int cancelled = t->cancel;
    pthread_mutex_unlock(&t->mu);
    if (!cancelled) {
      lua_getglobal(L, "require");
      lua_pushstring(L, "mx.gluon.data.worker");
      int rc = lua_pcall(L, 1, 1, 0);
      if (rc == 0) {
        lua_pushstring(L, t->arg);
        lua_pushnumber(L, (lua_Number)(uintptr_t)t);
        rc = lua_pcall(L, 2, 0, 0);
      }
      if (rc != 0) {
        const char *m = lua_tostring(L, -1);
        snprintf(t->err, sizeof t->err, "%s", m ? m : "(error object is not a string)");
      }
    }
    pthread_mutex_lock(&t->mu);
    t->L = NULL; /* from here no cancel sets a hook, and a pending one is cleared: */
    pthread_mutex_unlock(&t->mu);
    lua_sethook(L, NULL, 0, 0); /* an error raised in a finalizer would skip releases */
    lua_close(L);               /* runs the state's finalizers: its tensors go back */
  }
  live_remove(t);
  atomic_fetch_sub(&live_count, 1);
  pthread_mutex_lock(&t->mu);
  t->finished = 1;
  int abandoned = t->abandoned;
  pthread_mutex_unlock(&t->mu);
  if (abandoned) free_thread(t);
  return NULL;
}

/* Starts a worker; 0 on success, else an errno-like code (message in err, 256 bytes). */
int mxw_start(const char *path, const char *cpath, const char *arg, mxw_thread **out,
              char *err) {
  mxw_thread *t = calloc(1, sizeof *t);
  if (!t) { snprintf(err, 256, "out of memory"); return ENOMEM; }
  t->path = strdup(path);
  t->cpath = strdup(cpath);
  t->arg = strdup(arg);
  if (!t->path || !t->cpath || !t->arg) {
    free_thread(t);
    snprintf(err, 256, "out of memory");
    return ENOMEM;
  }
  pthread_mutex_init(&t->mu, NULL);
  pthread_attr_t at;
  pthread_attr_init(&at);
  /* LuaJIT's C stack use is small but mx's kernels may recurse: 8 MB like a main thread */
  pthread_attr_setstacksize(&at, 8u << 20);
  atomic_fetch_add(&live_count, 1);
  pthread_mutex_lock(&live_mu);
  t->next = live_head;
  live_head = t;
  pthread_mutex_unlock(&live_mu);
  int rc = pthread_create(&t->tid, &at, thread_main, t);
  pthread_attr_destroy(&at);
  if (rc != 0) {
    live_remove(t);
    atomic_fetch_sub(&live_count, 1);
    free_thread(t);
    snprintf(err, 256, "pthread_create failed: %s", strerror(rc));
    return rc;
  }
  *out = t;
  return 0;
}

void mxw_cancel(mxw_thread *t) {
  pthread_mutex_lock(&t->mu);
  t->cancel = 1;
  /* lua_sethook may be called from another thread (LuaJIT's own Ctrl-C handler does) */
  if (t->L) lua_sethook(t->L, cancel_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1000);
  pthread_mutex_unlock(&t->mu);
}

int mxw_cancelled(mxw_thread *t) {
  pthread_mutex_lock(&t->mu);
  int c = t->cancel;
  pthread_mutex_unlock(&t->mu);
  return c;
}

/* The state's own failure text ("" when none yet); valid until join. */
const char *mxw_error(mxw_thread *t) { return t->err; }

int mxw_finished(mxw_thread *t) {
  pthread_mutex_lock(&t->mu);
  int f = t->finished;
  pthread_mutex_unlock(&t->mu);
  return f;
}

/* Joins within grace_s seconds: 0 joined (t freed), 1 still running after the grace
 * (detached: it frees itself when it ends). Call once per thread. */
int mxw_join(mxw_thread *t, double grace_s) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (grace_s < 0) grace_s = 0;
  ts.tv_sec += (time_t)grace_s;
  ts.tv_nsec += (long)((grace_s - (double)(time_t)grace_s) * 1e9);
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
  if (pthread_timedjoin_np(t->tid, NULL, &ts) == 0) { free_thread(t); return 0; }
  pthread_mutex_lock(&t->mu);
  if (t->finished) { /* it ended just now: the join returns at once */
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->tid, NULL);
    free_thread(t);
    return 0;
  }
  t->abandoned = 1;
  pthread_mutex_unlock(&t->mu);
  pthread_detach(t->tid);
  return 1;
}

/* Worker threads alive in the process (specs). */
int mxw_live(void) { return atomic_load(&live_count); }

/* At exit (or unload) no worker may still run Lua code on libmx while libmx shuts
 * down: cancel them all and give them a moment. Destructors run in reverse load
 * order, and this library loads after libmx, so this runs first. */
__attribute__((destructor)) static void cancel_all(void) {
  pthread_mutex_lock(&live_mu);
  for (mxw_thread *t = live_head; t; t = t->next) {
    pthread_mutex_lock(&t->mu);
    t->cancel = 1;
    if (t->L) lua_sethook(t->L, cancel_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1000);
    pthread_mutex_unlock(&t->mu);
  }
  pthread_mutex_unlock(&live_mu);
  struct timespec ts = { 0, 10000000 };
  for (int i = 0; i < 200 && atomic_load(&live_count) > 0; i++) nanosleep(&ts, NULL);
}
