/* http.c — the three HTTP daemons (inference, management, metrics) on libmicrohttpd,
 * the per-request context (body accumulation, its size limit, multipart parts), the
 * time limits and the answers.
 *
 * Time limits: libmicrohttpd only knows an idle timeout, which a client trickling one
 * byte at a time never reaches. Each connection therefore carries a phase and the time
 * it entered it (idle -> request line seen -> headers done / body -> waiting for a worker
 * -> sending); a reaper thread shuts down (shutdown(2), never close: the daemon owns the
 * socket and closes it itself) connections that stay too long in any phase but
 * "waiting", whose bound is the request's deadline (batch.c). A connection record goes
 * in the daemon's closed notification, which runs before the socket is closed, under the
 * reaper's lock: the reaper never touches a descriptor that was already reused.
 *
 * Inference requests are answered asynchronously: the access handler suspends the
 * connection and queues a job (batch.c); the proxy thread that runs its batch answers
 * the job and resumes the connection, and the handler, called again, queues the answer. */
#include "serve.h"

#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { PH_IDLE, PH_HEADERS, PH_BODY, PH_WAIT, PH_SEND };

typedef struct mxs_conn {
  int fd;
  int phase;
  double since;
  int cut;
  struct mxs_conn *prev, *next;
} mxs_conn;

static pthread_mutex_t conn_mu = PTHREAD_MUTEX_INITIALIZER;
static mxs_conn *conn_head;
static pthread_t reaper;
static _Atomic int reaper_stop;
static int reaper_started;

typedef struct api_ctx {
  mxs_server *srv;
  int api;
} api_ctx;
static api_ctx ACTX[MXS_NAPI];

static void set_phase(mxs_conn *c, int ph) {
  if (!c) return;
  pthread_mutex_lock(&conn_mu);
  c->phase = ph;
  c->since = mxs_now();
  pthread_mutex_unlock(&conn_mu);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  (void)cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    mxs_conn *c = calloc(1, sizeof *c);
    if (!c) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c->fd = ci ? ci->connect_fd : -1;
    c->phase = PH_IDLE;
    c->since = mxs_now();
    pthread_mutex_lock(&conn_mu);
    c->next = conn_head;
    if (conn_head) conn_head->prev = c;
    conn_head = c;
    pthread_mutex_unlock(&conn_mu);
    *socket_context = c;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    mxs_conn *c = *socket_context;
    if (!c) return;
    pthread_mutex_lock(&conn_mu);
    if (c->prev) c->prev->next = c->next;
    else conn_head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&conn_mu);
    free(c);
    *socket_context = NULL;
  }
}

static mxs_conn *conn_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* the request line arrived: the headers' clock starts */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  (void)cls;
  (void)uri;
  set_phase(conn_of(conn), PH_HEADERS);
  return NULL;
}

static void *reaper_main(void *arg) {
  mxs_server *s = arg;
  while (!atomic_load(&reaper_stop)) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    double now = mxs_now();
    pthread_mutex_lock(&conn_mu);
    for (mxs_conn *c = conn_head; c; c = c->next) {
      if (c->cut || c->fd < 0) continue;
      double lim;
      int why;
      switch (c->phase) {
      case PH_IDLE: lim = s->cfg.idle_timeout_s; why = MXS_CUT_IDLE; break;
      case PH_HEADERS: lim = s->cfg.header_timeout_s; why = MXS_CUT_HEADER; break;
      case PH_BODY:
      case PH_SEND: lim = s->cfg.body_timeout_s; why = MXS_CUT_BODY; break;
      default: continue;
      }
      if (now - c->since > lim) {
        shutdown(c->fd, SHUT_RDWR);
        c->cut = 1;
        mxs_metrics_cut(why);
      }
    }
    pthread_mutex_unlock(&conn_mu);
  }
  return NULL;
}

/* ---- answers ----------------------------------------------------------------------- */
static int queue(mxs_req *r, int status, const char *ctype, const void *body, size_t len,
                 int retry_after, int copy) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      len, (void *)body, copy ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_MUST_FREE);
  if (!resp) return MHD_NO;
  if (ctype) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (retry_after > 0) {
    char ra[16];
    snprintf(ra, sizeof ra, "%d", retry_after);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
  }
  if (r->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
  if (atomic_load(&r->srv->draining)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  set_phase(r->cn, PH_SEND);
  int rc = MHD_queue_response(r->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

int mxs_reply(mxs_req *r, int status, const char *ctype, const void *body, size_t len) {
  mxs_metrics_http(r->api, status);
  return queue(r, status, ctype, body, len, status == 503 ? 1 : 0, 1);
}

int mxs_reply_json(mxs_req *r, int status, json_t *json) {
  char *text = json ? json_dumps(json, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(json);
  if (!text) return mxs_reply(r, 500, "text/plain", "out of memory\n", 14);
  size_t n = strlen(text);
  mxs_metrics_http(r->api, status);
  return queue(r, status, "application/json", text, n, status == 503 ? 1 : 0, 0);
}

static const char *default_type(int status) {
  switch (status) {
  case 400: return "BadRequestException";
  case 401: return "UnauthorizedException";
  case 403: return "ForbiddenException";
  case 404: return "ResourceNotFoundException";
  case 405: return "MethodNotAllowedException";
  case 409: return "ConflictStatusException";
  case 413: return "RequestEntityTooLargeException";
  case 415: return "UnsupportedMediaTypeException";
  case 503: return "ServiceUnavailableException";
  case 504: return "RequestTimeoutException";
  default: return "InternalServerException";
  }
}

int mxs_reply_error(mxs_req *r, int status, const char *type, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = mxs_vprintf(fmt, ap);
  va_end(ap);
  json_t *j = json_pack("{s:i,s:s,s:s}", "code", status, "type", type ? type : default_type(status),
                        "message", msg ? msg : "");
  free(msg);
  return mxs_reply_json(r, status, j);
}

int mxs_reply_v2_error(mxs_req *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = mxs_vprintf(fmt, ap);
  va_end(ap);
  json_t *j = json_pack("{s:s}", "error", msg ? msg : "");
  free(msg);
  return mxs_reply_json(r, status, j);
}

const char *mxs_header(mxs_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *mxs_query(mxs_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- jobs -------------------------------------------------------------------------- */
static void do_suspend(void *arg) { MHD_suspend_connection(arg); }

int mxs_submit(mxs_req *r, mxs_job *j, int reroute) {
  j->conn = r->conn;
  j->t_arrive = r->t_start;
  r->job = j;
  atomic_fetch_add(&r->srv->pending, 1);
  int st = mxs_enqueue_suspend(j->v, j, do_suspend, r->conn);
  if (st == 1 && reroute) {
    mxs_version *nv = mxs_lookup(r->srv, j->v->name, NULL);
    if (nv && nv != j->v) {
      mxs_version_unref(j->v);
      j->v = nv;
      st = mxs_enqueue_suspend(nv, j, do_suspend, r->conn);
    } else if (nv) {
      mxs_version_unref(nv);
    }
  }
  if (st == 1) mxs_job_fail(j, 503, "model %s version %s is being removed", j->v->name, j->v->version);
  if (st == 0) return MHD_YES;
  atomic_fetch_sub(&r->srv->pending, 1);
  /* refused before suspension: answer now (the job's own error body) */
  r->job = NULL;
  int rc = queue(r, j->status, j->ctype, j->body, j->body_len, j->retry_after, 1);
  mxs_job_free(j);
  return rc;
}

void mxs_http_resume(mxs_job *j) { MHD_resume_connection(j->conn); }

int mxs_http_pending(mxs_server *s) { return atomic_load(&s->pending); }

/* ---- request bodies ---------------------------------------------------------------- */
static void req_fail(mxs_req *r, int status, const char *msg) {
  if (r->failed) return;
  r->failed = 1;
  r->fail_status = status;
  r->fail_msg = mxs_strdup(msg);
}

static int body_add(mxs_req *r, const char *p, size_t n) {
  if (r->body_len + n > r->srv->cfg.max_request_size) {
    char m[200];
    snprintf(m, sizeof m, "the request body is larger than the limit of %zu bytes",
             r->srv->cfg.max_request_size);
    req_fail(r, 413, m);
    return -1;
  }
  if (r->body_len + n + 1 > r->body_cap) {
    size_t cap = r->body_cap ? r->body_cap : 4096;
    while (cap < r->body_len + n + 1) cap *= 2;
    if (cap > r->srv->cfg.max_request_size + 1) cap = r->srv->cfg.max_request_size + 1;
    char *q = realloc(r->body, cap);
    if (!q) {
      req_fail(r, 503, "out of memory for the request body");
      return -1;
    }
    r->body = q;
    r->body_cap = cap;
  }
  memcpy(r->body + r->body_len, p, n);
  r->body_len += n;
  r->body[r->body_len] = 0;
  return 0;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *ctype, const char *enc,
                               const char *data, uint64_t off, size_t size) {
  mxs_req *r = cls;
  (void)kind;
  (void)enc;
  mxs_part *last = r->nparts ? &r->parts[r->nparts - 1] : NULL;
  if (!last || off == 0 || strcmp(last->name, key ? key : "")) {
    if (r->nparts >= 256) {
      req_fail(r, 400, "multipart body with more than 256 parts");
      return MHD_NO;
    }
    if (r->nparts == r->pcap) {
      int cap = r->pcap ? r->pcap * 2 : 4;
      mxs_part *np = realloc(r->parts, (size_t)cap * sizeof *np);
      if (!np) return MHD_NO;
      r->parts = np;
      r->pcap = cap;
    }
    last = &r->parts[r->nparts++];
    last->name = mxs_strdup(key ? key : "");
    last->filename = filename ? mxs_strdup(filename) : NULL;
    last->ctype = ctype ? mxs_strdup(ctype) : NULL;
    last->off = r->body_len;
    last->len = 0;
  }
  if (size && body_add(r, data, size)) return MHD_NO;
  last->len += size;
  return MHD_YES;
}

static int has_body(const char *method) {
  return !strcmp(method, "POST") || !strcmp(method, "PUT");
}

static void req_free(mxs_req *r) {
  if (r->pp) MHD_destroy_post_processor(r->pp);
  for (int i = 0; i < r->nparts; i++) {
    free(r->parts[i].name);
    free(r->parts[i].filename);
    free(r->parts[i].ctype);
  }
  free(r->parts);
  free(r->body);
  free(r->fail_msg);
  if (r->job) mxs_job_free(r->job);
  free(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)toe;
  mxs_req *r = *con_cls;
  set_phase(conn_of(conn), PH_IDLE);
  if (!r) return;
  req_free(r);
  *con_cls = NULL;
}

static int first_call(mxs_req *r) {
  mxs_server *s = r->srv;
  if (r->api == MXS_API_INFERENCE && atomic_load(&s->draining))
    return mxs_reply_error(r, 503, NULL, "the server is shutting down");
  if (r->api == MXS_API_MANAGEMENT && s->cfg.token) {
    const char *auth = mxs_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    size_t tl = strlen(s->cfg.token);
    int ok = auth && !strncmp(auth, "Bearer ", 7) && strlen(auth + 7) == tl;
    /* compare every byte: no early exit to time */
    unsigned diff = 0;
    for (size_t i = 0; ok && i < tl; i++) diff |= (unsigned)(auth[7 + i] ^ s->cfg.token[i]);
    if (!ok || diff)
      return mxs_reply_error(r, 401, NULL, "the management API needs 'Authorization: Bearer <token>' "
                             "with the server's token");
  }
  const char *cl = mxs_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    if (errno || *end || cl[0] == '-')
      return mxs_reply_error(r, 400, NULL, "malformed Content-Length '%s'", cl);
    if (n > s->cfg.max_request_size)
      return mxs_reply_error(r, 413, NULL, "the request body of %llu bytes is larger than the limit "
                             "of %zu bytes", n, s->cfg.max_request_size);
  }
  const char *ct = mxs_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (has_body(r->method) && ct && !strncasecmp(ct, "multipart/form-data", 19)) {
    r->multipart = 1;
    r->pp = MHD_create_post_processor(r->conn, 64 * 1024, on_part, r);
    if (!r->pp)
      return mxs_reply_error(r, 400, NULL, "multipart/form-data without a usable boundary "
                             "(Content-Type: %s)", ct);
  }
  return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls) {
  api_ctx *ac = cls;
  (void)version;
  mxs_req *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    if (!r) return MHD_NO;
    r->srv = ac->srv;
    r->api = ac->api;
    r->conn = conn;
    r->cn = conn_of(conn);
    r->method = method;
    r->url = url;
    r->t_start = mxs_now();
    *con_cls = r;
    set_phase(r->cn, PH_BODY);
    return (enum MHD_Result)first_call(r);
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->failed) return MHD_YES; /* the rest is read and dropped: the error answers */
    if (r->pp) {
      if (MHD_post_process(r->pp, upload, n) != MHD_YES)
        req_fail(r, 400, "malformed multipart/form-data body");
    } else {
      body_add(r, upload, n);
    }
    return MHD_YES;
  }
  if (r->job) {
    /* resumed: the job is answered */
    mxs_job *j = r->job;
    int rc = queue(r, j->status, j->ctype, j->body, j->body_len, j->retry_after, 0);
    j->body = NULL;
    atomic_fetch_sub(&r->srv->pending, 1);
    return (enum MHD_Result)rc;
  }
  if (r->pp) {
    int ok = MHD_destroy_post_processor(r->pp) == MHD_YES;
    r->pp = NULL;
    if (!ok) req_fail(r, 400, "truncated multipart/form-data body (the closing boundary is missing)");
    else if (!r->failed && r->nparts == 0) req_fail(r, 400, "multipart/form-data body with no part");
  }
  if (r->failed) return (enum MHD_Result)mxs_reply_error(r, r->fail_status, NULL, "%s", r->fail_msg ? r->fail_msg : "bad request");
  set_phase(r->cn, PH_WAIT);
  switch (r->api) {
  case MXS_API_INFERENCE: return (enum MHD_Result)mxs_api_inference(r);
  case MXS_API_MANAGEMENT: return (enum MHD_Result)mxs_api_management(r);
  default: return (enum MHD_Result)mxs_api_metrics(r);
  }
}

/* ---- daemons ----------------------------------------------------------------------- */
static const char *addr_of(mxs_server *s, int api) {
  return api == MXS_API_INFERENCE ? s->cfg.inference_addr
         : api == MXS_API_MANAGEMENT ? s->cfg.management_addr : s->cfg.metrics_addr;
}

int mxs_http_start(mxs_server *s) {
  static const char *NAME[MXS_NAPI] = {"inference", "management", "metrics"};
  for (int api = 0; api < MXS_NAPI; api++) {
    const char *a = addr_of(s, api);
    if (!a || !*a || !strcmp(a, "off")) continue;
    struct sockaddr_storage sa;
    int fam;
    char err[300];
    if (mxs_parse_addr(a, &sa, sizeof sa, &fam, err, sizeof err)) {
      mxs_log("%s", err);
      return -1;
    }
    ACTX[api].srv = s;
    ACTX[api].api = api;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | (fam == AF_INET6 ? MHD_USE_IPv6 : 0);
    int threads = api == MXS_API_INFERENCE ? s->cfg.http_threads : 1;
    struct MHD_OptionItem ops[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &sa},
        {MHD_OPTION_CONNECTION_TIMEOUT, s->cfg.idle_timeout_s + s->cfg.body_timeout_s + 5, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, s->cfg.max_connections, NULL},
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 64 * 1024, NULL},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, NULL},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        {MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL},
        /* a pool of one is the daemon's own thread: the option is then left out */
        {threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL},
        {MHD_OPTION_END, 0, NULL}};
    s->d[api] = MHD_start_daemon(flags, 0, NULL, NULL, on_access, &ACTX[api], MHD_OPTION_ARRAY,
                                 ops, MHD_OPTION_END);
    if (!s->d[api]) {
      mxs_log("cannot listen on %s (%s API): %s", a, NAME[api], strerror(errno));
      return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d[api], MHD_DAEMON_INFO_BIND_PORT);
    s->port[api] = di ? di->port : 0;
    mxs_log("%s API on %s (port %d)", NAME[api], a, s->port[api]);
  }
  if (pthread_create(&reaper, NULL, reaper_main, s) == 0) reaper_started = 1;
  return 0;
}

void mxs_http_quiesce(mxs_server *s) {
  for (int api = 0; api < MXS_NAPI; api++)
    if (s->d[api]) {
      MHD_socket fd = MHD_quiesce_daemon(s->d[api]);
      if (fd != MHD_INVALID_SOCKET) close(fd);
    }
}

void mxs_http_stop(mxs_server *s) {
  for (int api = 0; api < MXS_NAPI; api++)
    if (s->d[api]) {
      MHD_stop_daemon(s->d[api]);
      s->d[api] = NULL;
    }
  if (reaper_started) {
    atomic_store(&reaper_stop, 1);
    pthread_join(reaper, NULL);
    reaper_started = 0;
  }
}
