/* onnx_export.h — what the ONNX exporter's files share (onnx_export.c: the model, its
 * nodes and initializers written with protobuf-c; onnx_export_ops.c: one luamx node as
 * ONNX nodes; onnx_export_rnn.c: the fused RNN). docs/onnx.md ("Export"). */
#ifndef MX_ONNX_EXPORT_H
#define MX_ONNX_EXPORT_H

#include "onnx_internal.h"

typedef struct ex {
  const mx_graph *g;
  mx_desc *ent;   /* inferred descriptors of every entry */
  char **ename;   /* ONNX name of every entry */
  void **allocs;  /* everything allocated for the protobuf structs */
  size_t nalloc, acap;
  Onnx__NodeProto **nodes;
  size_t nn, ncap;
  Onnx__TensorProto **inits;
  size_t ni, icap;
  int uniq;
  bool dynamic; /* the first dim of inputs and outputs is symbolic */
  int node;     /* the graph node being exported (messages) */
  int64_t opset;
} ex;

/* ---- onnx_export.c: allocation, messages, nodes and initializers ---- */
/* Zeroed memory freed when the export ends (NULL when out of memory). */
void *ex_alloc(ex *E, size_t n);
/* A formatted string kept until the export ends. */
char *ex_str(ex *E, const char *fmt, ...) MX_PRINTF(2, 3);
/* MX_EINVAL naming the node being exported and its op. */
int ex_fail(ex *E, const char *fmt, ...) MX_PRINTF(2, 3);

typedef struct attr { const char *name; int kind; int64_t i; double f; const char *s; int n; const int64_t *v; } attr;
enum { A_INT = 1, A_FLOAT, A_STR, A_INTS };
#define AI(n, x) ((attr){n, A_INT, (x), 0, NULL, 0, NULL})
#define AF(n, x) ((attr){n, A_FLOAT, 0, (x), NULL, 0, NULL})
#define AS(n, x) ((attr){n, A_STR, 0, 0, (x), 0, NULL})
#define AV(n, k, p) ((attr){n, A_INTS, 0, 0, NULL, (k), (p)})

/* One ONNX node: op_type on inputs (names; "" for a left-out optional) to outputs. */
int ex_node(ex *E, const char *op_type, int nin, const char *const *in, int nout,
            const char *const *out, int na, const attr *a);
/* ex_node shorthands (in a function with `ex *E`): one input, one output, attributes */
#define NODE1(OP, IN, OUT, ...) ex_node(E, OP, 1, (const char *[]){IN}, 1, (const char *[]){OUT}, \
                                        sizeof((attr[]){__VA_ARGS__}) / sizeof(attr), (attr[]){__VA_ARGS__})
#define NODE1N(OP, IN, OUT) ex_node(E, OP, 1, (const char *[]){IN}, 1, (const char *[]){OUT}, 0, NULL)
#define NODE2N(OP, A, B, OUT) ex_node(E, OP, 2, (const char *[]){A, B}, 1, (const char *[]){OUT}, 0, NULL)

/* An initializer named name holding t's bytes. */
int ex_init_tensor(ex *E, const char *name, mx_tensor *t);
/* A new constant of n int64 (n < 0: a scalar) / a scalar of dtype dt: its name, NULL when
 * out of memory. */
const char *ex_c_i64(ex *E, int n, const int64_t *v);
const char *ex_c_scalar(ex *E, int dt, double v);
/* A fresh intermediate value name. */
const char *ex_tmpname(ex *E);

/* ---- onnx_export_ops.c ---- */
/* A node's parameter `key` (MXNet's string form) as int / float / bool / string / tuple
 * (dflt when unset or None; the tuple's length, 0 when unset). */
int64_t ex_pint(ex *E, int op, const void *p, const char *key, int64_t dflt);
double ex_pfloat(ex *E, int op, const void *p, const char *key, double dflt);
bool ex_pbool(ex *E, int op, const void *p, const char *key, bool dflt);
const char *ex_pstr(ex *E, int op, const void *p, const char *key, char *b, size_t cap);
int ex_ptuple(ex *E, int op, const void *p, const char *key, int64_t *v, int max);
/* Input k of graph node id: its ONNX name and inferred descriptor. */
const char *ex_in_name(ex *E, int id, int k);
const mx_desc *ex_in_desc(ex *E, int id, int k);
/* Graph node id (an op with inputs) as ONNX nodes. */
int ex_export_node(ex *E, int id);

/* ---- onnx_export_rnn.c ---- */
int ex_rnn(ex *E, int id, int op, const void *p, const char *const *in, const char *const *out,
           int nout);

#endif
