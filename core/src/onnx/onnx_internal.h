/* onnx_internal.h — what the ONNX importer's files share (onnx_read.c: the file and its
 * tensors; onnx_import.c: values, emission and the node loop; onnx_ops*.c: one converter
 * per ONNX op). docs/onnx.md.
 *
 * The importer is a small tracer: every ONNX value is either a constant tensor (an
 * initializer, a Constant, or anything computed from constants only, evaluated at import
 * time with the op table's own kernels) or an entry of the luamx graph being built, with
 * a descriptor (shape, maybe with unknown dims, and dtype) kept by running the op table's
 * pure inference on each node as it is added. Inputs that ONNX gives as tensors but luamx
 * takes as attributes (Reshape's shape, Slice's starts, Resize's scales...) must then be
 * constants: a graph input in that place is an error naming the node (docs/onnx.md). */
#ifndef MX_ONNX_INTERNAL_H
#define MX_ONNX_INTERNAL_H

#include "internal.h"
#include "onnx.pb-c.h"

typedef struct ox_val {
  const char *name;  /* the ONNX name, or NULL for an intermediate */
  mx_tensor *c;      /* a constant (owned reference), or NULL */
  int node, out;     /* the graph entry when not a constant */
  int cnode;         /* the variable node of a constant once a graph node reads it, or -1 */
  mx_desc d;
  /* a sequence (ONNX's seq(tensor)) whose length is known at import: its tensors */
  bool is_seq;
  int nseq;
  struct ox_val **seq;
  struct ox_val *next_alloc;
} ox_val;

typedef struct ox_slot { char *key; ox_val *v; } ox_slot;

typedef struct ox_strbuf { struct ox_strbuf *next; char s[]; } ox_strbuf;

typedef struct ox {
  mx_graph *g;
  ox_strbuf *strs;
  const char *file, *dir; /* for messages; the model's directory (external data) */
  int64_t opset;          /* of the default domain */
  ox_slot *tab;
  size_t tcap, tn;
  ox_val *allocs;
  int uniq;
  const Onnx__NodeProto *node; /* the node being converted (messages, names) */
  int depth;                   /* subgraph nesting (If) */
  Onnx__NodeProto **nodes;     /* the node list being converted (look-ahead folds) */
  size_t nn;
  Onnx__ValueInfoProto **outputs; /* the model's outputs */
  size_t noutputs;
  struct { const Onnx__NodeProto *node; ox_val *v; } skip[256]; /* nodes folded away */
  size_t nskip;
  int64_t unrolled; /* body nodes converted by unrolling Loop/Scan so far (bounded) */
} ox;

/* ---- onnx_read.c ---- */
/* ONNX's TensorProto.DataType -> luamx dtype, or -1 (its name in *why). */
int ox_dtype(int32_t onnx_type, const char **why);
int ox_onnx_type(int dtype); /* the reverse (0 for none) */
/* A TensorProto's value as a new CPU tensor: dims, dtype and data checked (raw_data or the
 * typed fields, or external data resolved under dir only; dir NULL: none allowed).
 * file names messages. */
int ox_tensor_from_proto(const Onnx__TensorProto *t, const char *dir, const char *file,
                         mx_tensor **out);
/* A ValueInfoProto's type as a descriptor (unknown dims -1; dtype -1 if absent,
 * MX_ONNX_STRING for strings). */
int ox_desc_from_value_info(const Onnx__ValueInfoProto *vi, const char *file, mx_desc *d);

/* ---- onnx_import.c: values and emission ---- */
/* The model in the file at path (mapped, parsed, unmapped); free with
 * onnx__model_proto__free_unpacked. */
int ox_model_open(const char *path, Onnx__ModelProto **m);
/* path's directory (where its external data lives) into dir. */
void ox_dir_of(const char *path, char *dir, size_t cap);
/* *out: the TensorProto of a .pb file (free with onnx__tensor_proto__free_unpacked); an
 * error (*out NULL) when the file cannot be read or is not one. */
int ox_read_tensor_proto(const char *path, Onnx__TensorProto **out);
/* An error about the current node ("ONNX node 'n' (Conv): ..."); MX_EINVAL. unsupported()
 * says "unsupported:" so callers (the conformance spec) can tell it from a failure. */
int ox_fail(ox *X, const char *fmt, ...) MX_PRINTF(2, 3);
int ox_unsupported(ox *X, const char *fmt, ...) MX_PRINTF(2, 3);
ox_val *ox_new(ox *X);
ox_val *ox_const(ox *X, mx_tensor *t); /* takes the reference */
/* A sequence value of n tensors (copied list). */
ox_val *ox_seq(ox *X, int n, ox_val *const *items);
/* A constant of shape (n) (or a scalar when n < 0) from doubles, in dtype. */
ox_val *ox_const_vec(ox *X, int dtype, int n, const double *v);
ox_val *ox_scalar(ox *X, int dtype, double v);
ox_val *ox_lookup(ox *X, const char *name);
int ox_bind(ox *X, const char *name, ox_val *v);
/* Runs op (a luamx or MXNet name) on in[0..nin) with MXNet string attributes kv (pairs,
 * NULL-terminated): at import time when every input is a constant, else as a graph node.
 * out[0..nout) get its outputs (nout may be smaller than the op's). */
int ox_emit(ox *X, const char *op, int nin, ox_val *const *in, const char *const *kv, int nout,
            ox_val **out);
/* One-output shorthand: NULL on error (the error is set). */
ox_val *ox_op(ox *X, const char *op, int nin, ox_val *const *in, const char *const *kv);
ox_val *ox_op1(ox *X, const char *op, ox_val *a, const char *const *kv);
ox_val *ox_op2(ox *X, const char *op, ox_val *a, ox_val *b, const char *const *kv);
/* A constant input's values as int64 / double (n: count read, at most max). Fails naming
 * `what` when v is not a constant. */
int ox_ints(ox *X, ox_val *v, const char *what, int max, int64_t *out, int *n);
int ox_f64s(ox *X, ox_val *v, const char *what, int max, double *out, int *n);
/* "(a, b, c)" into buf (MXNet's tuple form). */
const char *ox_tuple(char *buf, size_t cap, int n, const int64_t *v);
/* Attribute lookup on the current node. */
const Onnx__AttributeProto *ox_attr(const ox *X, const char *name);
int64_t ox_attr_i(const ox *X, const char *name, int64_t dflt);
double ox_attr_f(const ox *X, const char *name, double dflt);
const char *ox_attr_s(const ox *X, const char *name, const char *dflt, char *buf, size_t cap);
/* ints attribute: count (-1 if absent, -2 with the error set when above max) into out. */
int ox_attr_ints(ox *X, const char *name, int max, int64_t *out);
/* The one node reading value `name` when it is an op_type node (and nothing else reads
 * it: no other node, no subgraph, not a model output), else NULL: for folding that node
 * into the current one (Conv + BatchNormalization). */
const Onnx__NodeProto *ox_sole_consumer(ox *X, const char *name, const char *op_type);
/* Node n (later in the list) is done: its first output is `result`. */
int ox_skip(ox *X, const Onnx__NodeProto *n, ox_val *result);
/* Converts a subgraph (If's branch) inline: its outputs into outs[0..nout). */
int ox_subgraph(ox *X, const Onnx__GraphProto *g, int nout, ox_val **outs);
/* The same with its inputs bound to ins[0..nin) (a Loop or Scan body, once per
 * iteration: onnx_ops_loop.c). */
int ox_subgraph_in(ox *X, const Onnx__GraphProto *g, int nin, ox_val *const *ins, int nout,
                   ox_val **outs);

/* v as dtype (v itself when it already is). */
ox_val *ox_cast(ox *X, ox_val *v, int dtype);
/* numpy's broadcast of the inputs' shapes (all known ranks; unknown dims stay unknown
 * unless another input has them) into *out (dtype: in[0]'s). */
int ox_bshape(ox *X, int n, ox_val *const *in, mx_desc *out);
/* v broadcast to d's shape (itself when it has it); d must be fully known. */
ox_val *ox_bcast_to(ox *X, ox_val *v, const mx_desc *d);
/* Whether every dim of d is known. */
bool ox_known(const mx_desc *d);
/* x padded by pads (2 x rank: all begins, then all ends; negative crops) in mode
 * constant/edge/reflect (onnx_ops_shape.c). */
ox_val *ox_pad(ox *X, ox_val *x, const char *mode, int64_t *pads, double value);
/* Converter helpers: inputs 0..k-1 present (else an error naming the first missing);
 * out[0] = v, or the error of the step that made v NULL; "(a, b)" and "%.17g" strings
 * (inf as MXNet writes it) kept until the import ends. */
int ox_need(ox *X, int nin, ox_val **in, int k);
int ox_done(ox *X, ox_val *v, ox_val **out);
const char *ox_tup(ox *X, int n, const int64_t *v);
const char *ox_f2s(ox *X, double v);
/* A constant grid: element (i0, i1, ...) of shape d holds i_axis + 1 (luamx's 1-based
 * positions), as int64. */
ox_val *ox_coord_grid(ox *X, const mx_desc *d, int axis);
/* A fresh attribute value string (kept until the import ends). */
const char *ox_str(ox *X, const char *fmt, ...) MX_PRINTF(2, 3);

/* ---- onnx_ops*.c ---- */
typedef int (*ox_conv_fn)(ox *X, int nin, ox_val **in, int nout, ox_val **out);
typedef struct ox_conv_entry { const char *op_type; ox_conv_fn fn; } ox_conv_entry;
extern const ox_conv_entry ox_ops_math[], ox_ops_shape[], ox_ops_nn[], ox_ops_extra[],
    ox_ops_extra2[], ox_ops_rnn[], ox_ops_seq[], ox_ops_loop[];
/* onnx_ops_extra.c: round half to even; LayerNormalization with its statistics outputs */
ox_val *ox_round_even(ox *X, ox_val *x);
int ox_layernorm_stats(ox *X, int nin, ox_val **in, int nout, ox_val **out);
ox_conv_fn ox_find_converter(const char *op_type);
/* The converted op types, in table order (docs/onnx.md, the conformance spec). */
int ox_num_converters(void);
const char *ox_converter_name(int k);
/* MXNet attribute lists: KV("key", "value", ...) */
#define KV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define IN_OR(k, n, in) ((k) < (n) ? (in)[k] : NULL)

#endif
