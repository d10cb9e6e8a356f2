/* graph_pass.c — graph-to-graph passes: dead-code elimination, common-subexpression
 * elimination, constant folding, BatchNorm folded into the convolution before it.
 * Each builds a new graph and leaves its input alone; variables are always kept (in
 * order) so a graph's inputs stay the same through every pass. */
#include "graph.h"
#include "mx_ops_gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A copy of src's node i with its inputs remapped (map: node, omap: entry -> output
 * index in the new node, NULL: the same index). */
static int copy_mapped(mx_graph *g, const mx_graph *src, int i, const int *map, const int *omap,
                       const int *emap) {
  const mx_graph_node *nd = &src->nodes[i];
  int in_node[64], in_out[64];
  if (nd->nin > 64) return mx_err(MX_EINVAL, "graph pass: node '%s' has too many inputs", nd->name);
  for (int k = 0; k < nd->nin; k++) {
    int e = src->nodes[nd->in_node[k]].row + nd->in_out[k];
    if (emap && emap[e] >= 0) { /* the entry was replaced by another node's output */
      in_node[k] = emap[e] >> 8;
      in_out[k] = emap[e] & 0xff;
    } else {
      in_node[k] = map[nd->in_node[k]];
      in_out[k] = omap ? omap[e] : nd->in_out[k];
    }
  }
  return mx_graph_copy_node(g, src, i, in_node, in_out);
}

/* ---- dead code ------------------------------------------------------------------ */

int mx_graph_pass_dce(const mx_graph *src, mx_graph **out) {
  if (!src || !out) return mx_err(MX_EINVAL, "dce: NULL argument");
  int n = src->n, rc = MX_OK;
  bool *live = calloc((size_t)(n ? n : 1), sizeof(bool));
  int *map = malloc((size_t)(n ? n : 1) * sizeof(int));
  mx_graph *g = mx_graph_new();
  if (!live || !map || !g) {
    free(live);
    free(map);
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "dce: out of memory");
  }
  for (int k = 0; k < src->nheads; k++) live[src->head_node[k]] = true;
  for (int i = n - 1; i >= 0; i--) {
    const mx_graph_node *nd = &src->nodes[i];
    if (nd->op == MX_GRAPH_VAR) live[i] = true; /* the inputs stay the same */
    /* ops updating an auxiliary state in place have an effect beyond their outputs */
    const mx_op_def *def = mx_graph_def(src, i);
    if (def && def->naux > 0) live[i] = true;
    if (!live[i]) continue;
    for (int k = 0; k < nd->nin; k++) live[nd->in_node[k]] = true;
  }
  for (int i = 0; i < n && !rc; i++) {
    map[i] = -1;
    if (!live[i]) continue;
    int id = copy_mapped(g, src, i, map, NULL, NULL);
    if (id < 0) rc = id;
    else map[i] = id;
  }
  if (!rc) rc = mx_graph_copy_heads(g, src, map, NULL);
  free(live);
  free(map);
  if (rc) {
    mx_graph_free(g);
    return rc;
  }
  *out = g;
  return MX_OK;
}

/* ---- common subexpressions ------------------------------------------------------ */

static bool same_node(const mx_graph *g, int a, int b, const int *map) {
  const mx_graph_node *x = &g->nodes[a], *y = &g->nodes[b];
  if (x->op != y->op || x->op < 0 || x->nin != y->nin) return false;
  for (int k = 0; k < x->nin; k++)
    if (map[x->in_node[k]] != map[y->in_node[k]] || x->in_out[k] != y->in_out[k]) return false;
  size_t ps = mx_ops[x->op].params_size;
  return !ps || memcmp(x->params, y->params, ps) == 0;
}

int mx_graph_pass_cse(const mx_graph *src, mx_graph **out) {
  if (!src || !out) return mx_err(MX_EINVAL, "cse: NULL argument");
  int n = src->n, rc = MX_OK;
  int *map = malloc((size_t)(n ? n : 1) * sizeof(int));   /* old -> new node */
  int *canon = malloc((size_t)(n ? n : 1) * sizeof(int)); /* old -> first equal old node */
  int cap = 16;
  while (cap < 2 * n) cap *= 2;
  int *tab = malloc((size_t)cap * sizeof(int));
  mx_graph *g = mx_graph_new();
  if (!map || !canon || !tab || !g) {
    free(map);
    free(canon);
    free(tab);
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "cse: out of memory");
  }
  for (int i = 0; i < cap; i++) tab[i] = -1;
  for (int i = 0; i < n && !rc; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    const mx_op_def *def = mx_graph_def(src, i);
    /* random draws and in-place updates are not pure: never merged */
    bool pure = def && !(def->flags & MX_OPF_RNG) && def->naux == 0;
    if (pure) {
      uint64_t h = (uint64_t)nd->op * 0x9E3779B97F4A7C15ull;
      for (int k = 0; k < nd->nin; k++)
        h = (h ^ (uint64_t)(map[nd->in_node[k]] * 131 + nd->in_out[k])) * 0x100000001B3ull;
      int slot = (int)(h & (uint64_t)(cap - 1));
      int found = -1;
      while (tab[slot] >= 0) {
        if (same_node(src, tab[slot], i, map)) {
          found = tab[slot];
          break;
        }
        slot = (slot + 1) & (cap - 1);
      }
      if (found >= 0) {
        map[i] = map[found];
        canon[i] = found;
        continue;
      }
      tab[slot] = i;
    }
    canon[i] = i;
    int id = copy_mapped(g, src, i, map, NULL, NULL);
    if (id < 0) rc = id;
    else map[i] = id;
  }
  if (!rc) rc = mx_graph_copy_heads(g, src, map, NULL);
  free(map);
  free(canon);
  free(tab);
  if (rc) {
    mx_graph_free(g);
    return rc;
  }
  *out = g;
  return MX_OK;
}

/* ---- constant folding ----------------------------------------------------------- */

/* Nodes whose inputs are all constants (variables with a value, or folded nodes) and
 * that draw no random numbers and update nothing in place are evaluated now (eager
 * ops, waited for) and become variables holding the value. */
int mx_graph_pass_fold(const mx_graph *src, mx_graph **out) {
  if (!src || !out) return mx_err(MX_EINVAL, "fold: NULL argument");
  int n = src->n, ne = src->nentries, rc = MX_OK;
  int *map = malloc((size_t)(n ? n : 1) * sizeof(int));
  int *emap = malloc((size_t)(ne ? ne : 1) * sizeof(int));
  mx_tensor **val = calloc((size_t)(ne ? ne : 1), sizeof *val); /* entry -> constant */
  mx_graph *g = mx_graph_new();
  if (!map || !emap || !val || !g) {
    free(map);
    free(emap);
    free(val);
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "fold: out of memory");
  }
  for (int e = 0; e < ne; e++) emap[e] = -1;
  /* needed[i]: node i's value is read by a node that is not folded, or is a head */
  for (int i = 0; i < n && !rc; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    map[i] = -1;
    if (nd->op == MX_GRAPH_VAR) {
      if (nd->value) {
        mx_tensor_retain(nd->value);
        val[nd->row] = nd->value;
      }
      int id = mx_graph_copy_node(g, src, i, NULL, NULL);
      if (id < 0) rc = id;
      else map[i] = id;
      continue;
    }
    const mx_op_def *def = mx_graph_def(src, i);
    bool foldable = def && !(def->flags & MX_OPF_RNG) && def->naux == 0 && nd->nout <= 8 &&
                    nd->nin <= 64;
    for (int k = 0; foldable && k < nd->nin; k++)
      foldable = val[src->nodes[nd->in_node[k]].row + nd->in_out[k]] != NULL;
    if (foldable) {
      mx_tensor *ins[64], *res[8] = {0};
      for (int k = 0; k < nd->nin; k++) ins[k] = val[src->nodes[nd->in_node[k]].row + nd->in_out[k]];
      int r = mx_op_invoke(nd->op, nd->nin, ins, nd->params, nd->nout, res);
      for (int k = 0; r == MX_OK && k < nd->nout; k++) r = mx_tensor_wait_to_read(res[k]);
      if (r == MX_OK) {
        for (int k = 0; k < nd->nout; k++) {
          val[nd->row + k] = res[k]; /* owned here, released at the end (error or not) */
          if (rc) continue;
          char name[256];
          if (nd->nout == 1) snprintf(name, sizeof name, "%s", nd->name);
          else snprintf(name, sizeof name, "%s_output%d", nd->name, k);
          int id = mx_graph_add_var(g, name);
          if (id < 0) rc = id;
          else rc = mx_graph_set_value(g, id, res[k]);
          if (!rc) emap[nd->row + k] = id << 8;
        }
        continue;
      }
      /* an op that fails on these constants fails at run time too: keep it, say it then */
      for (int k = 0; k < nd->nout; k++)
        if (res[k]) mx_tensor_release(res[k]);
    }
    int id = copy_mapped(g, src, i, map, NULL, emap);
    if (id < 0) rc = id;
    else map[i] = id;
  }
  if (!rc) rc = mx_graph_copy_heads(g, src, map, emap);
  for (int e = 0; e < ne; e++)
    if (val[e]) mx_tensor_release(val[e]);
  free(map);
  free(emap);
  free(val);
  if (rc) {
    mx_graph_free(g);
    return rc;
  }
  *out = g;
  return MX_OK;
}

/* ---- BatchNorm folded into convolution (inference) --------------------------------
 * conv(x, w[, b]) -> batch_norm(., gamma, beta, mean, var) in inference mode, the
 * convolution's output read by nothing else, channels on axis 1, becomes
 *   scale = gamma / sqrt(var + eps)   (gamma = 1 when fix_gamma)
 *   conv(x, w * scale[:, None, None, ...], (b - mean) * scale + beta)
 * The new weight and bias are ops on the parameters (a few hundred elements of work
 * next to the convolution); constant folding precomputes them when the parameters are
 * constants (exported models, the C inference API). */
static int add_attrs(mx_graph *g, const char *opname, const char *name, const char *k,
                     const char *v, int nin, const int *in_node) {
  int zero[4] = {0, 0, 0, 0};
  const char *keys[1] = {k}, *vals[1] = {v};
  return mx_graph_add_op_attrs(g, mx_op_find(opname), name, k ? 1 : 0, keys, vals, nin, in_node,
                               zero);
}

int mx_graph_pass_fold_bn(const mx_graph *src, const mx_desc *entries, mx_graph **out) {
  if (!src || !out || !entries) return mx_err(MX_EINVAL, "fold_bn: NULL argument");
  int n = src->n, ne = src->nentries, rc = MX_OK;
  int conv = mx_op_find("convolution"), bn = mx_op_find("batch_norm");
  int *map = malloc((size_t)(n ? n : 1) * sizeof(int));
  int *emap = malloc((size_t)(ne ? ne : 1) * sizeof(int));
  int *uses = calloc((size_t)(ne ? ne : 1), sizeof(int));
  int *fold_into = malloc((size_t)(n ? n : 1) * sizeof(int)); /* conv node -> its bn, -1 */
  mx_graph *g = mx_graph_new();
  if (!map || !emap || !uses || !fold_into || !g) {
    free(map);
    free(emap);
    free(uses);
    free(fold_into);
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "fold_bn: out of memory");
  }
  for (int i = 0; i < n; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    fold_into[i] = -1;
    for (int k = 0; k < nd->nin; k++) uses[src->nodes[nd->in_node[k]].row + nd->in_out[k]]++;
  }
  for (int h = 0; h < src->nheads; h++) uses[src->nodes[src->head_node[h]].row + src->head_out[h]]++;
  for (int e = 0; e < ne; e++) emap[e] = -1;
  for (int i = 0; i < n; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    if (nd->op != bn) continue;
    const struct mx_params_batch_norm *p = nd->params;
    int c = nd->in_node[0];
    if (p->training || p->output_mean_var || p->axis != 1 || nd->in_out[0] != 0) continue;
    if (src->nodes[c].op != conv || uses[src->nodes[c].row] != 1) continue;
    const struct mx_params_convolution *cp = src->nodes[c].params;
    /* channels first (layout None, NCW, NCHW, NCDHW): the scale runs along axis 1 */
    if (cp->act_type != 0 || cp->layout > 3 || entries[src->nodes[c].row].dtype != MX_F32) continue;
    fold_into[c] = i;
  }
  for (int i = 0; i < n && !rc; i++) {
    const mx_graph_node *b = &src->nodes[i];
    map[i] = -1;
    if (fold_into[i] >= 0) continue; /* a folded convolution: made at its BatchNorm */
    int c = b->op == bn ? b->in_node[0] : -1;
    if (c < 0 || fold_into[c] != i) {
      int id = copy_mapped(g, src, i, map, NULL, emap);
      if (id < 0) rc = id;
      else map[i] = id;
      continue;
    }
    const mx_graph_node *nd = &src->nodes[c];
    const struct mx_params_batch_norm *bp = b->params;
    const struct mx_params_convolution *cp = nd->params;
    int ndim = entries[src->nodes[nd->in_node[1]].row + nd->in_out[1]].ndim;
    int in[5];
    for (int k = 0; k < 5; k++) in[k] = map[b->in_node[k]]; /* gamma beta mean var (+data) */
    char nm[300], eps[64], shp[64];
    snprintf(eps, sizeof eps, "%.17g", bp->eps);
    /* scale = gamma / sqrt(var + eps) */
    snprintf(nm, sizeof nm, "%s_fold_var_eps", b->name);
    int ve = add_attrs(g, "_plus_scalar", nm, "scalar", eps, 1, &in[4]);
    snprintf(nm, sizeof nm, "%s_fold_rstd", b->name);
    int rs = ve < 0 ? ve : add_attrs(g, "rsqrt", nm, NULL, NULL, 1, &ve);
    int scale = rs;
    if (rs >= 0 && !bp->fix_gamma) {
      int ab[2] = {in[1], rs};
      snprintf(nm, sizeof nm, "%s_fold_scale", b->name);
      scale = add_attrs(g, "elemwise_mul", nm, NULL, NULL, 2, ab);
    }
    /* w' = w * reshape(scale, (-1, 1, 1...)) */
    size_t u = (size_t)snprintf(shp, sizeof shp, "(-1");
    for (int d = 1; d < ndim && u < sizeof shp; d++) u += (size_t)snprintf(shp + u, sizeof shp - u, ", 1");
    snprintf(shp + u, sizeof shp - u, ")");
    snprintf(nm, sizeof nm, "%s_fold_scale_w", b->name);
    int sw = scale < 0 ? scale : add_attrs(g, "Reshape", nm, "shape", shp, 1, &scale);
    int wi[2] = {map[nd->in_node[1]], sw};
    snprintf(nm, sizeof nm, "%s_folded_weight", nd->name);
    int w2 = sw < 0 ? sw : add_attrs(g, "broadcast_mul", nm, NULL, NULL, 2, wi);
    /* b' = (b - mean) * scale + beta, or beta - mean * scale without a bias */
    int b2 = w2;
    if (w2 >= 0) {
      int ms[2] = {in[3], scale};
      snprintf(nm, sizeof nm, "%s_fold_mean_scale", b->name);
      int m = add_attrs(g, "elemwise_mul", nm, NULL, NULL, 2, ms);
      if (m >= 0 && !cp->no_bias) {
        int bs[2] = {map[nd->in_node[2]], scale};
        snprintf(nm, sizeof nm, "%s_fold_bias_scale", b->name);
        int bsn = add_attrs(g, "elemwise_mul", nm, NULL, NULL, 2, bs);
        int sb[2] = {bsn, m};
        snprintf(nm, sizeof nm, "%s_fold_bias_shift", b->name);
        m = bsn < 0 ? bsn : add_attrs(g, "elemwise_sub", nm, NULL, NULL, 2, sb);
        if (m >= 0) { /* (b*s - mean*s) + beta */
          int pb[2] = {m, in[2]};
          snprintf(nm, sizeof nm, "%s_folded_bias", nd->name);
          b2 = add_attrs(g, "elemwise_add", nm, NULL, NULL, 2, pb);
        } else {
          b2 = m;
        }
      } else if (m >= 0) { /* beta - mean*s */
        int pb[2] = {in[2], m};
        snprintf(nm, sizeof nm, "%s_folded_bias", nd->name);
        b2 = add_attrs(g, "elemwise_sub", nm, NULL, NULL, 2, pb);
      } else {
        b2 = m;
      }
    }
    if (b2 < 0) {
      rc = b2;
      break;
    }
    struct mx_params_convolution np = *cp;
    np.no_bias = false;
    int cin[3] = {map[nd->in_node[0]], w2, b2};
    int cout[3] = {nd->in_out[0], 0, 0};
    int id = mx_graph_add_op(g, conv, b->name, &np, 3, cin, cout);
    if (id < 0) {
      rc = id;
      break;
    }
    map[i] = id; /* the BatchNorm's output is the new convolution's */
  }
  if (!rc) rc = mx_graph_copy_heads(g, src, map, emap);
  free(map);
  free(emap);
  free(uses);
  free(fold_into);
  if (rc) {
    mx_graph_free(g);
    return rc;
  }
  *out = g;
  return MX_OK;
}

/* The pass dispatcher (mx.h mx_graph_pass): the IR (graph.c) knows no pass. */
int mx_graph_pass(const mx_graph *g, const char *name, const mx_desc *entries, mx_graph **out) {
  if (!g || !name || !out) return mx_err(MX_EINVAL, "mx_graph_pass: NULL argument");
  *out = NULL;
  if (strcmp(name, "dce") == 0) return mx_graph_pass_dce(g, out);
  if (strcmp(name, "cse") == 0) return mx_graph_pass_cse(g, out);
  if (strcmp(name, "fold") == 0) return mx_graph_pass_fold(g, out);
  bool fuse = strcmp(name, "fuse") == 0, fold_bn = strcmp(name, "fold_bn") == 0,
       fuse_act = strcmp(name, "fuse_act") == 0;
  if (!fuse && !fold_bn && !fuse_act)
    return mx_err(MX_EINVAL, "unknown graph pass '%s' (dce, cse, fold, fuse, fold_bn, fuse_act)",
                  name);
  if (!entries)
    return mx_err(MX_EINVAL, "graph pass %s: needs the graph's inferred descriptors", name);
  return fuse        ? mx_graph_pass_fuse(g, entries, out)
         : fold_bn   ? mx_graph_pass_fold_bn(g, entries, out)
                     : mx_graph_pass_fuse_act(g, entries, out);
}
