/* main.c — mx-serve: options, startup models, SageMaker mode, signals and the graceful
 * drain. Usage: docs/serving.md, or `mx-serve --help`. */
#include "serve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f,
      "usage: mx-serve [options]                      run the server\n"
      "       mx-serve serve [options]                SageMaker's entry point (= --sagemaker)\n"
      "       mx-serve archive --help                 pack a model archive\n"
      "options:\n"
      "  --inference-address A   host:port of the inference API (127.0.0.1:8080)\n"
      "  --management-address A  the management API (127.0.0.1:8081; 'off': none)\n"
      "  --metrics-address A     the Prometheus metrics (127.0.0.1:8082; 'off': none)\n"
      "  --model-store DIR       where POST /models?url= finds archives\n"
      "  --models LIST           archives to load at start: NAME=ARCHIVE or ARCHIVE, comma-\n"
      "                          separated, relative to the model store; 'all': every one\n"
      "  --token T | --token-file F   the management API requires 'Authorization: Bearer T'\n"
      "  --workers N             workers per model when a registration names none (1)\n"
      "  --worker-threads N      intra-op threads per worker (cores / workers)\n"
      "  --batch-size N  --max-batch-delay MS   defaults for archives that name none\n"
      "  --queue-size N          requests queued per model version before 503 (100)\n"
      "  --deadline-ms MS        per-request deadline: 504 past it (30000)\n"
      "  --max-request-size B    body limit: 413 above it (6553600)\n"
      "  --max-image-pixels N    the image handler refuses larger images (4096*4096)\n"
      "  --header-timeout S  --body-timeout S  --idle-timeout S   slow clients are cut (10, 60, 60)\n"
      "  --max-connections N     (1024)    --http-threads N  inference threads (2)\n"
      "  --drain-timeout S       SIGTERM: in-flight work gets this long (30)\n"
      "  --worker-start-timeout S  (120)   --worker-bin PATH  (mx-serve-worker beside mx-serve)\n"
      "  --port-file F           write the bound ports as JSON once listening\n"
      "  --sagemaker [--model-dir DIR]   SageMaker's contract: 0.0.0.0:8080, /ping, /invocations,\n"
      "                          the model in DIR (/opt/ml/model)\n");
}

static volatile sig_atomic_t got_signal;
static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig) {
  got_signal = sig;
  if (sig_pipe[1] >= 0) {
    char c = 1;
    ssize_t w = write(sig_pipe[1], &c, 1);
    (void)w;
  }
}

static int load_startup(mxs_server *s, const char *list) {
  char *copy = mxs_strdup(list);
  int rc = 0;
  if (!strcmp(list, "all")) {
    free(copy);
    if (!s->cfg.model_store) {
      mxs_log("--models all needs --model-store");
      return -1;
    }
    DIR *d = opendir(s->cfg.model_store);
    if (!d) {
      mxs_log("model store %s: %s", s->cfg.model_store, strerror(errno));
      return -1;
    }
    struct dirent *e;
    mxs_buf names = {0};
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char m[4096];
      snprintf(m, sizeof m, "%s/%s", s->cfg.model_store, e->d_name);
      struct stat st;
      char mf[4200];
      snprintf(mf, sizeof mf, "%s/MANIFEST.json", m);
      size_t nl = strlen(e->d_name);
      int tar = nl > 4 && (!strcmp(e->d_name + nl - 4, ".tar") || (nl > 7 && !strcmp(e->d_name + nl - 7, ".tar.gz")));
      if ((stat(mf, &st) == 0) || tar) {
        if (names.n) mxs_buf_str(&names, ",");
        mxs_buf_str(&names, e->d_name);
      }
    }
    closedir(d);
    rc = names.n ? load_startup(s, names.p) : 0;
    mxs_buf_free(&names);
    return rc;
  }
  for (char *tok = strtok(copy, ","); tok && !rc; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '=');
    const char *name = NULL, *arch = tok;
    if (eq) {
      *eq = 0;
      name = tok;
      arch = eq + 1;
    }
    char path[4096];
    if (arch[0] == '/' || !s->cfg.model_store) snprintf(path, sizeof path, "%s", arch);
    else snprintf(path, sizeof path, "%s/%s", s->cfg.model_store, arch);
    mxs_reg_args a = {arch, path, name, NULL, -1, -1, -1, -1, 1};
    char msg[900];
    int st = mxs_register(s, &a, msg, sizeof msg, NULL);
    mxs_log("%s: %s", arch, msg);
    if (st >= 300) rc = -1;
  }
  free(copy);
  return rc;
}

/* SageMaker: the model directory is an archive directory, or holds one archive */
static int load_sagemaker(mxs_server *s) {
  const char *root = s->cfg.sagemaker_root;
  char mf[4200];
  snprintf(mf, sizeof mf, "%s/MANIFEST.json", root);
  struct stat st;
  if (stat(mf, &st) == 0) {
    mxs_reg_args a = {root, root, NULL, NULL, -1, -1, -1, -1, 1};
    char msg[900];
    int r = mxs_register(s, &a, msg, sizeof msg, NULL);
    mxs_log("%s: %s", root, msg);
    return r >= 300 ? -1 : 0;
  }
  DIR *d = opendir(root);
  if (!d) {
    mxs_log("SageMaker model directory %s: %s", root, strerror(errno));
    return -1;
  }
  struct dirent *e;
  char found[4096] = "";
  while ((e = readdir(d))) {
    size_t nl = strlen(e->d_name);
    if ((nl > 4 && !strcmp(e->d_name + nl - 4, ".tar")) || (nl > 7 && !strcmp(e->d_name + nl - 7, ".tar.gz"))) {
      snprintf(found, sizeof found, "%s/%s", root, e->d_name);
      break;
    }
  }
  closedir(d);
  if (!found[0]) {
    mxs_log("SageMaker model directory %s holds neither MANIFEST.json nor a .tar archive", root);
    return -1;
  }
  mxs_reg_args a = {found, found, NULL, NULL, -1, -1, -1, -1, 1};
  char msg[900];
  int r = mxs_register(s, &a, msg, sizeof msg, NULL);
  mxs_log("%s: %s", found, msg);
  return r >= 300 ? -1 : 0;
}

static int write_port_file(mxs_server *s) {
  json_t *o = json_pack("{s:i,s:i,s:i,s:i}", "inference", s->port[MXS_API_INFERENCE], "management",
                        s->port[MXS_API_MANAGEMENT], "metrics", s->port[MXS_API_METRICS], "pid",
                        (int)getpid());
  char *t = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  char *tmp = mxs_printf("%s.tmp", s->cfg.port_file);
  int fd = tmp && t ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
  int ok = fd >= 0 && write(fd, t, strlen(t)) == (ssize_t)strlen(t) && fsync(fd) == 0;
  if (fd >= 0) close(fd);
  ok = ok && rename(tmp, s->cfg.port_file) == 0;
  free(tmp);
  free(t);
  return ok ? 0 : -1;
}

static char *default_worker_bin(void) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return mxs_strdup("mx-serve-worker");
  self[n] = 0;
  return mxs_printf("%s/mx-serve-worker", dirname(self));
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "archive")) return mxs_archive_main(argc - 1, argv + 1);
  static mxs_server srv;
  mxs_server *s = &srv;
  mxs_config *c = &s->cfg;
  c->inference_addr = "127.0.0.1:8080";
  c->management_addr = "127.0.0.1:8081";
  c->metrics_addr = "127.0.0.1:8082";
  c->max_request_size = 6553600;
  c->header_timeout_s = 10;
  c->body_timeout_s = 60;
  c->idle_timeout_s = 60;
  c->max_connections = 1024;
  c->http_threads = 2;
  c->queue_size = 100;
  c->default_workers = 1;
  c->deadline_ms = 30000;
  c->drain_timeout_s = 30;
  c->worker_start_timeout_s = 120;
  c->max_image_pixels = 4096LL * 4096;
  c->default_batch_size = 1;
  c->default_batch_delay_ms = 100;
  c->sagemaker_root = "/opt/ml/model";
  const char *models = NULL, *token_file = NULL;
  int inference_given = 0;
  if (argc > 1 && !strcmp(argv[1], "serve")) {
    c->sagemaker = 1;
    argv[1] = argv[0];
    argc--;
    argv++;
  }
  static struct option opts[] = {
      {"inference-address", 1, 0, 1}, {"management-address", 1, 0, 2}, {"metrics-address", 1, 0, 3},
      {"model-store", 1, 0, 4}, {"models", 1, 0, 5}, {"token", 1, 0, 6}, {"token-file", 1, 0, 7},
      {"workers", 1, 0, 8}, {"worker-threads", 1, 0, 9}, {"batch-size", 1, 0, 10},
      {"max-batch-delay", 1, 0, 11}, {"queue-size", 1, 0, 12}, {"deadline-ms", 1, 0, 13},
      {"max-request-size", 1, 0, 14}, {"max-image-pixels", 1, 0, 15}, {"header-timeout", 1, 0, 16},
      {"body-timeout", 1, 0, 17}, {"idle-timeout", 1, 0, 18}, {"max-connections", 1, 0, 19},
      {"http-threads", 1, 0, 20}, {"drain-timeout", 1, 0, 21}, {"worker-start-timeout", 1, 0, 22},
      {"worker-bin", 1, 0, 23}, {"port-file", 1, 0, 24}, {"sagemaker", 0, 0, 25},
      {"model-dir", 1, 0, 26}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  int o, li = 0;
  while ((o = getopt_long(argc, argv, "h", opts, &li)) != -1) {
    long v = 0;
    int isint = (o >= 8 && o <= 22);
    if (isint && mxs_parse_int(optarg, 0, 1L << 40, &v)) {
      fprintf(stderr, "mx-serve: --%s '%s' must be a non-negative integer\n", opts[li].name, optarg);
      return 2;
    }
    switch (o) {
    case 1: c->inference_addr = optarg; inference_given = 1; break;
    case 2: c->management_addr = optarg; break;
    case 3: c->metrics_addr = optarg; break;
    case 4: c->model_store = optarg; break;
    case 5: models = optarg; break;
    case 6: c->token = optarg; break;
    case 7: token_file = optarg; break;
    case 8: c->default_workers = (int)v; break;
    case 9: c->worker_threads = (int)v; break;
    case 10: c->default_batch_size = v > 0 ? (int)(v > 4096 ? 4096 : v) : 1; break;
    case 11: c->default_batch_delay_ms = (int)v; break;
    case 12: c->queue_size = v > 0 ? (int)v : 1; break;
    case 13: c->deadline_ms = v > 0 ? (int)v : 1; break;
    case 14: c->max_request_size = (size_t)v; break;
    case 15: c->max_image_pixels = v; break;
    case 16: c->header_timeout_s = (int)v; break;
    case 17: c->body_timeout_s = (int)v; break;
    case 18: c->idle_timeout_s = (int)v; break;
    case 19: c->max_connections = v > 0 ? (int)v : 1; break;
    case 20: c->http_threads = v > 0 ? (int)v : 1; break;
    case 21: c->drain_timeout_s = (int)v; break;
    case 22: c->worker_start_timeout_s = v > 0 ? (int)v : 1; break;
    case 23: c->worker_bin = optarg; break;
    case 24: c->port_file = optarg; break;
    case 25: c->sagemaker = 1; break;
    case 26: c->sagemaker_root = optarg; break;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "mx-serve: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (token_file) {
    FILE *f = fopen(token_file, "r");
    static char tok[512];
    if (!f || !fgets(tok, sizeof tok, f)) {
      fprintf(stderr, "mx-serve: cannot read the token file %s\n", token_file);
      if (f) fclose(f);
      return 2;
    }
    fclose(f);
    tok[strcspn(tok, "\r\n")] = 0;
    c->token = tok;
  }
  if (c->token && !*c->token) c->token = NULL;
  if (c->sagemaker) {
    /* SageMaker sends to port 8080 on every interface of the container */
    const char *port = getenv("SAGEMAKER_BIND_TO_PORT");
    static char addr[64];
    snprintf(addr, sizeof addr, "0.0.0.0:%s", port && *port ? port : "8080");
    if (!inference_given) c->inference_addr = addr;
    const char *w = getenv("SAGEMAKER_MODEL_SERVER_WORKERS");
    long nw;
    if (w && !mxs_parse_int(w, 1, 256, &nw)) c->default_workers = (int)nw;
    const char *t = getenv("SAGEMAKER_MODEL_SERVER_TIMEOUT");
    long ts;
    if (t && !mxs_parse_int(t, 1, 86400, &ts)) c->deadline_ms = (int)ts * 1000;
    const char *md = getenv("SM_MODEL_DIR");
    if (md && *md && !strcmp(c->sagemaker_root, "/opt/ml/model")) c->sagemaker_root = md;
  }
  char *wb = c->worker_bin ? NULL : default_worker_bin();
  if (wb) c->worker_bin = wb;
  if (access(c->worker_bin, X_OK)) {
    fprintf(stderr, "mx-serve: the worker program %s is missing (--worker-bin)\n", c->worker_bin);
    return 2;
  }
  s->started = mxs_wall();
  pthread_rwlock_init(&s->reg_lk, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (pipe2(sig_pipe, O_CLOEXEC)) return 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  if (mxs_http_start(s)) {
    mxs_http_stop(s);
    return 1;
  }
  if (c->port_file && write_port_file(s)) mxs_log("cannot write the port file %s", c->port_file);
  int rc = 0;
  if (c->sagemaker) rc = load_sagemaker(s);
  if (!rc && models) rc = load_startup(s, models);
  if (rc) mxs_log("a startup model failed to load (the server runs on; see above)");
  mxs_log("ready (pid %d)", (int)getpid());
  char b;
  while (!got_signal) {
    ssize_t r = read(sig_pipe[0], &b, 1);
    if (r < 0 && errno != EINTR) break;
  }
  mxs_log("signal %d: draining (at most %d s)", (int)got_signal, c->drain_timeout_s);
  atomic_store(&s->draining, 1);
  mxs_http_quiesce(s);
  double until = mxs_now() + c->drain_timeout_s;
  while (mxs_http_pending(s) > 0 && mxs_now() < until) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  mxs_registry_shutdown(s, until + 5);
  /* the answers written by the shutdown reach their connections */
  double flush = mxs_now() + 2;
  while (mxs_http_pending(s) > 0 && mxs_now() < flush) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  mxs_http_stop(s);
  mxs_log("stopped");
  free(wb);
  return 0;
}
