/* graph_fuse.c — elementwise fusion: chains of float32 unary, binary (broadcasting)
 * and scalar ops with one output shape become one MX_GRAPH_FUSED node whose program
 * (graph.h) kernels/cpu/fused.c runs in one pass over memory.
 *
 * A node joins the group of an input when that input is made by a fusible node of the
 * same output shape that nothing else reads (not a head either): groups are trees
 * rooted at their last node, so no intermediate value is needed outside the group. */
#include "graph.h"
#include "mx_ops_gen.h"

#include <stdlib.h>
#include <string.h>

typedef struct fop { const char *name; int code; } fop;
static const fop FOPS[] = {
  {"neg", MX_FOP_NEG}, {"abs", MX_FOP_ABS}, {"square", MX_FOP_SQUARE}, {"relu", MX_FOP_RELU},
  {"sqrt", MX_FOP_SQRT}, {"rsqrt", MX_FOP_RSQRT}, {"reciprocal", MX_FOP_RECIP},
  {"exp", MX_FOP_EXP}, {"log", MX_FOP_LOG}, {"tanh", MX_FOP_TANH}, {"sigmoid", MX_FOP_SIGMOID},
  {"sin", MX_FOP_SIN}, {"cos", MX_FOP_COS}, {"erf", MX_FOP_ERF}, {"log1p", MX_FOP_LOG1P},
  {"expm1", MX_FOP_EXPM1}, {"softrelu", MX_FOP_SOFTRELU}, {"softsign", MX_FOP_SOFTSIGN},
  {"add", MX_FOP_ADD}, {"sub", MX_FOP_SUB}, {"mul", MX_FOP_MUL}, {"div", MX_FOP_DIV},
  {"maximum", MX_FOP_MAX}, {"minimum", MX_FOP_MIN}, {"pow", MX_FOP_POW},
  {"add_scalar", MX_FOP_ADDS}, {"sub_scalar", MX_FOP_SUBS}, {"rsub_scalar", MX_FOP_RSUBS},
  {"mul_scalar", MX_FOP_MULS}, {"div_scalar", MX_FOP_DIVS}, {"rdiv_scalar", MX_FOP_RDIVS},
  {"maximum_scalar", MX_FOP_MAXS}, {"minimum_scalar", MX_FOP_MINS},
  {"pow_scalar", MX_FOP_POWS}, {"rpow_scalar", MX_FOP_RPOWS},
};
enum { NFOPS = sizeof FOPS / sizeof FOPS[0] };

/* op id -> fused code (0: not fusible), made once */
static int *code_of;
static void init_codes(void) {
  static _Atomic int done;
  if (done) return;
  int *c = calloc((size_t)mx_num_ops, sizeof(int));
  if (!c) return;
  for (int i = 0; i < NFOPS; i++) {
    int op = mx_op_find(FOPS[i].name);
    if (op >= 0) c[op] = FOPS[i].code;
  }
  code_of = c;
  done = 1;
}

static double scalar_of(const mx_graph_node *nd) {
  const mx_op_def *def = &mx_ops[nd->op];
  for (int p = 0; p < def->nparams; p++)
    if (strcmp(def->params[p].name, "scalar") == 0)
      return *(const double *)((const char *)nd->params + def->params[p].offset);
  return 0;
}

static bool same_shape(const mx_desc *a, const mx_desc *b) {
  if (a->ndim != b->ndim) return false;
  for (int d = 0; d < a->ndim; d++)
    if (a->shape[d] != b->shape[d]) return false;
  return true;
}

static void free_prog(void *p) { free(p); }

int mx_graph_pass_fuse(const mx_graph *src, const mx_desc *entries, mx_graph **out) {
  if (!src || !out || !entries) return mx_err(MX_EINVAL, "fuse: NULL argument");
  init_codes();
  if (!code_of) return mx_err(MX_ENOMEM, "fuse: out of memory");
  int n = src->n, ne = src->nentries, rc = MX_OK;
  int *uses = calloc((size_t)(ne ? ne : 1), sizeof(int));
  int *group = malloc((size_t)(n ? n : 1) * sizeof(int));  /* node -> its group's root */
  int *size = calloc((size_t)(n ? n : 1), sizeof(int));    /* root -> members */
  /* root -> an upper bound of its group's external inputs: a program holds at most
   * MX_FUSED_MAX of them (a chain of 40 adds of 40 variables splits, it must not fail) */
  int *next_in = calloc((size_t)(n ? n : 1), sizeof(int));
  int *map = malloc((size_t)(n ? n : 1) * sizeof(int));
  mx_graph *g = mx_graph_new();
  if (!uses || !group || !size || !next_in || !map || !g) {
    free(uses);
    free(group);
    free(size);
    free(next_in);
    free(map);
    mx_graph_free(g);
    return mx_err(MX_ENOMEM, "fuse: out of memory");
  }
  for (int i = 0; i < n; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    for (int k = 0; k < nd->nin; k++) uses[src->nodes[nd->in_node[k]].row + nd->in_out[k]]++;
  }
  for (int h = 0; h < src->nheads; h++) uses[src->nodes[src->head_node[h]].row + src->head_out[h]] += 2;
  /* groups: a fusible node adopts the groups of its single-use fusible inputs */
  for (int i = 0; i < n; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    group[i] = -1;
    if (nd->op < 0 || !code_of[nd->op] || nd->nout != 1) continue;
    const mx_desc *od = &entries[nd->row];
    bool ok = od->dtype == MX_F32 && od->ndim >= 0;
    for (int k = 0; ok && k < nd->nin; k++)
      ok = entries[src->nodes[nd->in_node[k]].row + nd->in_out[k]].dtype == MX_F32;
    if (!ok) continue;
    group[i] = i;
    size[i] = 1;
    next_in[i] = nd->nin;
    for (int k = 0; k < nd->nin; k++) {
      int s = nd->in_node[k];
      int e = src->nodes[s].row + nd->in_out[k];
      if (group[s] < 0 || group[s] != s || uses[e] != 1) continue; /* s must be a root */
      if (!same_shape(&entries[e], od)) continue;
      if (size[s] + size[i] > MX_FUSED_MAX || next_in[i] - 1 + next_in[s] > MX_FUSED_MAX) continue;
      /* absorb s's group */
      for (int j = 0; j < i; j++)
        if (group[j] == s) group[j] = i;
      size[i] += size[s];
      size[s] = 0;
      next_in[i] += next_in[s] - 1;
    }
  }
  for (int i = 0; i < n && !rc; i++) {
    const mx_graph_node *nd = &src->nodes[i];
    map[i] = -1;
    if (group[i] >= 0 && group[i] != i) continue; /* inside a later node's group */
    if (group[i] != i || size[i] < 2) {
      int in_node[64], in_out[64];
      if (nd->nin > 64) {
        rc = mx_err(MX_EINVAL, "fuse: node '%s' has more than 64 inputs", nd->name);
        break;
      }
      for (int k = 0; k < nd->nin; k++) {
        in_node[k] = map[nd->in_node[k]];
        in_out[k] = nd->in_out[k];
      }
      int id = mx_graph_copy_node(g, src, i, in_node, in_out);
      if (id < 0) rc = id;
      else map[i] = id;
      continue;
    }
    /* the program: members in node order; external inputs deduplicated */
    mx_fused_prog *p = calloc(1, sizeof *p);
    int reg[MX_FUSED_MAX * 2]; /* member index -> register */
    int members[MX_FUSED_MAX];
    int nm = 0;
    int ext_e[MX_FUSED_MAX], ext_node[MX_FUSED_MAX], ext_out[MX_FUSED_MAX];
    int next = 0;
    if (!p) {
      rc = mx_err(MX_ENOMEM, "fuse: out of memory");
      break;
    }
    for (int j = 0; j <= i; j++)
      if (group[j] == i) members[nm++] = j;
    /* inputs first (registers 0..nin-1) */
    for (int m = 0; m < nm && !rc; m++) {
      const mx_graph_node *md = &src->nodes[members[m]];
      for (int k = 0; k < md->nin; k++) {
        int s = md->in_node[k];
        if (group[s] == i) continue;
        int e = src->nodes[s].row + md->in_out[k];
        int q = 0;
        while (q < next && ext_e[q] != e) q++;
        if (q == next) {
          if (next == MX_FUSED_MAX) {
            rc = mx_err(MX_EINVAL, "fuse: too many inputs");
            break;
          }
          ext_e[next] = e;
          ext_node[next] = map[s];
          ext_out[next] = md->in_out[k];
          next++;
        }
      }
    }
    p->nin = next;
    for (int m = 0; m < nm && !rc; m++) {
      const mx_graph_node *md = &src->nodes[members[m]];
      mx_fused_instr *in = &p->ins[p->n];
      in->code = code_of[md->op];
      int r[2] = {0, 0};
      for (int k = 0; k < md->nin && k < 2; k++) {
        int s = md->in_node[k];
        if (group[s] == i) {
          int mm = 0;
          while (members[mm] != s) mm++;
          r[k] = reg[mm];
        } else {
          int e = src->nodes[s].row + md->in_out[k];
          int q = 0;
          while (ext_e[q] != e) q++;
          r[k] = q;
        }
      }
      in->a = r[0];
      in->b = r[1];
      if (in->code >= MX_FOP_ADDS) in->s = (float)scalar_of(md);
      reg[m] = p->nin + p->n;
      p->n++;
    }
    int id = rc ? rc : mx_graph_push(g, MX_GRAPH_FUSED, nd->name, NULL, 0, next, ext_node, ext_out, 1);
    if (id < 0) {
      free(p);
      rc = id;
      break;
    }
    g->nodes[id].ext = p;
    g->nodes[id].ext_free = free_prog;
    map[i] = id;
  }
  if (!rc) {
    int nh = src->nheads;
    int *hn = malloc((size_t)(nh ? nh : 1) * sizeof(int));
    int *ho = malloc((size_t)(nh ? nh : 1) * sizeof(int));
    if (!hn || !ho) rc = mx_err(MX_ENOMEM, "fuse: out of memory");
    for (int k = 0; k < nh && !rc; k++) {
      hn[k] = map[src->head_node[k]];
      ho[k] = src->head_out[k];
    }
    if (!rc) rc = mx_graph_set_heads(g, nh, hn, ho);
    free(hn);
    free(ho);
  }
  free(uses);
  free(group);
  free(size);
  free(next_in);
  free(map);
  if (rc) {
    mx_graph_free(g);
    return rc;
  }
  *out = g;
  return MX_OK;
}
