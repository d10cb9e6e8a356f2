/* mpi_work.c — libmx_mpi's engine work (mx_mpi.h "engine work"): buckets of tensors summed
 * by one allreduce, and one-tensor jobs (broadcast, allreduce, barrier, stop), each run by
 * the engine through mx_mpi_run, which first agrees with every rank on what is reduced. */
#include "mpi_internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static char *dup_text(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

struct mx_mpi_bucket {
  atomic_int refs;
  int n, dtype;
  double timeout;
  int64_t total;
  mx_tensor **t;
  int64_t *count;
  char *labels;
  void *pack; /* n > 1: the fused buffer */
};

static int summable(int dtype) {
  return dtype == 0 || dtype == 1 || dtype == 2 || dtype == 4 || dtype == 6;
}

int mx_mpi_bucket_new(int n, mx_tensor *const *tensors, double timeout_s, const char *labels,
                      mx_mpi_bucket **out) {
  *out = NULL;
  if (n < 1) return mx_mpi_fail(MX_MPI_EINVAL, "dist_sync bucket: no tensors");
  mx_mpi_bucket *b = calloc(1, sizeof *b);
  if (!b) return mx_mpi_fail(MX_MPI_ENOMEM, "dist_sync bucket: out of memory");
  atomic_init(&b->refs, 1);
  b->t = calloc((size_t)n, sizeof *b->t);
  b->count = calloc((size_t)n, sizeof *b->count);
  if (!b->t || !b->count || (labels && !(b->labels = dup_text(labels)))) goto oom;
  b->n = n;
  b->dtype = mx_tensor_dtype(tensors[0]);
  b->timeout = timeout_s;
  if (!summable(b->dtype)) {
    int d = b->dtype;
    mx_mpi_bucket_release(b);
    return mx_mpi_fail(MX_MPI_EINVAL, "dist_sync bucket: dtype %s is not summable",
                       mx_dtype_name(d) ? mx_dtype_name(d) : "?");
  }
  for (int i = 0; i < n; i++) {
    if (mx_tensor_dtype(tensors[i]) != b->dtype || mx_tensor_dev_type(tensors[i]) != 1) {
      mx_mpi_bucket_release(b);
      return mx_mpi_fail(MX_MPI_EINVAL, "dist_sync bucket: tensor %d is not a CPU tensor of "
                         "the bucket's dtype", i);
    }
    mx_tensor_retain(tensors[i]);
    b->t[i] = tensors[i];
    b->count[i] = mx_tensor_size(tensors[i]);
    b->total += b->count[i];
  }
  if (n > 1 && !(b->pack = malloc((size_t)b->total * mx_dtype_size(b->dtype) + 1))) goto oom;
  *out = b;
  return MX_MPI_OK;
oom:
  mx_mpi_bucket_release(b);
  return mx_mpi_fail(MX_MPI_ENOMEM, "dist_sync bucket: out of memory");
}

void mx_mpi_bucket_retain(void *p) {
  mx_mpi_bucket *b = p;
  atomic_fetch_add(&b->refs, 1);
}

void mx_mpi_bucket_release(void *p) {
  mx_mpi_bucket *b = p;
  if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
  for (int i = 0; i < b->n; i++)
    if (b->t && b->t[i]) mx_tensor_release(b->t[i]);
  free(b->t);
  free(b->count);
  free(b->labels);
  free(b->pack);
  free(b);
}

int mx_mpi_bucket_run(void *p) {
  mx_mpi_bucket *b = p;
  size_t esz = mx_dtype_size(b->dtype);
  mx_mpi_what w = {.kind = 0, .dtype = b->dtype, .n = b->n, .count = b->total, .t = b->t,
                   .labels = b->labels};
  int rc;
  if (b->n == 1) {
    rc = mx_mpi_run(mx_tensor_data_nowait(b->t[0]), &w, b->timeout);
  } else {
    char *q = b->pack;
    for (int i = 0; i < b->n; i++) {
      memcpy(q, mx_tensor_data_nowait(b->t[i]), (size_t)b->count[i] * esz);
      q += b->count[i] * (int64_t)esz;
    }
    rc = mx_mpi_run(b->pack, &w, b->timeout);
    q = b->pack;
    for (int i = 0; i < b->n && rc == 0; i++) {
      memcpy(mx_tensor_data_nowait(b->t[i]), q, (size_t)b->count[i] * esz);
      q += b->count[i] * (int64_t)esz;
    }
  }
  if (rc) mx_set_last_error(mx_mpi_last_error());
  return rc;
}

struct mx_mpi_job {
  int kind, root;
  double timeout;
  mx_tensor *t;
  char *text;
};

int mx_mpi_job_new(int kind, mx_tensor *t, int root, double timeout_s, const char *text,
                   mx_mpi_job **out) {
  *out = NULL;
  if (kind < 0 || kind > 3) return mx_mpi_fail(MX_MPI_EINVAL, "dist_sync job: kind %d", kind);
  if ((kind == 0 || kind == 1) && !t)
    return mx_mpi_fail(MX_MPI_EINVAL, "dist_sync job: a tensor is needed");
  if (t && mx_tensor_dev_type(t) != 1)
    return mx_mpi_fail(MX_MPI_EINVAL, "dist_sync job: a CPU tensor is needed");
  mx_mpi_job *j = calloc(1, sizeof *j);
  if (!j || (text && !(j->text = dup_text(text)))) {
    free(j);
    return mx_mpi_fail(MX_MPI_ENOMEM, "dist_sync job: out of memory");
  }
  j->kind = kind;
  j->root = root;
  j->timeout = timeout_s;
  j->t = t;
  if (t) mx_tensor_retain(t);
  *out = j;
  return MX_MPI_OK;
}

void mx_mpi_job_free(void *p) {
  mx_mpi_job *j = p;
  if (!j) return;
  if (j->t) mx_tensor_release(j->t);
  free(j->text);
  free(j);
}

int mx_mpi_job_run(void *p) {
  mx_mpi_job *j = p;
  mx_mpi_what w = {.kind = j->kind, .root = j->root};
  void *d = NULL;
  if (j->t) {
    d = mx_tensor_data_nowait(j->t);
    w.n = 1;
    w.t = &j->t;
    w.count = mx_tensor_size(j->t);
    w.dtype = mx_tensor_dtype(j->t);
  }
  if (j->kind == 3) w.msg = j->text; else w.labels = j->text;
  int rc = mx_mpi_run(d, &w, j->timeout);
  if (rc) mx_set_last_error(mx_mpi_last_error());
  return rc;
}
