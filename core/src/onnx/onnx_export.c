/* onnx_export.c — a luamx graph as an ONNX model (mx_onnx_export; Lua: mx.onnx.export_model,
 * HybridBlock:export_onnx). Variables with values become initializers, the others the
 * model's inputs; the graph's shapes are inferred for the given inputs (MXNet's reshape
 * codes and broadcasts then become explicit ONNX shapes); each node becomes the ONNX
 * node(s) of the same semantics (opset 17), or the export fails naming the node and the
 * op. The model is packed with protobuf-c and written atomically. docs/onnx.md
 * ("Export"). */
#include "onnx_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void *ealloc(ex *E, size_t n) {
  if (E->nalloc == E->acap) {
    size_t nc = E->acap ? 2 * E->acap : 256;
    void **na = realloc(E->allocs, nc * sizeof *na);
    if (!na) return NULL;
    E->allocs = na, E->acap = nc;
  }
  void *p = calloc(1, n ? n : 1);
  if (p) E->allocs[E->nalloc++] = p;
  return p;
}

static char *estr(ex *E, const char *fmt, ...) MX_PRINTF(2, 3);
static char *estr(ex *E, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *s = ealloc(E, strlen(buf) + 1);
  if (s) strcpy(s, buf);
  return s;
}

static int efail(ex *E, const char *fmt, ...) MX_PRINTF(2, 3);
static int efail(ex *E, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (E->node < 0) return mx_err(MX_EINVAL, "mx.onnx.export_model: %s", msg);
  int op = mx_graph_node_op(E->g, E->node);
  return mx_err(MX_EINVAL, "mx.onnx.export_model: node '%s' (%s): %s",
                mx_graph_node_name(E->g, E->node), op >= 0 ? mx_op_name(op) : "variable", msg);
}

/* ---- building blocks --------------------------------------------------------------------- */

typedef struct attr { const char *name; int kind; int64_t i; double f; const char *s; int n; const int64_t *v; } attr;
enum { A_INT = 1, A_FLOAT, A_STR, A_INTS };
#define AI(n, x) ((attr){n, A_INT, (x), 0, NULL, 0, NULL})
#define AF(n, x) ((attr){n, A_FLOAT, 0, (x), NULL, 0, NULL})
#define AS(n, x) ((attr){n, A_STR, 0, 0, (x), 0, NULL})
#define AV(n, k, p) ((attr){n, A_INTS, 0, 0, NULL, (k), (p)})

/* One ONNX node: op_type on inputs (names; "" for a left-out optional) to outputs. */
static int enode(ex *E, const char *op_type, int nin, const char *const *in, int nout,
                 const char *const *out, int na, const attr *a) {
  Onnx__NodeProto *n = ealloc(E, sizeof *n);
  if (!n) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  onnx__node_proto__init(n);
  n->op_type = estr(E, "%s", op_type);
  n->name = estr(E, "%s_%d", op_type, E->uniq++);
  n->n_input = (size_t)nin, n->input = ealloc(E, sizeof(char *) * (size_t)(nin + 1));
  n->n_output = (size_t)nout, n->output = ealloc(E, sizeof(char *) * (size_t)(nout + 1));
  n->n_attribute = (size_t)na, n->attribute = ealloc(E, sizeof(void *) * (size_t)(na + 1));
  if (!n->input || !n->output || !n->attribute) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  for (int i = 0; i < nin; i++) n->input[i] = estr(E, "%s", in[i]);
  for (int i = 0; i < nout; i++) n->output[i] = estr(E, "%s", out[i]);
  for (int i = 0; i < na; i++) {
    Onnx__AttributeProto *p = ealloc(E, sizeof *p);
    if (!p) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
    onnx__attribute_proto__init(p);
    p->name = estr(E, "%s", a[i].name);
    p->has_type = 1;
    switch (a[i].kind) {
    case A_INT: p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, p->has_i = 1, p->i = a[i].i; break;
    case A_FLOAT: p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, p->has_f = 1, p->f = (float)a[i].f; break;
    case A_STR:
      p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, p->has_s = 1;
      p->s.data = (uint8_t *)estr(E, "%s", a[i].s), p->s.len = strlen(a[i].s);
      break;
    default:
      p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
      p->n_ints = (size_t)a[i].n, p->ints = ealloc(E, sizeof(int64_t) * (size_t)(a[i].n + 1));
      for (int k = 0; k < a[i].n; k++) p->ints[k] = a[i].v[k];
    }
    n->attribute[i] = p;
  }
  if (E->nn == E->ncap) {
    size_t nc = E->ncap ? 2 * E->ncap : 128;
    Onnx__NodeProto **na2 = realloc(E->nodes, nc * sizeof *na2);
    if (!na2) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
    E->nodes = na2, E->ncap = nc;
  }
  E->nodes[E->nn++] = n;
  return MX_OK;
}

static int add_init(ex *E, Onnx__TensorProto *t) {
  if (E->ni == E->icap) {
    size_t nc = E->icap ? 2 * E->icap : 128;
    Onnx__TensorProto **na = realloc(E->inits, nc * sizeof *na);
    if (!na) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
    E->inits = na, E->icap = nc;
  }
  E->inits[E->ni++] = t;
  return MX_OK;
}

/* An initializer holding t's bytes (raw_data, little-endian as luamx's). */
static int init_tensor(ex *E, const char *name, mx_tensor *t) {
  int ot = ox_onnx_type(mx_tensor_dtype(t));
  if (!ot) return efail(E, "a constant of dtype %s has no ONNX type", mx_dtype_name(mx_tensor_dtype(t)));
  Onnx__TensorProto *p = ealloc(E, sizeof *p);
  if (!p) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  onnx__tensor_proto__init(p);
  p->name = estr(E, "%s", name);
  p->has_data_type = 1, p->data_type = ot;
  int nd = mx_tensor_ndim(t);
  p->n_dims = (size_t)nd, p->dims = ealloc(E, sizeof(int64_t) * (size_t)(nd + 1));
  for (int i = 0; i < nd; i++) p->dims[i] = mx_tensor_dim(t, i);
  size_t bytes = (size_t)mx_tensor_size(t) * mx_dtype_size(mx_tensor_dtype(t));
  void *src = mx_tensor_data(t);
  if (bytes && !src) return efail(E, "a constant could not be read");
  p->has_raw_data = 1, p->raw_data.len = bytes, p->raw_data.data = ealloc(E, bytes);
  if (!p->raw_data.data) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  if (bytes) memcpy(p->raw_data.data, src, bytes);
  return add_init(E, p);
}

/* A new constant of n int64 (n < 0: a scalar), its name returned. */
static const char *c_i64(ex *E, int n, const int64_t *v) {
  int64_t s[1] = {n < 0 ? 1 : n};
  mx_tensor *t;
  if (mx_tensor_new(n < 0 ? 0 : 1, s, MX_I64, MX_CPU, 0, &t)) return NULL;
  if (n != 0) memcpy(mx_ptr(t), v, sizeof(int64_t) * (size_t)(n < 0 ? 1 : n));
  const char *name = estr(E, "const_%d", E->uniq++);
  int rc = init_tensor(E, name, t);
  mx_tensor_release(t);
  return rc ? NULL : name;
}

/* A scalar constant of dtype dt. */
static const char *c_scalar(ex *E, int dt, double v) {
  mx_tensor *t;
  if (mx_tensor_new(0, NULL, dt, MX_CPU, 0, &t)) return NULL;
  mx_store_f64(mx_ptr(t), dt, 0, v);
  const char *name = estr(E, "const_%d", E->uniq++);
  int rc = init_tensor(E, name, t);
  mx_tensor_release(t);
  return rc ? NULL : name;
}

static const char *tmpname(ex *E) { return estr(E, "t_%d", E->uniq++); }

/* ---- params in MXNet's string form ------------------------------------------------------- */

static const char *param(ex *E, int op, const void *p, const char *key, char *buf, size_t cap) {
  (void)E;
  int np = mx_op_num_params(op);
  char full[512];
  for (int k = 0; k < np; k++) {
    const char *kk = NULL;
    if (mx_op_params_format(op, p, k, &kk, full, sizeof full) < 0) continue;
    if (kk && strcmp(kk, key) == 0) {
      size_t n = strlen(full);
      if (n >= cap) n = cap - 1; /* callers' buffers hold what they look for */
      memcpy(buf, full, n);
      buf[n] = 0;
      return buf;
    }
  }
  return NULL;
}

static int ints_of(const char *s, int64_t *v, int max) {
  int n = 0;
  while (s && *s && n < max) {
    while (*s && (*s == '(' || *s == ')' || *s == ',' || *s == ' ' || *s == '[' || *s == ']')) s++;
    if (!*s) break;
    if (strncmp(s, "None", 4) == 0) { v[n++] = INT64_MIN; s += 4; continue; }
    char *end;
    long long x = strtoll(s, &end, 10);
    if (end == s) break;
    v[n++] = x;
    s = end;
  }
  return n;
}

static int64_t pint(ex *E, int op, const void *p, const char *key, int64_t dflt) {
  char b[512];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s || strcmp(s, "None") == 0) return dflt;
  return strtoll(s, NULL, 10);
}

static double pfloat(ex *E, int op, const void *p, const char *key, double dflt) {
  char b[512];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s || strcmp(s, "None") == 0) return dflt;
  if (strcmp(s, "inf") == 0) return INFINITY;
  if (strcmp(s, "-inf") == 0) return -INFINITY;
  return strtod(s, NULL);
}

static bool pbool(ex *E, int op, const void *p, const char *key, bool dflt) {
  char b[64];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s) return dflt;
  return strcmp(s, "True") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0;
}

static const char *pstr(ex *E, int op, const void *p, const char *key, char *b, size_t cap) {
  const char *s = param(E, op, p, key, b, cap);
  return s ? s : "";
}

static int ptuple(ex *E, int op, const void *p, const char *key, int64_t *v, int max) {
  char b[512];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s || strcmp(s, "None") == 0 || strcmp(s, "()") == 0) return 0;
  return ints_of(s, v, max);
}

/* ---- ops ----------------------------------------------------------------------------------- */

static const char *in_name(ex *E, int id, int k) {
  int oi;
  int src = mx_graph_node_input(E->g, id, k, &oi);
  return E->ename[mx_graph_entry(E->g, src, oi)];
}
static const mx_desc *in_desc(ex *E, int id, int k) {
  int oi;
  int src = mx_graph_node_input(E->g, id, k, &oi);
  return &E->ent[mx_graph_entry(E->g, src, oi)];
}

#define NODE1(OP, IN, OUT, ...) enode(E, OP, 1, (const char *[]){IN}, 1, (const char *[]){OUT}, \
                                      sizeof((attr[]){__VA_ARGS__}) / sizeof(attr), (attr[]){__VA_ARGS__})
#define NODE1N(OP, IN, OUT) enode(E, OP, 1, (const char *[]){IN}, 1, (const char *[]){OUT}, 0, NULL)
#define NODE2N(OP, A, B, OUT) enode(E, OP, 2, (const char *[]){A, B}, 1, (const char *[]){OUT}, 0, NULL)

/* conv/deconv windows: pads as ONNX's begin... end... */
static int window(ex *E, int op, const void *p, int ns, int64_t *k, int64_t *s, int64_t *d,
                  int64_t *pads) {
  int64_t t[MX_MAX_DIM];
  int n = ptuple(E, op, p, "kernel", k, MX_MAX_DIM);
  if (n != ns) return efail(E, "kernel has %d dims for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) s[i] = 1, d[i] = 1, pads[i] = pads[ns + i] = 0;
  if ((n = ptuple(E, op, p, "stride", t, MX_MAX_DIM)) > 0) for (int i = 0; i < ns && i < n; i++) s[i] = t[i];
  if ((n = ptuple(E, op, p, "dilate", t, MX_MAX_DIM)) > 0) for (int i = 0; i < ns && i < n; i++) d[i] = t[i];
  if ((n = ptuple(E, op, p, "pad", t, MX_MAX_DIM)) > 0)
    for (int i = 0; i < ns && i < n; i++) pads[i] = pads[ns + i] = t[i];
  return MX_OK;
}

static int act(ex *E, const char *name, const char *in, const char *out) {
  if (strcmp(name, "relu") == 0) return NODE1N("Relu", in, out);
  if (strcmp(name, "sigmoid") == 0) return NODE1N("Sigmoid", in, out);
  if (strcmp(name, "tanh") == 0) return NODE1N("Tanh", in, out);
  if (strcmp(name, "softrelu") == 0) return NODE1N("Softplus", in, out);
  if (strcmp(name, "softsign") == 0) return NODE1N("Softsign", in, out);
  return efail(E, "activation '%s' has no ONNX form", name);
}

/* y = x reshaped to the node's inferred shape (dim 0 copied when it is the batch) */
static int reshape_to(ex *E, const char *in, const mx_desc *x, const mx_desc *y, const char *out) {
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < y->ndim; i++) s[i] = y->shape[i];
  if (E->dynamic && y->ndim > 0 && x->ndim > 0 && y->shape[0] == x->shape[0]) s[0] = 0;
  const char *c = c_i64(E, y->ndim, s);
  return c ? NODE2N("Reshape", in, c, out) : MX_ENOMEM;
}

static int ex_rnn(ex *E, int id, int op, const void *p, const char *const *in, const char *const *out,
                  int nout);

static int export_node(ex *E, int id) {
  int op = mx_graph_node_op(E->g, id);
  const void *p = mx_graph_node_params(E->g, id);
  const char *name = mx_op_name(op);
  int nin = mx_graph_node_num_inputs(E->g, id), nout = mx_graph_node_num_outputs(E->g, id);
  const char *in[64], *out[16];
  if (nin > 64 || nout > 16) return efail(E, "too many inputs or outputs");
  for (int k = 0; k < nin; k++) in[k] = in_name(E, id, k);
  for (int k = 0; k < nout; k++) out[k] = E->ename[mx_graph_entry(E->g, id, k)];
  const mx_desc *y = &E->ent[mx_graph_entry(E->g, id, 0)];
  const mx_desc *x = nin > 0 ? in_desc(E, id, 0) : NULL;
  int64_t k3[MX_MAX_DIM], s3[MX_MAX_DIM], d3[MX_MAX_DIM], pads[2 * MX_MAX_DIM], v[MX_MAX_DIM];
  static const struct { const char *mx, *onnx; } UN[] = {
      {"relu", "Relu"}, {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"exp", "Exp"}, {"log", "Log"},
      {"sqrt", "Sqrt"}, {"abs", "Abs"}, {"neg", "Neg"}, {"reciprocal", "Reciprocal"},
      {"floor", "Floor"}, {"ceil", "Ceil"}, {"sin", "Sin"}, {"cos", "Cos"}, {"erf", "Erf"},
      {"sign", "Sign"}, {"softsign", "Softsign"}, {"copy", "Identity"}, {"dropout", "Identity"},
      {"stop_gradient", "Identity"}, {"hard_swish", "HardSwish"}, {"tan", "Tan"}};
  static const struct { const char *mx, *onnx; } BIN[] = {
      {"add", "Add"}, {"sub", "Sub"}, {"mul", "Mul"}, {"div", "Div"}, {"pow", "Pow"},
      {"maximum", "Max"}, {"minimum", "Min"}};
  static const struct { const char *mx, *onnx; bool rev; } SC[] = {
      {"add_scalar", "Add", 0}, {"sub_scalar", "Sub", 0}, {"rsub_scalar", "Sub", 1},
      {"mul_scalar", "Mul", 0}, {"div_scalar", "Div", 0}, {"rdiv_scalar", "Div", 1},
      {"pow_scalar", "Pow", 0}, {"rpow_scalar", "Pow", 1}, {"maximum_scalar", "Max", 0},
      {"minimum_scalar", "Min", 0}};
  static const struct { const char *mx, *onnx; bool neg; } CMP[] = {
      {"equal", "Equal", 0}, {"lesser", "Less", 0}, {"greater", "Greater", 0},
      {"lesser_equal", "Greater", 1}, {"greater_equal", "Less", 1}};
  for (size_t i = 0; i < sizeof UN / sizeof UN[0]; i++)
    if (strcmp(name, UN[i].mx) == 0) return NODE1N(UN[i].onnx, in[0], out[0]);
  for (size_t i = 0; i < sizeof BIN / sizeof BIN[0]; i++)
    if (strcmp(name, BIN[i].mx) == 0) return NODE2N(BIN[i].onnx, in[0], in[1], out[0]);
  for (size_t i = 0; i < sizeof SC / sizeof SC[0]; i++)
    if (strcmp(name, SC[i].mx) == 0) {
      const char *c = c_scalar(E, x->dtype, pfloat(E, op, p, "scalar", 0));
      if (!c) return MX_ENOMEM;
      return SC[i].rev ? NODE2N(SC[i].onnx, c, in[0], out[0]) : NODE2N(SC[i].onnx, in[0], c, out[0]);
    }
  for (size_t i = 0; i < sizeof CMP / sizeof CMP[0]; i++)
    if (strcmp(name, CMP[i].mx) == 0) { /* luamx's comparisons give 0/1 in the inputs' dtype */
      const char *t = tmpname(E), *u = CMP[i].neg ? tmpname(E) : t;
      int rc = NODE2N(CMP[i].onnx, in[0], in[1], t);
      if (!rc && CMP[i].neg) rc = NODE1N("Not", t, u);
      return rc ? rc : NODE1("Cast", u, out[0], AI("to", ox_onnx_type(y->dtype)));
    }
  if (strcmp(name, "convolution") == 0 || strcmp(name, "deconvolution") == 0) {
    bool deconv = name[0] == 'd';
    int ns = x->ndim - 2;
    int rc = window(E, op, p, ns, k3, s3, d3, pads);
    if (rc) return rc;
    bool no_bias = pbool(E, op, p, "no_bias", deconv);
    int64_t group = pint(E, op, p, "num_group", 1);
    attr a[6] = {AV("kernel_shape", ns, k3), AV("strides", ns, s3), AV("dilations", ns, d3),
                 AV("pads", 2 * ns, pads), AI("group", group), AV("output_padding", ns, v)};
    int na = 5;
    if (deconv) {
      int n = ptuple(E, op, p, "adj", v, MX_MAX_DIM);
      for (int i = n; i < ns; i++) v[i] = 0;
      na = 6;
      if (ptuple(E, op, p, "target_shape", k3 + ns, MX_MAX_DIM) > 0)
        return efail(E, "target_shape has no ONNX form here (give pad/adj)");
    }
    char ab[32];
    const char *a_t = strcmp(name, "convolution") == 0 ? pstr(E, op, p, "act_type", ab, sizeof ab) : "none";
    bool fused = a_t[0] && strcmp(a_t, "none") != 0;
    const char *dst = fused ? tmpname(E) : out[0];
    rc = enode(E, deconv ? "ConvTranspose" : "Conv", no_bias ? 2 : 3, in, 1, &dst, na, a);
    return rc ? rc : fused ? act(E, a_t, dst, out[0]) : MX_OK;
  }
  if (strcmp(name, "batch_norm") == 0) {
    if (pint(E, op, p, "axis", 1) != 1) return efail(E, "BatchNorm over an axis other than 1");
    const char *ins[5] = {in[0], in[1], in[2], in[3], in[4]};
    if (pbool(E, op, p, "fix_gamma", true)) { /* MXNet: gamma treated as ones */
      const mx_desc *g = in_desc(E, id, 1);
      mx_tensor *t;
      int rc = mx_tensor_new(g->ndim, g->shape, g->dtype, MX_CPU, 0, &t);
      if (rc) return rc;
      for (int64_t i = 0; i < mx_tensor_size(t); i++) mx_store_f64(mx_ptr(t), g->dtype, i, 1.0);
      ins[1] = estr(E, "const_%d", E->uniq++);
      rc = init_tensor(E, ins[1], t);
      mx_tensor_release(t);
      if (rc) return rc;
    }
    return enode(E, "BatchNormalization", 5, ins, 1, out, 2,
                 (attr[]){AF("epsilon", pfloat(E, op, p, "eps", 1e-3)),
                          AF("momentum", pfloat(E, op, p, "momentum", 0.9))});
  }
  if (strcmp(name, "activation") == 0) {
    char ab[32];
    return act(E, pstr(E, op, p, "act_type", ab, sizeof ab), in[0], out[0]);
  }
  if (strcmp(name, "leaky_relu") == 0) {
    char ab[32];
    const char *t = pstr(E, op, p, "act_type", ab, sizeof ab);
    double sl = pfloat(E, op, p, "slope", 0.25);
    if (strcmp(t, "leaky") == 0) return NODE1("LeakyRelu", in[0], out[0], AF("alpha", sl));
    if (strcmp(t, "elu") == 0) return NODE1("Elu", in[0], out[0], AF("alpha", sl));
    if (strcmp(t, "selu") == 0) return NODE1N("Selu", in[0], out[0]);
    if (strcmp(t, "prelu") == 0) {
      const mx_desc *g = in_desc(E, id, 1);
      const char *r = tmpname(E);
      int64_t s[MX_MAX_DIM];
      s[0] = g->shape[0];
      for (int i = 1; i < x->ndim - 1; i++) s[i] = 1;
      const char *c = c_i64(E, x->ndim - 1, s);
      int rc = c ? NODE2N("Reshape", in[1], c, r) : MX_ENOMEM;
      return rc ? rc : NODE2N("PRelu", in[0], r, out[0]);
    }
    if (strcmp(t, "gelu") == 0) return NODE1N("Gelu", in[0], out[0]);
    return efail(E, "LeakyReLU act_type %s has no ONNX form", t);
  }
  if (strcmp(name, "gelu") == 0) return NODE1N("Gelu", in[0], out[0]);
  if (strcmp(name, "hard_sigmoid") == 0)
    return enode(E, "HardSigmoid", 1, in, 1, out, 2, (attr[]){AF("alpha", pfloat(E, op, p, "alpha", 0.2)),
                                                          AF("beta", pfloat(E, op, p, "beta", 0.5))});
  if (strcmp(name, "pooling") == 0) {
    char tb[16], cb[16];
    const char *type = pstr(E, op, p, "pool_type", tb, sizeof tb);
    bool is_max = strcmp(type, "max") == 0;
    if (!is_max && strcmp(type, "avg")) return efail(E, "pool_type %s has no ONNX form", type);
    if (pbool(E, op, p, "global_pool", false))
      return NODE1N(is_max ? "GlobalMaxPool" : "GlobalAveragePool", in[0], out[0]);
    int ns = x->ndim - 2;
    int n = ptuple(E, op, p, "kernel", k3, MX_MAX_DIM);
    if (n != ns) return efail(E, "kernel has %d dims for %d spatial dims", n, ns);
    for (int i = 0; i < ns; i++) s3[i] = 1, pads[i] = pads[ns + i] = 0;
    if ((n = ptuple(E, op, p, "stride", v, MX_MAX_DIM)) > 0) for (int i = 0; i < ns && i < n; i++) s3[i] = v[i];
    if ((n = ptuple(E, op, p, "pad", v, MX_MAX_DIM)) > 0)
      for (int i = 0; i < ns && i < n; i++) pads[i] = pads[ns + i] = v[i];
    const char *conv = pstr(E, op, p, "pooling_convention", cb, sizeof cb);
    attr a[4] = {AV("kernel_shape", ns, k3), AV("strides", ns, s3), AV("pads", 2 * ns, pads),
                 AI("ceil_mode", strcmp(conv, "full") == 0)};
    if (is_max) return enode(E, "MaxPool", 1, in, 1, out, 4, a);
    attr b2[5] = {a[0], a[1], a[2], a[3], AI("count_include_pad", pbool(E, op, p, "count_include_pad", true))};
    return enode(E, "AveragePool", 1, in, 1, out, 5, b2);
  }
  if (strcmp(name, "fully_connected") == 0) {
    bool no_bias = pbool(E, op, p, "no_bias", false), flat = pbool(E, op, p, "flatten", true);
    char ab[16];
    const char *a_t = pstr(E, op, p, "act_type", ab, sizeof ab);
    bool fused = a_t[0] && strcmp(a_t, "none") != 0;
    const char *dst = fused ? tmpname(E) : out[0];
    int rc;
    if (flat || x->ndim == 2) {
      const char *xin = in[0];
      if (x->ndim != 2) {
        xin = tmpname(E);
        if ((rc = NODE1("Flatten", in[0], xin, AI("axis", 1)))) return rc;
      }
      const char *gi[3] = {xin, in[1], no_bias ? "" : in[2]};
      rc = enode(E, "Gemm", no_bias ? 2 : 3, gi, 1, &dst, 1, (attr[]){AI("transB", 1)});
    } else { /* over the last axis: x W^T (+ b) */
      const char *wt = tmpname(E), *mm = no_bias ? dst : tmpname(E);
      rc = NODE1N("Transpose", in[1], wt);
      if (!rc) rc = NODE2N("MatMul", in[0], wt, mm);
      if (!rc && !no_bias) rc = NODE2N("Add", mm, in[2], dst);
    }
    return rc ? rc : fused ? act(E, a_t, dst, out[0]) : MX_OK;
  }
  if (strcmp(name, "flatten") == 0) return NODE1("Flatten", in[0], out[0], AI("axis", 1));
  if (strcmp(name, "reshape") == 0 || strcmp(name, "reshape_like") == 0)
    return reshape_to(E, in[0], x, y, out[0]);
  if (strcmp(name, "expand_dims") == 0 || strcmp(name, "squeeze") == 0) {
    if (strcmp(name, "squeeze") == 0 && ptuple(E, op, p, "axis", v, MX_MAX_DIM) == 0)
      return NODE1N("Squeeze", in[0], out[0]);
    return reshape_to(E, in[0], x, y, out[0]);
  }
  if (strcmp(name, "transpose") == 0) {
    int n = ptuple(E, op, p, "axes", v, MX_MAX_DIM);
    if (n == 0) return NODE1N("Transpose", in[0], out[0]);
    for (int i = 0; i < n; i++) if (v[i] < 0) v[i] += x->ndim;
    return NODE1("Transpose", in[0], out[0], AV("perm", n, v));
  }
  if (strcmp(name, "swapaxes") == 0) {
    int64_t a1 = pint(E, op, p, "dim1", 0), a2 = pint(E, op, p, "dim2", 0), perm[MX_MAX_DIM];
    for (int i = 0; i < x->ndim; i++) perm[i] = i == a1 ? a2 : i == a2 ? a1 : i;
    return NODE1("Transpose", in[0], out[0], AV("perm", x->ndim, perm));
  }
  if (strcmp(name, "concat") == 0) {
    int64_t ax = pint(E, op, p, "dim", 1);
    return enode(E, "Concat", nin, in, 1, out, 1, (attr[]){AI("axis", ax)});
  }
  if (strcmp(name, "softmax") == 0 || strcmp(name, "log_softmax") == 0) {
    if (nin > 1) return efail(E, "softmax with length has no ONNX form");
    return NODE1(name[0] == 's' ? "Softmax" : "LogSoftmax", in[0], out[0], AI("axis", pint(E, op, p, "axis", -1)));
  }
  if (strcmp(name, "clip") == 0) {
    const char *lo = c_scalar(E, x->dtype, pfloat(E, op, p, "a_min", -INFINITY));
    const char *hi = c_scalar(E, x->dtype, pfloat(E, op, p, "a_max", INFINITY));
    if (!lo || !hi) return MX_ENOMEM;
    return enode(E, "Clip", 3, (const char *[]){in[0], lo, hi}, 1, out, 0, NULL);
  }
  if (strcmp(name, "cast") == 0) {
    int ot = ox_onnx_type(y->dtype);
    if (!ot) return efail(E, "cast to %s has no ONNX type", mx_dtype_name(y->dtype));
    return NODE1("Cast", in[0], out[0], AI("to", ot));
  }
  if (strcmp(name, "broadcast_to") == 0 || strcmp(name, "broadcast_like") == 0 ||
      strcmp(name, "broadcast_axis") == 0) {
    const char *c = c_i64(E, y->ndim, y->shape);
    return c ? NODE2N("Expand", in[0], c, out[0]) : MX_ENOMEM;
  }
  if (strcmp(name, "batch_dot") == 0 || strcmp(name, "dot") == 0 || strcmp(name, "matmul") == 0) {
    bool ta = pbool(E, op, p, "transpose_a", false), tb = pbool(E, op, p, "transpose_b", false);
    const char *a = in[0], *bb = in[1];
    int rc = MX_OK;
    const mx_desc *bd = in_desc(E, id, 1);
    int64_t perm[MX_MAX_DIM];
    if (ta) {
      for (int i = 0; i < x->ndim; i++) perm[i] = i;
      perm[x->ndim - 2] = x->ndim - 1, perm[x->ndim - 1] = x->ndim - 2;
      a = tmpname(E);
      rc = NODE1("Transpose", in[0], a, AV("perm", x->ndim, perm));
    }
    if (!rc && tb) {
      for (int i = 0; i < bd->ndim; i++) perm[i] = i;
      perm[bd->ndim - 2] = bd->ndim - 1, perm[bd->ndim - 1] = bd->ndim - 2;
      bb = tmpname(E);
      rc = NODE1("Transpose", in[1], bb, AV("perm", bd->ndim, perm));
    }
    if (!rc && strcmp(name, "dot") == 0 && (x->ndim != 2 || bd->ndim != 2))
      return efail(E, "dot of non-matrices has no ONNX MatMul form");
    return rc ? rc : NODE2N("MatMul", a, bb, out[0]);
  }
  if (strcmp(name, "layer_norm") == 0) {
    int64_t ax = pint(E, op, p, "axis", -1);
    return enode(E, "LayerNormalization", 3, in, 1, out, 2,
                 (attr[]){AI("axis", ax), AF("epsilon", pfloat(E, op, p, "eps", 1e-5))});
  }
  if (strcmp(name, "sum") == 0 || strcmp(name, "mean") == 0 || strcmp(name, "max") == 0 ||
      strcmp(name, "min") == 0 || strcmp(name, "prod") == 0) {
    int n = ptuple(E, op, p, "axis", v, MX_MAX_DIM);
    bool keep = pbool(E, op, p, "keepdims", false);
    const char *ot = name[1] == 'u' ? "ReduceSum" : name[1] == 'e' ? "ReduceMean" : name[1] == 'a' ? "ReduceMax"
                     : name[1] == 'i' ? "ReduceMin" : "ReduceProd";
    if (n == 0) { n = x->ndim; for (int i = 0; i < n; i++) v[i] = i; }
    if (strcmp(ot, "ReduceSum") == 0) { /* opset 13: axes as an input */
      const char *c = c_i64(E, n, v);
      if (!c) return MX_ENOMEM;
      return enode(E, ot, 2, (const char *[]){in[0], c}, 1, out, 1, (attr[]){AI("keepdims", keep)});
    }
    return enode(E, ot, 1, in, 1, out, 2, (attr[]){AV("axes", n, v), AI("keepdims", keep)});
  }
  if (strcmp(name, "slice_axis") == 0) {
    int64_t ax = pint(E, op, p, "axis", 0), bg = pint(E, op, p, "begin", 0);
    int64_t en = pint(E, op, p, "end", INT64_MIN);
    if (en == INT64_MIN) en = INT64_MAX;
    const char *cs = c_i64(E, 1, &bg), *ce = c_i64(E, 1, &en), *ca = c_i64(E, 1, &ax);
    if (!cs || !ce || !ca) return MX_ENOMEM;
    return enode(E, "Slice", 4, (const char *[]){in[0], cs, ce, ca}, 1, out, 0, NULL);
  }
  if (strcmp(name, "embedding") == 0) {
    const char *ix = tmpname(E);
    int rc = NODE1("Cast", in[0], ix, AI("to", 7));
    return rc ? rc : NODE2N("Gather", in[1], ix, out[0]);
  }
  if (strcmp(name, "where") == 0) {
    const char *c = tmpname(E);
    int rc = NODE1("Cast", in[0], c, AI("to", 9));
    return rc ? rc : enode(E, "Where", 3, (const char *[]){c, in[1], in[2]}, 1, out, 0, NULL);
  }
  if (strcmp(name, "rnn") == 0) return ex_rnn(E, id, op, p, in, out, nout);
  return efail(E, "op %s has no ONNX form in luamx's exporter", name);
}

/* MXNet's fused RNN: one ONNX LSTM/GRU/RNN per layer, the packed parameter vector (a
 * constant) unpacked into W, R, B with ONNX's gate order; the layers chained through
 * (T, D, N, H) -> (T, N, D*H). */
static int ex_rnn(ex *E, int id, int op, const void *p, const char *const *in, const char *const *out,
                  int nout) {
  char mb[16];
  const char *mode = pstr(E, op, p, "mode", mb, sizeof mb);
  int G = strcmp(mode, "lstm") == 0 ? 4 : strcmp(mode, "gru") == 0 ? 3 : 1;
  static const int lstm[4] = {0, 3, 1, 2}, gru[3] = {1, 0, 2}, one[1] = {0};
  const int *from = G == 4 ? lstm : G == 3 ? gru : one; /* ONNX gate j <- luamx gate from[j] */
  int64_t H = pint(E, op, p, "state_size", 0), L = pint(E, op, p, "num_layers", 1);
  int D = pbool(E, op, p, "bidirectional", false) ? 2 : 1;
  if (pbool(E, op, p, "use_sequence_length", false)) return efail(E, "RNN with sequence lengths");
  if (pint(E, op, p, "projection_size", 0) > 0) return efail(E, "LSTMP has no ONNX form");
  int oi;
  int src = mx_graph_node_input(E->g, id, 1, &oi);
  mx_tensor *P = mx_graph_node_value(E->g, src);
  if (!P) return efail(E, "the RNN's parameters must be a constant (a parameter with a value)");
  const mx_desc *x = in_desc(E, id, 0);
  int64_t I = x->shape[2];
  int dt = mx_tensor_dtype(P);
  const void *pp = mx_tensor_data(P);
  int64_t woff = 0, boff = 0;
  for (int64_t l = 0; l < L; l++) boff += D * G * H * ((l == 0 ? I : D * H) + H);
  const char *layer_in = in[0], *hs[16], *cs[16];
  if (L > 16) return efail(E, "more than 16 layers");
  for (int64_t l = 0; l < L; l++) {
    int64_t inl = l == 0 ? I : D * H;
    int64_t ws[3] = {D, G * H, inl}, rs[3] = {D, G * H, H}, bs[2] = {D, 2 * G * H};
    mx_tensor *W, *R, *B;
    int rc = mx_tensor_new(3, ws, dt, MX_CPU, 0, &W);
    if (!rc) rc = mx_tensor_new(3, rs, dt, MX_CPU, 0, &R);
    if (!rc) rc = mx_tensor_new(2, bs, dt, MX_CPU, 0, &B);
    if (rc) return rc;
    for (int d = 0; d < D; d++) {
      for (int j = 0; j < G; j++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < inl; i++)
            mx_store_f64(mx_ptr(W), dt, ((d * G + j) * H + h) * inl + i,
                         mx_load_f64(pp, dt, woff + (from[j] * H + h) * inl + i));
      woff += G * H * inl;
      for (int j = 0; j < G; j++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < H; i++)
            mx_store_f64(mx_ptr(R), dt, ((d * G + j) * H + h) * H + i,
                         mx_load_f64(pp, dt, woff + (from[j] * H + h) * H + i));
      woff += G * H * H;
      for (int part = 0; part < 2; part++)
        for (int j = 0; j < G; j++)
          for (int64_t h = 0; h < H; h++)
            mx_store_f64(mx_ptr(B), dt, d * 2 * G * H + part * G * H + j * H + h,
                         mx_load_f64(pp, dt, boff + part * G * H + from[j] * H + h));
      boff += 2 * G * H;
    }
    const char *wn = estr(E, "%s_W%lld", mx_graph_node_name(E->g, id), (long long)l);
    const char *rn = estr(E, "%s_R%lld", mx_graph_node_name(E->g, id), (long long)l);
    const char *bn = estr(E, "%s_B%lld", mx_graph_node_name(E->g, id), (long long)l);
    rc = init_tensor(E, wn, W);
    if (!rc) rc = init_tensor(E, rn, R);
    if (!rc) rc = init_tensor(E, bn, B);
    mx_tensor_release(W), mx_tensor_release(R), mx_tensor_release(B);
    if (rc) return rc;
    /* this layer's initial states: rows [l*D, (l+1)*D) of the state inputs */
    int64_t st = l * D, en = (l + 1) * D, ax = 0;
    const char *cst = c_i64(E, 1, &st), *cen = c_i64(E, 1, &en), *cax = c_i64(E, 1, &ax);
    const char *h0 = tmpname(E), *c0 = G == 4 ? tmpname(E) : "";
    if (!cst || !cen || !cax) return MX_ENOMEM;
    if ((rc = enode(E, "Slice", 4, (const char *[]){in[2], cst, cen, cax}, 1, &h0, 0, NULL))) return rc;
    if (G == 4 && (rc = enode(E, "Slice", 4, (const char *[]){in[3], cst, cen, cax}, 1, &c0, 0, NULL)))
      return rc;
    const char *y = tmpname(E);
    hs[l] = tmpname(E), cs[l] = G == 4 ? tmpname(E) : "";
    const char *ins[7] = {layer_in, wn, rn, bn, "", h0, c0};
    const char *outs[3] = {y, hs[l], cs[l]};
    attr a[4] = {AI("hidden_size", H), AS("direction", D == 2 ? "bidirectional" : "forward"),
                 AI("linear_before_reset", 1), AS("activations", "")};
    int na = 2;
    if (G == 3) na = 3;
    const char *ot = G == 4 ? "LSTM" : G == 3 ? "GRU" : "RNN";
    Onnx__NodeProto *node;
    if ((rc = enode(E, ot, G == 4 ? 7 : 6, ins, G == 4 ? 3 : 2, outs, na, a))) return rc;
    node = E->nodes[E->nn - 1];
    if (G == 1) { /* activations: one per direction */
      Onnx__AttributeProto *pa = ealloc(E, sizeof *pa);
      if (!pa) return MX_ENOMEM;
      onnx__attribute_proto__init(pa);
      pa->name = estr(E, "activations");
      pa->has_type = 1, pa->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
      pa->n_strings = (size_t)D, pa->strings = ealloc(E, sizeof(ProtobufCBinaryData) * (size_t)D);
      const char *f = strcmp(mode, "rnn_relu") == 0 ? "Relu" : "Tanh";
      for (int d = 0; d < D; d++) pa->strings[d].data = (uint8_t *)estr(E, "%s", f), pa->strings[d].len = 4;
      Onnx__AttributeProto **na2 = ealloc(E, sizeof(void *) * (node->n_attribute + 1));
      if (!na2) return MX_ENOMEM;
      for (size_t i = 0; i < node->n_attribute; i++) na2[i] = node->attribute[i];
      na2[node->n_attribute++] = pa;
      node->attribute = na2;
    }
    /* (T, D, N, H) -> (T, N, D*H) */
    const char *tr = tmpname(E), *dst = l == L - 1 ? out[0] : tmpname(E);
    int64_t perm[4] = {0, 2, 1, 3}, rs3[3] = {0, 0, -1};
    if ((rc = NODE1("Transpose", y, tr, AV("perm", 4, perm)))) return rc;
    const char *c3 = c_i64(E, 3, rs3);
    if (!c3 || (rc = NODE2N("Reshape", tr, c3, dst))) return c3 ? rc : MX_ENOMEM;
    layer_in = dst;
  }
  for (int k = 1; k < nout && k < (G == 4 ? 3 : 2); k++) {
    const char **parts = k == 1 ? hs : cs;
    int rc = L == 1 ? NODE1N("Identity", parts[0], out[k])
                    : enode(E, "Concat", (int)L, parts, 1, &out[k], 1, (attr[]){AI("axis", 0)});
    if (rc) return rc;
  }
  return MX_OK;
}

/* ---- the model ------------------------------------------------------------------------------- */

static Onnx__ValueInfoProto *value_info(ex *E, const char *name, const mx_desc *d) {
  Onnx__ValueInfoProto *vi = ealloc(E, sizeof *vi);
  Onnx__TypeProto *tp = ealloc(E, sizeof *tp);
  Onnx__TypeProto__Tensor *tt = ealloc(E, sizeof *tt);
  Onnx__TensorShapeProto *sp = ealloc(E, sizeof *sp);
  if (!vi || !tp || !tt || !sp) return NULL;
  onnx__value_info_proto__init(vi);
  onnx__type_proto__init(tp);
  onnx__type_proto__tensor__init(tt);
  onnx__tensor_shape_proto__init(sp);
  vi->name = estr(E, "%s", name);
  vi->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
  tt->has_elem_type = 1, tt->elem_type = ox_onnx_type(d->dtype);
  tt->shape = sp;
  sp->n_dim = (size_t)(d->ndim < 0 ? 0 : d->ndim);
  sp->dim = ealloc(E, sizeof(void *) * (sp->n_dim + 1));
  for (size_t i = 0; i < sp->n_dim; i++) {
    Onnx__TensorShapeProto__Dimension *dm = ealloc(E, sizeof *dm);
    if (!dm) return NULL;
    onnx__tensor_shape_proto__dimension__init(dm);
    if ((E->dynamic && i == 0) || d->shape[i] < 0) {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dm->dim_param = estr(E, i == 0 ? "N" : "d%zu", i);
    } else {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
      dm->dim_value = d->shape[i];
    }
    sp->dim[i] = dm;
  }
  return vi;
}

static int build(ex *E, int nin, const mx_desc *in, const char *path) {
  const mx_graph *g = E->g;
  int nn = mx_graph_num_nodes(g), ne = mx_graph_num_entries(g);
  E->ent = ealloc(E, sizeof(mx_desc) * (size_t)(ne + 1));
  E->ename = ealloc(E, sizeof(char *) * (size_t)(ne + 1));
  if (!E->ent || !E->ename) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  for (int e = 0; e < ne; e++) E->ent[e].ndim = -1, E->ent[e].dtype = -1;
  int k = 0, ninputs = 0;
  for (int id = 0; id < nn; id++) {
    if (mx_graph_node_op(g, id) != -1) continue;
    mx_tensor *v = mx_graph_node_value(g, id);
    mx_desc *d = &E->ent[mx_graph_entry(g, id, 0)];
    if (v) mx_desc_from(d, v);
    else if (k < nin) *d = in[k++], ninputs++;
    else return efail(E, "input '%s' has no shape (give in_shapes)", mx_graph_node_name(g, id));
  }
  if (k != nin) return efail(E, "%d input shapes for %d inputs", nin, k);
  if (mx_graph_infer(g, E->ent)) return efail(E, "%s", mx_last_error());
  for (int id = 0; id < nn; id++) {
    int no = mx_graph_node_num_outputs(g, id);
    for (int o = 0; o < no; o++)
      E->ename[mx_graph_entry(g, id, o)] = no == 1 ? estr(E, "%s", mx_graph_node_name(g, id))
                                                   : estr(E, "%s_output%d", mx_graph_node_name(g, id), o);
  }
  Onnx__ValueInfoProto **inputs = ealloc(E, sizeof(void *) * (size_t)(ninputs + 1));
  int nvi = 0;
  for (int id = 0; id < nn; id++) {
    E->node = id;
    int op = mx_graph_node_op(g, id);
    int rc = MX_OK;
    if (op == -1) {
      mx_tensor *v = mx_graph_node_value(g, id);
      if (v) rc = init_tensor(E, mx_graph_node_name(g, id), v);
      else if (!(inputs[nvi++] = value_info(E, mx_graph_node_name(g, id), &E->ent[mx_graph_entry(g, id, 0)])))
        rc = MX_ENOMEM;
    } else if (op < 0) {
      rc = efail(E, "a fused node (export the graph before its passes)");
    } else if (mx_graph_node_num_inputs(g, id) == 0) {
      /* a creation op (zeros of the RNN's begin state): its value, computed now */
      const mx_desc *d = &E->ent[mx_graph_entry(g, id, 0)];
      mx_tensor *t = NULL;
      const char *cn = mx_op_name(op);
      bool filled = strcmp(cn, "zeros") == 0 || strcmp(cn, "ones") == 0 || strcmp(cn, "full") == 0;
      bool known = d->ndim >= 0;
      for (int i = 0; known && i < d->ndim; i++) known = d->shape[i] >= 0;
      if (filled && known) { /* its inferred shape: MXNet's 0 / -1 dims resolved by the data */
        double fill = cn[0] == 'o' ? 1 : cn[0] == 'f' ? pfloat(E, op, mx_graph_node_params(g, id), "value", 0) : 0;
        rc = mx_tensor_new(d->ndim, d->shape, d->dtype, MX_CPU, 0, &t);
        for (int64_t i = 0; !rc && i < mx_tensor_size(t); i++) mx_store_f64(mx_ptr(t), d->dtype, i, fill);
      } else {
        rc = mx_op_invoke(op, 0, NULL, mx_graph_node_params(g, id), 1, &t);
      }
      if (!rc && mx_tensor_ndim(t) != d->ndim) rc = efail(E, "a creation op of unknown shape");
      if (!rc) rc = init_tensor(E, E->ename[mx_graph_entry(g, id, 0)], t);
      mx_tensor_release(t);
    } else {
      rc = export_node(E, id);
    }
    if (rc) return rc;
  }
  E->node = -1;
  int nh = mx_graph_num_heads(g);
  Onnx__ValueInfoProto **outputs = ealloc(E, sizeof(void *) * (size_t)(nh + 1));
  for (int h = 0; h < nh; h++) {
    int oi, node = mx_graph_head(g, h, &oi);
    int e = mx_graph_entry(g, node, oi);
    if (!(outputs[h] = value_info(E, E->ename[e], &E->ent[e]))) return MX_ENOMEM;
  }
  Onnx__GraphProto gp;
  onnx__graph_proto__init(&gp);
  gp.name = "luamx";
  gp.n_node = E->nn, gp.node = E->nodes;
  gp.n_initializer = E->ni, gp.initializer = E->inits;
  gp.n_input = (size_t)nvi, gp.input = inputs;
  gp.n_output = (size_t)nh, gp.output = outputs;
  Onnx__OperatorSetIdProto os;
  onnx__operator_set_id_proto__init(&os);
  os.domain = "", os.has_version = 1, os.version = E->opset;
  Onnx__OperatorSetIdProto *osp = &os;
  Onnx__ModelProto m;
  onnx__model_proto__init(&m);
  m.has_ir_version = 1, m.ir_version = 8;
  m.producer_name = "luamx";
  m.graph = &gp;
  m.n_opset_import = 1, m.opset_import = &osp;
  size_t len = onnx__model_proto__get_packed_size(&m);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory for %zu bytes", len);
  onnx__model_proto__pack(&m, buf);
  int rc = mx_file_write_atomic(path, buf, len);
  free(buf);
  return rc ? mx_err(rc, "mx.onnx.export_model: %s", mx_last_error()) : MX_OK;
}

int mx_onnx_export(const mx_graph *g, int nin, const mx_desc *in, int flags, const char *path) {
  if (!g || !path || (nin > 0 && !in)) return mx_err(MX_EINVAL, "mx.onnx.export_model: bad arguments");
  /* what depends on constants only is computed first (an RNN's parameter vector packed
   * from its weights, a transposed weight): ONNX gets it as an initializer */
  mx_graph *folded = NULL;
  int rc = mx_graph_pass(g, "fold", NULL, &folded);
  if (rc) return mx_err(rc, "mx.onnx.export_model: %s", mx_last_error());
  ex E;
  memset(&E, 0, sizeof E);
  E.g = folded, E.node = -1, E.opset = 17, E.dynamic = (flags & MX_ONNX_DYNAMIC) != 0;
  rc = build(&E, nin, in, path);
  mx_graph_free(folded);
  for (size_t i = 0; i < E.nalloc; i++) free(E.allocs[i]);
  free(E.allocs);
  free(E.nodes);
  free(E.inits);
  return rc;
}
