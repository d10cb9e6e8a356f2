/* ndfile_params.c — MXNet's NDArray list files (.params): the records of V1/V2/V3 and the
 * oldest magic-less layout, read through ndfile_read.h's checked cursor; and mx_nd_save, which
 * writes V2 (V3 when a 0-d tensor is in the list: V2 cannot express one). */
#include "ndfile_read.h"
#include "engine.h"

#include <stdlib.h>

#define V1_MAGIC 0xF993FAC8u
#define V2_MAGIC 0xF993FAC9u
#define V3_MAGIC 0xF993FACAu

/* ---- .params records ------------------------------------------------------------ */

typedef struct rec {
  int stype;   /* 0 dense, 1 row_sparse, 2 csr */
  bool none;   /* MXNet's "none" array: shape unknown, no data */
  int ndim;
  int64_t shape[MX_MAX_DIM];
  int dtype;
  size_t data_off, nbytes;
  /* sparse records: the storage shape (of the data) and the index arrays */
  int sndim;
  int64_t sshape[MX_MAX_DIM];
  int aux_dt[2], aux_nd[2];
  int64_t aux_shape[2][MX_MAX_DIM];
  size_t aux_off[2], aux_bytes[2];
} rec;

/* A TShape: i32 ndim + ndim i64 dims. For V3 (np-shape) ndim -1 means "unknown"
 * (*unknown set); elsewhere a negative ndim is an error. */
static int rd_shape(ld *c, const char *what, bool v3, int *ndim, int64_t *dims,
                    bool *unknown) {
  int32_t nd = 0;
  int rc;
  *unknown = false;
  if ((rc = mx_ndf_rd_i32(c, &nd, what))) return rc;
  if (nd == -1 && v3) { *unknown = true; *ndim = -1; return MX_OK; }
  if (nd < 0) return mx_ndf_fail(c, "%s has a negative number of dimensions (%d)", what, nd);
  if (nd > MX_MAX_DIM)
    return mx_ndf_fail(c, "%s has %d dimensions; at most %d are supported", what, nd, MX_MAX_DIM);
  if (mx_ndf_left(c) < (size_t)nd * 8)
    return mx_ndf_fail(c, "file ends inside %s (%d dims need %d bytes, %zu left)", what, nd, nd * 8,
                mx_ndf_left(c));
  for (int i = 0; i < nd; i++) {
    memcpy(&dims[i], c->p + c->pos, 8);
    c->pos += 8;
    if (dims[i] < 0) {
      c->pos -= 8;
      return mx_ndf_fail(c, "%s: dimension %d is negative (%lld)", what, i + 1, (long long)dims[i]);
    }
  }
  *ndim = nd;
  return MX_OK;
}

static int rd_ctx(ld *c) {
  int32_t dev_type = 0, dev_id = 0;
  int rc;
  if ((rc = mx_ndf_rd_i32(c, &dev_type, "the device type"))) return rc;
  if ((rc = mx_ndf_rd_i32(c, &dev_id, "the device id"))) return rc;
  /* MXNet's kCPU 1, kGPU 2, kCPUPinned 3, kCPUShared 5 */
  if (dev_type != 1 && dev_type != 2 && dev_type != 3 && dev_type != 5) {
    c->pos -= 8;
    return mx_ndf_fail(c, "unknown device type %d", dev_type);
  }
  if (dev_id < 0) {
    c->pos -= 4;
    return mx_ndf_fail(c, "negative device id %d", dev_id);
  }
  return MX_OK;
}

/* The context and dtype code that every array record (V1, V2, V3, legacy) carries
 * between its shape and its data. */
static int rd_ctx_dtype(ld *c, int *dtype) {
  int32_t dt = 0;
  int rc;
  if ((rc = rd_ctx(c))) return rc;
  if ((rc = mx_ndf_rd_i32(c, &dt, "the dtype code"))) return rc;
  if ((rc = mx_ndf_check_dtype(c, dt, "dtype code"))) { c->pos -= 4; return rc; }
  *dtype = dt;
  return MX_OK;
}

/* One NDArray record, any version. Validates and skips it; fills r. */
static int parse_record(ld *c, rec *r) {
  uint32_t magic = 0;
  int rc;
  bool unknown;
  memset(r, 0, sizeof *r);
  if ((rc = mx_ndf_rd_u32(c, &magic, "an array's magic number"))) return rc;
  if (magic == V2_MAGIC || magic == V3_MAGIC) {
    bool v3 = magic == V3_MAGIC;
    int32_t stype = 0;
    if ((rc = mx_ndf_rd_i32(c, &stype, "the storage type"))) return rc;
    if (stype < 0 || stype > 2) {
      c->pos -= 4;
      return mx_ndf_fail(c, "unknown storage type %d (0 dense, 1 row_sparse, 2 csr)", stype);
    }
    if (v3 && stype != 0) {
      c->pos -= 4;
      return mx_ndf_fail(c, "a V3 (np-shape) record holds dense arrays only, got storage type %d",
                  stype);
    }
    r->stype = stype;
    int nad = stype == 1 ? 1 : stype == 2 ? 2 : 0;
    int sndim = 0;
    int64_t *sshape = r->sshape;
    if (nad && (rc = rd_shape(c, "the storage shape", false, &sndim, sshape, &unknown)))
      return rc;
    r->sndim = sndim;
    if ((rc = rd_shape(c, "the shape", v3, &r->ndim, r->shape, &unknown))) return rc;
    /* V2 keeps MXNet 1.x's legacy shapes, where ndim 0 means "unknown" */
    if (unknown || (!v3 && r->ndim == 0)) {
      r->none = true;
      return MX_OK;
    }
    int dt;
    if ((rc = rd_ctx_dtype(c, &dt))) return rc;
    r->dtype = dt;
    int *aux_dt = r->aux_dt, *aux_nd = r->aux_nd;
    int64_t (*aux_shape)[MX_MAX_DIM] = r->aux_shape;
    for (int i = 0; i < nad; i++) {
      int32_t at = 0;
      if ((rc = mx_ndf_rd_i32(c, &at, "a sparse index dtype"))) return rc;
      if ((rc = mx_ndf_check_dtype(c, at, "sparse index dtype code"))) { c->pos -= 4; return rc; }
      aux_dt[i] = at;
      if ((rc = rd_shape(c, "a sparse index shape", false, &aux_nd[i], aux_shape[i], &unknown)))
        return rc;
    }
    size_t bytes = 0;
    if (nad) {
      if ((rc = mx_ndf_data_bytes(c, sndim, sshape, mx_dtype_size(dt), &bytes))) return rc;
    } else if ((rc = mx_ndf_data_bytes(c, r->ndim, r->shape, mx_dtype_size(dt), &bytes))) {
      return rc;
    }
    if ((rc = mx_ndf_take_data(c, "the array", bytes, &r->data_off))) return rc;
    r->nbytes = bytes;
    for (int i = 0; i < nad; i++) {
      size_t ab = 0, off = 0;
      if ((rc = mx_ndf_data_bytes(c, aux_nd[i], aux_shape[i], mx_dtype_size(aux_dt[i]), &ab)))
        return rc;
      if ((rc = mx_ndf_take_data(c, "a sparse index", ab, &off))) return rc;
      r->aux_off[i] = off;
      r->aux_bytes[i] = ab;
    }
    return MX_OK;
  }
  if (magic == V1_MAGIC) {
    if ((rc = rd_shape(c, "the shape", false, &r->ndim, r->shape, &unknown))) return rc;
  } else {
    /* The oldest layout has no magic: the word is ndim, then u32 dims. */
    if (magic > MX_MAX_DIM)
      return mx_ndf_fail(c, "bad array magic number 0x%08x (not V1/V2/V3, and too large to be the "
                  "ndim of the magic-less legacy layout)", magic);
    r->ndim = (int)magic;
    if (mx_ndf_left(c) < (size_t)r->ndim * 4)
      return mx_ndf_fail(c, "file ends inside the shape (%d dims need %d bytes, %zu left)", r->ndim,
                  r->ndim * 4, mx_ndf_left(c));
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
  if ((rc = mx_ndf_data_bytes(c, r->ndim, r->shape, mx_dtype_size(dt), &bytes))) return rc;
  if ((rc = mx_ndf_take_data(c, "the array", bytes, &r->data_off))) return rc;
  r->nbytes = bytes;
  return MX_OK;
}

/* ---- .params ------------------------------------------------------------------- */

/* A sparse record's tensor: its data and index arrays as stored, then checked and put in
 * canonical order by mx_sparse_from_parts (a hostile file's indices are its errors). */
static int load_sparse(ld *c, const rec *r, mx_tensor **out) {
  mx_tensor *part[3] = {NULL, NULL, NULL};
  int nad = r->stype == 1 ? 1 : 2, rc;
  if ((rc = mx_ndf_new_tensor(c, r->sndim, r->sshape, r->dtype, &part[0]))) return rc;
  if (r->nbytes) memcpy(mx_ptr(part[0]), c->p + r->data_off, r->nbytes);
  for (int i = 0; i < nad && !rc; i++) {
    if (mx_dtype_is_float(r->aux_dt[i]) || r->aux_dt[i] == MX_BOOL)
      rc = mx_ndf_fail(c, "a sparse index array has dtype %s (integers expected)",
                       mx_dtype_name(r->aux_dt[i]));
    else if (!(rc = mx_ndf_new_tensor(c, r->aux_nd[i], r->aux_shape[i], r->aux_dt[i], &part[i + 1])) &&
             r->aux_bytes[i])
      memcpy(mx_ptr(part[i + 1]), c->p + r->aux_off[i], r->aux_bytes[i]);
  }
  if (!rc && (rc = mx_sparse_from_parts(r->stype, r->ndim, r->shape, part[0], part[1], part[2], out))) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s", mx_last_error());
    rc = rc == MX_ENOMEM ? mx_ndf_fail_nomem(c, "%s", msg) : mx_ndf_fail(c, "%s", msg);
  }
  for (int i = 0; i < 3; i++) mx_tensor_release(part[i]);
  return rc;
}

int mx_ndf_load_params(ld *c, result *res) {
  uint64_t magic = 0, reserved = 0, n = 0, k = 0;
  int rc;
  if ((rc = mx_ndf_rd_u64(c, &magic, "the list header"))) return rc;
  if ((rc = mx_ndf_rd_u64(c, &reserved, "the list header"))) return rc;
  if ((rc = mx_ndf_rd_u64(c, &n, "the array count"))) return rc;
  /* the smallest record (a magic-less "none") is 4 bytes */
  if (n > MX_NDF_MAX_ARRAYS) {
    c->pos -= 8;
    return mx_ndf_fail(c, "the file claims %llu arrays; at most %d are supported",
                (unsigned long long)n, MX_NDF_MAX_ARRAYS);
  }
  if (n > mx_ndf_left(c) / 4) {
    c->pos -= 8;
    return mx_ndf_fail(c, "the file claims %llu arrays but has room for at most %zu",
                (unsigned long long)n, mx_ndf_left(c) / 4);
  }
  c->count = (int64_t)n;
  size_t first = c->pos;
  rec r;
  for (uint64_t i = 0; i < n; i++) { /* walk 1: validate, allocate nothing */
    c->idx = (int64_t)i;
    if ((rc = parse_record(c, &r))) return rc;
  }
  c->idx = -1;
  if ((rc = mx_ndf_rd_u64(c, &k, "the name count"))) return rc;
  if (k != 0 && k != n) {
    c->pos -= 8;
    return mx_ndf_fail(c, "the file has %llu names for %llu arrays (expected 0 or %llu)",
                (unsigned long long)k, (unsigned long long)n, (unsigned long long)n);
  }
  res->n = (int64_t)n;
  res->arrays = calloc(n ? n : 1, sizeof *res->arrays);
  if (!res->arrays) return mx_ndf_fail_nomem(c, "out of memory for %llu handles", (unsigned long long)n);
  if (k) {
    res->names = calloc(k, sizeof *res->names);
    if (!res->names) return mx_ndf_fail_nomem(c, "out of memory for %llu names", (unsigned long long)k);
  }
  for (uint64_t i = 0; i < k; i++) {
    uint64_t len = 0;
    if ((rc = mx_ndf_rd_u64(c, &len, "a name's length"))) return rc;
    if (len > mx_ndf_left(c)) {
      c->pos -= 8;
      return mx_ndf_fail(c, "name %llu of %llu: name length %llu exceeds the %zu bytes left in the "
                  "file", (unsigned long long)i + 1, (unsigned long long)k,
                  (unsigned long long)len, mx_ndf_left(c));
    }
    if (memchr(c->p + c->pos, 0, len))
      return mx_ndf_fail(c, "name %llu of %llu contains a NUL byte", (unsigned long long)i + 1,
                  (unsigned long long)k);
    char *s = malloc(len + 1);
    if (!s) return mx_ndf_fail_nomem(c, "out of memory for a name of %llu bytes", (unsigned long long)len);
    memcpy(s, c->p + c->pos, len);
    s[len] = 0;
    res->names[i] = s;
    c->pos += len;
  }
  c->idx = -1;
  if (c->pos != c->len)
    return mx_ndf_fail(c, "%zu unexpected bytes after the names list (trailing garbage)", mx_ndf_left(c));
  if (res->names && (rc = mx_ndf_check_unique(c, res->names, res->n))) return rc;

  c->pos = first; /* walk 2: build */
  for (uint64_t i = 0; i < n; i++) {
    c->idx = (int64_t)i;
    c->name = res->names ? res->names[i] : NULL;
    size_t at = c->pos;
    if ((rc = parse_record(c, &r))) return rc; /* cannot fail: walk 1 passed */
    mx_tensor *t;
    if (r.stype != 0 && !r.none) {
      if ((rc = load_sparse(c, &r, &t))) {
        c->pos = at;
        return rc;
      }
    } else if (r.none) { /* MXNet's "none" array: an empty float32 vector */
      int64_t zero = 0;
      if ((rc = mx_ndf_new_tensor(c, 1, &zero, MX_F32, &t))) return rc;
    } else {
      if ((rc = mx_ndf_new_tensor(c, r.ndim, r.shape, r.dtype, &t))) return rc;
      if (r.nbytes) memcpy(mx_ptr(t), c->p + r.data_off, r.nbytes);
    }
    res->arrays[i] = t;
  }
  c->idx = -1;
  c->name = NULL;
  return MX_OK;
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

static void w_shape(wr *w, const mx_tensor *t) {
  w_i32(w, t->ndim);
  w_bytes(w, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

/* A sparse record (always V2: V3 holds dense arrays only): MXNet's NDArray::Save order,
 * storage shape before the shape, the index arrays' dtypes and shapes before the data,
 * their data after it. Sparse tensors are cpu tensors, written after their pending ops. */
static void save_sparse(wr *w, const mx_tensor *t) {
  const mx_sparse *sp = t->sparse;
  int nad = t->stype == MX_STYPE_CSR ? 2 : 1;
  w_u32(w, V2_MAGIC);
  w_i32(w, t->stype);
  w_shape(w, sp->data);
  w_shape(w, t);
  w_i32(w, MX_CPU);
  w_i32(w, 0);
  w_i32(w, t->dtype);
  for (int i = 0; i < nad; i++) {
    w_i32(w, sp->aux[i]->dtype);
    w_shape(w, sp->aux[i]);
  }
  w_bytes(w, mx_ptr(sp->data), mx_nbytes(sp->data));
  for (int i = 0; i < nad; i++) w_bytes(w, mx_ptr(sp->aux[i]), mx_nbytes(sp->aux[i]));
}

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
    if (!arrays[i]->stype && (arrays[i]->ndim == 0 || arrays[i]->size == 0)) v3 = true;
  }
  /* Wait for every queued write first: an asynchronous failure is reported here,
   * before a byte is written, instead of saving whatever the buffer held. */
  for (int i = 0; i < n; i++) {
    int rc = mx_tensor_wait_to_read(arrays[i]);
    if (rc)
      return mx_err(rc, "mx.nd.save: '%s': array %d: %s", path, i + 1, mx_last_error());
    if (arrays[i]->stype && !arrays[i]->sparse->data)
      return mx_err(MX_EINVAL, "mx.nd.save: '%s': array %d: the sparse tensor was never computed",
                    path, i + 1);
  }
  mx_atomic_file af;
  int rc = mx_atomic_begin(&af, path, "mx.nd.save");
  if (rc) return rc;
  wr w = {af.f, true};
  w_u64(&w, MX_NDF_LIST_MAGIC);
  w_u64(&w, 0);
  w_u64(&w, (uint64_t)n);
  for (int i = 0; i < n && w.ok && !rc; i++) {
    mx_tensor *t = arrays[i], *host = NULL;
    if (t->stype) {
      save_sparse(&w, t);
      continue;
    }
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

