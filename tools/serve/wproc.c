/* wproc.c — worker processes: spawning mx-serve-worker for a model version, the batch
 * and answer messages (proto.h), stopping and reaping.
 *
 * A worker is a process, not a thread, so that a handler that crashes (a bad FFI write,
 * an abort in a library, memory exhaustion) or hangs takes only itself down: the proxy
 * sees the socket close (or the deadline pass), answers the batch and starts another.
 * posix_spawn (no fork of this multithreaded process); the child gets its end of the
 * socketpair as fd 3, stdout joined to stderr, and the thread settings of its share of
 * the cores. The front end's descriptors are all close-on-exec. */
#include "proto.h"
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static char **child_env(int threads) {
  int n = 0;
  while (environ[n]) n++;
  char **env = calloc((size_t)n + 8, sizeof *env);
  if (!env) return NULL;
  int k = 0;
  static const char *const OURS[] = {"MX_NUM_THREADS=", "OMP_NUM_THREADS=", NULL};
  for (int i = 0; i < n; i++) {
    int skip = 0;
    for (int o = 0; OURS[o]; o++) skip |= !strncmp(environ[i], OURS[o], strlen(OURS[o]));
    if (!skip) env[k++] = mxs_strdup(environ[i]);
  }
  env[k++] = mxs_printf("MX_NUM_THREADS=%d", threads);
  env[k++] = mxs_printf("OMP_NUM_THREADS=%d", threads);
  if (!getenv("OPENBLAS_NUM_THREADS")) env[k++] = mxs_strdup("OPENBLAS_NUM_THREADS=1");
  /* no transparent huge pages for a worker's blocks unless asked: each new batch size's
   * plan is fresh memory, and zeroing fresh 2 MB pages made those first calls 1.0-2.9 s
   * instead of 0.2-0.4 s on a VM (ResNet-18's p99 1.5-2.5 s): latency over streaming speed */
  if (!getenv("MX_HUGEPAGES")) env[k++] = mxs_strdup("MX_HUGEPAGES=0");
  env[k] = NULL;
  return env;
}

static void free_env(char **env) {
  for (int i = 0; env && env[i]; i++) free(env[i]);
  free(env);
}

static char *worker_config(mxs_worker *w, int threads) {
  mxs_version *v = w->v;
  mxs_config *c = &v->srv->cfg;
  json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:O,s:{s:I,s:I}}", "dir", v->dir,
                        "handler", v->handler, "model_name", v->name, "model_version", v->version,
                        "batch_size", v->batch_size, "worker_id", w->id, "threads", threads,
                        "manifest", v->manifest, "limits", "max_image_pixels",
                        (json_int_t)c->max_image_pixels, "max_request_size",
                        (json_int_t)c->max_request_size);
  char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return t;
}

/* the outputs (names, shapes) the worker found in the model join the manifest's inputs */
static void merge_signature(mxs_version *v, const char *payload) {
  json_t *r = json_loads(payload, 0, NULL);
  json_t *sig = json_object_get(r, "signature");
  if (json_is_object(sig)) {
    pthread_mutex_lock(&v->sig_mu);
    json_t *outs = json_object_get(sig, "outputs");
    if (json_is_array(outs)) json_object_set(v->signature, "outputs", outs);
    json_t *ins = json_object_get(sig, "inputs");
    if (json_is_array(ins) && json_array_size(ins)) json_object_set(v->signature, "inputs", ins);
    pthread_mutex_unlock(&v->sig_mu);
  }
  json_decref(r);
}

int mxs_wproc_start(mxs_worker *w, char *msg, size_t cap) {
  mxs_version *v = w->v;
  mxs_config *c = &v->srv->cfg;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
    snprintf(msg, cap, "socketpair: %s", strerror(errno));
    return -1;
  }
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nw = v->min_workers > 0 ? v->min_workers : 1;
  int threads = c->worker_threads > 0 ? c->worker_threads : (int)(ncpu / nw > 0 ? ncpu / nw : 1);
  char *conf = worker_config(w, threads);
  char **env = child_env(threads);
  char *argv[] = {(char *)c->worker_bin, "--fd", "3", "--config", conf, NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 3);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t def;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigaddset(&def, SIGTERM);
  sigaddset(&def, SIGINT);
  posix_spawnattr_setsigdefault(&at, &def);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = conf && env ? posix_spawn(&pid, c->worker_bin, &fa, &at, argv, env) : ENOMEM;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(conf);
  free_env(env);
  close(sv[1]);
  if (rc) {
    close(sv[0]);
    snprintf(msg, cap, "cannot start %s: %s", c->worker_bin, strerror(rc));
    return -1;
  }
  w->fd = sv[0];
  atomic_store(&w->pid, pid);
  w->started = mxs_wall();
  mxs_frame h;
  char *payload = NULL;
  double dl = mxs_now() + c->worker_start_timeout_s;
  int r = mxs_frame_read(w->fd, &h, &payload, 1 << 20, dl);
  if (r == 0 && h.type == MXS_MSG_READY) {
    merge_signature(v, payload);
    free(payload);
    int fl = fcntl(w->fd, F_GETFL);
    fcntl(w->fd, F_SETFL, fl | O_NONBLOCK);
    return 0;
  }
  if (r == 0 && h.type == MXS_MSG_FAIL) {
    snprintf(msg, cap, "%s", payload);
    free(payload);
    char ended[128];
    mxs_wproc_reap(w, ended, sizeof ended);
    return -1;
  }
  free(payload);
  if (r == -2) {
    kill(pid, SIGKILL);
    snprintf(msg, cap, "the worker did not become ready within %d s (--worker-start-timeout)",
             c->worker_start_timeout_s);
    char ended[128];
    mxs_wproc_reap(w, ended, sizeof ended);
    return -1;
  }
  char ended[128];
  mxs_wproc_reap(w, ended, sizeof ended);
  snprintf(msg, cap, "the worker %s before it was ready (its log is on stderr)", ended);
  return -1;
}

/* writes iov fully on the non-blocking socket, waiting at most until deadline */
static int writev_deadline(int fd, struct iovec *iov, int n, double deadline) {
  int i = 0;
  while (i < n) {
    ssize_t wr = writev(fd, iov + i, n - i > 512 ? 512 : n - i);
    if (wr < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) return -1;
      double left = deadline - mxs_now();
      if (left <= 0) return -2;
      struct pollfd pf = {fd, POLLOUT, 0};
      poll(&pf, 1, (int)(left * 1000) + 1);
      continue;
    }
    size_t got = (size_t)wr;
    while (i < n && got >= iov[i].iov_len) got -= iov[i++].iov_len;
    if (i < n) {
      iov[i].iov_base = (char *)iov[i].iov_base + got;
      iov[i].iov_len -= got;
    }
  }
  return 0;
}

int mxs_wproc_send(mxs_worker *w, uint64_t id, mxs_job **jobs, int n) {
  struct iovec *iov = malloc(sizeof *iov * (size_t)(2 + 3 * n));
  struct { uint32_t ml; uint64_t bl; } __attribute__((packed)) *lens = malloc(12 * (size_t)n);
  if (!iov || !lens) {
    free(iov);
    free(lens);
    return -1;
  }
  struct {
    mxs_frame f;
    uint64_t id;
    uint32_t n;
  } __attribute__((packed)) head;
  uint64_t total = sizeof head.id + sizeof head.n;
  double dl = 0;
  int k = 1;
  for (int i = 0; i < n; i++) {
    lens[i].ml = (uint32_t)jobs[i]->meta_len;
    lens[i].bl = jobs[i]->blob_len;
    iov[k++] = (struct iovec){&lens[i], 12};
    iov[k++] = (struct iovec){jobs[i]->meta, jobs[i]->meta_len};
    iov[k++] = (struct iovec){jobs[i]->blob, jobs[i]->blob_len};
    total += 12 + jobs[i]->meta_len + jobs[i]->blob_len;
    if (jobs[i]->t_deadline > dl) dl = jobs[i]->t_deadline;
  }
  head.f = (mxs_frame){MXS_MAGIC, MXS_MSG_BATCH, total};
  head.id = id;
  head.n = (uint32_t)n;
  iov[0] = (struct iovec){&head, sizeof head};
  int rc = writev_deadline(w->fd, iov, k, dl + 1.0);
  free(iov);
  free(lens);
  return rc ? -1 : 0;
}

int mxs_wproc_recv(mxs_worker *w, uint64_t id, int n, mxs_batch_out *outs, int *raised,
                   char **errmsg, double deadline, char *msg, size_t cap) {
  mxs_frame h;
  char *p = NULL;
  int r = mxs_frame_read(w->fd, &h, &p, (uint64_t)1 << 32, deadline);
  if (r == -2) return -2;
  if (r) {
    free(p);
    if (r == -3) {
      pid_t pid = atomic_load(&w->pid);
      if (pid > 0) kill(pid, SIGKILL);
    }
    char ended[128];
    mxs_wproc_reap(w, ended, sizeof ended);
    snprintf(msg, cap, "%s%s", r == -3 ? "sent a malformed message and was killed; it " : "",
             ended);
    return -1;
  }
  mxs_cur c = {p, (size_t)h.len, 0};
  if (h.type == MXS_MSG_ERROR && mxs_cur_u64(&c) == id && !c.bad) {
    *errmsg = mxs_printf("%.*s", (int)c.n, c.p);
    free(p);
    return 1;
  }
  int ok = h.type == MXS_MSG_RESULT && mxs_cur_u64(&c) == id && mxs_cur_u32(&c) == (uint32_t)n;
  *raised = (int)(mxs_cur_u32(&c) & 1);
  for (int i = 0; ok && i < n; i++) {
    uint32_t status = mxs_cur_u32(&c), cl = mxs_cur_u32(&c);
    uint64_t bl = mxs_cur_u64(&c);
    const char *ct = mxs_cur_bytes(&c, cl), *body = mxs_cur_bytes(&c, bl);
    if (c.bad || status < 100 || status > 599) {
      ok = 0;
      break;
    }
    outs[i].status = (int)status;
    outs[i].ctype = mxs_printf("%.*s", (int)cl, ct);
    outs[i].body = malloc(bl + 1);
    if (outs[i].body) memcpy(outs[i].body, body, bl);
    outs[i].body_len = outs[i].body ? bl : 0;
  }
  free(p);
  if (ok && !c.bad) return 0;
  for (int i = 0; i < n; i++) {
    free(outs[i].ctype);
    free(outs[i].body);
    outs[i].ctype = outs[i].body = NULL;
  }
  pid_t pid = atomic_load(&w->pid);
  if (pid > 0) kill(pid, SIGKILL);
  char ended[128];
  mxs_wproc_reap(w, ended, sizeof ended);
  snprintf(msg, cap, "answered out of protocol and was killed (%s)", ended);
  return -1;
}

void mxs_wproc_reap(mxs_worker *w, char *msg, size_t cap) {
  pid_t pid = atomic_exchange(&w->pid, 0);
  if (w->fd >= 0) close(w->fd);
  w->fd = -1;
  if (pid <= 0) {
    snprintf(msg, cap, "ended");
    return;
  }
  int st = 0;
  pid_t r = 0;
  /* its socket closed: it is exiting, or about to be killed if it lingers */
  for (int i = 0; i < 200 && (r = waitpid(pid, &st, WNOHANG)) == 0; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (r == 0) {
    kill(pid, SIGKILL);
    r = waitpid(pid, &st, 0);
  }
  if (r != pid) snprintf(msg, cap, "ended (its status is unknown)");
  else if (WIFEXITED(st)) snprintf(msg, cap, "exited with status %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) snprintf(msg, cap, "was killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
  else snprintf(msg, cap, "ended");
}

void mxs_wproc_stop(mxs_worker *w, double grace) {
  pid_t pid = atomic_load(&w->pid);
  if (pid <= 0) return;
  if (w->fd >= 0) {
    mxs_frame h = {MXS_MAGIC, MXS_MSG_STOP, 0};
    struct iovec iov = {&h, sizeof h};
    writev_deadline(w->fd, &iov, 1, mxs_now() + 1.0);
    /* wait for its end of the socket to close */
    char b;
    double dl = mxs_now() + grace;
    while (mxs_read_all(w->fd, &b, 1, dl) == 0) {
    }
  }
  char msg[128];
  mxs_wproc_reap(w, msg, sizeof msg);
}
