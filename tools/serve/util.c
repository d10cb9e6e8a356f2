/* util.c — the front end's small helpers: clocks, logging, strings, buffers, names,
 * addresses, directory removal, RSS. */
#include "serve.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double mxs_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

double mxs_wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void mxs_log(const char *fmt, ...) {
  char line[1200];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%SZ mx-serve: ", &tm);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  line[len++] = '\n';
  /* one write: lines of concurrent threads do not interleave */
  ssize_t w = write(2, line, len);
  (void)w;
}

char *mxs_strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

char *mxs_vprintf(const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return NULL;
  char *p = malloc((size_t)n + 1);
  if (p) vsnprintf(p, (size_t)n + 1, fmt, ap);
  return p;
}

char *mxs_printf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *p = mxs_vprintf(fmt, ap);
  va_end(ap);
  return p;
}

void mxs_buf_add(mxs_buf *b, const void *p, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = 0;
}

void mxs_buf_str(mxs_buf *b, const char *s) { mxs_buf_add(b, s, strlen(s)); }

void mxs_buf_printf(mxs_buf *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    mxs_buf_add(b, small, (size_t)n);
    return;
  }
  va_start(ap, fmt);
  char *big = mxs_vprintf(fmt, ap);
  va_end(ap);
  if (!big) {
    b->oom = 1;
    return;
  }
  mxs_buf_add(b, big, (size_t)n);
  free(big);
}

void mxs_buf_free(mxs_buf *b) {
  free(b->p);
  b->p = NULL;
  b->n = b->cap = 0;
}

int mxs_valid_name(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 128 || s[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-' || c == '.'))
      return 0;
  }
  return 1;
}

int mxs_rmtree(const char *dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (dfd < 0) return errno == ENOENT ? 0 : -1;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return -1;
  }
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat st;
    if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
      rc = -1;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      char *sub = mxs_printf("%s/%s", dir, e->d_name);
      if (!sub || mxs_rmtree(sub)) rc = -1;
      free(sub);
    } else if (unlinkat(dfd, e->d_name, 0)) {
      rc = -1;
    }
  }
  closedir(d);
  if (rmdir(dir)) rc = -1;
  return rc;
}

int mxs_parse_int(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int mxs_parse_addr(const char *s, void *sa, size_t cap, int *fam, char *err, size_t errcap) {
  char host[256] = "127.0.0.1";
  const char *port = s;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof host) {
      snprintf(err, errcap, "address '%s': expected [v6-address]:port", s);
      return -1;
    }
    memcpy(host, s + 1, (size_t)(close - s - 1));
    host[close - s - 1] = 0;
    port = close + 2;
  } else {
    const char *colon = strrchr(s, ':');
    if (colon) {
      if ((size_t)(colon - s) >= sizeof host) {
        snprintf(err, errcap, "address '%s': the host is too long", s);
        return -1;
      }
      memcpy(host, s, (size_t)(colon - s));
      host[colon - s] = 0;
      port = colon + 1;
    }
  }
  long p;
  if (mxs_parse_int(port, 0, 65535, &p)) {
    snprintf(err, errcap, "address '%s': the port must be 0..65535", s);
    return -1;
  }
  memset(sa, 0, cap);
  struct sockaddr_in *a4 = sa;
  struct sockaddr_in6 *a6 = sa;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)p);
    *fam = AF_INET;
    return 0;
  }
  if (cap >= sizeof *a6 && inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)p);
    *fam = AF_INET6;
    return 0;
  }
  if (!strcmp(host, "localhost")) {
    inet_pton(AF_INET, "127.0.0.1", &a4->sin_addr);
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)p);
    *fam = AF_INET;
    return 0;
  }
  snprintf(err, errcap, "address '%s': '%s' is not a numeric IPv4/IPv6 address", s, host);
  return -1;
}

int64_t mxs_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long pages = 0, rss = 0;
  int ok = fscanf(f, "%ld %ld", &pages, &rss) == 2;
  fclose(f);
  return ok ? (int64_t)rss * sysconf(_SC_PAGESIZE) : 0;
}
