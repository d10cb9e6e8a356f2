/* runtime_plan.c — a context's plan: the model graph compiled for the context's input
 * signature (graph_compile.c: steps of direct kernel calls and one block of memory), and
 * the run loop over it with the runtime's extras (partial runs, the monitor, the
 * model's thread cap). A run calls the kernels straight from the calling thread: no
 * engine push, no inference, no allocation of its own. The tensors of a plan are private
 * to its context, so no engine ordering is needed; the model's constants are only read. */
#include "runtime.h"
#include "session.h"

#include <stdlib.h>
#include <string.h>

int rt_plan_build(const mx_rt_model *m, const mx_desc *in, rt_plan *p) {
  return mx_plan_build(m->g, m->nin, m->in_node, in, MX_PLAN_ARENA, mx_session_default(), "mx_rt",
                       p);
}

void rt_plan_free(rt_plan *p) { mx_plan_free(p); }

void rt_entry_name(const mx_graph *g, int node, int k, char *buf, size_t cap) {
  const mx_graph_node *nd = &g->nodes[node];
  if (nd->op == MX_GRAPH_VAR) snprintf(buf, cap, "%s", nd->name);
  else if (nd->nout == 1) snprintf(buf, cap, "%s_output", nd->name);
  else snprintf(buf, cap, "%s_output%d", nd->name, k);
}

static void monitor_one(mx_rt_ctx *c, int node, int k, mx_tensor *t) {
  char name[600];
  mx_tensor *plain = NULL;
  if (mx_tensor_plain(t, &plain) != MX_OK) return; /* a copy when in a backend layout */
  rt_entry_name(c->p.g, node, k, name, sizeof name);
  c->monitor(name, plain->ndim, plain->shape, plain->dtype, mx_ptr(plain), c->monitor_user);
  mx_tensor_release(plain);
}

/* The monitor sees op node j's inputs (when asked) and outputs, from its own step
 * (conversions come before it, the head copies after the last node). */
static void monitor_node(mx_rt_ctx *c, int j) {
  const rt_plan *p = &c->p;
  const mx_plan_step *st = NULL;
  for (int s = p->node_step[j]; s < p->node_step[j + 1]; s++)
    if (p->steps[s].node == p->op_node[j] && (p->steps[s].kind == MX_STEP_KERNEL || p->steps[s].kind == MX_STEP_FUSED))
      st = &p->steps[s];
  if (!st) return;
  const mx_graph_node *nd = &p->g->nodes[st->node];
  for (int k = 0; c->monitor_inputs && k < nd->nin; k++)
    monitor_one(c, nd->in_node[k], nd->in_out[k], st->in[k]);
  for (int k = 0; k < nd->nout; k++) monitor_one(c, st->node, k, st->out[k]);
}

int rt_plan_run(mx_rt_ctx *c, int first, int last) {
  rt_plan *p = &c->p;
  int prev = mx_threads_set_local_cap(c->m->opt.threads);
  int rc = MX_OK;
  /* node_step[nops] is the end: the head copies run with the last node (or alone) */
  int s = first == 0 ? 0 : p->node_step[first], end = p->node_step[last];
  if (MX_LIKELY(c->monitor == NULL)) {
    rc = mx_plan_run(p, s, end, "mx_rt: node '%s' (%s)");
  } else {
    for (int j = first; j < last && !rc; j++) {
      int e = j + 1 == last ? end : p->node_step[j + 1];
      rc = mx_plan_run(p, s, e, "mx_rt: node '%s' (%s)");
      s = e;
      if (!rc) monitor_node(c, j);
    }
  }
  mx_threads_set_local_cap(prev);
  return rc;
}
