/* api_mgmt.c — the management port, TorchServe's management API:
 *   POST   /models?url=&model_name=&handler=&batch_size=&max_batch_delay=&initial_workers=
 *               &synchronous=&response_timeout=
 *   GET    /models[?limit=&next_page_token=]
 *   GET    /models/{m}            the default version     /models/{m}/all   every version
 *   GET    /models/{m}/{v}
 *   PUT    /models/{m}[/{v}]?min_worker=&max_worker=&synchronous=
 *   DELETE /models/{m}[/{v}]
 *   PUT    /models/{m}/{v}/set-default
 * A bad parameter is a 400 naming it; an unknown model or version a 404. The optional
 * bearer token is checked before anything else (http.c). */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int status_reply(mxs_req *r, int st, const char *msg) {
  if (st >= 400) return mxs_reply_error(r, st, NULL, "%s", msg);
  return mxs_reply_json(r, st, json_pack("{s:s}", "status", msg));
}

/* an integer query parameter: *out = dflt when absent; -1 after answering 400 */
static int int_param(mxs_req *r, const char *name, long lo, long hi, long dflt, long *out) {
  const char *s = mxs_query(r, name);
  *out = dflt;
  if (!s) return 0;
  if (mxs_parse_int(s, lo, hi, out)) {
    mxs_reply_error(r, 400, NULL, "parameter %s='%s' must be an integer in %ld..%ld", name, s, lo, hi);
    return -1;
  }
  return 0;
}

static int bool_param(mxs_req *r, const char *name, int dflt, int *out) {
  const char *s = mxs_query(r, name);
  *out = dflt;
  if (!s) return 0;
  if (!strcasecmp(s, "true") || !strcmp(s, "1")) *out = 1;
  else if (!strcasecmp(s, "false") || !strcmp(s, "0")) *out = 0;
  else {
    mxs_reply_error(r, 400, NULL, "parameter %s='%s' must be true or false", name, s);
    return -1;
  }
  return 0;
}

static int register_model(mxs_req *r) {
  const char *url = mxs_query(r, "url");
  if (!url || !*url) return mxs_reply_error(r, 400, NULL, "Parameter url is required.");
  const char *name = mxs_query(r, "model_name");
  if (name && !mxs_valid_name(name))
    return mxs_reply_error(r, 400, NULL, "model_name '%s' must be 1..128 of [A-Za-z0-9_.-]", name);
  long bs, delay, workers, timeout;
  int sync;
  if (int_param(r, "batch_size", 1, 4096, -1, &bs) || int_param(r, "max_batch_delay", 0, 60000, -1, &delay) ||
      int_param(r, "initial_workers", 0, 256, -1, &workers) ||
      int_param(r, "response_timeout", 1, 86400, -1, &timeout) || bool_param(r, "synchronous", 0, &sync))
    return 1;
  mxs_reg_args a = {url, NULL, name, mxs_query(r, "handler"), (int)bs, (int)delay, (int)workers,
                    timeout > 0 ? (int)timeout * 1000 : -1, sync};
  char msg[900];
  int st = mxs_register(r->srv, &a, msg, sizeof msg, NULL);
  return status_reply(r, st, msg);
}

static int scale(mxs_req *r, const char *name, const char *version) {
  mxs_version *v = mxs_lookup(r->srv, name, version);
  if (!v) {
    char msg[400];
    if (version && (v = mxs_lookup(r->srv, name, NULL))) {
      mxs_version_unref(v);
      snprintf(msg, sizeof msg, "Model version: %s does not exist for model: %s", version, name);
    } else {
      snprintf(msg, sizeof msg, "Model not found: %s", name);
    }
    return mxs_reply_error(r, 404, "ModelNotFoundException", "%s", msg);
  }
  long minw, maxw;
  int sync, rc;
  pthread_mutex_lock(&v->mu);
  int cur = v->min_workers;
  pthread_mutex_unlock(&v->mu);
  if (int_param(r, "min_worker", 0, 256, cur, &minw) || int_param(r, "max_worker", 0, 256, minw, &maxw) ||
      bool_param(r, "synchronous", 0, &sync)) {
    rc = 1;
  } else if (maxw < minw) {
    rc = mxs_reply_error(r, 400, NULL, "max_worker %ld is below min_worker %ld", maxw, minw);
  } else {
    char msg[600];
    int st = mxs_scale(v, (int)minw, (int)maxw, sync, msg, sizeof msg);
    rc = status_reply(r, st, msg);
  }
  mxs_version_unref(v);
  return rc;
}

typedef struct all_ctx {
  const char *name;
  json_t *arr;
} all_ctx;

static void add_version(mxs_version *v, int is_def, void *u) {
  all_ctx *c = u;
  if (strcmp(v->name, c->name)) return;
  json_t *d = mxs_describe(v);
  json_object_set_new(d, "default", json_boolean(is_def));
  json_array_append_new(c->arr, d);
}

static int describe(mxs_req *r, const char *name, const char *version) {
  if (version && !strcmp(version, "all")) {
    all_ctx c = {name, json_array()};
    mxs_each_version(r->srv, add_version, &c);
    if (json_array_size(c.arr) == 0) {
      json_decref(c.arr);
      return mxs_reply_error(r, 404, "ModelNotFoundException", "Model not found: %s", name);
    }
    return mxs_reply_json(r, 200, c.arr);
  }
  mxs_version *v = mxs_lookup(r->srv, name, version);
  if (!v) {
    mxs_version *any = version ? mxs_lookup(r->srv, name, NULL) : NULL;
    if (any) {
      mxs_version_unref(any);
      return mxs_reply_error(r, 404, "ModelVersionNotFoundException",
                             "Model version: %s does not exist for model: %s", version, name);
    }
    return mxs_reply_error(r, 404, "ModelNotFoundException", "Model not found: %s", name);
  }
  json_t *d = mxs_describe(v);
  mxs_version *def = mxs_lookup(r->srv, name, NULL);
  json_object_set_new(d, "default", json_boolean(def == v));
  if (def) mxs_version_unref(def);
  mxs_version_unref(v);
  return mxs_reply_json(r, 200, json_pack("[o]", d));
}

int mxs_api_management(mxs_req *r) {
  char seg[5][160];
  int n = 0;
  const char *p = r->url;
  while (*p && n <= 4) {
    while (*p == '/') p++;
    if (!*p) break;
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= sizeof seg[0] || n == 4) {
      n = -1;
      break;
    }
    memcpy(seg[n], p, len);
    seg[n++][len] = 0;
    p += len;
  }
  const char *m = r->method;
  if (n < 1 || strcmp(seg[0], "models"))
    return mxs_reply_error(r, 404, NULL, "Requested resource is not found, please refer to API document.");
  if (n == 1) {
    if (!strcmp(m, "POST")) return register_model(r);
    if (!strcmp(m, "GET")) {
      long limit, token;
      if (int_param(r, "limit", 1, 1000, 100, &limit) ||
          int_param(r, "next_page_token", 0, 1L << 30, 0, &token))
        return 1;
      long next;
      json_t *arr = mxs_list_models(r->srv, limit, token, &next);
      json_t *o = json_pack("{s:o}", "models", arr);
      if (next >= 0) {
        char t[24];
        snprintf(t, sizeof t, "%ld", next);
        json_object_set_new(o, "nextPageToken", json_string(t));
      }
      return mxs_reply_json(r, 200, o);
    }
    r->allow = "GET, POST";
    return mxs_reply_error(r, 405, NULL, "%s /models: use GET or POST", m);
  }
  const char *name = seg[1], *version = n >= 3 ? seg[2] : NULL;
  if (n == 4) {
    if (!strcmp(seg[3], "set-default") && !strcmp(m, "PUT")) {
      char msg[400];
      int st = mxs_set_default(r->srv, name, version, msg, sizeof msg);
      return status_reply(r, st, msg);
    }
    if (!strcmp(seg[3], "set-default")) {
      r->allow = "PUT";
      return mxs_reply_error(r, 405, NULL, "set-default takes PUT");
    }
    return mxs_reply_error(r, 404, NULL, "Requested resource is not found, please refer to API document.");
  }
  if (!strcmp(m, "GET")) return describe(r, name, version);
  if (!strcmp(m, "PUT")) return scale(r, name, version);
  if (!strcmp(m, "DELETE")) {
    char msg[600];
    int st = mxs_unregister(r->srv, name, version, msg, sizeof msg);
    return status_reply(r, st, msg);
  }
  r->allow = "GET, PUT, DELETE";
  return mxs_reply_error(r, 405, NULL, "%s %s: use GET, PUT or DELETE", m, r->url);
}
