/* api_infer.c — the inference port: TorchServe's inference API (/ping, /predictions,
 * OPTIONS / describe), KServe's Open Inference Protocol v2 (/v2/...) and SageMaker's
 * container contract (/ping, /invocations, /execution-parameters); and the metrics port. */
#include "serve.h"

#include <ctype.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MXS_VERSION "0.1.0"

static _Atomic uint64_t request_ids;

/* the path's segments, '/'-separated (empty ones dropped); at most cap */
static int split(const char *url, char seg[][160], int cap) {
  int n = 0;
  const char *p = url;
  while (*p) {
    while (*p == '/') p++;
    if (!*p) break;
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (n == cap || len >= 160) return -1;
    memcpy(seg[n], p, len);
    seg[n][len] = 0;
    n++;
    p += len;
  }
  return n;
}

static enum MHD_Result add_kv(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  char low[128];
  size_t i = 0;
  for (; key[i] && i < sizeof low - 1; i++) low[i] = (char)tolower((unsigned char)key[i]);
  low[i] = 0;
  json_object_set_new(cls, low, json_string(value ? value : ""));
  return MHD_YES;
}

static void rid(char *buf, size_t cap) {
  snprintf(buf, cap, "%llx-%llu", (unsigned long long)(uint64_t)(mxs_wall() * 1e3),
           (unsigned long long)atomic_fetch_add(&request_ids, 1));
}

/* a job carrying the request as the handler sees it: headers, query, body or parts */
static mxs_job *predict_job(mxs_req *r, mxs_version *v, int kind) {
  mxs_job *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->v = v;
  j->kind = kind;
  char id[64];
  rid(id, sizeof id);
  const char *ct = mxs_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  json_t *hdr = json_object(), *q = json_object();
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_kv, hdr);
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_kv, q);
  json_t *meta = json_pack("{s:s,s:s,s:s,s:o,s:o,s:I}", "kind",
                           kind == MXS_KIND_INVOCATIONS ? "invocations" : "predict", "id", id,
                           "content_type", ct ? ct : "", "headers", hdr, "query", q, "body_len",
                           (json_int_t)r->body_len);
  if (r->multipart) {
    json_t *parts = json_array();
    for (int i = 0; i < r->nparts; i++) {
      mxs_part *p = &r->parts[i];
      json_t *o = json_pack("{s:s,s:I,s:I}", "name", p->name, "off", (json_int_t)p->off, "len",
                            (json_int_t)p->len);
      if (p->filename) json_object_set_new(o, "filename", json_string(p->filename));
      if (p->ctype) json_object_set_new(o, "content_type", json_string(p->ctype));
      json_array_append_new(parts, o);
    }
    json_object_set_new(meta, "parts", parts);
  }
  j->meta = json_dumps(meta, JSON_COMPACT);
  json_decref(meta);
  j->meta_len = j->meta ? strlen(j->meta) : 0;
  j->blob = r->body;
  j->blob_len = r->body_len;
  r->body = NULL;
  r->body_len = r->body_cap = 0;
  if (!j->meta) {
    j->v = NULL;
    mxs_job_free(j);
    return NULL;
  }
  return j;
}

static int not_found_model(mxs_req *r, const char *name, const char *version, int v2) {
  mxs_version *any = version ? mxs_lookup(r->srv, name, NULL) : NULL;
  if (any) mxs_version_unref(any);
  if (v2) {
    if (any) return mxs_reply_v2_error(r, 404, "model %s has no version %s", name, version);
    return mxs_reply_v2_error(r, 404, "model %s is not registered", name);
  }
  if (any) return mxs_reply_error(r, 404, "ModelNotFoundException",
                                  "Model version: %s does not exist for model: %s", version, name);
  return mxs_reply_error(r, 404, "ModelNotFoundException", "Model not found: %s", name);
}

static int predict(mxs_req *r, const char *name, const char *version, int kind) {
  mxs_version *v = mxs_lookup(r->srv, name, version);
  if (!v) return not_found_model(r, name, version, 0);
  mxs_job *j = predict_job(r, v, kind);
  if (!j) {
    mxs_version_unref(v);
    return mxs_reply_error(r, 503, NULL, "out of memory");
  }
  return mxs_submit(r, j, version == NULL);
}

static json_t *v2_tensors(json_t *list) {
  json_t *out = json_array();
  size_t i;
  json_t *t;
  json_array_foreach(list, i, t) {
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    json_t *shape = json_object_get(t, "shape");
    json_array_append_new(out, json_pack("{s:O,s:s,s:O}", "name", json_object_get(t, "name"),
                                         "datatype", mxs_v2_dtype_name(dt ? dt : "float32"), "shape",
                                         shape ? shape : json_array()));
  }
  return out;
}

typedef struct vlist {
  const char *name;
  json_t *arr;
} vlist;

static void collect_versions(mxs_version *v, int is_def, void *u) {
  vlist *l = u;
  (void)is_def;
  if (!strcmp(v->name, l->name)) json_array_append_new(l->arr, json_string(v->version));
}

static int v2_model(mxs_req *r, const char *name, const char *version, const char *what) {
  mxs_version *v = mxs_lookup(r->srv, name, version);
  if (!v) return not_found_model(r, name, version, 1);
  int rc;
  if (!strcmp(what, "infer")) {
    if (strcmp(r->method, "POST")) {
      mxs_version_unref(v);
      r->allow = "POST";
      return mxs_reply_v2_error(r, 405, "infer takes POST");
    }
    mxs_job *j = calloc(1, sizeof *j);
    char msg[600];
    int st = j ? mxs_v2_parse(v, r->body ? r->body : "", r->body_len, j, msg, sizeof msg) : 503;
    if (st) {
      free(j);
      mxs_version_unref(v);
      return mxs_reply_v2_error(r, st, "%s", j ? msg : "out of memory");
    }
    j->v = v;
    j->kind = MXS_KIND_V2;
    return mxs_submit(r, j, version == NULL);
  }
  if (strcmp(r->method, "GET")) {
    mxs_version_unref(v);
    r->allow = "GET";
    return mxs_reply_v2_error(r, 405, "this endpoint takes GET");
  }
  if (!strcmp(what, "ready")) {
    int ready = atomic_load(&v->state) == MXS_V_READY;
    rc = mxs_reply_json(r, ready ? 200 : 400, json_pack("{s:s,s:b}", "name", v->name, "ready", ready));
  } else {
    vlist l = {v->name, json_array()};
    mxs_each_version(r->srv, collect_versions, &l);
    pthread_mutex_lock(&v->sig_mu);
    json_t *ins = v2_tensors(json_object_get(v->signature, "inputs"));
    json_t *outs = v2_tensors(json_object_get(v->signature, "outputs"));
    pthread_mutex_unlock(&v->sig_mu);
    rc = mxs_reply_json(r, 200, json_pack("{s:s,s:o,s:s,s:o,s:o}", "name", v->name, "versions",
                                          l.arr, "platform", "luamx", "inputs", ins, "outputs", outs));
  }
  mxs_version_unref(v);
  return rc;
}

static int v2(mxs_req *r, char seg[][160], int n) {
  if (n == 1) return mxs_reply_json(r, 200, json_pack("{s:s,s:s,s:[]}", "name", "mx-serve",
                                                      "version", MXS_VERSION, "extensions"));
  if (n == 3 && !strcmp(seg[1], "health")) {
    if (!strcmp(seg[2], "live")) return mxs_reply_json(r, 200, json_pack("{s:b}", "live", 1));
    if (!strcmp(seg[2], "ready")) {
      int ok = mxs_all_ready(r->srv) && !atomic_load(&r->srv->draining);
      return mxs_reply_json(r, ok ? 200 : 400, json_pack("{s:b}", "ready", ok));
    }
  }
  if (n >= 3 && !strcmp(seg[1], "models")) {
    const char *name = seg[2], *version = NULL, *what = "";
    if (n == 4) what = seg[3];
    else if (n >= 5 && !strcmp(seg[3], "versions")) {
      version = seg[4];
      if (n == 6) what = seg[5];
      else if (n > 6) goto nf;
    } else if (n > 4) goto nf;
    if (*what && strcmp(what, "ready") && strcmp(what, "infer")) goto nf;
    return v2_model(r, name, version, what);
  }
nf:
  return mxs_reply_v2_error(r, 404, "no such endpoint: %s %s", r->method, r->url);
}

static const char OPENAPI[] =
    "{\"openapi\":\"3.0.1\",\"info\":{\"title\":\"mx-serve inference API\",\"version\":\"" MXS_VERSION
    "\",\"description\":\"TorchServe-compatible inference, KServe v2 and SageMaker endpoints of luamx's "
    "model server\"},\"paths\":{"
    "\"/\":{\"options\":{\"operationId\":\"apiDescription\",\"description\":\"This document.\"}},"
    "\"/ping\":{\"get\":{\"operationId\":\"ping\",\"description\":\"Health: {\\\"status\\\": "
    "\\\"Healthy\\\"}.\"}},"
    "\"/predictions/{model_name}\":{\"post\":{\"operationId\":\"predictions\",\"description\":\"Runs "
    "the model's default version on the body (raw bytes, JSON or multipart/form-data).\"},"
    "\"put\":{\"operationId\":\"predictionsPut\"},\"options\":{\"operationId\":\"describeModel\"}},"
    "\"/predictions/{model_name}/{model_version}\":{\"post\":{\"operationId\":\"versionPredictions\"},"
    "\"options\":{\"operationId\":\"describeModelVersion\"}},"
    "\"/v2/health/live\":{\"get\":{}},\"/v2/health/ready\":{\"get\":{}},"
    "\"/v2/models/{model_name}\":{\"get\":{\"description\":\"KServe v2 model metadata.\"}},"
    "\"/v2/models/{model_name}/ready\":{\"get\":{}},"
    "\"/v2/models/{model_name}/infer\":{\"post\":{\"description\":\"KServe v2 inference with JSON "
    "tensors.\"}},"
    "\"/v2/models/{model_name}/versions/{model_version}/infer\":{\"post\":{}},"
    "\"/invocations\":{\"post\":{\"description\":\"SageMaker: runs the loaded model.\"}},"
    "\"/execution-parameters\":{\"get\":{}}}}";

static int describe(mxs_req *r, const char *name, const char *version) {
  mxs_version *v = mxs_lookup(r->srv, name, version);
  if (!v) return not_found_model(r, name, version, 0);
  json_t *d = mxs_describe(v);
  mxs_version_unref(v);
  r->allow = "POST, PUT, OPTIONS";
  return mxs_reply_json(r, 200, json_pack("[o]", d));
}

static int only_model(mxs_req *r, char *name, size_t cap) {
  const char *target = mxs_header(r, "X-Amzn-SageMaker-Target-Model");
  if (target) {
    /* multi-model endpoints name the archive: its name without the extension */
    snprintf(name, cap, "%s", target);
    char *dot = strstr(name, ".tar");
    if (dot) *dot = 0;
    return 0;
  }
  int n = 0;
  pthread_rwlock_rdlock(&r->srv->reg_lk);
  n = r->srv->nmodels;
  if (n == 1) snprintf(name, cap, "%s", r->srv->models[0]->name);
  pthread_rwlock_unlock(&r->srv->reg_lk);
  if (n == 1) return 0;
  if (n == 0) return mxs_reply_error(r, 503, NULL, "no model is loaded");
  return mxs_reply_error(r, 400, NULL, "%d models are loaded: name one with "
                         "X-Amzn-SageMaker-Target-Model or use /predictions/{model_name}", n);
}

int mxs_api_inference(mxs_req *r) {
  char seg[8][160];
  int n = split(r->url, seg, 8);
  const char *m = r->method;
  if (n < 0) return mxs_reply_error(r, 404, NULL, "Requested resource is not found, please refer to API document.");
  if (n == 0 && !strcmp(m, "OPTIONS")) return mxs_reply(r, 200, "application/json", OPENAPI, sizeof OPENAPI - 1);
  if (n == 1 && !strcmp(seg[0], "api-description"))
    return mxs_reply(r, 200, "application/json", OPENAPI, sizeof OPENAPI - 1);
  if (n == 1 && !strcmp(seg[0], "ping")) {
    if (strcmp(m, "GET") && strcmp(m, "HEAD")) {
      r->allow = "GET";
      return mxs_reply_error(r, 405, NULL, "/ping takes GET");
    }
    int ready = mxs_all_ready(r->srv), draining = atomic_load(&r->srv->draining);
    if (r->srv->cfg.sagemaker)
      return mxs_reply_json(r, ready && !draining ? 200 : 503,
                            json_pack("{s:s}", "status", ready && !draining ? "Healthy" : "Unhealthy"));
    return mxs_reply_json(r, draining ? 503 : 200,
                          json_pack("{s:s}", "status", draining ? "Unhealthy" : ready || !r->srv->nmodels
                                                                    ? "Healthy" : "Partial Healthy"));
  }
  if (n >= 2 && n <= 3 && !strcmp(seg[0], "predictions")) {
    const char *version = n == 3 ? seg[2] : NULL;
    if (!strcmp(m, "POST") || !strcmp(m, "PUT")) return predict(r, seg[1], version, MXS_KIND_PREDICT);
    if (!strcmp(m, "OPTIONS")) return describe(r, seg[1], version);
    r->allow = "POST, PUT, OPTIONS";
    return mxs_reply_error(r, 405, NULL, "%s %s: predictions take POST or PUT", m, r->url);
  }
  if (n >= 1 && !strcmp(seg[0], "v2")) return v2(r, seg, n);
  if (n == 1 && !strcmp(seg[0], "invocations")) {
    if (strcmp(m, "POST")) {
      r->allow = "POST";
      return mxs_reply_error(r, 405, NULL, "/invocations takes POST");
    }
    char name[160];
    if (only_model(r, name, sizeof name)) return MHD_YES;
    return predict(r, name, NULL, MXS_KIND_INVOCATIONS);
  }
  if (n == 1 && !strcmp(seg[0], "execution-parameters")) {
    int workers = r->srv->cfg.default_workers > 0 ? r->srv->cfg.default_workers : 1;
    return mxs_reply_json(r, 200, json_pack("{s:i,s:s,s:I}", "MaxConcurrentTransforms", workers,
                                            "BatchStrategy", "MULTI_RECORD", "MaxPayloadInMB",
                                            (json_int_t)(r->srv->cfg.max_request_size >> 20)));
  }
  return mxs_reply_error(r, 404, NULL, "Requested resource is not found, please refer to API document.");
}

int mxs_api_metrics(mxs_req *r) {
  if (strcmp(r->url, "/metrics") && strcmp(r->url, "/"))
    return mxs_reply_error(r, 404, NULL, "the metrics are at GET /metrics");
  if (strcmp(r->method, "GET")) {
    r->allow = "GET";
    return mxs_reply_error(r, 405, NULL, "/metrics takes GET");
  }
  size_t len = 0;
  char *text = mxs_metrics_render(r->srv, &len);
  if (!text) return mxs_reply_error(r, 503, NULL, "out of memory");
  int rc = mxs_reply(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
  free(text);
  return rc;
}
