/* graph_compile.c — a graph compiled into steps and one arena (graph_compile.h).
 *
 * Building walks the nodes in order: each op's inputs get the conversions its chosen
 * backend needs (a dtype cast where the op promotes, a row-major copy of a blocked tensor
 * the kernel does not take, made once per entry), its constant inputs the layout the
 * kernel's prepack function asks for (made once, at build), and each output a planned
 * buffer: in the layout the kernel's out-layout function picks, or row-major; an
 * in-place pair of the op table shares its input's buffer when that input dies there.
 * Then one liveness pass over the steps places every buffer in one block. */
#include "graph_compile.h"
#include "mx_ops_gen.h"
#include "registry.h"
#include "session.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A planned buffer: an intermediate tensor and its lifetime in steps. */
typedef struct pbuf {
  mx_tensor *t;
  int64_t bytes;
  int def, last;          /* the step writing it, the last step reading it (-1: none) */
  int inplace;            /* pbuf of the input it may take over (op table `inplace`) */
  int parent;             /* the concat output it is written in (-1: its own slot) */
  int64_t at;             /* its byte offset there */
  bool rewritten;         /* written by a step besides its own (an auxiliary input) */
} pbuf;

typedef struct builder {
  mx_plan *p;
  const char *who;        /* the messages' prefix ("mx_rt", "graph executor") */
  mx_session *se;         /* charged with the plan's memory */
  bool *econst;           /* entry -> a constant (a variable with a value) */
  bool arena_now;         /* MX_PLAN_ARENA */
  bool bound;             /* MX_PLAN_BOUND */
  mx_tensor **et;         /* entry -> the tensor holding it */
  mx_tensor **eplain;     /* entry -> its row-major conversion (made once) */
  int cap_steps;
  int cap_pool, cap_owned;
  pbuf *buf;
  int nbuf, cap_buf;
  bool prefer_blocked;    /* every step's info.prefer_blocked (concats_channels) */
} builder;

static int grow(void **a, int *cap, int need, size_t sz) {
  if (need <= *cap) return MX_OK;
  int n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void *q = realloc(*a, (size_t)n * sz);
  if (!q) return mx_err(MX_ENOMEM, "out of memory compiling a graph");
  *a = q;
  *cap = n;
  return MX_OK;
}

static int own(builder *b, mx_tensor *t) {
  mx_plan *p = b->p;
  int rc = grow((void **)&p->owned, &b->cap_owned, p->ntensors + 1, sizeof *p->owned);
  if (rc) {
    mx_tensor_release(t);
    return rc;
  }
  p->owned[p->ntensors++] = t;
  return MX_OK;
}

static int buf_of(const builder *b, const mx_tensor *t) {
  for (int i = b->nbuf - 1; i >= 0; i--)
    if (b->buf[i].t == t) return i;
  return -1;
}

/* A new step of kind with nin inputs and nout outputs; its lists are filled through
 * pool[ioff ...] (inputs, then outputs) until the plan is complete. */
static mx_plan_step *step_new(builder *b, int kind, int node, int nin, int nout, int *id) {
  mx_plan *p = b->p;
  int s = p->nsteps;
  if (grow((void **)&p->steps, &b->cap_steps, s + 1, sizeof *p->steps)) return NULL;
  int used = s ? p->steps[s - 1].ioff + p->steps[s - 1].nin + p->steps[s - 1].nout : 0;
  if (grow((void **)&p->pool, &b->cap_pool, used + nin + nout, sizeof *p->pool)) return NULL;
  mx_plan_step *st = &p->steps[s];
  memset(st, 0, sizeof *st);
  st->kind = kind;
  st->node = node;
  st->nin = nin;
  st->nout = nout;
  st->ioff = used;
  p->nsteps++;
  *id = s;
  return st;
}

#define IN_SLOT(b, s, k) ((b)->p->pool[(b)->p->steps[s].ioff + (k)])
#define OUT_SLOT(b, s, k) ((b)->p->pool[(b)->p->steps[s].ioff + (b)->p->steps[s].nin + (k)])

/* Notes that step s reads t (a planned buffer's lifetime grows to s). */
static void use(builder *b, int s, int k, mx_tensor *t) {
  IN_SLOT(b, s, k) = t;
  int i = buf_of(b, t);
  if (i >= 0 && b->buf[i].last < s) b->buf[i].last = s;
}

/* A planned intermediate written by step s: a row-major header whose storage moves to
 * the arena once planned (laid = a tensor the kernel's out-layout function made, in its
 * layout; its bytes are that layout's). */
static int planned(builder *b, int s, const mx_desc *d, mx_tensor *laid, int inplace,
                   mx_tensor **out) {
  static char dummy[64]; /* never read or written: the storage moves before any run */
  mx_tensor *t = laid;
  int rc = MX_OK;
  if (!t) rc = mx_tensor_from_data(dummy, d->ndim, d->shape, d->dtype, NULL, NULL, &t);
  if (rc || (rc = own(b, t))) return rc;
  if ((rc = grow((void **)&b->buf, &b->cap_buf, b->nbuf + 1, sizeof *b->buf))) return rc;
  pbuf *pb = &b->buf[b->nbuf++];
  pb->t = t;
  pb->bytes = (int64_t)(laid ? laid->storage->nbytes : mx_nbytes(t));
  pb->bytes = (pb->bytes + 63) & ~(int64_t)63;
  pb->def = s;
  pb->last = -1;
  pb->inplace = inplace;
  pb->parent = -1;
  pb->at = 0;
  pb->rewritten = false;
  *out = t;
  return MX_OK;
}

/* t as row-major for step consumers that do not take its layout: a conversion step
 * (once per entry x; x < 0: not an entry, converted for this use only). */
static int as_plain(builder *b, int node, int x, mx_tensor *t, mx_tensor **out) {
  if (!t->layout) { *out = t; return MX_OK; }
  if (x >= 0 && b->eplain[x]) { *out = b->eplain[x]; return MX_OK; }
  mx_desc d;
  mx_desc_from(&d, t);
  int s, rc;
  mx_plan_step *st = step_new(b, MX_STEP_PLAIN, node, 1, 1, &s);
  if (!st) return MX_ENOMEM;
  use(b, s, 0, t);
  mx_tensor *o;
  if ((rc = planned(b, s, &d, NULL, -1, &o))) return rc;
  OUT_SLOT(b, s, 0) = o;
  if (x >= 0) b->eplain[x] = o;
  *out = o;
  return MX_OK;
}

static int as_dtype(builder *b, int node, mx_tensor *t, int dtype, mx_tensor **out) {
  mx_desc d;
  mx_desc_from(&d, t);
  d.dtype = dtype;
  d.layout = MX_LAYOUT_ROW_MAJOR;
  int s, rc;
  mx_plan_step *st = step_new(b, MX_STEP_CAST, node, 1, 1, &s);
  if (!st) return MX_ENOMEM;
  use(b, s, 0, t);
  mx_tensor *o;
  if ((rc = planned(b, s, &d, NULL, -1, &o))) return rc;
  OUT_SLOT(b, s, 0) = o;
  *out = o;
  return MX_OK;
}

static int first_head(const mx_graph *g, int x) {
  for (int h = 0; h < g->nheads; h++)
    if (g->nodes[g->head_node[h]].row + g->head_out[h] == x) return h;
  return -1;
}

/* The params a run gives node i's kernel: the model's, or (creation ops whose JSON shape
 * left dims to inference) a copy of the plan's with the inferred dims written in. */
static int node_params(builder *b, int i, const void **out) {
  const mx_graph *g = b->p->g;
  const mx_graph_node *nd = &g->nodes[i];
  *out = nd->params;
  mx_tuple *t = mx_graph_shape_param(g, i);
  bool unknown = false;
  for (int k = 0; t && k < t->n; k++) unknown |= t->v[k] == MX_DIM_UNKNOWN;
  if (!unknown) return MX_OK;
  const mx_op_def *def = mx_graph_def(g, i);
  size_t need = (def->params_size + sizeof(mx_tensor *) - 1) / sizeof(mx_tensor *);
  /* kept in a tensor so the plan's owned list frees it */
  int64_t n = (int64_t)(need * sizeof(mx_tensor *));
  mx_tensor *h;
  int rc = mx_tensor_new_in(b->se, 1, &n, MX_U8, MX_CPU, 0, &h);
  if (rc || (rc = own(b, h))) return rc;
  char *copy = mx_ptr(h);
  memcpy(copy, nd->params, def->params_size);
  mx_tuple *ct = (mx_tuple *)(copy + ((char *)t - (char *)nd->params));
  const mx_desc *d = &b->p->ent[nd->row];
  for (int k = 0; k < ct->n && k < d->ndim; k++)
    if (ct->v[k] == MX_DIM_UNKNOWN) ct->v[k] = d->shape[k];
  *out = copy;
  return MX_OK;
}

/* Node i (an op or a fused node): its steps. */
static int plan_node(builder *b, int i) {
  char sa[MX_SHAPE_BUF];
  mx_plan *p = b->p;
  const mx_graph *g = p->g;
  const mx_graph_node *nd = &g->nodes[i];
  const mx_op_def *def = mx_graph_def(g, i);
  mx_tensor *use_t[64];
  mx_desc ind[64], od[64];
  int rc = MX_OK;
  if (nd->nin > 64 || nd->nout > 64)
    return mx_err(MX_EINVAL, "%s: node '%s' has more than 64 inputs or outputs", b->who, nd->name);
  for (int k = 0; k < nd->nin; k++) use_t[k] = b->et[g->nodes[nd->in_node[k]].row + nd->in_out[k]];
  if (nd->op == MX_GRAPH_FUSED) {
    for (int k = 0; k < nd->nin && !rc; k++) {
      int x = g->nodes[nd->in_node[k]].row + nd->in_out[k];
      rc = as_plain(b, i, x, use_t[k], &use_t[k]);
    }
    int s;
    mx_plan_step *st = rc ? NULL : step_new(b, MX_STEP_FUSED, i, nd->nin, 1, &s);
    if (!st) return rc ? rc : MX_ENOMEM;
    st->prog = nd->ext;
    if (!(st->fused = mx_graph_fused(MX_CPU)))
      return mx_err(MX_EDEVICE, "%s: node '%s': no interpreter of fused nodes in this build",
                    b->who, nd->name);
    for (int k = 0; k < nd->nin; k++) use(b, s, k, use_t[k]);
    int x = nd->row, h = first_head(g, x);
    mx_tensor *o = h >= 0 ? p->out[h] : NULL;
    if (!o && (rc = planned(b, s, &p->ent[x], NULL, -1, &o))) return rc;
    OUT_SLOT(b, s, 0) = o;
    b->et[x] = o;
    return MX_OK;
  }
  /* the inputs' common dtype where the op promotes (as dispatch does per call) */
  int pdt = -1;
  for (int k = 0; k < nd->nin && k < 32; k++)
    if (def->promote >> k & 1u) pdt = pdt < 0 ? use_t[k]->dtype : mx_dtype_promote(pdt, use_t[k]->dtype);
  if (pdt >= 0 && def->promote_float && !mx_dtype_is_float(pdt)) pdt = MX_F32;
  for (int k = 0; k < nd->nin && !rc; k++) {
    if (pdt >= 0 && k < 32 && (def->promote >> k & 1u) && use_t[k]->dtype != pdt) {
      if (k >= nd->nin - def->naux)
        return mx_err(MX_EINVAL, "%s: node '%s' (%s): auxiliary input %d has another dtype "
                      "than the op computes in", b->who, nd->name, def->name, k + 1);
      int x = g->nodes[nd->in_node[k]].row + nd->in_out[k];
      mx_tensor *t;
      if (!(rc = as_plain(b, i, x, use_t[k], &t))) rc = as_dtype(b, i, t, pdt, &use_t[k]);
    }
  }
  if (rc) return rc;
  for (int k = 0; k < nd->nin; k++) mx_desc_from(&ind[k], use_t[k]);
  /* inference on the call's descriptors: what it hands the kernel (ctx.info) */
  mx_kctx kc;
  memset(&kc, 0, sizeof kc);
  mx_desc *inp[64];
  for (int k = 0; k < nd->nin; k++) inp[k] = &ind[k];
  for (int k = 0; k < nd->nout; k++) {
    od[k] = p->ent[nd->row + k];
    od[k].layout = MX_LAYOUT_ROW_MAJOR;
    od[k].dev_type = MX_CPU;
    od[k].dev_id = 0;
  }
  const void *params;
  if ((rc = node_params(b, i, &params))) return rc;
  mx_desc chk[64];
  memcpy(chk, od, (size_t)nd->nout * sizeof *od);
  if ((rc = def->infer(def, params, nd->nin, inp, nd->nout, chk, &kc.info))) {
    char who[300];
    snprintf(who, sizeof who, "%s: node '%s'", b->who, nd->name);
    return mx_err_prefix(rc, who);
  }
  kc.info.prefer_blocked = b->prefer_blocked;
  const mx_kernel_entry *ke = NULL;
  int backend = mx_kernel_choose(def, MX_CPU, false, -1, params, &kc.info, nd->nin, ind, nd->nout,
                                 od, &ke);
  if (backend < 0) {
    char who[300];
    snprintf(who, sizeof who, "%s: node '%s'", b->who, nd->name);
    return mx_err_prefix(backend, who);
  }
  int aux0 = nd->nin - def->naux;
  /* constants the kernel reads in a layout of its own: converted once, here */
  for (int k = 0; ke->prepack && k < aux0 && !rc; k++) {
    int x = g->nodes[nd->in_node[k]].row + nd->in_out[k];
    if (!b->econst[x] || use_t[k] != b->et[x] || use_t[k]->layout) continue;
    mx_tensor *pk = NULL;
    if ((rc = ke->prepack(def, params, &kc.info, nd->nin, use_t, k, &pk))) {
      char who[300];
      snprintf(who, sizeof who, "%s: node '%s'", b->who, nd->name);
      return mx_err_prefix(rc, who);
    }
    if (pk) {
      if ((rc = own(b, pk))) return rc;
      use_t[k] = pk;
      mx_desc_from(&ind[k], pk);
      p->npacked++;
    }
  }
  mx_out_layout_fn relay = NULL;
  for (int k = 0; k < nd->nin && !rc; k++) {
    mx_tensor *t = use_t[k];
    if (!t->layout) continue;
    if (ke->layouts >> t->layout->code & 1u) {
      relay = ke->out_layout;
      continue;
    }
    if (def->shape_only >> k & 1u) continue;
    if (k >= aux0)
      return mx_err(MX_EINVAL, "%s: node '%s' (%s): auxiliary input %d is in a layout the "
                    "kernel does not take", b->who, nd->name, def->name, k + 1);
    int x = g->nodes[nd->in_node[k]].row + nd->in_out[k];
    rc = as_plain(b, i, x, t, &use_t[k]);
  }
  if (rc) return rc;
  if (ke->layouts & MX_LAYOUTS_CHOOSE_OUT) relay = ke->out_layout;
  int s;
  mx_plan_step *st = step_new(b, MX_STEP_KERNEL, i, nd->nin, nd->nout + def->naux, &s);
  if (!st) return MX_ENOMEM;
  st->fn = ke->run;
  st->params = params;
  kc.def = def;
  kc.backend = backend;
  kc.dev_type = MX_CPU;
  kc.dev_id = 0;
  kc.session = b->se;
  kc.decline = mx_kernel_decline; /* a kernel that declines: the next backend, as dispatch */
  st->kctx = kc;
  st->rng = (def->flags & MX_OPF_RNG) && kc.info.rng_draws > 0;
  for (int k = 0; k < nd->nin; k++) use(b, s, k, use_t[k]);
  for (int k = 0; k < nd->nout; k++) {
    int x = nd->row + k, h = first_head(g, x);
    mx_tensor *o = h >= 0 ? p->out[h] : NULL; /* an out= slot: written row-major */
    if (!o) {
      mx_tensor *laid = NULL;
      if (relay && (rc = relay(def, params, &kc.info, nd->nin, use_t, k, &od[k], &laid))) {
        char who[300];
        snprintf(who, sizeof who, "%s: node '%s'", b->who, nd->name);
        return mx_err_prefix(rc, who);
      }
      /* the op's in-place pair: the input's buffer when it is arranged as the output
       * (row-major both, or the kernel's layout both: a blocked relu, a residual) */
      int inpl = -1, ij = mx_op_inplace(def, params, nd->nin, k);
      if (ij >= 0) {
        mx_tensor *src = use_t[ij];
        int j = buf_of(b, src);
        bool same = laid ? src->layout == laid->layout && src->layout->same_md &&
                               src->layout->same_md(src->layout_md, laid->layout_md)
                         : !src->layout;
        if (j >= 0 && same && src->dtype == od[k].dtype &&
            src->size == mx_shape_prod(od[k].ndim, od[k].shape))
          inpl = j;
      }
      if ((rc = planned(b, s, &od[k], laid, inpl, &o))) return rc; /* it took laid */
    } else if (o->dtype != od[k].dtype || o->size != mx_shape_prod(od[k].ndim, od[k].shape)) {
      return mx_err(MX_EINVAL, "%s: output %d ('%s') is %s, the node computes %s", b->who,
                    h + 1, nd->name, mx_shape_str(sa, o->ndim, o->shape), mx_dtype_name(od[k].dtype));
    }
    OUT_SLOT(b, s, k) = o;
    b->et[x] = o;
  }
  /* the auxiliary inputs, written through by the kernel (as dispatch hands them) */
  for (int k = 0; k < def->naux; k++) OUT_SLOT(b, s, nd->nout + k) = use_t[aux0 + k];
  return MX_OK;
}

/* Where part lies in whole, a concat's output, as whole's [off, ...) along axis: a byte
 * offset, or -1 when that slice is not one run arranged as part. Row-major: only when
 * every dim before axis is 1 (a batch of 1); a layout answers for its own. */
static int64_t slice_of(const mx_tensor *whole, const mx_tensor *part, int axis, int64_t off) {
  if (part->dtype != whole->dtype || part->ndim != whole->ndim) return -1;
  if (whole->layout || part->layout)
    return whole->layout == part->layout && whole->layout->slice_offset
               ? whole->layout->slice_offset(whole->layout_md, part->layout_md, axis, off)
               : -1;
  int64_t inner = 1;
  for (int d = 0; d < whole->ndim; d++) {
    if (d != axis && part->shape[d] != whole->shape[d]) return -1;
    if (d < axis && whole->shape[d] != 1) return -1;
    if (d > axis) inner *= whole->shape[d];
  }
  return off * inner * (int64_t)mx_dtype_size(whole->dtype);
}

/* Whether the graph concatenates 4-D maps of a batch of 1 along their channels (DenseNet's
 * blocks, SqueezeNet's fire modules, Inception's branches). Its kernels are then asked for
 * oneDNN's nChw16c (info.prefer_blocked), where each part is one run of the output that
 * plan_concats can place it in; the channel-last layout oneDNN picks on AVX-512 leaves the
 * parts strided, and the concat copies them. */
static bool concats_channels(const mx_graph *g, const mx_desc *ent) {
  int concat = mx_op_find("concat"); /* -1 in a build without it (MX_OPS) */
  for (int i = 0; concat >= 0 && i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (nd->op != concat || ent[nd->row].ndim != 4 || ent[nd->row].shape[0] != 1) continue;
    const struct mx_params_concat *P = nd->params;
    if (P->dim == 1 || P->dim == -3) return true;
  }
  return false;
}

/* A concat whose inputs were planned into its output: nothing left to do. */
static int concat_in_place(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                           int nout, mx_tensor *const *out) {
  (void)ctx, (void)params, (void)nin, (void)in, (void)nout, (void)out;
  return MX_OK;
}

/* Concats written in place: when every input of a concat step is a planned buffer that
 * only its own step writes, read there once, not yet placed in another concat, and lies
 * in the output as one aligned run arranged as it is (slice_of), each input becomes a
 * part of the output's buffer and the step does nothing. A DenseNet block's chain of
 * concats becomes one buffer its layers write into. */
static void plan_concats(builder *b) {
  mx_plan *p = b->p;
  int concat = mx_op_find("concat");
  for (int s = 0; s < p->nsteps; s++) { /* buffers some other step writes through */
    const mx_plan_step *st = &p->steps[s];
    for (int k = 0; k < st->nout; k++) {
      int j = buf_of(b, OUT_SLOT(b, s, k));
      if (j >= 0 && b->buf[j].def != s) b->buf[j].rewritten = true;
    }
  }
  for (int s = 0; s < p->nsteps; s++) {
    mx_plan_step *st = &p->steps[s];
    if (st->kind != MX_STEP_KERNEL || p->g->nodes[st->node].op != concat || st->nout != 1 ||
        st->nin > 64)
      continue;
    mx_tensor *y = OUT_SLOT(b, s, 0);
    int yb = buf_of(b, y), part[64];
    int64_t at[64], off = 0;
    bool ok = yb >= 0 && !b->buf[yb].rewritten;
    for (int k = 0; ok && k < st->nin; k++) {
      mx_tensor *x = IN_SLOT(b, s, k);
      int j = part[k] = buf_of(b, x);
      ok = j >= 0 && j != yb && b->buf[j].parent < 0 && !b->buf[j].rewritten;
      for (int q = 0; ok && q < k; q++) ok = part[q] != j;
      if (ok) at[k] = slice_of(y, x, st->kctx.info.axis, off);
      ok = ok && at[k] >= 0 && at[k] % 64 == 0 && at[k] + b->buf[j].bytes <= b->buf[yb].bytes;
      off += x->shape[st->kctx.info.axis];
    }
    if (!ok) continue;
    for (int k = 0; k < st->nin; k++) {
      pbuf *pb = &b->buf[part[k]];
      pb->parent = yb;
      pb->at = at[k];
    }
    st->fn = concat_in_place;
  }
}

/* Liveness over the steps: each buffer takes its in-place input's slot, the smallest
 * free slot that fits, the largest free one grown, or a new one (graph_plan.c's rule,
 * over steps instead of nodes: conversions and casts have buffers too). A buffer holding
 * a concat's parts lives from its first part's step to the last read of any of them. */
static int plan_memory(builder *b) {
  int nb = b->nbuf, ns = 0;
  size_t n1 = (size_t)(nb ? nb : 1);
  int *slot = malloc(n1 * sizeof(int)), *root = malloc(n1 * sizeof(int));
  int *first = malloc(n1 * sizeof(int)), *end = malloc(n1 * sizeof(int)), *now = malloc(n1 * sizeof(int));
  int64_t *sbytes = malloc(n1 * sizeof(int64_t)), *at = malloc(n1 * sizeof(int64_t));
  bool *sfree = malloc(n1 * sizeof(bool));
  int rc = slot && root && first && end && now && sbytes && at && sfree
               ? MX_OK
               : mx_err(MX_ENOMEM, "%s: out of memory compiling the graph", b->who);
  for (int j = 0; !rc && j < nb; j++) {
    const pbuf *pb = &b->buf[j];
    int r = j;
    at[j] = 0;
    for (; b->buf[r].parent >= 0; r = b->buf[r].parent) at[j] += b->buf[r].at;
    root[j] = r;
    slot[j] = -1;
    first[j] = pb->def;
    end[j] = pb->last < 0 ? pb->def : pb->last; /* never read: free after its step */
  }
  for (int j = 0; !rc && j < nb; j++) {
    int r = root[j];
    if (first[j] < first[r]) first[r] = first[j];
    if (end[j] > end[r]) end[r] = end[j];
  }
  for (int s = 0; !rc && s < b->p->nsteps; s++) {
    int nnow = 0;
    for (int k = 0; k < nb; k++) {
      pbuf *pb = &b->buf[k];
      if (root[k] != k || first[k] != s) continue;
      int c = -1;
      if (pb->inplace >= 0 && pb->def == s) {
        int src = pb->inplace;
        int reads = 0;
        const mx_plan_step *st = &b->p->steps[s];
        for (int j = 0; j < st->nin; j++) reads += IN_SLOT(b, s, j) == b->buf[src].t;
        bool taken = false;
        for (int j = 0; j < nnow; j++) taken |= slot[now[j]] == slot[src];
        /* a concat's part has no slot (-1): nothing takes it over in place */
        if (end[src] == s && reads == 1 && !taken && b->buf[src].bytes == pb->bytes)
          c = slot[src];
      }
      if (c < 0) {
        int best = -1, largest = -1;
        for (int j = 0; j < ns; j++) {
          if (!sfree[j]) continue;
          if (sbytes[j] >= pb->bytes && (best < 0 || sbytes[j] < sbytes[best])) best = j;
          if (largest < 0 || sbytes[j] > sbytes[largest]) largest = j;
        }
        if (best < 0 && largest >= 0) sbytes[best = largest] = pb->bytes;
        if (best < 0) sbytes[best = ns++] = pb->bytes;
        c = best;
      }
      sfree[c] = false;
      slot[k] = c;
      now[nnow++] = k;
    }
    /* buffers read for the last time here, and those written here that nothing reads */
    for (int j = 0; j < nb; j++) {
      if (slot[j] < 0 || end[j] != s) continue;
      bool held = false;
      for (int q = 0; q < nnow; q++) held |= now[q] != j && slot[now[q]] == slot[j];
      if (!held) sfree[slot[j]] = true;
    }
  }
  int64_t *soff = rc ? NULL : malloc((size_t)(ns ? ns : 1) * sizeof(int64_t));
  if (!rc && !soff) rc = mx_err(MX_ENOMEM, "%s: out of memory compiling the graph", b->who);
  int64_t total = 0;
  for (int j = 0; !rc && j < ns; j++) soff[j] = total, total += sbytes[j];
  mx_plan *p = b->p;
  if (!rc) {
    size_t n = (size_t)(total ? total : 64);
    /* without MX_PLAN_ARENA the caller hands a block in per run (data NULL until then) */
    p->arena = b->arena_now ? mx_storage_alloc_in(b->se, n, MX_CPU, 0)
                            : mx_storage_wrap(NULL, n, NULL, NULL);
    if (!p->arena)
      rc = mx_err(MX_ENOMEM, "%s: out of memory for %lld planned bytes", b->who, (long long)total);
  }
  for (int j = 0; !rc && j < nb; j++) {
    mx_tensor *t = b->buf[j].t;
    mx_storage_release(t->storage); /* the placeholder, or the layout's own block */
    mx_storage_retain(p->arena);
    t->storage = p->arena;
    t->offset = (size_t)(soff[slot[root[j]]] + at[j]);
  }
  p->planned = total;
  p->nslots = ns;
  free(soff), free(slot), free(root), free(first), free(end), free(now), free(sbytes), free(at);
  free(sfree);
  return rc;
}

static void release_buf(void *data, void *ctx) {
  (void)ctx;
  free(data);
}

/* A tensor of d with its own zeroed block (an input or output; binding swaps its data),
 * or (MX_PLAN_BOUND) with none: the caller points it at each run's tensor. */
static int io_tensor(builder *b, const mx_desc *d, mx_tensor **out, void **bufp) {
  static char unbound[64]; /* never read or written: bound before every run */
  size_t n = (size_t)mx_shape_prod(d->ndim, d->shape) * mx_dtype_size(d->dtype);
  if (b->bound) {
    *bufp = unbound;
    int rc = mx_tensor_from_data(unbound, d->ndim, d->shape, d->dtype, NULL, NULL, out);
    return rc ? rc : own(b, *out);
  }
  void *buf = NULL;
  if (posix_memalign(&buf, 64, n ? n : 64) != 0)
    return mx_err(MX_ENOMEM, "%s: out of memory for a %zu-byte buffer", b->who, n);
  memset(buf, 0, n ? n : 64);
  int rc = mx_tensor_from_data(buf, d->ndim, d->shape, d->dtype, release_buf, NULL, out);
  if (rc) {
    free(buf);
    return rc;
  }
  *bufp = buf;
  return own(b, *out);
}

int mx_plan_build(const mx_graph *g, int nin, const int *in_node, const mx_desc *in, int flags,
                  mx_session *se, const char *who, mx_plan *p) {
  memset(p, 0, sizeof *p);
  builder b;
  memset(&b, 0, sizeof b);
  b.p = p;
  b.who = who;
  b.se = se;
  b.arena_now = (flags & MX_PLAN_ARENA) != 0;
  b.bound = (flags & MX_PLAN_BOUND) != 0;
  p->g = (mx_graph *)g;
  p->nin = nin;
  int ne = g->nentries, rc = MX_OK;
  p->ent = malloc((size_t)(ne ? ne : 1) * sizeof *p->ent);
  b.et = calloc((size_t)(ne ? ne : 1), sizeof *b.et);
  b.eplain = calloc((size_t)(ne ? ne : 1), sizeof *b.eplain);
  b.econst = calloc((size_t)(ne ? ne : 1), sizeof *b.econst);
  p->in = calloc((size_t)nin + 1, sizeof *p->in);
  p->in_buf = calloc((size_t)nin + 1, sizeof *p->in_buf);
  p->out = calloc((size_t)g->nheads + 1, sizeof *p->out);
  p->out_buf = calloc((size_t)g->nheads + 1, sizeof *p->out_buf);
  p->op_node = malloc((size_t)(g->n ? g->n : 1) * sizeof(int));
  p->node_step = malloc((size_t)(g->n + 1) * sizeof(int));
  if (!p->ent || !b.et || !b.eplain || !b.econst || !p->in || !p->out || !p->in_buf ||
      !p->out_buf || !p->op_node || !p->node_step)
    rc = mx_err(MX_ENOMEM, "%s: out of memory compiling the graph", who);
  for (int x = 0; !rc && x < ne; x++) {
    p->ent[x].ndim = -1;
    p->ent[x].dtype = -1;
  }
  for (int k = 0; !rc && k < nin; k++) p->ent[g->nodes[in_node[k]].row] = in[k];
  if (!rc) rc = mx_graph_infer(g, p->ent);
  for (int i = 0; !rc && i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    for (int k = 0; !rc && k < nd->nout; k++) {
      const mx_desc *d = &p->ent[nd->row + k];
      bool known = d->ndim >= 0 && d->dtype >= 0;
      for (int j = 0; known && j < d->ndim; j++) known = d->shape[j] >= 0;
      if (!known)
        rc = mx_err(MX_EINVAL, "%s: the shape of node '%s' (output %d) does not follow from "
                    "the inputs' shapes", who, nd->name, k + 1);
      else if (nd->op != MX_GRAPH_VAR)
        rc = mx_shape_check(nd->name, d->ndim, d->shape, d->dtype);
    }
  }
  b.prefer_blocked = !rc && concats_channels(g, p->ent);
  for (int k = 0; !rc && k < nin; k++) {
    if ((rc = io_tensor(&b, &in[k], &p->in[k], &p->in_buf[k]))) break;
    b.et[g->nodes[in_node[k]].row] = p->in[k];
  }
  for (int h = 0; !rc && h < g->nheads; h++) {
    mx_desc d = p->ent[g->nodes[g->head_node[h]].row + g->head_out[h]];
    rc = io_tensor(&b, &d, &p->out[h], &p->out_buf[h]);
  }
  for (int i = 0; !rc && i < g->n; i++) {
    const mx_graph_node *nd = &g->nodes[i];
    if (nd->op == MX_GRAPH_VAR) {
      if (nd->value) {
        b.et[nd->row] = nd->value;
        b.econst[nd->row] = true;
      }
      continue;
    }
    p->op_node[p->nops] = i;
    p->node_step[p->nops++] = p->nsteps;
    rc = plan_node(&b, i);
  }
  p->node_step[p->nops] = p->nsteps;
  /* heads not written by their producer: variables, an entry given as two heads, and
   * entries a kernel keeps in its own layout */
  for (int h = 0; !rc && h < g->nheads; h++) {
    int x = g->nodes[g->head_node[h]].row + g->head_out[h];
    mx_tensor *t = b.et[x];
    if (t == p->out[h]) continue;
    int s;
    mx_plan_step *st = step_new(&b, t->layout ? MX_STEP_PLAIN : MX_STEP_COPY, g->head_node[h], 1, 1, &s);
    if (!st) {
      rc = MX_ENOMEM;
      break;
    }
    use(&b, s, 0, t);
    OUT_SLOT(&b, s, 0) = p->out[h];
  }
  p->node_step[p->nops] = p->nsteps; /* the head copies run with the last node */
  if (!rc) plan_concats(&b);
  if (!rc) rc = plan_memory(&b);
  for (int s = 0; !rc && s < p->nsteps; s++) {
    p->steps[s].in = p->pool + p->steps[s].ioff;
    p->steps[s].out = p->pool + p->steps[s].ioff + p->steps[s].nin;
  }
  free(b.et);
  free(b.eplain);
  free(b.econst);
  free(b.buf);
  if (rc) mx_plan_free(p);
  return rc;
}

void mx_plan_free(mx_plan *p) {
  /* bound inputs/outputs hold the caller's pointer: give each tensor its own back */
  for (int k = 0; p->in && p->in_buf && p->in[k]; k++) p->in[k]->storage->data = p->in_buf[k];
  for (int k = 0; p->out && p->out_buf && p->out[k]; k++) p->out[k]->storage->data = p->out_buf[k];
  for (int i = 0; i < p->ntensors; i++) mx_tensor_release(p->owned[i]);
  if (p->arena) mx_storage_release(p->arena);
  free(p->owned);
  free(p->ent);
  free(p->steps);
  free(p->pool);
  free(p->in);
  free(p->in_buf);
  free(p->out);
  free(p->out_buf);
  free(p->op_node);
  free(p->node_step);
  memset(p, 0, sizeof *p);
}

/* ---- a run ------------------------------------------------------------------------ */

int mx_plan_step_run(mx_plan_step *st) {
  switch (st->kind) {
  case MX_STEP_KERNEL:
    if (MX_UNLIKELY(st->rng)) {
      uint64_t n = (uint64_t)st->kctx.info.rng_draws;
      st->kctx.rng_first = mx_random_reserve(n + (n & 1u), &st->kctx.rng_seed);
    }
  {
    int rc = st->fn(&st->kctx, st->params, st->nin, st->in, st->nout, st->out);
    if (MX_UNLIKELY(rc == MX_DECLINE))
      rc = mx_kernel_decline(&st->kctx, st->params, st->nin, st->in, st->nout, st->out);
    return rc;
  }
  case MX_STEP_FUSED:
    return st->fused(st->prog, st->nin, st->in, st->out[0]);
  case MX_STEP_CAST:
    mx_convert(mx_ptr(st->out[0]), st->out[0]->dtype, mx_ptr(st->in[0]), st->in[0]->dtype,
               st->in[0]->size);
    return MX_OK;
  case MX_STEP_PLAIN:
    return st->in[0]->layout->to_row_major(st->in[0], st->out[0]);
  default:
    memcpy(mx_ptr(st->out[0]), mx_ptr(st->in[0]), mx_nbytes(st->in[0]));
    return MX_OK;
  }
}

/* The fused-node interpreters, registered per device by the backends (the CPU's:
 * kernels/cpu/fused.c); graph.h. */
static _Atomic(mx_fused_fn) fused_fn[3]; /* by dev_type (MX_CPU, MX_GPU) */

int mx_graph_register_fused(int dev_type, mx_fused_fn fn) {
  if (dev_type != MX_CPU && dev_type != MX_GPU)
    return mx_err(MX_EINVAL, "graph_register_fused: device type %d", dev_type);
  atomic_store(&fused_fn[dev_type], fn);
  return MX_OK;
}

mx_fused_fn mx_graph_fused(int dev_type) {
  return dev_type == MX_CPU || dev_type == MX_GPU ? atomic_load(&fused_fn[dev_type]) : NULL;
}

int mx_plan_run(mx_plan *p, int first, int end, const char *who) {
  int rc = MX_OK;
  for (int s = first; s < end && !rc; s++) {
    rc = mx_plan_step_run(&p->steps[s]);
    if (MX_UNLIKELY(rc != MX_OK)) {
      const mx_graph_node *nd = &p->g->nodes[p->steps[s].node];
      char w[300];
      snprintf(w, sizeof w, who, nd->name,
               nd->op >= 0 ? mx_ops[nd->op].name : nd->op == MX_GRAPH_FUSED ? "fused" : "copy");
      mx_err_prefix(rc, w);
    }
  }
  return rc;
}
