/* libmx_mpi: dist_sync collectives over Open MPI with deadlines, a liveness side channel
 * and an agreement on what each collective reduces. API and policies: mx_mpi.h; the
 * engine work (buckets, jobs) on top: mpi_work.c. */
#define _GNU_SOURCE
#include "mx_mpi.h"
#include "mpi_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x6d786b76u /* "mxkv": first word on every mesh connection */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* every MPI call */
static int g_state;       /* 0 none, 1 up, 2 finalized */
static atomic_int g_failed;   /* the communicator is unusable */
static atomic_int g_dead = -1;
static atomic_int g_closing;  /* orderly shutdown: EOF from peers is expected */
static int g_rank = -1, g_size;
static MPI_Comm g_comm;
static MPI_Op g_op_f16;
static int *g_fds;        /* [size]: connection to each peer, -1 for self */
static int g_wake[2] = {-1, -1};
static pthread_t g_mon;
static int g_mon_up;
static double g_default_timeout = 30;
static _Atomic int64_t g_bytes, g_calls;
static _Atomic double g_secs;
static _Thread_local char g_err[512];
static int g_trace; /* $MX_KV_TRACE set: a stderr line per allreduce (profiling) */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int mx_mpi_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
  return code;
}
#define fail mx_mpi_fail

const char *mx_mpi_last_error(void) { return g_err; }
int mx_mpi_rank(void) { return g_rank; }
int mx_mpi_size(void) { return g_size; }
int mx_mpi_dead_rank(void) { return atomic_load(&g_dead); }
double mx_mpi_default_timeout(void) { return g_default_timeout; }

void mx_mpi_stats(int64_t *bytes, double *seconds, int64_t *calls) {
  if (bytes) *bytes = atomic_load(&g_bytes);
  if (seconds) *seconds = atomic_load(&g_secs);
  if (calls) *calls = atomic_load(&g_calls);
}

static double env_num(const char *name, double dflt) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  char *end;
  double v = strtod(s, &end);
  return (end != s && v >= 0) ? v : dflt;
}

/* ---- liveness monitor ------------------------------------------------------------ */

/* Side-channel frames are 4 bytes: a letter and a 24-bit rank. 'H' heartbeat, 'B'
 * goodbye (an orderly exit: the EOF that follows is no death), 'D' + rank: the sender
 * saw that rank die (so every survivor names the first dead rank, not a survivor that
 * exited because of it), 'X': the sender gives up after a failure of its own (a
 * timeout) and exits. */
static void frame_send(int fd, char kind, int rank) {
  unsigned char f[4] = {(unsigned char)kind, (unsigned char)(rank >> 16),
                        (unsigned char)(rank >> 8), (unsigned char)rank};
  (void)send(fd, f, 4, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static atomic_int g_dead_claim = -1;
static char g_why[128]; /* why g_dead is gone: written once, before g_dead is set */

static void mark_dead(int peer, const char *why) {
  int expect = -1;
  if (atomic_compare_exchange_strong(&g_dead_claim, &expect, peer)) {
    /* tell the others before anything here can act on it (and exit) */
    for (int i = 0; i < g_size; i++)
      if (g_fds[i] >= 0 && i != peer) frame_send(g_fds[i], 'D', peer);
    snprintf(g_why, sizeof g_why, "%s", why);
    fprintf(stderr, "mx dist_sync: rank %d: lost rank %d (%s); collectives now fail\n",
            g_rank, peer, why);
    fflush(stderr);
    atomic_store(&g_dead, peer);
  }
  atomic_store(&g_failed, 1);
}

static void *monitor(void *arg) {
  (void)arg;
  int n = g_size;
  struct pollfd *pf = calloc((size_t)n + 1, sizeof *pf);
  double *seen = calloc((size_t)n, sizeof *seen);
  int *have = calloc((size_t)n, sizeof *have); /* bytes of a partial frame per peer */
  unsigned char(*part)[4] = calloc((size_t)n, sizeof *part);
  if (!pf || !seen || !have || !part) {
    free(pf);
    free(seen);
    free(have);
    free(part);
    return NULL;
  }
  double silence = env_num("MX_KV_HEARTBEAT_TIMEOUT", 8);
  double grace = env_num("MX_KV_FAILURE_EXIT", 5);
  double t = now_s(), last_beat = 0, dead_at = 0;
  for (int i = 0; i < n; i++) seen[i] = t;
  for (;;) {
    int m = 0;
    pf[m].fd = g_wake[0];
    pf[m++].events = POLLIN;
    for (int i = 0; i < n; i++)
      if (g_fds[i] >= 0) {
        pf[m].fd = g_fds[i];
        pf[m++].events = POLLIN;
      }
    if (poll(pf, (nfds_t)m, 250) < 0 && errno != EINTR) break;
    if (pf[0].revents) break; /* finalize wakes us */
    t = now_s();
    for (int k = 1; k < m; k++) {
      if (!pf[k].revents) continue;
      int peer = -1;
      for (int i = 0; i < n; i++)
        if (g_fds[i] == pf[k].fd) peer = i;
      unsigned char buf[64];
      memcpy(buf, part[peer], (size_t)have[peer]);
      ssize_t r = recv(pf[k].fd, buf + have[peer], sizeof buf - (size_t)have[peer],
                       MSG_DONTWAIT);
      if (r > 0) {
        seen[peer] = t;
        int len = have[peer] + (int)r, off = 0, bye = 0;
        for (; off + 4 <= len; off += 4) {
          int who = (buf[off + 1] << 16) | (buf[off + 2] << 8) | buf[off + 3];
          if (buf[off] == 'B') bye = 1;
          if (buf[off] == 'X' && !atomic_load(&g_closing))
            mark_dead(peer, "it gave up after its own collective failed (timeout or MPI "
                      "error) and exited");
          if (buf[off] == 'D' && who >= 0 && who < n && who != g_rank &&
              !atomic_load(&g_closing)) {
            char why[64];
            snprintf(why, sizeof why, "reported lost by rank %d", peer);
            mark_dead(who, why);
          }
        }
        have[peer] = len - off;
        memmove(buf, buf + off, (size_t)have[peer]);
        memcpy(part[peer], buf, (size_t)have[peer]);
        if (bye) { /* goodbye: its EOF is not a death */
          close(g_fds[peer]);
          g_fds[peer] = -1;
        }
        continue;
      }
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      close(g_fds[peer]);
      g_fds[peer] = -1;
      if (!atomic_load(&g_closing))
        mark_dead(peer, r == 0 ? "it died: its connection closed"
                               : "it died: its connection was reset");
    }
    if (t - last_beat >= 1.0) {
      last_beat = t;
      for (int i = 0; i < n; i++) {
        if (g_fds[i] < 0) continue;
        frame_send(g_fds[i], 'H', g_rank);
        if (silence > 0 && t - seen[i] > silence && !atomic_load(&g_closing)) {
          char why[96];
          snprintf(why, sizeof why, "no heartbeat for %.0f s: stopped or unreachable",
                   t - seen[i]);
          mark_dead(i, why);
        }
      }
    }
    if (atomic_load(&g_dead) >= 0 && grace > 0 && !atomic_load(&g_closing)) {
      if (dead_at == 0) dead_at = t;
      if (t - dead_at > grace) {
        fprintf(stderr, "mx dist_sync: rank %d: exiting %.0f s after rank %d died "
                "(MX_KV_FAILURE_EXIT=0 keeps the process)\n", g_rank, grace,
                atomic_load(&g_dead));
        fflush(stderr);
        _exit(75);
      }
    }
  }
  free(pf);
  free(seen);
  free(have);
  free(part);
  return NULL;
}

static int wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return 0;
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, (int)(left * 1000) + 1);
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return 0;
  }
}

static int read_full(int fd, void *buf, size_t len, double deadline) {
  char *p = buf;
  while (len) {
    if (!wait_fd(fd, POLLIN, deadline)) return 0;
    ssize_t r = recv(fd, p, len, 0);
    if (r <= 0) return 0;
    p += r;
    len -= (size_t)r;
  }
  return 1;
}

typedef struct endpoint {
  uint32_t ip;  /* network order */
  uint16_t port;
  char host[66];
} endpoint;

/* One connection per pair: rank i connects to every j < i (their backlog holds it
 * until they accept), then accepts from every j > i. */
static int mesh_build(double timeout) {
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return fail(MX_MPI_EMPI, "dist_sync init: socket: %s", strerror(errno));
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t al = sizeof a;
  if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, g_size + 4) ||
      getsockname(lfd, (struct sockaddr *)&a, &al)) {
    close(lfd);
    return fail(MX_MPI_EMPI, "dist_sync init: liveness socket: %s", strerror(errno));
  }
  endpoint me = {0}, *all = calloc((size_t)g_size, sizeof *all);
  if (!all) {
    close(lfd);
    return fail(MX_MPI_ENOMEM, "dist_sync init: out of memory");
  }
  me.port = a.sin_port;
  gethostname(me.host, sizeof me.host - 1);
  me.ip = htonl(INADDR_LOOPBACK);
  const char *h = getenv("MX_KV_HOST");
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_INET;
  if (getaddrinfo(h && *h ? h : me.host, NULL, &hints, &res) == 0 && res) {
    me.ip = ((struct sockaddr_in *)res->ai_addr)->sin_addr.s_addr;
    freeaddrinfo(res);
  }
  MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, g_comm);
  int one_host = 1;
  for (int i = 0; i < g_size; i++)
    if (strcmp(all[i].host, me.host)) one_host = 0;
  double deadline = now_s() + timeout;
  int rc = MX_MPI_OK;
  for (int j = 0; j < g_rank && rc == MX_MPI_OK; j++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in b = {0};
    b.sin_family = AF_INET;
    b.sin_port = all[j].port;
    b.sin_addr.s_addr = one_host ? htonl(INADDR_LOOPBACK) : all[j].ip;
    int err = 0;
    socklen_t el = sizeof err;
    if (fd < 0 ||
        (connect(fd, (struct sockaddr *)&b, sizeof b) && errno != EINPROGRESS) ||
        !wait_fd(fd, POLLOUT, deadline) ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
      if (fd >= 0) close(fd);
      rc = fail(MX_MPI_EMPI, "dist_sync init: rank %d cannot reach rank %d at %s:%d "
                "for its liveness check (set MX_KV_HOST to an address peers can reach)",
                g_rank, j, inet_ntoa(b.sin_addr), ntohs(b.sin_port));
      break;
    }
    uint32_t hello[2] = {MAGIC, (uint32_t)g_rank};
    (void)send(fd, hello, sizeof hello, MSG_NOSIGNAL);
    g_fds[j] = fd;
  }
  for (int k = g_rank + 1; k < g_size && rc == MX_MPI_OK; k++) {
    uint32_t hello[2];
    int fd = -1;
    if (wait_fd(lfd, POLLIN, deadline)) fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0 || !read_full(fd, hello, sizeof hello, deadline) || hello[0] != MAGIC ||
        (int)hello[1] <= g_rank || (int)hello[1] >= g_size || g_fds[hello[1]] >= 0) {
      if (fd >= 0) close(fd);
      rc = fail(MX_MPI_EMPI, "dist_sync init: rank %d: liveness mesh incomplete after "
                "%.0f s (a peer did not connect)", g_rank, timeout);
      break;
    }
    g_fds[hello[1]] = fd;
  }
  close(lfd); /* nothing listens once the mesh is up */
  free(all);
  int ok = rc == MX_MPI_OK, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, g_comm);
  if (rc == MX_MPI_OK && !all_ok)
    rc = fail(MX_MPI_EMPI, "dist_sync init: another rank failed to build the liveness mesh");
  for (int i = 0; i < g_size; i++)
    if (g_fds[i] >= 0) {
      int on = 1;
      setsockopt(g_fds[i], IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      fcntl(g_fds[i], F_SETFL, fcntl(g_fds[i], F_GETFL) | O_NONBLOCK);
    }
  return rc;
}

/* ---- float16 sum ----------------------------------------------------------------- */
static void f16_sum(void *in, void *inout, int *len, MPI_Datatype *dt) {
  (void)dt;
  const uint16_t *a = in;
  uint16_t *b = inout;
  for (int i = 0; i < *len; i++) b[i] = mx_f32_to_f16(mx_f16_to_f32(a[i]) + mx_f16_to_f32(b[i]));
}

static void exit_hook(void) { mx_mpi_finalize(); }

int mx_mpi_init(double timeout_s) {
  pthread_mutex_lock(&g_lock);
  int rc = MX_MPI_OK;
  if (g_state == 1) goto out;
  if (g_state == 2) {
    rc = fail(MX_MPI_EFAILED, "dist_sync: MPI was finalized in this process; it cannot "
              "start again");
    goto out;
  }
  g_trace = getenv("MX_KV_TRACE") && *getenv("MX_KV_TRACE");
  g_default_timeout = env_num("MX_KV_TIMEOUT", 30);
  if (g_default_timeout <= 0) g_default_timeout = 30;
  if (timeout_s <= 0) timeout_s = g_default_timeout;
  int inited = 0, prov = 0;
  MPI_Initialized(&inited);
  /* libnbc's default MPI_Iallreduce for few ranks is binomial (reduce to one rank, then
   * broadcast): 1.5x the time of a blocking MPI_Allreduce for 64 MB on 2 ranks; its ring
   * (reduce-scatter + allgather, each block reduced once in a fixed order, so every rank
   * gets the same bits every run) matches or beats it. Set before MPI_Init (Open MPI
   * reads OMPI_MCA_* then); a value from the user or mpirun --mca wins. */
  if (!inited) setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
  /* SERIALIZED is enough: every MPI call here holds g_lock (MULTIPLE costs locks inside
   * Open MPI's progress engine) */
  if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &prov) != MPI_SUCCESS) {
    rc = fail(MX_MPI_EMPI, "dist_sync: MPI_Init_thread failed (run under mpirun; see "
              "docs/distributed.md)");
    goto out;
  }
  if (inited) MPI_Query_thread(&prov);
  if (prov < MPI_THREAD_SERIALIZED) {
    rc = fail(MX_MPI_EMPI, "dist_sync: this MPI offers thread level %d; "
              "MPI_THREAD_SERIALIZED or better is needed", prov);
    goto out;
  }
  MPI_Comm_dup(MPI_COMM_WORLD, &g_comm);
  MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g_comm, &g_rank);
  MPI_Comm_size(g_comm, &g_size);
  MPI_Op_create(f16_sum, 1, &g_op_f16);
  g_fds = malloc(sizeof(int) * (size_t)g_size);
  if (!g_fds || pipe2(g_wake, O_CLOEXEC)) {
    rc = fail(MX_MPI_ENOMEM, "dist_sync init: out of memory");
    goto out;
  }
  for (int i = 0; i < g_size; i++) g_fds[i] = -1;
  rc = mesh_build(timeout_s);
  if (rc) goto out;
  if (pthread_create(&g_mon, NULL, monitor, NULL) == 0) g_mon_up = 1;
  g_state = 1;
  atexit(exit_hook);
out:
  if (rc) atomic_store(&g_failed, 1);
  pthread_mutex_unlock(&g_lock);
  return rc;
}

/* ---- collectives ------------------------------------------------------------------ */

static int check_usable(const char *what) {
  if (g_state != 1)
    return fail(MX_MPI_EFAILED, "dist_sync %s: not initialised (mx_mpi_init)", what);
  int d = atomic_load(&g_dead);
  if (d >= 0)
    return fail(MX_MPI_EPEER, "dist_sync %s: lost rank %d (%s); rank %d cannot continue "
                "(restart the job from the last checkpoint)", what, d, g_why, g_rank);
  if (atomic_load(&g_failed))
    return fail(MX_MPI_EFAILED, "dist_sync %s: an earlier collective failed on rank %d; "
                "the communicator is unusable", what, g_rank);
  return MX_MPI_OK;
}

/* Polls q until done, a dead peer or the deadline. Open MPI's nonblocking collectives
 * progress only inside MPI calls, so the first 50 ms poll continuously, yielding the core
 * every 1024 tests; later waits are for a peer still computing and sleep 50 us between
 * tests. Measured on 2 loaded cores (docs/distributed.md): a yield per test, or none at
 * all, was slower (a yield gives away a time slice; never yielding starves the peer);
 * sleeping from the start, or sleeping until the peers announce their arrival on the
 * side channel, made no difference there. */
static int wait_req(MPI_Request *q, const char *what, double timeout) {
  double t0 = now_s();
  for (long it = 0;; it++) {
    int flag = 0;
    int e = MPI_Test(q, &flag, MPI_STATUS_IGNORE);
    if (e != MPI_SUCCESS) {
      char msg[MPI_MAX_ERROR_STRING];
      int ml = 0;
      MPI_Error_string(e, msg, &ml);
      atomic_store(&g_failed, 1);
      return fail(MX_MPI_EMPI, "dist_sync %s: MPI error on rank %d: %s", what, g_rank, msg);
    }
    if (flag) return MX_MPI_OK;
    int d = atomic_load(&g_dead);
    if (d >= 0)
      return fail(MX_MPI_EPEER, "dist_sync %s: lost rank %d during the collective (%s); "
                  "rank %d gives up (restart the job from the last checkpoint)", what, d,
                  g_why, g_rank);
    double t = now_s() - t0;
    if (t > timeout) {
      atomic_store(&g_failed, 1);
      return fail(MX_MPI_ETIMEOUT, "dist_sync %s: timed out after %.1f s on rank %d of %d "
                  "(a peer is stuck or far behind; deadline: MX_KV_TIMEOUT or the "
                  "kvstore's timeout option)", what, timeout, g_rank, g_size);
    }
    if (t > 0.05) { /* a long wait: a peer is computing; stay off the core */
      struct timespec ts = {0, 50000};
      nanosleep(&ts, NULL);
    } else if ((it & 1023) == 1023) {
      sched_yield(); /* progress needs MPI_Test calls: poll, but let others run */
    }
  }
}

static int mpi_type(int dtype, MPI_Datatype *t, size_t *esz) {
  switch (dtype) {
  case 0: *t = MPI_FLOAT; *esz = 4; return 1;
  case 1: *t = MPI_DOUBLE; *esz = 8; return 1;
  case 2: *t = MPI_UINT16_T; *esz = 2; return 1;
  case 4: *t = MPI_INT32_T; *esz = 4; return 1;
  case 6: *t = MPI_INT64_T; *esz = 8; return 1;
  default: return 0;
  }
}

#define CHUNK ((int64_t)1 << 30) /* MPI counts are int */

/* ---- agreement: what each rank is about to do, before the collective -------------------
 * Ranks that disagree on a collective (a key initialised with another shape on one rank,
 * a wrong-shaped value, calls out of step) would otherwise start mismatched MPI calls:
 * MPI_ERR_TRUNCATE, an abort, or a hang. So each collective starts with an allgather of a
 * fixed signature (kind, root, dtype, tensors, elements, a hash of the shapes): equal
 * everywhere, the collective runs; else a second allgather of each rank's shapes, key
 * names and message lets every rank compose the same error, and none runs the collective.
 * Both exchanges complete on every rank, so the communicator stays usable. Cost: one
 * 64-byte allgather per collective. */
#define SIG_N 8
#define SIG_MAGIC INT64_C(0x6d78736967) /* "mxsig" */
#define DET_T 64                        /* tensors described per rank */

typedef struct {
  int64_t kind, root, dtype, n, count;
  int64_t shp[DET_T][10]; /* ndim, dims[8], dtype */
  char labels[1024];      /* '\n'-separated key names */
  char msg[512];          /* kind 3: why this rank stopped */
} detail;

static uint64_t shape_hash(const mx_mpi_what *w) {
  uint64_t h = UINT64_C(1469598103934665603);
#define MIX(x) (h = (h ^ (uint64_t)(x)) * UINT64_C(1099511628211))
  MIX(w->count);
  for (int i = 0; i < w->n; i++) {
    int nd = mx_tensor_ndim(w->t[i]);
    MIX(nd);
    for (int d = 0; d < nd; d++) MIX(mx_tensor_dim(w->t[i], d));
    MIX(mx_tensor_dtype(w->t[i]));
  }
#undef MIX
  return h;
}

static const char *kind_name(int64_t k) {
  return k == 0 ? "an allreduce" : k == 1 ? "a broadcast" : k == 2 ? "a barrier" : "nothing";
}

/* "(2, 3) float32" for tensor i of detail d; "nothing" when d has fewer tensors */
static void det_shape(char *b, size_t n, const detail *d, int i) {
  if (i >= d->n || i >= DET_T) { snprintf(b, n, "no value"); return; }
  const int64_t *s = d->shp[i];
  size_t k = (size_t)snprintf(b, n, "(");
  for (int j = 0; j < s[0] && j < 8 && k < n; j++)
    k += (size_t)snprintf(b + k, n - k, "%s%lld", j ? ", " : "", (long long)s[1 + j]);
  const char *dn = mx_dtype_name((int)s[9]);
  if (k < n) snprintf(b + k, n - k, "%s) %s", s[0] == 1 ? "," : "", dn ? dn : "?");
}

/* label i of a '\n'-separated list, or "" */
static void det_label(char *b, size_t n, const char *labels, int i) {
  const char *p = labels;
  for (int k = 0; k < i && p; k++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  size_t len = p ? strcspn(p, "\n") : 0;
  if (len >= n) len = n - 1;
  memcpy(b, p ? p : "", len);
  b[len] = 0;
}

static int shape_differs(const detail *a, const detail *b, int i) {
  if ((i < a->n) != (i < b->n)) return 1;
  if (i >= a->n || i >= DET_T) return 0;
  return memcmp(a->shp[i], b->shp[i], sizeof a->shp[i]) != 0;
}

/* Under g_lock: the same message on every rank from every rank's detail. */
static int disagree(const detail *all, const char *what) {
  char msg[sizeof g_err];
  size_t k = 0;
  for (int r = 0; r < g_size; r++)
    if (all[r].kind == 3)
      return fail(MX_MPI_EMISMATCH, "dist_sync: rank %d stopped before this collective: %s; "
                  "no rank ran it", r, all[r].msg);
  for (int r = 1; r < g_size; r++)
    if (all[r].kind != all[0].kind)
      return fail(MX_MPI_EMISMATCH, "dist_sync: the ranks are out of step: rank 0 runs %s, rank %d "
                  "%s (every rank must make the same kvstore calls, keys and shapes in the same "
                  "order); no rank ran it", kind_name(all[0].kind), r, kind_name(all[r].kind));
  for (int r = 1; r < g_size; r++)
    if (all[r].root != all[0].root)
      return fail(MX_MPI_EMISMATCH, "dist_sync %s: the ranks name different roots (rank 0: %lld, "
                  "rank %d: %lld); no rank ran it", what, (long long)all[0].root, r,
                  (long long)all[r].root);
  int64_t nmax = 0;
  for (int r = 0; r < g_size; r++) nmax = all[r].n > nmax ? all[r].n : nmax;
  for (int i = 0; i < nmax && i < DET_T; i++) {
    int bad = 0;
    for (int r = 1; r < g_size && !bad; r++) bad = shape_differs(&all[0], &all[r], i);
    if (!bad) continue;
    char lab[128], sh[160];
    det_label(lab, sizeof lab, all[0].labels, i);
    if (lab[0])
      k = (size_t)snprintf(msg, sizeof msg, "dist_sync %s of key %s: the ranks disagree on its "
                           "shape:", what, lab);
    else
      k = (size_t)snprintf(msg, sizeof msg, "dist_sync %s of value %d: the ranks disagree on its "
                           "shape:", what, i + 1);
    for (int r = 0; r < g_size && r < 8 && k < sizeof msg; r++) {
      det_shape(sh, sizeof sh, &all[r], i);
      k += (size_t)snprintf(msg + k, sizeof msg - k, "%s rank %d %s", r ? "," : "", r, sh);
    }
    if (g_size > 8 && k < sizeof msg) k += (size_t)snprintf(msg + k, sizeof msg - k, ", ...");
    return fail(MX_MPI_EMISMATCH, "%s; no rank ran it", msg);
  }
  k = (size_t)snprintf(msg, sizeof msg, "dist_sync %s: the ranks disagree on its size:", what);
  for (int r = 0; r < g_size && r < 8 && k < sizeof msg; r++)
    k += (size_t)snprintf(msg + k, sizeof msg - k, "%s rank %d %lld %s", r ? "," : "", r,
                          (long long)all[r].count, mx_dtype_name((int)all[r].dtype)
                          ? mx_dtype_name((int)all[r].dtype) : "elements");
  return fail(MX_MPI_EMISMATCH, "%s; no rank ran it", msg);
}

/* Under g_lock, after check_usable: MX_MPI_OK when every rank is about to run w. */
static int agree(const mx_mpi_what *w, const char *what, double timeout) {
  if (g_size == 1 && w->kind != 3) return MX_MPI_OK;
  double t0 = now_s();
  int64_t sig[SIG_N] = {SIG_MAGIC, w->kind, w->kind == 1 ? w->root : 0,
                        w->kind <= 1 ? w->dtype : -1, w->n, w->count,
                        w->kind <= 1 ? (int64_t)shape_hash(w) : 0, 0};
  int64_t *sigs = malloc(sizeof(int64_t) * SIG_N * (size_t)g_size);
  if (!sigs) return fail(MX_MPI_ENOMEM, "dist_sync %s: out of memory", what);
  MPI_Request q;
  int rc = MX_MPI_OK;
  if (MPI_Iallgather(sig, SIG_N, MPI_INT64_T, sigs, SIG_N, MPI_INT64_T, g_comm, &q) != MPI_SUCCESS) {
    atomic_store(&g_failed, 1);
    rc = fail(MX_MPI_EMPI, "dist_sync %s: MPI_Iallgather failed on rank %d", what, g_rank);
  } else {
    rc = wait_req(&q, what, timeout);
  }
  int same = 1;
  for (int r = 0; rc == MX_MPI_OK && r < g_size && same; r++)
    same = memcmp(sigs + (size_t)r * SIG_N, sig, sizeof sig) == 0 && sigs[(size_t)r * SIG_N + 1] != 3;
  free(sigs);
  if (rc || same) return rc;
  detail *mine = calloc(1, sizeof *mine), *all = calloc((size_t)g_size, sizeof *all);
  if (!mine || !all) {
    free(mine);
    free(all);
    atomic_store(&g_failed, 1); /* the peers are in the second exchange: this rank is not */
    return fail(MX_MPI_ENOMEM, "dist_sync %s: out of memory", what);
  }
  mine->kind = w->kind, mine->root = sig[2], mine->dtype = sig[3], mine->n = w->n;
  mine->count = w->count;
  for (int i = 0; i < w->n && i < DET_T; i++) {
    int nd = mx_tensor_ndim(w->t[i]);
    mine->shp[i][0] = nd;
    for (int d = 0; d < nd && d < 8; d++) mine->shp[i][1 + d] = mx_tensor_dim(w->t[i], d);
    mine->shp[i][9] = mx_tensor_dtype(w->t[i]);
  }
  if (w->labels) snprintf(mine->labels, sizeof mine->labels, "%s", w->labels);
  if (w->msg) snprintf(mine->msg, sizeof mine->msg, "%s", w->msg);
  if (MPI_Iallgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, g_comm,
                     &q) != MPI_SUCCESS) {
    atomic_store(&g_failed, 1);
    rc = fail(MX_MPI_EMPI, "dist_sync %s: MPI_Iallgather failed on rank %d", what, g_rank);
  } else {
    rc = wait_req(&q, what, timeout - (now_s() - t0));
  }
  if (rc == MX_MPI_OK) rc = disagree(all, what);
  free(mine);
  free(all);
  return rc;
}

static int allreduce_locked(void *buf, const mx_mpi_what *w, double timeout) {
  MPI_Datatype t;
  size_t esz;
  int64_t count = w->count;
  int dtype = w->dtype;
  if (!mpi_type(dtype, &t, &esz))
    return fail(MX_MPI_EINVAL, "dist_sync allreduce: dtype %d is not summable (float32, "
                "float64, float16, int32, int64)", dtype);
  if (count < 0) return fail(MX_MPI_EINVAL, "dist_sync allreduce: count %lld < 0",
                             (long long)count);
  int rc = check_usable("allreduce");
  if (rc) return rc;
  double t0 = now_s();
  rc = agree(w, "allreduce", timeout);
  for (int64_t off = 0; off < count && rc == MX_MPI_OK; off += CHUNK) {
    int c = (int)(count - off < CHUNK ? count - off : CHUNK);
    MPI_Request q;
    if (MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + off * (int64_t)esz, c, t,
                       dtype == 2 ? g_op_f16 : MPI_SUM, g_comm, &q) != MPI_SUCCESS) {
      atomic_store(&g_failed, 1);
      return fail(MX_MPI_EMPI, "dist_sync allreduce: MPI_Iallreduce failed on rank %d",
                  g_rank);
    }
    rc = wait_req(&q, "allreduce", timeout - (now_s() - t0));
  }
  if (g_trace) /* one line per allreduce: the rank, start and end (CLOCK_MONOTONIC, which
                * every process of a host shares: skew between ranks is visible) */
    fprintf(stderr, "mx dist_sync trace: rank %d allreduce %lld elements %.6f %.6f\n",
            g_rank, (long long)count, t0, now_s());
  atomic_fetch_add(&g_bytes, count * (int64_t)esz);
  atomic_fetch_add(&g_calls, 1);
  atomic_store(&g_secs, atomic_load(&g_secs) + (now_s() - t0));
  return rc;
}

static int broadcast_locked(void *buf, const mx_mpi_what *w, double timeout_s) {
  size_t esz = mx_dtype_size(w->dtype);
  if (esz == 0) return fail(MX_MPI_EINVAL, "dist_sync broadcast: unknown dtype %d", w->dtype);
  int rc = check_usable("broadcast");
  if (!rc && (w->root < 0 || w->root >= g_size))
    rc = fail(MX_MPI_EINVAL, "dist_sync broadcast: root %d outside 0..%d", w->root, g_size - 1);
  double t0 = now_s();
  if (!rc) rc = agree(w, "broadcast", timeout_s);
  int64_t bytes = w->count * (int64_t)esz;
  for (int64_t off = 0; off < bytes && !rc; off += CHUNK) {
    int c = (int)(bytes - off < CHUNK ? bytes - off : CHUNK);
    MPI_Request q;
    if (MPI_Ibcast((char *)buf + off, c, MPI_BYTE, w->root, g_comm, &q) != MPI_SUCCESS) {
      atomic_store(&g_failed, 1);
      rc = fail(MX_MPI_EMPI, "dist_sync broadcast: MPI_Ibcast failed on rank %d", g_rank);
      break;
    }
    rc = wait_req(&q, "broadcast", timeout_s - (now_s() - t0));
  }
  /* counted as allreduce counts its buffer: the payload each rank holds afterwards */
  if (!rc) {
    atomic_fetch_add(&g_bytes, bytes);
    atomic_fetch_add(&g_calls, 1);
    atomic_store(&g_secs, atomic_load(&g_secs) + (now_s() - t0));
  }
  return rc;
}

static int barrier_locked(double timeout_s) {
  int rc = check_usable("barrier");
  if (rc) return rc;
  mx_mpi_what w = {.kind = 2};
  double t0 = now_s();
  if ((rc = agree(&w, "barrier", timeout_s))) return rc;
  MPI_Request q;
  if (MPI_Ibarrier(g_comm, &q) != MPI_SUCCESS) {
    atomic_store(&g_failed, 1);
    return fail(MX_MPI_EMPI, "dist_sync barrier: MPI_Ibarrier failed on rank %d", g_rank);
  }
  return wait_req(&q, "barrier", timeout_s - (now_s() - t0));
}

int mx_mpi_run(void *buf, const mx_mpi_what *w, double timeout_s) {
  if (timeout_s <= 0) timeout_s = g_default_timeout;
  pthread_mutex_lock(&g_lock);
  int rc;
  switch (w->kind) {
  case 0: rc = allreduce_locked(buf, w, timeout_s); break;
  case 1: rc = broadcast_locked(buf, w, timeout_s); break;
  case 2: rc = barrier_locked(timeout_s); break;
  case 3: /* this rank stopped: the peers learn why, and every rank fails alike */
    rc = check_usable("collective");
    if (!rc) rc = agree(w, "collective", timeout_s);
    if (!rc) rc = fail(MX_MPI_EMISMATCH, "dist_sync: %s", w->msg ? w->msg : "stopped");
    break;
  default: rc = fail(MX_MPI_EINVAL, "dist_sync: collective kind %d", w->kind);
  }
  pthread_mutex_unlock(&g_lock);
  return rc;
}

int mx_mpi_allreduce(void *buf, int64_t count, int dtype, double timeout_s) {
  mx_mpi_what w = {.kind = 0, .dtype = dtype, .count = count};
  return mx_mpi_run(buf, &w, timeout_s);
}

int mx_mpi_broadcast(void *buf, int64_t count, int dtype, int root, double timeout_s) {
  mx_mpi_what w = {.kind = 1, .dtype = dtype, .count = count, .root = root};
  return mx_mpi_run(buf, &w, timeout_s);
}

int mx_mpi_barrier(double timeout_s) {
  mx_mpi_what w = {.kind = 2};
  return mx_mpi_run(NULL, &w, timeout_s);
}

int mx_mpi_finalize(void) {
  pthread_mutex_lock(&g_lock);
  if (g_state != 1) {
    pthread_mutex_unlock(&g_lock);
    return MX_MPI_OK;
  }
  int clean = !atomic_load(&g_failed);
  /* everyone reaches this point before anyone says goodbye, so no EOF is mistaken for
   * a death; a peer that died meanwhile makes this fail (at once: the monitor still
   * runs) and MPI_Finalize is skipped. A long deadline: ranks may end their scripts far
   * apart (rank 0 saving a model). */
  if (clean) clean = barrier_locked(g_default_timeout > 120 ? g_default_timeout : 120) == 0;
  atomic_store(&g_closing, 1);
  if (g_mon_up) {
    (void)write(g_wake[1], "x", 1);
    pthread_join(g_mon, NULL);
    g_mon_up = 0;
  }
  for (int i = 0; i < g_size; i++)
    if (g_fds[i] >= 0) {
      frame_send(g_fds[i], clean ? 'B' : 'X', g_rank);
      close(g_fds[i]);
      g_fds[i] = -1;
    }
  close(g_wake[0]);
  close(g_wake[1]);
  if (clean) {
    MPI_Op_free(&g_op_f16);
    MPI_Comm_free(&g_comm);
    MPI_Finalize();
  }
  g_state = 2;
  pthread_mutex_unlock(&g_lock);
  return clean ? MX_MPI_OK : fail(MX_MPI_EFAILED, "dist_sync finalize: skipped "
                                  "MPI_Finalize after a failure");
}

