/* mpi_internal.h — what mpi.c (MPI, the liveness mesh, the agreement) and mpi_work.c (the
 * engine work: buckets, jobs) share. Not installed. */
#ifndef MX_MPI_INTERNAL_H
#define MX_MPI_INTERNAL_H

#include "mx_mpi.h"

/* One collective as this rank sees it; every rank's must agree before it runs (mpi.c). */
typedef struct mx_mpi_what {
  int kind;             /* 0 allreduce, 1 broadcast, 2 barrier, 3 this rank stopped */
  int root, dtype;      /* broadcast root; element dtype (MXNet code) */
  int n;                /* tensors described (0: a raw buffer of count elements) */
  int64_t count;        /* elements in all */
  mx_tensor *const *t;  /* the n tensors (their shapes are compared) */
  const char *labels;   /* their key names, '\n'-separated, or NULL */
  const char *msg;      /* kind 3: why this rank stopped */
} mx_mpi_what;

/* Agrees on w with every rank, then runs it on buf (packed tensors or a raw buffer).
 * Disagreement: MX_MPI_EMISMATCH with the same message on every rank; nothing ran. */
int mx_mpi_run(void *buf, const mx_mpi_what *w, double timeout_s);
/* Sets the calling thread's message (mx_mpi_last_error) and returns code. */
int mx_mpi_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
