/* libmx_mpi — dist_sync collectives over Open MPI (docs/distributed.md
 * "dist_sync").
 *
 * A small C API that lua/mx/kvstore/dist_sync.lua ffi.loads from
 * build/lib/mx/libmx_mpi.so only when a dist_sync kvstore is created; libmx itself
 * never links MPI. Launch with mpirun (tools/dist/mxrun wraps the options).
 *
 * Deadlines. Every collective is nonblocking MPI (MPI_Iallreduce / MPI_Ibcast /
 * MPI_Ibarrier) polled with MPI_Test until done, a peer is known dead, or its deadline
 * (seconds; <= 0 means the default: $MX_KV_TIMEOUT or 30) has passed. Nothing blocks
 * forever.
 *
 * Liveness. mx_mpi_init builds a side channel: one TCP connection between every pair
 * of ranks (loopback when all ranks share a host, else the address of each rank's
 * host name or $MX_KV_HOST). The listening sockets are closed once the mesh is up, so
 * no port stays bound. A monitor thread polls the connections and sends a heartbeat
 * byte every second: end-of-file or a reset (a process that died, even by SIGKILL,
 * has its sockets closed by the kernel) or silence longer than
 * $MX_KV_HEARTBEAT_TIMEOUT (default 8 s: a stopped or unreachable peer) marks that
 * rank dead. The monitor prints "mx dist_sync: rank R: rank D died ..." to stderr at
 * once, every collective in progress or started later fails with a message naming
 * rank D, and when the process is still alive $MX_KV_FAILURE_EXIT seconds later
 * (default 5; 0: never) the monitor ends it with _exit(75), so survivors never hang
 * in compute either. Open MPI's mpirun kills the whole job as soon as a rank dies
 * unless it runs with --enable-recovery; with that option the survivors report the
 * dead rank themselves.
 *
 * Algorithm. Before MPI_Init, OMPI_MCA_coll_libnbc_iallreduce_algorithm defaults to 1
 * (libnbc's ring: the binomial default for in-place on few ranks was 1.5-2x slower);
 * $MX_KV_TRACE=1 prints one stderr line per allreduce (rank, start, end) for
 * tools/dist/trace_skew.py.
 *
 * Failure is final: after a dead peer, a timeout or an MPI error every later call
 * returns MX_MPI_EFAILED (the communicator cannot be trusted), and the exit hook
 * skips MPI_Finalize (it would wait for the dead rank).
 *
 * Threads. Any thread may call any function; calls are serialised by one lock, so
 * collectives run in the order they are called. dist_sync.lua pushes every collective
 * through the engine writing one token tensor, which fixes that order to the push
 * order on every rank.
 *
 * Agreement. Every collective starts with an allgather of what each rank is about to
 * do (kind, root, dtype, tensors, elements, a hash of their shapes). Ranks that
 * disagree (a key initialised with another shape on one rank, a wrong-shaped value, calls
 * out of step, a rank whose push failed before its collective: kind 3 "stopped") never
 * start mismatched MPI calls (MPI_ERR_TRUNCATE, an abort, a hang): a second allgather of
 * the shapes, key names and messages gives every rank the same error, naming the key and
 * each rank's shape, and MX_MPI_EMISMATCH. Cost: one 64-byte allgather per collective.
 *
 * Errors: functions return MX_MPI_OK (0) or a negative code; mx_mpi_last_error() is
 * the calling thread's message (naming the collective, the rank, the deadline).
 */
#ifndef MX_MPI_H
#define MX_MPI_H

#include <stdint.h>

#include "mx.h"

/* lua/mx/kvstore/dist_sync.lua ffi.cdefs the region between the markers (no macros there) */
/* MX_FFI_BEGIN */
enum {
  MX_MPI_OK = 0,
  MX_MPI_EINVAL = -1,   /* bad argument (dtype, count, root) */
  MX_MPI_ENOMEM = -2,
  MX_MPI_ETIMEOUT = -3, /* deadline passed */
  MX_MPI_EPEER = -4,    /* a rank died (message names it) */
  MX_MPI_EMPI = -5,     /* MPI returned an error, or init failed */
  MX_MPI_EFAILED = -6,  /* an earlier failure made the communicator unusable */
  MX_MPI_EMISMATCH = -7 /* the ranks disagree on the collective (its kind, a key's shape,
                         * a rank that stopped before it): the same message on every
                         * rank, nothing ran, the communicator stays usable */
};

/* Initialises MPI (MPI_THREAD_SERIALIZED: every call holds one lock), duplicates
 * MPI_COMM_WORLD, builds the liveness mesh within timeout_s and registers an exit
 * hook that finalizes cleanly (a barrier under a deadline of max(timeout, 120 s) — a dead
 * peer still fails it at once —, goodbye on the side channel, MPI_Finalize).
 * Idempotent. */
int mx_mpi_init(double timeout_s);
/* Orderly shutdown (what the exit hook does); later calls fail. Idempotent. */
int mx_mpi_finalize(void);
int mx_mpi_rank(void);       /* -1 before init */
int mx_mpi_size(void);       /* 0 before init */
int mx_mpi_dead_rank(void);  /* the first rank found dead, -1 while none */
double mx_mpi_default_timeout(void);
const char *mx_mpi_last_error(void);

/* In-place sum over all ranks of count elements of dtype (MXNet codes: 0 float32,
 * 1 float64, 2 float16 — summed in float32 and rounded to nearest even per step —,
 * 4 int32, 6 int64). Same values on every rank; deterministic for a given size,
 * count and rank count. */
int mx_mpi_allreduce(void *buf, int64_t count, int dtype, double timeout_s);
/* root's count elements of dtype to every rank (any dtype: bytes are moved). */
int mx_mpi_broadcast(void *buf, int64_t count, int dtype, int root, double timeout_s);
int mx_mpi_barrier(double timeout_s);

/* ---- engine work ----------------------------------------------------------------
 * A bucket: n CPU tensors of one dtype summed by one allreduce (packed into one
 * buffer the bucket owns when n > 1, in place when n == 1). Made once per key set and
 * pushed every step with
 *   mx_mpi_bucket_retain(b);
 *   mx_engine_push_fn("dist_sync.allreduce", mx_mpi_bucket_run, b, mx_mpi_bucket_release,
 *                     0, NULL, n + 1, tensors + token, MX_CPU, 0, NULL);
 * mx_mpi_bucket_run fails through mx_set_last_error (an asynchronous error on the
 * tensors). The bucket retains its tensors; refcounted (new returns one reference). */
typedef struct mx_mpi_bucket mx_mpi_bucket;
int mx_mpi_bucket_new(int n, mx_tensor *const *tensors, double timeout_s,
                      const char *labels, mx_mpi_bucket **out);
void mx_mpi_bucket_retain(void *bucket);
void mx_mpi_bucket_release(void *bucket);
int mx_mpi_bucket_run(void *bucket);
/* Engine functions for one tensor: broadcast from root / barrier (arg: a
 * mx_mpi_job from mx_mpi_job_new, released by the engine's free_arg
 * mx_mpi_job_free). kind: 0 allreduce, 1 broadcast, 2 barrier, 3 stop: this rank
 * failed before its next collective (text says why); the peers' next collective fails
 * with the same message, and so does this job. text: the key's name for 0/1 (or NULL).
 * labels (buckets): the tensors' key names, '\n'-separated (or NULL). */
typedef struct mx_mpi_job mx_mpi_job;
int mx_mpi_job_new(int kind, mx_tensor *t, int root, double timeout_s, const char *text,
                   mx_mpi_job **out);
int mx_mpi_job_run(void *job);
void mx_mpi_job_free(void *job);

/* Bytes moved and seconds spent inside collectives since start (communication time
 * per step for the benchmarks). */
void mx_mpi_stats(int64_t *bytes, double *seconds, int64_t *calls);
/* MX_FFI_END */

#endif
