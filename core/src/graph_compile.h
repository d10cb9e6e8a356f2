/* graph_compile.h — a graph compiled for one input signature into a flat list of steps
 * (a kernel call with its context, parameters and tensors fixed; a fused elementwise
 * program; a dtype cast; a layout conversion; a copy) and one block of memory holding
 * every intermediate, shared by liveness (graph_compile.c). What mx_op_invoke decides per
 * call (the backend, the inputs' conversions, the output layouts a oneDNN kernel chooses,
 * inference's hand-off to the kernel) is decided once; constants a kernel reads in a
 * layout of its own (a convolution's weights) are converted once, at build. The C
 * inference runtime (runtime*.c) and the graph executor (graph_exec.c: hybridize, mx.sym)
 * run CPU graphs through it. Not installed. */
#ifndef MX_GRAPH_COMPILE_H
#define MX_GRAPH_COMPILE_H

#include "graph.h"

/* One thing a run does, in order. */
enum { MX_STEP_KERNEL, MX_STEP_FUSED, MX_STEP_CAST, MX_STEP_PLAIN, MX_STEP_COPY };
typedef struct mx_plan_step {
  int kind;
  int node;               /* the graph node it belongs to (errors, partial runs) */
  mx_kernel_fn fn;        /* KERNEL */
  mx_kctx kctx;
  const void *params;     /* the node's params (its graph's copy) */
  bool rng;               /* reserve random counters per run (kctx.info.rng_draws) */
  const void *prog;       /* FUSED: the node's program */
  mx_fused_fn fused;      /* FUSED: the interpreter registered for the CPU */
  int nin, nout;          /* nout: with the auxiliary inputs a kernel writes through */
  int ioff;               /* its lists' place in the plan's pool (inputs, then outputs) */
  mx_tensor **in, **out;  /* into the plan's pointer pool */
} mx_plan_step;

/* A plan for one input signature: everything a run touches. Its tensors are private to
 * it (no engine ordering inside a run); the graph's constants are only read. */
typedef struct mx_plan {
  mx_graph *g;            /* the graph it was built from (not owned) */
  mx_desc *ent;           /* every entry's descriptor */
  int nsteps;
  mx_plan_step *steps;
  int *node_step;         /* operator node j (0-based among ops) -> its first step; [nops] */
  int *op_node;           /* operator node j -> graph node id */
  int nops;
  mx_tensor **pool;       /* the steps' tensor lists */
  int ntensors;
  mx_tensor **owned;      /* tensors the plan holds a reference to (released at free) */
  int nin;
  mx_tensor **in;         /* input k's tensor (own storage; binding swaps its data) */
  mx_tensor **out;        /* output k's tensor (own storage, row-major) */
  void **in_buf, **out_buf; /* their own buffers (restored on unbind and at free) */
  mx_storage *arena;      /* the planned buffers: one block (data NULL until given when
                           * built without MX_PLAN_ARENA: mx_plan_arena_bytes) */
  int64_t planned;
  int nslots;             /* buffers the liveness pass placed in the arena */
  int npacked;            /* constants converted at build into a kernel's own layout */
} mx_plan;

/* Build options: MX_PLAN_ARENA allocates the arena at build (else the caller hands one
 * in before each run: arena->data); MX_PLAN_BOUND gives the inputs and outputs no
 * buffers of their own (the caller points their storage at each run's tensors). */
enum { MX_PLAN_ARENA = 1, MX_PLAN_BOUND = 2 };

/* Builds p for g at input descriptors in[nin] of the variables in_node[nin] (the
 * variables without a value; the others are constants), charging the plan's memory to
 * se. CPU graphs only. On failure p is left empty (mx_plan_free-able) and the message
 * names the node (prefix `who`). Runs kernels' out-layout and prepack functions, which
 * take the thread's team cap (mx_threads_set_local_cap) as the runs' own. */
int mx_plan_build(const mx_graph *g, int nin, const int *in_node, const mx_desc *in, int flags,
                  mx_session *se, const char *who, mx_plan *p);
void mx_plan_free(mx_plan *p);
/* Runs one step: the kernel (with its decline fallback), the fused program, the cast,
 * the conversion or the copy. */
int mx_plan_step_run(mx_plan_step *st);
/* Runs steps [first, end), prefixing a failure with `who`, a format given the failing
 * node's name and its op's (two strings: "mx_rt: node '%s' (%s)"). */
int mx_plan_run(mx_plan *p, int first, int end, const char *who);

#endif
