/* models.c — the registry: models, their versions side by side, the default version,
 * registration, scaling and removal.
 *
 * Zero-downtime switches: a new version is registered beside the old one and serves
 * only once its workers are ready; set-default swaps the routing under the registry's
 * write lock, so each request is routed to exactly one of them; removing a version
 * takes it out of the routing first, then lets its workers finish what is queued
 * (requests that looked it up a moment before are re-routed to the default by
 * mxs_submit) before they stop. A version's memory goes with its last reference (the
 * registry's, each job's). */
#include "serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void cond_init_mono(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

static void wait_until(pthread_cond_t *c, pthread_mutex_t *m, double at) {
  struct timespec ts;
  ts.tv_sec = (time_t)at;
  ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
  pthread_cond_timedwait(c, m, &ts);
}

void mxs_version_ref(mxs_version *v) { atomic_fetch_add(&v->refs, 1); }

void mxs_version_unref(mxs_version *v) {
  if (!v || atomic_fetch_sub(&v->refs, 1) != 1) return;
  if (v->own_dir && v->dir) mxs_rmtree(v->dir);
  free(v->name);
  free(v->version);
  free(v->url);
  free(v->dir);
  free(v->handler);
  free(v->q);
  free(v->workers);
  json_decref(v->manifest);
  json_decref(v->signature);
  pthread_mutex_destroy(&v->mu);
  pthread_mutex_destroy(&v->sig_mu);
  pthread_cond_destroy(&v->cv);
  pthread_cond_destroy(&v->state_cv);
  free(v);
}

static mxs_model *find_model(mxs_server *s, const char *name) {
  for (int i = 0; i < s->nmodels; i++)
    if (!strcmp(s->models[i]->name, name)) return s->models[i];
  return NULL;
}

static mxs_version *find_version(mxs_model *m, const char *version) {
  if (!version) return m->def;
  for (int i = 0; i < m->nv; i++)
    if (!strcmp(m->v[i]->version, version)) return m->v[i];
  return NULL;
}

mxs_version *mxs_lookup(mxs_server *s, const char *name, const char *version) {
  pthread_rwlock_rdlock(&s->reg_lk);
  mxs_model *m = find_model(s, name);
  mxs_version *v = m ? find_version(m, version) : NULL;
  if (v) mxs_version_ref(v);
  pthread_rwlock_unlock(&s->reg_lk);
  return v;
}

static int ready_workers(mxs_version *v) {
  int n = 0;
  for (int i = 0; i < v->nworkers; i++) {
    int st = atomic_load(&v->workers[i]->state);
    n += st == MXS_W_READY || st == MXS_W_BUSY;
  }
  return n;
}

/* with v->mu held: until want workers are ready, one failed to start, or timeout */
static int wait_ready(mxs_version *v, int want, double timeout, char *msg, size_t cap) {
  double until = mxs_now() + timeout;
  while (ready_workers(v) < want) {
    if (atomic_load(&v->state) == MXS_V_FAILED) {
      snprintf(msg, cap, "model %s version %s failed to start a worker: %s", v->name, v->version,
               v->fail_msg);
      return -1;
    }
    if (mxs_now() >= until) {
      snprintf(msg, cap, "model %s version %s: %d of %d workers ready after %.0f s", v->name,
               v->version, ready_workers(v), want, timeout);
      return -2;
    }
    wait_until(&v->state_cv, &v->mu, until);
  }
  return 0;
}

static int json_int(json_t *m, const char *k, int dflt) {
  json_t *v = json_object_get(m, k);
  return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

/* Where an archive named by POST /models?url= is: under the model store only. */
static int resolve_url(mxs_server *s, const char *url, char *path, size_t cap, char *msg, size_t mcap) {
  if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8) || strstr(url, "://")) {
    snprintf(msg, mcap, "url '%s': mx-serve loads archives from its model store only (no "
             "downloads): copy the archive there and give its file name", url);
    return 400;
  }
  if (!s->cfg.model_store) {
    snprintf(msg, mcap, "url '%s': the server has no model store (start it with --model-store DIR)", url);
    return 400;
  }
  if (url[0] == '/' || strstr(url, "..") || !*url) {
    snprintf(msg, mcap, "url '%s' must name an archive inside the model store (no absolute path "
             "or '..')", url);
    return 400;
  }
  snprintf(path, cap, "%s/%s", s->cfg.model_store, url);
  if (access(path, R_OK)) {
    snprintf(msg, mcap, "url '%s': no such archive in the model store %s", url, s->cfg.model_store);
    return 404;
  }
  return 0;
}

static void remove_from_model(mxs_server *s, mxs_model *m, mxs_version *v) {
  for (int i = 0; i < m->nv; i++)
    if (m->v[i] == v) {
      m->v[i] = m->v[--m->nv];
      break;
    }
  if (m->def == v) m->def = m->nv ? m->v[0] : NULL;
  if (m->nv == 0) {
    for (int i = 0; i < s->nmodels; i++)
      if (s->models[i] == m) {
        s->models[i] = s->models[--s->nmodels];
        break;
      }
    free(m->v);
    free(m->name);
    free(m);
  }
}

static void *retire_main(void *arg);

static void retire(mxs_version *v) {
  pthread_t th;
  if (pthread_create(&th, NULL, retire_main, v) == 0) pthread_detach(th);
  else retire_main(v);
}

int mxs_register(mxs_server *s, const mxs_reg_args *a, char *msg, size_t cap, mxs_version **out) {
  if (out) *out = NULL;
  char path[4096];
  if (a->path) {
    snprintf(path, sizeof path, "%s", a->path);
  } else {
    int st = resolve_url(s, a->url ? a->url : "", path, sizeof path, msg, cap);
    if (st) return st;
  }
  char *dir;
  int own;
  json_t *man;
  if (mxs_archive_open(path, &dir, &own, &man, msg, cap)) return 400;
  const char *name = a->model_name && *a->model_name ? a->model_name
                                                     : json_string_value(json_object_get(man, "model_name"));
  const char *ver = json_string_value(json_object_get(man, "model_version"));
  const char *handler = a->handler && *a->handler ? a->handler
                                                  : json_string_value(json_object_get(man, "handler"));
  int st = 0;
  if (!mxs_valid_name(name)) {
    snprintf(msg, cap, "model_name '%s' must be 1..128 of [A-Za-z0-9_.-]", name);
    st = 400;
  } else if (a->handler && *a->handler && strcmp(handler, "image_classifier") &&
             strcmp(handler, "json_tensor")) {
    char hp[4200];
    snprintf(hp, sizeof hp, "%s/%s", dir, handler);
    if (strstr(handler, "..") || handler[0] == '/' || access(hp, R_OK)) {
      snprintf(msg, cap, "handler '%s' is neither a built-in handler (image_classifier, "
               "json_tensor) nor a file of the archive", handler);
      st = 400;
    }
  }
  mxs_version *v = st ? NULL : calloc(1, sizeof *v);
  if (!st && !v) {
    snprintf(msg, cap, "out of memory");
    st = 503;
  }
  if (st) {
    if (own) mxs_rmtree(dir);
    free(dir);
    json_decref(man);
    return st;
  }
  atomic_init(&v->refs, 1);
  v->srv = s;
  v->name = mxs_strdup(name);
  v->version = mxs_strdup(ver ? ver : "1.0");
  v->url = mxs_strdup(a->url ? a->url : path);
  v->dir = dir;
  v->own_dir = own;
  v->handler = mxs_strdup(handler);
  v->manifest = man;
  v->signature = json_deep_copy(json_object_get(man, "signature"));
  if (!json_is_object(v->signature)) v->signature = json_object();
  pthread_mutex_init(&v->mu, NULL);
  pthread_mutex_init(&v->sig_mu, NULL);
  cond_init_mono(&v->cv);
  cond_init_mono(&v->state_cv);
  v->batch_size = a->batch_size > 0 ? a->batch_size : json_int(man, "batch_size", s->cfg.default_batch_size);
  if (v->batch_size > 4096) v->batch_size = 4096;
  v->max_batch_delay_ms = a->max_batch_delay_ms >= 0 ? a->max_batch_delay_ms
                                                     : json_int(man, "max_batch_delay", s->cfg.default_batch_delay_ms);
  v->deadline_ms = a->deadline_ms > 0 ? a->deadline_ms
                                      : json_int(man, "response_timeout", s->cfg.deadline_ms);
  v->queue_cap = s->cfg.queue_size > 0 ? s->cfg.queue_size : 100;
  v->q = calloc((size_t)v->queue_cap, sizeof *v->q);
  int nw = a->initial_workers >= 0 ? a->initial_workers : s->cfg.default_workers;
  v->min_workers = nw;
  v->max_workers = nw > 0 ? nw : 1;
  v->registered_at = mxs_wall();
  atomic_init(&v->state, MXS_V_LOADING);
  if (!v->name || !v->version || !v->url || !v->handler || !v->q) {
    mxs_version_unref(v);
    snprintf(msg, cap, "out of memory");
    return 503;
  }
  pthread_rwlock_wrlock(&s->reg_lk);
  mxs_model *m = find_model(s, v->name);
  if (m && find_version(m, v->version)) {
    pthread_rwlock_unlock(&s->reg_lk);
    snprintf(msg, cap, "model %s version %s is already registered (register another version, "
             "or DELETE this one first)", v->name, v->version);
    mxs_version_unref(v);
    return 409;
  }
  if (!m) {
    m = calloc(1, sizeof *m);
    if (m) m->name = mxs_strdup(v->name);
    if (m && s->nmodels == s->mcap) {
      int c = s->mcap ? s->mcap * 2 : 8;
      mxs_model **nm = realloc(s->models, (size_t)c * sizeof *nm);
      if (nm) {
        s->models = nm;
        s->mcap = c;
      }
    }
    if (!m || !m->name || s->nmodels == s->mcap) {
      pthread_rwlock_unlock(&s->reg_lk);
      if (m) free(m->name);
      free(m);
      mxs_version_unref(v);
      snprintf(msg, cap, "out of memory");
      return 503;
    }
    s->models[s->nmodels++] = m;
  }
  mxs_version **nvv = realloc(m->v, (size_t)(m->nv + 1) * sizeof *nvv);
  if (!nvv) {
    pthread_rwlock_unlock(&s->reg_lk);
    snprintf(msg, cap, "out of memory");
    mxs_version_unref(v);
    return 503;
  }
  m->v = nvv;
  m->v[m->nv++] = v;
  if (!m->def) m->def = v;
  pthread_mutex_lock(&v->mu);
  for (int i = 0; i < nw; i++) mxs_worker_add(v);
  pthread_rwlock_unlock(&s->reg_lk);
  int rc = 0;
  if (a->synchronous && nw > 0) {
    rc = wait_ready(v, nw, s->cfg.worker_start_timeout_s + 5, msg, cap);
  }
  pthread_mutex_unlock(&v->mu);
  if (rc) {
    /* a synchronous registration that did not come up is undone */
    pthread_rwlock_wrlock(&s->reg_lk);
    mxs_model *mm = find_model(s, v->name);
    if (mm) remove_from_model(s, mm, v);
    pthread_rwlock_unlock(&s->reg_lk);
    retire(v);
    return rc == -1 ? 400 : 503;
  }
  if (out) {
    mxs_version_ref(v);
    *out = v;
  }
  if (a->synchronous || nw == 0)
    snprintf(msg, cap, "Model \"%s\" Version: %s registered with %d initial workers%s", v->name,
             v->version, nw, nw ? "" : ". Use the scale workers API to add workers for the model.");
  else
    snprintf(msg, cap, "Model \"%s\" Version: %s registered; %d workers starting", v->name,
             v->version, nw);
  return a->synchronous || nw == 0 ? 200 : 202;
}

/* drains a version taken out of the routing, stops its workers, drops the registry's
 * reference */
static void *retire_main(void *arg) {
  mxs_version *v = arg;
  double until = mxs_now() + v->srv->cfg.drain_timeout_s;
  pthread_mutex_lock(&v->mu);
  atomic_store(&v->state, MXS_V_STOPPING);
  v->draining = 1;
  pthread_cond_broadcast(&v->cv);
  while ((v->qlen > 0 || v->inflight > 0) && mxs_now() < until) wait_until(&v->state_cv, &v->mu, until);
  while (v->qlen > 0) {
    mxs_job *j = v->q[v->qhead];
    v->qhead = (v->qhead + 1) % v->queue_cap;
    v->qlen--;
    mxs_job_fail(j, 503, "model %s version %s was removed before this request ran", v->name, v->version);
  }
  for (int i = 0; i < v->nworkers; i++) atomic_store(&v->workers[i]->stop, 1);
  pthread_cond_broadcast(&v->cv);
  pthread_mutex_unlock(&v->mu);
  for (;;) {
    mxs_worker_reap(v);
    pthread_mutex_lock(&v->mu);
    int left = v->nworkers;
    if (left) wait_until(&v->state_cv, &v->mu, mxs_now() + 0.1);
    pthread_mutex_unlock(&v->mu);
    if (!left) break;
  }
  mxs_version_unref(v);
  return NULL;
}

int mxs_unregister(mxs_server *s, const char *name, const char *version, char *msg, size_t cap) {
  pthread_rwlock_wrlock(&s->reg_lk);
  mxs_model *m = find_model(s, name);
  mxs_version *v = m ? find_version(m, version) : NULL;
  if (!v) {
    pthread_rwlock_unlock(&s->reg_lk);
    if (!m) snprintf(msg, cap, "Model not found: %s", name);
    else snprintf(msg, cap, "Model version: %s does not exist for model: %s", version, name);
    return 404;
  }
  if (v == m->def && m->nv > 1) {
    pthread_rwlock_unlock(&s->reg_lk);
    snprintf(msg, cap, "cannot remove the default version %s of model %s while other versions "
             "exist: set another default first (PUT /models/%s/{version}/set-default)",
             v->version, name, name);
    return 403;
  }
  remove_from_model(s, m, v);
  pthread_rwlock_unlock(&s->reg_lk);
  snprintf(msg, cap, "Model \"%s\" version %s unregistered", name, v->version);
  retire(v);
  return 200;
}

int mxs_set_default(mxs_server *s, const char *name, const char *version, char *msg, size_t cap) {
  pthread_rwlock_wrlock(&s->reg_lk);
  mxs_model *m = find_model(s, name);
  mxs_version *v = m ? find_version(m, version) : NULL;
  if (v) m->def = v;
  pthread_rwlock_unlock(&s->reg_lk);
  if (!m) snprintf(msg, cap, "Model not found: %s", name);
  else if (!v) snprintf(msg, cap, "Model version: %s does not exist for model: %s", version, name);
  else snprintf(msg, cap, "Default version successfully updated for model \"%s\" to \"%s\"", name, version);
  return v ? 200 : 404;
}

int mxs_scale(mxs_version *v, int min_w, int max_w, int synchronous, char *msg, size_t cap) {
  pthread_mutex_lock(&v->mu);
  if (v->draining) {
    pthread_mutex_unlock(&v->mu);
    snprintf(msg, cap, "model %s version %s is being removed", v->name, v->version);
    return 404;
  }
  v->min_workers = min_w;
  v->max_workers = max_w > min_w ? max_w : min_w;
  int have = mxs_active_workers(v);
  for (; have < min_w; have++) mxs_worker_add(v);
  for (; have > min_w; have--) mxs_worker_stop_one(v);
  /* no worker will take what is queued */
  while (min_w == 0 && v->qlen > 0) {
    mxs_job *j = v->q[v->qhead];
    v->qhead = (v->qhead + 1) % v->queue_cap;
    v->qlen--;
    mxs_job_fail(j, 503, "model %s version %s was scaled to no worker", v->name, v->version);
  }
  int rc = synchronous ? wait_ready(v, min_w, v->srv->cfg.worker_start_timeout_s + 5, msg, cap) : 0;
  pthread_mutex_unlock(&v->mu);
  mxs_worker_reap(v);
  if (rc) return 500;
  snprintf(msg, cap, synchronous ? "Workers scaled to %d for model: %s, version: %s"
                                 : "Processing worker updates (%d) for model: %s, version: %s",
           min_w, v->name, v->version);
  return synchronous ? 200 : 202;
}

static const char *state_name(int st) {
  switch (st) {
  case MXS_V_LOADING: return "LOADING";
  case MXS_V_READY: return "READY";
  case MXS_V_FAILED: return "FAILED";
  default: return "STOPPING";
  }
}

static const char *wstate_name(int st) {
  switch (st) {
  case MXS_W_STARTING: return "STARTING";
  case MXS_W_READY: return "READY";
  case MXS_W_BUSY: return "BUSY";
  case MXS_W_RESTARTING: return "RESTARTING";
  default: return "STOPPED";
  }
}

json_t *mxs_describe(mxs_version *v) {
  json_t *ws = json_array();
  pthread_mutex_lock(&v->mu);
  for (int i = 0; i < v->nworkers; i++) {
    mxs_worker *w = v->workers[i];
    json_t *o = json_pack("{s:i,s:s,s:i,s:i,s:f}", "id", w->id, "status",
                          wstate_name(atomic_load(&w->state)), "pid", (int)atomic_load(&w->pid),
                          "restarts", atomic_load(&w->restarts), "startTime", w->started);
    if (w->last_error[0]) json_object_set_new(o, "lastError", json_string(w->last_error));
    json_array_append_new(ws, o);
  }
  int qlen = v->qlen, minw = v->min_workers, maxw = v->max_workers;
  char fail[sizeof v->fail_msg];
  snprintf(fail, sizeof fail, "%s", v->fail_msg);
  pthread_mutex_unlock(&v->mu);
  pthread_mutex_lock(&v->sig_mu);
  json_t *sig = json_deep_copy(v->signature);
  pthread_mutex_unlock(&v->sig_mu);
  int st = atomic_load(&v->state);
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:s,s:o,s:o}", "modelName",
                        v->name, "modelVersion", v->version, "modelUrl", v->url, "runtime",
                        "luamx", "handler", v->handler, "minWorkers", minw, "maxWorkers", maxw,
                        "batchSize", v->batch_size, "maxBatchDelay", v->max_batch_delay_ms,
                        "responseTimeout", v->deadline_ms, "queueDepth", qlen, "status",
                        state_name(st), "signature", sig ? sig : json_object(), "workers", ws);
  if (st == MXS_V_FAILED && fail[0]) json_object_set_new(o, "error", json_string(fail));
  return o;
}

void mxs_each_version(mxs_server *s, void (*fn)(mxs_version *v, int is_def, void *u), void *u) {
  pthread_rwlock_rdlock(&s->reg_lk);
  for (int i = 0; i < s->nmodels; i++) {
    mxs_model *m = s->models[i];
    if (m->def) fn(m->def, 1, u);
    for (int k = 0; k < m->nv; k++)
      if (m->v[k] != m->def) fn(m->v[k], 0, u);
  }
  pthread_rwlock_unlock(&s->reg_lk);
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(mxs_model *const *)a)->name, (*(mxs_model *const *)b)->name);
}

json_t *mxs_list_models(mxs_server *s, long limit, long token, long *next) {
  json_t *arr = json_array();
  pthread_rwlock_rdlock(&s->reg_lk);
  mxs_model **sorted = malloc(sizeof *sorted * (size_t)(s->nmodels + 1));
  int n = s->nmodels;
  if (sorted) {
    memcpy(sorted, s->models, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, by_name);
  }
  *next = -1;
  for (long i = token; sorted && i < n; i++) {
    if (i - token >= limit) {
      *next = i;
      break;
    }
    mxs_model *m = sorted[i];
    json_array_append_new(arr, json_pack("{s:s,s:s}", "modelName", m->name, "modelUrl",
                                         m->def ? m->def->url : ""));
  }
  pthread_rwlock_unlock(&s->reg_lk);
  free(sorted);
  return arr;
}

int mxs_all_ready(mxs_server *s) {
  int ok = 1, any = 0;
  pthread_rwlock_rdlock(&s->reg_lk);
  for (int i = 0; i < s->nmodels; i++)
    for (int k = 0; k < s->models[i]->nv; k++) {
      any = 1;
      ok &= atomic_load(&s->models[i]->v[k]->state) == MXS_V_READY;
    }
  pthread_rwlock_unlock(&s->reg_lk);
  return ok && any;
}

void mxs_registry_shutdown(mxs_server *s, double deadline) {
  pthread_rwlock_wrlock(&s->reg_lk);
  int n = 0;
  for (int i = 0; i < s->nmodels; i++) n += s->models[i]->nv;
  mxs_version **all = malloc(sizeof *all * (size_t)(n + 1));
  int k = 0;
  while (all && s->nmodels) {
    mxs_model *m = s->models[0];
    mxs_version *v = m->v[0];
    all[k++] = v;
    remove_from_model(s, m, v);
  }
  pthread_rwlock_unlock(&s->reg_lk);
  for (int i = 0; i < k; i++) {
    mxs_version_ref(all[i]);
    retire(all[i]);
  }
  /* the retire threads drain within drain_timeout; wait for the versions to go */
  for (int i = 0; i < k; i++) {
    while (atomic_load(&all[i]->refs) > 1 && mxs_now() < deadline) {
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    mxs_version_unref(all[i]);
  }
  free(all);
}
