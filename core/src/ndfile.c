/* ndfile.c — MXNet NDArray list files (.params), NumPy .npy and .npz: load and save.
 *
 * Layouts: ../shared/reference/mxnet.md §2a and docs/file-formats.md. Everything is
 * little-endian. We write V2 (V3 when a 0-d tensor is in the list: V2 cannot express
 * one) and read V1/V2/V3, the oldest magic-less layout, .npy and .npz.
 *
 * Loading never trusts a header: every count and size is checked against the bytes
 * that are actually left before anything is allocated, products of dims are checked
 * for overflow, and a .params file is walked twice — once to validate the whole file
 * (records, names, trailing bytes) without allocating tensors, then once to build —
 * so a lie anywhere in the file costs no allocation and errors in the second walk
 * can name the array (names sit at the end of the file).
 */
#include "internal.h"
#include "layout.h"
#include "xfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ndfile.c copies array bytes as stored: it assumes a little-endian host"
#endif

#define LIST_MAGIC 0x112u
#define V1_MAGIC 0xF993FAC8u
#define V2_MAGIC 0xF993FAC9u
#define V3_MAGIC 0xF993FACAu
/* deflate cannot expand more than ~1032:1; a larger claim is a lie */
#define INFLATE_MAX_RATIO 1040
/* Far beyond any real checkpoint; bounds the tensors (about 200 bytes each, even for
 * an empty one) that a file of tiny records could make us allocate. */
#define MAX_ARRAYS (1 << 24)

/* ---- load context and error messages ---------------------------------------------- */

typedef struct ld {
  const uint8_t *p;
  size_t len, pos;
  const char *file;  /* path, or "<memory>" */
  const char *entry; /* npz entry name, or NULL */
  int64_t idx, count; /* array being read (0-based; -1: none) and how many */
  const char *name;   /* its name when known */
} ld;

/* Copies s into out (size cap) with non-printable bytes as \xNN, so a hostile name
 * cannot garble the message. */
static const char *printable(char *out, size_t cap, const char *s, size_t n) {
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
             printable(nm, sizeof nm, c->entry, strlen(c->entry)));
  if (c->idx >= 0 && !c->entry) {
    if (c->name)
      snprintf(where, sizeof where, "array %lld of %lld ('%s'): ",
               (long long)c->idx + 1, (long long)c->count,
               printable(nm, sizeof nm, c->name, strlen(c->name)));
    else
      snprintf(where, sizeof where, "array %lld of %lld: ", (long long)c->idx + 1,
               (long long)c->count);
  }
  mx_err(code, "mx.nd.load: %s: %s%s (at byte %zu)", c->file, where, msg, c->pos);
  return code; /* a constant the compiler sees: callers' outputs are set on success only */
}

static int fail(const ld *c, const char *fmt, ...) MX_PRINTF(2, 3);
static int fail(const ld *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = fail_code(c, MX_EFORMAT, fmt, ap);
  va_end(ap);
  return rc;
}

static int fail_nomem(const ld *c, const char *fmt, ...) MX_PRINTF(2, 3);
static int fail_nomem(const ld *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = fail_code(c, MX_ENOMEM, fmt, ap);
  va_end(ap);
  return rc;
}

static size_t left(const ld *c) { return c->len - c->pos; }

static int rd_bytes(ld *c, void *dst, size_t n, const char *what) {
  if (left(c) < n)
    return fail(c, "file ends inside %s (needs %zu bytes, %zu left)", what, n, left(c));
  memcpy(dst, c->p + c->pos, n);
  c->pos += n;
  return MX_OK;
}
static int rd_u32(ld *c, uint32_t *v, const char *what) { return rd_bytes(c, v, 4, what); }
static int rd_i32(ld *c, int32_t *v, const char *what) { return rd_bytes(c, v, 4, what); }
static int rd_u64(ld *c, uint64_t *v, const char *what) { return rd_bytes(c, v, 8, what); }

static const char *dtype_desc(int code) {
  const char *n = mx_dtype_name(code);
  if (n) return n;
  switch (code) { /* MXNet 2.0 codes luamx does not have */
  case 9: return "uint16";
  case 10: return "uint32";
  case 11: return "uint64";
  default: return NULL;
  }
}

static int check_dtype(ld *c, int32_t code, const char *what) {
  if (mx_dtype_size(code) > 0) return MX_OK;
  const char *n = dtype_desc(code);
  if (n) return fail(c, "%s %d (%s) is not supported by luamx", what, code, n);
  return fail(c, "unknown %s %d", what, code);
}

/* Bytes of data for ndim dims of esize-byte elements; overflow is an error. */
static int data_bytes(ld *c, int ndim, const int64_t *dims, size_t esize, size_t *out) {
  char b[MX_SHAPE_BUF];
  uint64_t n = esize;
  for (int i = 0; i < ndim; i++) {
    if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n) || n > (uint64_t)INT64_MAX / 16)
      return fail(c, "shape %s is too large (element count times %zu-byte elements "
                  "overflows)", mx_shape_str(b, ndim, dims), esize);
  }
  if (n > SIZE_MAX) return fail(c, "shape %s is too large", mx_shape_str(b, ndim, dims));
  *out = (size_t)n;
  return MX_OK;
}

/* ---- .params records ------------------------------------------------------------ */

typedef struct rec {
  int stype;   /* 0 dense, 1 row_sparse, 2 csr */
  bool none;   /* MXNet's "none" array: shape unknown, no data */
  int ndim;
  int64_t shape[MX_MAX_DIM];
  int dtype;
  size_t data_off, nbytes;
} rec;

/* A TShape: i32 ndim + ndim i64 dims. For V3 (np-shape) ndim -1 means "unknown"
 * (*unknown set); elsewhere a negative ndim is an error. */
static int rd_shape(ld *c, const char *what, bool v3, int *ndim, int64_t *dims,
                    bool *unknown) {
  int32_t nd = 0;
  int rc;
  *unknown = false;
  if ((rc = rd_i32(c, &nd, what))) return rc;
  if (nd == -1 && v3) { *unknown = true; *ndim = -1; return MX_OK; }
  if (nd < 0) return fail(c, "%s has a negative number of dimensions (%d)", what, nd);
  if (nd > MX_MAX_DIM)
    return fail(c, "%s has %d dimensions; at most %d are supported", what, nd, MX_MAX_DIM);
  if (left(c) < (size_t)nd * 8)
    return fail(c, "file ends inside %s (%d dims need %d bytes, %zu left)", what, nd, nd * 8,
                left(c));
  for (int i = 0; i < nd; i++) {
    memcpy(&dims[i], c->p + c->pos, 8);
    c->pos += 8;
    if (dims[i] < 0) {
      c->pos -= 8;
      return fail(c, "%s: dimension %d is negative (%lld)", what, i + 1, (long long)dims[i]);
    }
  }
  *ndim = nd;
  return MX_OK;
}

static int rd_ctx(ld *c) {
  int32_t dev_type = 0, dev_id = 0;
  int rc;
  if ((rc = rd_i32(c, &dev_type, "the device type"))) return rc;
  if ((rc = rd_i32(c, &dev_id, "the device id"))) return rc;
  /* MXNet's kCPU 1, kGPU 2, kCPUPinned 3, kCPUShared 5 */
  if (dev_type != 1 && dev_type != 2 && dev_type != 3 && dev_type != 5) {
    c->pos -= 8;
    return fail(c, "unknown device type %d", dev_type);
  }
  if (dev_id < 0) {
    c->pos -= 4;
    return fail(c, "negative device id %d", dev_id);
  }
  return MX_OK;
}

/* The context and dtype code that every array record (V1, V2, V3, legacy) carries
 * between its shape and its data. */
static int rd_ctx_dtype(ld *c, int *dtype) {
  int32_t dt = 0;
  int rc;
  if ((rc = rd_ctx(c))) return rc;
  if ((rc = rd_i32(c, &dt, "the dtype code"))) return rc;
  if ((rc = check_dtype(c, dt, "dtype code"))) { c->pos -= 4; return rc; }
  *dtype = dt;
  return MX_OK;
}

/* Reserves the data block of `bytes` (checked against what is left). */
static int take_data(ld *c, const char *what, size_t bytes, size_t *off) {
  if (bytes > left(c))
    return fail(c, "%s needs %zu bytes of data but only %zu are left in the file", what,
                bytes, left(c));
  *off = c->pos;
  c->pos += bytes;
  return MX_OK;
}

/* One NDArray record, any version. Validates and skips it; fills r. */
static int parse_record(ld *c, rec *r) {
  uint32_t magic = 0;
  int rc;
  bool unknown;
  memset(r, 0, sizeof *r);
  if ((rc = rd_u32(c, &magic, "an array's magic number"))) return rc;
  if (magic == V2_MAGIC || magic == V3_MAGIC) {
    bool v3 = magic == V3_MAGIC;
    int32_t stype = 0;
    if ((rc = rd_i32(c, &stype, "the storage type"))) return rc;
    if (stype < 0 || stype > 2) {
      c->pos -= 4;
      return fail(c, "unknown storage type %d (0 dense, 1 row_sparse, 2 csr)", stype);
    }
    if (v3 && stype != 0) {
      c->pos -= 4;
      return fail(c, "a V3 (np-shape) record holds dense arrays only, got storage type %d",
                  stype);
    }
    r->stype = stype;
    int nad = stype == 1 ? 1 : stype == 2 ? 2 : 0;
    int sndim = 0;
    int64_t sshape[MX_MAX_DIM];
    if (nad && (rc = rd_shape(c, "the storage shape", false, &sndim, sshape, &unknown)))
      return rc;
    if ((rc = rd_shape(c, "the shape", v3, &r->ndim, r->shape, &unknown))) return rc;
    /* V2 keeps MXNet 1.x's legacy shapes, where ndim 0 means "unknown" */
    if (unknown || (!v3 && r->ndim == 0)) {
      r->none = true;
      return MX_OK;
    }
    int dt;
    if ((rc = rd_ctx_dtype(c, &dt))) return rc;
    r->dtype = dt;
    int aux_dt[2] = {0, 0}, aux_nd[2] = {0, 0};
    int64_t aux_shape[2][MX_MAX_DIM];
    for (int i = 0; i < nad; i++) {
      int32_t at = 0;
      if ((rc = rd_i32(c, &at, "a sparse index dtype"))) return rc;
      if ((rc = check_dtype(c, at, "sparse index dtype code"))) { c->pos -= 4; return rc; }
      aux_dt[i] = at;
      if ((rc = rd_shape(c, "a sparse index shape", false, &aux_nd[i], aux_shape[i], &unknown)))
        return rc;
    }
    size_t bytes = 0;
    if (nad) {
      if ((rc = data_bytes(c, sndim, sshape, mx_dtype_size(dt), &bytes))) return rc;
    } else if ((rc = data_bytes(c, r->ndim, r->shape, mx_dtype_size(dt), &bytes))) {
      return rc;
    }
    if ((rc = take_data(c, "the array", bytes, &r->data_off))) return rc;
    r->nbytes = bytes;
    for (int i = 0; i < nad; i++) {
      size_t ab = 0, off = 0;
      if ((rc = data_bytes(c, aux_nd[i], aux_shape[i], mx_dtype_size(aux_dt[i]), &ab)))
        return rc;
      if ((rc = take_data(c, "a sparse index", ab, &off))) return rc;
    }
    return MX_OK;
  }
  if (magic == V1_MAGIC) {
    if ((rc = rd_shape(c, "the shape", false, &r->ndim, r->shape, &unknown))) return rc;
  } else {
    /* The oldest layout has no magic: the word is ndim, then u32 dims. */
    if (magic > MX_MAX_DIM)
      return fail(c, "bad array magic number 0x%08x (not V1/V2/V3, and too large to be the "
                  "ndim of the magic-less legacy layout)", magic);
    r->ndim = (int)magic;
    if (left(c) < (size_t)r->ndim * 4)
      return fail(c, "file ends inside the shape (%d dims need %d bytes, %zu left)", r->ndim,
                  r->ndim * 4, left(c));
    for (int i = 0; i < r->ndim; i++) {
      uint32_t d;
      memcpy(&d, c->p + c->pos, 4);
      c->pos += 4;
      r->shape[i] = d;
    }
  }
  if (r->ndim == 0) { /* legacy shapes: ndim 0 is "unknown" */
    r->none = true;
    return MX_OK;
  }
  int dt;
  if ((rc = rd_ctx_dtype(c, &dt))) return rc;
  r->dtype = dt;
  size_t bytes = 0;
  if ((rc = data_bytes(c, r->ndim, r->shape, mx_dtype_size(dt), &bytes))) return rc;
  if ((rc = take_data(c, "the array", bytes, &r->data_off))) return rc;
  r->nbytes = bytes;
  return MX_OK;
}

/* ---- results ------------------------------------------------------------------- */

typedef struct result {
  int64_t n;
  mx_tensor **arrays;
  char **names; /* NULL: a list file */
} result;

static void result_free(result *res) {
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
static int check_unique(ld *c, char **names, int64_t n) {
  if (n < 2) return MX_OK;
  char **s = malloc((size_t)n * sizeof *s);
  if (!s) return fail_nomem(c, "out of memory checking %lld names", (long long)n);
  memcpy(s, names, (size_t)n * sizeof *s);
  qsort(s, (size_t)n, sizeof *s, cmp_str);
  int rc = MX_OK;
  for (int64_t i = 1; i < n && !rc; i++) {
    if (strcmp(s[i - 1], s[i]) == 0) {
      char nm[200];
      rc = fail(c, "the name '%s' appears more than once",
                printable(nm, sizeof nm, s[i], strlen(s[i])));
    }
  }
  free(s);
  return rc;
}

static int new_tensor(ld *c, int ndim, const int64_t *shape, int dtype, mx_tensor **out) {
  int rc = mx_tensor_new(ndim, shape, dtype, MX_CPU, 0, out);
  if (rc) {
    char msg[300];
    snprintf(msg, sizeof msg, "%s", mx_last_error());
    return fail_nomem(c, "%s", msg);
  }
  return MX_OK;
}

/* ---- .params ------------------------------------------------------------------- */

static int load_list(ld *c, result *res) {
  uint64_t magic = 0, reserved = 0, n = 0, k = 0;
  int rc;
  if ((rc = rd_u64(c, &magic, "the list header"))) return rc;
  if ((rc = rd_u64(c, &reserved, "the list header"))) return rc;
  if ((rc = rd_u64(c, &n, "the array count"))) return rc;
  /* the smallest record (a magic-less "none") is 4 bytes */
  if (n > MAX_ARRAYS) {
    c->pos -= 8;
    return fail(c, "the file claims %llu arrays; at most %d are supported",
                (unsigned long long)n, MAX_ARRAYS);
  }
  if (n > left(c) / 4) {
    c->pos -= 8;
    return fail(c, "the file claims %llu arrays but has room for at most %zu",
                (unsigned long long)n, left(c) / 4);
  }
  c->count = (int64_t)n;
  size_t first = c->pos;
  rec r;
  for (uint64_t i = 0; i < n; i++) { /* walk 1: validate, allocate nothing */
    c->idx = (int64_t)i;
    if ((rc = parse_record(c, &r))) return rc;
  }
  c->idx = -1;
  if ((rc = rd_u64(c, &k, "the name count"))) return rc;
  if (k != 0 && k != n) {
    c->pos -= 8;
    return fail(c, "the file has %llu names for %llu arrays (expected 0 or %llu)",
                (unsigned long long)k, (unsigned long long)n, (unsigned long long)n);
  }
  res->n = (int64_t)n;
  res->arrays = calloc(n ? n : 1, sizeof *res->arrays);
  if (!res->arrays) return fail_nomem(c, "out of memory for %llu handles", (unsigned long long)n);
  if (k) {
    res->names = calloc(k, sizeof *res->names);
    if (!res->names) return fail_nomem(c, "out of memory for %llu names", (unsigned long long)k);
  }
  for (uint64_t i = 0; i < k; i++) {
    uint64_t len = 0;
    if ((rc = rd_u64(c, &len, "a name's length"))) return rc;
    if (len > left(c)) {
      c->pos -= 8;
      return fail(c, "name %llu of %llu: name length %llu exceeds the %zu bytes left in the "
                  "file", (unsigned long long)i + 1, (unsigned long long)k,
                  (unsigned long long)len, left(c));
    }
    if (memchr(c->p + c->pos, 0, len))
      return fail(c, "name %llu of %llu contains a NUL byte", (unsigned long long)i + 1,
                  (unsigned long long)k);
    char *s = malloc(len + 1);
    if (!s) return fail_nomem(c, "out of memory for a name of %llu bytes", (unsigned long long)len);
    memcpy(s, c->p + c->pos, len);
    s[len] = 0;
    res->names[i] = s;
    c->pos += len;
  }
  c->idx = -1;
  if (c->pos != c->len)
    return fail(c, "%zu unexpected bytes after the names list (trailing garbage)", left(c));
  if (res->names && (rc = check_unique(c, res->names, res->n))) return rc;

  c->pos = first; /* walk 2: build */
  for (uint64_t i = 0; i < n; i++) {
    c->idx = (int64_t)i;
    c->name = res->names ? res->names[i] : NULL;
    size_t at = c->pos;
    if ((rc = parse_record(c, &r))) return rc; /* cannot fail: walk 1 passed */
    if (r.stype != 0) {
      c->pos = at;
      return fail(c, "%s (sparse) arrays are not supported: luamx loads dense arrays only "
                  "(convert it in MXNet with .tostype('default') before saving)",
                  r.stype == 1 ? "row_sparse" : "csr");
    }
    mx_tensor *t;
    if (r.none) { /* MXNet's "none" array: an empty float32 vector */
      int64_t zero = 0;
      if ((rc = new_tensor(c, 1, &zero, MX_F32, &t))) return rc;
    } else {
      if ((rc = new_tensor(c, r.ndim, r.shape, r.dtype, &t))) return rc;
      if (r.nbytes) memcpy(mx_ptr(t), c->p + r.data_off, r.nbytes);
    }
    res->arrays[i] = t;
  }
  c->idx = -1;
  c->name = NULL;
  return MX_OK;
}

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
  if (!sc_eat(&t, '{')) return fail(c, "the .npy header is not a Python dict literal");
  for (;;) {
    if (sc_eat(&t, '}')) break;
    if (!sc_str(&t, key, sizeof key) || !sc_eat(&t, ':'))
      return fail(c, "malformed .npy header near offset %zu", t.i);
    if (strcmp(key, "descr") == 0 && !h->has_descr) {
      if (sc_eat(&t, '[')) { /* MXNet 2.0 writes bfloat16 as [('bfloat16', '<u2')] */
        char a[32], b[32];
        if (!sc_eat(&t, '(') || !sc_str(&t, a, sizeof a) || !sc_eat(&t, ',') ||
            !sc_str(&t, b, sizeof b) || !sc_eat(&t, ')') || (sc_eat(&t, ','), !sc_eat(&t, ']')) ||
            strcmp(a, "bfloat16") != 0 || strcmp(b, "<u2") != 0)
          return fail(c, "unsupported structured dtype in the .npy header");
        strcpy(h->descr, "bfloat16");
      } else if (!sc_str(&t, h->descr, sizeof h->descr)) {
        return fail(c, "malformed 'descr' in the .npy header");
      }
      h->has_descr = true;
    } else if (strcmp(key, "fortran_order") == 0 && !h->has_fortran) {
      if (sc_word(&t, "True")) h->fortran = true;
      else if (sc_word(&t, "False")) h->fortran = false;
      else return fail(c, "malformed 'fortran_order' in the .npy header");
      h->has_fortran = true;
    } else if (strcmp(key, "shape") == 0 && !h->has_shape) {
      if (!sc_eat(&t, '(')) return fail(c, "malformed 'shape' in the .npy header");
      h->ndim = 0;
      for (;;) {
        if (sc_eat(&t, ')')) break;
        sc_ws(&t);
        if (t.i >= t.n || t.s[t.i] < '0' || t.s[t.i] > '9')
          return fail(c, "malformed 'shape' in the .npy header (a dimension must be a "
                      "non-negative integer)");
        uint64_t v = 0;
        while (t.i < t.n && t.s[t.i] >= '0' && t.s[t.i] <= '9') {
          v = v * 10 + (uint64_t)(t.s[t.i++] - '0');
          if (v > (uint64_t)INT64_MAX / 16)
            return fail(c, "a dimension in the .npy header's 'shape' is too large");
        }
        if (t.i < t.n && t.s[t.i] == 'L') t.i++; /* Python 2 longs */
        if (h->ndim >= MX_MAX_DIM)
          return fail(c, "the .npy shape has more than %d dimensions", MX_MAX_DIM);
        h->shape[h->ndim++] = (int64_t)v;
        if (!sc_eat(&t, ',')) {
          if (!sc_eat(&t, ')')) return fail(c, "malformed 'shape' in the .npy header");
          break;
        }
      }
      h->has_shape = true;
    } else {
      return fail(c, "unexpected or repeated key '%s' in the .npy header",
                  printable(key, sizeof key, key, strlen(key)));
    }
    if (!sc_eat(&t, ',')) {
      if (!sc_eat(&t, '}')) return fail(c, "malformed .npy header near offset %zu", t.i);
      break;
    }
  }
  sc_ws(&t);
  if (t.i != t.n) return fail(c, "unexpected text after the .npy header's dict");
  if (!h->has_descr || !h->has_fortran || !h->has_shape)
    return fail(c, "the .npy header lacks one of 'descr', 'fortran_order', 'shape'");
  return MX_OK;
}

/* descr -> dtype; *swap for big-endian multi-byte data. */
static int npy_dtype(ld *c, const char *d, int *dtype, bool *swap) {
  *swap = false;
  if (strcmp(d, "bfloat16") == 0) { *dtype = MX_BF16; return MX_OK; }
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return fail(c, "unsupported .npy dtype '%s'", d);
  static const struct { const char *k; int dt; } map[] = {
      {"f4", MX_F32}, {"f8", MX_F64}, {"f2", MX_F16}, {"u1", MX_U8}, {"i4", MX_I32},
      {"i1", MX_I8}, {"i8", MX_I64}, {"b1", MX_BOOL}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    if (strcmp(d + 1, map[i].k) == 0) {
      *dtype = map[i].dt;
      *swap = order == '>' && mx_dtype_size(map[i].dt) > 1;
      if (order == '|' && mx_dtype_size(map[i].dt) > 1)
        return fail(c, "the .npy dtype '%s' has no byte order", d);
      return MX_OK;
    }
  }
  char nm[64];
  return fail(c, "unsupported .npy dtype '%s' (luamx reads f2/f4/f8/i1/i4/i8/u1/b1 and "
              "bfloat16)", printable(nm, sizeof nm, d, strlen(d)));
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
static int load_npy(ld *c, mx_tensor **out) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  uint8_t head[8];
  int rc;
  if ((rc = rd_bytes(c, head, 8, "the .npy preamble"))) return rc;
  if (memcmp(head, magic, 6) != 0) { c->pos = 0; return fail(c, "bad .npy magic"); }
  uint32_t hlen = 0;
  if (head[6] == 1) {
    uint16_t h16 = 0;
    if ((rc = rd_bytes(c, &h16, 2, "the .npy header length"))) return rc;
    hlen = h16;
  } else if (head[6] == 2 || head[6] == 3) {
    if ((rc = rd_u32(c, &hlen, "the .npy header length"))) return rc;
  } else {
    c->pos = 6;
    return fail(c, "unsupported .npy format version %u.%u", head[6], head[7]);
  }
  if (hlen > left(c))
    return fail(c, ".npy header length %u exceeds the %zu bytes left", hlen, left(c));
  npy_hdr h;
  size_t hstart = c->pos;
  if ((rc = parse_npy_header(c, (const char *)c->p + hstart, hlen, &h))) return rc;
  c->pos += hlen;
  int dtype = 0;
  bool swap = false;
  if ((rc = npy_dtype(c, h.descr, &dtype, &swap))) return rc;
  size_t esize = mx_dtype_size(dtype), bytes = 0, off = 0;
  if ((rc = data_bytes(c, h.ndim, h.shape, esize, &bytes))) return rc;
  if ((rc = take_data(c, "the .npy array", bytes, &off))) return rc;
  if (c->pos != c->len)
    return fail(c, "%zu unexpected bytes after the .npy data (trailing garbage)", left(c));
  if (!out) return MX_OK;
  mx_tensor *t;
  if ((rc = new_tensor(c, h.ndim, h.shape, dtype, &t))) return rc;
  if (h.fortran && h.ndim > 1)
    fortran_to_c(mx_ptr(t), c->p + off, h.ndim, h.shape, esize, t->size);
  else if (bytes)
    memcpy(mx_ptr(t), c->p + off, bytes);
  if (swap) byteswap(mx_ptr(t), esize, t->size);
  *out = t;
  return MX_OK;
}

/* ---- .npz (zip) ------------------------------------------------------------------ */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

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
    uint16_t id = le16(x + i), sz = le16(x + i + 2);
    if (i + 4 + sz > xlen) break;
    if (id == 1) {
      const uint8_t *q = x + i + 4;
      size_t k = 0;
      if (need_u) { if (k + 8 > sz) goto bad; e->usize = le64(q + k); k += 8; }
      if (need_c) { if (k + 8 > sz) goto bad; e->csize = le64(q + k); k += 8; }
      if (need_o) { if (k + 8 > sz) goto bad; e->lh_off = le64(q + k); k += 8; }
      return MX_OK;
    }
    i += 4 + (size_t)sz;
  }
bad:
  return fail(c, "a zip64 size or offset is missing from the entry's extra field");
}

static int inflate_entry(ld *c, const uint8_t *src, uint64_t csize, uint8_t *dst,
                         uint64_t usize) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return fail_nomem(c, "zlib inflateInit failed");
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
    return fail(c, "corrupt deflate data (zlib: %s)",
                zr == Z_DATA_ERROR ? "invalid data" : zr == Z_MEM_ERROR ? "out of memory"
                                   : "stream ends early or inflates past the stated size");
  if (got != usize)
    return fail(c, "deflate data inflates to %llu bytes, the directory says %llu",
                (unsigned long long)got, (unsigned long long)usize);
  return MX_OK;
}

static int load_npz(ld *c, result *res) {
  const uint8_t *p = c->p;
  size_t len = c->len;
  int rc;
  if (len < 22) return fail(c, "a zip file of %zu bytes is too short", len);
  /* End of central directory: 22 bytes + a comment of up to 65535, scanned backwards */
  size_t eocd = SIZE_MAX;
  size_t lo = len - 22 > 65535 ? len - 22 - 65535 : 0;
  for (size_t i = len - 22 + 1; i-- > lo;) {
    if (le32(p + i) == 0x06054b50u && i + 22 + le16(p + i + 20) <= len) { eocd = i; break; }
  }
  if (eocd == SIZE_MAX) return fail(c, "no zip end-of-central-directory record found");
  c->pos = eocd;
  uint64_t count = le16(p + eocd + 10), cd_size = le32(p + eocd + 12),
           cd_off = le32(p + eocd + 16);
  if (le16(p + eocd + 4) != 0 || le16(p + eocd + 6) != 0 ||
      le16(p + eocd + 8) != le16(p + eocd + 10))
    return fail(c, "multi-disk zip archives are not supported");
  size_t cd_end = eocd;
  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_off == 0xFFFFFFFFu) {
    /* zip64: locator (20 bytes) right before the EOCD points at the zip64 EOCD */
    if (eocd < 20 || le32(p + eocd - 20) != 0x07064b50u)
      return fail(c, "zip64 end-of-central-directory locator missing");
    uint64_t z = le64(p + eocd - 20 + 8);
    c->pos = eocd - 20;
    if (z > eocd - 20 || eocd - 20 - z < 56 || le32(p + z) != 0x06064b50u)
      return fail(c, "zip64 end-of-central-directory record missing or out of bounds");
    c->pos = (size_t)z;
    count = le64(p + z + 32);
    cd_size = le64(p + z + 40);
    cd_off = le64(p + z + 48);
    cd_end = (size_t)z;
  }
  if (cd_off > cd_end || cd_size > cd_end - cd_off)
    return fail(c, "the zip central directory (offset %llu, %llu bytes) lies outside the "
                "file", (unsigned long long)cd_off, (unsigned long long)cd_size);
  if (count > MAX_ARRAYS)
    return fail(c, "the zip directory claims %llu entries; at most %d are supported",
                (unsigned long long)count, MAX_ARRAYS);
  if (count > cd_size / 46)
    return fail(c, "the zip directory claims %llu entries but has room for at most %llu",
                (unsigned long long)count, (unsigned long long)(cd_size / 46));
  res->n = (int64_t)count;
  res->arrays = calloc(count ? count : 1, sizeof *res->arrays);
  res->names = calloc(count ? count : 1, sizeof *res->names);
  if (!res->arrays || !res->names) return fail_nomem(c, "out of memory for the zip directory");
  c->count = (int64_t)count;
  size_t q = (size_t)cd_off, q_end = (size_t)(cd_off + cd_size);
  for (uint64_t i = 0; i < count; i++) {
    c->pos = q;
    c->idx = (int64_t)i;
    if (q_end - q < 46 || le32(p + q) != 0x02014b50u)
      return fail(c, "zip central directory entry %llu is missing or damaged",
                  (unsigned long long)i + 1);
    zentry e;
    e.flags = le16(p + q + 8);
    e.method = le16(p + q + 10);
    e.crc = le32(p + q + 16);
    e.csize = le32(p + q + 20);
    e.usize = le32(p + q + 24);
    e.name_len = le16(p + q + 28);
    uint16_t xlen = le16(p + q + 30), clen = le16(p + q + 32);
    e.lh_off = le32(p + q + 42);
    if ((size_t)46 + e.name_len + xlen + clen > q_end - q)
      return fail(c, "zip central directory entry %llu overruns the directory",
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
      return fail(c, "zip entry '%s' is not a .npy array",
                  printable(nm, sizeof nm, (const char *)e.name, e.name_len));
    }
    char *key = malloc((size_t)e.name_len - 3);
    if (!key) return fail_nomem(c, "out of memory for an entry name");
    memcpy(key, e.name, (size_t)e.name_len - 4);
    key[e.name_len - 4] = 0;
    res->names[i] = key;
    c->name = key;
    if (e.flags & 1) return fail(c, "encrypted zip entries are not supported");
    if (e.method != 0 && e.method != 8)
      return fail(c, "zip compression method %u is not supported (stored or deflate only)",
                  e.method);
    /* local header: its own name/extra lengths decide where the data starts */
    c->pos = (size_t)(e.lh_off < len ? e.lh_off : len);
    if (e.lh_off > cd_off || cd_off - e.lh_off < 30 || le32(p + e.lh_off) != 0x04034b50u)
      return fail(c, "the local header of this zip entry is missing or out of bounds");
    uint64_t data = e.lh_off + 30 + le16(p + e.lh_off + 26) + le16(p + e.lh_off + 28);
    if (le16(p + e.lh_off + 26) != e.name_len ||
        (e.lh_off + 30 + e.name_len <= cd_off &&
         memcmp(p + e.lh_off + 30, e.name, e.name_len) != 0))
      return fail(c, "the local header's name differs from the central directory's");
    if (data > cd_off || e.csize > cd_off - data)
      return fail(c, "zip entry data (%llu bytes at %llu) runs past the central directory",
                  (unsigned long long)e.csize, (unsigned long long)data);
    const uint8_t *img = p + data;
    uint8_t *buf = NULL;
    if (e.method == 0) {
      if (e.csize != e.usize)
        return fail(c, "stored zip entry with compressed size %llu != size %llu",
                    (unsigned long long)e.csize, (unsigned long long)e.usize);
    } else {
      if (e.usize / INFLATE_MAX_RATIO > e.csize + 1)
        return fail(c, "zip entry claims %llu bytes from %llu compressed: more than deflate "
                    "can expand", (unsigned long long)e.usize, (unsigned long long)e.csize);
      buf = malloc(e.usize ? (size_t)e.usize : 1);
      if (!buf)
        return fail_nomem(c, "out of memory inflating %llu bytes", (unsigned long long)e.usize);
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
        return fail(c, "CRC-32 mismatch (data 0x%08x, directory 0x%08x)", (uint32_t)crc, e.crc);
      }
#endif
    }
    ld sub = {img, (size_t)e.usize, 0, c->file, key, (int64_t)i, (int64_t)count, key};
    rc = load_npy(&sub, &res->arrays[i]);
    free(buf);
    if (rc) return rc;
  }
  c->idx = -1;
  c->name = NULL;
  c->pos = q;
  if (q != q_end)
    return fail(c, "the zip central directory has %zu bytes beyond its %llu entries",
                q_end - q, (unsigned long long)count);
  c->pos = len;
  return check_unique(c, res->names, res->n);
}

/* ---- entry points --------------------------------------------------------------- */

static int load_any(const uint8_t *p, size_t len, const char *file, int *n,
                    mx_tensor ***arrays, char ***names) {
  if (!n || !arrays || !names) return mx_err(MX_EINVAL, "mx.nd.load: NULL output pointer");
  *n = 0, *arrays = NULL, *names = NULL;
  ld c = {p, len, 0, file, NULL, -1, 0, NULL};
  result res = {0, NULL, NULL};
  int rc;
  if (len == 0) return fail(&c, "the file is empty");
  if (len >= 6 && memcmp(p, "\x93NUMPY", 6) == 0) {
    res.arrays = calloc(1, sizeof *res.arrays);
    if (!res.arrays) return fail_nomem(&c, "out of memory");
    res.n = 1;
    rc = load_npy(&c, &res.arrays[0]);
  } else if (len >= 4 && (memcmp(p, "PK\x03\x04", 4) == 0 || memcmp(p, "PK\x05\x06", 4) == 0)) {
    rc = load_npz(&c, &res);
  } else if (len >= 8 && le64(p) == LIST_MAGIC) {
    rc = load_list(&c, &res);
  } else if (mx_safetensors_sniff(p, len)) {
    return mx_safetensors_load_bytes(p, len, n, arrays, names, NULL, NULL);
  } else {
    rc = fail(&c, "not an MXNet .params, .npy, .npz or safetensors file (unknown magic %02x %02x %02x %02x)",
              p[0], len > 1 ? p[1] : 0, len > 2 ? p[2] : 0, len > 3 ? p[3] : 0);
  }
  if (rc == MX_OK && res.n > INT32_MAX) rc = fail(&c, "more than 2^31 arrays");
  if (rc) {
    result_free(&res);
    return rc;
  }
  *n = (int)res.n;
  *arrays = res.arrays;
  *names = res.names;
  return MX_OK;
}

int mx_nd_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays,
                     char ***names) {
  if (!buf && len) return mx_err(MX_EINVAL, "mx.nd.load: NULL buffer");
  return load_any(buf, len, "<memory>", n, arrays, names);
}

int mx_nd_load(const char *path, int *n, mx_tensor ***arrays, char ***names) {
  if (!path) return mx_err(MX_EINVAL, "mx.nd.load: NULL path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return mx_err(MX_EIO, "mx.nd.load: cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return mx_err(MX_EIO, "mx.nd.load: cannot stat '%s': %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return mx_err(MX_EIO, "mx.nd.load: '%s' is not a regular file", path);
  }
  size_t len = (size_t)st.st_size;
  if (len == 0) {
    close(fd);
    return load_any((const uint8_t *)"", 0, path, n, arrays, names);
  }
  uint8_t head[9];
  if (pread(fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
      mx_safetensors_sniff(head, sizeof head)) { /* its own loader maps it zero-copy */
    close(fd);
    return mx_safetensors_load(path, 0, n, arrays, names, NULL, NULL);
  }
  /* map rather than read: a large checkpoint is not held twice in memory */
  void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  close(fd);
  if (m == MAP_FAILED) return mx_err(MX_EIO, "mx.nd.load: cannot map '%s': %s", path, strerror(e));
  int rc = load_any(m, len, path, n, arrays, names);
  munmap(m, len);
  return rc;
}

/* ---- save ------------------------------------------------------------------------ */

typedef struct wr {
  FILE *f;
  bool ok;
} wr;

static void w_bytes(wr *w, const void *p, size_t n) {
  if (w->ok && n && fwrite(p, 1, n, w->f) != n) w->ok = false;
}
static void w_u32(wr *w, uint32_t v) { w_bytes(w, &v, 4); }
static void w_i32(wr *w, int32_t v) { w_bytes(w, &v, 4); }
static void w_u64(wr *w, uint64_t v) { w_bytes(w, &v, 8); }

int mx_nd_save(const char *path, int n, mx_tensor *const *arrays, const char *const *names) {
  if (!path || !*path) return mx_err(MX_EINVAL, "mx.nd.save: empty path");
  if (n < 0 || (n > 0 && !arrays))
    return mx_err(MX_EINVAL, "mx.nd.save: '%s': bad array list (n = %d)", path, n);
  bool v3 = false;
  for (int i = 0; i < n; i++) {
    if (!arrays[i]) return mx_err(MX_EINVAL, "mx.nd.save: '%s': array %d is NULL", path, i + 1);
    if (names && !names[i])
      return mx_err(MX_EINVAL, "mx.nd.save: '%s': name of array %d is NULL", path, i + 1);
    /* MXNet 1.x's legacy shapes (V2) read ndim 0 and dim 0 as "unknown": a 0-d or
     * zero-size tensor needs V3 (np-shape) records, which 1.9 loads under npx.set_np() */
    if (arrays[i]->ndim == 0 || arrays[i]->size == 0) v3 = true;
  }
  /* Wait for every queued write first: an asynchronous failure is reported here,
   * before a byte is written, instead of saving whatever the buffer held. */
  for (int i = 0; i < n; i++) {
    int rc = mx_tensor_wait_to_read(arrays[i]);
    if (rc)
      return mx_err(rc, "mx.nd.save: '%s': array %d: %s", path, i + 1, mx_last_error());
  }
  mx_atomic_file af;
  int rc = mx_atomic_begin(&af, path, "mx.nd.save");
  if (rc) return rc;
  wr w = {af.f, true};
  w_u64(&w, LIST_MAGIC);
  w_u64(&w, 0);
  w_u64(&w, (uint64_t)n);
  for (int i = 0; i < n && w.ok && !rc; i++) {
    mx_tensor *t = arrays[i], *host = NULL;
    if (mx_dev(t) != MX_CPU) { /* GPU tensors are written from a host copy */
      if ((rc = mx_tensor_to(t, MX_CPU, 0, -1, &host))) break;
      t = host;
    }
    /* a tensor in a backend layout (padded blocks) is written as row-major values */
    if ((rc = mx_tensor_make_plain(t))) { mx_tensor_release(host); break; }
    const void *data = mx_tensor_data(t); /* a sync point: waits for pending writes */
    w_u32(&w, v3 ? V3_MAGIC : V2_MAGIC);
    w_i32(&w, 0); /* dense */
    w_i32(&w, t->ndim);
    w_bytes(&w, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    w_i32(&w, MX_CPU);
    w_i32(&w, 0);
    w_i32(&w, t->dtype);
    w_bytes(&w, data, mx_nbytes(t));
    mx_tensor_release(host);
  }
  if (!rc) {
    w_u64(&w, names ? (uint64_t)n : 0);
    for (int i = 0; names && i < n; i++) {
      size_t len = strlen(names[i]);
      w_u64(&w, len);
      w_bytes(&w, names[i], len);
    }
  }
  return mx_atomic_end(&af, "mx.nd.save", rc, w.ok);
}
