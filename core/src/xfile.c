/* xfile.c — mapped files whose pages back tensors and UTF-8 checks: the pieces the
 * foreign-format readers share (xfile.h). */
#include "xfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t empty_file[1];

int mx_xmap_open(const char *path, const char *who, mx_xmap **out) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return mx_err(MX_EIO, "%s: cannot open '%s': %s", who, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return mx_err(MX_EIO, "%s: cannot stat '%s': %s", who, path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return mx_err(MX_EIO, "%s: '%s' is not a regular file", who, path);
  }
  mx_xmap *m = calloc(1, sizeof *m);
  if (!m) {
    close(fd);
    return mx_err(MX_ENOMEM, "%s: out of memory", who);
  }
  m->len = (size_t)st.st_size;
  m->p = empty_file;
  if (m->len > 0) {
    /* MAP_NORESERVE: a private writable mapping is otherwise charged in full against
     * the commit limit, which refuses a file larger than RAM + swap; only the pages
     * actually written ever need memory of their own */
    void *p = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      close(fd);
      free(m);
      return mx_err(MX_EIO, "%s: cannot map '%s': %s", who, path, strerror(e));
    }
    m->p = p;
  }
  close(fd); /* the mapping keeps the file */
  atomic_init(&m->refs, 1);
  *out = m;
  return MX_OK;
}

void mx_xmap_retain(mx_xmap *m) {
  if (m) atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void mx_xmap_release(mx_xmap *m) {
  if (!m || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  if (m->len > 0) munmap(m->p, m->len);
  free(m);
}

static void xmap_deleter(void *data, void *ctx) {
  (void)data;
  mx_xmap_release(ctx);
}

int mx_xmap_tensor(mx_xmap *m, const uint8_t *data, int ndim, const int64_t *shape,
                   int dtype, mx_tensor **out) {
  size_t es = mx_dtype_size(dtype);
  int64_t count = mx_shape_prod(ndim, shape);
  if (m && count > 0 && ((uintptr_t)data % es) == 0) {
    mx_xmap_retain(m);
    int rc = mx_tensor_from_data((void *)data, ndim, shape, dtype, xmap_deleter, m, out);
    if (rc) mx_xmap_release(m);
    return rc;
  }
  int rc = mx_tensor_new(ndim, shape, dtype, MX_CPU, 0, out);
  if (rc) return rc;
  if (count > 0) memcpy(mx_ptr(*out), data, (size_t)count * es);
  return MX_OK;
}

bool mx_utf8_valid(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) { i++; continue; }
    size_t k;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) { k = 1; cp = c & 0x1Fu; }
    else if (c >= 0xE0 && c <= 0xEF) { k = 2; cp = c & 0x0Fu; }
    else if (c >= 0xF0 && c <= 0xF4) { k = 3; cp = c & 0x07u; }
    else return false; /* continuation byte first, or C0/C1/F5..FF */
    if (n - i <= k) return false;
    for (size_t j = 1; j <= k; j++) {
      if ((s[i + j] & 0xC0u) != 0x80u) return false;
      cp = cp << 6 | (s[i + j] & 0x3Fu);
    }
    if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false; /* overlong, beyond Unicode, or a surrogate */
    i += k + 1;
  }
  return true;
}

