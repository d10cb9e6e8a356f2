/* error.c — the thread-local error message behind every status code. */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char mx_errbuf[2048];

const char *mx_last_error(void) { return mx_errbuf; }

void mx_set_last_error(const char *msg) {
  if (!msg) msg = "";
  size_t n = strlen(msg);
  if (n >= sizeof mx_errbuf) n = sizeof mx_errbuf - 1;
  memcpy(mx_errbuf, msg, n);
  mx_errbuf[n] = 0;
}

int mx_err(int code, const char *fmt, ...) {
  /* format aside first: callers may pass mx_last_error() to wrap an inner message */
  char tmp[sizeof mx_errbuf];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(mx_errbuf, tmp, sizeof tmp);
  return code;
}

const char *mx_shape_str(char *buf, int ndim, const int64_t *shape) {
  size_t k = 0;
  buf[k++] = '(';
  for (int i = 0; i < ndim && i < 16; i++) /* 16: an mx_tuple's capacity */
    k += (size_t)snprintf(buf + k, MX_SHAPE_BUF - k, i ? ", %lld" : "%lld",
                          (long long)shape[i]);
  if (ndim == 1) buf[k++] = ',';
  buf[k++] = ')';
  buf[k] = 0;
  return buf;
}

int mx_abi_version(void) { return MX_ABI_VERSION; }

#define MX_STR2(x) #x
#define MX_STR(x) MX_STR2(x)
const char *mx_version_string(void) {
  return MX_STR(MX_VERSION_MAJOR) "." MX_STR(MX_VERSION_MINOR) "." MX_STR(MX_VERSION_PATCH);
}

void mx_free(void *p) { free(p); }

int mx_err_prefix(int code, const char *op) {
  if (!op || strncmp(mx_errbuf, op, strlen(op)) == 0) return code; /* already named */
  char tmp[sizeof mx_errbuf];
  size_t n = strlen(op);
  if (n + 2 >= sizeof tmp) return code;
  memcpy(tmp, op, n);
  tmp[n] = ':';
  tmp[n + 1] = ' ';
  size_t m = strlen(mx_errbuf);
  if (m > sizeof tmp - n - 3) m = sizeof tmp - n - 3; /* the message keeps its start */
  memcpy(tmp + n + 2, mx_errbuf, m);
  tmp[n + 2 + m] = 0;
  memcpy(mx_errbuf, tmp, n + 3 + m);
  return code;
}
