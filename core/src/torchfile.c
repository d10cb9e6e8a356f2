/* torchfile.c — PyTorch checkpoints (torch.save of a state_dict) read without Python and
 * without running anything from the file.
 *
 * Two layouts (torch/serialization.py):
 *  - zip (torch >= 1.6): <prefix>/data.pkl, the pickled object, whose tensors name their
 *    storages by persistent id ('storage', torch.<T>Storage, key, location, numel); the
 *    bytes of storage `key` are the zip entry <prefix>/data/<key> (read through libzip,
 *    which checks the CRC).
 *  - legacy (torch < 1.6, _legacy_save): five pickles in a row (the magic number
 *    0x1950a86a20f9469cfc6c, the protocol version 1001, a sys_info dict, the object, the
 *    list of storage keys), then for each key a u64 element count and the raw bytes.
 * The pickles go through pickle.c with an allowlist of exactly the globals a state_dict
 * uses: collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
 * _rebuild_parameter / _rebuild_parameter_with_state, torch.Size and the storage classes
 * of luamx's dtypes. Anything else is an error naming the global. A tensor is
 * (storage, offset, size, stride): every element it reaches must lie inside its storage,
 * and it is copied out to a contiguous luamx tensor after all storages are known.
 * docs/file-formats.md ("PyTorch checkpoints"). */
#include "pickle.h"
#include "ndfile_read.h"
#include "xfile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "torchfile.c copies storage bytes as stored: it assumes a little-endian host"
#endif

#define WHO "mx.nd.load"
#define MAX_TENSORS (1 << 22)
#define MAX_DEPTH 32

enum {
  G_ORDERED_DICT, G_REBUILD_V2, G_REBUILD, G_PARAM, G_PARAM_STATE, G_SIZE, G_STORAGE /* + k */
};
static const struct { const char *name; int dtype; } STORAGES[] = {
    {"FloatStorage", MX_F32}, {"DoubleStorage", MX_F64}, {"HalfStorage", MX_F16},
    {"BFloat16Storage", MX_BF16}, {"LongStorage", MX_I64}, {"IntStorage", MX_I32},
    {"ShortStorage", MX_I16}, {"CharStorage", MX_I8}, {"ByteStorage", MX_U8},
    {"BoolStorage", MX_BOOL}};
enum { NSTORAGES = sizeof STORAGES / sizeof STORAGES[0] };
#define ALLOWED "collections.OrderedDict, torch._utils._rebuild_tensor_v2, _rebuild_tensor, " \
  "_rebuild_parameter, _rebuild_parameter_with_state, torch.Size and torch.<T>Storage for " \
  "the dtypes luamx has"

enum { OBJ_STORAGE = 1, OBJ_TENSOR = 2 };

typedef struct storage {
  char key[64];
  int dtype;
  int64_t numel;
  const uint8_t *data; /* numel elements, or NULL until known */
  uint8_t *owned;      /* data read from a zip entry */
  struct storage *next;
} storage;

typedef struct tdesc {
  storage *st;
  int64_t offset;
  int ndim;
  int64_t shape[MX_MAX_DIM], stride[MX_MAX_DIM];
} tdesc;

typedef struct tf {
  const char *file;
  storage *storages;
  tdesc **tensors; /* every descriptor made, freed at the end */
  size_t ntensors, tcap;
  zip_t *zip;
  char prefix[256];
  pk_vm *vm;
} tf;

static int fail(const tf *t, const char *fmt, ...) MX_PRINTF(2, 3);
static int fail(const tf *t, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return mx_err(MX_EFORMAT, WHO ": %s: PyTorch checkpoint: %s", t->file, msg);
}

/* ---- the allowlist -------------------------------------------------------------------- */

static int h_global(void *ctx, const char *mod, const char *name, int64_t *id) {
  tf *t = ctx;
  if (strcmp(mod, "collections") == 0 && strcmp(name, "OrderedDict") == 0) *id = G_ORDERED_DICT;
  else if (strcmp(mod, "torch._utils") == 0 && strcmp(name, "_rebuild_tensor_v2") == 0) *id = G_REBUILD_V2;
  else if (strcmp(mod, "torch._utils") == 0 && strcmp(name, "_rebuild_tensor") == 0) *id = G_REBUILD;
  else if (strcmp(mod, "torch._utils") == 0 && strcmp(name, "_rebuild_parameter") == 0) *id = G_PARAM;
  else if (strcmp(mod, "torch._utils") == 0 && strcmp(name, "_rebuild_parameter_with_state") == 0)
    *id = G_PARAM_STATE;
  else if (strcmp(mod, "torch") == 0 && strcmp(name, "Size") == 0) *id = G_SIZE;
  else {
    if (strcmp(mod, "torch") == 0)
      for (int k = 0; k < NSTORAGES; k++)
        if (strcmp(name, STORAGES[k].name) == 0) {
          *id = G_STORAGE + k;
          return MX_OK;
        }
    char mb[96], nb[96];
    mx_ndf_printable(mb, sizeof mb, mod, strlen(mod));
    mx_ndf_printable(nb, sizeof nb, name, strlen(name));
    if (strcmp(mod, "torch") == 0 && strstr(name, "Storage"))
      return pk_fail(t->vm, "storage type torch.%s holds a dtype luamx has no dtype for", nb);
    return pk_fail(t->vm, "global '%s.%s' is not allowed: a state_dict needs only " ALLOWED
                   " (loading never runs code from the file)", mb, nb);
  }
  return MX_OK;
}

static bool int_tuple(const pk_val *v, int max, int64_t *out, int *n) {
  if (!v || v->k != PK_TUPLE || v->n > (size_t)max) return false;
  for (size_t i = 0; i < v->n; i++) {
    if (v->a[i]->k != PK_INT) return false;
    out[i] = v->a[i]->i;
  }
  *n = (int)v->n;
  return true;
}

static int nomem(const tf *t) { return mx_err(MX_ENOMEM, WHO ": %s: out of memory", t->file); }

static int rebuild(tf *t, pk_vm *vm, pk_val *args, size_t nargs_min, pk_val **out) {
  if (args->n < nargs_min)
    return pk_fail(vm, "_rebuild_tensor takes (storage, offset, size, stride, ...), got %zu "
                   "arguments", args->n);
  pk_val *st = args->a[0], *off = args->a[1];
  if (st->k != PK_OBJ || st->i != OBJ_STORAGE)
    return pk_fail(vm, "_rebuild_tensor: argument 1 is not a storage");
  if (off->k != PK_INT || off->i < 0)
    return pk_fail(vm, "_rebuild_tensor: the storage offset is not an integer >= 0");
  if (t->ntensors >= MAX_TENSORS) return pk_fail(vm, "more than %d tensors", MAX_TENSORS);
  if (t->ntensors == t->tcap) {
    size_t nc = t->tcap ? 2 * t->tcap : 64;
    tdesc **na = realloc(t->tensors, nc * sizeof *na);
    if (!na) return nomem(t);
    t->tensors = na, t->tcap = nc;
  }
  tdesc *d = calloc(1, sizeof *d);
  pk_val *v = d ? pk_new(vm, PK_OBJ) : NULL;
  if (!v) {
    free(d);
    return nomem(t);
  }
  t->tensors[t->ntensors++] = d;
  v->i = OBJ_TENSOR, v->obj = d;
  d->st = st->obj, d->offset = off->i;
  int ns = 0, nst = 0;
  if (!int_tuple(args->a[2], MX_MAX_DIM, d->shape, &ns))
    return pk_fail(vm, "_rebuild_tensor: size is not a tuple of at most %d ints", MX_MAX_DIM);
  if (!int_tuple(args->a[3], MX_MAX_DIM, d->stride, &nst) || nst != ns)
    return pk_fail(vm, "_rebuild_tensor: stride is not a tuple of %d ints", ns);
  d->ndim = ns;
  for (int i = 0; i < ns; i++)
    if (d->shape[i] < 0 || d->stride[i] < 0)
      return pk_fail(vm, "_rebuild_tensor: size (dim %d = %lld) and stride (%lld) must be >= 0",
                     i + 1, (long long)d->shape[i], (long long)d->stride[i]);
  *out = v;
  return MX_OK;
}

static bool is_tensor(const pk_val *v) { return v->k == PK_OBJ && v->i == OBJ_TENSOR; }

static int h_reduce(void *ctx, pk_vm *vm, int64_t id, pk_val *args, pk_val **out) {
  tf *t = ctx;
  switch (id) {
  case G_ORDERED_DICT: {
    /* OrderedDict() or OrderedDict([(k, v), ...]) */
    pk_val *d = pk_new(vm, PK_DICT);
    if (!d) return nomem(t);
    if (args->n == 1 && args->a[0]->k == PK_LIST) {
      pk_val *l = args->a[0];
      d->a = calloc(2 * l->n + 1, sizeof *d->a);
      if (!d->a) return nomem(t);
      d->cap = 2 * l->n + 1;
      for (size_t i = 0; i < l->n; i++) {
        pk_val *kv = l->a[i];
        if (kv->k != PK_TUPLE || kv->n != 2)
          return pk_fail(vm, "OrderedDict: item %zu is not a (key, value) pair", i + 1);
        d->a[d->n++] = kv->a[0], d->a[d->n++] = kv->a[1];
      }
    } else if (args->n != 0) {
      return pk_fail(vm, "OrderedDict takes no arguments or a list of pairs");
    }
    *out = d;
    return MX_OK;
  }
  case G_REBUILD_V2: return rebuild(t, vm, args, 6, out);
  case G_REBUILD: return rebuild(t, vm, args, 4, out);
  case G_PARAM:
  case G_PARAM_STATE:
    if (args->n < 1 || !is_tensor(args->a[0]))
      return pk_fail(vm, "_rebuild_parameter: argument 1 is not a tensor");
    *out = args->a[0];
    return MX_OK;
  case G_SIZE:
    if (args->n != 1 || args->a[0]->k != PK_TUPLE)
      return pk_fail(vm, "torch.Size takes one tuple");
    *out = args->a[0];
    return MX_OK;
  default:
    return pk_fail(vm, "a storage type cannot be called (REDUCE on torch.%s)",
                   STORAGES[id - G_STORAGE].name);
  }
}

static int h_build(void *ctx, pk_val *obj, pk_val *state) {
  tf *t = ctx;
  /* OrderedDict's __dict__ (a state_dict's _metadata), a tensor's hooks/state: data only,
   * and dropped */
  if ((obj->k == PK_DICT || obj->k == PK_OBJ) &&
      (state->k == PK_DICT || state->k == PK_NONE || state->k == PK_TUPLE))
    return MX_OK;
  return pk_fail(t->vm, "BUILD on something that is not a dict or a tensor");
}

static int h_persistent(void *ctx, pk_vm *vm, pk_val *pid, pk_val **out) {
  tf *t = ctx;
  if (pid->k != PK_TUPLE || pid->n < 5 || !pk_is_str(pid->a[0], "storage"))
    return pk_fail(vm, "a persistent id that is not ('storage', type, key, location, numel)");
  pk_val *ty = pid->a[1], *key = pid->a[2], *loc = pid->a[3], *numel = pid->a[4];
  if (ty->k != PK_GLOBAL || ty->i < G_STORAGE)
    return pk_fail(vm, "persistent id: the storage type is not a torch.<T>Storage");
  if (key->k != PK_STR || key->n == 0 || key->n >= sizeof((storage *)0)->key ||
      memchr(key->s, 0, key->n))
    return pk_fail(vm, "persistent id: the storage key is not a short string");
  if (loc->k != PK_STR) return pk_fail(vm, "persistent id: the location is not a string");
  if (numel->k != PK_INT || numel->i < 0)
    return pk_fail(vm, "persistent id: the element count is not an integer >= 0");
  if (pid->n > 5 && pid->a[5]->k != PK_NONE)
    return pk_fail(vm, "storage views (a legacy file's view_metadata) are not supported");
  int dtype = STORAGES[ty->i - G_STORAGE].dtype;
  storage *s = t->storages;
  while (s && !(strlen(s->key) == key->n && memcmp(s->key, key->s, key->n) == 0)) s = s->next;
  if (s) {
    if (s->dtype != dtype || s->numel != numel->i)
      return pk_fail(vm, "storage '%s' is named twice with different types or sizes", s->key);
  } else {
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)numel->i, (uint64_t)mx_dtype_size(dtype), &bytes) ||
        bytes > (uint64_t)INT64_MAX)
      return pk_fail(vm, "storage of %lld elements: the byte count overflows",
                     (long long)numel->i);
    s = calloc(1, sizeof *s);
    if (!s) return nomem(t);
    memcpy(s->key, key->s, key->n);
    s->dtype = dtype, s->numel = numel->i;
    s->next = t->storages;
    t->storages = s;
  }
  pk_val *v = pk_new(vm, PK_OBJ);
  if (!v) return nomem(t);
  v->i = OBJ_STORAGE, v->obj = s;
  *out = v;
  return MX_OK;
}

/* ---- tensors out ------------------------------------------------------------------------ */

/* A contiguous copy of d: every element it reaches must lie inside its storage. */
static int materialize(tf *t, const tdesc *d, const char *name, mx_tensor **out) {
  char nb[160];
  const char *nm = mx_ndf_printable(nb, sizeof nb, name, strlen(name));
  const storage *s = d->st;
  if (!s->data)
    return fail(t, "tensor '%s': the bytes of storage '%s' are not in the file", nm, s->key);
  int64_t count = 1, last = d->offset;
  for (int i = 0; i < d->ndim; i++) {
    int64_t reach;
    if (__builtin_mul_overflow(count, d->shape[i], &count) ||
        __builtin_mul_overflow(d->shape[i] > 0 ? d->shape[i] - 1 : 0, d->stride[i], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return fail(t, "tensor '%s': its size or stride overflows", nm);
  }
  if (count > 0 && last >= s->numel)
    return fail(t, "tensor '%s': size and stride reach element %lld of storage '%s', which has "
                "%lld", nm, (long long)last, s->key, (long long)s->numel);
  int rc = mx_tensor_new(d->ndim, d->shape, s->dtype, MX_CPU, 0, out);
  if (rc) return rc;
  if (count == 0) return MX_OK;
  size_t es = mx_dtype_size(s->dtype);
  uint8_t *dst = mx_ptr(*out);
  const uint8_t *src = s->data + (size_t)d->offset * es;
  bool contiguous = true;
  int64_t want = 1;
  for (int i = d->ndim - 1; i >= 0; i--) {
    if (d->shape[i] != 1 && d->stride[i] != want) contiguous = false;
    want *= d->shape[i];
  }
  if (contiguous) {
    memcpy(dst, src, (size_t)count * es);
    return MX_OK;
  }
  int64_t idx[MX_MAX_DIM] = {0};
  for (int64_t k = 0; k < count; k++) { /* row-major walk of the output */
    int64_t off = 0;
    for (int i = 0; i < d->ndim; i++) off += idx[i] * d->stride[i];
    memcpy(dst + (size_t)k * es, src + (size_t)off * es, es);
    for (int i = d->ndim - 1; i >= 0; i--) {
      if (++idx[i] < d->shape[i]) break;
      idx[i] = 0;
    }
  }
  return MX_OK;
}

typedef struct outs {
  char **names;
  mx_tensor **arrays;
  size_t n, cap, visits;
} outs;

static int add_out(tf *t, outs *o, const char *name, const tdesc *d) {
  for (size_t i = 0; i < o->n; i++)
    if (strcmp(o->names[i], name) == 0) {
      char nb[160];
      return fail(t, "the name '%s' is given twice", mx_ndf_printable(nb, sizeof nb, name, strlen(name)));
    }
  if (o->n == o->cap) {
    size_t nc = o->cap ? 2 * o->cap : 64;
    char **nn = realloc(o->names, nc * sizeof *nn);
    if (!nn) return nomem(t);
    o->names = nn;
    mx_tensor **na = realloc(o->arrays, nc * sizeof *na);
    if (!na) return nomem(t);
    o->arrays = na, o->cap = nc;
  }
  char *copy = strdup(name);
  if (!copy) return nomem(t);
  mx_tensor *x;
  int rc = materialize(t, d, name, &x);
  if (rc) {
    free(copy);
    return rc;
  }
  o->names[o->n] = copy, o->arrays[o->n] = x, o->n++;
  return MX_OK;
}

/* The tensors of dict d (and of dicts inside it, as "outer.inner"); other values (ints,
 * strings, lists: a checkpoint's epoch, optimizer settings) are skipped. */
static int flatten(tf *t, outs *o, const pk_val *d, const char *prefix, int depth) {
  if (depth > MAX_DEPTH) return fail(t, "dicts nested more than %d deep", MAX_DEPTH);
  for (size_t i = 0; i + 1 < d->n; i += 2) {
    if (++o->visits > (size_t)4 * MAX_TENSORS) return fail(t, "too many dict entries to walk");
    const pk_val *k = d->a[i], *v = d->a[i + 1];
    char key[4096];
    if (k->k == PK_STR || k->k == PK_BYTES) {
      if (k->n >= sizeof key - strlen(prefix) - 1 || memchr(k->s, 0, k->n))
        return fail(t, "a key is too long or holds a NUL byte");
      if (k->k == PK_BYTES && !mx_utf8_valid((const uint8_t *)k->s, k->n))
        return fail(t, "a key is not valid UTF-8");
      snprintf(key, sizeof key, "%s%.*s", prefix, (int)k->n, k->s);
    } else if (k->k == PK_INT) {
      snprintf(key, sizeof key, "%s%lld", prefix, (long long)k->i);
    } else {
      continue; /* a tuple key cannot name a parameter */
    }
    int rc = MX_OK;
    if (is_tensor(v)) {
      rc = add_out(t, o, key, v->obj);
    } else if (v->k == PK_DICT) {
      size_t len = strlen(key);
      if (len + 2 >= sizeof key) return fail(t, "a nested key is too long");
      key[len] = '.', key[len + 1] = 0;
      rc = flatten(t, o, v, key, depth + 1);
    }
    if (rc) return rc;
  }
  return MX_OK;
}

/* ---- the two layouts -------------------------------------------------------------------- */

static const pk_hooks HOOKS = {NULL, h_global, h_reduce, h_build, h_persistent};

static int unpickle(tf *t, const uint8_t *p, size_t len, size_t pos, pk_val **obj, size_t *end) {
  pk_hooks h = HOOKS;
  h.ctx = t;
  *obj = NULL;
  if (!t->vm && !(t->vm = pk_vm_new(p, len, WHO, t->file, &h))) return nomem(t);
  pk_seek(t->vm, pos);
  int rc = pk_load(t->vm, obj);
  if (end) *end = pk_pos(t->vm);
  return rc;
}

static const uint8_t LEGACY_MAGIC[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

static int load_legacy(tf *t, const uint8_t *p, size_t len, pk_val **obj) {
  pk_val *magic = NULL, *proto = NULL, *info = NULL, *keys = NULL;
  size_t pos = 0;
  int rc;
  if ((rc = unpickle(t, p, len, 0, &magic, &pos))) return rc;
  if (magic->k != PK_BIGINT || magic->n != 10 || memcmp(magic->s, LEGACY_MAGIC, 10) != 0)
    return fail(t, "not a PyTorch file: the legacy magic number is missing");
  if ((rc = unpickle(t, p, len, pos, &proto, &pos))) return rc;
  if (proto->k != PK_INT || proto->i != 1001)
    return fail(t, "legacy protocol version %lld (1001 expected)",
                proto->k == PK_INT ? (long long)proto->i : -1LL);
  if ((rc = unpickle(t, p, len, pos, &info, &pos))) return rc;
  if (info->k != PK_DICT) return fail(t, "the sys_info record is not a dict");
  for (size_t i = 0; i + 1 < info->n; i += 2)
    if (pk_is_str(info->a[i], "little_endian") && info->a[i + 1]->k == PK_BOOL &&
        !info->a[i + 1]->i)
      return fail(t, "the file was written on a big-endian machine (not supported)");
  if ((rc = unpickle(t, p, len, pos, obj, &pos))) return rc;
  if ((rc = unpickle(t, p, len, pos, &keys, &pos))) return rc;
  if (keys->k != PK_LIST) return fail(t, "the storage key list is not a list");
  for (size_t i = 0; i < keys->n; i++) {
    const pk_val *k = keys->a[i];
    storage *s = t->storages;
    while (s && !(k->k == PK_STR && strlen(s->key) == k->n && memcmp(s->key, k->s, k->n) == 0))
      s = s->next;
    if (!s) return fail(t, "storage key %zu of the list names no storage of the object", i + 1);
    if (s->data) return fail(t, "storage '%s' is listed twice", s->key);
    if (len - pos < 8)
      return fail(t, "storage '%s': its element count is cut off at byte %zu", s->key, pos);
    uint64_t numel;
    memcpy(&numel, p + pos, 8);
    pos += 8;
    if (numel != (uint64_t)s->numel)
      return fail(t, "storage '%s' holds %llu elements where its tensors expect %lld", s->key,
                  (unsigned long long)numel, (long long)s->numel);
    size_t bytes = (size_t)numel * mx_dtype_size(s->dtype); /* checked when it was made */
    if (len - pos < bytes)
      return fail(t, "storage '%s' needs %zu bytes but only %zu are left (at byte %zu)", s->key,
                  bytes, len - pos, pos);
    s->data = p + pos;
    pos += bytes;
  }
  if (pos != len) return fail(t, "%zu bytes after the last storage", len - pos);
  return MX_OK;
}

static int zip_error_fail(tf *t, const char *what, zip_error_t *ze) {
  int rc = fail(t, "%s: %s", what, zip_error_strerror(ze));
  zip_error_fini(ze);
  return rc;
}

/* Reads zip entry idx whole (at most cap bytes) into a new buffer. */
static int zip_read(tf *t, zip_int64_t idx, const char *name, uint64_t cap, uint8_t **out,
                    size_t *n) {
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(t->zip, (zip_uint64_t)idx, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    return fail(t, "entry '%s': cannot read its size", name);
  if (st.size > cap)
    return fail(t, "entry '%s' claims %llu bytes, more than it can hold (%llu)", name,
                (unsigned long long)st.size, (unsigned long long)cap);
  uint8_t *buf = malloc(st.size ? (size_t)st.size : 1);
  if (!buf) return nomem(t);
  zip_file_t *zf = zip_fopen_index(t->zip, (zip_uint64_t)idx, 0);
  zip_int64_t got = zf ? zip_fread(zf, buf, st.size) : -1;
  uint8_t extra;
  /* the CRC is checked when the read reaches the end: one more read must give 0 bytes */
  if (got == (zip_int64_t)st.size && zip_fread(zf, &extra, 1) != 0) got = -1;
  const char *why = zf ? zip_file_strerror(zf) : zip_strerror(t->zip);
  int rc = got == (zip_int64_t)st.size ? MX_OK
                                       : fail(t, "entry '%s': cannot read it: %s", name, why);
  if (zf && zip_fclose(zf) != 0 && !rc) rc = fail(t, "entry '%s': CRC or read error", name);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf, *n = (size_t)st.size;
  return MX_OK;
}

static int load_zip(tf *t, const uint8_t *p, size_t len, pk_val **obj) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(p, len, 0, &ze);
  if (!src) return zip_error_fail(t, "zip", &ze);
  t->zip = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  if (!t->zip) {
    zip_source_free(src);
    return zip_error_fail(t, "not a readable zip archive", &ze);
  }
  zip_error_fini(&ze);
  zip_int64_t ne = zip_get_num_entries(t->zip, 0), pkl = -1;
  for (zip_int64_t i = 0; i < ne; i++) {
    const char *nm = zip_get_name(t->zip, (zip_uint64_t)i, 0);
    const char *sl = nm ? strchr(nm, '/') : NULL;
    if (sl && strcmp(sl, "/data.pkl") == 0 && (size_t)(sl - nm) < sizeof t->prefix) {
      if (pkl >= 0) return fail(t, "the archive holds two data.pkl records");
      pkl = i;
      memcpy(t->prefix, nm, (size_t)(sl - nm));
      t->prefix[sl - nm] = 0;
    }
  }
  if (pkl < 0) return fail(t, "a zip archive without <name>/data.pkl is not a PyTorch checkpoint");
  uint8_t *pk;
  size_t pklen;
  /* deflate expands at most ~1032:1; torch stores entries uncompressed */
  int rc = zip_read(t, pkl, "data.pkl", (uint64_t)len * 1040, &pk, &pklen);
  if (rc) return rc;
  rc = unpickle(t, pk, pklen, 0, obj, NULL);
  /* the VM's strings point into pk: keep it until the end (owned by the storage list) */
  storage *keep = calloc(1, sizeof *keep);
  if (!keep) {
    free(pk);
    return rc ? rc : nomem(t);
  }
  keep->owned = pk, keep->next = t->storages, t->storages = keep;
  for (storage *s = t->storages; !rc && s; s = s->next) {
    if (!s->key[0]) continue; /* the keeper above */
    char name[512];
    snprintf(name, sizeof name, "%s/data/%s", t->prefix, s->key);
    zip_int64_t idx = zip_name_locate(t->zip, name, 0);
    if (idx < 0) continue; /* a tensor using it says so */
    size_t n, want = (size_t)s->numel * mx_dtype_size(s->dtype);
    if ((rc = zip_read(t, idx, name, (uint64_t)len * 1040, &s->owned, &n))) break;
    if (n != want)
      rc = fail(t, "storage '%s' has %zu bytes where %lld elements of %s need %zu", s->key, n,
                (long long)s->numel, mx_dtype_name(s->dtype), want);
    s->data = s->owned;
  }
  return rc;
}

/* ---- entry points ----------------------------------------------------------------------- */

static void tf_free(tf *t) {
  for (storage *s = t->storages, *nx; s; s = nx) {
    nx = s->next;
    free(s->owned);
    free(s);
  }
  for (size_t i = 0; i < t->ntensors; i++) free(t->tensors[i]);
  free(t->tensors);
  pk_vm_free(t->vm);
  if (t->zip) zip_discard(t->zip);
}

static int load_any(const uint8_t *p, size_t len, const char *file, int *n, mx_tensor ***arrays,
                    char ***names) {
  if (!n || !arrays || !names) return mx_err(MX_EINVAL, WHO ": NULL output pointer");
  *n = 0, *arrays = NULL, *names = NULL;
  tf t = {file, NULL, NULL, 0, 0, NULL, {0}, NULL};
  pk_val *obj = NULL;
  int rc;
  if (len >= 4 && memcmp(p, "PK\x03\x04", 4) == 0) rc = load_zip(&t, p, len, &obj);
  else if (len >= 2 && p[0] == 0x80) rc = load_legacy(&t, p, len, &obj);
  else if (len >= 262 && memcmp(p + 257, "ustar", 5) == 0)
    rc = fail(&t, "the tar layout of torch < 0.4 is not supported (load and save it again with "
              "a newer torch)");
  else rc = fail(&t, "not a PyTorch checkpoint (neither a zip archive nor a legacy pickle)");
  outs o = {0};
  if (!rc && obj->k != PK_DICT)
    rc = fail(&t, "the file holds a %s, not a state_dict (a dict of tensors)",
              is_tensor(obj) ? "single tensor" : "non-dict object");
  if (!rc) rc = flatten(&t, &o, obj, "", 0);
  if (!rc && o.n > INT32_MAX) rc = fail(&t, "too many tensors");
  tf_free(&t);
  if (rc) {
    for (size_t i = 0; i < o.n; i++) free(o.names[i]), mx_tensor_release(o.arrays[i]);
    free(o.names);
    free(o.arrays);
    return rc;
  }
  if (o.n == 0) { /* a dict without tensors is a valid, empty result */
    free(o.names);
    free(o.arrays);
    o.names = calloc(1, sizeof *o.names);
    o.arrays = calloc(1, sizeof *o.arrays);
    if (!o.names || !o.arrays) {
      free(o.names);
      free(o.arrays);
      return mx_err(MX_ENOMEM, WHO ": out of memory");
    }
  }
  *n = (int)o.n, *arrays = o.arrays, *names = o.names;
  return MX_OK;
}

int mx_torch_load_bytes(const void *buf, size_t len, int *n, mx_tensor ***arrays, char ***names) {
  if (!buf && len) return mx_err(MX_EINVAL, WHO ": NULL buffer");
  return load_any(buf ? buf : (const void *)"", len, "<memory>", n, arrays, names);
}

int mx_torch_load(const char *path, int *n, mx_tensor ***arrays, char ***names) {
  if (!path) return mx_err(MX_EINVAL, WHO ": NULL path");
  mx_xmap *m;
  int rc = mx_xmap_open(path, WHO, &m);
  if (rc) return rc;
  rc = load_any(m->p, m->len, path, n, arrays, names);
  mx_xmap_release(m); /* every tensor is a copy */
  return rc;
}
