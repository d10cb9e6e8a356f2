/* onnx_import.c — ONNX models as luamx graphs: the values table, emission (constant
 * evaluation at import time or a graph node), the node loop, subgraphs and the public
 * entry points of mx.h ("ONNX"). onnx_internal.h describes the design; docs/onnx.md the
 * behaviour. */
#include "onnx_internal.h"

#include "xfile.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MODEL_BYTES ((size_t)2 << 30) /* protobuf's own 2 GiB message limit */
#define MAX_FOLD_BYTES ((size_t)64 << 20)  /* import-time evaluation: outputs up to 64 MiB */

/* ---- messages ---------------------------------------------------------------------- */

static int vfail(ox *X, bool unsupported, const char *fmt, va_list ap) {
  char msg[640];
  vsnprintf(msg, sizeof msg, fmt, ap);
  const Onnx__NodeProto *n = X->node;
  if (n)
    return mx_err(MX_EINVAL, "onnx: %s: node '%s' (%s): %s%s", X->file,
                  n->name && *n->name ? n->name : (n->n_output ? n->output[0] : "?"),
                  n->op_type ? n->op_type : "?", unsupported ? "unsupported: " : "", msg);
  return mx_err(MX_EINVAL, "onnx: %s: %s%s", X->file, unsupported ? "unsupported: " : "", msg);
}

int ox_fail(ox *X, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = vfail(X, false, fmt, ap);
  va_end(ap);
  return rc;
}

int ox_unsupported(ox *X, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = vfail(X, true, fmt, ap);
  va_end(ap);
  return rc;
}

/* ---- values -------------------------------------------------------------------------- */

ox_val *ox_new(ox *X) {
  ox_val *v = calloc(1, sizeof *v);
  if (!v) return NULL;
  v->node = -1, v->cnode = -1;
  v->d.ndim = -1, v->d.dtype = -1, v->d.dev_type = MX_CPU;
  v->next_alloc = X->allocs;
  X->allocs = v;
  return v;
}

ox_val *ox_seq(ox *X, int n, ox_val *const *items) {
  ox_val *v = ox_new(X);
  if (!v) return NULL;
  v->is_seq = true;
  v->nseq = n;
  if (!(v->seq = calloc((size_t)(n > 0 ? n : 1), sizeof *v->seq))) return NULL;
  for (int i = 0; i < n; i++) v->seq[i] = items[i];
  return v;
}

ox_val *ox_const(ox *X, mx_tensor *t) {
  ox_val *v = ox_new(X);
  if (!v) {
    mx_tensor_release(t);
    return NULL;
  }
  v->c = t;
  mx_desc_from(&v->d, t);
  return v;
}

ox_val *ox_const_vec(ox *X, int dtype, int n, const double *vals) {
  int64_t shape[1] = {n < 0 ? 1 : n};
  mx_tensor *t;
  if (mx_tensor_new(n < 0 ? 0 : 1, shape, dtype, MX_CPU, 0, &t)) return NULL;
  for (int i = 0; i < (n < 0 ? 1 : n); i++) mx_store_f64(mx_ptr(t), dtype, i, vals[i]);
  return ox_const(X, t);
}

ox_val *ox_scalar(ox *X, int dtype, double v) { return ox_const_vec(X, dtype, -1, &v); }

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h;
}

ox_val *ox_lookup(ox *X, const char *name) {
  if (!X->tcap || !name) return NULL;
  for (size_t i = hash(name) & (X->tcap - 1);; i = (i + 1) & (X->tcap - 1)) {
    if (!X->tab[i].key) return NULL;
    if (strcmp(X->tab[i].key, name) == 0) return X->tab[i].v;
  }
}

int ox_bind(ox *X, const char *name, ox_val *v) {
  if (!name || !*name) return MX_OK; /* an unused optional output */
  if (2 * (X->tn + 1) > X->tcap) {
    size_t nc = X->tcap ? 2 * X->tcap : 256;
    ox_slot *nt = calloc(nc, sizeof *nt);
    if (!nt) return mx_err(MX_ENOMEM, "onnx: out of memory");
    for (size_t i = 0; i < X->tcap; i++) {
      if (!X->tab[i].key) continue;
      size_t j = hash(X->tab[i].key) & (nc - 1);
      while (nt[j].key) j = (j + 1) & (nc - 1);
      nt[j] = X->tab[i];
    }
    free(X->tab);
    X->tab = nt, X->tcap = nc;
  }
  size_t i = hash(name) & (X->tcap - 1);
  while (X->tab[i].key && strcmp(X->tab[i].key, name) != 0) i = (i + 1) & (X->tcap - 1);
  if (!X->tab[i].key) {
    if (!(X->tab[i].key = strdup(name))) return mx_err(MX_ENOMEM, "onnx: out of memory");
    X->tn++;
  }
  X->tab[i].v = v; /* a subgraph may shadow an outer name */
  if (!v->name) v->name = X->tab[i].key;
  return MX_OK;
}

/* ---- emission ------------------------------------------------------------------------ */

static const char *node_base(const ox *X) {
  const Onnx__NodeProto *n = X->node;
  if (!n) return "onnx";
  if (n->n_output && n->output[0] && *n->output[0]) return n->output[0];
  return n->name && *n->name ? n->name : "onnx";
}

/* The graph entry of v, making a constant a variable (with its value) the first time. */
static int entry(ox *X, ox_val *v, int *node, int *out) {
  if (!v->c) {
    *node = v->node, *out = v->out;
    return MX_OK;
  }
  if (v->cnode < 0) {
    char name[320];
    if (v->name) snprintf(name, sizeof name, "%s", v->name);
    else snprintf(name, sizeof name, "%s_const%d", node_base(X), X->uniq++);
    if (v->name && X->depth > 0) { /* an unrolled Loop body names its constants once per copy */
      bool taken = false;
      for (int i = 0, n = mx_graph_num_nodes(X->g); i < n && !taken; i++)
        taken = mx_graph_node_op(X->g, i) == -1 && strcmp(mx_graph_node_name(X->g, i), name) == 0;
      if (taken) snprintf(name, sizeof name, "%s_%d", v->name, X->uniq++);
    }
    int id = mx_graph_add_var(X->g, name);
    if (id < 0) return id;
    int rc = mx_graph_set_value(X->g, id, v->c);
    if (rc) return rc;
    v->cnode = id;
  }
  *node = v->cnode, *out = 0;
  return MX_OK;
}

static int emit(ox *X, int op, const char *opname, int nin, ox_val *const *in,
                const char *const *kv, int nout, ox_val **out);

/* The dtype an op that refuses d computes in instead (exactly, for d's values), or -1. */
static int widen(uint32_t mask, int d) {
  static const int ints[] = {MX_I32, MX_I64, MX_F32, MX_F64}, i32[] = {MX_I64, MX_F64},
                   halves[] = {MX_F32, MX_F64};
  const int *c;
  int n;
  if (d == MX_BOOL || d == MX_U8 || d == MX_I8 || d == MX_I16) c = ints, n = 4;
  else if (d == MX_I32) c = i32, n = 2;
  else if (d == MX_F16 || d == MX_BF16) c = halves, n = 2;
  else return -1;
  for (int k = 0; k < n; k++)
    if (mask & (1u << c[k])) return c[k];
  return -1;
}

int ox_emit(ox *X, const char *opname, int nin, ox_val *const *in, const char *const *kv,
            int nout, ox_val **out) {
  /* a composite passes on the NULL of a step that failed: its error is already set */
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return mx_last_error()[0] ? MX_EINVAL : ox_fail(X, "an input is missing");
    if (in[i]->is_seq) return ox_unsupported(X, "a sequence where a tensor is needed");
  }
  int op = mx_op_find(opname);
  if (op < 0) return ox_fail(X, "internal: no op '%s'", opname);
  /* ONNX types an op of the table does not compute in (int16, bool for arithmetic, uint8
   * pooling): compute in a wider type that holds every value exactly, and give the result
   * back in the inputs' type */
  uint32_t mask = mx_ops[op].dtype_mask;
  ox_val *win[64];
  int orig = -2, wide = -1;
  if (nin <= 64 && !(mx_ops[op].flags & MX_OPF_CREATION) && strcmp(mx_op_name(op), "cast") != 0) {
    for (int i = 0; i < nin; i++) {
      win[i] = in[i];
      int d = in[i]->d.dtype;
      if (d < 0 || (mask & (1u << d))) continue;
      int w = widen(mask, d);
      if (w < 0) continue; /* dispatch names the dtype */
      if (!(win[i] = ox_cast(X, in[i], w))) return MX_EINVAL;
      orig = orig == -2 || orig == d ? d : -1;
      wide = w;
    }
  }
  if (wide < 0) return emit(X, op, opname, nin, in, kv, nout, out);
  int rc = emit(X, op, opname, nin, win, kv, nout, out);
  for (int k = 0; !rc && k < nout; k++)
    if (orig >= 0 && out[k]->d.dtype == wide && !(out[k] = ox_cast(X, out[k], orig))) rc = MX_EINVAL;
  return rc;
}

static int emit(ox *X, int op, const char *opname, int nin, ox_val *const *in,
                const char *const *kv, int nout, ox_val **out) {
  const char *keys[32], *vals[32];
  int na = 0;
  for (; kv && kv[2 * na]; na++) {
    if (na == 32) return ox_fail(X, "internal: too many attributes");
    keys[na] = kv[2 * na], vals[na] = kv[2 * na + 1];
  }
  size_t psize = mx_op_params_size(op);
  uint8_t pbuf[4096];
  if (psize > sizeof pbuf) return ox_fail(X, "internal: params of %s too large", opname);
  memset(pbuf, 0, sizeof pbuf);
  int rc = mx_op_params_parse(op, na, keys, vals, psize ? pbuf : NULL);
  if (rc) return ox_fail(X, "%s", mx_last_error());
  int total = mx_op_num_outputs_for(op, psize ? pbuf : NULL);
  if (total < nout || total > 16) return ox_fail(X, "internal: %s has %d outputs", opname, total);
  bool all_const = true;
  for (int i = 0; i < nin; i++)
    if (!in[i]->c) all_const = false;
  if (all_const) {
    /* what a file can make us compute at import is bounded: a constant output larger
     * than MAX_FOLD_BYTES (a ConstantOfShape of a huge shape) stays a graph node, so the
     * memory is spent, if at all, when the user runs the model */
    mx_desc ind[64], od[16];
    for (int i = 0; i < nin && i < 64; i++) ind[i] = in[i]->d;
    if (nin <= 64 && mx_op_infer(op, psize ? pbuf : NULL, nin, ind, total, od) == MX_OK) {
      for (int k = 0; k < total; k++) {
        double bytes = (double)mx_dtype_size(od[k].dtype > 0 ? od[k].dtype : 0);
        for (int i = 0; i < od[k].ndim; i++) bytes *= od[k].shape[i] < 0 ? 1 : (double)od[k].shape[i];
        if (od[k].ndim < 0 || bytes > (double)MAX_FOLD_BYTES) all_const = false;
      }
    }
  }
  ox_val *res[16];
  for (int k = 0; k < total; k++)
    if (!(res[k] = ox_new(X))) return mx_err(MX_ENOMEM, "onnx: out of memory");
  if (all_const) { /* import-time evaluation with the op table's kernels */
    mx_tensor *ts[64], *os[16] = {0};
    if (nin > 64) return ox_fail(X, "internal: too many inputs");
    for (int i = 0; i < nin; i++) ts[i] = in[i]->c;
    rc = mx_op_invoke(op, nin, ts, psize ? pbuf : NULL, total, os);
    if (!rc)
      for (int k = 0; k < total && !rc; k++) rc = mx_tensor_wait_to_read(os[k]);
    if (rc) {
      for (int k = 0; k < total; k++) mx_tensor_release(os[k]);
      return ox_fail(X, "%s", mx_last_error());
    }
    for (int k = 0; k < total; k++) {
      res[k]->c = os[k];
      mx_desc_from(&res[k]->d, os[k]);
    }
  } else {
    int inn[64], ino[64];
    mx_desc ind[64];
    for (int i = 0; i < nin; i++) {
      if ((rc = entry(X, in[i], &inn[i], &ino[i]))) return ox_fail(X, "%s", mx_last_error());
      ind[i] = in[i]->d;
    }
    char name[320];
    snprintf(name, sizeof name, "%s_%s%d", node_base(X), mx_op_name(op), X->uniq++);
    int id = mx_graph_add_op_attrs(X->g, op, name, na, keys, vals, nin, inn, ino);
    if (id < 0) return ox_fail(X, "%s", mx_last_error());
    mx_desc od[16];
    if (mx_op_infer(op, psize ? pbuf : NULL, nin, ind, total, od))
      return ox_fail(X, "%s", mx_last_error());
    for (int k = 0; k < total; k++) {
      res[k]->node = id, res[k]->out = k, res[k]->d = od[k];
    }
  }
  for (int k = 0; k < nout; k++) out[k] = res[k];
  return MX_OK;
}

ox_val *ox_op(ox *X, const char *op, int nin, ox_val *const *in, const char *const *kv) {
  ox_val *o = NULL;
  return ox_emit(X, op, nin, in, kv, 1, &o) ? NULL : o;
}
ox_val *ox_op1(ox *X, const char *op, ox_val *a, const char *const *kv) {
  return ox_op(X, op, 1, &a, kv);
}
ox_val *ox_op2(ox *X, const char *op, ox_val *a, ox_val *b, const char *const *kv) {
  ox_val *in[2] = {a, b};
  return ox_op(X, op, 2, in, kv);
}

int ox_ints(ox *X, ox_val *v, const char *what, int max, int64_t *out, int *n) {
  if (!v) return ox_fail(X, "%s is missing", what);
  if (!v->c)
    return ox_unsupported(X, "%s must be a constant (an initializer or computed from "
                          "constants); luamx graphs have static attributes", what);
  int64_t cnt = mx_tensor_size(v->c);
  if (cnt > max) return ox_fail(X, "%s has %lld values (at most %d)", what, (long long)cnt, max);
  const void *p = mx_tensor_data(v->c);
  int dt = mx_tensor_dtype(v->c);
  for (int64_t i = 0; i < cnt; i++) {
    if (dt == MX_I64) out[i] = ((const int64_t *)p)[i];
    else out[i] = (int64_t)mx_load_f64(p, dt, i);
  }
  *n = (int)cnt;
  return MX_OK;
}

int ox_f64s(ox *X, ox_val *v, const char *what, int max, double *out, int *n) {
  if (!v) return ox_fail(X, "%s is missing", what);
  if (!v->c) return ox_unsupported(X, "%s must be a constant", what);
  int64_t cnt = mx_tensor_size(v->c);
  if (cnt > max) return ox_fail(X, "%s has %lld values (at most %d)", what, (long long)cnt, max);
  const void *p = mx_tensor_data(v->c);
  for (int64_t i = 0; i < cnt; i++) out[i] = mx_load_f64(p, mx_tensor_dtype(v->c), i);
  *n = (int)cnt;
  return MX_OK;
}

const char *ox_tuple(char *buf, size_t cap, int n, const int64_t *v) {
  size_t k = (size_t)snprintf(buf, cap, "(");
  for (int i = 0; i < n && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)v[i]);
  if (k < cap) snprintf(buf + k, cap - k, n == 1 ? ",)" : ")");
  return buf;
}

const char *ox_str(ox *X, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
  ox_strbuf *b = malloc(sizeof *b + (size_t)n + 1);
  if (!b) return "";
  memcpy(b->s, buf, (size_t)n + 1);
  b->next = X->strs;
  X->strs = b;
  return b->s;
}

int ox_need(ox *X, int nin, ox_val **in, int k) {
  for (int i = 0; i < k; i++)
    if (i >= nin || !in[i]) return ox_fail(X, "input %d is required", i + 1);
  return MX_OK;
}

int ox_done(ox *X, ox_val *v, ox_val **out) {
  if (!v) return mx_last_error()[0] ? MX_EINVAL : ox_fail(X, "conversion failed");
  out[0] = v;
  return MX_OK;
}

const char *ox_tup(ox *X, int n, const int64_t *v) {
  char b[512];
  return ox_str(X, "%s", ox_tuple(b, sizeof b, n, v));
}

const char *ox_f2s(ox *X, double v) {
  if (isinf(v)) return v > 0 ? "inf" : "-inf";
  return ox_str(X, "%.17g", v);
}

ox_val *ox_cast(ox *X, ox_val *v, int dtype) {
  if (!v || v->d.dtype == dtype) return v;
  return ox_op1(X, "cast", v, KV("dtype", mx_dtype_name(dtype)));
}

bool ox_known(const mx_desc *d) {
  if (d->ndim < 0) return false;
  for (int i = 0; i < d->ndim; i++)
    if (d->shape[i] < 0) return false;
  return true;
}

int ox_bshape(ox *X, int n, ox_val *const *in, mx_desc *out) {
  *out = in[0]->d;
  int nd = 0;
  for (int k = 0; k < n; k++) {
    if (in[k]->d.ndim < 0) return ox_unsupported(X, "an input of unknown rank");
    if (in[k]->d.ndim > nd) nd = in[k]->d.ndim;
  }
  out->ndim = nd;
  for (int i = 0; i < nd; i++) {
    int64_t dim = 1;
    bool unknown = false;
    for (int k = 0; k < n; k++) {
      int off = nd - in[k]->d.ndim;
      if (i < off) continue;
      int64_t s = in[k]->d.shape[i - off];
      if (s < 0) unknown = true;
      else if (s != 1) {
        if (dim != 1 && dim != s)
          return ox_fail(X, "shapes do not broadcast (dim %d: %lld vs %lld)", i + 1,
                         (long long)dim, (long long)s);
        dim = s;
      }
    }
    out->shape[i] = dim == 1 && unknown ? MX_DIM_UNKNOWN : dim;
  }
  return MX_OK;
}

ox_val *ox_bcast_to(ox *X, ox_val *v, const mx_desc *d) {
  if (!v) return NULL;
  bool same = v->d.ndim == d->ndim;
  for (int i = 0; same && i < d->ndim; i++) same = v->d.shape[i] == d->shape[i];
  if (same) return v;
  if (!ox_known(d)) {
    ox_unsupported(X, "broadcasting to a shape with unknown dims");
    return NULL;
  }
  if (v->d.ndim < d->ndim) { /* numpy aligns from the right: add leading 1s */
    int64_t s[MX_MAX_DIM];
    int off = d->ndim - v->d.ndim;
    for (int i = 0; i < d->ndim; i++) s[i] = i < off ? 1 : v->d.shape[i - off];
    char b[256];
    v = ox_op1(X, "reshape", v, KV("shape", ox_str(X, "%s", ox_tuple(b, sizeof b, d->ndim, s))));
    if (!v) return NULL;
  }
  char b[256];
  return ox_op1(X, "broadcast_to", v, KV("shape", ox_str(X, "%s", ox_tuple(b, sizeof b, d->ndim, d->shape))));
}

/* ---- attributes ------------------------------------------------------------------------ */

const Onnx__AttributeProto *ox_attr(const ox *X, const char *name) {
  const Onnx__NodeProto *n = X->node;
  for (size_t i = 0; n && i < n->n_attribute; i++)
    if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0) return n->attribute[i];
  return NULL;
}

int64_t ox_attr_i(const ox *X, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = ox_attr(X, name);
  return a && a->has_i ? a->i : dflt;
}

double ox_attr_f(const ox *X, const char *name, double dflt) {
  const Onnx__AttributeProto *a = ox_attr(X, name);
  return a && a->has_f ? (double)a->f : dflt;
}

const char *ox_attr_s(const ox *X, const char *name, const char *dflt, char *buf, size_t cap) {
  const Onnx__AttributeProto *a = ox_attr(X, name);
  if (!a || !a->has_s) return dflt;
  size_t n = a->s.len < cap - 1 ? a->s.len : cap - 1;
  if (n) memcpy(buf, a->s.data, n); /* an empty string may have no data pointer */
  buf[n] = 0;
  return buf;
}

int ox_attr_ints(ox *X, const char *name, int max, int64_t *out) {
  const Onnx__AttributeProto *a = ox_attr(X, name);
  if (!a) return -1;
  if (a->n_ints > (size_t)max) {
    ox_fail(X, "attribute %s has too many values", name);
    return -2;
  }
  for (size_t i = 0; i < a->n_ints; i++) out[i] = a->ints[i];
  return (int)a->n_ints;
}

/* ---- the node loop ------------------------------------------------------------------------ */

const Onnx__NodeProto *ox_sole_consumer(ox *X, const char *name, const char *op_type) {
  const Onnx__NodeProto *found = NULL;
  for (size_t i = 0; i < X->nn; i++) {
    const Onnx__NodeProto *n = X->nodes[i];
    for (size_t k = 0; k < n->n_input; k++)
      if (n->input[k] && strcmp(n->input[k], name) == 0) {
        if (found) return NULL;
        found = n;
      }
    for (size_t k = 0; k < n->n_attribute; k++)
      if (n->attribute[k]->g || n->attribute[k]->n_graphs) return NULL; /* may read it */
  }
  for (size_t k = 0; X->outputs && k < X->noutputs; k++)
    if (X->outputs[k]->name && strcmp(X->outputs[k]->name, name) == 0) return NULL;
  return found && strcmp(found->op_type, op_type) == 0 ? found : NULL;
}

int ox_skip(ox *X, const Onnx__NodeProto *n, ox_val *result) {
  if (X->nskip == sizeof X->skip / sizeof X->skip[0]) return ox_fail(X, "internal: too many folds");
  X->skip[X->nskip].node = n, X->skip[X->nskip].v = result, X->nskip++;
  return MX_OK;
}

static int convert_nodes(ox *X, Onnx__NodeProto **nodes, size_t nn) {
  Onnx__NodeProto **outer_nodes = X->nodes;
  size_t outer_nn = X->nn;
  X->nodes = nodes, X->nn = nn;
  for (size_t i = 0; i < nn; i++) {
    const Onnx__NodeProto *n = nodes[i];
    const Onnx__NodeProto *outer = X->node;
    X->node = n;
    bool skipped = false;
    for (size_t k = 0; k < X->nskip; k++) /* folded into an earlier node */
      if (X->skip[k].node == n && n->n_output && n->output[0]) {
        int rc = ox_bind(X, n->output[0], X->skip[k].v);
        if (rc) return rc;
        skipped = true;
      }
    if (skipped) {
      X->node = outer;
      continue;
    }
    if (!n->op_type) return ox_fail(X, "a node without op_type");
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
      return ox_unsupported(X, "operator domain '%s'", n->domain);
    ox_conv_fn fn = ox_find_converter(n->op_type);
    if (!fn) return ox_unsupported(X, "operator %s", n->op_type);
    ox_val *in[64], *out[32] = {0};
    if (n->n_input > 64 || n->n_output > 32) return ox_unsupported(X, "more than 64 inputs");
    for (size_t k = 0; k < n->n_input; k++) {
      in[k] = NULL;
      if (!n->input[k] || !*n->input[k]) continue; /* an optional input left out */
      if (!(in[k] = ox_lookup(X, n->input[k])))
        return ox_fail(X, "input '%s' is not produced by any earlier node, input or "
                       "initializer", n->input[k]);
    }
    int rc = fn(X, (int)n->n_input, in, (int)n->n_output, out);
    if (rc) return rc;
    for (size_t k = 0; k < n->n_output; k++) {
      if (!n->output[k] || !*n->output[k]) continue;
      if (!out[k]) return ox_unsupported(X, "output %zu ('%s')", k + 1, n->output[k]);
      if ((rc = ox_bind(X, n->output[k], out[k]))) return rc;
    }
    X->node = outer;
  }
  X->nodes = outer_nodes, X->nn = outer_nn;
  return MX_OK;
}

static int bind_initializers(ox *X, const Onnx__GraphProto *g) {
  for (size_t i = 0; i < g->n_initializer; i++) {
    const Onnx__TensorProto *t = g->initializer[i];
    if (!t->name || !*t->name) return ox_fail(X, "an initializer without a name");
    mx_tensor *v;
    int rc = ox_tensor_from_proto(t, X->dir, X->file, &v);
    if (rc) return rc;
    ox_val *c = ox_const(X, v);
    if (!c) return mx_err(MX_ENOMEM, "onnx: out of memory");
    if ((rc = ox_bind(X, t->name, c))) return rc;
  }
  return MX_OK;
}

int ox_subgraph(ox *X, const Onnx__GraphProto *g, int nout, ox_val **outs) {
  if (g->n_input) return ox_unsupported(X, "a subgraph with inputs (Loop/Scan bodies)");
  return ox_subgraph_in(X, g, 0, NULL, nout, outs);
}

int ox_subgraph_in(ox *X, const Onnx__GraphProto *g, int nin, ox_val *const *ins, int nout,
                   ox_val **outs) {
  if (X->depth > 16) return ox_unsupported(X, "subgraphs nested more than 16 deep");
  if ((int)g->n_output != nout)
    return ox_fail(X, "the subgraph has %zu outputs where the node has %d", g->n_output, nout);
  if ((int)g->n_input != nin)
    return ox_fail(X, "the subgraph has %zu inputs where the node gives %d", g->n_input, nin);
  for (int k = 0; k < nin; k++) {
    const char *nm = g->input[k]->name;
    if (!nm || !*nm) return ox_fail(X, "subgraph input %d has no name", k + 1);
    int rc = ox_bind(X, nm, ins[k]);
    if (rc) return rc;
  }
  /* folds found inside concern this pass over the subgraph only (a Loop body is
   * converted once per iteration) */
  size_t nskip = X->nskip;
  X->depth++;
  int rc = bind_initializers(X, g);
  if (!rc) rc = convert_nodes(X, g->node, g->n_node);
  X->depth--;
  X->nskip = nskip;
  for (int k = 0; !rc && k < nout; k++) {
    const char *nm = g->output[k]->name;
    if (!(outs[k] = ox_lookup(X, nm))) rc = ox_fail(X, "subgraph output '%s' is never made", nm);
  }
  return rc;
}

/* ---- entry points ---------------------------------------------------------------------- */

static void ox_free(ox *X) {
  for (ox_val *v = X->allocs, *nx; v; v = nx) {
    nx = v->next_alloc;
    mx_tensor_release(v->c);
    free(v->seq);
    free(v);
  }
  for (size_t i = 0; i < X->tcap; i++) free(X->tab[i].key);
  free(X->tab);
  for (ox_strbuf *b = X->strs, *nx; b; b = nx) {
    nx = b->next;
    free(b);
  }
}

static int model_from(const void *buf, size_t len, const char *file, Onnx__ModelProto **out) {
  if (len > MAX_MODEL_BYTES)
    return mx_err(MX_EFORMAT, "onnx: %s: %zu bytes: above protobuf's 2 GiB message limit (the "
                  "weights belong in external data)", file, len);
  *out = onnx__model_proto__unpack(NULL, len, buf);
  if (!*out)
    return mx_err(MX_EFORMAT, "onnx: %s: not an ONNX model (the protobuf does not parse as a "
                  "ModelProto)", file);
  if (!(*out)->graph) {
    onnx__model_proto__free_unpacked(*out, NULL);
    return mx_err(MX_EFORMAT, "onnx: %s: the model has no graph", file);
  }
  return MX_OK;
}

static int import_model(const Onnx__ModelProto *m, const char *file, const char *dir, int nin,
                        const mx_onnx_input *given, mx_graph **graph, int *nout,
                        char ***out_names) {
  ox X;
  memset(&X, 0, sizeof X);
  X.file = file, X.dir = dir, X.opset = 1;
  for (size_t i = 0; i < m->n_opset_import; i++) {
    const Onnx__OperatorSetIdProto *o = m->opset_import[i];
    if ((!o->domain || !*o->domain || strcmp(o->domain, "ai.onnx") == 0) && o->has_version)
      X.opset = o->version;
  }
  if (!(X.g = mx_graph_new())) return mx_err(MX_ENOMEM, "onnx: out of memory");
  const Onnx__GraphProto *g = m->graph;
  X.outputs = g->output, X.noutputs = g->n_output;
  int rc = bind_initializers(&X, g);
  for (size_t i = 0; !rc && i < g->n_input; i++) {
    const Onnx__ValueInfoProto *vi = g->input[i];
    if (!vi->name || !*vi->name) { rc = ox_fail(&X, "a graph input without a name"); break; }
    if (ox_lookup(&X, vi->name)) continue; /* IR < 4: an initializer listed as an input */
    const mx_onnx_input *u = NULL;
    for (int k = 0; k < nin; k++)
      if (given[k].name && strcmp(given[k].name, vi->name) == 0) u = &given[k];
    ox_val *v;
    if (u && u->value) {
      mx_tensor_retain(u->value);
      v = ox_const(&X, u->value);
    } else {
      v = ox_new(&X);
      if (v && (rc = ox_desc_from_value_info(vi, file, &v->d))) break;
      if (v && v->d.dtype == MX_ONNX_STRING) {
        rc = mx_err(MX_EINVAL, "onnx: %s: input '%s': unsupported: a string tensor in a luamx "
                    "graph (a model of string ops only runs through mx.onnx.load_model, "
                    "mx_onnx_run_strings)", file, vi->name);
        break;
      }
      if (v && u && u->desc.ndim >= 0) {
        int dt = v->d.dtype;
        v->d = u->desc;
        if (u->desc.dtype < 0) v->d.dtype = dt;
      }
      if (v && v->d.dtype < 0) {
        rc = mx_err(MX_EFORMAT, "onnx: %s: input '%s' has no element type (give input_types)", file,
                    vi->name);
        break;
      }
      if (v && (v->node = mx_graph_add_var(X.g, vi->name)) < 0) { rc = v->node; break; }
      if (v) v->out = 0;
    }
    if (!v) { rc = mx_err(MX_ENOMEM, "onnx: out of memory"); break; }
    rc = ox_bind(&X, vi->name, v);
  }
  for (int k = 0; !rc && k < nin; k++)
    if (given[k].name && !ox_lookup(&X, given[k].name))
      rc = mx_err(MX_EINVAL, "onnx: %s: '%s' is not an input of the model", file, given[k].name);
  if (!rc) rc = convert_nodes(&X, g->node, g->n_node);
  X.node = NULL;
  char **names = NULL;
  int *hn = NULL, *ho = NULL;
  if (!rc) {
    names = calloc(g->n_output + 1, sizeof *names);
    hn = calloc(g->n_output + 1, sizeof *hn), ho = calloc(g->n_output + 1, sizeof *ho);
    if (!names || !hn || !ho) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  for (size_t k = 0; !rc && k < g->n_output; k++) {
    const char *nm = g->output[k]->name;
    ox_val *v = ox_lookup(&X, nm);
    if (!v) { rc = ox_fail(&X, "graph output '%s' is never made", nm ? nm : ""); break; }
    if ((rc = entry(&X, v, &hn[k], &ho[k]))) break;
    if (!(names[k] = strdup(nm))) rc = mx_err(MX_ENOMEM, "onnx: out of memory");
  }
  if (!rc) rc = mx_graph_set_heads(X.g, (int)g->n_output, hn, ho);
  free(hn);
  free(ho);
  ox_free(&X);
  if (rc) {
    for (size_t k = 0; names && k < g->n_output; k++) free(names[k]);
    free(names);
    mx_graph_free(X.g);
    return rc;
  }
  *graph = X.g, *nout = (int)g->n_output, *out_names = names;
  return MX_OK;
}

int mx_onnx_import_bytes(const void *buf, size_t len, const char *dir, int nin,
                         const mx_onnx_input *in, mx_graph **graph, int *nout, char ***out_names) {
  if (!graph || !nout || !out_names || (nin > 0 && !in) || (!buf && len))
    return mx_err(MX_EINVAL, "mx_onnx_import: bad arguments");
  *graph = NULL, *nout = 0, *out_names = NULL;
  Onnx__ModelProto *m = NULL;
  int rc = model_from(buf ? buf : "", len, "<memory>", &m);
  if (rc) return rc;
  rc = import_model(m, "<memory>", dir, nin, in, graph, nout, out_names);
  onnx__model_proto__free_unpacked(m, NULL);
  return rc;
}

/* The model in the file at path (mapped, parsed, unmapped). */
int ox_model_open(const char *path, Onnx__ModelProto **m) {
  mx_xmap *map;
  int rc = mx_xmap_open(path, "onnx", &map);
  if (rc) return rc;
  rc = model_from(map->p, map->len, path, m);
  mx_xmap_release(map);
  return rc;
}

/* path's directory (external data lives there) */
void ox_dir_of(const char *path, char *dir, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (slash && (size_t)(slash - path) < cap) snprintf(dir, cap, "%.*s", (int)(slash - path), path);
  else snprintf(dir, cap, ".");
}

int mx_onnx_import(const char *path, int nin, const mx_onnx_input *in, mx_graph **graph,
                   int *nout, char ***out_names) {
  if (!path || !graph || !nout || !out_names || (nin > 0 && !in))
    return mx_err(MX_EINVAL, "mx_onnx_import: bad arguments");
  *graph = NULL, *nout = 0, *out_names = NULL;
  Onnx__ModelProto *m = NULL;
  int rc = ox_model_open(path, &m);
  if (rc) return rc;
  char dir[4096];
  ox_dir_of(path, dir, sizeof dir);
  rc = import_model(m, path, dir, nin, in, graph, nout, out_names);
  onnx__model_proto__free_unpacked(m, NULL);
  return rc;
}
