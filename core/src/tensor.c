/* tensor.c — tensor handles: creation, views, accessors, copies. */
#include "engine.h"

#include <pthread.h>

#include <stdlib.h>
#include <string.h>

int64_t mx_shape_prod(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

/* Validates a shape: 0..8 dims, no negative dim, element count and byte size fit. */
int mx_shape_check(const char *op, int ndim, const int64_t *shape, int dtype) {
  char b[MX_SHAPE_BUF];
  if (ndim < 0 || ndim > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "%s: a tensor has 0 to %d dimensions, got %d", op, MX_MAX_DIM,
                  ndim);
  if (!mx_dtype_valid(dtype)) return mx_err(MX_EINVAL, "%s: unknown dtype code %d", op, dtype);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return mx_err(MX_EINVAL, "%s: negative dimension in shape %s", op,
                    mx_shape_str(b, ndim, shape));
    if (shape[i] && n > (INT64_MAX / 16) / shape[i])
      return mx_err(MX_EINVAL, "%s: shape %s is too large", op, mx_shape_str(b, ndim, shape));
    n *= shape[i];
  }
  return MX_OK;
}

static mx_tensor *tensor_struct(int ndim, const int64_t *shape, int dtype) {
  mx_tensor *t = malloc(sizeof *t);
  if (!t) return NULL;
  atomic_init(&t->refcount, 1);
  t->ndim = ndim;
  t->dtype = dtype;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  t->stype = MX_STYPE_DEFAULT;
  t->size = mx_shape_prod(ndim, shape);
  t->storage = NULL;
  t->offset = 0;
  t->layout = NULL;
  t->layout_md = NULL;
  return t;
}

/* ---- sparse tensors: the handle and its parts (mx.h "sparse storage") -------------- */

static const char *stype_name(int stype) {
  return stype == MX_STYPE_ROW_SPARSE ? "row_sparse" : stype == MX_STYPE_CSR ? "csr" : "default";
}

/* The element readers' refusal of a sparse tensor. */
static int not_sparse(const char *what, const mx_tensor *t) {
  char b[MX_SHAPE_BUF];
  return mx_err(MX_EINVAL, "%s: the tensor %s is %s (sparse storage): read its parts, or "
                "convert it with cast_storage / tostype('default') first", what,
                mx_shape_str(b, t->ndim, t->shape), stype_name(t->stype));
}

static void sparse_drop_parts(mx_sparse *sp) {
  mx_tensor_release(sp->data);
  mx_tensor_release(sp->aux[0]);
  mx_tensor_release(sp->aux[1]);
  sp->data = sp->aux[0] = sp->aux[1] = NULL;
}

static void sparse_free(mx_sparse *sp) {
  if (!sp) return;
  sparse_drop_parts(sp);
  free(sp);
}

int mx_sparse_new_empty(mx_session *se, int stype, int ndim, const int64_t *shape, int dtype,
                        int dev_type, int dev_id, mx_tensor **out) {
  char b[MX_SHAPE_BUF];
  if (stype != MX_STYPE_ROW_SPARSE && stype != MX_STYPE_CSR)
    return mx_err(MX_EINVAL, "sparse: unknown storage type %d (1 row_sparse, 2 csr)", stype);
  if (dev_type != MX_CPU)
    return mx_err(MX_EDEVICE, "sparse: %s tensors live on the cpu only (got a gpu(%d) one)",
                  stype_name(stype), dev_id);
  int rc = mx_shape_check("sparse", ndim, shape, dtype);
  if (rc) return rc;
  if (stype == MX_STYPE_CSR ? ndim != 2 : ndim < 1)
    return mx_err(MX_EINVAL, "sparse: a %s tensor has %s dimensions, got shape %s",
                  stype_name(stype), stype == MX_STYPE_CSR ? "2" : "at least 1",
                  mx_shape_str(b, ndim, shape));
  mx_tensor *t = tensor_struct(ndim, shape, dtype);
  mx_sparse *sp = calloc(1, sizeof *sp);
  if (t) t->storage = mx_storage_alloc_in(se, 0, dev_type, dev_id);
  if (!t || !sp || !t->storage) {
    free(sp);
    if (t) mx_storage_release(t->storage);
    free(t);
    return mx_err(MX_ENOMEM, "out of host memory for a sparse tensor header");
  }
  t->stype = stype;
  t->size = 0;
  t->sparse = sp;
  *out = t;
  return MX_OK;
}

static int part_new(mx_tensor *t, int ndim, const int64_t *shape, int dtype, mx_tensor **out) {
  int rc = mx_tensor_new_in(t->storage->session, ndim, shape, dtype, mx_dev(t),
                            t->storage->dev_id, out);
  if (rc) *out = NULL;
  return rc;
}

int mx_sparse_alloc_rsp(mx_tensor *t, int64_t nnr) {
  int64_t ds[MX_MAX_DIM];
  memcpy(ds, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  ds[0] = nnr;
  mx_tensor *d, *i;
  int rc = part_new(t, t->ndim, ds, t->dtype, &d);
  if (!rc && (rc = part_new(t, 1, &nnr, MX_I64, &i))) mx_tensor_release(d);
  if (rc) return rc;
  sparse_drop_parts(t->sparse);
  t->sparse->data = d;
  t->sparse->aux[0] = i;
  return MX_OK;
}

int mx_sparse_alloc_csr(mx_tensor *t, int64_t nnz) {
  int64_t rows1 = t->shape[0] + 1;
  mx_tensor *d, *p = NULL, *i = NULL;
  int rc = part_new(t, 1, &nnz, t->dtype, &d);
  if (!rc) rc = part_new(t, 1, &rows1, MX_I64, &p);
  if (!rc) rc = part_new(t, 1, &nnz, MX_I64, &i);
  if (rc) {
    mx_tensor_release(d);
    mx_tensor_release(p);
    return rc;
  }
  sparse_drop_parts(t->sparse);
  t->sparse->data = d;
  t->sparse->aux[0] = p;
  t->sparse->aux[1] = i;
  return MX_OK;
}

void mx_sparse_trim(mx_tensor *t, int64_t n) {
  mx_sparse *sp = t->sparse;
  mx_tensor *trim[2] = {sp->data, t->stype == MX_STYPE_CSR ? sp->aux[1] : sp->aux[0]};
  for (int k = 0; k < 2; k++) {
    mx_tensor *a = trim[k];
    int64_t row = a->shape[0] ? a->size / a->shape[0] : 0;
    a->shape[0] = n;
    a->size = n * row;
  }
}

void mx_sparse_set_parts(mx_tensor *t, mx_tensor *data, mx_tensor *aux0, mx_tensor *aux1) {
  mx_tensor_retain(data);
  mx_tensor_retain(aux0);
  mx_tensor_retain(aux1);
  sparse_drop_parts(t->sparse);
  t->sparse->data = data;
  t->sparse->aux[0] = aux0;
  t->sparse->aux[1] = aux1;
}

/* copy_into with a sparse side: sparse into sparse of the same storage type only (the
 * conversions are ops: cast_storage). Same device and dtype: dst shares src's parts
 * (immutable); else dst gets converted copies on its device. */
static int sparse_copy_into(mx_tensor *dst, mx_tensor *src) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (dst->stype != src->stype)
    return mx_err(MX_EINVAL, "copy: storage types differ (%s into %s): convert with "
                  "cast_storage / tostype", stype_name(src->stype), stype_name(dst->stype));
  if (dst->ndim != src->ndim ||
      memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)dst->ndim) != 0)
    return mx_err(MX_EINVAL, "copy: shape mismatch, destination %s vs source %s",
                  mx_shape_str(a, dst->ndim, dst->shape), mx_shape_str(b, src->ndim, src->shape));
  if (dst == src) return MX_OK;
  int rc = mx_engine_wait_storage(src->storage, true);
  if (!rc) rc = mx_engine_wait_storage(dst->storage, false);
  if (rc) return rc;
  mx_sparse *sp = src->sparse;
  if (!sp->data) return mx_err(MX_EINVAL, "copy: the sparse source was never computed");
  bool same = dst->dtype == src->dtype && mx_dev(dst) == mx_dev(src) &&
              dst->storage->dev_id == src->storage->dev_id;
  if (same) {
    mx_sparse_set_parts(dst, sp->data, sp->aux[0], sp->aux[1]);
    return MX_OK;
  }
  mx_tensor *p[3] = {NULL, NULL, NULL}, *s3[3] = {sp->data, sp->aux[0], sp->aux[1]};
  for (int k = 0; k < 3 && !rc; k++)
    if (s3[k]) {
      rc = part_new(dst, s3[k]->ndim, s3[k]->shape, k ? MX_I64 : dst->dtype, &p[k]);
      if (!rc) rc = mx_tensor_copy_into(p[k], s3[k]);
    }
  for (int k = 0; k < 3 && !rc; k++) /* copies between cpu(i) devices are queued */
    if (p[k]) rc = mx_engine_wait_storage(p[k]->storage, true);
  if (!rc) mx_sparse_set_parts(dst, p[0], p[1], p[2]);
  for (int k = 0; k < 3; k++) mx_tensor_release(p[k]);
  return rc;
}

int mx_tensor_new(int ndim, const int64_t *shape, int dtype, int dev_type, int dev_id,
                  mx_tensor **out) {
  return mx_tensor_new_in(mx_session_current(), ndim, shape, dtype, dev_type, dev_id, out);
}

int mx_tensor_new_in(mx_session *se, int ndim, const int64_t *shape, int dtype, int dev_type,
                     int dev_id, mx_tensor **out) {
  if (dev_type == MX_CPU) { /* small: one cached block for header, storage and data */
    int64_t n = mx_shape_prod(ndim, shape);
    size_t nbytes = (size_t)n * mx_dtype_size(dtype);
    mx_tensor *c = nbytes <= MX_CELL_BYTES ? mx_cell_alloc(nbytes, se) : NULL;
    if (c) {
      c->storage->dev_id = dev_id; /* cpu(i): distinct devices share the cells */
      c->ndim = ndim;
      c->dtype = dtype;
      c->stype = MX_STYPE_DEFAULT;
      for (int i = 0; i < ndim; i++) c->shape[i] = shape[i];
      c->size = n;
      c->offset = 0;
      c->layout = NULL;
      c->layout_md = NULL;
      *out = c;
      return MX_OK;
    }
  }
  mx_tensor *t = tensor_struct(ndim, shape, dtype);
  if (!t) return mx_err(MX_ENOMEM, "out of host memory for a tensor header");
  size_t nbytes = (size_t)t->size * mx_dtype_size(dtype);
  t->storage = mx_storage_alloc_in(se, nbytes, dev_type, dev_id);
  if (!t->storage) {
    char b[MX_SHAPE_BUF];
    free(t);
    return mx_err(MX_ENOMEM, "out of memory allocating %zu bytes for a %s %s tensor on %s(%d)",
                  nbytes, mx_dtype_name(dtype), mx_shape_str(b, ndim, shape),
                  dev_type == MX_CPU ? "cpu" : "gpu", dev_id);
  }
  *out = t;
  return MX_OK;
}

int mx_tensor_new_laid(int ndim, const int64_t *shape, int dtype, size_t nbytes,
                       const mx_layout *l, void *md, mx_tensor **out) {
  mx_tensor *t = tensor_struct(ndim, shape, dtype);
  if (!t) return mx_err(MX_ENOMEM, "out of host memory for a tensor header");
  t->storage = mx_storage_alloc(nbytes, MX_CPU, 0);
  if (!t->storage) {
    free(t);
    return mx_err(MX_ENOMEM, "out of memory allocating %zu bytes for a %s tensor", nbytes,
                  l ? l->name : "row-major");
  }
  t->layout = l;
  t->layout_md = md;
  *out = t;
  return MX_OK;
}

int mx_tensor_empty(int ndim, const int64_t *shape, int dtype, int dev_type, int dev_id,
                    mx_tensor **out) {
  int rc = mx_shape_check("empty", ndim, shape, dtype);
  if (rc) return rc;
  if ((rc = mx_device_check("empty", dev_type, dev_id))) return rc;
  rc = mx_tensor_new(ndim, shape, dtype, dev_type, dev_id, out);
  return rc ? mx_err_prefix(rc, "empty") : MX_OK;
}

int mx_tensor_from_data(void *data, int ndim, const int64_t *shape, int dtype,
                        void (*deleter)(void *, void *), void *ctx, mx_tensor **out) {
  int rc = mx_shape_check("from_data", ndim, shape, dtype);
  if (rc) return rc;
  if (!data && mx_shape_prod(ndim, shape) > 0)
    return mx_err(MX_EINVAL, "from_data: data pointer is NULL");
  mx_tensor *t = tensor_struct(ndim, shape, dtype);
  if (!t) return mx_err(MX_ENOMEM, "out of host memory for a tensor header");
  t->storage = mx_storage_wrap(data, (size_t)t->size * mx_dtype_size(dtype), deleter, ctx);
  if (!t->storage) { free(t); return mx_err(MX_ENOMEM, "out of host memory"); }
  *out = t;
  return MX_OK;
}

void mx_tensor_retain(mx_tensor *t) {
  if (t) atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed);
}

void mx_tensor_release(mx_tensor *t) {
  if (!t || atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) != 1) return;
  bool cell = mx_cell_tensor(t); /* its memory goes with the storage's */
  if (MX_UNLIKELY(t->layout != NULL) && t->layout->free_md) t->layout->free_md(t->layout_md);
  if (MX_UNLIKELY(t->stype != MX_STYPE_DEFAULT)) sparse_free(t->sparse);
  mx_storage_release(t->storage);
  if (!cell) free(t);
}

int mx_tensor_ndim(const mx_tensor *t) { return t->ndim; }
int64_t mx_tensor_dim(const mx_tensor *t, int i) {
  return i >= 0 && i < t->ndim ? t->shape[i] : -1;
}
int mx_tensor_shape(const mx_tensor *t, int64_t *shape) {
  for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
  return t->ndim;
}
int64_t mx_tensor_size(const mx_tensor *t) {
  return t->stype ? mx_shape_prod(t->ndim, t->shape) : t->size;
}
int mx_tensor_stype(const mx_tensor *t) { return t->stype; }
int mx_tensor_dtype(const mx_tensor *t) { return t->dtype; }
int mx_tensor_dev_type(const mx_tensor *t) { return t->storage->dev_type; }
int mx_tensor_dev_id(const mx_tensor *t) { return t->storage->dev_id; }
/* Both data functions hand out row-major memory: a tensor in a backend layout is first
 * converted in place (mx_tensor_make_plain; that waits for its pending ops,
 * even in _nowait). NULL when that conversion fails. */
void *mx_tensor_data_nowait(const mx_tensor *t) {
  if (t->stype && not_sparse("data", t)) return NULL;
  if (mx_tensor_make_plain((mx_tensor *)t)) return NULL;
  mx_storage_touch(t->storage); /* the caller may write through it */
  return mx_ptr(t);
}
void *mx_tensor_data(mx_tensor *t) {
  /* A sync point with no status to return: the caller may write through the
   * pointer, so wait for readers too. An asynchronous error is left on the tensor
   * for a later status-returning sync point (item, wait_to_read) to raise. */
  if (t->stype && not_sparse("data", t)) return NULL;
  if (mx_tensor_make_plain(t)) return NULL;
  mx_engine_wait_storage(t->storage, false);
  mx_storage_touch(t->storage);
  return mx_ptr(t);
}
uint32_t mx_tensor_version(const mx_tensor *t) {
  return atomic_load_explicit(&t->storage->version, memory_order_relaxed);
}
bool mx_tensor_shares_storage(const mx_tensor *a, const mx_tensor *b) {
  return a->storage == b->storage;
}

static int make_view(mx_tensor *t, int ndim, const int64_t *shape, size_t offset,
                     mx_tensor **out) {
  mx_tensor *v = tensor_struct(ndim, shape, t->dtype);
  if (!v) return mx_err(MX_ENOMEM, "out of host memory for a tensor header");
  v->storage = t->storage;
  mx_storage_retain(t->storage);
  v->offset = offset;
  *out = v;
  return MX_OK;
}

int mx_tensor_view_bytes(mx_tensor *base, int ndim, const int64_t *shape, int dtype,
                        mx_tensor **out) {
  if (base->stype) return not_sparse("view", base);
  if (base->layout) return mx_err(MX_EINVAL, "view: the base tensor is not row-major");
  mx_tensor *v = tensor_struct(ndim, shape, dtype);
  if (!v) return mx_err(MX_ENOMEM, "out of host memory for a tensor header");
  int64_t n = v->size;
  if ((size_t)n * mx_dtype_size(dtype) > mx_nbytes(base)) {
    free(v);
    return mx_err(MX_EINVAL, "view: %lld elements of %s do not fit in %zu bytes",
                  (long long)n, mx_dtype_name(dtype), mx_nbytes(base));
  }
  v->storage = base->storage;
  mx_storage_retain(base->storage);
  v->offset = base->offset;
  *out = v;
  return MX_OK;
}

int mx_tensor_reshape(mx_tensor *t, int ndim, const int64_t *shape, mx_tensor **out) {
  if (t->stype) return not_sparse("reshape", t);
  int lrc = mx_tensor_make_plain(t); /* views see row-major elements */
  if (lrc) return lrc;
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (ndim < 0 || ndim > MX_MAX_DIM)
    return mx_err(MX_EINVAL, "reshape: a tensor has 0 to %d dimensions, got %d", MX_MAX_DIM,
                  ndim);
  int64_t s[MX_MAX_DIM];
  int infer = -1;
  int64_t known = 1;
  bool zero = false, big = false;
  for (int i = 0; i < ndim; i++) {
    s[i] = shape[i];
    if (s[i] == 0) { /* MXNet: 0 copies the input's dim */
      if (i >= t->ndim)
        return mx_err(MX_EINVAL,
                      "reshape: shape %s uses 0 (copy input dim) at position %d but the input "
                      "%s has only %d dims",
                      mx_shape_str(a, ndim, shape), i + 1, mx_shape_str(b, t->ndim, t->shape),
                      t->ndim);
      s[i] = t->shape[i];
    }
    if (s[i] == -1) {
      if (infer >= 0)
        return mx_err(MX_EINVAL, "reshape: shape %s has more than one -1",
                      mx_shape_str(a, ndim, shape));
      infer = i;
      continue;
    }
    if (s[i] < 0)
      return mx_err(MX_EINVAL, "reshape: invalid dimension %lld in shape %s", (long long)s[i],
                    mx_shape_str(a, ndim, shape));
    /* the product of the nonzero dims, checked first (signed overflow is undefined); a
     * zero dim makes the size 0 whatever the others */
    if (s[i] == 0) zero = true;
    else if (known > INT64_MAX / s[i]) big = true;
    else known *= s[i];
  }
  if (zero) known = 0;
  else if (big)
    return mx_err(MX_EINVAL, "reshape: shape %s has more elements than int64 can count "
                  "(the input %s has %lld)", mx_shape_str(a, ndim, shape),
                  mx_shape_str(b, t->ndim, t->shape), (long long)t->size);
  if (infer >= 0) {
    if (known == 0 || t->size % known != 0)
      return mx_err(MX_EINVAL, "reshape: cannot reshape %s (size %lld) into %s",
                    mx_shape_str(a, t->ndim, t->shape), (long long)t->size,
                    mx_shape_str(b, ndim, shape));
    s[infer] = t->size / known;
    known *= s[infer];
  }
  if (known != t->size)
    return mx_err(MX_EINVAL, "reshape: cannot reshape %s (size %lld) into %s (size %lld)",
                  mx_shape_str(a, t->ndim, t->shape), (long long)t->size,
                  mx_shape_str(b, ndim, s), (long long)known);
  return make_view(t, ndim, s, t->offset, out);
}

int mx_tensor_slice0(mx_tensor *t, int64_t begin, int64_t end, mx_tensor **out) {
  if (t->stype) return not_sparse("slice", t);
  int lrc = mx_tensor_make_plain(t); /* views see row-major elements */
  if (lrc) return lrc;
  char a[MX_SHAPE_BUF];
  if (t->ndim == 0) return mx_err(MX_EINVAL, "slice: cannot slice a 0-d tensor");
  if (begin < 0 || end < begin || end > t->shape[0])
    return mx_err(MX_EINVAL, "slice: rows [%lld, %lld) out of range for shape %s",
                  (long long)begin, (long long)end, mx_shape_str(a, t->ndim, t->shape));
  int64_t s[MX_MAX_DIM];
  memcpy(s, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  s[0] = end - begin;
  size_t row = (size_t)(t->shape[0] ? t->size / t->shape[0] : 0) * mx_dtype_size(t->dtype);
  return make_view(t, t->ndim, s, t->offset + (size_t)begin * row, out);
}

int mx_tensor_index0(mx_tensor *t, int64_t i, mx_tensor **out) {
  if (t->stype) return not_sparse("index", t);
  int lrc = mx_tensor_make_plain(t); /* views see row-major elements */
  if (lrc) return lrc;
  char a[MX_SHAPE_BUF];
  if (t->ndim == 0) return mx_err(MX_EINVAL, "index: cannot index a 0-d tensor");
  if (i < 0 || i >= t->shape[0])
    return mx_err(MX_EINVAL, "index: index %lld out of range for shape %s", (long long)i,
                  mx_shape_str(a, t->ndim, t->shape));
  size_t row = (size_t)(t->size / t->shape[0]) * mx_dtype_size(t->dtype);
  return make_view(t, t->ndim - 1, t->shape + 1, t->offset + (size_t)i * row, out);
}

/* A copy between two CPU devices (cpu(i) -> cpu(j)) is an engine op: it waits for the
 * source's writers and the destination's users in the queue, not in the caller, so a
 * transfer overlaps the compute queued before it (model/data parallelism). */
typedef struct { mx_tensor *dst, *src; } cpu_copy_arg;
static int cpu_copy_run(void *p) {
  cpu_copy_arg *c = p; /* the engine holds both tensors while the op is queued */
  if (c->dst->dtype == c->src->dtype) memmove(mx_ptr(c->dst), mx_ptr(c->src), mx_nbytes(c->src));
  else mx_convert(mx_ptr(c->dst), c->dst->dtype, mx_ptr(c->src), c->src->dtype, c->src->size);
  return MX_OK;
}

int mx_tensor_copy_into(mx_tensor *dst, mx_tensor *src) {
  if (MX_UNLIKELY(dst->stype || src->stype)) return sparse_copy_into(dst, src);
  int lrc = mx_tensor_make_plain(src);
  if (!lrc) lrc = mx_tensor_make_plain(dst);
  if (lrc) return lrc;
  mx_storage_touch(dst->storage);
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (dst->size != src->size || dst->ndim != src->ndim ||
      memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)dst->ndim) != 0)
    return mx_err(MX_EINVAL, "copy: shape mismatch, destination %s vs source %s",
                  mx_shape_str(a, dst->ndim, dst->shape), mx_shape_str(b, src->ndim, src->shape));
  if (mx_dev(dst) == MX_CPU && mx_dev(src) == MX_CPU &&
      dst->storage->dev_id != src->storage->dev_id && dst->storage != src->storage) {
    cpu_copy_arg *c = malloc(sizeof *c);
    if (!c) return mx_err(MX_ENOMEM, "copy: out of host memory");
    c->dst = dst;
    c->src = src;
    return mx_engine_push_fn("copy", cpu_copy_run, c, free, 1, &src, 1, &dst, MX_CPU,
                             dst->storage->dev_id, NULL);
  }
  int rc0 = mx_engine_wait_storage(src->storage, true);
  if (!rc0) rc0 = mx_engine_wait_storage(dst->storage, false);
  if (rc0) return rc0;
  int dd = mx_dev(dst), sd = mx_dev(src);
  if (dd == MX_CPU && sd == MX_CPU) {
    /* two views of one storage may overlap (x[{1,3}] = x[{2,4}]): memmove, never memcpy */
    if (dst->dtype == src->dtype) memmove(mx_ptr(dst), mx_ptr(src), mx_nbytes(src));
    else mx_convert(mx_ptr(dst), dst->dtype, mx_ptr(src), src->dtype, src->size);
    return MX_OK;
  }
  /* Cross-device copies move raw bytes; a dtype change happens on the host side. */
  const mx_device_backend *g = mx_backend(MX_GPU);
  if (!g) return mx_err(MX_EDEVICE, "copy: GPU backend unavailable: %s", mx_gpu_status());
  if (dst->dtype != src->dtype) {
    mx_tensor *tmp;
    int rc;
    if (sd != MX_CPU) { /* gpu -> cpu (convert on host) -> dst */
      if ((rc = mx_tensor_to(src, MX_CPU, 0, -1, &tmp))) return rc;
      rc = mx_tensor_copy_into(dst, tmp);
    } else { /* cpu src: convert on host, then upload */
      if ((rc = mx_tensor_to(src, MX_CPU, 0, dst->dtype, &tmp))) return rc;
      rc = mx_tensor_copy_into(dst, tmp);
    }
    mx_tensor_release(tmp);
    return rc;
  }
  int kind = sd == MX_CPU ? 0 : dd == MX_CPU ? 1 : 2;
  int dev = kind == 1 ? src->storage->dev_id : dst->storage->dev_id;
  return g->copy(mx_ptr(dst), mx_ptr(src), mx_nbytes(src), kind, dev);
}

int mx_tensor_to(mx_tensor *src, int dev_type, int dev_id, int dtype, mx_tensor **out) {
  int rc;
  if (dtype < 0) dtype = src->dtype;
  if (!mx_dtype_valid(dtype)) return mx_err(MX_EINVAL, "to: unknown dtype code %d", dtype);
  if ((rc = mx_device_check("to", dev_type, dev_id))) return rc;
  mx_tensor *t;
  if (src->stype) rc = mx_sparse_new_empty(mx_session_current(), src->stype, src->ndim,
                                           src->shape, dtype, dev_type, dev_id, &t);
  else rc = mx_tensor_new(src->ndim, src->shape, dtype, dev_type, dev_id, &t);
  if (rc) return rc;
  if ((rc = mx_tensor_copy_into(t, src))) { mx_tensor_release(t); return rc; }
  *out = t;
  return MX_OK;
}

/* The host-access prologue of the element readers and writers: a cpu tensor, in row-major
 * (converted in place), its pending writes (write: every pending op) done. */
static int host_access(const char *what, mx_tensor *t, bool write) {
  if (t->stype) return not_sparse(what, t);
  if (mx_dev(t) != MX_CPU)
    return mx_err(MX_EINVAL, "%s: tensor is on gpu(%d); copy it to the cpu first", what,
                  t->storage->dev_id);
  int rc = mx_tensor_make_plain(t);
  if (write) mx_storage_touch(t->storage);
  return rc ? rc : mx_engine_wait_storage(t->storage, !write);
}

int mx_tensor_get_f64(mx_tensor *t, int64_t i, double *out) {
  int rc = host_access("item", t, false);
  if (rc) return rc;
  if (i < 0 || i >= t->size)
    return mx_err(MX_EINVAL, "item: element %lld out of range (size %lld)", (long long)i,
                  (long long)t->size);
  *out = mx_load_f64(mx_ptr(t), t->dtype, i);
  return MX_OK;
}

int mx_tensor_get_i64(mx_tensor *t, int64_t i, int64_t *out) {
  int rc = host_access("item", t, false);
  if (rc) return rc;
  if (i < 0 || i >= t->size)
    return mx_err(MX_EINVAL, "item: element %lld out of range (size %lld)", (long long)i,
                  (long long)t->size);
  void *p = mx_ptr(t);
  *out = t->dtype == MX_I64 ? ((int64_t *)p)[i] : (int64_t)mx_load_f64(p, t->dtype, i);
  return MX_OK;
}

int mx_tensor_set_from_f64(mx_tensor *t, const double *src, int64_t n) {
  int rc = host_access("array", t, true);
  if (rc) return rc;
  if (n != t->size)
    return mx_err(MX_EINVAL, "array: %lld values given for a tensor of size %lld",
                  (long long)n, (long long)t->size);
  mx_convert(mx_ptr(t), t->dtype, src, MX_F64, n);
  return MX_OK;
}

int mx_tensor_get_all_f64(mx_tensor *t, double *dst, int64_t n) {
  int rc = host_access("totable", t, false);
  if (rc) return rc;
  if (n < t->size)
    return mx_err(MX_EINVAL, "totable: buffer of %lld for a tensor of size %lld",
                  (long long)n, (long long)t->size);
  mx_convert(dst, MX_F64, mx_ptr(t), t->dtype, t->size);
  return MX_OK;
}

void mx_desc_from(mx_desc *d, const mx_tensor *t) {
  d->ndim = t->ndim;
  for (int i = 0; i < t->ndim; i++) d->shape[i] = t->shape[i];
  d->dtype = t->dtype;
  d->layout = t->layout ? t->layout->code : MX_LAYOUT_ROW_MAJOR;
  d->dev_type = t->storage->dev_type;
  d->dev_id = t->storage->dev_id;
}

/* ---- row-major values of tensors in a backend layout -------------------------------- */

static pthread_mutex_t plain_mu = PTHREAD_MUTEX_INITIALIZER;

int mx_tensor_plain(mx_tensor *t, mx_tensor **out) {
  if (!t->layout) {
    mx_tensor_retain(t);
    *out = t;
    return MX_OK;
  }
  int rc = mx_engine_wait_storage(t->storage, true);
  if (rc) return rc;
  mx_tensor *p;
  if ((rc = mx_tensor_new(t->ndim, t->shape, t->dtype, MX_CPU, 0, &p))) return rc;
  if ((rc = t->layout->to_row_major(t, p))) {
    mx_tensor_release(p);
    return rc;
  }
  *out = p;
  return MX_OK;
}

int mx_tensor_make_plain_slow(mx_tensor *t) {
  pthread_mutex_lock(&plain_mu);
  int rc = MX_OK;
  if (t->layout) { /* re-checked under the lock: another reader may have converted it */
    /* every pending op, readers too: a queued kernel that reads t in its layout must
     * not see the storage swapped under it */
    mx_tensor *p = NULL;
    rc = mx_engine_wait_storage(t->storage, false);
    if (!rc)
      rc = mx_tensor_new_laid(t->ndim, t->shape, t->dtype, (size_t)t->size * mx_dtype_size(t->dtype),
                              NULL, NULL, &p);
    if (!rc) rc = t->layout->to_row_major(t, p);
    if (!rc) { /* p takes t's old storage and descriptor, and frees them */
      mx_storage *s = t->storage;
      p->storage->version = s->version; /* the same values */
      t->storage = p->storage;
      t->offset = 0;
      p->storage = s;
      p->layout = t->layout;
      p->layout_md = t->layout_md;
      t->layout_md = NULL;
      t->layout = NULL;
    }
    mx_tensor_release(p);
  }
  pthread_mutex_unlock(&plain_mu);
  return rc;
}
