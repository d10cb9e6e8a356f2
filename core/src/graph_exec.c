/* graph_exec.c — the graph executor: a graph compiled for one input signature (shapes,
 * dtypes, device), run with ONE engine push. MXNet's CachedOp / GraphExecutor; hybridize
 * and mx.sym's Executor run on it. On the CPU the pushed function runs the graph's
 * compiled plan (graph_compile.c: direct kernel calls, one arena, constants prepacked, as
 * the C inference runtime does) with the run's tensors bound to the plan's inputs and
 * outputs; elsewhere, and while the profiler or the NaN check wants every op seen, it
 * runs every node through mx_op_invoke (inline: engine.c's run_fn) into buffers the
 * memory plan shares (graph_plan.c). */
#include "graph_exec.h"
#include "engine.h"
#include "profiler.h"
#include "registry.h"
#include "session.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>


mx_graph *mx_graph_exec_clone_graph(const mx_graph *src) {
  mx_graph *g = mx_graph_new();
  if (!g) return NULL;
  for (int i = 0; i < src->n; i++) {
    const mx_graph_node *s = &src->nodes[i];
    if (mx_graph_copy_node(g, src, i, s->in_node, s->in_out) < 0) {
      mx_graph_free(g);
      return NULL;
    }
  }
  if (mx_graph_set_heads(g, src->nheads, src->head_node, src->head_out) != MX_OK) {
    mx_graph_free(g);
    return NULL;
  }
  return g;
}

void mx_graph_exec_unref(mx_graph_exec *e) {
  if (atomic_fetch_sub(&e->refs, 1) != 1) return;
  if (e->slots)
    for (int s = 0; s < e->nslots; s++)
      if (e->slots[s]) mx_tensor_release(e->slots[s]);
  free(e->slots);
  if (e->compiled) mx_plan_free(&e->plan);
  pthread_mutex_destroy(&e->plan_mu);
  mx_graph_free(e->g);
  mx_graph_free(e->orig);
  free(e->cval);
  free(e->cver);
  free(e->in_desc);
  free(e->fmap);
  free(e->fconst);
  free(e->fnode);
  if (e->seq) mx_tensor_release(e->seq);
  if (e->seq_prev) mx_tensor_release(e->seq_prev);
  free(e->in_node);
  free(e->in_aux);
  free(e->ent);
  free(e->slot);
  free(e->slot_bytes);
  free(e->last);
  free(e->head_of);
  free(e);
}

void mx_graph_exec_free(mx_graph_exec *e) {
  if (e) mx_graph_exec_unref(e);
}

/* Entries whose producer picks its output layout (oneDNN's blocked formats): not
 * planned, so the chain conv -> batch_norm -> relu keeps its layout; allocated by the
 * op and released after their last reader. */
static bool dynamic_entry(const mx_graph *g, int node) {
  return mx_kernel_picks_layout(g->nodes[node].op); /* false for variables, fused nodes */
}

/* Finds the inputs (variables without a value, in node order) of e->g, gives their
 * entries in[] and infers every entry. */
static int bind_inputs(mx_graph_exec *e, int nin, const mx_desc *in) {
  mx_graph *g = e->g;
  int n = g->n, ne = g->nentries;
  free(e->in_node);
  free(e->in_aux);
  free(e->ent);
  e->in_node = malloc((size_t)(n ? n : 1) * sizeof(int));
  e->in_aux = calloc((size_t)(n ? n : 1), sizeof(bool));
  e->ent = calloc((size_t)(ne ? ne : 1), sizeof(mx_desc));
  if (!e->in_node || !e->in_aux || !e->ent) return mx_err(MX_ENOMEM, "graph executor: out of memory");
  for (int x = 0; x < ne; x++) {
    e->ent[x].ndim = -1;
    e->ent[x].dtype = -1;
  }
  e->nin = 0;
  for (int i = 0; i < n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (nd->op != MX_GRAPH_VAR || nd->value) continue;
    if (e->nin == nin)
      return mx_err(MX_EINVAL, "graph executor: the graph has more than the %d inputs given "
                    "(next: '%s')", nin, nd->name);
    e->ent[nd->row] = in[e->nin];
    e->in_node[e->nin++] = i;
  }
  if (e->nin != nin)
    return mx_err(MX_EINVAL, "graph executor: %d inputs given, the graph has %d", nin, e->nin);
  int rc = mx_graph_infer(g, e->ent);
  /* creation shapes with unknown dims (a JSON _zeros of (4, 0, 8)) become the inferred
   * ones in this private copy: the kernels and passes see known shapes */
  if (rc == MX_OK) mx_graph_resolve_shapes(g, e->ent);
  return rc;
}

/* The optimising passes, in order; each result replaces e->g and is inferred again. */
static int optimize(mx_graph_exec *e, int nin, const mx_desc *in) {
  static const char *const passes[] = {"dce", "cse", "fold_bn", "fold", "fuse_act", "fuse"};
  for (size_t k = 0; k < sizeof passes / sizeof passes[0]; k++) {
    /* folding BatchNorm pays when the parameters are constants (the folded weights are
     * then computed once); on parameter inputs it would recompute them every run */
    if (strcmp(passes[k], "fold_bn") == 0 &&
        ((e->flags & MX_GRAPH_TRAINING) || !(e->flags & MX_GRAPH_FOLD_BN)))
      continue;
    /* fused activations and residual adds are inference's (a training forward keeps
     * the entries its gradient graph reads) */
    if (strcmp(passes[k], "fuse_act") == 0 && (e->flags & MX_GRAPH_TRAINING)) continue;
    mx_graph *ng = NULL;
    int rc = mx_graph_pass(e->g, passes[k], e->ent, &ng);
    if (rc) return rc;
    mx_graph_free(e->g);
    e->g = ng;
    if ((rc = bind_inputs(e, nin, in))) return rc;
  }
  return MX_OK;
}

/* The compiled plan of a CPU graph: its arena becomes the one planned slot; the node
 * path (profiling, NaN checks) then plans nothing and allocates each entry. A graph the
 * compiler cannot take keeps the node path for every run (its error, if it is the
 * user's, comes from that run as before). */
static void compile_plan(mx_graph_exec *e, const mx_desc *in) {
  mx_desc d[64], *dp = e->nin <= 64 ? d : malloc((size_t)e->nin * sizeof *dp);
  if (!dp) return;
  /* the build reads the constants (prepacking): their queued writes land first (an
   * error they carry reaches the runs, which read them too) */
  for (int i = 0; i < e->g->n; i++)
    if (e->g->nodes[i].value && mx_engine_wait_storage(e->g->nodes[i].value->storage, true))
      mx_set_last_error("");
  for (int k = 0; k < e->nin; k++) dp[k] = e->ent[e->g->nodes[e->in_node[k]].row];
  (void)in;
  int rc = mx_plan_build(e->g, e->nin, e->in_node, dp, MX_PLAN_BOUND, mx_session_cur(),
                         "graph executor", &e->plan);
  if (dp != d) free(dp);
  if (rc) {
    mx_set_last_error(""); /* not the user's: the node path runs */
    return;
  }
  e->compiled = true;
  for (int x = 0; x < e->g->nentries; x++) e->slot[x] = -1;
  e->nslots = 1;
  e->slot_bytes[0] = e->plan.planned ? e->plan.planned : 64;
  e->planned = e->plan.planned;
}

/* The index of def's train-mode param ("training"), -1: none. Such ops update their
 * auxiliary inputs only in train mode (BatchNorm's moving statistics), so an inference
 * graph may hold those as constants. */
static int train_flag(const mx_op_def *def) {
  for (int p = 0; def && p < def->nparams; p++)
    if (def->params[p].type == MX_PT_BOOL && strcmp(def->params[p].name, "training") == 0)
      return p;
  return -1;
}

int mx_graph_exec_make(const mx_graph *src, int nin, const mx_desc *in, int flags,
                     mx_graph_exec **out) {
  if (!src || !out || (nin && !in)) return mx_err(MX_EINVAL, "mx_graph_exec_new: NULL argument");
  *out = NULL;
  if (src->nheads < 1) return mx_err(MX_EINVAL, "graph executor: the graph has no outputs");
  mx_graph_exec *e = calloc(1, sizeof *e);
  if (!e) return mx_err(MX_ENOMEM, "graph executor: out of memory");
  pthread_mutex_init(&e->plan_mu, NULL);
  atomic_init(&e->refs, 1);
  atomic_init(&e->slots_bad, 0);
  atomic_init(&e->seq_bad, 0);
  e->flags = flags;
  e->g = mx_graph_exec_clone_graph(src);
  if (!e->g) {
    mx_graph_exec_unref(e);
    return mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  /* the train-mode flag of the ops that take one (dropout, batch_norm, rrelu: the
   * op table's train_flag param "training"), as MXNet's forward(is_train=) */
  for (int i = 0; i < e->g->n; i++) {
    const mx_op_def *def = mx_graph_def(e->g, i);
    int p = train_flag(def);
    if (p >= 0)
      *(bool *)((char *)e->g->nodes[i].params + def->params[p].offset) =
          (flags & MX_GRAPH_TRAINING) != 0;
  }
  e->dev_type = MX_CPU;
  e->dev_id = 0;
  if (nin > 0) {
    e->dev_type = in[0].dev_type ? in[0].dev_type : MX_CPU;
    e->dev_id = in[0].dev_id;
  }
  int rc = bind_inputs(e, nin, in);
  if (!rc && (flags & MX_GRAPH_OPTIMIZE)) rc = optimize(e, nin, in);
  if (rc) {
    mx_graph_exec_unref(e);
    return rc;
  }
  mx_graph *g = e->g;
  int ne = g->nentries, n = g->n;
  e->slot = malloc((size_t)(ne ? ne : 1) * sizeof(int));
  e->slot_bytes = malloc((size_t)(ne ? ne : 1) * sizeof(int64_t));
  e->last = malloc((size_t)(ne ? ne : 1) * sizeof(int));
  e->head_of = malloc((size_t)(ne ? ne : 1) * sizeof(int));
  uint8_t *skip = calloc((size_t)(ne ? ne : 1), 1);
  if (!e->slot || !e->slot_bytes || !e->last || !e->head_of || !skip) {
    free(skip);
    mx_graph_exec_unref(e);
    return mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  for (int x = 0; !rc && x < n; x++) {
    const mx_graph_node *nd = &g->nodes[x];
    for (int k = 0; !rc && k < nd->nout; k++) {
      const mx_desc *d = &e->ent[nd->row + k];
      bool known = d->ndim >= 0 && d->dtype >= 0;
      for (int j = 0; known && j < d->ndim; j++) known = d->shape[j] >= 0;
      if (!known)
        rc = mx_err(MX_EINVAL, "graph executor: the shape of '%s' (output %d) is unknown for "
                    "these inputs", nd->name, k + 1);
    }
    const mx_op_def *def = mx_graph_def(g, x);
    for (int k = def ? nd->nin - def->naux : nd->nin; !rc && k < nd->nin; k++) {
      const mx_graph_node *src_nd = &g->nodes[nd->in_node[k]];
      /* (a constant is fine where the op only reads it: a train-mode op in inference) */
      if (src_nd->op == MX_GRAPH_VAR && src_nd->value && !(flags & MX_GRAPH_TRAINING) &&
          train_flag(def) >= 0)
        continue;
      if (src_nd->op != MX_GRAPH_VAR || src_nd->value) {
        rc = mx_err(MX_EINVAL, "graph executor: node '%s' (%s) updates input %d in place, "
                    "which must be a variable", nd->name, def->name, k + 1);
        break;
      }
      for (int j = 0; j < e->nin; j++)
        if (e->in_node[j] == nd->in_node[k]) e->in_aux[j] = true;
    }
    if (dynamic_entry(g, x))
      for (int k = 0; k < nd->nout; k++) skip[nd->row + k] = 1;
  }
  if (!rc)
    rc = mx_graph_plan_memory(g, e->ent, skip, e->slot, e->slot_bytes, &e->nslots, &e->planned);
  free(skip);
  for (int x = 0; x < ne; x++) e->last[x] = e->head_of[x] = -1;
  for (int h = e->g->nheads - 1; h >= 0; h--)
    e->head_of[e->g->nodes[e->g->head_node[h]].row + e->g->head_out[h]] = h;
  for (int i = 0; !rc && i < n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    for (int k = 0; k < nd->nin; k++) {
      int x = g->nodes[nd->in_node[k]].row + nd->in_out[k];
      if (e->last[x] < i) e->last[x] = i;
    }
  }
  if (!rc && e->dev_type == MX_CPU) compile_plan(e, in);
  if (rc) {
    mx_graph_exec_unref(e);
    return rc;
  }
  *out = e;
  return MX_OK;
}

int mx_graph_exec_num_inputs(const mx_graph_exec *e) { return e ? e->nin : 0; }
int mx_graph_exec_input_node(const mx_graph_exec *e, int k) {
  return e && k >= 0 && k < e->nin ? e->in_node[k] : -1;
}
int mx_graph_exec_num_outputs(const mx_graph_exec *e) { return e ? e->g->nheads : 0; }
int mx_graph_exec_entry_desc(const mx_graph_exec *e, int entry, mx_desc *out) {
  if (!e || !out || entry < 0 || entry >= e->g->nentries)
    return mx_err(MX_EINVAL, "mx_graph_exec_entry_desc: bad entry %d", entry);
  *out = e->ent[entry];
  return MX_OK;
}
int mx_graph_exec_output_desc(const mx_graph_exec *e, int k, mx_desc *out) {
  if (!e || k < 0 || k >= e->g->nheads) return mx_err(MX_EINVAL, "graph executor: bad output %d", k);
  return mx_graph_exec_entry_desc(e, e->g->nodes[e->g->head_node[k]].row + e->g->head_out[k], out);
}
int64_t mx_graph_exec_planned_bytes(const mx_graph_exec *e) { return e ? e->planned : 0; }
int mx_graph_exec_num_buffers(const mx_graph_exec *e) {
  return !e ? 0 : e->compiled ? e->plan.nslots : e->nslots;
}

/* ---- a run ---------------------------------------------------------------------- */

typedef struct run_arg {
  mx_graph_exec *e;
  mx_tensor **in;       /* e->nin */
  mx_tensor **out;      /* nheads */
  mx_tensor **dst;      /* nheads: the caller's out= when it overlaps an input or another
                         * out= (out[h] is then a temporary copied into dst[h] at the end) */
  mx_tensor **slots;    /* e->nslots */
  mx_tensor **t;        /* entry -> tensor while the run runs (num_entries) */
  bool ran;             /* run_nodes ran (else an input carried an earlier error) */
  bool plan;            /* run the compiled plan (decided when pushed) */
} run_arg;

static void run_free(void *p) {
  run_arg *a = p;
  mx_graph_exec *e = a->e;
  if (!a->ran) { /* skipped: what it writes inherits the error */
    if (e->slots) atomic_store(&e->slots_bad, 1);
    atomic_store(&e->seq_bad, 1);
  }
  for (int k = 0; k < e->nin; k++) mx_tensor_release(a->in[k]);
  for (int k = 0; k < e->g->nheads; k++) {
    mx_tensor_release(a->out[k]);
    if (a->dst[k]) mx_tensor_release(a->dst[k]);
  }
  for (int s = 0; s < e->nslots; s++) mx_tensor_release(a->slots[s]);
  mx_graph_exec_unref(e);
  free(a); /* the lists live in the same block */
}

/* A fused node: its inputs in row-major (a blocked oneDNN input is converted), its
 * output the head's tensor, a planned view or a new tensor; t[entry] takes it. */
static int run_fused(run_arg *a, mx_graph_node *nd, mx_tensor **ins) {
  mx_graph_exec *e = a->e;
  int x = nd->row, rc = MX_OK;
  mx_tensor *plain[64] = {0};
  for (int k = 0; k < nd->nin && !rc; k++)
    if (ins[k]->layout) {
      rc = mx_tensor_plain(ins[k], &plain[k]);
      if (!rc) ins[k] = plain[k];
    }
  mx_tensor *o = NULL;
  const mx_desc *d = &e->ent[x];
  if (!rc) {
    if (e->head_of[x] >= 0) {
      o = a->out[e->head_of[x]];
      mx_tensor_retain(o);
    } else if (e->slot[x] >= 0) {
      rc = mx_tensor_view_bytes(a->slots[e->slot[x]], d->ndim, d->shape, d->dtype, &o);
    } else {
      rc = mx_tensor_new(d->ndim, d->shape, d->dtype, e->dev_type, e->dev_id, &o);
    }
  }
  mx_fused_fn run = mx_graph_fused(e->dev_type == MX_GPU ? MX_GPU : MX_CPU);
  if (!rc && !run)
    rc = mx_err(MX_EDEVICE, "no interpreter of fused nodes for %s tensors in this build",
                e->dev_type == MX_GPU ? "gpu" : "cpu");
  if (!rc) rc = run(nd->ext, nd->nin, ins, o);
  for (int k = 0; k < nd->nin; k++)
    if (plain[k]) mx_tensor_release(plain[k]);
  if (rc) {
    if (o) mx_tensor_release(o);
  } else {
    a->t[x] = o;
  }
  return rc;
}

/* The compiled plan over this run's tensors: inputs (a row-major copy of a blocked
 * one), outputs and the arena bound into the plan for the run. */
static int run_plan(run_arg *a) {
  mx_graph_exec *e = a->e;
  mx_plan *p = &e->plan;
  int rc = MX_OK, nin = e->nin;
  mx_tensor *small[16], **plain = nin <= 16 ? small : calloc((size_t)nin, sizeof *plain);
  if (!plain) return mx_err(MX_ENOMEM, "graph executor: out of memory");
  if (plain == small) memset(small, 0, sizeof small);
  pthread_mutex_lock(&e->plan_mu);
  for (int k = 0; k < nin && !rc; k++) {
    mx_tensor *t = a->in[k];
    if (t->layout) {
      if (e->in_aux[k])
        rc = mx_err(MX_EINVAL, "graph executor: input '%s' is updated in place and is in a "
                    "backend layout", e->g->nodes[e->in_node[k]].name);
      else if (!(rc = mx_tensor_plain(t, &plain[k])))
        t = plain[k];
    }
    p->in[k]->storage->data = mx_ptr(t);
  }
  for (int h = 0; h < e->g->nheads; h++) p->out[h]->storage->data = mx_ptr(a->out[h]);
  p->arena->data = mx_ptr(a->slots[0]);
  if (!rc) rc = mx_plan_run(p, 0, p->nsteps, "graph node '%s'");
  p->arena->data = NULL;
  pthread_mutex_unlock(&e->plan_mu);
  for (int k = 0; k < nin; k++)
    if (plain[k]) mx_tensor_release(plain[k]);
  if (plain != small) free(plain);
  /* out= slots that alias an input or each other: written now that nothing reads */
  for (int h = 0; h < e->g->nheads && !rc; h++)
    if (a->dst[h]) rc = mx_tensor_copy_into(a->dst[h], a->out[h]);
  if (rc && e->slots) atomic_store(&e->slots_bad, 1);
  if (rc) atomic_store(&e->seq_bad, 1);
  return rc;
}

static int run_nodes(void *p) {
  run_arg *a = p;
  mx_graph_exec *e = a->e;
  mx_graph *g = e->g;
  int ne = g->nentries, rc = MX_OK;
  mx_tensor **t = a->t;
  const int *head_of = e->head_of;
  a->ran = true;
  if (a->plan) return run_plan(a);
  memset(t, 0, (size_t)ne * sizeof *t);
  int k_in = 0;
  for (int i = 0; i < g->n && !rc; i++) {
    mx_graph_node *nd = &g->nodes[i];
    if (nd->op == MX_GRAPH_VAR) {
      mx_tensor *v = nd->value ? nd->value : a->in[k_in++];
      mx_tensor_retain(v);
      t[nd->row] = v;
      continue;
    }
    mx_tensor *ins[64], *outs[64];
    for (int k = 0; k < nd->nin; k++) ins[k] = t[g->nodes[nd->in_node[k]].row + nd->in_out[k]];
    if (nd->op == MX_GRAPH_FUSED) {
      rc = run_fused(a, nd, ins);
      if (rc) {
        char who[200];
        snprintf(who, sizeof who, "graph node '%s' (fused)", nd->name);
        mx_err_prefix(rc, who);
      }
    }
    for (int k = 0; nd->op >= 0 && k < nd->nout && !rc; k++) {
      int x = nd->row + k;
      outs[k] = NULL;
      if (head_of[x] >= 0) {
        outs[k] = a->out[head_of[x]];
      } else if (e->slot[x] >= 0) {
        const mx_desc *d = &e->ent[x];
        rc = mx_tensor_view_bytes(a->slots[e->slot[x]], d->ndim, d->shape, d->dtype, &outs[k]);
        t[x] = outs[k]; /* the view is the entry's reference */
      }
    }
    if (!rc && nd->op >= 0) {
      /* out= slots already holding a tensor are written into; NULL ones get new ones */
      mx_tensor *res[64];
      for (int k = 0; k < nd->nout; k++) res[k] = outs[k];
      rc = mx_op_invoke(nd->op, nd->nin, ins, nd->params, nd->nout, res);
      if (rc == MX_OK) {
        for (int k = 0; k < nd->nout; k++) {
          int x = nd->row + k;
          if (!outs[k]) t[x] = res[k]; /* a new tensor: the entry's reference */
          else if (head_of[x] >= 0) {
            mx_tensor_retain(res[k]);
            t[x] = res[k];
          }
        }
      } else {
        char who[200];
        snprintf(who, sizeof who, "graph node '%s'", nd->name);
        mx_err_prefix(rc, who);
      }
    }
    /* entries read for the last time here: their buffers go back (planned views just
     * drop the view; dynamic ones return to the pool) */
    for (int k = 0; k < nd->nin && !rc; k++) {
      int x = g->nodes[nd->in_node[k]].row + nd->in_out[k];
      if (e->last[x] == i && head_of[x] < 0 && t[x] && g->nodes[nd->in_node[k]].op != MX_GRAPH_VAR) {
        mx_tensor_release(t[x]);
        t[x] = NULL;
      }
    }
  }
  /* heads that are not written by their producer: variables, and an entry given as
   * two heads (its first head holds it) */
  for (int h = 0; h < g->nheads && !rc; h++) {
    int x = g->nodes[g->head_node[h]].row + g->head_out[h];
    if (t[x] != a->out[h] && t[x]) rc = mx_tensor_copy_into(a->out[h], t[x]);
  }
  /* out= slots that alias an input or each other: written now that nothing reads */
  for (int h = 0; h < g->nheads && !rc; h++)
    if (a->dst[h]) rc = mx_tensor_copy_into(a->dst[h], a->out[h]);
  for (int x = 0; x < ne; x++)
    if (t[x]) mx_tensor_release(t[x]);
  if (rc && e->slots) atomic_store(&e->slots_bad, 1);
  if (rc) atomic_store(&e->seq_bad, 1);
  return rc;
}

/* a and b share bytes of one storage (out= aliasing an input or another out=) */
static bool same_desc(const mx_desc *d, const mx_tensor *t) {
  if (d->ndim != t->ndim || d->dtype != t->dtype) return false;
  for (int j = 0; j < d->ndim; j++)
    if (d->shape[j] != t->shape[j]) return false;
  return true;
}

int mx_graph_exec_run_now(mx_graph_exec *e, int nin, mx_tensor *const *in, int nout,
                          mx_tensor **out) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (!e || (nin && !in) || !out) return mx_err(MX_EINVAL, "mx_graph_exec_run: NULL argument");
  mx_graph *g = e->g;
  if (nin != e->nin) return mx_err(MX_EINVAL, "graph executor: %d inputs given, expects %d", nin, e->nin);
  if (nout != g->nheads)
    return mx_err(MX_EINVAL, "graph executor: %d output slots given, the graph has %d", nout,
                  g->nheads);
  for (int k = 0; k < nin; k++) {
    const mx_desc *d = &e->ent[g->nodes[e->in_node[k]].row];
    if (!in[k]) return mx_err(MX_EINVAL, "graph executor: input %d is NULL", k + 1);
    if (!same_desc(d, in[k]) || mx_dev(in[k]) != e->dev_type || in[k]->storage->dev_id != e->dev_id)
      return mx_err(MX_EINVAL, "graph executor: input '%s' is %s %s, compiled for %s %s",
                    g->nodes[e->in_node[k]].name, mx_shape_str(a, in[k]->ndim, in[k]->shape),
                    mx_dtype_name(in[k]->dtype), mx_shape_str(b, d->ndim, d->shape),
                    mx_dtype_name(d->dtype));
  }
  size_t nptr = (size_t)nin + (size_t)nout + (size_t)e->nslots;
  size_t ne = (size_t)g->nentries;
  /* one block: the run's record, its tensor lists and the entry table */
  run_arg *ra = calloc(1, sizeof *ra + (nptr + ne + (size_t)nout + 1) * sizeof(mx_tensor *));
  if (!ra) return mx_err(MX_ENOMEM, "graph executor: out of memory");
  mx_tensor **buf = (mx_tensor **)(ra + 1);
  ra->e = e;
  ra->in = buf;
  ra->out = buf + nin;
  ra->slots = buf + nin + nout;
  ra->t = buf + nptr;
  ra->dst = buf + nptr + ne;
  /* the profiler and the NaN check see every op: those runs take the node path */
  ra->plan = e->compiled && !mx_profiler_on() && !mx_engine_get_nan_check();
  int rc = MX_OK;
  mx_session *se = mx_session_cur();
  for (int k = 0; k < nin; k++) {
    mx_tensor_retain(in[k]);
    ra->in[k] = in[k];
  }
  for (int h = 0; h < nout && !rc; h++) {
    const mx_desc *d = &e->ent[g->nodes[g->head_node[h]].row + g->head_out[h]];
    if (out[h]) {
      if (!same_desc(d, out[h]))
        rc = mx_err(MX_EINVAL, "graph executor: out= %d is %s, the output is %s", h + 1,
                    mx_shape_str(a, out[h]->ndim, out[h]->shape), mx_shape_str(b, d->ndim, d->shape));
      else {
        /* an out= sharing memory with an input, a constant or an earlier out= would be
         * written while the graph still reads it: the run computes into a temporary */
        bool alias = false;
        for (int k = 0; k < nin && !alias; k++) alias = mx_tensor_overlaps(out[h], in[k]);
        for (int i = 0; i < g->n && !alias; i++)
          alias = g->nodes[i].value && mx_tensor_overlaps(out[h], g->nodes[i].value);
        for (int j = 0; j < h && !alias; j++) alias = out[j] && mx_tensor_overlaps(out[h], out[j]);
        mx_tensor_retain(out[h]);
        if (!alias) {
          ra->out[h] = out[h];
        } else {
          ra->dst[h] = out[h];
          rc = mx_tensor_new_in(se, d->ndim, d->shape, d->dtype, e->dev_type, e->dev_id,
                                &ra->out[h]);
        }
      }
    } else {
      rc = mx_tensor_new_in(se, d->ndim, d->shape, d->dtype, e->dev_type, e->dev_id, &ra->out[h]);
    }
  }
  if (!rc && e->slots && atomic_exchange(&e->slots_bad, 0)) {
    for (int s = 0; s < e->nslots; s++) {
      if (e->slots[s]) mx_tensor_release(e->slots[s]); /* queued runs hold their own */
      e->slots[s] = NULL;
    }
  }
  if (!rc && e->seq && atomic_exchange(&e->seq_bad, 0)) {
    mx_tensor *ns;
    int64_t one = 1;
    if (!(rc = mx_tensor_new(1, &one, MX_U8, e->dev_type, e->dev_id, &ns))) {
      if (e->seq_prev) mx_tensor_release(e->seq_prev); /* its runs are ordered before seq's */
      e->seq_prev = e->seq;
      e->seq = ns;
    } else {
      atomic_store(&e->seq_bad, 1);
    }
  }
  if (!rc && (e->flags & MX_GRAPH_STATIC_ALLOC) && !e->slots) {
    e->slots = calloc((size_t)(e->nslots ? e->nslots : 1), sizeof *e->slots);
    if (!e->slots) rc = mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  for (int s = 0; s < e->nslots && !rc; s++) {
    mx_tensor *st = e->slots ? e->slots[s] : NULL;
    if (!st) {
      int64_t n = e->slot_bytes[s];
      rc = mx_tensor_new_in(se, 1, &n, MX_U8, e->dev_type, e->dev_id, &st);
      if (rc) break;
      if (e->slots) {
        e->slots[s] = st;
        mx_tensor_retain(st);
      }
    } else {
      mx_tensor_retain(st);
    }
    ra->slots[s] = st;
  }
  if (rc) {
    for (size_t k = 0; k < nptr; k++)
      if (buf[k]) mx_tensor_release(buf[k]);
    for (int h = 0; h < nout; h++)
      if (ra->dst[h]) mx_tensor_release(ra->dst[h]);
    free(ra);
    return rc;
  }
  /* reads: the inputs not updated in place and the constants; writes: the rest */
  int nconst = 0;
  for (int i = 0; i < g->n; i++) nconst += g->nodes[i].value != NULL;
  int ndst = 0;
  for (int h = 0; h < nout; h++) ndst += ra->dst[h] != NULL;
  size_t ndep = (size_t)nin + (size_t)nconst + (size_t)nout + (size_t)ndst + (size_t)e->nslots + 1;
  mx_tensor *dep_small[64];
  mx_tensor **dep = ndep <= 64 ? dep_small : malloc(ndep * sizeof *dep);
  if (!dep) {
    for (size_t k = 0; k < nptr; k++) mx_tensor_release(buf[k]);
    for (int h = 0; h < nout; h++)
      if (ra->dst[h]) mx_tensor_release(ra->dst[h]);
    free(ra);
    return mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  int nr = 0;
  for (int k = 0; k < nin; k++)
    if (!e->in_aux[k]) dep[nr++] = in[k];
  for (int i = 0; i < g->n; i++)
    if (g->nodes[i].value) dep[nr++] = g->nodes[i].value;
  int nw = 0;
  for (int k = 0; k < nin; k++)
    if (e->in_aux[k]) dep[nr + nw++] = in[k];
  for (int h = 0; h < nout; h++) {
    dep[nr + nw++] = ra->out[h];
    if (ra->dst[h]) dep[nr + nw++] = ra->dst[h];
  }
  for (int s = 0; s < e->nslots; s++) dep[nr + nw++] = ra->slots[s];
  if (e->seq) dep[nr + nw++] = e->seq;
  /* the caller's references to new outputs, taken before the push (an inline run
   * frees ra before push_fn returns) */
  bool made_small[64], *made = nout <= 64 ? made_small : malloc((size_t)nout * sizeof(bool));
  if (!made) {
    if (dep != dep_small) free(dep);
    for (size_t k = 0; k < nptr; k++) mx_tensor_release(buf[k]);
    for (int h = 0; h < nout; h++)
      if (ra->dst[h]) mx_tensor_release(ra->dst[h]);
    free(ra);
    return mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  for (int h = 0; h < nout; h++) {
    made[h] = !out[h];
    if (!out[h]) {
      out[h] = ra->out[h];
      mx_tensor_retain(out[h]);
    }
  }
  for (int k = 0; k < nin; k++)
    if (e->in_aux[k]) mx_storage_touch(in[k]->storage);
  for (int h = 0; h < nout; h++)
    if (!made[h]) mx_storage_touch(out[h]->storage);
  atomic_fetch_add(&e->refs, 1);
  rc = mx_engine_push_fn("graph", run_nodes, ra, run_free, nr, dep, nw, dep + nr, e->dev_type,
                         e->dev_id, NULL);
  if (dep != dep_small) free(dep);
  if (rc) {
    /* not queued (run_free has run), or run inline and failed: no new output is given */
    for (int h = 0; h < nout; h++)
      if (made[h]) {
        mx_tensor_release(out[h]);
        out[h] = NULL;
      }
  }
  if (made != made_small) free(made);
  return rc;
}
