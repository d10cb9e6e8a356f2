/* runtime.h — the inference runtime's structs, shared by runtime.c (models, contexts, the
 * public API), runtime_plan.c (a context's plan: steps and buffers, and the run loop)
 * and runtime_predict.c (MXNet's c_predict_api on top). Not installed. */
#ifndef MX_RUNTIME_INTERNAL_H
#define MX_RUNTIME_INTERNAL_H

#include "graph_compile.h"
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

/* A context's plan for one input signature (graph_compile.h). */
typedef mx_plan rt_plan;

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
