/* recordio.c — MXNet's RecordIO files (dmlc-core's format, what im2rec and
 * mx.recordio write), read and written exactly.
 *
 * A record is one or more parts, each: u32 magic 0xced7230a, u32 lrecord =
 * cflag << 29 | length, `length` bytes, zero padding to a multiple of 4. cflag 0 is a
 * whole record; a record whose data holds the magic word at a 4-aligned offset is cut
 * there into parts (1 first, 2 middle, 3 last) and the magic words themselves are not
 * stored: the reader puts them back between the parts. All little-endian. */
#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RIO_MAGIC 0xced7230aU
#define RIO_LEN_MASK ((1U << 29) - 1U)

struct mx_recordio {
  FILE *f;
  bool writing;
  mx_atomic_file af; /* writer: the temp file that becomes path at close */
  char *path;        /* for messages ("<memory>" for bytes) */
  unsigned char *buf; /* reader: the last record */
  size_t cap;
  int64_t pos;       /* byte offset of the next part's header */
  int64_t size;      /* reader: the file's size (a part longer than what is left is
                      * truncation, found before anything is allocated for it) */
  bool failed;       /* writer: a write failed; close must not commit */
};

static int open_fail(mx_recordio *r, int rc) {
  if (r) {
    free(r->path);
    free(r);
  }
  return rc;
}

int mx_recordio_open(const char *path, const char *mode, mx_recordio **out) {
  if (!out) return mx_err(MX_EINVAL, "mx.recordio: NULL result pointer");
  *out = NULL;
  if (!path || !*path) return mx_err(MX_EINVAL, "mx.recordio: empty path");
  if (!mode || (strcmp(mode, "r") != 0 && strcmp(mode, "w") != 0))
    return mx_err(MX_EINVAL, "mx.recordio: '%s': flag must be 'r' or 'w', got '%s'", path,
                  mode ? mode : "(null)");
  mx_recordio *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) return open_fail(r, mx_err(MX_ENOMEM, "mx.recordio: out of memory"));
  if (mode[0] == 'w') {
    int rc = mx_atomic_begin(&r->af, r->path, "mx.recordio");
    if (rc) return open_fail(r, rc);
    r->f = r->af.f;
    r->writing = true;
  } else {
    r->f = fopen(path, "rb");
    if (!r->f)
      return open_fail(r, mx_err(MX_EIO, "mx.recordio: cannot open '%s': %s", path, strerror(errno)));
    struct stat st;
    if (fstat(fileno(r->f), &st) != 0 || !S_ISREG(st.st_mode)) {
      fclose(r->f);
      return open_fail(r, mx_err(MX_EIO, "mx.recordio: '%s' is not a regular file", path));
    }
    r->size = (int64_t)st.st_size;
  }
  *out = r;
  return MX_OK;
}

int mx_recordio_open_bytes(const void *data, size_t len, mx_recordio **out) {
  if (!out) return mx_err(MX_EINVAL, "mx.recordio: NULL result pointer");
  *out = NULL;
  mx_recordio *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup("<memory>"))) return open_fail(r, mx_err(MX_ENOMEM, "mx.recordio: out of memory"));
  static const char empty[1];
  /* fmemopen does not take a zero-size buffer everywhere: an empty one reads as EOF */
  r->f = fmemopen((void *)(len ? data : empty), len ? len : 1, "rb");
  if (!r->f) return open_fail(r, mx_err(MX_ENOMEM, "mx.recordio: <memory>: %s", strerror(errno)));
  if (!len) fseek(r->f, 1, SEEK_SET);
  r->size = (int64_t)len;
  *out = r;
  return MX_OK;
}

static uint32_t rd_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void wr_u32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

static int grow(mx_recordio *r, size_t need) {
  if (need <= r->cap) return MX_OK;
  size_t cap = r->cap ? r->cap : 4096;
  while (cap < need) cap *= 2;
  unsigned char *b = realloc(r->buf, cap);
  if (!b) return mx_err(MX_ENOMEM, "mx.recordio: '%s': out of memory for a %zu-byte record", r->path, need);
  r->buf = b;
  r->cap = cap;
  return MX_OK;
}

int mx_recordio_read(mx_recordio *r, const void **data, size_t *len) {
  if (!r || !data || !len) return mx_err(MX_EINVAL, "mx.recordio: read: NULL argument");
  *data = NULL;
  *len = 0;
  if (r->writing) return mx_err(MX_EINVAL, "mx.recordio: '%s' is open for writing, not reading", r->path);
  size_t have = 0;
  int64_t start = r->pos;
  int rc0 = grow(r, 1); /* a buffer even for an empty record: NULL data means the end */
  if (rc0) return rc0;
  for (int part = 0;; part++) {
    unsigned char h[8];
    size_t got = fread(h, 1, 8, r->f);
    if (got == 0 && part == 0 && feof(r->f)) return MX_OK; /* the end of the file */
    if (got < 8)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': truncated record header at byte %lld",
                    r->path, (long long)r->pos);
    uint32_t magic = rd_u32(h), lrec = rd_u32(h + 4);
    if (magic != RIO_MAGIC)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': bad magic 0x%08x at byte %lld (expected "
                    "0xced7230a: not a RecordIO file, corrupt, or a seek to a position that "
                    "is not a record's start)", r->path, magic, (long long)r->pos);
    uint32_t cflag = lrec >> 29, n = lrec & RIO_LEN_MASK;
    if (cflag > 3)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': invalid part flag %u at byte %lld",
                    r->path, cflag, (long long)r->pos);
    if (part == 0 && cflag >= 2)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': a continuation part (flag %u) at byte "
                    "%lld where a record starts", r->path, cflag, (long long)r->pos);
    if (part > 0 && cflag < 2)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': record at byte %lld ends without its "
                    "last part (flag %u at byte %lld)", r->path, (long long)start, cflag,
                    (long long)r->pos);
    size_t padded = ((size_t)n + 3U) & ~(size_t)3U;
    if ((int64_t)padded > r->size - r->pos - 8)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': truncated record at byte %lld (%u bytes "
                    "declared, %lld left in the file)", r->path, (long long)r->pos, n,
                    (long long)(r->size - r->pos - 8));
    size_t extra = part > 0 ? 4 : 0; /* the magic word the writer cut out */
    int rc = grow(r, have + extra + padded);
    if (rc) return rc;
    if (extra) {
      wr_u32(r->buf + have, RIO_MAGIC);
      have += 4;
    }
    if (padded && fread(r->buf + have, 1, padded, r->f) != padded)
      return mx_err(MX_EFORMAT, "mx.recordio: '%s': truncated record at byte %lld (%u bytes "
                    "declared)", r->path, (long long)r->pos, n);
    have += n;
    r->pos += 8 + (int64_t)padded;
    if (cflag == 0 || cflag == 3) break;
  }
  *data = r->buf;
  *len = have;
  return MX_OK;
}

static bool put(mx_recordio *r, const void *p, size_t n) {
  if (n && fwrite(p, 1, n, r->f) != n) r->failed = true;
  return !r->failed;
}

static void put_part(mx_recordio *r, uint32_t cflag, const unsigned char *p, uint32_t n) {
  static const unsigned char zeros[4];
  unsigned char h[8];
  wr_u32(h, RIO_MAGIC);
  wr_u32(h + 4, cflag << 29 | n);
  put(r, h, 8);
  put(r, p, n);
  put(r, zeros, (4U - (n & 3U)) & 3U);
  r->pos += 8 + (int64_t)((n + 3U) & ~3U);
}

int mx_recordio_write(mx_recordio *r, const void *data, size_t len) {
  if (!r) return mx_err(MX_EINVAL, "mx.recordio: write: NULL reader/writer");
  if (!r->writing) return mx_err(MX_EINVAL, "mx.recordio: '%s' is open for reading, not writing", r->path);
  if (len && !data) return mx_err(MX_EINVAL, "mx.recordio: write: NULL data for %zu bytes", len);
  if (len > RIO_LEN_MASK)
    return mx_err(MX_EINVAL, "mx.recordio: '%s': a record holds less than 2^29 bytes, got %zu",
                  r->path, len);
  const unsigned char *p = data;
  uint32_t n = (uint32_t)len, lower = n & ~3U, from = 0;
  for (uint32_t i = 0; i + 4 <= lower; i += 4) {
    if (rd_u32(p + i) != RIO_MAGIC) continue;
    put_part(r, from == 0 ? 1U : 2U, p + from, i - from);
    from = i + 4;
  }
  put_part(r, from == 0 ? 0U : 3U, p + from, n - from);
  if (r->failed)
    return mx_err(MX_EIO, "mx.recordio: cannot write '%s': %s", r->path, strerror(errno ? errno : EIO));
  return MX_OK;
}

int64_t mx_recordio_tell(const mx_recordio *r) { return r ? r->pos : -1; }

int mx_recordio_seek(mx_recordio *r, int64_t pos) {
  if (!r) return mx_err(MX_EINVAL, "mx.recordio: seek: NULL reader");
  if (r->writing) return mx_err(MX_EINVAL, "mx.recordio: '%s': seek needs a reader ('r')", r->path);
  if (pos < 0 || pos % 4 != 0)
    return mx_err(MX_EINVAL, "mx.recordio: '%s': seek to %lld: a record starts at a "
                  "non-negative multiple of 4", r->path, (long long)pos);
  if (fseeko(r->f, (off_t)pos, SEEK_SET) != 0)
    return mx_err(MX_EIO, "mx.recordio: '%s': seek to %lld: %s", r->path, (long long)pos, strerror(errno));
  clearerr(r->f);
  r->pos = pos;
  return MX_OK;
}

int mx_recordio_close(mx_recordio *r) {
  if (!r) return MX_OK;
  int rc = MX_OK;
  if (r->writing) rc = mx_atomic_end(&r->af, "mx.recordio", MX_OK, !r->failed);
  else if (r->f) fclose(r->f);
  free(r->buf);
  free(r->path);
  free(r);
  return rc;
}
