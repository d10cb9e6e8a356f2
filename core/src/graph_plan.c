/* graph_plan.c — memory planning: which op entries of a graph share a buffer.
 *
 * Walks the nodes in order with each entry's last use (liveness): an output takes its
 * input's buffer when the op declares that pair in place (op table `inplace`), the
 * input dies here and the sizes match; else the smallest free buffer that fits, else
 * the largest free one grown to fit (MXNet's rule: growing beats a new buffer), else a
 * new buffer. An input's buffer is freed only after the node's outputs are placed, so
 * an op never writes a buffer it still reads unless it declared that safe. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

static int64_t entry_bytes(const mx_desc *d) {
  int64_t n = mx_shape_prod(d->ndim, d->shape) * (int64_t)mx_dtype_size(d->dtype);
  return (n + 63) & ~(int64_t)63; /* cache-line multiples: views start aligned */
}

int mx_graph_plan_memory(const mx_graph *g, const mx_desc *entries, const uint8_t *skip,
                         int *slot, int64_t *slot_bytes, int *nslots, int64_t *total_bytes) {
  if (!g || !entries || !slot || !slot_bytes || !nslots)
    return mx_err(MX_EINVAL, "mx_graph_plan_memory: NULL argument");
  int ne = g->nentries;
  int *last = malloc((size_t)(ne ? ne : 1) * sizeof(int));
  bool *is_free = malloc((size_t)(ne ? ne : 1) * sizeof(bool));
  if (!last || !is_free) {
    free(last);
    free(is_free);
    return mx_err(MX_ENOMEM, "plan_memory: out of memory");
  }
  for (int e = 0; e < ne; e++) {
    slot[e] = -1;
    last[e] = -1;
  }
  for (int i = 0; i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->nin; k++) {
      int e = g->nodes[nd->in_node[k]].row + nd->in_out[k];
      if (last[e] < i) last[e] = i;
    }
  }
  for (int h = 0; h < g->nheads; h++) last[g->nodes[g->head_node[h]].row + g->head_out[h]] = g->n;
  int ns = 0;
  for (int i = 0; i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (nd->op == MX_GRAPH_VAR) continue;
    const mx_op_def *def = mx_graph_def(g, i);
    for (int k = 0; k < nd->nout; k++) {
      int e = nd->row + k;
      if ((skip && skip[e]) || last[e] == g->n) continue; /* heads: the caller's buffers */
      const mx_desc *d = &entries[e];
      if (d->ndim < 0 || d->dtype < 0) {
        free(last);
        free(is_free);
        return mx_err(MX_EINVAL, "plan_memory: node '%s' output %d has an unknown shape or "
                      "dtype (run inference first)", nd->name, k + 1);
      }
      int64_t need = entry_bytes(d);
      int s = -1;
      /* in place: the declared input, dying here, same bytes, its buffer not yet reused */
      int j = def ? mx_op_inplace(def, nd->params, nd->nin, k) : -1;
      if (j >= 0) {
        int ie = g->nodes[nd->in_node[j]].row + nd->in_out[j];
        bool taken = false;
        for (int kk = 0; kk < k; kk++) taken |= slot[nd->row + kk] == slot[ie];
        if (slot[ie] >= 0 && last[ie] == i && !taken && entry_bytes(&entries[ie]) == need) {
          int uses = 0; /* the input read twice by this node (x * x) must not be written */
          for (int kk = 0; kk < nd->nin; kk++)
            uses += g->nodes[nd->in_node[kk]].row + nd->in_out[kk] == ie;
          if (uses == 1) s = slot[ie];
        }
      }
      if (s < 0) {
        int best = -1, largest = -1;
        for (int c = 0; c < ns; c++) {
          if (!is_free[c]) continue;
          if (slot_bytes[c] >= need && (best < 0 || slot_bytes[c] < slot_bytes[best])) best = c;
          if (largest < 0 || slot_bytes[c] > slot_bytes[largest]) largest = c;
        }
        if (best < 0 && largest >= 0) {
          best = largest;
          slot_bytes[best] = need;
        }
        if (best < 0) {
          best = ns++;
          slot_bytes[best] = need;
        }
        s = best;
      }
      is_free[s] = false;
      slot[e] = s;
    }
    /* inputs dying here (their buffer not taken over by an output) and outputs that
     * nothing reads */
    for (int k = 0; k < nd->nin + nd->nout; k++) {
      int e = k < nd->nin ? g->nodes[nd->in_node[k]].row + nd->in_out[k] : nd->row + k - nd->nin;
      if (slot[e] < 0 || (k < nd->nin && last[e] != i) || (k >= nd->nin && last[e] >= 0))
        continue;
      bool held = false;
      for (int kk = 0; kk < nd->nout; kk++) held |= k < nd->nin && slot[nd->row + kk] == slot[e];
      if (!held) is_free[slot[e]] = true;
    }
  }
  int64_t total = 0;
  for (int c = 0; c < ns; c++) total += slot_bytes[c];
  *nslots = ns;
  if (total_bytes) *total_bytes = total;
  free(last);
  free(is_free);
  return MX_OK;
}
