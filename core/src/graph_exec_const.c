/* graph_exec_const.c — an executor's constants. Constants are folded into others
 * (BatchNorm into the convolution's weights) and laid out for their kernels (prepacked
 * weights) when the executor is built; their storages' versions are recorded then, and
 * a write into one afterwards (a hybridized block's parameters after a training step)
 * makes the next run rebuild from the graph as given, so runs always see the
 * constants' current values. Inference executors of hybridized blocks take their
 * parameters this way: mx_graph_exec_new_frozen turns chosen inputs into constants. */
#include "graph_exec.h"
#include "engine.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

int mx_graph_exec_new(const mx_graph *src, int nin, const mx_desc *in, int flags,
                      mx_graph_exec **out) {
  int rc = mx_graph_exec_make(src, nin, in, flags, out);
  if (rc) return rc;
  mx_graph_exec *e = *out;
  int nc = 0;
  for (int i = 0; i < src->n; i++) nc += src->nodes[i].value != NULL;
  int64_t one = 1;
  if (!(e->in_desc = malloc((size_t)(nin ? nin : 1) * sizeof *e->in_desc)) ||
      (rc = mx_tensor_new(1, &one, MX_U8, e->dev_type, e->dev_id, &e->seq))) {
    mx_graph_exec_free(e);
    *out = NULL;
    return rc ? rc : mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  if (nin) memcpy(e->in_desc, in, (size_t)nin * sizeof *in);
  if (nc == 0) return MX_OK;
  e->orig = mx_graph_exec_clone_graph(src);
  e->cval = malloc((size_t)nc * sizeof *e->cval);
  e->cver = malloc((size_t)nc * sizeof *e->cver);
  if (!e->orig || !e->cval || !e->cver) {
    mx_graph_exec_free(e);
    *out = NULL;
    return mx_err(MX_ENOMEM, "graph executor: out of memory");
  }
  for (int i = 0; i < e->orig->n; i++) {
    mx_tensor *v = e->orig->nodes[i].value;
    if (!v) continue;
    e->cval[e->nconst] = v; /* held by orig */
    e->cver[e->nconst++] = atomic_load_explicit(&v->storage->version, memory_order_relaxed);
  }
  return MX_OK;
}

static bool consts_changed(const mx_graph_exec *e) {
  for (int i = 0; i < e->nconst; i++)
    if (atomic_load_explicit(&e->cval[i]->storage->version, memory_order_relaxed) != e->cver[i])
      return true;
  return false;
}

/* A constant changed: once the queued runs are done (they write seq), the executor's
 * compiled state is swapped for one built again from orig; what tracks the constants
 * stays. Runs on the caller's thread, at its program order. */
static int exec_refresh(mx_graph_exec *e) {
  if (mx_engine_on_worker())
    return mx_err(MX_EINVAL, "graph executor: a constant changed since the build, and "
                  "the rebuild cannot wait for queued runs on an engine worker");
  /* (an error either carries is a failed run's, raised from that run's outputs) */
  if (e->seq_prev && mx_engine_wait_storage(e->seq_prev->storage, false)) mx_set_last_error("");
  if (mx_engine_wait_storage(e->seq->storage, false)) mx_set_last_error("");
  /* a finished run still reads e while it lets go of its tensors (run_free, after the
   * engine counted its writes done): nothing but the handle may hold e while it swaps */
  while (atomic_load(&e->refs) > 1) sched_yield();
  uint32_t small[64], *ver = e->nconst <= 64 ? small : malloc((size_t)e->nconst * sizeof *ver);
  if (!ver) return mx_err(MX_ENOMEM, "graph executor: out of memory");
  for (int i = 0; i < e->nconst; i++) /* (read before the build reads the values) */
    ver[i] = atomic_load_explicit(&e->cval[i]->storage->version, memory_order_relaxed);
  mx_graph_exec *n;
  int rc = mx_graph_exec_make(e->orig, e->nin, e->in_desc, e->flags, &n);
  if (!rc) memcpy(e->cver, ver, (size_t)e->nconst * sizeof *ver);
  if (ver != small) free(ver);
  if (rc) return rc;
  mx_graph_exec t = *e; /* (bytes: the mutexes and the tracking fields are put back) */
  memcpy(e, n, sizeof *e);
  memcpy(n, &t, sizeof *n);
#define KEEP(f) do { __typeof__(e->f) k_ = n->f; n->f = e->f; e->f = k_; } while (0)
  KEEP(plan_mu);
  KEEP(orig);
  KEEP(nconst);
  KEEP(cval);
  KEEP(cver);
  KEEP(in_desc);
  KEEP(seq);
  KEEP(seq_prev);
  KEEP(nfull);
  KEEP(fmap);
  KEEP(fconst);
  KEEP(fnode);
#undef KEEP
  atomic_store(&e->seq_bad, atomic_load(&n->seq_bad));
  mx_graph_exec_unref(n); /* (both held once: the handle's) */
  return MX_OK;
}

int mx_graph_exec_new_frozen(const mx_graph *src, int nin, mx_tensor *const *in,
                             const uint8_t *frozen, int flags, mx_graph_exec **out) {
  if (!src || !out || (nin && (!in || !frozen)))
    return mx_err(MX_EINVAL, "mx_graph_exec_new_frozen: NULL argument");
  *out = NULL;
  mx_graph *c = mx_graph_exec_clone_graph(src);
  int *fnode = malloc((size_t)(nin ? nin : 1) * sizeof *fnode);
  int *fmap = malloc((size_t)(nin ? nin : 1) * sizeof *fmap);
  int *fconst = malloc((size_t)(nin ? nin : 1) * sizeof *fconst);
  mx_desc *d = malloc((size_t)(nin ? nin : 1) * sizeof *d);
  int rc = c && fnode && fmap && fconst && d ? MX_OK
                                             : mx_err(MX_ENOMEM, "graph executor: out of memory");
  int k = 0, m = 0;
  for (int i = 0; !rc && i < c->n; i++) {
    if (c->nodes[i].op != MX_GRAPH_VAR || c->nodes[i].value) continue;
    if (k == nin) {
      rc = mx_err(MX_EINVAL, "graph executor: the graph has more than the %d inputs given "
                  "(next: '%s')", nin, c->nodes[i].name);
    } else if (!in[k]) {
      rc = mx_err(MX_EINVAL, "graph executor: input %d is NULL", k + 1);
    } else if (frozen[k]) {
      fnode[k] = i;
      fmap[k] = -1;
      rc = mx_graph_set_value(c, i, in[k]);
    } else {
      fnode[k] = -1;
      fmap[k] = m;
      mx_desc_from(&d[m++], in[k]);
    }
    k++;
  }
  if (!rc && k != nin)
    rc = mx_err(MX_EINVAL, "graph executor: %d inputs given, the graph has %d", nin, k);
  if (!rc && (flags & MX_GRAPH_OPTIMIZE) && !(flags & MX_GRAPH_TRAINING)) flags |= MX_GRAPH_FOLD_BN;
  if (!rc) rc = mx_graph_exec_new(c, m, d, flags, out);
  mx_graph_free(c);
  free(d);
  if (rc) {
    free(fnode), free(fmap), free(fconst);
    return rc;
  }
  mx_graph_exec *e = *out;
  /* orig is a copy of c: the frozen inputs are its constants, at the same nodes */
  for (int j = 0; j < nin; j++) {
    fconst[j] = -1;
    for (int q = 0; fmap[j] < 0 && q < e->nconst; q++)
      if (e->cval[q] == e->orig->nodes[fnode[j]].value) fconst[j] = q;
  }
  e->nfull = nin;
  e->fmap = fmap;
  e->fconst = fconst;
  e->fnode = fnode;
  return MX_OK;
}

/* The given inputs of a frozen executor to its own (in small[] when they fit); a frozen
 * input given as another tensor than the one frozen (a parameter's array replaced)
 * becomes the constant, and the next check rebuilds. */
static int unfreeze_inputs(mx_graph_exec *e, int nin, mx_tensor *const *in, mx_tensor **small,
                           mx_tensor ***own) {
  if (nin != e->nfull)
    return mx_err(MX_EINVAL, "graph executor: %d inputs given, expects %d", nin, e->nfull);
  mx_tensor **o = e->nin <= 64 ? small : malloc((size_t)e->nin * sizeof *o);
  if (!o) return mx_err(MX_ENOMEM, "graph executor: out of memory");
  for (int k = 0; k < nin; k++) {
    if (!in[k]) {
      if (o != small) free(o);
      return mx_err(MX_EINVAL, "graph executor: input %d is NULL", k + 1);
    }
    if (e->fmap[k] >= 0) {
      o[e->fmap[k]] = in[k];
      continue;
    }
    int q = e->fconst[k];
    if (q >= 0 && e->cval[q] != in[k]) {
      int rc = mx_graph_set_value(e->orig, e->fnode[k], in[k]);
      if (rc) {
        if (o != small) free(o);
        return rc;
      }
      e->cval[q] = in[k];
      e->cver[q] = atomic_load_explicit(&in[k]->storage->version, memory_order_relaxed) - 1u;
    }
  }
  *own = o;
  return MX_OK;
}

int mx_graph_exec_run(mx_graph_exec *e, int nin, mx_tensor *const *in, int nout, mx_tensor **out) {
  if (!e || (nin && !in) || !out) return mx_err(MX_EINVAL, "mx_graph_exec_run: NULL argument");
  mx_tensor *small[64], **own = NULL;
  if (e->nfull) {
    int rc = unfreeze_inputs(e, nin, in, small, &own);
    if (rc) return rc;
    in = own;
    nin = e->nin;
  }
  int rc = MX_OK;
  if (MX_UNLIKELY(e->nconst > 0) && consts_changed(e)) rc = exec_refresh(e);
  if (!rc) rc = mx_graph_exec_run_now(e, nin, in, nout, out);
  if (own && own != small) free(own);
  return rc;
}
