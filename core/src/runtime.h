/* runtime.h — the inference runtime's structs, shared by runtime.c (models, contexts, the
 * public API), runtime_plan.c (a context's plan: steps and buffers, and the run loop)
 * and runtime_predict.c (MXNet's c_predict_api on top). Not installed. */
#ifndef MX_RUNTIME_INTERNAL_H
#define MX_RUNTIME_INTERNAL_H

#include "graph.h"
#include "mx_runtime.h"

struct mx_rt_model {
  atomic_int refs;        /* the caller's + one per context */
  mx_graph *g;            /* optimised; variables without a value are the inputs */
  mx_rt_options opt;      /* outputs/noutputs cleared (already applied to g) */
  int nin;
  int *in_node;           /* input k's variable node in g */
  char **in_name;
  mx_desc *in_desc;       /* the creation signature */
  int nout;
  char **out_name;        /* MXNet-style output names ("fc1_output") */
  int nops;               /* operator nodes of g */
};

/* One thing a run does, in order. */
enum { RT_KERNEL, RT_FUSED, RT_CAST, RT_PLAIN, RT_COPY };
typedef struct rt_step {
  int kind;
  int node;               /* the graph node it belongs to (errors, partial runs) */
  mx_kernel_fn fn;        /* RT_KERNEL */
  mx_kctx kctx;
  const void *params;     /* the node's params (its graph's copy) */
  bool rng;               /* reserve random counters per run (kctx.info.rng_draws) */
  const void *prog;       /* RT_FUSED: the node's program */
  mx_fused_fn fused;      /* RT_FUSED: the interpreter registered for the CPU */
  int nin, nout;          /* nout: with the auxiliary inputs a kernel writes through */
  int ioff;               /* its lists' place in the plan's pool (inputs, then outputs) */
  mx_tensor **in, **out;  /* into the plan's pointer pool */
} rt_step;

/* A context's plan for one input signature: everything a run touches. */
typedef struct rt_plan {
  mx_graph *g;            /* the context's copy of the model graph (shapes resolved) */
  mx_desc *ent;           /* every entry's descriptor */
  int nsteps;
  rt_step *steps;
  int *node_step;         /* operator node j (0-based among ops) -> its first step; [nops] */
  int *op_node;           /* operator node j -> graph node id */
  int nops;
  mx_tensor **pool;       /* the steps' tensor lists */
  int ntensors;
  mx_tensor **owned;      /* tensors the plan holds a reference to (released at free) */
  mx_tensor **in;         /* input k's tensor (own storage; binding swaps its data) */
  mx_tensor **out;        /* output k's tensor (own storage, row-major) */
  void **in_buf, **out_buf; /* their own buffers (restored on unbind) */
  mx_storage *arena;      /* the planned buffers: one block */
  int64_t planned;
} rt_plan;

struct mx_rt_ctx {
  mx_rt_model *m;
  rt_plan p;
  mx_rt_monitor_fn monitor;
  void *monitor_user;
  bool monitor_inputs;    /* the monitor sees each node's inputs too (MXNet's monitor_all) */
};

/* runtime.c: a model of graph g (taken, freed on failure too) whose variables are bound
 * to the parameter arrays by name (borrowed; narr 0: g's variables carry their values):
 * what every mx_rt_model_* entry point ends in. */
int rt_model_make(mx_graph *g, int narr, mx_tensor **arrays, char **names, int ninputs,
                  const mx_rt_input *inputs, const mx_rt_options *opt, mx_rt_model **out);

/* runtime_plan.c: builds p for the model's graph at input descriptors in[m->nin]. On
 * failure p is left empty (rt_plan_free-able) and the message names the node. */
int rt_plan_build(const mx_rt_model *m, const mx_desc *in, rt_plan *p);
void rt_plan_free(rt_plan *p);
/* MXNet's name of entry (node, k): a variable's name, "<node>_output" for a node of one
 * output, "<node>_output<k>" otherwise. */
void rt_entry_name(const mx_graph *g, int node, int k, char *buf, size_t cap);
/* Runs steps of operator nodes [first, last) (0 .. p->nops). */
int rt_plan_run(mx_rt_ctx *c, int first, int last);

#endif
