/* serve.h — mx-serve's front end (docs/serving.md; docs/design/serving.md): what its
 * modules share. The front end speaks HTTP (libmicrohttpd), keeps the model registry,
 * queues and batches requests and hands batches to worker processes (mx-serve-worker,
 * worker.c), each running one model version's handler in its own LuaJIT state over
 * the C inference runtime. It links neither libmx nor LuaJIT.
 *
 * Threads: the HTTP daemons' pools (http.c), one proxy thread per worker process
 * (batch.c), the connection reaper (http.c) and the main thread (signals, drain). The
 * registry is guarded by one rwlock; each version's queue and worker list by its mutex.
 * A job (one HTTP request waiting for inference) is owned by its HTTP request context;
 * the proxy thread that took it only writes its answer and resumes the connection. */
#ifndef MXS_SERVE_H
#define MXS_SERVE_H

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct MHD_Connection;
struct MHD_Daemon;

/* ---- utilities (util.c) ------------------------------------------------------- */
double mxs_now(void);                 /* monotonic seconds */
double mxs_wall(void);                /* seconds since the epoch */
void mxs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *mxs_strdup(const char *s);      /* NULL for NULL or out of memory */
char *mxs_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *mxs_vprintf(const char *fmt, va_list ap);
/* A growing byte buffer; oom set (and further appends ignored) when memory runs out. */
typedef struct mxs_buf {
  char *p;
  size_t n, cap;
  int oom;
} mxs_buf;
void mxs_buf_add(mxs_buf *b, const void *p, size_t n);
void mxs_buf_str(mxs_buf *b, const char *s);
void mxs_buf_printf(mxs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mxs_buf_free(mxs_buf *b);
/* Model and version names: 1..128 of [A-Za-z0-9_.-], not starting with '.'. */
int mxs_valid_name(const char *s);
/* Removes a directory tree (no symlink followed). 0 or -1. */
int mxs_rmtree(const char *dir);
/* Parses "host:port" / "[v6]:port" / "port" into a socket address (family in *fam). */
int mxs_parse_addr(const char *s, void *sa, size_t cap, int *fam, char *err, size_t errcap);
/* Integer query/option values: -1 on a malformed value (a message in err). */
int mxs_parse_int(const char *s, long lo, long hi, long *out);
/* RSS of this process in bytes (/proc/self/statm), 0 if unknown. */
int64_t mxs_rss_bytes(void);

/* ---- configuration (main.c) --------------------------------------------------- */
typedef struct mxs_config {
  const char *inference_addr, *management_addr, *metrics_addr;
  const char *model_store;   /* archives POST /models may name (NULL: none) */
  const char *token;         /* management API bearer token (NULL: none) */
  const char *worker_bin;    /* mx-serve-worker */
  const char *port_file;     /* the bound ports as JSON, written once listening */
  size_t max_request_size;   /* body bytes (413 above) */
  int header_timeout_s;      /* request line + headers must arrive within this */
  int body_timeout_s;        /* the body must arrive within this */
  int idle_timeout_s;        /* keep-alive connections idle longer are closed */
  int max_connections;
  int http_threads;
  int queue_size;            /* default per version */
  int default_workers;       /* initial_workers when a registration names none */
  int deadline_ms;           /* default per-request deadline (response_timeout) */
  int default_batch_size;    /* for archives that name none */
  int default_batch_delay_ms;
  int drain_timeout_s;       /* SIGTERM: in-flight work gets this long */
  int worker_start_timeout_s;
  int worker_threads;        /* intra-op threads of one worker (0: cores / workers) */
  int64_t max_image_pixels;  /* passed to handlers (ctx.limits) */
  int sagemaker;             /* SageMaker's contract: /ping, /invocations */
  const char *sagemaker_root; /* the model directory (/opt/ml/model) */
} mxs_config;

/* ---- metrics (metrics.c) ------------------------------------------------------ */
enum { MXS_H_QUEUE, MXS_H_INFER, MXS_H_BATCH, MXS_H_LATENCY, MXS_NHIST };
#define MXS_NBUCKETS 16
typedef struct mxs_hist {
  _Atomic uint64_t b[MXS_NBUCKETS + 1]; /* cumulative counts are made at render time */
  _Atomic uint64_t count;
  _Atomic uint64_t sum_us;              /* for sizes: the sum itself */
} mxs_hist;
#define MXS_NCODES 24
typedef struct mxs_vmetrics {
  _Atomic uint64_t status[MXS_NCODES];   /* by mxs_code_index */
  _Atomic uint64_t handler_errors;       /* batches whose handler raised */
  _Atomic uint64_t worker_crashes;
  _Atomic uint64_t rejected_full;        /* 503: queue full */
  _Atomic uint64_t deadline_expired;
  mxs_hist h[MXS_NHIST];
} mxs_vmetrics;
int mxs_code_index(int status);
void mxs_hist_observe(mxs_hist *h, int which, double v);
/* Requests answered outside any model version (ping, management, 404s...). */
void mxs_metrics_http(int api, int status);
void mxs_metrics_cut(int reason);      /* connections cut: MXS_CUT_* */
enum { MXS_CUT_HEADER, MXS_CUT_BODY, MXS_CUT_IDLE, MXS_NCUT };
struct mxs_server;
char *mxs_metrics_render(struct mxs_server *s, size_t *len);

/* ---- the registry (models.c) -------------------------------------------------- */
enum { MXS_V_LOADING, MXS_V_READY, MXS_V_FAILED, MXS_V_STOPPING };
typedef struct mxs_job mxs_job;
typedef struct mxs_worker mxs_worker;
typedef struct mxs_model mxs_model;
typedef struct mxs_version {
  _Atomic int refs;
  struct mxs_server *srv;
  char *name, *version, *url, *dir, *handler;
  int own_dir;                 /* dir is an extraction of a tar: removed with the version */
  json_t *manifest;
  json_t *signature;           /* {"inputs": [...], "outputs": [...]} (sig_mu) */
  pthread_mutex_t sig_mu;
  int batch_size, max_batch_delay_ms, deadline_ms, queue_cap, min_workers, max_workers;
  double registered_at;
  _Atomic int state;
  char fail_msg[512];          /* the last worker start failure (mu) */
  /* the queue and the workers (mu) */
  pthread_mutex_t mu;
  pthread_cond_t cv;           /* jobs arrived, or stop */
  pthread_cond_t state_cv;     /* a worker became ready or failed, a batch finished */
  mxs_job **q;
  int qhead, qlen;
  int inflight;                /* jobs taken by proxies and not answered */
  int draining;                /* no new jobs; queued ones still run */
  mxs_worker **workers;
  int nworkers, wcap;
  int next_worker_id;
  mxs_vmetrics m;
} mxs_version;
struct mxs_model {
  char *name;
  mxs_version **v;
  int nv;
  mxs_version *def;
};
typedef struct mxs_reg_args {
  const char *url;             /* archive: a directory or a tar, under the model store */
  const char *path;            /* or an explicit path (startup models, SageMaker) */
  const char *model_name;      /* NULL: the manifest's */
  const char *handler;         /* NULL: the manifest's */
  int batch_size, max_batch_delay_ms, initial_workers, deadline_ms; /* -1: default */
  int synchronous;
} mxs_reg_args;
int mxs_register(struct mxs_server *s, const mxs_reg_args *a, char *msg, size_t cap,
                 mxs_version **out);
/* name's version (NULL: the default) with a reference; NULL if none. */
mxs_version *mxs_lookup(struct mxs_server *s, const char *name, const char *version);
void mxs_version_ref(mxs_version *v);
void mxs_version_unref(mxs_version *v);
/* Status codes: 200, 404 (no such model/version), 403 (default version of several). */
int mxs_unregister(struct mxs_server *s, const char *name, const char *version, char *msg,
                   size_t cap);
int mxs_set_default(struct mxs_server *s, const char *name, const char *version, char *msg,
                    size_t cap);
int mxs_scale(mxs_version *v, int min_w, int max_w, int synchronous, char *msg, size_t cap);
json_t *mxs_describe(mxs_version *v);
/* Calls fn for every version (the registry read-locked): the default first per model. */
void mxs_each_version(struct mxs_server *s, void (*fn)(mxs_version *v, int is_def, void *u),
                      void *u);
json_t *mxs_list_models(struct mxs_server *s, long limit, long token, long *next);
/* Stops every version (drain then worker shutdown); returns when they are gone or the
 * deadline passed. */
void mxs_registry_shutdown(struct mxs_server *s, double deadline);
/* Every version ready (for readiness probes); 0 if none is registered. */
int mxs_all_ready(struct mxs_server *s);

/* ---- jobs, batching and workers (batch.c, wproc.c) ----------------------------- */
enum { MXS_KIND_PREDICT, MXS_KIND_V2, MXS_KIND_INVOCATIONS };
struct mxs_job {
  struct MHD_Connection *conn;
  mxs_version *v;              /* reference */
  int kind;
  char *meta;                  /* the request's description for the handler (JSON) */
  size_t meta_len;
  char *blob;                  /* its bytes: the body, the form parts or the tensors */
  size_t blob_len;
  double t_arrive, t_enqueue, t_deadline;
  /* the answer */
  int status;
  char *ctype;
  char *body;
  size_t body_len;
  int retry_after;             /* seconds, 0: no header */
  _Atomic int done;
  int suspended;
};
/* Queues j (its v set, a reference) and, under the queue's lock, suspends its connection
 * (suspend(arg)) so that no answer can come before the suspension. 0: queued; 1: the
 * version is being removed (j untouched: route it again); else the HTTP status j was
 * answered with, unsuspended (503 queue full or no worker). */
int mxs_enqueue_suspend(mxs_version *v, mxs_job *j, void (*suspend)(void *), void *arg);
/* Answers j (body owned by the job from now on) and resumes its connection. */
void mxs_job_answer(mxs_job *j, int status, const char *ctype, char *body, size_t len);
void mxs_job_fail(mxs_job *j, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void mxs_job_free(mxs_job *j);

enum { MXS_W_STARTING, MXS_W_READY, MXS_W_BUSY, MXS_W_RESTARTING, MXS_W_STOPPED };
struct mxs_worker {
  mxs_version *v;
  int id;
  pthread_t th;
  _Atomic int state;
  _Atomic int stop;            /* finish the batch in hand, then shut the process down */
  _Atomic pid_t pid;
  int fd;
  double started;
  _Atomic int restarts;
  char last_error[512];
};
/* Workers not told to stop; v->mu held. */
int mxs_active_workers(mxs_version *v);
/* Starts a worker (its proxy thread spawns the process); v->mu held by the caller. */
int mxs_worker_add(mxs_version *v);
/* Tells the newest worker to stop; v->mu held. */
void mxs_worker_stop_one(mxs_version *v);
/* Joins workers that stopped (v->mu not held). */
void mxs_worker_reap(mxs_version *v);
void *mxs_worker_thread(void *arg);

/* wproc.c: the worker process. */
typedef struct mxs_batch_out {
  int status;
  char *ctype, *body;
  size_t body_len;
} mxs_batch_out;
/* Spawns mx-serve-worker for v with one end of a socketpair; waits for its READY (the
 * signature it reports is merged into v->signature). 0, or -1 with msg set. */
int mxs_wproc_start(mxs_worker *w, char *msg, size_t cap);
/* Sends a batch; 0 or -1 (the process is gone). */
int mxs_wproc_send(mxs_worker *w, uint64_t id, mxs_job **jobs, int n);
/* Reads the batch's answer until deadline: 0 (outs filled, n of them; *raised set when
 * the handler raised on the batch, its answers then carry the error), 1 (the worker's
 * glue failed: *errmsg malloc'd), -1 (the process died: msg), -2 (deadline passed). */
int mxs_wproc_recv(mxs_worker *w, uint64_t id, int n, mxs_batch_out *outs, int *raised,
                   char **errmsg, double deadline, char *msg, size_t cap);
/* Ends the process: a STOP message and grace seconds, then SIGKILL; reaps it. */
void mxs_wproc_stop(mxs_worker *w, double grace);
/* Describes how the process ended ("exited with status 3", "killed by signal 11"). */
void mxs_wproc_reap(mxs_worker *w, char *msg, size_t cap);

/* ---- archives (archive.c) ----------------------------------------------------- */
/* Opens an archive (a directory or a tar/tar.gz): *dir is the directory holding its
 * files (a new extraction under tmp when a tar: *own set), *manifest its parsed and
 * checked MANIFEST.json. 0 or -1 with msg. */
int mxs_archive_open(const char *path, char **dir, int *own, json_t **manifest, char *msg,
                     size_t cap);
int mxs_manifest_check(json_t *m, const char *dir, char *msg, size_t cap);
int mxs_archive_main(int argc, char **argv);

/* ---- KServe v2 tensors (v2.c) -------------------------------------------------- */
/* Parses an infer request body into the job's meta (JSON: inputs with offsets into the
 * blob, requested outputs, id) and blob (the tensors' bytes, little-endian row-major),
 * checking it against the version's signature. 0, or an HTTP status (400) with msg. */
int mxs_v2_parse(mxs_version *v, const char *body, size_t len, mxs_job *j, char *msg,
                 size_t cap);
const char *mxs_v2_dtype_name(const char *luamx_dtype); /* "float32" -> "FP32" */

/* ---- HTTP (http.c) ------------------------------------------------------------ */
enum { MXS_API_INFERENCE, MXS_API_MANAGEMENT, MXS_API_METRICS, MXS_NAPI };
typedef struct mxs_part {
  char *name, *filename, *ctype;
  size_t off, len;             /* into the request body buffer */
} mxs_part;
typedef struct mxs_req {
  struct mxs_server *srv;
  struct MHD_Connection *conn;
  struct mxs_conn *cn;
  int api;
  const char *method, *url;
  char *body;
  size_t body_len, body_cap;
  struct MHD_PostProcessor *pp;
  int multipart;
  mxs_part *parts;
  int nparts, pcap;
  int failed;                  /* an error answer is queued / to be queued */
  int fail_status;
  char *fail_msg;
  mxs_job *job;
  double t_start;
  const char *allow;           /* an Allow header for the answer (405, OPTIONS) */
} mxs_req;
/* Answers: the body is copied. */
int mxs_reply(mxs_req *r, int status, const char *ctype, const void *body, size_t len);
/* json is stolen. */
int mxs_reply_json(mxs_req *r, int status, json_t *json);
/* TorchServe's error body: {"code": status, "type": ..., "message": ...}. */
int mxs_reply_error(mxs_req *r, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* KServe's: {"error": message}. */
int mxs_reply_v2_error(mxs_req *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *mxs_header(mxs_req *r, const char *name);
const char *mxs_query(mxs_req *r, const char *name);
/* Queues j (j->v: a reference the job owns) with r's connection suspended; answers a
 * refusal itself; a version removed meanwhile is re-routed to the model's default when
 * reroute is set. Returns MHD's result for the access handler. */
int mxs_submit(mxs_req *r, mxs_job *j, int reroute);
/* Resumes a suspended job's connection (its answer is set). */
void mxs_http_resume(mxs_job *j);
int mxs_http_start(struct mxs_server *s);
void mxs_http_quiesce(struct mxs_server *s);
void mxs_http_stop(struct mxs_server *s);
/* Number of suspended connections (jobs in flight). */
int mxs_http_pending(struct mxs_server *s);

/* the APIs (api_infer.c, api_mgmt.c) */
int mxs_api_inference(mxs_req *r);
int mxs_api_management(mxs_req *r);
int mxs_api_metrics(mxs_req *r);

/* ---- the server ---------------------------------------------------------------- */
typedef struct mxs_server {
  mxs_config cfg;
  struct MHD_Daemon *d[MXS_NAPI];
  int port[MXS_NAPI];
  pthread_rwlock_t reg_lk;
  mxs_model **models;
  int nmodels, mcap;
  _Atomic int draining;        /* SIGTERM: new requests get 503 */
  _Atomic int pending;         /* suspended connections */
  double started;
  char tmp_root[256];          /* extractions of tar archives */
} mxs_server;

#endif
