/* graph_exec.h — the graph executor's state, shared by graph_exec.c (building a graph
 * for one input signature, its runs) and graph_exec_const.c (its constants: their
 * versions, the rebuild when one changed, inputs frozen into constants). */
#ifndef MX_GRAPH_EXEC_H
#define MX_GRAPH_EXEC_H

#include "graph.h"
#include "graph_compile.h"

#include <pthread.h>
#include <stdatomic.h>

struct mx_graph_exec {
  atomic_int refs;        /* the handle + each queued run */
  mx_graph *g;            /* a private copy */
  int flags;
  int nin;                /* inputs: the variables without a value, in node order */
  int *in_node;
  bool *in_aux;           /* written in place by an op (BatchNorm's moving statistics) */
  mx_desc *ent;           /* every entry's descriptor */
  int *slot;              /* entry -> planned buffer, -1: not planned */
  int64_t *slot_bytes;
  int nslots;
  int64_t planned;
  int *last;              /* entry -> last node reading it (dynamic entries' release) */
  int *head_of;           /* entry -> its first head, -1 */
  int dev_type, dev_id;
  mx_tensor **slots;      /* static_alloc: the buffers kept between runs (else NULL) */
  bool compiled;          /* plan holds the graph's compiled plan (CPU): slot 0 is its
                           * arena, and the node path allocates every entry itself */
  mx_plan plan;
  pthread_mutex_t plan_mu; /* a plan's bound tensors are one run's at a time */
  atomic_int slots_bad;   /* a run failed: its kept buffers carry the asynchronous error
                           * (the engine keeps it on what the run wrote), so the next run
                           * takes new ones instead of inheriting the old failure */
  /* -- what stays when a changed constant makes the executor rebuild (exec_refresh) -- */
  mx_graph *orig;         /* the graph as given (NULL: it has no constants) */
  int nconst;
  mx_tensor **cval;       /* its constants, and their storages' versions at the build */
  uint32_t *cver;
  mx_desc *in_desc;       /* the input signature */
  mx_tensor *seq;         /* written by every run: the runs of one executor are ordered */
  mx_tensor *seq_prev;    /* the seq a failed run left carrying its error (replaced, so
                           * later runs do not inherit it; exec_refresh still waits on it) */
  atomic_int seq_bad;     /* a run failed or was skipped: seq carries the error */
  /* frozen inputs (mx_graph_exec_new_frozen): the runs give nfull inputs, of which the
   * frozen ones are constants of orig */
  int nfull;              /* 0: none frozen */
  int *fmap;              /* given input k -> the executor's input, -1: frozen */
  int *fconst;            /* frozen input k -> its index in cval */
  int *fnode;             /* frozen input k -> its node in orig */
};

/* A copy of src's nodes and heads (NULL when out of memory). */
mx_graph *mx_graph_exec_clone_graph(const mx_graph *src);
/* The executor of src without the tracking of its constants. */
int mx_graph_exec_make(const mx_graph *src, int nin, const mx_desc *in, int flags,
                       mx_graph_exec **out);
void mx_graph_exec_unref(mx_graph_exec *e);
/* A run of the executor as built (mx_graph_exec_run checks the constants first). */
int mx_graph_exec_run_now(mx_graph_exec *e, int nin, mx_tensor *const *in, int nout,
                          mx_tensor **out);

#endif
