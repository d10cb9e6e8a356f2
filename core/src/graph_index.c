/* graph_index.c — the index-valued ops of a symbol file read with luamx's positions, for
 * readers without mx.sym (the C runtime): a file holds MXNet's 0-based positions (pick,
 * take, one_hot and gather_nd read them; argmax, argmin, argsort and topk give them,
 * argmax in float32), luamx's ops take and give 1-based ones. The same conversions as
 * lua/mx/graph/index_ops.lua's reader, without its folding of luamx's own chains (their
 * values come out the same through both conversions). */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

static int op_id(const char *name) {
  int id = mx_op_find(name);
  return id >= 0 ? id : mx_err(MX_EINVAL, "index conversion: no op '%s'", name);
}

/* a one-input node op(in) with one string attribute key=val, named `name` */
static int add1(mx_graph *g, const char *opname, const char *name, const char *key,
                const char *val, int in_node, int in_out) {
  int op = op_id(opname);
  if (op < 0) return op;
  const char *keys[1] = {key}, *vals[1] = {val};
  return mx_graph_add_op_attrs(g, op, name, key ? 1 : 0, keys, vals, 1, &in_node, &in_out);
}

static int input_of(const char *name) {
  if (!strcmp(name, "pick") || !strcmp(name, "take") || !strcmp(name, "gather_nd")) return 1;
  if (!strcmp(name, "one_hot")) return 0;
  return -1;
}

/* the output holding positions (-1: none) */
static int output_of(const mx_op_def *def, const void *params) {
  if (!strcmp(def->name, "argmax") || !strcmp(def->name, "argmin") || !strcmp(def->name, "argsort"))
    return 0;
  if (strcmp(def->name, "topk") != 0) return -1;
  int n = mx_op_nout(def, params); /* ret_typ: indices 1 output, both 2, value / mask 1 */
  for (int p = 0; p < def->nparams; p++)
    if (!strcmp(def->params[p].name, "ret_typ")) {
      int v = *(const int32_t *)((const char *)params + def->params[p].offset);
      const char *s = def->params[p].values[v];
      if (!strcmp(s, "indices")) return 0;
      if (!strcmp(s, "both") && n == 2) return 1;
    }
  return -1;
}

int mx_graph_index_from_mxnet(const mx_graph *g, mx_graph **out) {
  mx_graph *h = mx_graph_new();
  int *map = malloc(((size_t)g->n + 1) * sizeof *map);
  int *emap = malloc(((size_t)g->nentries + 1) * sizeof *emap);
  int rc = h && map && emap ? MX_OK : mx_err(MX_ENOMEM, "index conversion: out of memory");
  for (int e = 0; !rc && e < g->nentries; e++) emap[e] = -1;
  char nm[512];
  for (int i = 0; !rc && i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    int in_node[64], in_out[64];
    if (nd->nin > 64) { rc = mx_err(MX_EINVAL, "index conversion: node '%s' has %d inputs", nd->name, nd->nin); break; }
    for (int k = 0; k < nd->nin; k++) {
      int e = emap[g->nodes[nd->in_node[k]].row + nd->in_out[k]];
      in_node[k] = e >= 0 ? e >> 8 : map[nd->in_node[k]];
      in_out[k] = e >= 0 ? e & 0xff : nd->in_out[k];
    }
    const mx_op_def *def = mx_graph_def(g, i);
    int j = def ? input_of(def->name) : -1;
    if (j >= 0 && j < nd->nin) { /* positions + 1 (gather_nd: i + (i >= 0)) */
      snprintf(nm, sizeof nm, "%s_index1", nd->name);
      int c;
      if (!strcmp(def->name, "gather_nd")) {
        char pn[520];
        snprintf(pn, sizeof pn, "%s_pos", nm);
        int pos = add1(h, "greater_equal_scalar", pn, "scalar", "0", in_node[j], in_out[j]);
        if (pos < 0) { rc = pos; break; }
        int an[2] = {in_node[j], pos}, ao[2] = {in_out[j], 0};
        int add = op_id("add");
        c = add < 0 ? add : mx_graph_add_op(h, add, nm, NULL, 2, an, ao);
      } else {
        c = add1(h, "add_scalar", nm, "scalar", "1", in_node[j], in_out[j]);
      }
      if (c < 0) { rc = c; break; }
      in_node[j] = c;
      in_out[j] = 0;
    }
    int id = mx_graph_copy_node(h, g, i, in_node, in_out);
    if (id < 0) { rc = id; break; }
    map[i] = id;
    int o = def ? output_of(def, nd->params) : -1;
    if (o >= 0) { /* positions - 1 (argmax, argmin: in float32, MXNet's dtype for float32 data) */
      bool arg = !strcmp(def->name, "argmax") || !strcmp(def->name, "argmin");
      snprintf(nm, sizeof nm, "%s_minus1", nd->name);
      int m = add1(h, "sub_scalar", nm, "scalar", "1", id, o);
      if (m >= 0 && arg) {
        snprintf(nm, sizeof nm, "%s_float32", nd->name);
        m = add1(h, "cast", nm, "dtype", "float32", m, 0);
      }
      if (m < 0) { rc = m; break; }
      emap[nd->row + o] = m << 8;
    }
  }
  if (!rc) rc = mx_graph_copy_heads(h, g, map, emap);
  free(map);
  free(emap);
  if (rc) {
    mx_graph_free(h);
    return rc;
  }
  *out = h;
  return MX_OK;
}
