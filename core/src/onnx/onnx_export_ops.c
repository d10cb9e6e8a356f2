/* onnx_export_ops.c — one luamx graph node as the ONNX node(s) of the same semantics
 * (opset 17): convolutions, pooling, normalizations, activations, shape ops, reductions,
 * elementwise math; the fused RNN is onnx_export_rnn.c's. An op with no ONNX form fails
 * naming the node and the op. docs/onnx.md ("Export"). */
#include "onnx_export.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int64_t ex_pint(ex *E, int op, const void *p, const char *key, int64_t dflt) {
  char b[512];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s || strcmp(s, "None") == 0) return dflt;
  return strtoll(s, NULL, 10);
}

double ex_pfloat(ex *E, int op, const void *p, const char *key, double dflt) {
  char b[512];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s || strcmp(s, "None") == 0) return dflt;
  if (strcmp(s, "inf") == 0) return INFINITY;
  if (strcmp(s, "-inf") == 0) return -INFINITY;
  return strtod(s, NULL);
}

bool ex_pbool(ex *E, int op, const void *p, const char *key, bool dflt) {
  char b[64];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s) return dflt;
  return strcmp(s, "True") == 0 || strcmp(s, "true") == 0 || strcmp(s, "1") == 0;
}

const char *ex_pstr(ex *E, int op, const void *p, const char *key, char *b, size_t cap) {
  const char *s = param(E, op, p, key, b, cap);
  return s ? s : "";
}

int ex_ptuple(ex *E, int op, const void *p, const char *key, int64_t *v, int max) {
  char b[512];
  const char *s = param(E, op, p, key, b, sizeof b);
  if (!s || strcmp(s, "None") == 0 || strcmp(s, "()") == 0) return 0;
  return ints_of(s, v, max);
}

/* ---- ops ----------------------------------------------------------------------------------- */

const char *ex_in_name(ex *E, int id, int k) {
  int oi;
  int src = mx_graph_node_input(E->g, id, k, &oi);
  return E->ename[mx_graph_entry(E->g, src, oi)];
}
const mx_desc *ex_in_desc(ex *E, int id, int k) {
  int oi;
  int src = mx_graph_node_input(E->g, id, k, &oi);
  return &E->ent[mx_graph_entry(E->g, src, oi)];
}

/* conv/deconv windows: pads as ONNX's begin... end... */
static int window(ex *E, int op, const void *p, int ns, int64_t *k, int64_t *s, int64_t *d,
                  int64_t *pads) {
  int64_t t[MX_MAX_DIM];
  int n = ex_ptuple(E, op, p, "kernel", k, MX_MAX_DIM);
  if (n != ns) return ex_fail(E, "kernel has %d dims for %d spatial dims", n, ns);
  for (int i = 0; i < ns; i++) s[i] = 1, d[i] = 1, pads[i] = pads[ns + i] = 0;
  if ((n = ex_ptuple(E, op, p, "stride", t, MX_MAX_DIM)) > 0) for (int i = 0; i < ns && i < n; i++) s[i] = t[i];
  if ((n = ex_ptuple(E, op, p, "dilate", t, MX_MAX_DIM)) > 0) for (int i = 0; i < ns && i < n; i++) d[i] = t[i];
  if ((n = ex_ptuple(E, op, p, "pad", t, MX_MAX_DIM)) > 0)
    for (int i = 0; i < ns && i < n; i++) pads[i] = pads[ns + i] = t[i];
  return MX_OK;
}

static int act(ex *E, const char *name, const char *in, const char *out) {
  if (strcmp(name, "relu") == 0) return NODE1N("Relu", in, out);
  if (strcmp(name, "sigmoid") == 0) return NODE1N("Sigmoid", in, out);
  if (strcmp(name, "tanh") == 0) return NODE1N("Tanh", in, out);
  if (strcmp(name, "softrelu") == 0) return NODE1N("Softplus", in, out);
  if (strcmp(name, "softsign") == 0) return NODE1N("Softsign", in, out);
  return ex_fail(E, "activation '%s' has no ONNX form", name);
}

/* y = x reshaped to the node's inferred shape (dim 0 copied when it is the batch) */
static int reshape_to(ex *E, const char *in, const mx_desc *x, const mx_desc *y, const char *out) {
  int64_t s[MX_MAX_DIM];
  for (int i = 0; i < y->ndim; i++) s[i] = y->shape[i];
  if (E->dynamic && y->ndim > 0 && x->ndim > 0 && y->shape[0] == x->shape[0]) s[0] = 0;
  const char *c = ex_c_i64(E, y->ndim, s);
  return c ? NODE2N("Reshape", in, c, out) : MX_ENOMEM;
}

int ex_export_node(ex *E, int id) {
  int op = mx_graph_node_op(E->g, id);
  const void *p = mx_graph_node_params(E->g, id);
  const char *name = mx_op_name(op);
  int nin = mx_graph_node_num_inputs(E->g, id), nout = mx_graph_node_num_outputs(E->g, id);
  const char *in[64], *out[16];
  if (nin > 64 || nout > 16) return ex_fail(E, "too many inputs or outputs");
  for (int k = 0; k < nin; k++) in[k] = ex_in_name(E, id, k);
  for (int k = 0; k < nout; k++) out[k] = E->ename[mx_graph_entry(E->g, id, k)];
  const mx_desc *y = &E->ent[mx_graph_entry(E->g, id, 0)];
  const mx_desc *x = nin > 0 ? ex_in_desc(E, id, 0) : NULL;
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
      const char *c = ex_c_scalar(E, x->dtype, ex_pfloat(E, op, p, "scalar", 0));
      if (!c) return MX_ENOMEM;
      return SC[i].rev ? NODE2N(SC[i].onnx, c, in[0], out[0]) : NODE2N(SC[i].onnx, in[0], c, out[0]);
    }
  for (size_t i = 0; i < sizeof CMP / sizeof CMP[0]; i++)
    if (strcmp(name, CMP[i].mx) == 0) { /* luamx's comparisons give 0/1 in the inputs' dtype */
      const char *t = ex_tmpname(E), *u = CMP[i].neg ? ex_tmpname(E) : t;
      int rc = NODE2N(CMP[i].onnx, in[0], in[1], t);
      if (!rc && CMP[i].neg) rc = NODE1N("Not", t, u);
      return rc ? rc : NODE1("Cast", u, out[0], AI("to", ox_onnx_type(y->dtype)));
    }
  if (strcmp(name, "convolution") == 0 || strcmp(name, "deconvolution") == 0) {
    bool deconv = name[0] == 'd';
    int ns = x->ndim - 2;
    int rc = window(E, op, p, ns, k3, s3, d3, pads);
    if (rc) return rc;
    bool no_bias = ex_pbool(E, op, p, "no_bias", deconv);
    int64_t group = ex_pint(E, op, p, "num_group", 1);
    attr a[6] = {AV("kernel_shape", ns, k3), AV("strides", ns, s3), AV("dilations", ns, d3),
                 AV("pads", 2 * ns, pads), AI("group", group), AV("output_padding", ns, v)};
    int na = 5;
    if (deconv) {
      int n = ex_ptuple(E, op, p, "adj", v, MX_MAX_DIM);
      for (int i = n; i < ns; i++) v[i] = 0;
      na = 6;
      if (ex_ptuple(E, op, p, "target_shape", k3 + ns, MX_MAX_DIM) > 0)
        return ex_fail(E, "target_shape has no ONNX form here (give pad/adj)");
    }
    char ab[32];
    const char *a_t = strcmp(name, "convolution") == 0 ? ex_pstr(E, op, p, "act_type", ab, sizeof ab) : "none";
    bool fused = a_t[0] && strcmp(a_t, "none") != 0;
    const char *dst = fused ? ex_tmpname(E) : out[0];
    rc = ex_node(E, deconv ? "ConvTranspose" : "Conv", no_bias ? 2 : 3, in, 1, &dst, na, a);
    return rc ? rc : fused ? act(E, a_t, dst, out[0]) : MX_OK;
  }
  if (strcmp(name, "batch_norm") == 0) {
    if (ex_pint(E, op, p, "axis", 1) != 1) return ex_fail(E, "BatchNorm over an axis other than 1");
    const char *ins[5] = {in[0], in[1], in[2], in[3], in[4]};
    if (ex_pbool(E, op, p, "fix_gamma", true)) { /* MXNet: gamma treated as ones */
      const mx_desc *g = ex_in_desc(E, id, 1);
      mx_tensor *t;
      int rc = mx_tensor_new(g->ndim, g->shape, g->dtype, MX_CPU, 0, &t);
      if (rc) return rc;
      for (int64_t i = 0; i < mx_tensor_size(t); i++) mx_store_f64(mx_ptr(t), g->dtype, i, 1.0);
      ins[1] = ex_str(E, "const_%d", E->uniq++);
      rc = ex_init_tensor(E, ins[1], t);
      mx_tensor_release(t);
      if (rc) return rc;
    }
    return ex_node(E, "BatchNormalization", 5, ins, 1, out, 2,
                 (attr[]){AF("epsilon", ex_pfloat(E, op, p, "eps", 1e-3)),
                          AF("momentum", ex_pfloat(E, op, p, "momentum", 0.9))});
  }
  if (strcmp(name, "activation") == 0) {
    char ab[32];
    return act(E, ex_pstr(E, op, p, "act_type", ab, sizeof ab), in[0], out[0]);
  }
  if (strcmp(name, "leaky_relu") == 0) {
    char ab[32];
    const char *t = ex_pstr(E, op, p, "act_type", ab, sizeof ab);
    double sl = ex_pfloat(E, op, p, "slope", 0.25);
    if (strcmp(t, "leaky") == 0) return NODE1("LeakyRelu", in[0], out[0], AF("alpha", sl));
    if (strcmp(t, "elu") == 0) return NODE1("Elu", in[0], out[0], AF("alpha", sl));
    if (strcmp(t, "selu") == 0) return NODE1N("Selu", in[0], out[0]);
    if (strcmp(t, "prelu") == 0) {
      const mx_desc *g = ex_in_desc(E, id, 1);
      const char *r = ex_tmpname(E);
      int64_t s[MX_MAX_DIM];
      s[0] = g->shape[0];
      for (int i = 1; i < x->ndim - 1; i++) s[i] = 1;
      const char *c = ex_c_i64(E, x->ndim - 1, s);
      int rc = c ? NODE2N("Reshape", in[1], c, r) : MX_ENOMEM;
      return rc ? rc : NODE2N("PRelu", in[0], r, out[0]);
    }
    if (strcmp(t, "gelu") == 0) return NODE1N("Gelu", in[0], out[0]);
    return ex_fail(E, "LeakyReLU act_type %s has no ONNX form", t);
  }
  if (strcmp(name, "gelu") == 0) return NODE1N("Gelu", in[0], out[0]);
  if (strcmp(name, "hard_sigmoid") == 0)
    return ex_node(E, "HardSigmoid", 1, in, 1, out, 2, (attr[]){AF("alpha", ex_pfloat(E, op, p, "alpha", 0.2)),
                                                          AF("beta", ex_pfloat(E, op, p, "beta", 0.5))});
  if (strcmp(name, "pooling") == 0) {
    char tb[16], cb[16];
    const char *type = ex_pstr(E, op, p, "pool_type", tb, sizeof tb);
    bool is_max = strcmp(type, "max") == 0;
    if (!is_max && strcmp(type, "avg")) return ex_fail(E, "pool_type %s has no ONNX form", type);
    if (ex_pbool(E, op, p, "global_pool", false))
      return NODE1N(is_max ? "GlobalMaxPool" : "GlobalAveragePool", in[0], out[0]);
    int ns = x->ndim - 2;
    int n = ex_ptuple(E, op, p, "kernel", k3, MX_MAX_DIM);
    if (n != ns) return ex_fail(E, "kernel has %d dims for %d spatial dims", n, ns);
    for (int i = 0; i < ns; i++) s3[i] = 1, pads[i] = pads[ns + i] = 0;
    if ((n = ex_ptuple(E, op, p, "stride", v, MX_MAX_DIM)) > 0) for (int i = 0; i < ns && i < n; i++) s3[i] = v[i];
    if ((n = ex_ptuple(E, op, p, "pad", v, MX_MAX_DIM)) > 0)
      for (int i = 0; i < ns && i < n; i++) pads[i] = pads[ns + i] = v[i];
    const char *conv = ex_pstr(E, op, p, "pooling_convention", cb, sizeof cb);
    attr a[4] = {AV("kernel_shape", ns, k3), AV("strides", ns, s3), AV("pads", 2 * ns, pads),
                 AI("ceil_mode", strcmp(conv, "full") == 0)};
    if (is_max) return ex_node(E, "MaxPool", 1, in, 1, out, 4, a);
    attr b2[5] = {a[0], a[1], a[2], a[3], AI("count_include_pad", ex_pbool(E, op, p, "count_include_pad", true))};
    return ex_node(E, "AveragePool", 1, in, 1, out, 5, b2);
  }
  if (strcmp(name, "adaptive_avg_pooling2d") == 0) {
    /* output cell i averages input rows floor(i*H/O) .. ceil((i+1)*H/O)-1: a global pool
     * for 1 x 1 (SE blocks), else an AveragePool of kernel = stride = H/O where O divides H
     * (other sizes have windows of unequal sizes, which no ONNX pooling has) */
    if (x->ndim != 4 || y->ndim != 4) return ex_fail(E, "needs NCHW data");
    if (y->shape[2] == 1 && y->shape[3] == 1) return NODE1N("GlobalAveragePool", in[0], out[0]);
    for (int i = 0; i < 2; i++) {
      if (y->shape[2 + i] < 1 || x->shape[2 + i] % y->shape[2 + i])
        return ex_fail(E, "output size %lld does not divide the input's %lld (windows of unequal "
                       "sizes have no ONNX form)", (long long)y->shape[2 + i], (long long)x->shape[2 + i]);
      k3[i] = s3[i] = x->shape[2 + i] / y->shape[2 + i], pads[i] = pads[2 + i] = 0;
    }
    attr a[3] = {AV("kernel_shape", 2, k3), AV("strides", 2, s3), AV("pads", 4, pads)};
    return ex_node(E, "AveragePool", 1, in, 1, out, 3, a);
  }
  if (strcmp(name, "fully_connected") == 0) {
    bool no_bias = ex_pbool(E, op, p, "no_bias", false), flat = ex_pbool(E, op, p, "flatten", true);
    char ab[16];
    const char *a_t = ex_pstr(E, op, p, "act_type", ab, sizeof ab);
    bool fused = a_t[0] && strcmp(a_t, "none") != 0;
    const char *dst = fused ? ex_tmpname(E) : out[0];
    int rc;
    if (flat || x->ndim == 2) {
      const char *xin = in[0];
      if (x->ndim != 2) {
        xin = ex_tmpname(E);
        if ((rc = NODE1("Flatten", in[0], xin, AI("axis", 1)))) return rc;
      }
      const char *gi[3] = {xin, in[1], no_bias ? "" : in[2]};
      rc = ex_node(E, "Gemm", no_bias ? 2 : 3, gi, 1, &dst, 1, (attr[]){AI("transB", 1)});
    } else { /* over the last axis: x W^T (+ b) */
      const char *wt = ex_tmpname(E), *mm = no_bias ? dst : ex_tmpname(E);
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
    if (strcmp(name, "squeeze") == 0 && ex_ptuple(E, op, p, "axis", v, MX_MAX_DIM) == 0)
      return NODE1N("Squeeze", in[0], out[0]);
    return reshape_to(E, in[0], x, y, out[0]);
  }
  if (strcmp(name, "transpose") == 0) {
    int n = ex_ptuple(E, op, p, "axes", v, MX_MAX_DIM);
    if (n == 0) return NODE1N("Transpose", in[0], out[0]);
    for (int i = 0; i < n; i++) if (v[i] < 0) v[i] += x->ndim;
    return NODE1("Transpose", in[0], out[0], AV("perm", n, v));
  }
  if (strcmp(name, "swapaxes") == 0) {
    int64_t a1 = ex_pint(E, op, p, "dim1", 0), a2 = ex_pint(E, op, p, "dim2", 0), perm[MX_MAX_DIM];
    for (int i = 0; i < x->ndim; i++) perm[i] = i == a1 ? a2 : i == a2 ? a1 : i;
    return NODE1("Transpose", in[0], out[0], AV("perm", x->ndim, perm));
  }
  if (strcmp(name, "concat") == 0) {
    int64_t ax = ex_pint(E, op, p, "dim", 1);
    return ex_node(E, "Concat", nin, in, 1, out, 1, (attr[]){AI("axis", ax)});
  }
  if (strcmp(name, "softmax") == 0 || strcmp(name, "log_softmax") == 0) {
    if (nin > 1) return ex_fail(E, "softmax with length has no ONNX form");
    return NODE1(name[0] == 's' ? "Softmax" : "LogSoftmax", in[0], out[0], AI("axis", ex_pint(E, op, p, "axis", -1)));
  }
  if (strcmp(name, "clip") == 0) {
    const char *lo = ex_c_scalar(E, x->dtype, ex_pfloat(E, op, p, "a_min", -INFINITY));
    const char *hi = ex_c_scalar(E, x->dtype, ex_pfloat(E, op, p, "a_max", INFINITY));
    if (!lo || !hi) return MX_ENOMEM;
    return ex_node(E, "Clip", 3, (const char *[]){in[0], lo, hi}, 1, out, 0, NULL);
  }
  if (strcmp(name, "cast") == 0) {
    int ot = ox_onnx_type(y->dtype);
    if (!ot) return ex_fail(E, "cast to %s has no ONNX type", mx_dtype_name(y->dtype));
    return NODE1("Cast", in[0], out[0], AI("to", ot));
  }
  if (strcmp(name, "broadcast_to") == 0 || strcmp(name, "broadcast_like") == 0 ||
      strcmp(name, "broadcast_axis") == 0) {
    const char *c = ex_c_i64(E, y->ndim, y->shape);
    return c ? NODE2N("Expand", in[0], c, out[0]) : MX_ENOMEM;
  }
  if (strcmp(name, "batch_dot") == 0 || strcmp(name, "dot") == 0 || strcmp(name, "matmul") == 0) {
    bool ta = ex_pbool(E, op, p, "transpose_a", false), tb = ex_pbool(E, op, p, "transpose_b", false);
    const char *a = in[0], *bb = in[1];
    int rc = MX_OK;
    const mx_desc *bd = ex_in_desc(E, id, 1);
    int64_t perm[MX_MAX_DIM];
    if (ta) {
      for (int i = 0; i < x->ndim; i++) perm[i] = i;
      perm[x->ndim - 2] = x->ndim - 1, perm[x->ndim - 1] = x->ndim - 2;
      a = ex_tmpname(E);
      rc = NODE1("Transpose", in[0], a, AV("perm", x->ndim, perm));
    }
    if (!rc && tb) {
      for (int i = 0; i < bd->ndim; i++) perm[i] = i;
      perm[bd->ndim - 2] = bd->ndim - 1, perm[bd->ndim - 1] = bd->ndim - 2;
      bb = ex_tmpname(E);
      rc = NODE1("Transpose", in[1], bb, AV("perm", bd->ndim, perm));
    }
    if (!rc && strcmp(name, "dot") == 0 && (x->ndim != 2 || bd->ndim != 2))
      return ex_fail(E, "dot of non-matrices has no ONNX MatMul form");
    return rc ? rc : NODE2N("MatMul", a, bb, out[0]);
  }
  if (strcmp(name, "layer_norm") == 0) {
    int64_t ax = ex_pint(E, op, p, "axis", -1);
    return ex_node(E, "LayerNormalization", 3, in, 1, out, 2,
                 (attr[]){AI("axis", ax), AF("epsilon", ex_pfloat(E, op, p, "eps", 1e-5))});
  }
  if (strcmp(name, "sum") == 0 || strcmp(name, "mean") == 0 || strcmp(name, "max") == 0 ||
      strcmp(name, "min") == 0 || strcmp(name, "prod") == 0) {
    int n = ex_ptuple(E, op, p, "axis", v, MX_MAX_DIM);
    bool keep = ex_pbool(E, op, p, "keepdims", false);
    const char *ot = name[1] == 'u' ? "ReduceSum" : name[1] == 'e' ? "ReduceMean" : name[1] == 'a' ? "ReduceMax"
                     : name[1] == 'i' ? "ReduceMin" : "ReduceProd";
    if (n == 0) { n = x->ndim; for (int i = 0; i < n; i++) v[i] = i; }
    if (strcmp(ot, "ReduceSum") == 0) { /* opset 13: axes as an input */
      const char *c = ex_c_i64(E, n, v);
      if (!c) return MX_ENOMEM;
      return ex_node(E, ot, 2, (const char *[]){in[0], c}, 1, out, 1, (attr[]){AI("keepdims", keep)});
    }
    return ex_node(E, ot, 1, in, 1, out, 2, (attr[]){AV("axes", n, v), AI("keepdims", keep)});
  }
  if (strcmp(name, "slice_axis") == 0) {
    int64_t ax = ex_pint(E, op, p, "axis", 0), bg = ex_pint(E, op, p, "begin", 0);
    int64_t en = ex_pint(E, op, p, "end", INT64_MIN);
    if (en == INT64_MIN) en = INT64_MAX;
    const char *cs = ex_c_i64(E, 1, &bg), *ce = ex_c_i64(E, 1, &en), *ca = ex_c_i64(E, 1, &ax);
    if (!cs || !ce || !ca) return MX_ENOMEM;
    return ex_node(E, "Slice", 4, (const char *[]){in[0], cs, ce, ca}, 1, out, 0, NULL);
  }
  if (strcmp(name, "embedding") == 0) {
    const char *ix = ex_tmpname(E);
    int rc = NODE1("Cast", in[0], ix, AI("to", 7));
    return rc ? rc : NODE2N("Gather", in[1], ix, out[0]);
  }
  if (strcmp(name, "where") == 0) {
    const char *c = ex_tmpname(E);
    int rc = NODE1("Cast", in[0], c, AI("to", 9));
    return rc ? rc : ex_node(E, "Where", 3, (const char *[]){c, in[1], in[2]}, 1, out, 0, NULL);
  }
  if (strcmp(name, "rnn") == 0) return ex_rnn(E, id, op, p, in, out, nout);
  return ex_fail(E, "op %s has no ONNX form in luamx's exporter", name);
}
