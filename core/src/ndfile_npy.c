/* ndfile_npy.c — NumPy's .npy (MXNet 2.0's npx.save of one array) and .npz (a zip of
 * .npy entries, stored or deflated through zlib), read through ndfile_read.h's checked cursor. */
#include "ndfile_read.h"

#include <stdlib.h>
#include <zlib.h>

/* deflate cannot expand more than ~1032:1; a larger claim is a lie */
#define INFLATE_MAX_RATIO 1040

/* ---- .npy ---------------------------------------------------------------------- */

typedef struct npy_hdr {
  char descr[32];
  bool has_descr, has_fortran, has_shape, fortran;
  int ndim;
  int64_t shape[MX_MAX_DIM];
} npy_hdr;

typedef struct scan {
  const char *s;
  size_t n, i;
} scan;

static void sc_ws(scan *t) {
  while (t->i < t->n && (t->s[t->i] == ' ' || t->s[t->i] == '\t' || t->s[t->i] == '\n' ||
                         t->s[t->i] == '\r'))
    t->i++;
}
static bool sc_eat(scan *t, char ch) {
  sc_ws(t);
  if (t->i < t->n && t->s[t->i] == ch) { t->i++; return true; }
  return false;
}
static bool sc_word(scan *t, const char *w) {
  sc_ws(t);
  size_t k = strlen(w);
  if (t->n - t->i >= k && memcmp(t->s + t->i, w, k) == 0) { t->i += k; return true; }
  return false;
}
/* A Python string literal in ' or " without escapes, copied into out (cap). */
static bool sc_str(scan *t, char *out, size_t cap) {
  sc_ws(t);
  if (t->i >= t->n || (t->s[t->i] != '\'' && t->s[t->i] != '"')) return false;
  char q = t->s[t->i++];
  size_t k = 0;
  while (t->i < t->n && t->s[t->i] != q) {
    if (t->s[t->i] == '\\' || k + 1 >= cap) return false;
    out[k++] = t->s[t->i++];
  }
  if (t->i >= t->n) return false;
  t->i++;
  out[k] = 0;
  return true;
}

static int parse_npy_header(ld *c, const char *s, size_t n, npy_hdr *h) {
  scan t = {s, n, 0};
  char key[32];
  memset(h, 0, sizeof *h);
  if (!sc_eat(&t, '{')) return mx_ndf_fail(c, "the .npy header is not a Python dict literal");
  for (;;) {
    if (sc_eat(&t, '}')) break;
    if (!sc_str(&t, key, sizeof key) || !sc_eat(&t, ':'))
      return mx_ndf_fail(c, "malformed .npy header near offset %zu", t.i);
    if (strcmp(key, "descr") == 0 && !h->has_descr) {
      if (sc_eat(&t, '[')) { /* MXNet 2.0 writes bfloat16 as [('bfloat16', '<u2')] */
        char a[32], b[32];
        if (!sc_eat(&t, '(') || !sc_str(&t, a, sizeof a) || !sc_eat(&t, ',') ||
            !sc_str(&t, b, sizeof b) || !sc_eat(&t, ')') || (sc_eat(&t, ','), !sc_eat(&t, ']')) ||
            strcmp(a, "bfloat16") != 0 || strcmp(b, "<u2") != 0)
          return mx_ndf_fail(c, "unsupported structured dtype in the .npy header");
        strcpy(h->descr, "bfloat16");
      } else if (!sc_str(&t, h->descr, sizeof h->descr)) {
        return mx_ndf_fail(c, "malformed 'descr' in the .npy header");
      }
      h->has_descr = true;
    } else if (strcmp(key, "fortran_order") == 0 && !h->has_fortran) {
      if (sc_word(&t, "True")) h->fortran = true;
      else if (sc_word(&t, "False")) h->fortran = false;
      else return mx_ndf_fail(c, "malformed 'fortran_order' in the .npy header");
      h->has_fortran = true;
    } else if (strcmp(key, "shape") == 0 && !h->has_shape) {
      if (!sc_eat(&t, '(')) return mx_ndf_fail(c, "malformed 'shape' in the .npy header");
      h->ndim = 0;
      for (;;) {
        if (sc_eat(&t, ')')) break;
        sc_ws(&t);
        if (t.i >= t.n || t.s[t.i] < '0' || t.s[t.i] > '9')
          return mx_ndf_fail(c, "malformed 'shape' in the .npy header (a dimension must be a "
                      "non-negative integer)");
        uint64_t v = 0;
        while (t.i < t.n && t.s[t.i] >= '0' && t.s[t.i] <= '9') {
          v = v * 10 + (uint64_t)(t.s[t.i++] - '0');
          if (v > (uint64_t)INT64_MAX / 16)
            return mx_ndf_fail(c, "a dimension in the .npy header's 'shape' is too large");
        }
        if (t.i < t.n && t.s[t.i] == 'L') t.i++; /* Python 2 longs */
        if (h->ndim >= MX_MAX_DIM)
          return mx_ndf_fail(c, "the .npy shape has more than %d dimensions", MX_MAX_DIM);
        h->shape[h->ndim++] = (int64_t)v;
        if (!sc_eat(&t, ',')) {
          if (!sc_eat(&t, ')')) return mx_ndf_fail(c, "malformed 'shape' in the .npy header");
          break;
        }
      }
      h->has_shape = true;
    } else {
      return mx_ndf_fail(c, "unexpected or repeated key '%s' in the .npy header",
                  mx_ndf_printable(key, sizeof key, key, strlen(key)));
    }
    if (!sc_eat(&t, ',')) {
      if (!sc_eat(&t, '}')) return mx_ndf_fail(c, "malformed .npy header near offset %zu", t.i);
      break;
    }
  }
  sc_ws(&t);
  if (t.i != t.n) return mx_ndf_fail(c, "unexpected text after the .npy header's dict");
  if (!h->has_descr || !h->has_fortran || !h->has_shape)
    return mx_ndf_fail(c, "the .npy header lacks one of 'descr', 'fortran_order', 'shape'");
  return MX_OK;
}

/* descr -> dtype; *swap for big-endian multi-byte data. */
static int npy_dtype(ld *c, const char *d, int *dtype, bool *swap) {
  *swap = false;
  if (strcmp(d, "bfloat16") == 0) { *dtype = MX_BF16; return MX_OK; }
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return mx_ndf_fail(c, "unsupported .npy dtype '%s'", d);
  static const struct { const char *k; int dt; } map[] = {
      {"f4", MX_F32}, {"f8", MX_F64}, {"f2", MX_F16}, {"u1", MX_U8}, {"i4", MX_I32},
      {"i1", MX_I8}, {"i8", MX_I64}, {"b1", MX_BOOL}, {"i2", MX_I16}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (strcmp(d + 1, map[i].k) == 0) {
      *dtype = map[i].dt;
      *swap = order == '>' && mx_dtype_size(map[i].dt) > 1;
      if (order == '|' && mx_dtype_size(map[i].dt) > 1)
        return mx_ndf_fail(c, "the .npy dtype '%s' has no byte order", d);
      return MX_OK;
    }
  }
  char nm[64];
  return mx_ndf_fail(c, "unsupported .npy dtype '%s' (luamx reads f2/f4/f8/i1/i2/i4/i8/u1/b1 and "
              "bfloat16)", mx_ndf_printable(nm, sizeof nm, d, strlen(d)));
}

static void byteswap(uint8_t *p, size_t esize, int64_t n) {
  for (int64_t i = 0; i < n; i++, p += esize)
    for (size_t a = 0, b = esize - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* Fortran (column-major) src -> C order dst: walk dst in row-major order while
 * tracking the matching column-major offset. */
static void fortran_to_c(uint8_t *dst, const uint8_t *src, int ndim, const int64_t *shape,
                         size_t esize, int64_t total) {
  int64_t fstride[MX_MAX_DIM], idx[MX_MAX_DIM] = {0};
  int64_t s = 1;
  for (int d = 0; d < ndim; d++) { fstride[d] = s; s *= shape[d]; }
  int64_t off = 0;
  for (int64_t i = 0; i < total; i++) {
    memcpy(dst + (size_t)i * esize, src + (size_t)off * esize, esize);
    for (int d = ndim - 1; d >= 0; d--) { /* increment the row-major index */
      idx[d]++;
      off += fstride[d];
      if (idx[d] < shape[d]) break;
      off -= fstride[d] * shape[d];
      idx[d] = 0;
    }
  }
}

/* One .npy image p[0..len): validates; builds the tensor when out != NULL. */
int mx_ndf_load_npy(ld *c, mx_tensor **out) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  uint8_t head[8];
  int rc;
  if ((rc = mx_ndf_rd_bytes(c, head, 8, "the .npy preamble"))) return rc;
  if (memcmp(head, magic, 6) != 0) { c->pos = 0; return mx_ndf_fail(c, "bad .npy magic"); }
  uint32_t hlen = 0;
  if (head[6] == 1) {
    uint16_t h16 = 0;
    if ((rc = mx_ndf_rd_bytes(c, &h16, 2, "the .npy header length"))) return rc;
    hlen = h16;
  } else if (head[6] == 2 || head[6] == 3) {
    if ((rc = mx_ndf_rd_u32(c, &hlen, "the .npy header length"))) return rc;
  } else {
    c->pos = 6;
    return mx_ndf_fail(c, "unsupported .npy format version %u.%u", head[6], head[7]);
  }
  if (hlen > mx_ndf_left(c))
    return mx_ndf_fail(c, ".npy header length %u exceeds the %zu bytes left", hlen, mx_ndf_left(c));
  npy_hdr h;
  size_t hstart = c->pos;
  if ((rc = parse_npy_header(c, (const char *)c->p + hstart, hlen, &h))) return rc;
  c->pos += hlen;
  int dtype = 0;
  bool swap = false;
  if ((rc = npy_dtype(c, h.descr, &dtype, &swap))) return rc;
  size_t esize = mx_dtype_size(dtype), bytes = 0, off = 0;
  if ((rc = mx_ndf_data_bytes(c, h.ndim, h.shape, esize, &bytes))) return rc;
  if ((rc = mx_ndf_take_data(c, "the .npy array", bytes, &off))) return rc;
  if (c->pos != c->len)
    return mx_ndf_fail(c, "%zu unexpected bytes after the .npy data (trailing garbage)", mx_ndf_left(c));
  if (!out) return MX_OK;
  mx_tensor *t;
  if ((rc = mx_ndf_new_tensor(c, h.ndim, h.shape, dtype, &t))) return rc;
  if (h.fortran && h.ndim > 1)
    fortran_to_c(mx_ptr(t), c->p + off, h.ndim, h.shape, esize, t->size);
  else if (bytes)
    memcpy(mx_ptr(t), c->p + off, bytes);
  if (swap) byteswap(mx_ptr(t), esize, t->size);
  *out = t;
  return MX_OK;
}

/* ---- .npz (zip) ------------------------------------------------------------------ */


typedef struct zentry {
  uint64_t csize, usize, lh_off;
  uint32_t crc;
  uint16_t method, flags;
  const uint8_t *name;
  uint16_t name_len;
} zentry;

/* Reads the zip64 extended-information extra field for the members that are
 * 0xFFFFFFFF in the central directory. */
static int zip64_extra(ld *c, const uint8_t *x, size_t xlen, zentry *e, bool need_u,
                       bool need_c, bool need_o) {
  size_t i = 0;
  while (i + 4 <= xlen) {
    uint16_t id = mx_ndf_le16(x + i), sz = mx_ndf_le16(x + i + 2);
    if (i + 4 + sz > xlen) break;
    if (id == 1) {
      const uint8_t *q = x + i + 4;
      size_t k = 0;
      if (need_u) { if (k + 8 > sz) goto bad; e->usize = mx_ndf_le64(q + k); k += 8; }
      if (need_c) { if (k + 8 > sz) goto bad; e->csize = mx_ndf_le64(q + k); k += 8; }
      if (need_o) { if (k + 8 > sz) goto bad; e->lh_off = mx_ndf_le64(q + k); k += 8; }
      return MX_OK;
    }
    i += 4 + (size_t)sz;
  }
bad:
  return mx_ndf_fail(c, "a zip64 size or offset is missing from the entry's extra field");
}

static int inflate_entry(ld *c, const uint8_t *src, uint64_t csize, uint8_t *dst,
                         uint64_t usize) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return mx_ndf_fail_nomem(c, "zlib inflateInit failed");
  uint64_t in_left = csize, out_left = usize;
  zs.next_in = (Bytef *)(uintptr_t)src;
  zs.next_out = dst;
  int zr = Z_OK;
  while (zr == Z_OK) {
    /* feed at most 1 GiB at a time: avail_in/avail_out are 32-bit */
    if (zs.avail_in == 0 && in_left) {
      zs.avail_in = (uInt)(in_left < (1u << 30) ? in_left : (1u << 30));
      in_left -= zs.avail_in;
    }
    if (zs.avail_out == 0 && out_left) {
      zs.avail_out = (uInt)(out_left < (1u << 30) ? out_left : (1u << 30));
      out_left -= zs.avail_out;
    }
    uInt before_in = zs.avail_in, before_out = zs.avail_out;
    zr = inflate(&zs, Z_NO_FLUSH);
    if (zr == Z_BUF_ERROR || (zr == Z_OK && before_in == zs.avail_in &&
                              before_out == zs.avail_out))
      break; /* no progress: input ended early or output is full */
  }
  uint64_t got = zs.total_out;
  inflateEnd(&zs);
  if (zr != Z_STREAM_END)
    return mx_ndf_fail(c, "corrupt deflate data (zlib: %s)",
                zr == Z_DATA_ERROR ? "invalid data" : zr == Z_MEM_ERROR ? "out of memory"
                                   : "stream ends early or inflates past the stated size");
  if (got != usize)
    return mx_ndf_fail(c, "deflate data inflates to %llu bytes, the directory says %llu",
                (unsigned long long)got, (unsigned long long)usize);
  return MX_OK;
}

int mx_ndf_load_npz(ld *c, result *res) {
  const uint8_t *p = c->p;
  size_t len = c->len;
  int rc;
  if (len < 22) return mx_ndf_fail(c, "a zip file of %zu bytes is too short", len);
  /* End of central directory: 22 bytes + a comment of up to 65535, scanned backwards */
  size_t eocd = SIZE_MAX;
  size_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
  for (size_t i = len - 22 + 1; i-- > lo;) {
    if (mx_ndf_le32(p + i) == 0x06054b50u && i + 22 + mx_ndf_le16(p + i + 20) <= len) { eocd = i; break; }
  }
  if (eocd == SIZE_MAX) return mx_ndf_fail(c, "no zip end-of-central-directory record found");
  c->pos = eocd;
  uint64_t count = mx_ndf_le16(p + eocd + 10), cd_size = mx_ndf_le32(p + eocd + 12),
           cd_off = mx_ndf_le32(p + eocd + 16);
  if (mx_ndf_le16(p + eocd + 4) != 0 || mx_ndf_le16(p + eocd + 6) != 0 ||
      mx_ndf_le16(p + eocd + 8) != mx_ndf_le16(p + eocd + 10))
    return mx_ndf_fail(c, "multi-disk zip archives are not supported");
  size_t cd_end = eocd;
  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
    /* zip64: locator (20 bytes) right before the EOCD points at the zip64 EOCD */
    if (eocd < 20 || mx_ndf_le32(p + eocd - 20) != 0x07064b50u)
      return mx_ndf_fail(c, "zip64 end-of-central-directory locator missing");
    uint64_t z = mx_ndf_le64(p + eocd - 20 + 8);
    c->pos = eocd - 20;
    if (z > eocd - 20 || eocd - 20 - z < 56 || mx_ndf_le32(p + z) != 0x06064b50u)
      return mx_ndf_fail(c, "zip64 end-of-central-directory record missing or out of bounds");
    c->pos = (size_t)z;
    count = mx_ndf_le64(p + z + 32);
    cd_size = mx_ndf_le64(p + z + 40);
    cd_off = mx_ndf_le64(p + z + 48);
    cd_end = (size_t)z;
  }
  if (cd_off > cd_end || cd_size > cd_end - cd_off)
    return mx_ndf_fail(c, "the zip central directory (offset %llu, %llu bytes) lies outside the "
                "file", (unsigned long long)cd_off, (unsigned long long)cd_size);
  if (count > MX_NDF_MAX_ARRAYS)
    return mx_ndf_fail(c, "the zip directory claims %llu entries; at most %d are supported",
                (unsigned long long)count, MX_NDF_MAX_ARRAYS);
  if (count > cd_size / 46)
    return mx_ndf_fail(c, "the zip directory claims %llu entries but has room for at most %llu",
                (unsigned long long)count, (unsigned long long)(cd_size / 46));
  res->n = (int64_t)count;
  res->arrays = calloc(count ? count : 1, sizeof *res->arrays);
  res->names = calloc(count ? count : 1, sizeof *res->names);
  if (!res->arrays || !res->names) return mx_ndf_fail_nomem(c, "out of memory for the zip directory");
  c->count = (int64_t)count;
  size_t q = (size_t)cd_off, q_end = (size_t)(cd_off + cd_size);
  for (uint64_t i = 0; i < count; i++) {
    c->pos = q;
    c->idx = (int64_t)i;
    if (q_end - q < 46 || mx_ndf_le32(p + q) != 0x02014b50u)
      return mx_ndf_fail(c, "zip central directory entry %llu is missing or damaged",
                  (unsigned long long)i + 1);
    zentry e;
    e.flags = mx_ndf_le16(p + q + 8);
    e.method = mx_ndf_le16(p + q + 10);
    e.crc = mx_ndf_le32(p + q + 16);
    e.csize = mx_ndf_le32(p + q + 20);
    e.usize = mx_ndf_le32(p + q + 24);
    e.name_len = mx_ndf_le16(p + q + 28);
    uint16_t xlen = mx_ndf_le16(p + q + 30), clen = mx_ndf_le16(p + q + 32);
    e.lh_off = mx_ndf_le32(p + q + 42);
    if ((size_t)46 + e.name_len + xlen + clen > q_end - q)
      return mx_ndf_fail(c, "zip central directory entry %llu overruns the directory",
                  (unsigned long long)i + 1);
    e.name = p + q + 46;
    bool nu = e.usize == 0xFFFFFFFFu, nc = e.csize == 0xFFFFFFFFu, no = e.lh_off == 0xFFFFFFFFu;
    if ((nu || nc || no) && (rc = zip64_extra(c, p + q + 46 + e.name_len, xlen, &e, nu, nc, no)))
      return rc;
    q += 46 + (size_t)e.name_len + xlen + clen;
    /* the name, minus ".npy", is the array's key */
    if (e.name_len < 4 || memcmp(e.name + e.name_len - 4, ".npy", 4) != 0 ||
        memchr(e.name, 0, e.name_len)) {
      char nm[200];
      return mx_ndf_fail(c, "zip entry '%s' is not a .npy array",
                  mx_ndf_printable(nm, sizeof nm, (const char *)e.name, e.name_len));
    }
    char *key = malloc((size_t)e.name_len - 3);
    if (!key) return mx_ndf_fail_nomem(c, "out of memory for an entry name");
    memcpy(key, e.name, (size_t)e.name_len - 4);
    key[e.name_len - 4] = 0;
    res->names[i] = key;
    c->name = key;
    if (e.flags & 1) return mx_ndf_fail(c, "encrypted zip entries are not supported");
    if (e.method != 0 && e.method != 8)
      return mx_ndf_fail(c, "zip compression method %u is not supported (stored or deflate only)",
                  e.method);
    /* local header: its own name/extra lengths decide where the data starts */
    c->pos = (size_t)(e.lh_off < len ? e.lh_off : len);
    if (e.lh_off > cd_off || cd_off - e.lh_off < 30 || mx_ndf_le32(p + e.lh_off) != 0x04034b50u)
      return mx_ndf_fail(c, "the local header of this zip entry is missing or out of bounds");
    uint64_t data = e.lh_off + 30 + mx_ndf_le16(p + e.lh_off + 26) + mx_ndf_le16(p + e.lh_off + 28);
    if (mx_ndf_le16(p + e.lh_off + 26) != e.name_len ||
        (e.lh_off + 30 + e.name_len <= cd_off &&
         memcmp(p + e.lh_off + 30, e.name, e.name_len) != 0))
      return mx_ndf_fail(c, "the local header's name differs from the central directory's");
    if (data > cd_off || e.csize > cd_off - data)
      return mx_ndf_fail(c, "zip entry data (%llu bytes at %llu) runs past the central directory",
                  (unsigned long long)e.csize, (unsigned long long)data);
    const uint8_t *img = p + data;
    uint8_t *buf = NULL;
    if (e.method == 0) {
      if (e.csize != e.usize)
        return mx_ndf_fail(c, "stored zip entry with compressed size %llu != size %llu",
                    (unsigned long long)e.csize, (unsigned long long)e.usize);
    } else {
      if (e.usize / INFLATE_MAX_RATIO > e.csize + 1)
        return mx_ndf_fail(c, "zip entry claims %llu bytes from %llu compressed: more than deflate "
                    "can expand", (unsigned long long)e.usize, (unsigned long long)e.csize);
      buf = malloc(e.usize ? (size_t)e.usize : 1);
      if (!buf)
        return mx_ndf_fail_nomem(c, "out of memory inflating %llu bytes", (unsigned long long)e.usize);
      c->pos = (size_t)data;
      if ((rc = inflate_entry(c, img, e.csize, buf, e.usize))) { free(buf); return rc; }
      img = buf;
    }
    {
      uLong crc = crc32(0L, Z_NULL, 0);
      uint64_t done = 0;
      while (done < e.usize) { /* crc32's length is 32-bit */
        uInt chunk = (uInt)(e.usize - done < (1u << 30) ? e.usize - done : (1u << 30));
        crc = crc32(crc, img + done, chunk);
        done += chunk;
      }
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION /* let the fuzzer past the checksum */
      if ((uint32_t)crc != e.crc) {
        free(buf);
        c->pos = (size_t)data;
        return mx_ndf_fail(c, "CRC-32 mismatch (data 0x%08x, directory 0x%08x)", (uint32_t)crc, e.crc);
      }
#endif
    }
    ld sub = {img, (size_t)e.usize, 0, c->file, key, (int64_t)i, (int64_t)count, key};
    rc = mx_ndf_load_npy(&sub, &res->arrays[i]);
    free(buf);
    if (rc) return rc;
  }
  c->idx = -1;
  c->name = NULL;
  c->pos = q;
  if (q != q_end)
    return mx_ndf_fail(c, "the zip central directory has %zu bytes beyond its %llu entries",
                q_end - q, (unsigned long long)count);
  c->pos = len;
  return mx_ndf_check_unique(c, res->names, res->n);
}

