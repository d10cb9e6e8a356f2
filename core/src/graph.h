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
/* Sets g's heads to src's through map (old node -> new node) and emap (NULL, or per
 * entry of src: new node << 8 | output, -1 where map applies): the passes' last step. */
/* NULL when a node attribute's value says something a reader can use, else what it should
 * be ("a shape (...)"): __shape__ (MXNet's tuple text) and __dtype__ (a code or a name) are
 * checked wherever an attribute is set, so no reader ignores a malformed one. */
const char *mx_graph_attr_invalid(const char *key, const char *val);
int mx_graph_copy_heads(mx_graph *g, const mx_graph *src, const int *map, const int *emap);
/* The op's definition of a node (NULL for variables and fused nodes). */
static inline const mx_op_def *mx_graph_def(const mx_graph *g, int node) {
  int op = g->nodes[node].op;
  return op >= 0 ? &mx_ops[op] : NULL;
}
/* Merges what src knows into dst (unknown ndim/dims/dtype taken from src); false when
 * both know a value and they differ. *changed set when dst learned something. */
bool mx_desc_merge(mx_desc *dst, const mx_desc *src, bool *changed);

/* Creation shapes with unknown dims (MXNet 1.x symbol files: _zeros of shape (4, 0, 8),
 * a begin state whose batch dim the data decides). An input-less op's "shape" param may
 * hold MX_DIM_UNKNOWN in a graph (never in eager calls): inference leaves those dims to
 * the consumers (rnn fills its state input), and the executor writes the inferred shape
 * back into its private copy, so kernels only see known shapes.
 * mx_graph_shape_param: the "shape" param's tuple of such a node (NULL: none).
 * mx_graph_zero_dims_unknown: the JSON reader's 0 -> MX_DIM_UNKNOWN on node `node`.
 * mx_graph_resolve_shapes: the executor's write-back from the inferred entries. */
mx_tuple *mx_graph_shape_param(const mx_graph *g, int node);
/* The index-valued ops of a graph read from symbol JSON (MXNet's 0-based positions) with
 * luamx's 1-based ones (graph_index.c): a new graph *out, g unchanged. */
int mx_graph_index_from_mxnet(const mx_graph *g, mx_graph **out);
void mx_graph_zero_dims_unknown(mx_graph *g, int node);
void mx_graph_resolve_shapes(mx_graph *g, const mx_desc *entries);

/* ---- fused elementwise nodes (graph_fuse.c builds them, the backend that registered an
 * interpreter for the device runs them: kernels/cpu/fused.c on the CPU) --------------
 * A chain of float32 unary / binary / scalar ops over one output shape, its inputs
 * broadcast to it (NumPy rules). Registers 0..nin-1 are the inputs, nin + i the result
 * of instruction i; the last instruction's register is the output. */
enum {
  MX_FOP_NEG = 1, MX_FOP_ABS, MX_FOP_SQUARE, MX_FOP_RELU, MX_FOP_SQRT, MX_FOP_RSQRT,
  MX_FOP_RECIP, MX_FOP_EXP, MX_FOP_LOG, MX_FOP_TANH, MX_FOP_SIGMOID, MX_FOP_SIN, MX_FOP_COS,
  MX_FOP_ERF, MX_FOP_LOG1P, MX_FOP_EXPM1, MX_FOP_SOFTRELU, MX_FOP_SOFTSIGN,
  MX_FOP_ADD = 32, MX_FOP_SUB, MX_FOP_MUL, MX_FOP_DIV, MX_FOP_MAX, MX_FOP_MIN, MX_FOP_POW,
  MX_FOP_ADDS = 64, MX_FOP_SUBS, MX_FOP_RSUBS, MX_FOP_MULS, MX_FOP_DIVS, MX_FOP_RDIVS,
  MX_FOP_MAXS, MX_FOP_MINS, MX_FOP_POWS, MX_FOP_RPOWS
};
enum { MX_FUSED_MAX = 32 };
typedef struct mx_fused_instr { int code, a, b; float s; } mx_fused_instr;
typedef struct mx_fused_prog {
  int nin, n;
  mx_fused_instr ins[MX_FUSED_MAX];
} mx_fused_prog;
/* An interpreter: runs p over in[0..nin) into out (float32, row-major; out's shape is
 * the broadcast of the inputs'). A backend registers its own for a device when its
 * library loads; the executor runs fused nodes through it (graph_exec.c). */
typedef int (*mx_fused_fn)(const mx_fused_prog *p, int nin, mx_tensor *const *in, mx_tensor *out);
int mx_graph_register_fused(int dev_type, mx_fused_fn fn);
/* The interpreter registered for dev_type, NULL when none. */
mx_fused_fn mx_graph_fused(int dev_type);

/* The passes (graph_pass.c, graph_fuse.c): each builds a new graph (*out, owned by the
 * caller) from g; entries: g's inferred descriptors where the pass needs them (NULL
 * for dce/cse/fold). */
int mx_graph_pass_dce(const mx_graph *g, mx_graph **out);
int mx_graph_pass_cse(const mx_graph *g, mx_graph **out);
int mx_graph_pass_fold(const mx_graph *g, mx_graph **out);
int mx_graph_pass_fuse(const mx_graph *g, const mx_desc *entries, mx_graph **out);
int mx_graph_pass_fold_bn(const mx_graph *g, const mx_desc *entries, mx_graph **out);
int mx_graph_pass_fuse_act(const mx_graph *g, const mx_desc *entries, mx_graph **out);

#endif
