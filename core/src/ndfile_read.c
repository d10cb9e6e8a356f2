/* ndfile_read.c — what every reader of array files shares (ndfile_read.h): messages that
 * name the file, the entry and the array, the dtype and size checks, and the result
 * lists. */
#include "ndfile_read.h"

#include <stdarg.h>
#include <stdlib.h>

/* ---- load context and error messages ---------------------------------------------- */

/* Copies s into out (size cap) with non-printable bytes as \xNN, so a hostile name
 * cannot garble the message. */
const char *mx_ndf_printable(char *out, size_t cap, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t k = 0, i = 0;
  for (; i < n && k + 8 < cap; i++) { /* room for one escape plus "..." and NUL */
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch < 0x7f && ch != '\'') {
      out[k++] = (char)ch;
    } else {
      out[k++] = '\\', out[k++] = 'x', out[k++] = hex[ch >> 4], out[k++] = hex[ch & 15];
    }
  }
  if (i < n) out[k++] = '.', out[k++] = '.', out[k++] = '.';
  out[k] = 0;
  return out;
}

static int fail_code(const ld *c, int code, const char *fmt, va_list ap) {
  char msg[600], where[400] = "", nm[200];
  vsnprintf(msg, sizeof msg, fmt, ap);
  if (c->entry)
    snprintf(where, sizeof where, "entry '%s': ",
             mx_ndf_printable(nm, sizeof nm, c->entry, strlen(c->entry)));
  if (c->idx >= 0 && !c->entry) {
    if (c->name)
      snprintf(where, sizeof where, "array %lld of %lld ('%s'): ",
               (long long)c->idx + 1, (long long)c->count,
               mx_ndf_printable(nm, sizeof nm, c->name, strlen(c->name)));
    else
      snprintf(where, sizeof where, "array %lld of %lld: ", (long long)c->idx + 1,
               (long long)c->count);
  }
  mx_err(code, "mx.nd.load: %s: %s%s (at byte %zu)", c->file, where, msg, c->pos);
  return code; /* a constant the compiler sees: callers' outputs are set on success only */
}

int mx_ndf_fail(const ld *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = fail_code(c, MX_EFORMAT, fmt, ap);
  va_end(ap);
  return rc;
}

int mx_ndf_fail_nomem(const ld *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = fail_code(c, MX_ENOMEM, fmt, ap);
  va_end(ap);
  return rc;
}

const char *mx_ndf_dtype_desc(int code) {
  const char *n = mx_dtype_name(code);
  if (n) return n;
  switch (code) { /* MXNet 2.0 codes luamx does not have */
  case 9: return "uint16";
  case 10: return "uint32";
  case 11: return "uint64";
  default: return NULL;
  }
}

int mx_ndf_check_dtype(ld *c, int32_t code, const char *what) {
  if (mx_dtype_size(code) > 0) return MX_OK;
  const char *n = mx_ndf_dtype_desc(code);
  if (n) return mx_ndf_fail(c, "%s %d (%s) is not supported by luamx", what, code, n);
  return mx_ndf_fail(c, "unknown %s %d", what, code);
}

/* Bytes of data for ndim dims of esize-byte elements; overflow is an error. */
int mx_ndf_data_bytes(ld *c, int ndim, const int64_t *dims, size_t esize, size_t *out) {
  char b[MX_SHAPE_BUF];
  uint64_t n = esize;
  for (int i = 0; i < ndim; i++) {
    if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n) || n > (uint64_t)INT64_MAX / 16)
      return mx_ndf_fail(c, "shape %s is too large (element count times %zu-byte elements "
                  "overflows)", mx_shape_str(b, ndim, dims), esize);
  }
  if (n > SIZE_MAX) return mx_ndf_fail(c, "shape %s is too large", mx_shape_str(b, ndim, dims));
  *out = (size_t)n;
  return MX_OK;
}

/* ---- results ------------------------------------------------------------------- */

void mx_ndf_result_free(result *res) {
  if (res->arrays)
    for (int64_t i = 0; i < res->n; i++) mx_tensor_release(res->arrays[i]);
  if (res->names)
    for (int64_t i = 0; i < res->n; i++) free(res->names[i]);
  free(res->arrays);
  free(res->names);
  memset(res, 0, sizeof *res);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names must be unique: a dict load would silently drop one of two equal keys.
 * Sorting a copy keeps this O(n log n) whatever the file claims. */
int mx_ndf_check_unique(ld *c, char **names, int64_t n) {
  if (n < 2) return MX_OK;
  char **s = malloc((size_t)n * sizeof *s);
  if (!s) return mx_ndf_fail_nomem(c, "out of memory checking %lld names", (long long)n);
  memcpy(s, names, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_str);
  int rc = MX_OK;
  for (int64_t i = 1; i < n && !rc; i++) {
    if (strcmp(s[i - 1], s[i]) == 0) {
      char nm[200];
      rc = mx_ndf_fail(c, "the name '%s' appears more than once",
                mx_ndf_printable(nm, sizeof nm, s[i], strlen(s[i])));
    }
  }
  free(s);
  return rc;
}

int mx_ndf_new_tensor(ld *c, int ndim, const int64_t *shape, int dtype, mx_tensor **out) {
  int rc = mx_tensor_new(ndim, shape, dtype, MX_CPU, 0, out);
  if (rc) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s", mx_last_error());
    return mx_ndf_fail_nomem(c, "%s", msg);
  }
  return MX_OK;
}

