/* safetensors.c — Hugging Face's safetensors files: load (zero-copy over a private
 * mapping, or copied from memory) and save (atomic).
 *
 * Layout: u64 little-endian N, N bytes of UTF-8 JSON starting with '{' (space padded),
 * then the data buffer. The JSON maps each tensor name to {dtype, shape, data_offsets:
 * [begin, end)} relative to the buffer, plus an optional "__metadata__" object of string
 * values. The checks are the reference loader's (safetensors/src/tensor.rs), one for one,
 * each with a message naming the tensor and the field: header length below 8, above
 * 100,000,000 or past the file; header not UTF-8, not starting with '{', not JSON;
 * offsets that leave a gap or overlap after sorting, or end before they begin; element
 * or byte counts that overflow; end - begin != shape x dtype size; data that does not end
 * exactly at the file's end. Added here: duplicate keys (jansson's
 * JSON_REJECT_DUPLICATES), every field's JSON type, at most 8 dims, names valid UTF-8
 * without NUL, and dtypes luamx cannot hold named. Nothing is allocated for a tensor until
 * the whole header has passed. docs/file-formats.md ("safetensors"). */
#include "layout.h"
#include "ndfile_read.h"
#include "xfile.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c keeps tensor bytes as stored: it assumes a little-endian host"
#endif

#define MAX_HEADER_SIZE 100000000u
#define META_KEY "__metadata__"

/* The format's dtypes in its own order (the writer sorts by it: larger alignment first),
 * with luamx's code, or -1 for those luamx has no dtype for. */
static const struct { const char *name; int code; } DTYPES[] = {
    {"BOOL", MX_BOOL}, {"U8", MX_U8}, {"I8", MX_I8}, {"F8_E5M2", -1}, {"F8_E4M3", -1},
    {"I16", MX_I16}, {"U16", -1}, {"F16", MX_F16}, {"BF16", MX_BF16}, {"I32", MX_I32},
    {"U32", -1}, {"F32", MX_F32}, {"F64", MX_F64}, {"I64", MX_I64}, {"U64", -1}};
enum { NDTYPES = sizeof DTYPES / sizeof DTYPES[0] };

typedef struct entry {
  const char *name; /* in the JSON document */
  size_t name_len;
  int dtype, ndim;
  int64_t shape[MX_MAX_DIM];
  uint64_t begin, end;
} entry;

typedef struct hdr {
  json_t *doc;
  entry *e;
  size_t n;
  json_t *meta; /* borrowed from doc, or NULL */
  size_t data_off;
} hdr;

typedef struct ctx {
  const char *who, *file;
} ctx;

static int fail(const ctx *c, const char *fmt, ...) MX_PRINTF(2, 3);
static int fail(const ctx *c, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mx_err(MX_EFORMAT, "%s: %s: safetensors: %s", c->who, c->file, msg);
}

static const char *pname(char *buf, size_t cap, const entry *e) {
  return mx_ndf_printable(buf, cap, e->name, e->name_len);
}

/* One integer >= 0 that fits int64 (JSON numbers with a fraction or an exponent, and
 * jansson's reals, are not integers). */
static bool json_index(const json_t *v, uint64_t *out) {
  if (!json_is_integer(v)) return false;
  json_int_t x = json_integer_value(v);
  if (x < 0) return false;
  *out = (uint64_t)x;
  return true;
}

static int parse_entry(const ctx *c, const char *key, size_t klen, json_t *v, entry *e) {
  char nb[160];
  e->name = key, e->name_len = klen;
  const char *nm = pname(nb, sizeof nb, e);
  if (klen == 0) return fail(c, "a tensor has an empty name");
  if (!json_is_object(v)) return fail(c, "tensor '%s': its entry is not a JSON object", nm);
  json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
         *off = json_object_get(v, "data_offsets");
  if (!dt) return fail(c, "tensor '%s': field 'dtype' is missing", nm);
  if (!sh) return fail(c, "tensor '%s': field 'shape' is missing", nm);
  if (!off) return fail(c, "tensor '%s': field 'data_offsets' is missing", nm);
  if (!json_is_string(dt)) return fail(c, "tensor '%s': field 'dtype' is not a string", nm);
  const char *ds = json_string_value(dt);
  int k = 0;
  while (k < NDTYPES && strcmp(DTYPES[k].name, ds) != 0) k++;
  char db[64];
  if (k == NDTYPES)
    return fail(c, "tensor '%s': field 'dtype': unknown dtype '%s'", nm,
                mx_ndf_printable(db, sizeof db, ds, strlen(ds)));
  if (DTYPES[k].code < 0)
    return fail(c, "tensor '%s': field 'dtype': %s is not supported by luamx (F64, F32, F16, "
                "BF16, I64, I32, I16, I8, U8 and BOOL are)", nm, ds);
  e->dtype = DTYPES[k].code;
  if (!json_is_array(sh)) return fail(c, "tensor '%s': field 'shape' is not a list", nm);
  size_t nd = json_array_size(sh);
  if (nd > MX_MAX_DIM)
    return fail(c, "tensor '%s': field 'shape' has %zu dims; luamx supports at most %d", nm, nd,
                MX_MAX_DIM);
  e->ndim = (int)nd;
  for (size_t d = 0; d < nd; d++) {
    uint64_t x;
    if (!json_index(json_array_get(sh, d), &x))
      return fail(c, "tensor '%s': field 'shape': dim %zu is not an integer >= 0", nm, d + 1);
    e->shape[d] = (int64_t)x;
  }
  if (!json_is_array(off) || json_array_size(off) != 2)
    return fail(c, "tensor '%s': field 'data_offsets' is not a list [begin, end]", nm);
  if (!json_index(json_array_get(off, 0), &e->begin) ||
      !json_index(json_array_get(off, 1), &e->end))
    return fail(c, "tensor '%s': field 'data_offsets': offsets must be integers >= 0", nm);
  return MX_OK;
}

static int cmp_offsets(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static void hdr_free(hdr *h) {
  free(h->e);
  json_decref(h->doc);
  memset(h, 0, sizeof *h);
}

/* The whole header of the file p[0..len): on success h holds the entries sorted by
 * offset, each checked against the buffer; nothing about the data is trusted after it. */
static int parse_header(const ctx *c, const uint8_t *p, size_t len, hdr *h) {
  memset(h, 0, sizeof *h);
  if (len < 8) return fail(c, "the file has %zu bytes; the header length alone takes 8", len);
  uint64_t n = 0;
  memcpy(&n, p, 8);
  if (n > MAX_HEADER_SIZE)
    return fail(c, "header length %llu is above the format's limit of %u bytes",
                (unsigned long long)n, MAX_HEADER_SIZE);
  if (n > len - 8)
    return fail(c, "header length %llu goes past the end of the file (%zu bytes after the "
                "length)", (unsigned long long)n, len - 8);
  const uint8_t *js = p + 8;
  if (!mx_utf8_valid(js, (size_t)n)) return fail(c, "the header is not valid UTF-8");
  if (n == 0 || js[0] != '{') return fail(c, "the header does not start with '{'");
  json_error_t err;
  h->doc = json_loadb((const char *)js, (size_t)n, JSON_REJECT_DUPLICATES, &err);
  if (!h->doc) return fail(c, "header JSON: %s (at byte %d of the header)", err.text, err.position);
  if (!json_is_object(h->doc)) {
    hdr_free(h);
    return fail(c, "the header is not a JSON object");
  }
  size_t cap = json_object_size(h->doc);
  h->e = calloc(cap ? cap : 1, sizeof *h->e);
  if (!h->e) {
    hdr_free(h);
    return mx_err(MX_ENOMEM, "%s: %s: out of memory for %zu header entries", c->who, c->file, cap);
  }
  const char *key;
  size_t klen;
  json_t *v;
  int rc = MX_OK;
  json_object_keylen_foreach(h->doc, key, klen, v) {
    if (klen == strlen(META_KEY) && memcmp(key, META_KEY, klen) == 0) {
      if (json_is_null(v)) continue;
      if (!json_is_object(v)) {
        rc = fail(c, "'" META_KEY "' is not an object of strings");
        break;
      }
      const char *mk;
      size_t mklen;
      json_t *mv;
      json_object_keylen_foreach(v, mk, mklen, mv) {
        if (!json_is_string(mv)) {
          char kb[160];
          rc = fail(c, "'" META_KEY "': the value of '%s' is not a string",
                    mx_ndf_printable(kb, sizeof kb, mk, mklen));
          break;
        }
      }
      if (rc) break;
      h->meta = v;
      continue;
    }
    if ((rc = parse_entry(c, key, klen, v, &h->e[h->n]))) break;
    h->n++;
  }
  if (rc) {
    hdr_free(h);
    return rc;
  }
  qsort(h->e, h->n, sizeof *h->e, cmp_offsets);
  uint64_t start = 0;
  for (size_t i = 0; i < h->n; i++) {
    entry *e = &h->e[i];
    char nb[160];
    const char *nm = pname(nb, sizeof nb, e);
    if (e->end < e->begin)
      rc = fail(c, "tensor '%s': field 'data_offsets': end %llu is before begin %llu", nm,
                (unsigned long long)e->end, (unsigned long long)e->begin);
    else if (e->begin != start)
      rc = fail(c, "tensor '%s': field 'data_offsets': begins at %llu but the data before it "
                "ends at %llu (%s)", nm, (unsigned long long)e->begin,
                (unsigned long long)start, e->begin > start ? "a gap" : "an overlap");
    if (rc) break;
    start = e->end;
    uint64_t count = 1, bytes;
    for (int d = 0; d < e->ndim && !rc; d++)
      if (__builtin_mul_overflow(count, (uint64_t)e->shape[d], &count))
        rc = fail(c, "tensor '%s': field 'shape': the element count overflows", nm);
    if (!rc && (__builtin_mul_overflow(count, (uint64_t)mx_dtype_size(e->dtype), &bytes) ||
                bytes > (uint64_t)INT64_MAX))
      rc = fail(c, "tensor '%s': field 'shape': the byte count overflows", nm);
    if (!rc && e->end - e->begin != bytes)
      rc = fail(c, "tensor '%s': field 'data_offsets': [%llu, %llu) holds %llu bytes but the "
                "shape and dtype need %llu", nm, (unsigned long long)e->begin,
                (unsigned long long)e->end, (unsigned long long)(e->end - e->begin),
                (unsigned long long)bytes);
    if (rc) break;
  }
  if (!rc && start != len - 8 - n)
    rc = fail(c, "the tensors' data ends at byte %llu of the buffer but the file has %llu bytes "
              "after the header%s", (unsigned long long)start,
              (unsigned long long)(len - 8 - n), start < len - 8 - n ? "" : " (truncated)");
  if (rc) {
    hdr_free(h);
    return rc;
  }
  h->data_off = 8 + (size_t)n;
  return MX_OK;
}

bool mx_safetensors_sniff(const void *buf, size_t len) {
  const uint8_t *p = buf;
  if (len < 9 || p[8] != '{') return false;
  uint64_t n;
  memcpy(&n, p, 8);
  return n <= MAX_HEADER_SIZE;
}

static void free_strings(char **s, size_t n) {
  for (size_t i = 0; s && i < n; i++) free(s[i]);
  free(s);
}

/* Builds the results from a parsed header over p (m: the mapping p lies in, or NULL to
 * copy every tensor). */
static int build(const ctx *c, hdr *h, const uint8_t *p, mx_xmap *m, int *n,
                 mx_tensor ***arrays, char ***names, int *nmeta, char ***meta) {
  if (h->n > INT32_MAX) return fail(c, "more than 2^31 tensors");
  size_t nm = h->meta ? json_object_size(h->meta) : 0;
  mx_tensor **arr = calloc(h->n ? h->n : 1, sizeof *arr);
  char **nms = calloc(h->n ? h->n : 1, sizeof *nms);
  char **ms = calloc(2 * nm + 1, sizeof *ms);
  int rc = (!arr || !nms || !ms) ? mx_err(MX_ENOMEM, "%s: %s: out of memory", c->who, c->file)
                                 : MX_OK;
  size_t i = 0;
  for (; !rc && i < h->n; i++) {
    entry *e = &h->e[i];
    nms[i] = strndup(e->name, e->name_len);
    if (!nms[i]) rc = mx_err(MX_ENOMEM, "%s: %s: out of memory", c->who, c->file);
    else if ((rc = mx_xmap_tensor(m, p + h->data_off + e->begin, e->ndim, e->shape, e->dtype,
                                  &arr[i])))
      free(nms[i]), nms[i] = NULL;
  }
  size_t k = 0;
  if (!rc && nm) {
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(h->meta, key, klen, v) {
      ms[2 * k] = strndup(key, klen);
      ms[2 * k + 1] = strdup(json_string_value(v));
      k++;
      if (!ms[2 * k - 2] || !ms[2 * k - 1]) {
        rc = mx_err(MX_ENOMEM, "%s: %s: out of memory", c->who, c->file);
        break;
      }
    }
  }
  if (rc) {
    for (size_t j = 0; arr && j < i; j++) mx_tensor_release(arr[j]);
    free(arr);
    free_strings(nms, nms ? i : 0);
    free_strings(ms, ms ? 2 * k : 0);
    return rc;
  }
  *n = (int)h->n;
  *arrays = arr;
  *names = nms;
  if (nmeta && meta) {
    *nmeta = (int)nm;
    *meta = ms;
  } else {
    free_strings(ms, 2 * nm);
  }
  return MX_OK;
}

static int check_outs(const char *who, int *n, mx_tensor ***arrays, char ***names, int *nmeta,
                      char ***meta) {
  if (!n || !arrays || !names) return mx_err(MX_EINVAL, "%s: NULL output pointer", who);
  *n = 0, *arrays = NULL, *names = NULL;
  if (nmeta) *nmeta = 0;
  if (meta) *meta = NULL;
  return MX_OK;
}

int mx_safetensors_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays,
                              char ***names, int *nmeta, char ***meta) {
  const char *who = "mx.nd.load";
  int rc = check_outs(who, n, arrays, names, nmeta, meta);
  if (rc) return rc;
  if (!buf && len) return mx_err(MX_EINVAL, "%s: NULL buffer", who);
  ctx c = {who, "<memory>"};
  hdr h;
  if ((rc = parse_header(&c, buf ? buf : "", len, &h))) return rc;
  rc = build(&c, &h, buf, NULL, n, arrays, names, nmeta, meta);
  hdr_free(&h);
  return rc;
}

int mx_safetensors_load(const char *path, int flags, int *n, mx_tensor ***arrays,
                        char ***names, int *nmeta, char ***meta) {
  const char *who = "mx.nd.load";
  int rc = check_outs(who, n, arrays, names, nmeta, meta);
  if (rc) return rc;
  if (!path) return mx_err(MX_EINVAL, "%s: NULL path", who);
  if (flags & ~MX_SAFETENSORS_COPY) return mx_err(MX_EINVAL, "%s: unknown flags %#x", who, flags);
  mx_xmap *m;
  if ((rc = mx_xmap_open(path, who, &m))) return rc;
  ctx c = {who, path};
  hdr h;
  if (!(rc = parse_header(&c, m->p, m->len, &h))) {
    rc = build(&c, &h, m->p, (flags & MX_SAFETENSORS_COPY) ? NULL : m, n, arrays, names, nmeta,
               meta);
    hdr_free(&h);
  }
  mx_xmap_release(m); /* the tensors keep their own references */
  return rc;
}

/* ---- save ------------------------------------------------------------------------ */

static int dtype_rank(int code) {
  for (int k = 0; k < NDTYPES; k++)
    if (DTYPES[k].code == code) return k;
  return -1;
}

typedef struct item {
  mx_tensor *t;
  const char *name;
  int rank;
} item;

/* the reference writer's order: larger alignment first (its dtype order, descending),
 * then by name, so every tensor's data starts aligned to its element size */
static int cmp_items(const void *a, const void *b) {
  const item *x = a, *y = b;
  if (x->rank != y->rank) return x->rank > y->rank ? -1 : 1;
  return strcmp(x->name, y->name);
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(((const item *)a)->name, ((const item *)b)->name);
}

static int save_header(const char *path, item *it, int n, int nmeta, const char *const *mkeys,
                       const char *const *mvals, char **out, size_t *outlen) {
  const char *who = "mx.nd.save";
  json_t *doc = json_object(), *meta = NULL;
  int rc = doc ? MX_OK : MX_ENOMEM;
  if (!rc && nmeta > 0) {
    meta = json_object();
    if (!meta || json_object_set_new(doc, META_KEY, meta)) rc = MX_ENOMEM;
    for (int i = 0; !rc && i < nmeta; i++) {
      if (!mkeys[i] || !mvals[i])
        rc = mx_err(MX_EINVAL, "%s: '%s': metadata entry %d is NULL", who, path, i + 1);
      else if (!mx_utf8_valid((const uint8_t *)mkeys[i], strlen(mkeys[i])) ||
               !mx_utf8_valid((const uint8_t *)mvals[i], strlen(mvals[i])))
        rc = mx_err(MX_EINVAL, "%s: '%s': metadata entry %d is not valid UTF-8", who, path, i + 1);
      else if (json_object_get(meta, mkeys[i]))
        rc = mx_err(MX_EINVAL, "%s: '%s': metadata key '%s' given twice", who, path, mkeys[i]);
      else if (json_object_set_new(meta, mkeys[i], json_string(mvals[i])))
        rc = MX_ENOMEM;
    }
  }
  uint64_t off = 0;
  for (int i = 0; !rc && i < n; i++) {
    mx_tensor *t = it[i].t;
    json_t *e = json_object(), *shape = json_array(), *offs = json_array();
    if (!e || !shape || !offs) {
      json_decref(e), json_decref(shape), json_decref(offs);
      rc = MX_ENOMEM;
      break;
    }
    for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
    json_array_append_new(offs, json_integer((json_int_t)off));
    off += mx_nbytes(t);
    json_array_append_new(offs, json_integer((json_int_t)off));
    json_object_set_new(e, "dtype", json_string(DTYPES[it[i].rank].name));
    json_object_set_new(e, "shape", shape);
    json_object_set_new(e, "data_offsets", offs);
    if (json_object_set_new(doc, it[i].name, e)) rc = MX_ENOMEM;
  }
  char *s = rc ? NULL : json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(doc);
  if (rc == MX_ENOMEM || (!rc && !s))
    return mx_err(MX_ENOMEM, "%s: '%s': out of memory for the header", who, path);
  if (rc) return rc;
  size_t len = strlen(s), pad = (8 - len % 8) % 8;
  char *h = realloc(s, len + pad + 1);
  if (!h) {
    free(s);
    return mx_err(MX_ENOMEM, "%s: '%s': out of memory for the header", who, path);
  }
  memset(h + len, ' ', pad); /* the reference writer aligns the buffer to 8 bytes */
  h[len + pad] = 0;
  *out = h;
  *outlen = len + pad;
  return MX_OK;
}

int mx_safetensors_save(const char *path, int n, mx_tensor *const *arrays,
                        const char *const *names, int nmeta, const char *const *meta_keys,
                        const char *const *meta_vals) {
  const char *who = "mx.nd.save";
  if (!path || !*path) return mx_err(MX_EINVAL, "%s: empty path", who);
  if (n < 0 || (n > 0 && (!arrays || !names)) || nmeta < 0 ||
      (nmeta > 0 && (!meta_keys || !meta_vals)))
    return mx_err(MX_EINVAL, "%s: '%s': bad arguments (n = %d, nmeta = %d)", who, path, n, nmeta);
  item *it = calloc(n ? (size_t)n : 1, sizeof *it);
  if (!it) return mx_err(MX_ENOMEM, "%s: out of memory", who);
  int rc = MX_OK;
  for (int i = 0; i < n && !rc; i++) {
    it[i].t = arrays[i], it[i].name = names[i];
    if (!arrays[i] || !names[i])
      rc = mx_err(MX_EINVAL, "%s: '%s': array %d or its name is NULL", who, path, i + 1);
    else if (!*names[i] || strcmp(names[i], META_KEY) == 0)
      rc = mx_err(MX_EINVAL, "%s: '%s': array %d: '%s' cannot name a tensor in safetensors",
                  who, path, i + 1, names[i]);
    else if (!mx_utf8_valid((const uint8_t *)names[i], strlen(names[i])))
      rc = mx_err(MX_EINVAL, "%s: '%s': the name of array %d is not valid UTF-8", who, path, i + 1);
    else if ((it[i].rank = dtype_rank(arrays[i]->dtype)) < 0)
      rc = mx_err(MX_EINVAL, "%s: '%s': array '%s': dtype code %d has no safetensors name", who,
                  path, names[i], arrays[i]->dtype);
  }
  if (!rc && n > 1) {
    qsort(it, (size_t)n, sizeof *it, cmp_names);
    for (int i = 1; i < n && !rc; i++)
      if (strcmp(it[i - 1].name, it[i].name) == 0)
        rc = mx_err(MX_EINVAL, "%s: '%s': the name '%s' is given twice", who, path, it[i].name);
  }
  /* an asynchronous failure is reported before a byte is written */
  for (int i = 0; i < n && !rc; i++)
    if ((rc = mx_tensor_wait_to_read(it[i].t)))
      rc = mx_err(rc, "%s: '%s': array '%s': %s", who, path, it[i].name, mx_last_error());
  if (rc) {
    free(it);
    return rc;
  }
  qsort(it, (size_t)n, sizeof *it, cmp_items);
  char *hdr_s = NULL;
  size_t hlen = 0;
  if ((rc = save_header(path, it, n, nmeta, meta_keys, meta_vals, &hdr_s, &hlen))) {
    free(it);
    return rc;
  }
  mx_atomic_file af;
  if ((rc = mx_atomic_begin(&af, path, who))) {
    free(hdr_s);
    free(it);
    return rc;
  }
  uint64_t n64 = hlen;
  bool ok = fwrite(&n64, 8, 1, af.f) == 1 && fwrite(hdr_s, 1, hlen, af.f) == hlen;
  for (int i = 0; i < n && ok && !rc; i++) {
    mx_tensor *t = it[i].t, *host = NULL;
    if (mx_dev(t) != MX_CPU) { /* GPU tensors are written from a host copy */
      if ((rc = mx_tensor_to(t, MX_CPU, 0, -1, &host))) break;
      t = host;
    }
    if ((rc = mx_tensor_make_plain(t))) { /* a backend layout is written as row-major */
      mx_tensor_release(host);
      break;
    }
    const void *data = mx_tensor_data(t);
    size_t nb = mx_nbytes(t);
    if (nb && fwrite(data, 1, nb, af.f) != nb) ok = false;
    mx_tensor_release(host);
  }
  free(hdr_s);
  free(it);
  return mx_atomic_end(&af, who, rc, ok);
}
