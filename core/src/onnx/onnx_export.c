/* onnx_export.c — a luamx graph as an ONNX model (mx_onnx_export; Lua: mx.onnx.export_model,
 * HybridBlock:export_onnx). Variables with values become initializers, the others the
 * model's inputs; the graph's shapes are inferred for the given inputs (MXNet's reshape
 * codes and broadcasts then become explicit ONNX shapes); each node becomes the ONNX
 * node(s) of the same semantics (opset 17, onnx_export_ops.c), or the export fails naming
 * the node and the op. This file builds the protobuf structs (nodes, initializers, value
 * infos) and writes the model, packed with protobuf-c, atomically. docs/onnx.md
 * ("Export"). */
#include "onnx_export.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *ex_alloc(ex *E, size_t n) {
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

char *ex_str(ex *E, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  char *s = ex_alloc(E, strlen(buf) + 1);
  if (s) strcpy(s, buf);
  return s;
}

int ex_fail(ex *E, const char *fmt, ...) {
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

int ex_node(ex *E, const char *op_type, int nin, const char *const *in, int nout,
            const char *const *out, int na, const attr *a) {
  Onnx__NodeProto *n = ex_alloc(E, sizeof *n);
  if (!n) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  onnx__node_proto__init(n);
  n->op_type = ex_str(E, "%s", op_type);
  n->name = ex_str(E, "%s_%d", op_type, E->uniq++);
  n->n_input = (size_t)nin, n->input = ex_alloc(E, sizeof(char *) * (size_t)(nin + 1));
  n->n_output = (size_t)nout, n->output = ex_alloc(E, sizeof(char *) * (size_t)(nout + 1));
  n->n_attribute = (size_t)na, n->attribute = ex_alloc(E, sizeof(void *) * (size_t)(na + 1));
  if (!n->input || !n->output || !n->attribute) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  for (int i = 0; i < nin; i++) n->input[i] = ex_str(E, "%s", in[i]);
  for (int i = 0; i < nout; i++) n->output[i] = ex_str(E, "%s", out[i]);
  for (int i = 0; i < na; i++) {
    Onnx__AttributeProto *p = ex_alloc(E, sizeof *p);
    if (!p) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
    onnx__attribute_proto__init(p);
    p->name = ex_str(E, "%s", a[i].name);
    p->has_type = 1;
    switch (a[i].kind) {
    case A_INT: p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, p->has_i = 1, p->i = a[i].i; break;
    case A_FLOAT: p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, p->has_f = 1, p->f = (float)a[i].f; break;
    case A_STR:
      p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, p->has_s = 1;
      p->s.data = (uint8_t *)ex_str(E, "%s", a[i].s), p->s.len = strlen(a[i].s);
      break;
    default:
      p->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
      p->n_ints = (size_t)a[i].n, p->ints = ex_alloc(E, sizeof(int64_t) * (size_t)(a[i].n + 1));
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
int ex_init_tensor(ex *E, const char *name, mx_tensor *t) {
  int ot = ox_onnx_type(mx_tensor_dtype(t));
  if (!ot) return ex_fail(E, "a constant of dtype %s has no ONNX type", mx_dtype_name(mx_tensor_dtype(t)));
  Onnx__TensorProto *p = ex_alloc(E, sizeof *p);
  if (!p) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  onnx__tensor_proto__init(p);
  p->name = ex_str(E, "%s", name);
  p->has_data_type = 1, p->data_type = ot;
  int nd = mx_tensor_ndim(t);
  p->n_dims = (size_t)nd, p->dims = ex_alloc(E, sizeof(int64_t) * (size_t)(nd + 1));
  for (int i = 0; i < nd; i++) p->dims[i] = mx_tensor_dim(t, i);
  size_t bytes = (size_t)mx_tensor_size(t) * mx_dtype_size(mx_tensor_dtype(t));
  void *src = mx_tensor_data(t);
  if (bytes && !src) return ex_fail(E, "a constant could not be read");
  p->has_raw_data = 1, p->raw_data.len = bytes, p->raw_data.data = ex_alloc(E, bytes);
  if (!p->raw_data.data) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  if (bytes) memcpy(p->raw_data.data, src, bytes);
  return add_init(E, p);
}

/* A new constant of n int64 (n < 0: a scalar), its name returned. */
const char *ex_c_i64(ex *E, int n, const int64_t *v) {
  int64_t s[1] = {n < 0 ? 1 : n};
  mx_tensor *t;
  if (mx_tensor_new(n < 0 ? 0 : 1, s, MX_I64, MX_CPU, 0, &t)) return NULL;
  if (n != 0) memcpy(mx_ptr(t), v, sizeof(int64_t) * (size_t)(n < 0 ? 1 : n));
  const char *name = ex_str(E, "const_%d", E->uniq++);
  int rc = ex_init_tensor(E, name, t);
  mx_tensor_release(t);
  return rc ? NULL : name;
}

/* A scalar constant of dtype dt. */
const char *ex_c_scalar(ex *E, int dt, double v) {
  mx_tensor *t;
  if (mx_tensor_new(0, NULL, dt, MX_CPU, 0, &t)) return NULL;
  mx_store_f64(mx_ptr(t), dt, 0, v);
  const char *name = ex_str(E, "const_%d", E->uniq++);
  int rc = ex_init_tensor(E, name, t);
  mx_tensor_release(t);
  return rc ? NULL : name;
}

const char *ex_tmpname(ex *E) { return ex_str(E, "t_%d", E->uniq++); }

/* ---- the model ------------------------------------------------------------------------------- */

static Onnx__ValueInfoProto *value_info(ex *E, const char *name, const mx_desc *d) {
  Onnx__ValueInfoProto *vi = ex_alloc(E, sizeof *vi);
  Onnx__TypeProto *tp = ex_alloc(E, sizeof *tp);
  Onnx__TypeProto__Tensor *tt = ex_alloc(E, sizeof *tt);
  Onnx__TensorShapeProto *sp = ex_alloc(E, sizeof *sp);
  if (!vi || !tp || !tt || !sp) return NULL;
  onnx__value_info_proto__init(vi);
  onnx__type_proto__init(tp);
  onnx__type_proto__tensor__init(tt);
  onnx__tensor_shape_proto__init(sp);
  vi->name = ex_str(E, "%s", name);
  vi->type = tp;
  tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, tp->tensor_type = tt;
  tt->has_elem_type = 1, tt->elem_type = ox_onnx_type(d->dtype);
  tt->shape = sp;
  sp->n_dim = (size_t)(d->ndim < 0 ? 0 : d->ndim);
  sp->dim = ex_alloc(E, sizeof(void *) * (sp->n_dim + 1));
  for (size_t i = 0; i < sp->n_dim; i++) {
    Onnx__TensorShapeProto__Dimension *dm = ex_alloc(E, sizeof *dm);
    if (!dm) return NULL;
    onnx__tensor_shape_proto__dimension__init(dm);
    if ((E->dynamic && i == 0) || d->shape[i] < 0) {
      dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
      dm->dim_param = ex_str(E, i == 0 ? "N" : "d%zu", i);
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
  E->ent = ex_alloc(E, sizeof(mx_desc) * (size_t)(ne + 1));
  E->ename = ex_alloc(E, sizeof(char *) * (size_t)(ne + 1));
  if (!E->ent || !E->ename) return mx_err(MX_ENOMEM, "mx.onnx.export_model: out of memory");
  for (int e = 0; e < ne; e++) E->ent[e].ndim = -1, E->ent[e].dtype = -1;
  int k = 0, ninputs = 0;
  for (int id = 0; id < nn; id++) {
    if (mx_graph_node_op(g, id) != -1) continue;
    mx_tensor *v = mx_graph_node_value(g, id);
    mx_desc *d = &E->ent[mx_graph_entry(g, id, 0)];
    if (v) mx_desc_from(d, v);
    else if (k < nin) *d = in[k++], ninputs++;
    else return ex_fail(E, "input '%s' has no shape (give in_shapes)", mx_graph_node_name(g, id));
  }
  if (k != nin) return ex_fail(E, "%d input shapes for %d inputs", nin, k);
  if (mx_graph_infer(g, E->ent)) return ex_fail(E, "%s", mx_last_error());
  for (int id = 0; id < nn; id++) {
    int no = mx_graph_node_num_outputs(g, id);
    for (int o = 0; o < no; o++)
      E->ename[mx_graph_entry(g, id, o)] = no == 1 ? ex_str(E, "%s", mx_graph_node_name(g, id))
                                                   : ex_str(E, "%s_output%d", mx_graph_node_name(g, id), o);
  }
  Onnx__ValueInfoProto **inputs = ex_alloc(E, sizeof(void *) * (size_t)(ninputs + 1));
  int nvi = 0;
  for (int id = 0; id < nn; id++) {
    E->node = id;
    int op = mx_graph_node_op(g, id);
    int rc = MX_OK;
    if (op == -1) {
      mx_tensor *v = mx_graph_node_value(g, id);
      if (v) rc = ex_init_tensor(E, mx_graph_node_name(g, id), v);
      else if (!(inputs[nvi++] = value_info(E, mx_graph_node_name(g, id), &E->ent[mx_graph_entry(g, id, 0)])))
        rc = MX_ENOMEM;
    } else if (op < 0) {
      rc = ex_fail(E, "a fused node (export the graph before its passes)");
    } else if (mx_graph_node_num_inputs(g, id) == 0) {
      /* a creation op (zeros of the RNN's begin state): its value, computed now */
      const mx_desc *d = &E->ent[mx_graph_entry(g, id, 0)];
      mx_tensor *t = NULL;
      const char *cn = mx_op_name(op);
      bool filled = strcmp(cn, "zeros") == 0 || strcmp(cn, "ones") == 0 || strcmp(cn, "full") == 0;
      bool known = d->ndim >= 0;
      for (int i = 0; known && i < d->ndim; i++) known = d->shape[i] >= 0;
      if (filled && known) { /* its inferred shape: MXNet's 0 / -1 dims resolved by the data */
        double fill = cn[0] == 'o' ? 1 : cn[0] == 'f' ? ex_pfloat(E, op, mx_graph_node_params(g, id), "value", 0) : 0;
        rc = mx_tensor_new(d->ndim, d->shape, d->dtype, MX_CPU, 0, &t);
        for (int64_t i = 0; !rc && i < mx_tensor_size(t); i++) mx_store_f64(mx_ptr(t), d->dtype, i, fill);
      } else {
        rc = mx_op_invoke(op, 0, NULL, mx_graph_node_params(g, id), 1, &t);
      }
      if (!rc && mx_tensor_ndim(t) != d->ndim) rc = ex_fail(E, "a creation op of unknown shape");
      if (!rc) rc = ex_init_tensor(E, E->ename[mx_graph_entry(g, id, 0)], t);
      mx_tensor_release(t);
    } else {
      rc = ex_export_node(E, id);
    }
    if (rc) return rc;
  }
  E->node = -1;
  int nh = mx_graph_num_heads(g);
  Onnx__ValueInfoProto **outputs = ex_alloc(E, sizeof(void *) * (size_t)(nh + 1));
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
