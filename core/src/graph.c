/* graph.c — the graph IR: construction, queries, shape/dtype inference (graph.h has
 * the struct; mx.h's "graphs" section is the manual). */
#include "graph.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

mx_graph *mx_graph_new(void) { return calloc(1, sizeof(mx_graph)); }

static void node_clear(mx_graph_node *nd) {
  free(nd->name);
  free(nd->params);
  free(nd->in_node);
  free(nd->in_out);
  for (int a = 0; a < nd->nattr; a++) {
    free(nd->attrs[a].key);
    free(nd->attrs[a].val);
  }
  free(nd->attrs);
  if (nd->value) mx_tensor_release(nd->value);
  if (nd->ext && nd->ext_free) nd->ext_free(nd->ext);
}

void mx_graph_free(mx_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++) node_clear(&g->nodes[i]);
  free(g->nodes);
  free(g->head_node);
  free(g->head_out);
  free(g);
}

static int check_node(const mx_graph *g, int node, const char *who) {
  if (!g) return mx_err(MX_EINVAL, "%s: graph is NULL", who);
  if (node < 0 || node >= g->n)
    return mx_err(MX_EINVAL, "%s: node %d out of range (the graph has %d nodes)", who, node, g->n);
  return MX_OK;
}

int mx_graph_push(mx_graph *g, int op, const char *name, const void *params,
                  size_t params_size, int nin, const int *in_node, const int *in_out, int nout) {
  if (!g) return mx_err(MX_EINVAL, "graph: NULL graph");
  if (!name || !*name) return mx_err(MX_EINVAL, "graph: a node needs a name");
  if (nin < 0 || (nin > 0 && (!in_node || !in_out)))
    return mx_err(MX_EINVAL, "graph: node '%s': %d inputs with no input list", name, nin);
  if (nout < 0 || nout > 64)
    return mx_err(MX_EINVAL, "graph: node '%s': %d outputs", name, nout);
  for (int k = 0; k < nin; k++) {
    int s = in_node[k];
    if (s < 0 || s >= g->n)
      return mx_err(MX_EINVAL, "graph: node '%s': input %d refers to node %d, not an earlier "
                    "node (the graph has %d)", name, k + 1, s, g->n);
    if (in_out[k] < 0 || in_out[k] >= g->nodes[s].nout)
      return mx_err(MX_EINVAL, "graph: node '%s': input %d is output %d of '%s', which has %d",
                    name, k + 1, in_out[k], g->nodes[s].name, g->nodes[s].nout);
  }
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 16;
    mx_graph_node *nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
    if (!nn) return mx_err(MX_ENOMEM, "graph: out of memory");
    g->nodes = nn;
    g->cap = cap;
  }
  mx_graph_node nd;
  memset(&nd, 0, sizeof nd);
  nd.op = op;
  nd.nin = nin;
  nd.nout = nout;
  nd.name = dup_str(name);
  if (nin) {
    nd.in_node = malloc((size_t)nin * sizeof(int));
    nd.in_out = malloc((size_t)nin * sizeof(int));
  }
  if (params_size) {
    nd.params = malloc(params_size);
    if (nd.params) {
      if (params) memcpy(nd.params, params, params_size);
      else memset(nd.params, 0, params_size);
    }
  }
  if (!nd.name || (nin && (!nd.in_node || !nd.in_out)) || (params_size && !nd.params)) {
    node_clear(&nd);
    return mx_err(MX_ENOMEM, "graph: out of memory");
  }
  if (nin) {
    memcpy(nd.in_node, in_node, (size_t)nin * sizeof(int));
    memcpy(nd.in_out, in_out, (size_t)nin * sizeof(int));
  }
  nd.row = g->nentries;
  g->nentries += nout;
  g->nodes[g->n] = nd;
  return g->n++;
}

int mx_graph_add_var(mx_graph *g, const char *name) {
  return mx_graph_push(g, MX_GRAPH_VAR, name, NULL, 0, 0, NULL, NULL, 1);
}

static int op_node(mx_graph *g, int op, const char *name, const void *params, int nin,
                   const int *in_node, const int *in_out) {
  if (!g) return mx_err(MX_EINVAL, "graph: NULL graph");
  if (op < 0 || op >= mx_num_ops) return mx_err(MX_EINVAL, "graph: unknown op id %d", op);
  const mx_op_def *def = &mx_ops[op];
  const char *nm = name ? name : "?";
  if (def->nin >= 0 ? nin < def->nin_min || nin > def->nin : nin < 1)
    return mx_err(MX_EINVAL, "graph: node '%s' (%s): %d inputs for an op of %d to %d", nm,
                  def->name, nin, def->nin_min, def->nin);
  int nout = mx_op_nout(def, params);
  if (nout < 0)
    return mx_err(MX_EINVAL, "graph: node '%s' (%s): the params give no output count", nm,
                  def->name);
  return mx_graph_push(g, op, name, params, def->params_size, nin, in_node, in_out, nout);
}

int mx_graph_add_op(mx_graph *g, int op, const char *name, const void *params, int nin,
                    const int *in_node, const int *in_out) {
  if (op >= 0 && op < mx_num_ops && !params && mx_ops[op].params_size) {
    /* the defaults */
    void *p = calloc(1, mx_ops[op].params_size);
    if (!p) return mx_err(MX_ENOMEM, "graph: out of memory");
    int rc = mx_op_params_init(op, p);
    if (rc == MX_OK) rc = op_node(g, op, name, p, nin, in_node, in_out);
    free(p);
    return rc;
  }
  return op_node(g, op, name, params, nin, in_node, in_out);
}

static bool is_node_attr(const char *k) {
  size_t kl = strlen(k);
  return kl > 4 && k[0] == '_' && k[1] == '_' && k[kl - 1] == '_' && k[kl - 2] == '_';
}

int mx_graph_add_op_attrs(mx_graph *g, int op, const char *name, int nattr,
                          const char *const *keys, const char *const *vals, int nin,
                          const int *in_node, const int *in_out) {
  if (op < 0 || op >= mx_num_ops) return mx_err(MX_EINVAL, "graph: unknown op id %d", op);
  size_t ps = mx_ops[op].params_size;
  void *p = ps ? calloc(1, ps) : NULL;
  if (ps && !p) return mx_err(MX_ENOMEM, "graph: out of memory");
  int rc = mx_op_params_parse(op, nattr, keys, vals, p);
  if (rc != MX_OK) {
    free(p);
    char who[160];
    snprintf(who, sizeof who, "node '%s'", name ? name : "?");
    return mx_err_prefix(rc, who);
  }
  int id = op_node(g, op, name, p, nin, in_node, in_out);
  free(p);
  for (int a = 0; id >= 0 && a < nattr; a++)
    if (is_node_attr(keys[a])) {
      int r = mx_graph_set_attr(g, id, keys[a], vals[a]);
      if (r != MX_OK) return r;
    }
  return id;
}

/* MXNet's tuple text: "(2, 3)", "[2,3]", "()", "(5,)"; 0 or -1: an unknown dim. A value
 * that does not parse would be ignored by every reader after this one. */
const char *mx_graph_attr_invalid(const char *key, const char *val) {
  if (strcmp(key, "__shape__") == 0) {
    const char *p = val;
    while (*p == ' ') p++;
    char close = *p == '(' ? ')' : *p == '[' ? ']' : 0;
    int ndim = 0;
    bool ok = close != 0;
    if (ok) p++;
    while (ok) {
      while (*p == ' ') p++;
      if (*p == close) {
        p++;
        break;
      }
      char *end;
      errno = 0;
      long long d = strtoll(p, &end, 10);
      ok = end != p && errno == 0 && d >= -1 && ++ndim <= MX_MAX_DIM;
      p = end;
      while (ok && *p == ' ') p++;
      if (ok && *p == ',') p++;
      else if (ok && *p != close) ok = false;
    }
    while (ok && *p == ' ') p++;
    if (!ok || *p)
      return "a shape (a tuple of at most 8 dims >= -1, such as \"(2, 3)\"; 0 or -1: unknown)";
  } else if (strcmp(key, "__dtype__") == 0) {
    char *end;
    errno = 0;
    long c = strtol(val, &end, 10);
    bool ok = end != val && !*end ? errno == 0 && c >= 0 && c < 64 && mx_dtype_valid((int)c)
                                  : mx_dtype_from_name(val) >= 0;
    if (!ok) return "a dtype (an MXNet dtype code such as \"0\" for float32, or a name)";
  }
  return NULL;
}

int mx_graph_set_attr(mx_graph *g, int node, const char *key, const char *val) {
  if (check_node(g, node, "mx_graph_set_attr")) return MX_EINVAL;
  if (!key || !val) return mx_err(MX_EINVAL, "mx_graph_set_attr: NULL key or value");
  const char *what = mx_graph_attr_invalid(key, val);
  if (what)
    return mx_err(MX_EINVAL, "mx_graph_set_attr: node %d '%s': %s=\"%s\" is not %s", node,
                  g->nodes[node].name ? g->nodes[node].name : "?", key, val, what);
  mx_graph_node *nd = &g->nodes[node];
  char *v = dup_str(val);
  if (!v) return mx_err(MX_ENOMEM, "graph: out of memory");
  for (int a = 0; a < nd->nattr; a++)
    if (strcmp(nd->attrs[a].key, key) == 0) {
      free(nd->attrs[a].val);
      nd->attrs[a].val = v;
      return MX_OK;
    }
  if (nd->nattr == nd->cap_attr) {
    int cap = nd->cap_attr ? nd->cap_attr * 2 : 4;
    mx_graph_attr *na = realloc(nd->attrs, (size_t)cap * sizeof *na);
    if (!na) {
      free(v);
      return mx_err(MX_ENOMEM, "graph: out of memory");
    }
    nd->attrs = na;
    nd->cap_attr = cap;
  }
  char *k = dup_str(key);
  if (!k) {
    free(v);
    return mx_err(MX_ENOMEM, "graph: out of memory");
  }
  nd->attrs[nd->nattr].key = k;
  nd->attrs[nd->nattr].val = v;
  nd->nattr++;
  return MX_OK;
}

const char *mx_graph_get_attr(const mx_graph *g, int node, const char *key) {
  if (!g || node < 0 || node >= g->n || !key) return NULL;
  const mx_graph_node *nd = &g->nodes[node];
  for (int a = 0; a < nd->nattr; a++)
    if (strcmp(nd->attrs[a].key, key) == 0) return nd->attrs[a].val;
  return NULL;
}

int mx_graph_num_attrs(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].nattr : 0;
}
const char *mx_graph_attr_key(const mx_graph *g, int node, int k) {
  if (!g || node < 0 || node >= g->n || k < 0 || k >= g->nodes[node].nattr) return NULL;
  return g->nodes[node].attrs[k].key;
}
const char *mx_graph_attr_val(const mx_graph *g, int node, int k) {
  if (!g || node < 0 || node >= g->n || k < 0 || k >= g->nodes[node].nattr) return NULL;
  return g->nodes[node].attrs[k].val;
}

int mx_graph_set_heads(mx_graph *g, int n, const int *node, const int *out) {
  if (!g) return mx_err(MX_EINVAL, "mx_graph_set_heads: NULL graph");
  if (n < 0 || (n > 0 && (!node || !out)))
    return mx_err(MX_EINVAL, "mx_graph_set_heads: %d heads with no list", n);
  for (int k = 0; k < n; k++) {
    if (node[k] < 0 || node[k] >= g->n)
      return mx_err(MX_EINVAL, "graph: head %d refers to node %d (the graph has %d nodes)",
                    k + 1, node[k], g->n);
    if (out[k] < 0 || out[k] >= g->nodes[node[k]].nout)
      return mx_err(MX_EINVAL, "graph: head %d is output %d of '%s', which has %d", k + 1,
                    out[k], g->nodes[node[k]].name, g->nodes[node[k]].nout);
  }
  int *hn = malloc((size_t)(n ? n : 1) * sizeof(int));
  int *ho = malloc((size_t)(n ? n : 1) * sizeof(int));
  if (!hn || !ho) {
    free(hn);
    free(ho);
    return mx_err(MX_ENOMEM, "graph: out of memory");
  }
  if (n) {
    memcpy(hn, node, (size_t)n * sizeof(int));
    memcpy(ho, out, (size_t)n * sizeof(int));
  }
  free(g->head_node);
  free(g->head_out);
  g->head_node = hn;
  g->head_out = ho;
  g->nheads = n;
  return MX_OK;
}

int mx_graph_set_value(mx_graph *g, int node, mx_tensor *t) {
  if (check_node(g, node, "mx_graph_set_value")) return MX_EINVAL;
  mx_graph_node *nd = &g->nodes[node];
  if (nd->op != MX_GRAPH_VAR)
    return mx_err(MX_EINVAL, "mx_graph_set_value: node '%s' is not a variable", nd->name);
  if (t) mx_tensor_retain(t);
  if (nd->value) mx_tensor_release(nd->value);
  nd->value = t;
  return MX_OK;
}

mx_tensor *mx_graph_node_value(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].value : NULL;
}

int mx_graph_num_nodes(const mx_graph *g) { return g ? g->n : 0; }
int mx_graph_node_op(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].op : MX_GRAPH_VAR;
}
const char *mx_graph_node_name(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].name : NULL;
}
const void *mx_graph_node_params(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].params : NULL;
}
int mx_graph_node_num_inputs(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].nin : 0;
}
int mx_graph_node_input(const mx_graph *g, int node, int k, int *out_idx) {
  if (!g || node < 0 || node >= g->n || k < 0 || k >= g->nodes[node].nin) return -1;
  if (out_idx) *out_idx = g->nodes[node].in_out[k];
  return g->nodes[node].in_node[k];
}
int mx_graph_node_num_outputs(const mx_graph *g, int node) {
  return g && node >= 0 && node < g->n ? g->nodes[node].nout : 0;
}
int mx_graph_num_heads(const mx_graph *g) { return g ? g->nheads : 0; }
int mx_graph_head(const mx_graph *g, int k, int *out_idx) {
  if (!g || k < 0 || k >= g->nheads) return -1;
  if (out_idx) *out_idx = g->head_out[k];
  return g->head_node[k];
}
int mx_graph_num_entries(const mx_graph *g) { return g ? g->nentries : 0; }
int mx_graph_entry(const mx_graph *g, int node, int out_idx) {
  if (!g || node < 0 || node >= g->n || out_idx < 0 || out_idx >= g->nodes[node].nout)
    return -1;
  return g->nodes[node].row + out_idx;
}

int mx_graph_copy_node(mx_graph *g, const mx_graph *src, int node, const int *in_node,
                       const int *in_out) {
  if (check_node(src, node, "mx_graph_copy_node")) return MX_EINVAL;
  const mx_graph_node *s = &src->nodes[node];
  size_t ps = s->op >= 0 ? mx_ops[s->op].params_size : 0;
  int id = mx_graph_push(g, s->op, s->name, s->params, ps, s->nin, in_node, in_out, s->nout);
  for (int a = 0; id >= 0 && a < s->nattr; a++) {
    int r = mx_graph_set_attr(g, id, s->attrs[a].key, s->attrs[a].val);
    if (r != MX_OK) return r;
  }
  if (id >= 0 && s->value) {
    mx_tensor_retain(s->value);
    g->nodes[id].value = s->value;
  }
  if (id >= 0 && s->op == MX_GRAPH_FUSED && s->ext) {
    mx_fused_prog *p = malloc(sizeof *p);
    if (!p) return mx_err(MX_ENOMEM, "graph: out of memory");
    memcpy(p, s->ext, sizeof *p);
    g->nodes[id].ext = p;
    g->nodes[id].ext_free = free;
  }
  return id;
}

int mx_graph_node_fused_size(const mx_graph *g, int node) {
  if (!g || node < 0 || node >= g->n || g->nodes[node].op != MX_GRAPH_FUSED || !g->nodes[node].ext)
    return 0;
  return ((const mx_fused_prog *)g->nodes[node].ext)->n;
}

/* Sets g's heads to src's through map (old node -> new node); emap (may be NULL):
 * entry -> (new node << 8 | output) for entries a pass replaced by another node's
 * output, -1 for the others. */
int mx_graph_copy_heads(mx_graph *g, const mx_graph *src, const int *map, const int *emap) {
  int n = src->nheads;
  int *hn = malloc((size_t)(n ? n : 1) * sizeof(int));
  int *ho = malloc((size_t)(n ? n : 1) * sizeof(int));
  if (!hn || !ho) {
    free(hn);
    free(ho);
    return mx_err(MX_ENOMEM, "graph: out of memory copying the heads");
  }
  for (int k = 0; k < n; k++) {
    int e = src->nodes[src->head_node[k]].row + src->head_out[k];
    if (emap && emap[e] >= 0) {
      hn[k] = emap[e] >> 8;
      ho[k] = emap[e] & 0xff;
    } else {
      hn[k] = map[src->head_node[k]];
      ho[k] = src->head_out[k];
    }
  }
  int rc = mx_graph_set_heads(g, n, hn, ho);
  free(hn);
  free(ho);
  return rc;
}

/* ---- inference ---------------------------------------------------------------- */

bool mx_desc_merge(mx_desc *dst, const mx_desc *src, bool *changed) {
  if (src->dtype >= 0) {
    if (dst->dtype < 0) {
      dst->dtype = src->dtype;
      *changed = true;
    } else if (dst->dtype != src->dtype) {
      return false;
    }
  }
  if (src->ndim < 0) return true;
  if (dst->ndim < 0) {
    dst->ndim = src->ndim;
    for (int d = 0; d < src->ndim && d < MX_MAX_DIM; d++) dst->shape[d] = src->shape[d];
    *changed = true;
    return true;
  }
  if (dst->ndim != src->ndim) return false;
  for (int d = 0; d < src->ndim && d < MX_MAX_DIM; d++) {
    if (src->shape[d] < 0) continue;
    if (dst->shape[d] < 0) {
      dst->shape[d] = src->shape[d];
      *changed = true;
    } else if (dst->shape[d] != src->shape[d]) {
      return false;
    }
  }
  return true;
}

static void desc_str(char *buf, size_t n, const mx_desc *d) {
  if (d->ndim < 0) {
    snprintf(buf, n, "(?)");
    return;
  }
  size_t u = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < d->ndim && u < n; i++) {
    if (d->shape[i] < 0) u += (size_t)snprintf(buf + u, n - u, "%s?", i ? "," : "");
    else u += (size_t)snprintf(buf + u, n - u, "%s%lld", i ? "," : "", (long long)d->shape[i]);
  }
  if (u < n) snprintf(buf + u, n - u, ")");
}

static int conflict(const mx_graph *g, int node, const char *what, const mx_desc *had,
                    const mx_desc *got) {
  char a[128], b[128];
  desc_str(a, sizeof a, had);
  desc_str(b, sizeof b, got);
  const mx_graph_node *nd = &g->nodes[node];
  const mx_op_def *def = mx_graph_def(g, node);
  return mx_err(MX_EINVAL, "infer_shape: node '%s' (%s): %s is %s %s but the op gives %s %s",
                nd->name, def ? def->name : "fused", what, a,
                had->dtype >= 0 ? mx_dtype_name(had->dtype) : "", b,
                got->dtype >= 0 ? mx_dtype_name(got->dtype) : "");
}

/* ---- creation shapes with unknown dims (graph.h) ---- */

mx_tuple *mx_graph_shape_param(const mx_graph *g, int node) {
  const mx_graph_node *nd = &g->nodes[node];
  const mx_op_def *def = mx_graph_def(g, node);
  if (!def || nd->nin != 0 || !(def->flags & MX_OPF_CREATION) || !nd->params) return NULL;
  for (int k = 0; k < def->nparams; k++)
    if (def->params[k].type == MX_PT_SHAPE && strcmp(def->params[k].name, "shape") == 0)
      return (mx_tuple *)((char *)nd->params + def->params[k].offset);
  return NULL;
}

void mx_graph_zero_dims_unknown(mx_graph *g, int node) {
  mx_tuple *t = mx_graph_shape_param(g, node);
  for (int d = 0; t && d < t->n; d++)
    if (t->v[d] == 0) t->v[d] = MX_DIM_UNKNOWN;
}

void mx_graph_resolve_shapes(mx_graph *g, const mx_desc *e) {
  for (int i = 0; i < g->n; i++) {
    mx_tuple *t = mx_graph_shape_param(g, i);
    const mx_desc *d = t ? &e[g->nodes[i].row] : NULL;
    if (!d || d->ndim != t->n) continue;
    for (int k = 0; k < t->n; k++)
      if (t->v[k] == MX_DIM_UNKNOWN && d->shape[k] >= 0) t->v[k] = d->shape[k];
  }
}

/* A creation node whose shape holds unknown dims: its output is inferred with them as 1
 * (the op's own inference takes known shapes only), then marked unknown again. */
static int infer_unknown_creation(const mx_graph *g, int i, mx_desc *out) {
  const mx_graph_node *nd = &g->nodes[i];
  const mx_op_def *def = mx_graph_def(g, i);
  mx_tuple *t = mx_graph_shape_param(g, i);
  char buf[4096];
  if (def->params_size > sizeof buf)
    return mx_err(MX_EINVAL, "infer_shape: node '%s': params too large", nd->name);
  memcpy(buf, nd->params, def->params_size);
  mx_tuple *bt = (mx_tuple *)(buf + ((char *)t - (char *)nd->params));
  for (int k = 0; k < bt->n; k++)
    if (bt->v[k] == MX_DIM_UNKNOWN) bt->v[k] = 1;
  int rc = mx_op_infer(nd->op, buf, 0, NULL, nd->nout, out);
  if (rc != MX_OK) return rc;
  for (int k = 0; k < t->n && k < out[0].ndim; k++)
    if (t->v[k] == MX_DIM_UNKNOWN) out[0].shape[k] = MX_DIM_UNKNOWN;
  return MX_OK;
}

static bool has_unknown_shape(const mx_graph *g, int i) {
  mx_tuple *t = mx_graph_shape_param(g, i);
  for (int k = 0; t && k < t->n; k++)
    if (t->v[k] == MX_DIM_UNKNOWN) return true;
  return false;
}

/* One forward sweep over the op nodes; *changed when any entry learned something. */
static int infer_sweep(const mx_graph *g, mx_desc *e, bool *changed) {
  mx_desc in[64], out[64];
  for (int i = 0; i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (nd->op == MX_GRAPH_VAR) continue; /* given */
    if (nd->op == MX_GRAPH_FUSED) { /* elementwise: the broadcast of the inputs, float32 */
      mx_desc o;
      memset(&o, 0, sizeof o);
      o.dtype = MX_F32;
      o.ndim = 0;
      bool known = true;
      for (int k = 0; k < nd->nin; k++) {
        const mx_desc *d = &e[g->nodes[nd->in_node[k]].row + nd->in_out[k]];
        if (d->ndim < 0) {
          known = false;
          break;
        }
        int nd2 = d->ndim > o.ndim ? d->ndim : o.ndim;
        int64_t sh[MX_MAX_DIM];
        for (int j = 0; j < nd2; j++) {
          int ja = j - (nd2 - o.ndim), jb = j - (nd2 - d->ndim);
          int64_t a = ja >= 0 ? o.shape[ja] : 1, b = jb >= 0 ? d->shape[jb] : 1;
          sh[j] = a == 1 ? b : a;
        }
        o.ndim = nd2;
        memcpy(o.shape, sh, sizeof sh);
        o.dev_type = d->dev_type;
        o.dev_id = d->dev_id;
      }
      if (known && !mx_desc_merge(&e[nd->row], &o, changed))
        return mx_err(MX_EINVAL, "infer_shape: fused node '%s': inconsistent shapes", nd->name);
      continue;
    }
    if (nd->nin > 64) return mx_err(MX_EINVAL, "infer_shape: node '%s': too many inputs", nd->name);
    for (int k = 0; k < nd->nin; k++) in[k] = e[g->nodes[nd->in_node[k]].row + nd->in_out[k]];
    int rc = has_unknown_shape(g, i) ? infer_unknown_creation(g, i, out)
                                     : mx_op_infer(nd->op, nd->params, nd->nin, in, nd->nout, out);
    if (rc != MX_OK) {
      char who[200];
      snprintf(who, sizeof who, "infer_shape: node '%s'", nd->name);
      return mx_err_prefix(rc, who);
    }
    for (int k = 0; k < nd->nin; k++) {
      mx_desc *dst = &e[g->nodes[nd->in_node[k]].row + nd->in_out[k]];
      mx_desc had = *dst;
      if (!mx_desc_merge(dst, &in[k], changed)) {
        char what[64];
        snprintf(what, sizeof what, "input %d", k + 1);
        return conflict(g, i, what, &had, &in[k]);
      }
    }
    for (int k = 0; k < nd->nout; k++) {
      mx_desc *dst = &e[nd->row + k];
      mx_desc had = *dst;
      if (out[k].ndim >= 0 && dst->ndim < 0) {
        dst->layout = out[k].layout;
        dst->dev_type = out[k].dev_type;
        dst->dev_id = out[k].dev_id;
      }
      if (!mx_desc_merge(dst, &out[k], changed)) {
        char what[64];
        snprintf(what, sizeof what, "output %d", k + 1);
        return conflict(g, i, what, &had, &out[k]);
      }
    }
  }
  return MX_OK;
}

int mx_graph_infer(const mx_graph *g, mx_desc *entries) {
  if (!g || (!entries && g->nentries)) return mx_err(MX_EINVAL, "mx_graph_infer: NULL argument");
  for (int i = 0; i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (nd->op >= 0) {
      for (int k = 0; k < nd->nout; k++) {
        mx_desc *d = &entries[nd->row + k];
        memset(d, 0, sizeof *d);
        d->ndim = -1;
        d->dtype = -1;
      }
    } else if (nd->op == MX_GRAPH_VAR && nd->value) {
      bool ch = false;
      mx_desc v;
      mx_desc_from(&v, nd->value);
      mx_desc had = entries[nd->row];
      if (!mx_desc_merge(&entries[nd->row], &v, &ch))
        return mx_err(MX_EINVAL, "infer_shape: variable '%s' has a value of another shape or "
                      "dtype than given (%d dims, dtype %d)", nd->name, had.ndim, had.dtype);
    }
  }
  /* parameters are filled from the data in the first sweep; a second settles what
   * they made known downstream; more only for chains of back-filled unknowns */
  for (int pass = 0; pass < g->n + 1; pass++) {
    bool changed = false;
    int rc = infer_sweep(g, entries, &changed);
    if (rc != MX_OK) return rc;
    if (!changed) break;
  }
  return MX_OK;
}
