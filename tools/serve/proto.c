/* proto.c — frames between the front end and its worker processes (proto.h). */
#include "proto.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double mono(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int mxs_write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int mxs_read_all(int fd, void *p, size_t n, double deadline) {
  char *c = p;
  while (n) {
    if (deadline > 0) {
      double left = deadline - mono();
      if (left <= 0) return -2;
      struct pollfd pf = {fd, POLLIN, 0};
      int ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
      int r = poll(&pf, 1, ms);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -1;
      if (r == 0) continue; /* the loop's deadline check decides */
    }
    ssize_t got = read(fd, c, n);
    if (got < 0) {
      int e = errno;
      if (e == EAGAIN && deadline <= 0) {
        struct pollfd pf = {fd, POLLIN, 0};
        poll(&pf, 1, -1);
      }
      if (e == EINTR || e == EAGAIN) continue;
      return -1;
    }
    if (got == 0) return -1;
    c += got;
    n -= (size_t)got;
  }
  return 0;
}

int mxs_frame_read(int fd, mxs_frame *h, char **payload, uint64_t max, double deadline) {
  *payload = NULL;
  int rc = mxs_read_all(fd, h, sizeof *h, deadline);
  if (rc) return rc;
  if (h->magic != MXS_MAGIC || h->len > max || h->len > MXS_FRAME_MAX) return -3;
  char *p = malloc((size_t)h->len + 1);
  if (!p) return -3;
  if ((rc = mxs_read_all(fd, p, (size_t)h->len, deadline))) {
    free(p);
    return rc;
  }
  p[h->len] = 0;
  *payload = p;
  return 0;
}

int mxs_frame_write(int fd, uint32_t type, const void *p, size_t n) {
  mxs_frame h = {MXS_MAGIC, type, n};
  if (mxs_write_all(fd, &h, sizeof h)) return -1;
  return n ? mxs_write_all(fd, p, n) : 0;
}

const char *mxs_cur_bytes(mxs_cur *c, uint64_t n) {
  if (c->bad || n > c->n) {
    c->bad = 1;
    return NULL;
  }
  const char *p = c->p;
  c->p += n;
  c->n -= (size_t)n;
  return p;
}

uint32_t mxs_cur_u32(mxs_cur *c) {
  uint32_t v = 0;
  const char *p = mxs_cur_bytes(c, sizeof v);
  if (p) memcpy(&v, p, sizeof v);
  return v;
}

uint64_t mxs_cur_u64(mxs_cur *c) {
  uint64_t v = 0;
  const char *p = mxs_cur_bytes(c, sizeof v);
  if (p) memcpy(&v, p, sizeof v);
  return v;
}
