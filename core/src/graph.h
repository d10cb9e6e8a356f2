/* graph.h — the graph IR (graph.c) as the passes, the JSON reader/writer and the
 * executor see it. The public API is the "graphs" section of mx.h; this is the struct
 * behind the opaque mx_graph, shared by core/src/graph*.c only.
 *
 * A graph is MXNet's nnvm graph in a flat array: nodes in topological order (an op's
 * inputs are earlier nodes), each output of a node is an entry numbered as MXNet's
 * node_row_ptr (entry = row[node] + out), heads are the graph's outputs. A variable
 * (op -1) may carry a constant value (constant folding, BatchNorm folding). A pass
 * builds a new graph from an old one (mx_graph_copy_node) and never edits its input. */
#ifndef MX_GRAPH_H
#define MX_GRAPH_H

#include "internal.h"

enum { MX_GRAPH_VAR = -1, MX_GRAPH_FUSED = -2 };

typedef struct mx_graph_attr { char *key, *val; } mx_graph_attr;

typedef struct mx_graph_node {
  int op;                 /* op id, MX_GRAPH_VAR, or MX_GRAPH_FUSED (ext holds the program) */
  char *name;
  void *params;           /* struct mx_params_<op> (params_size bytes), NULL when none */
  int nin;
  int *in_node, *in_out;  /* nin entries each */
  int nout;
  int row;                /* first entry id of this node's outputs */
  int nattr, cap_attr;
  mx_graph_attr *attrs;   /* node attributes (__shape__, __init__, user attrs): strings */
  mx_tensor *value;       /* variables only: a constant value (owned reference) or NULL */
  void *ext;              /* a pass's payload (fused program); freed with ext_free */
  void (*ext_free)(void *ext);
} mx_graph_node;

struct mx_graph {
  int n, cap;
  mx_graph_node *nodes;
  int nentries;
  int nheads;
  int *head_node, *head_out;
};

/* Appends a node of op (variable, op or fused) with the given inputs, a copy of
 * params (params_size bytes; NULL: none) and nout outputs; attributes and value
 * are not set. Checks input references. Returns the node id or MX_E* (< 0). */
int mx_graph_push(mx_graph *g, int op, const char *name, const void *params,
                  size_t params_size, int nin, const int *in_node, const int *in_out, int nout);
/* Appends a copy of src's node `node` (op, params, attributes, value, ext is NOT copied)
 * with its inputs remapped to (in_node, in_out) in g. Returns the new id or MX_E*. */
int mx_graph_copy_node(mx_graph *g, const mx_graph *src, int node, const int *in_node,
                       const int *in_out);
/* The op's definition of a node (NULL for variables and fused nodes). */
static inline const mx_op_def *mx_graph_def(const mx_graph *g, int node) {
  int op = g->nodes[node].op;
  return op >= 0 ? &mx_ops[op] : NULL;
}
/* Merges what src knows into dst (unknown ndim/dims/dtype taken from src); false when
 * both know a value and they differ. *changed set when dst learned something. */
bool mx_desc_merge(mx_desc *dst, const mx_desc *src, bool *changed);

#endif
