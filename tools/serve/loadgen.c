/* loadgen.c — mx-serve-load: a small closed-loop HTTP/1.1 load client (epoll, keep-alive,
 * one request in flight per connection) for the specs and the benchmarks, bounded by a
 * request count and/or a duration:
 *
 *   mx-serve-load --url http://127.0.0.1:8080/predictions/mlp --method POST
 *       --body-file x.json --content-type application/json -c 16 -n 100000 [-d 30]
 *
 * Prints one JSON object: requests answered, per status, connection errors, elapsed
 * seconds, requests/s and latency percentiles (ms). Exit status 0 unless no request
 * was answered. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct conn {
  int fd;
  size_t sent;
  char *in;
  size_t inlen, incap;
  double t0;
  int busy;
} conn;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct sockaddr_in addr;
static char *req;
static size_t reqlen;
static long status_count[600];
static long errors, answered, started, limit;
static double *lat;
static long nlat, latcap;
static int ep;

/* a blocking connect (loopback: immediate), then non-blocking; readable events only
 * until a request cannot be written at once (level-triggered EPOLLOUT would spin) */
static int open_conn(conn *c) {
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return -1;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr)) {
    close(c->fd);
    c->fd = -1;
    return -1;
  }
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event ev = {EPOLLIN | EPOLLRDHUP, {.ptr = c}};
  epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  c->inlen = 0;
  c->sent = 0;
  c->busy = 0;
  return 0;
}

static void close_conn(conn *c) {
  if (c->fd >= 0) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
  }
  c->fd = -1;
}

static void want_out(conn *c, int on) {
  struct epoll_event ev = {EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0), {.ptr = c}};
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void close_conn(conn *c);

static void push(conn *c) {
  while (c->sent < reqlen) {
    ssize_t w = send(c->fd, req + c->sent, reqlen - c->sent, MSG_NOSIGNAL);
    if (w > 0) {
      c->sent += (size_t)w;
      continue;
    }
    if (w < 0 && errno == EAGAIN) {
      want_out(c, 1);
      return;
    }
    errors++;
    c->busy = 0;
    close_conn(c);
    return;
  }
  want_out(c, 0);
}

static void begin(conn *c) {
  c->busy = 1;
  c->sent = 0;
  c->inlen = 0;
  c->t0 = now();
  started++;
  push(c);
}

/* a whole response in c->in: its length, 0 if incomplete, -1 if malformed */
static long complete(conn *c, int *status) {
  c->in[c->inlen] = 0;
  char *end = strstr(c->in, "\r\n\r\n");
  if (!end) return c->inlen > 65536 ? -1 : 0;
  if (sscanf(c->in, "HTTP/1.%*d %d", status) != 1) return -1;
  long clen = 0;
  for (char *h = strstr(c->in, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n"))
    if (!strncasecmp(h + 2, "Content-Length:", 15)) clen = atol(h + 17);
  long total = (end - c->in) + 4 + clen;
  return (long)c->inlen >= total ? total : 0;
}

static void done(conn *c, int status) {
  double dt = now() - c->t0;
  answered++;
  if (status > 0 && status < 600) status_count[status]++;
  if (nlat == latcap) {
    latcap = latcap ? latcap * 2 : 1 << 16;
    lat = realloc(lat, sizeof *lat * (size_t)latcap);
  }
  lat[nlat++] = dt;
  c->busy = 0;
}

static int cmpd(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)len + 1);
  if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
    free(p);
    p = NULL;
  }
  fclose(f);
  *n = (size_t)len;
  return p;
}

int main(int argc, char **argv) {
  const char *url = NULL, *method = "GET", *body = NULL, *body_file = NULL, *ctype = NULL;
  char headers[4096] = "";
  int nconn = 1;
  double duration = 0;
  static struct option opts[] = {{"url", 1, 0, 'u'}, {"method", 1, 0, 'm'}, {"body", 1, 0, 'b'},
                                 {"body-file", 1, 0, 'f'}, {"content-type", 1, 0, 't'},
                                 {"header", 1, 0, 'H'}, {"connections", 1, 0, 'c'},
                                 {"requests", 1, 0, 'n'}, {"duration", 1, 0, 'd'}, {0, 0, 0, 0}};
  int o;
  while ((o = getopt_long(argc, argv, "u:m:b:f:t:H:c:n:d:", opts, NULL)) != -1) {
    switch (o) {
    case 'u': url = optarg; break;
    case 'm': method = optarg; break;
    case 'b': body = optarg; break;
    case 'f': body_file = optarg; break;
    case 't': ctype = optarg; break;
    case 'H':
      strncat(headers, optarg, sizeof headers - strlen(headers) - 3);
      strcat(headers, "\r\n");
      break;
    case 'c': nconn = atoi(optarg); break;
    case 'n': limit = atol(optarg); break;
    case 'd': duration = atof(optarg); break;
    default:
      fprintf(stderr, "usage: mx-serve-load --url http://HOST:PORT/PATH [-m METHOD] [-b BODY | -f FILE] "
                      "[-t TYPE] [-H 'K: V'] [-c CONNS] [-n REQUESTS] [-d SECONDS]\n");
      return 2;
    }
  }
  char host[64];
  int port = 80;
  char path[2048] = "/";
  if (!url || sscanf(url, "http://%63[^:/]:%d%2047s", host, &port, path) < 2) {
    fprintf(stderr, "mx-serve-load: --url http://HOST:PORT/PATH (a numeric IPv4 host)\n");
    return 2;
  }
  if (limit <= 0 && duration <= 0) limit = 1000;
  if (nconn < 1) nconn = 1;
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
    fprintf(stderr, "mx-serve-load: host must be a numeric IPv4 address\n");
    return 2;
  }
  size_t blen = 0;
  char *b = NULL;
  if (body_file) {
    b = slurp(body_file, &blen);
    if (!b) {
      fprintf(stderr, "mx-serve-load: cannot read %s\n", body_file);
      return 2;
    }
  } else if (body) {
    b = strdup(body);
    blen = strlen(body);
  }
  char head[8192];
  int hn = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n%s%s%s%s", method, path, host,
                    port, headers, ctype ? "Content-Type: " : "", ctype ? ctype : "", ctype ? "\r\n" : "");
  if (b || strcmp(method, "GET")) hn += snprintf(head + hn, sizeof head - (size_t)hn, "Content-Length: %zu\r\n", blen);
  hn += snprintf(head + hn, sizeof head - (size_t)hn, "\r\n");
  reqlen = (size_t)hn + blen;
  req = malloc(reqlen);
  memcpy(req, head, (size_t)hn);
  if (blen) memcpy(req + hn, b, blen);
  ep = epoll_create1(EPOLL_CLOEXEC);
  conn *cs = calloc((size_t)nconn, sizeof *cs);
  for (int i = 0; i < nconn; i++) {
    cs[i].incap = 1 << 16;
    cs[i].in = malloc(cs[i].incap + 1);
    cs[i].fd = -1;
    if (open_conn(&cs[i])) errors++;
  }
  double t0 = now(), stop_at = duration > 0 ? t0 + duration : 0;
  struct epoll_event evs[256];
  for (;;) {
    int more = (limit <= 0 || started < limit) && (!stop_at || now() < stop_at);
    int inflight = 0;
    for (int i = 0; i < nconn; i++) {
      conn *c = &cs[i];
      if (c->fd < 0 && more) {
        if (open_conn(c)) {
          errors++;
          continue;
        }
      }
      if (c->fd >= 0 && !c->busy && more && (limit <= 0 || started < limit)) begin(c);
      inflight += c->busy;
    }
    if (!inflight && !more) break;
    if (!inflight && errors > 1000000) break;
    int n = epoll_wait(ep, evs, 256, 100);
    for (int k = 0; k < n; k++) {
      conn *c = evs[k].data.ptr;
      if (c->fd < 0) continue;
      if (c->busy && c->sent < reqlen && (evs[k].events & EPOLLOUT)) push(c);
      if (c->fd < 0) continue;
      if (evs[k].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        for (;;) {
          if (c->inlen + 4096 > c->incap) {
            c->incap *= 2;
            c->in = realloc(c->in, c->incap + 1);
          }
          ssize_t r = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
          if (r > 0) {
            c->inlen += (size_t)r;
            continue;
          }
          if (r < 0 && errno == EAGAIN) break;
          /* closed: the response may still be whole (Connection: close) */
          int st = 0;
          if (c->busy) {
            long tot = c->inlen ? complete(c, &st) : 0;
            if (tot > 0) done(c, st);
            else {
              errors++;
              c->busy = 0;
            }
          }
          close_conn(c);
          break;
        }
        if (c->fd >= 0 && c->busy) {
          int st = 0;
          long tot = complete(c, &st);
          if (tot < 0) {
            errors++;
            c->busy = 0;
            close_conn(c);
          } else if (tot > 0) {
            done(c, st);
            c->inlen = 0;
          }
        }
      }
    }
  }
  double el = now() - t0;
  qsort(lat, (size_t)nlat, sizeof *lat, cmpd);
#define PCT(p) (nlat ? lat[(long)((double)(nlat - 1) * (p))] * 1e3 : 0)
  printf("{\"requests\":%ld,\"errors\":%ld,\"elapsed\":%.3f,\"rps\":%.1f,\"p50_ms\":%.3f,"
         "\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"status\":{",
         answered, errors, el, answered / (el > 0 ? el : 1), PCT(0.5), PCT(0.9), PCT(0.99),
         nlat ? lat[nlat - 1] * 1e3 : 0.0);
  int first = 1;
  for (int s = 0; s < 600; s++)
    if (status_count[s]) {
      printf("%s\"%d\":%ld", first ? "" : ",", s, status_count[s]);
      first = 0;
    }
  printf("}}\n");
  return answered ? 0 : 1;
}
