/* idx.c — IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
 *
 * Layout (big-endian): u8 0, u8 0, u8 type, u8 ndim, ndim x u32 dims, then the
 * elements row-major. type: 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32,
 * 0x0E f64. Every size is checked against the bytes the file can hold before the
 * tensor is allocated: the file size for a plain file, and for a gzip file its
 * trailer (ISIZE, the uncompressed size mod 2^32) and deflate's maximum ratio.
 */
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* deflate expands at most ~1032:1; a claim beyond that cannot be in the file */
#define IDX_MAX_RATIO 1040

static uint32_t be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Size of the file on disk and, for gzip, its ISIZE trailer. */
static int probe(const char *path, int64_t *fsize, bool *is_gz, uint32_t *isize) {
  FILE *f = fopen(path, "rb");
  if (!f) return mx_err(MX_EIO, "idx: cannot open '%s'", path);
  unsigned char m[2] = {0, 0}, t[4] = {0, 0, 0, 0};
  int rc = MX_OK;
  size_t got = fread(m, 1, 2, f);
  if (fseek(f, 0, SEEK_END) != 0) {
    rc = mx_err(MX_EIO, "idx: cannot seek in '%s'", path);
  } else {
    long n = ftell(f);
    if (n < 0) rc = mx_err(MX_EIO, "idx: cannot tell the size of '%s'", path);
    *fsize = n;
    *is_gz = got == 2 && m[0] == 0x1f && m[1] == 0x8b;
    if (!rc && *is_gz) {
      if (n < 18 || fseek(f, n - 4, SEEK_SET) != 0 || fread(t, 1, 4, f) != 4)
        rc = mx_err(MX_EFORMAT, "idx: '%s' is a truncated gzip file (%ld bytes)", path, n);
      *isize = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 |
               (uint32_t)t[3] << 24;
    }
  }
  fclose(f);
  return rc;
}

/* Where the bytes come from: a file through gzread (plain or gzip), a plain memory
 * buffer, or a gzip memory buffer through inflate. */
typedef struct {
  int kind; /* 0 file, 1 memory, 2 gzip memory */
  gzFile g;
  const unsigned char *buf;
  size_t len, pos;
  z_stream zs;
  int zend; /* inflate reached the end of the stream */
} idx_src;

static int src_read(idx_src *s, void *dst, int64_t n) {
  char *p = dst;
  if (s->kind == 0) {
    while (n > 0) {
      unsigned chunk = n > (1 << 30) ? (1u << 30) : (unsigned)n;
      int r = gzread(s->g, p, chunk);
      if (r <= 0) return -1;
      p += r;
      n -= r;
    }
    return 0;
  }
  if (s->kind == 1) {
    if ((uint64_t)n > s->len - s->pos) return -1;
    memcpy(p, s->buf + s->pos, (size_t)n);
    s->pos += (size_t)n;
    return 0;
  }
  while (n > 0) {
    if (s->zend) return -1;
    unsigned chunk = n > (1 << 30) ? (1u << 30) : (unsigned)n;
    s->zs.next_out = (Bytef *)p;
    s->zs.avail_out = chunk;
    int r = inflate(&s->zs, Z_NO_FLUSH);
    unsigned got = chunk - s->zs.avail_out;
    p += got;
    n -= got;
    if (r == Z_STREAM_END) s->zend = 1;
    else if (r != Z_OK) return -1;
    else if (got == 0 && s->zs.avail_in == 0) return -1;
  }
  return 0;
}

static const char *src_zmsg(idx_src *s) {
  int err = 0;
  if (s->kind == 0) {
    const char *m = gzerror(s->g, &err);
    return err ? m : NULL;
  }
  if (s->kind == 2) return s->zs.msg;
  return NULL;
}

static void src_close(idx_src *s) {
  if (s->kind == 0 && s->g) gzclose(s->g);
  if (s->kind == 2) inflateEnd(&s->zs);
}

/* Parse from s. `name` names the source in messages; `size` is the byte count of
 * the file or buffer; for gzip, isize is its trailer. Closes s. */
static int parse(idx_src *s, const char *name, int64_t size, bool is_gz, uint32_t isize,
                 mx_tensor **out) {
  int rc;
  unsigned char hdr[4 + 4 * 255];
  if (src_read(s, hdr, 4) != 0) {
    src_close(s);
    return mx_err(MX_EFORMAT, "idx: '%s' is too short for an IDX header", name);
  }
  if (hdr[0] != 0 || hdr[1] != 0) {
    src_close(s);
    return mx_err(MX_EFORMAT,
                  "idx: '%s' is not an IDX file (magic bytes %02x %02x %02x %02x; expected "
                  "00 00 <type> <ndim>)", name, hdr[0], hdr[1], hdr[2], hdr[3]);
  }
  int type = hdr[2], ndim = hdr[3], dtype, esize;
  switch (type) {
  case 0x08: dtype = MX_U8; esize = 1; break;
  case 0x09: dtype = MX_I8; esize = 1; break;
  case 0x0B: dtype = MX_I32; esize = 2; break; /* i16 widens to int32 */
  case 0x0C: dtype = MX_I32; esize = 4; break;
  case 0x0D: dtype = MX_F32; esize = 4; break;
  case 0x0E: dtype = MX_F64; esize = 8; break;
  default:
    src_close(s);
    return mx_err(MX_EFORMAT, "idx: '%s' has unknown element type 0x%02x", name, type);
  }
  if (ndim < 1 || ndim > MX_MAX_DIM) {
    src_close(s);
    return mx_err(MX_EFORMAT, "idx: '%s' has %d dimensions; supported: 1 to %d", name, ndim,
                  MX_MAX_DIM);
  }
  if (src_read(s, hdr + 4, 4 * (int64_t)ndim) != 0) {
    src_close(s);
    return mx_err(MX_EFORMAT, "idx: '%s' ends inside its header (%d dims)", name, ndim);
  }
  int64_t shape[MX_MAX_DIM], count = 1;
  for (int i = 0; i < ndim; i++) {
    shape[i] = be32(hdr + 4 + 4 * i);
    if (shape[i] && count > (INT64_MAX / 16) / shape[i]) {
      char b[MX_SHAPE_BUF];
      src_close(s);
      return mx_err(MX_EFORMAT, "idx: '%s' claims an impossible shape %s", name,
                    mx_shape_str(b, i + 1, shape));
    }
    count *= shape[i];
  }
  int64_t hbytes = 4 + 4 * (int64_t)ndim, dbytes = count * esize;
  int64_t total = hbytes + dbytes;
  char sb[MX_SHAPE_BUF];
  if (is_gz) {
    if (dbytes / IDX_MAX_RATIO > size || (uint32_t)total != isize) {
      src_close(s);
      return mx_err(MX_EFORMAT,
                    "idx: '%s' claims shape %s (%lld data bytes) but the gzip stream holds "
                    "%u bytes (mod 2^32) in %lld compressed bytes: truncated or corrupt",
                    name, mx_shape_str(sb, ndim, shape), (long long)dbytes, isize,
                    (long long)size);
    }
  } else if (total != size) {
    src_close(s);
    return mx_err(MX_EFORMAT, "idx: '%s' claims shape %s (%lld bytes with the header) but "
                  "has %lld bytes", name, mx_shape_str(sb, ndim, shape), (long long)total,
                  (long long)size);
  }

  mx_tensor *t;
  if ((rc = mx_tensor_new(ndim, shape, dtype, MX_CPU, 0, &t))) {
    src_close(s);
    return rc;
  }
  unsigned char *p = mx_ptr(t);
  /* i16 is read into the upper half of the int32 buffer, then widened in place */
  unsigned char *dst = esize == 2 ? p + 2 * count : p;
  if (src_read(s, dst, dbytes) != 0) {
    const char *zmsg = src_zmsg(s);
    rc = mx_err(MX_EFORMAT, "idx: '%s' ends before its %lld data bytes%s%s", name,
                (long long)dbytes, zmsg ? ": " : "", zmsg ? zmsg : "");
    src_close(s);
    mx_tensor_release(t);
    return rc;
  }
  unsigned char extra;
  int more = src_read(s, &extra, 1) == 0;
  src_close(s);
  if (more) {
    mx_tensor_release(t);
    return mx_err(MX_EFORMAT, "idx: '%s' has bytes after the %lld its header announces", name,
                  (long long)total);
  }
  /* big-endian -> host (little-endian x86/ARM) */
  switch (esize) {
  case 2: {
    int32_t *o = (int32_t *)p;
    for (int64_t i = 0; i < count; i++) {
      const unsigned char *q = dst + 2 * i;
      o[i] = (int16_t)((uint16_t)q[0] << 8 | q[1]);
    }
    break;
  }
  case 4: {
    uint32_t *o = (uint32_t *)p;
    for (int64_t i = 0; i < count; i++) o[i] = be32(p + 4 * i);
    break;
  }
  case 8: {
    uint64_t *o = (uint64_t *)p;
    for (int64_t i = 0; i < count; i++)
      o[i] = (uint64_t)be32(p + 8 * i) << 32 | be32(p + 8 * i + 4);
    break;
  }
  default: break;
  }
  *out = t;
  return MX_OK;
}

int mx_idx_load(const char *path, mx_tensor **out) {
  if (!path || !out) return mx_err(MX_EINVAL, "idx: path and out must not be NULL");
  *out = NULL;
  int64_t fsize = 0;
  bool is_gz = false;
  uint32_t isize = 0;
  int rc = probe(path, &fsize, &is_gz, &isize);
  if (rc) return rc;
  idx_src s;
  memset(&s, 0, sizeof s);
  s.kind = 0;
  s.g = gzopen(path, "rb");
  if (!s.g) return mx_err(MX_EIO, "idx: cannot open '%s'", path);
  gzbuffer(s.g, 1 << 17);
  return parse(&s, path, fsize, is_gz, isize, out);
}

int mx_idx_load_bytes(const void *buf, size_t len, mx_tensor **out) {
  if (!out || (!buf && len)) return mx_err(MX_EINVAL, "idx: buf and out must not be NULL");
  *out = NULL;
  const unsigned char *b = buf;
  idx_src s;
  memset(&s, 0, sizeof s);
  s.buf = b;
  s.len = len;
  bool is_gz = len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
  uint32_t isize = 0;
  if (!is_gz) {
    s.kind = 1;
    return parse(&s, "<memory>", (int64_t)len, false, 0, out);
  }
  if (len < 18)
    return mx_err(MX_EFORMAT, "idx: '<memory>' is a truncated gzip stream (%zu bytes)", len);
  isize = (uint32_t)b[len - 4] | (uint32_t)b[len - 3] << 8 | (uint32_t)b[len - 2] << 16 |
          (uint32_t)b[len - 1] << 24;
  s.kind = 2;
  if (inflateInit2(&s.zs, 16 + MAX_WBITS) != Z_OK)
    return mx_err(MX_ENOMEM, "idx: cannot start zlib's inflate");
  s.zs.next_in = (Bytef *)b;
  s.zs.avail_in = len > UINT_MAX ? UINT_MAX : (unsigned)len;
  return parse(&s, "<memory>", (int64_t)len, true, isize, out);
}
