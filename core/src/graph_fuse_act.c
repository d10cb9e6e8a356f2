/* graph_fuse_act.c — an inference graph's convolutions and batch norms absorb what
 * follows them, as oneDNN post-ops and flags (MXNet's oneDNN subgraph backend does the
 * same):
 *   conv -> relu | Activation(relu) | clip(0, 6)      conv with act_type relu / relu6
 *   conv + r (add of the same shape) [-> relu]        convolution_sum(x, w, r, b)
 *                                                      [act_type relu]
 *   batch_norm -> relu | Activation(relu)             batch_norm with act_type relu
 * when the convolution has no activation of its own, is float32 and channels-first, and
 * its output is read by that one node only (not a head); the batch norm likewise, in
 * inference (the moving statistics), its mean and variance outputs unread. The fused node takes the place
 * of the last node it absorbs (the residual is computed by then) and its name, so the
 * entry downstream nodes and the heads read keeps its name. Run after fold_bn and fold
 * (the BatchNorm between a convolution and its activation is gone by then) and before
 * the elementwise fusion (which would take the activation into a fused node). */
#include "graph.h"
#include "mx_ops_gen.h"

#include <stdlib.h>
#include <string.h>

enum { ACT_NONE, ACT_RELU, ACT_RELU6 };

typedef struct ids { int conv, conv_sum, relu, activation, clip, add, bn; } ids;

/* The activation node i applies (ACT_NONE: none this pass fuses). */
static int act_of(const mx_graph *g, int i, const ids *o) {
  const mx_graph_node *nd = &g->nodes[i];
  if (nd->op == o->relu) return ACT_RELU;
  if (nd->op == o->activation &&
      ((const struct mx_params_activation *)nd->params)->act_type == MX_ACTIVATION_ACT_TYPE_RELU)
    return ACT_RELU;
  if (nd->op == o->clip) {
    const struct mx_params_clip *p = nd->params;
    if (p->has_a_min && p->has_a_max && p->a_min == 0 && p->a_max == 6) return ACT_RELU6;
  }
  return ACT_NONE;
}

static bool same_desc(const mx_desc *a, const mx_desc *b) {
  if (a->ndim != b->ndim || a->dtype != b->dtype) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

/* What node `at` becomes: the convolution c absorbed with residual entry (node, out)
 * (node -1: none) and activation act. */
typedef struct fusion { int c, r_node, r_out, act; } fusion;

int mx_graph_pass_fuse_act(const mx_graph *src, const mx_desc *entries, mx_graph **out) {
  if (!src || !out || !entries) return mx_err(MX_EINVAL, "fuse_act: NULL argument");
  int n = src->n, ne = src->nentries, rc = MX_OK;
  ids o = {mx_op_find("convolution"), mx_op_find("convolution_sum"), mx_op_find("relu"),
           mx_op_find("activation"), mx_op_find("clip"), mx_op_find("add"),
           mx_op_find("batch_norm")};
  int *map = malloc((size_t)(n ? n : 1) * sizeof(int));
  int *uses = calloc((size_t)(ne ? ne : 1), sizeof(int));
  int *reader = malloc((size_t)(ne ? ne : 1) * sizeof(int)); /* entry -> its (last) reader */
  bool *gone = calloc((size_t)(n ? n : 1), sizeof(bool));     /* absorbed into a later node */
  fusion *fu = malloc((size_t)(n ? n : 1) * sizeof *fu);      /* node -> what it becomes */
  mx_graph *g = mx_graph_new();
  if (!map || !uses || !reader || !gone || !fu || !g) {
    free(map), free(uses), free(reader), free(gone), free(fu);
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "fuse_act: out of memory");
  }
  for (int i = 0; i < n; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    fu[i].c = -1;
    for (int k = 0; k < nd->nin; k++) {
      int x = src->nodes[nd->in_node[k]].row + nd->in_out[k];
      uses[x]++;
      reader[x] = i;
    }
  }
  for (int h = 0; h < src->nheads; h++) uses[src->nodes[src->head_node[h]].row + src->head_out[h]] += 2;
  /* the single reader of entry x, -1 when it has several, is a head, or reads it twice */
#define ONLY_READER(x) (uses[x] == 1 ? reader[x] : -1)
  for (int c = 0; c < n; c++) {
    const mx_graph_node *cn = &src->nodes[c];
    if (cn->op == o.bn) {
      const struct mx_params_batch_norm *bp = cn->params;
      int u = ONLY_READER(cn->row);
      if ((bp->training && !bp->use_global_stats) || bp->act_type != MX_BATCH_NORM_ACT_TYPE_NONE ||
          u < 0 || gone[u] || fu[u].c >= 0 || uses[cn->row + 1] || uses[cn->row + 2] ||
          act_of(src, u, &o) != ACT_RELU)
        continue;
      gone[c] = true;
      fu[u] = (fusion){c, -1, 0, ACT_RELU};
      continue;
    }
    if (cn->op != o.conv || cn->nout != 1) continue;
    const struct mx_params_convolution *cp = cn->params;
    const mx_desc *cd = &entries[cn->row];
    if (cp->act_type != MX_CONVOLUTION_ACT_TYPE_NONE || cp->layout > MX_CONVOLUTION_LAYOUT_NCDHW ||
        cd->dtype != MX_F32)
      continue;
    int u = ONLY_READER(cn->row);
    if (u < 0 || gone[u] || fu[u].c >= 0) continue; /* (an add of two convolutions: one) */
    fusion f = {c, -1, 0, ACT_NONE};
    int at = u;
    const mx_graph_node *un = &src->nodes[u];
    if ((f.act = act_of(src, u, &o)) == ACT_NONE) {
      /* (a registry without convolution_sum, -DMX_OPS: the add stays) */
      if (un->op != o.add || un->nin != 2 || o.conv_sum < 0) continue;
      int k = un->in_node[0] == c ? 1 : 0; /* the other input: the residual */
      const mx_desc *rd = &entries[src->nodes[un->in_node[k]].row + un->in_out[k]];
      if (un->in_node[k] == c || !same_desc(rd, cd) || !same_desc(&entries[un->row], cd)) continue;
      f.r_node = un->in_node[k];
      f.r_out = un->in_out[k];
      int v = ONLY_READER(un->row);
      if (v >= 0 && fu[v].c < 0 && act_of(src, v, &o) == ACT_RELU) {
        f.act = ACT_RELU;
        gone[u] = true;
        at = v;
      }
    }
    gone[c] = true;
    fu[at] = f;
  }
#undef ONLY_READER
  for (int i = 0; i < n && !rc; i++) {
    map[i] = -1;
    if (gone[i]) continue;
    const mx_graph_node *nd = &src->nodes[i];
    if (fu[i].c < 0) {
      int in_node[64], in_out[64];
      if (nd->nin > 64) {
        rc = mx_err(MX_EINVAL, "fuse_act: node '%s' has too many inputs", nd->name);
        break;
      }
      for (int k = 0; k < nd->nin; k++) in_node[k] = map[nd->in_node[k]], in_out[k] = nd->in_out[k];
      int id = mx_graph_copy_node(g, src, i, in_node, in_out);
      if (id < 0) rc = id;
      else map[i] = id;
      continue;
    }
    const fusion *f = &fu[i];
    const mx_graph_node *cn = &src->nodes[f->c];
    if (cn->op == o.bn) { /* the batch norm, its outputs, with the relu's name */
      struct mx_params_batch_norm bp = *(const struct mx_params_batch_norm *)cn->params;
      bp.act_type = MX_BATCH_NORM_ACT_TYPE_RELU;
      int in_node[8], in_out[8];
      for (int k = 0; k < cn->nin && k < 8; k++) in_node[k] = map[cn->in_node[k]], in_out[k] = cn->in_out[k];
      int id = mx_graph_add_op(g, o.bn, nd->name, &bp, cn->nin, in_node, in_out);
      if (id < 0) rc = id;
      else map[i] = id;
      continue;
    }
    struct mx_params_convolution np = *(const struct mx_params_convolution *)cn->params;
    np.act_type = f->act == ACT_RELU    ? MX_CONVOLUTION_ACT_TYPE_RELU
                  : f->act == ACT_RELU6 ? MX_CONVOLUTION_ACT_TYPE_RELU6
                                        : MX_CONVOLUTION_ACT_TYPE_NONE;
    int in_node[4], in_out[4], nin = 0;
    in_node[nin] = map[cn->in_node[0]], in_out[nin++] = cn->in_out[0];
    in_node[nin] = map[cn->in_node[1]], in_out[nin++] = cn->in_out[1];
    if (f->r_node >= 0) in_node[nin] = map[f->r_node], in_out[nin++] = f->r_out;
    if (cn->nin > 2) in_node[nin] = map[cn->in_node[2]], in_out[nin++] = cn->in_out[2];
    int id = mx_graph_add_op(g, f->r_node >= 0 ? o.conv_sum : o.conv, nd->name, &np, nin,
                             in_node, in_out);
    if (id < 0) rc = id;
    else map[i] = id;
  }
  if (!rc) rc = mx_graph_copy_heads(g, src, map, NULL);
  free(map), free(uses), free(reader), free(gone), free(fu);
  if (rc) {
    mx_graph_free(g);
    return rc;
  }
  *out = g;
  return MX_OK;
}
