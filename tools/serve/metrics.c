/* metrics.c — counters and histograms, rendered in Prometheus' text format (0.0.4) on
 * the metrics port. Per model version: requests by status, handler errors, worker
 * crashes, queue-full rejections, expired deadlines, and histograms of queue time,
 * inference time (a batch in the worker, preprocess to postprocess), batch size and
 * request latency. Server-wide: requests outside the models by API and status,
 * connections cut by the limits, the process's RSS. Lock-free: relaxed atomics. */
#include "serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int CODES[MXS_NCODES - 1] = {200, 201, 202, 204, 400, 401, 403, 404, 405, 406, 408,
                                          409, 411, 413, 414, 415, 422, 429, 431, 500, 501, 503, 504};

int mxs_code_index(int status) {
  for (int i = 0; i < MXS_NCODES - 1; i++)
    if (CODES[i] == status) return i;
  return MXS_NCODES - 1;
}

/* seconds for the time histograms, counts for batch sizes */
static const double TIME_B[MXS_NBUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                            0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const double SIZE_B[MXS_NBUCKETS] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128,
                                            256, 512};

void mxs_hist_observe(mxs_hist *h, int which, double v) {
  const double *b = which == MXS_H_BATCH ? SIZE_B : TIME_B;
  int k = 0;
  while (k < MXS_NBUCKETS && v > b[k]) k++;
  atomic_fetch_add_explicit(&h->b[k], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
  uint64_t add = which == MXS_H_BATCH ? (uint64_t)v : (uint64_t)(v * 1e6 + 0.5);
  atomic_fetch_add_explicit(&h->sum_us, add, memory_order_relaxed);
}

static _Atomic uint64_t http_status[MXS_NAPI][MXS_NCODES];
static _Atomic uint64_t cuts[MXS_NCUT];

void mxs_metrics_http(int api, int status) {
  if (api < 0 || api >= MXS_NAPI) return;
  atomic_fetch_add_explicit(&http_status[api][mxs_code_index(status)], 1, memory_order_relaxed);
}

void mxs_metrics_cut(int reason) {
  if (reason >= 0 && reason < MXS_NCUT)
    atomic_fetch_add_explicit(&cuts[reason], 1, memory_order_relaxed);
}

static uint64_t ld(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_relaxed); }

static const char *code_label(int i, char *buf) {
  if (i == MXS_NCODES - 1) return "other";
  snprintf(buf, 8, "%d", CODES[i]);
  return buf;
}

typedef struct render {
  mxs_buf b;
  int pass; /* one metric family per pass over the versions */
} render;

static void hist_lines(mxs_buf *b, const char *name, const char *labels, mxs_hist *h, int which) {
  const double *bk = which == MXS_H_BATCH ? SIZE_B : TIME_B;
  uint64_t cum = 0;
  for (int k = 0; k < MXS_NBUCKETS; k++) {
    cum += ld(&h->b[k]);
    mxs_buf_printf(b, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, bk[k], (unsigned long long)cum);
  }
  cum += ld(&h->b[MXS_NBUCKETS]);
  mxs_buf_printf(b, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
  uint64_t s = ld(&h->sum_us);
  if (which == MXS_H_BATCH) mxs_buf_printf(b, "%s_sum{%s} %llu\n", name, labels, (unsigned long long)s);
  else mxs_buf_printf(b, "%s_sum{%s} %.6f\n", name, labels, (double)s * 1e-6);
  mxs_buf_printf(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cum);
}

static const char *HIST_NAME[MXS_NHIST] = {"mx_serve_queue_seconds", "mx_serve_inference_seconds",
                                           "mx_serve_batch_size", "mx_serve_request_seconds"};
static const char *HIST_HELP[MXS_NHIST] = {
    "Time requests waited in the model's queue before their batch started.",
    "Time a batch took in the worker (preprocess, inference, postprocess).",
    "Requests per batch the worker ran.",
    "Time from the request's arrival to its answer."};

static void version_lines(mxs_version *v, int is_def, void *u) {
  render *r = u;
  (void)is_def;
  char labels[400];
  snprintf(labels, sizeof labels, "model=\"%s\",version=\"%s\"", v->name, v->version);
  mxs_buf *b = &r->b;
  switch (r->pass) {
  case 0:
    for (int i = 0; i < MXS_NCODES; i++) {
      uint64_t n = ld(&v->m.status[i]);
      char cb[8];
      if (n) mxs_buf_printf(b, "mx_serve_requests_total{%s,code=\"%s\"} %llu\n", labels,
                            code_label(i, cb), (unsigned long long)n);
    }
    break;
  case 1:
    mxs_buf_printf(b, "mx_serve_handler_errors_total{%s} %llu\n", labels,
                   (unsigned long long)ld(&v->m.handler_errors));
    break;
  case 2:
    mxs_buf_printf(b, "mx_serve_worker_crashes_total{%s} %llu\n", labels,
                   (unsigned long long)ld(&v->m.worker_crashes));
    break;
  case 3:
    mxs_buf_printf(b, "mx_serve_rejected_total{%s,reason=\"queue_full\"} %llu\n", labels,
                   (unsigned long long)ld(&v->m.rejected_full));
    mxs_buf_printf(b, "mx_serve_rejected_total{%s,reason=\"deadline\"} %llu\n", labels,
                   (unsigned long long)ld(&v->m.deadline_expired));
    break;
  case 4: {
    pthread_mutex_lock(&v->mu);
    int qlen = v->qlen, ready = 0, n = v->nworkers;
    for (int i = 0; i < n; i++) {
      int st = atomic_load(&v->workers[i]->state);
      ready += st == MXS_W_READY || st == MXS_W_BUSY;
    }
    pthread_mutex_unlock(&v->mu);
    mxs_buf_printf(b, "mx_serve_queue_depth{%s} %d\n", labels, qlen);
    mxs_buf_printf(b, "mx_serve_workers{%s,state=\"ready\"} %d\n", labels, ready);
    mxs_buf_printf(b, "mx_serve_workers{%s,state=\"all\"} %d\n", labels, n);
    break;
  }
  default: {
    int h = r->pass - 5;
    if (h >= 0 && h < MXS_NHIST) hist_lines(b, HIST_NAME[h], labels, &v->m.h[h], h);
  }
  }
}

char *mxs_metrics_render(mxs_server *s, size_t *len) {
  render r = {0};
  mxs_buf *b = &r.b;
  static const char *HEAD[5] = {
      "# HELP mx_serve_requests_total Inference requests answered, by model, version and status.\n"
      "# TYPE mx_serve_requests_total counter\n",
      "# HELP mx_serve_handler_errors_total Batches whose handler raised an error (answered 500).\n"
      "# TYPE mx_serve_handler_errors_total counter\n",
      "# HELP mx_serve_worker_crashes_total Worker processes that died and were restarted.\n"
      "# TYPE mx_serve_worker_crashes_total counter\n",
      "# HELP mx_serve_rejected_total Requests refused: queue full (503) or deadline passed (504).\n"
      "# TYPE mx_serve_rejected_total counter\n",
      "# HELP mx_serve_queue_depth Requests waiting in the model's queue.\n"
      "# TYPE mx_serve_queue_depth gauge\n"
      "# HELP mx_serve_workers Worker processes of the model version.\n"
      "# TYPE mx_serve_workers gauge\n"};
  for (r.pass = 0; r.pass < 5 + MXS_NHIST; r.pass++) {
    if (r.pass < 5) mxs_buf_str(b, HEAD[r.pass]);
    else {
      int h = r.pass - 5;
      mxs_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", HIST_NAME[h], HIST_HELP[h],
                     HIST_NAME[h]);
    }
    mxs_each_version(s, version_lines, &r);
  }
  static const char *API[MXS_NAPI] = {"inference", "management", "metrics"};
  mxs_buf_str(b, "# HELP mx_serve_http_requests_total Requests answered by the server itself "
                 "(not a model), by API and status.\n# TYPE mx_serve_http_requests_total counter\n");
  for (int a = 0; a < MXS_NAPI; a++)
    for (int i = 0; i < MXS_NCODES; i++) {
      uint64_t n = ld(&http_status[a][i]);
      char cb[8];
      if (n) mxs_buf_printf(b, "mx_serve_http_requests_total{api=\"%s\",code=\"%s\"} %llu\n",
                            API[a], code_label(i, cb), (unsigned long long)n);
    }
  static const char *CUT[MXS_NCUT] = {"header_timeout", "body_timeout", "idle_timeout"};
  mxs_buf_str(b, "# HELP mx_serve_connections_cut_total Connections closed by the server's "
                 "time limits.\n# TYPE mx_serve_connections_cut_total counter\n");
  for (int i = 0; i < MXS_NCUT; i++)
    mxs_buf_printf(b, "mx_serve_connections_cut_total{reason=\"%s\"} %llu\n", CUT[i],
                   (unsigned long long)ld(&cuts[i]));
  mxs_buf_printf(b, "# HELP mx_serve_pending_requests Requests waiting for a worker's answer.\n"
                    "# TYPE mx_serve_pending_requests gauge\nmx_serve_pending_requests %d\n",
                 atomic_load(&s->pending));
  mxs_buf_printf(b, "# HELP process_resident_memory_bytes Resident memory of the front end.\n"
                    "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n",
                 (long long)mxs_rss_bytes());
  mxs_buf_printf(b, "# HELP process_start_time_seconds Start of the front end (Unix time).\n"
                    "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
                 s->started);
  if (b->oom) {
    mxs_buf_free(b);
    return NULL;
  }
  *len = b->n;
  return b->p;
}
