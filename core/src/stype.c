/* stype.c — sparse tensors from the outside (mx.h "sparse storage"): building one from
 * its parts (checked, then put in canonical order), zeros, and reading its parts back.
 * The handle and its parts' lifetime are tensor.c's; ops on sparse tensors are kernels
 * like any other (kernels/ref/sparse.c), chosen by dispatch from the op table's
 * storage-type entries. */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

static const char *sname(int stype) {
  return stype == MX_STYPE_ROW_SPARSE ? "row_sparse" : stype == MX_STYPE_CSR ? "csr" : "default";
}

/* A private host copy of part p as dtype (its pending writes waited for: copy_into on
 * one device is synchronous). */
static int host_copy(mx_tensor *p, int dtype, mx_tensor **out) {
  *out = NULL;
  if (p->stype) return mx_err(MX_EINVAL, "sparse: a part must be a dense tensor");
  if (mx_dev(p) != MX_CPU)
    return mx_err(MX_EDEVICE, "sparse: parts must be on the cpu (sparse storage is cpu only)");
  return mx_tensor_to(p, MX_CPU, p->storage->dev_id, dtype, out);
}

typedef struct ent { int64_t key; int64_t pos; } ent;
static int ent_cmp(const void *a, const void *b) {
  const ent *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Sorts the n entries keyed by keys[first..first+n) (their value blocks of `row` elements
 * at vals) and sums duplicates: writes the unique keys and blocks to okeys/ovals from
 * slot 0; returns how many. Stable, so a run that is already canonical is copied. */
static int64_t canon_run(const int64_t *keys, const char *vals, int64_t first, int64_t n,
                         int64_t row, int dtype, ent *scratch, int64_t *okeys, char *ovals) {
  size_t es = mx_dtype_size(dtype), rb = (size_t)row * es;
  for (int64_t i = 0; i < n; i++) {
    scratch[i].key = keys[first + i];
    scratch[i].pos = first + i;
  }
  qsort(scratch, (size_t)n, sizeof *scratch, ent_cmp);
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++) {
    const char *src = vals + (size_t)scratch[i].pos * rb;
    if (m > 0 && okeys[m - 1] == scratch[i].key) { /* a duplicate: summed */
      char *dst = ovals + (size_t)(m - 1) * rb;
      for (int64_t e = 0; e < row; e++)
        mx_store_f64(dst, dtype, e, mx_load_f64(dst, dtype, e) + mx_load_f64(src, dtype, e));
      continue;
    }
    okeys[m] = scratch[i].key;
    memcpy(ovals + (size_t)m * rb, src, rb);
    m++;
  }
  return m;
}

static int from_rsp(int ndim, const int64_t *shape, mx_tensor *d, mx_tensor *idx,
                    mx_tensor *t) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  int64_t nnr = idx->size;
  if (idx->ndim != 1)
    return mx_err(MX_EINVAL, "row_sparse_array: indices must be 1-d, got shape %s",
                  mx_shape_str(a, idx->ndim, idx->shape));
  int64_t want[MX_MAX_DIM];
  memcpy(want, shape, sizeof(int64_t) * (size_t)ndim);
  want[0] = nnr;
  if (d->ndim != ndim || memcmp(d->shape, want, sizeof(int64_t) * (size_t)ndim) != 0)
    return mx_err(MX_EINVAL, "row_sparse_array: data has shape %s; %lld indices of a %s array "
                  "need data of shape %s", mx_shape_str(a, d->ndim, d->shape), (long long)nnr,
                  mx_shape_str(b, ndim, shape), mx_shape_str(b, ndim, want));
  const int64_t *ip = mx_ptr(idx);
  bool canon = true;
  for (int64_t i = 0; i < nnr; i++) {
    if (ip[i] < 0 || ip[i] >= shape[0])
      return mx_err(MX_EINVAL, "row_sparse_array: index %lld (position %lld) is outside the %lld "
                    "rows (0-based ids)", (long long)ip[i], (long long)i + 1, (long long)shape[0]);
    if (i > 0 && ip[i] <= ip[i - 1]) canon = false;
  }
  if (canon) {
    mx_sparse_set_parts(t, d, idx, NULL);
    return MX_OK;
  }
  int64_t row = mx_sparse_row_elems(t);
  ent *sc = malloc(sizeof *sc * (size_t)(nnr ? nnr : 1));
  int rc = sc ? mx_sparse_alloc_rsp(t, nnr) : mx_err(MX_ENOMEM, "row_sparse_array: out of memory");
  if (!rc) {
    int64_t m = canon_run(ip, mx_ptr(d), 0, nnr, row, d->dtype, sc, mx_sparse_index(t, 0),
                          mx_sparse_values(t));
    mx_sparse_trim(t, m);
  }
  free(sc);
  return rc;
}

static int from_csr(const int64_t *shape, mx_tensor *d, mx_tensor *ptr, mx_tensor *idx,
                    mx_tensor *t) {
  char a[MX_SHAPE_BUF];
  int64_t rows = shape[0], cols = shape[1], nnz = idx->size;
  if (ptr->ndim != 1 || ptr->size != rows + 1)
    return mx_err(MX_EINVAL, "csr_matrix: indptr has shape %s; %lld rows need %lld entries",
                  mx_shape_str(a, ptr->ndim, ptr->shape), (long long)rows, (long long)rows + 1);
  if (idx->ndim != 1 || d->ndim != 1 || d->size != nnz)
    return mx_err(MX_EINVAL, "csr_matrix: data and indices must be 1-d of one length, got %lld "
                  "values (%d-d) and %lld indices (%d-d)", (long long)d->size, d->ndim,
                  (long long)nnz, idx->ndim);
  const int64_t *pp = mx_ptr(ptr), *ip = mx_ptr(idx);
  if (pp[0] != 0)
    return mx_err(MX_EINVAL, "csr_matrix: indptr[1] must be 0, got %lld", (long long)pp[0]);
  if (pp[rows] != nnz)
    return mx_err(MX_EINVAL, "csr_matrix: the last indptr entry is %lld but there are %lld "
                  "values", (long long)pp[rows], (long long)nnz);
  bool canon = true;
  for (int64_t r = 0; r < rows; r++) {
    if (pp[r + 1] < pp[r])
      return mx_err(MX_EINVAL, "csr_matrix: indptr decreases at row %lld (%lld then %lld)",
                    (long long)r + 1, (long long)pp[r], (long long)pp[r + 1]);
    for (int64_t j = pp[r]; j < pp[r + 1]; j++) {
      if (ip[j] < 0 || ip[j] >= cols)
        return mx_err(MX_EINVAL, "csr_matrix: column index %lld (position %lld, row %lld) is "
                      "outside the %lld columns (0-based ids)", (long long)ip[j],
                      (long long)j + 1, (long long)r + 1, (long long)cols);
      if (j > pp[r] && ip[j] <= ip[j - 1]) canon = false;
    }
  }
  if (canon) {
    mx_sparse_set_parts(t, d, ptr, idx);
    return MX_OK;
  }
  ent *sc = malloc(sizeof *sc * (size_t)(nnz ? nnz : 1));
  int rc = sc ? mx_sparse_alloc_csr(t, nnz) : mx_err(MX_ENOMEM, "csr_matrix: out of memory");
  if (!rc) {
    int64_t *op = mx_sparse_index(t, 0), *oi = mx_sparse_index(t, 1), m = 0;
    char *ov = mx_sparse_values(t);
    size_t es = mx_dtype_size(d->dtype);
    op[0] = 0;
    for (int64_t r = 0; r < rows; r++) {
      m += canon_run(ip, mx_ptr(d), pp[r], pp[r + 1] - pp[r], 1, d->dtype, sc, oi + m,
                     ov + (size_t)m * es);
      op[r + 1] = m;
    }
    mx_sparse_trim(t, m);
  }
  free(sc);
  return rc;
}

int mx_sparse_from_parts(int stype, int ndim, const int64_t *shape, mx_tensor *data,
                         mx_tensor *aux0, mx_tensor *aux1, mx_tensor **out) {
  const char *who = stype == MX_STYPE_CSR ? "csr_matrix" : "row_sparse_array";
  if (!out || !shape || !data || !aux0 || (stype == MX_STYPE_CSR && !aux1))
    return mx_err(MX_EINVAL, "%s: a part is missing", who);
  int rc = mx_sparse_new_empty(mx_session_current(), stype, ndim, shape, data->dtype,
                               mx_dev(data), data->storage->dev_id, out);
  if (rc) return rc;
  mx_tensor *parts[3] = {NULL, NULL, NULL}, *given[3] = {data, aux0, aux1};
  for (int k = 0; k < 3 && !rc; k++) {
    if (!given[k] || (k == 2 && stype != MX_STYPE_CSR)) continue;
    if (k > 0 && (mx_dtype_is_float(given[k]->dtype) || given[k]->dtype == MX_BOOL))
      rc = mx_err(MX_EINVAL, "%s: %s must be integers, got %s", who,
                  stype == MX_STYPE_CSR && k == 1 ? "indptr" : "indices",
                  mx_dtype_name(given[k]->dtype));
    else if (given[k]->storage->dev_id != data->storage->dev_id)
      rc = mx_err(MX_EINVAL, "%s: the parts are on different devices", who);
    else rc = host_copy(given[k], k ? MX_I64 : data->dtype, &parts[k]);
  }
  if (!rc) rc = stype == MX_STYPE_CSR ? from_csr(shape, parts[0], parts[1], parts[2], *out)
                                      : from_rsp(ndim, shape, parts[0], parts[1], *out);
  for (int k = 0; k < 3; k++) mx_tensor_release(parts[k]);
  if (rc) {
    mx_tensor_release(*out);
    *out = NULL;
  }
  return rc;
}

int mx_sparse_zeros(int stype, int ndim, const int64_t *shape, int dtype, int dev_type,
                    int dev_id, mx_tensor **out) {
  int rc = mx_device_check("sparse.zeros", dev_type, dev_id);
  if (rc) return rc;
  if ((rc = mx_sparse_new_empty(mx_session_current(), stype, ndim, shape, dtype, dev_type,
                                dev_id, out)))
    return rc;
  rc = stype == MX_STYPE_CSR ? mx_sparse_alloc_csr(*out, 0) : mx_sparse_alloc_rsp(*out, 0);
  if (rc) {
    mx_tensor_release(*out);
    *out = NULL;
    return rc;
  }
  if (stype == MX_STYPE_CSR) memset(mx_sparse_index(*out, 0), 0, sizeof(int64_t) * (size_t)(shape[0] + 1));
  return MX_OK;
}

/* t's parts after its pending writes: its error if an op writing it failed. */
static int parts_ready(const char *who, mx_tensor *t) {
  if (!t) return mx_err(MX_EINVAL, "%s: tensor is NULL", who);
  if (!t->stype) return mx_err(MX_EINVAL, "%s: the tensor has default (dense) storage", who);
  int rc = mx_engine_wait_storage(t->storage, true);
  if (rc) return rc;
  if (!t->sparse->data)
    return mx_err(MX_EINVAL, "%s: the %s tensor has no values (the op writing it failed)", who,
                  sname(t->stype));
  return MX_OK;
}

int mx_sparse_part(mx_tensor *t, int k, mx_tensor **out) {
  int rc = parts_ready("sparse part", t);
  if (rc) return rc;
  int nparts = t->stype == MX_STYPE_CSR ? 3 : 2;
  if (k < 0 || k >= nparts)
    return mx_err(MX_EINVAL, "sparse part: a %s tensor has parts 0..%d, asked for %d",
                  sname(t->stype), nparts - 1, k);
  mx_tensor *p = k == 0 ? t->sparse->data : t->sparse->aux[k - 1];
  return mx_tensor_to(p, mx_dev(p), p->storage->dev_id, -1, out);
}

int mx_sparse_nnz(mx_tensor *t, int64_t *out) {
  int rc = parts_ready("nnz", t);
  if (!rc) *out = mx_sparse_count(t);
  return rc;
}
