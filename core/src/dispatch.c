/* dispatch.c — mx_op_invoke: the one entry point every op goes through.
 *
 * Order: validate arity, inputs, dtypes and devices; infer output shapes/dtypes on
 * descriptors (pure: core/ops); promote inputs to the op's common dtype; choose the
 * backend (registry.c: the first registered one that supports the call); convert inputs
 * in layouts the backend does not accept; allocate (new outputs in the layout the
 * kernel's out-layout function asks for, or check `out=` slots, computing through a
 * temporary when one aliases an input the op cannot run in place on); reserve random
 * counters; push the kernel with its context to the engine. Everything before the push
 * is synchronous, so shape errors surface at the Lua line that caused them. A kernel
 * that declines at run time (MX_DECLINE) hands the call to the next backend here. */
#include "engine.h"
#include "layout.h"
#include "registry.h"
#include "session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------------- */

/* An inline loop: memcmp's call costs more than comparing the 1-3 dims of a typical
 * out= tensor (this runs on every out= op). */
static inline bool same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (a[i] != b[i]) return false;
  return true;
}


/* Byte ranges of two tensors' elements overlap (same storage). */

static bool same_region(const mx_tensor *a, const mx_tensor *b) {
  return a->storage == b->storage && a->offset == b->offset && a->dtype == b->dtype &&
         a->size == b->size && !a->layout && !b->layout;
}

static const char *dev_name(int dt) { return dt == MX_CPU ? "cpu" : "gpu"; }

/* Validates and infers; fills od, info, the device and the promoted dtype. */
static int prepare(const mx_op_def *def, int nin, mx_tensor *const *in, const void *params,
                   int nout, mx_desc *ind, mx_desc *od, mx_op_info *info, int *dev_type,
                   int *dev_id, int *common, int *sparse) {
  if (def->nin >= 0 ? nin < def->nin_min || nin > def->nin : nin < 1) {
    if (def->nin >= 0 && def->nin_min != def->nin)
      return mx_err(MX_EINVAL, "%s: expects %d to %d input tensors, got %d", def->name,
                    def->nin_min, def->nin, nin);
    return mx_err(MX_EINVAL, "%s: expects %s%d input tensor(s), got %d", def->name,
                  def->nin < 0 ? "at least " : "", def->nin < 0 ? 1 : def->nin, nin);
  }
  if (nin > MX_MAX_IO) return mx_err(MX_EINVAL, "%s: at most %d inputs, got %d", def->name, MX_MAX_IO, nin);
  if (def->params_size && !params) return mx_err(MX_EINVAL, "%s: params missing", def->name);
  int want = mx_op_nout(def, params);
  if (want < 0) return mx_err(MX_EINVAL, "%s: the output count must be 1..%d", def->name, MX_MAX_IO);
  if (nout != want)
    return mx_err(MX_EINVAL, "%s: has %d output(s), %d slot(s) given", def->name, want, nout);

  int dt0 = MX_CPU, di0 = 0;
  if ((def->flags & MX_OPF_CREATION) && params) {
    dt0 = ((const int32_t *)params)[0];
    di0 = ((const int32_t *)params)[1];
    int rc = mx_device_check(def->name, dt0, di0);
    if (rc) return rc;
  }
  int pdt = -1;
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return mx_err(MX_EINVAL, "%s: input %d is NULL", def->name, i + 1);
    if (!(def->dtype_mask & (1u << in[i]->dtype)))
      return mx_err(MX_EINVAL, "%s: input %d has dtype %s, which this op does not support",
                    def->name, i + 1, mx_dtype_name(in[i]->dtype));
    int dt = mx_dev(in[i]), di = in[i]->storage->dev_id;
    if (i == 0 && !(def->flags & MX_OPF_CREATION)) { dt0 = dt; di0 = di; }
    else if (dt != dt0 || di != di0)
      return mx_err(MX_EINVAL, "%s: inputs are on different devices (%s(%d) and %s(%d))",
                    def->name, dev_name(dt0), di0, dev_name(dt), di);
    if (i < 32 && (def->promote >> i & 1u))
      pdt = pdt < 0 ? in[i]->dtype : mx_dtype_promote(pdt, in[i]->dtype);
    *sparse |= in[i]->stype;
    mx_desc_from(&ind[i], in[i]);
  }
  if (pdt >= 0 && def->promote_float && !mx_dtype_is_float(pdt)) pdt = MX_F32;
  int rc = mx_op_check_params(def, params);
  if (rc) return rc;

  mx_desc *inp[MX_MAX_IO];
  for (int i = 0; i < nin; i++) inp[i] = &ind[i];
  /* field by field: memsets of these structs were a tenth of a 1-element op */
  for (int i = 0; i < nout; i++) {
    od[i].ndim = 0;
    od[i].dtype = -1;
    od[i].layout = MX_LAYOUT_ROW_MAJOR;
    od[i].dev_type = dt0;
    od[i].dev_id = di0;
  }
  info->axis = 0;
  info->align_ndim = 0;
  info->rng_draws = 0;
  info->prefer_blocked = false;
  memset(info->axes, 0, sizeof info->axes);
  if ((rc = def->infer(def, params, nin, inp, nout, od, info))) return rc;
  /* inference functions compute shapes from user params: re-check them here, once,
   * so no op can allocate a negative, overflowing or >8-d shape */
  for (int i = 0; i < nout; i++)
    if ((rc = mx_shape_check(def->name, od[i].ndim, od[i].shape, od[i].dtype))) return rc;
  *dev_type = dt0;
  *dev_id = di0;
  *common = pdt;
  return MX_OK;
}

static void release_all(mx_tensor **t, int n) {
  for (int i = 0; i < n; i++) mx_tensor_release(t[i]);
}

/* The first n results made here (new outputs and temporaries for aliased out= slots). */
static void release_made(mx_tensor **res, mx_tensor *const *out, mx_tensor *const *given, int n) {
  for (int j = 0; j < n; j++)
    if (!out[j] || given[j]) mx_tensor_release(res[j]);
}

/* After the push: aliased out= slots get their results copied in, the converted inputs
 * go, and on success out[] holds the results (the given slots where there were any);
 * on failure the first `made` results are released. Returns rc or the copy's error. */
static int finish_outputs(int rc, int nout, mx_tensor **out, mx_tensor **res,
                          mx_tensor **given, mx_tensor **tmp, int ntmp, int made) {
  for (int i = 0; i < nout && !rc; i++)
    if (given[i]) rc = mx_tensor_copy_into(given[i], res[i]);
  release_all(tmp, ntmp);
  if (rc) {
    release_made(res, out, given, made);
    return rc;
  }
  for (int i = 0; i < nout; i++) {
    if (given[i]) {
      mx_tensor_release(res[i]);
      res[i] = given[i];
    }
    out[i] = res[i];
  }
  return MX_OK;
}

/* ---- the kernel the engine runs --------------------------------------------------- */

int mx_kernel_decline(const mx_kctx *ctx0, const void *params, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out) {
  const mx_op_def *def = ctx0->def;
  int nres = nout > mx_op_nout(def, params) ? nout - def->naux : nout; /* aux written last */
  mx_desc ind[MX_MAX_IO], od[MX_MAX_IO];
  for (int i = 0; i < nin; i++) mx_desc_from(&ind[i], in[i]);
  for (int i = 0; i < nres; i++) mx_desc_from(&od[i], out[i]);
  const mx_kernel_entry *ke = NULL;
  int b = mx_kernel_choose(def, ctx0->dev_type, false, ctx0->backend, params, &ctx0->info, nin,
                           ind, nres, od, &ke);
  if (b < 0) return b;
  mx_tensor *use[MX_MAX_IO], *res[2 * MX_MAX_IO];
  bool conv_in[MX_MAX_IO] = {false}, conv_out[2 * MX_MAX_IO] = {false};
  int rc = MX_OK;
  for (int i = 0; i < nin; i++) {
    use[i] = in[i];
    if (!rc && in[i]->layout && !(ke->layouts >> in[i]->layout->code & 1u) &&
        !(def->shape_only >> i & 1u)) {
      if (i >= nin - def->naux)
        rc = mx_err(MX_EINVAL, "%s: the %s kernel declined and the auxiliary input %d is in a "
                    "layout the next kernel does not take", def->name, mx_backend_name(ctx0->backend),
                    i + 1);
      else if (!(rc = mx_tensor_plain(in[i], &use[i])))
        conv_in[i] = true;
    }
  }
  for (int i = 0; i < nout; i++) {
    res[i] = out[i];
    if (!rc && i < nres && out[i]->layout) { /* kernels of the next backends write row-major */
      rc = mx_tensor_new(out[i]->ndim, out[i]->shape, out[i]->dtype, mx_dev(out[i]),
                         out[i]->storage->dev_id, &res[i]);
      conv_out[i] = !rc;
    }
  }
  if (!rc) {
    mx_kctx ctx = *ctx0;
    ctx.backend = b;
    rc = ke->run(&ctx, params, nin, use, nout, res);
    if (rc == MX_DECLINE) rc = mx_kernel_decline(&ctx, params, nin, use, nout, res);
  }
  for (int i = 0; i < nout; i++) {
    if (!conv_out[i]) continue;
    if (!rc) {
      rc = out[i]->layout->from_row_major(res[i], out[i]);
      mx_layout_note_reorder();
    }
    mx_tensor_release(res[i]);
  }
  for (int i = 0; i < nin; i++)
    if (conv_in[i]) mx_tensor_release(use[i]);
  return rc;
}

/* ---- storage types ------------------------------------------------------------------ */

static int invoke(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                  mx_tensor **out, bool ref);

#define STK_DENSE 1 /* invoke_stype: no storage-type kernel, all inputs dense: run dense */

static _Atomic int64_t fallback_count;
int64_t mx_storage_fallbacks(void) { return atomic_load(&fallback_count); }

static const char *sname(int stype) {
  return stype == MX_STYPE_ROW_SPARSE ? "row_sparse" : stype == MX_STYPE_CSR ? "csr" : "default";
}

/* cast_storage's params for each target storage type, filled once from its param
 * descriptor (dispatch knows no op's param struct): its one param, the enum `stype`,
 * whose values are MX_STYPE_* in order. */
static int cast_op = -1;
static _Alignas(8) unsigned char cast_params[3][64];
static pthread_once_t cast_once = PTHREAD_ONCE_INIT;
static void cast_init(void) {
  int op = mx_op_find("cast_storage");
  if (op < 0) return;
  const mx_op_def *def = &mx_ops[op];
  if (def->params_size > sizeof cast_params[0] || def->nparams != 1 ||
      def->params[0].type != MX_PT_ENUM || strcmp(def->params[0].name, "stype") != 0)
    return;
  for (int s = 0; s < 3; s++) {
    memset(cast_params[s], 0, sizeof cast_params[s]);
    int32_t v = s;
    memcpy(cast_params[s] + def->params[0].offset, &v, sizeof v);
  }
  cast_op = op;
}
static int cast_to(mx_tensor *t, int stype, mx_tensor **out) {
  pthread_once(&cast_once, cast_init);
  if (cast_op < 0) return mx_err(MX_EINVAL, "cast_storage is not in the op table");
  return invoke(cast_op, 1, &t, cast_params[stype], 1, out, false);
}

/* MXNet's storage fallback warning (src/common/utils.h LogStorageFallback), once per op
 * and storage-type combination and process, unless MXNET_STORAGE_FALLBACK_LOG_VERBOSE=0. */
static pthread_mutex_t fb_mu = PTHREAD_MUTEX_INITIALIZER;
static void fallback_note(const mx_op_def *def, int nin, mx_tensor *const *in, int nout,
                          mx_tensor *const *out) {
  atomic_fetch_add(&fallback_count, 1);
  const char *v = getenv("MXNET_STORAGE_FALLBACK_LOG_VERBOSE");
  if (v && strcmp(v, "0") == 0) return;
  char sig[512];
  int n = snprintf(sig, sizeof sig, "input storage types = [");
  for (int i = 0; i < nin && n < 400; i++) n += snprintf(sig + n, sizeof sig - (size_t)n, "%s, ", sname(in[i]->stype));
  n += snprintf(sig + n, sizeof sig - (size_t)n, "]\noutput storage types = [");
  for (int i = 0; i < nout && n < 480; i++)
    n += snprintf(sig + n, sizeof sig - (size_t)n, "%s, ", sname(out[i] ? out[i]->stype : 0));
  snprintf(sig + n, sizeof sig - (size_t)n, "]");
  static struct { const mx_op_def *def; uint64_t h; } seen[256];
  static int nseen;
  uint64_t h = 1469598103934665603ULL;
  for (const char *c = sig; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ULL;
  pthread_mutex_lock(&fb_mu);
  bool first = true;
  for (int i = 0; i < nseen && first; i++) first = !(seen[i].def == def && seen[i].h == h);
  if (first && nseen < 256) {
    seen[nseen].def = def;
    seen[nseen++].h = h;
  }
  pthread_mutex_unlock(&fb_mu);
  if (!first) return;
  fprintf(stderr, "Storage type fallback detected:\noperator = %s\n%s\n"
          "The operator with default storage type will be dispatched for execution. You're "
          "seeing this warning message because the operator above is unable to process the "
          "given ndarrays with specified storage types, context and parameter. Temporary dense "
          "ndarrays are generated in order to execute the operator. This does not affect the "
          "correctness of the programme. You can set environment variable "
          "MXNET_STORAGE_FALLBACK_LOG_VERBOSE to 0 to suppress this warning.\n", def->name, sig);
}

/* The storage fallback: sparse inputs converted to dense (cast_storage), the op run
 * dense, and each sparse out= slot written from the dense result. */
static int fallback(int op, const mx_op_def *def, int nin, mx_tensor *const *in,
                    const void *params, int nout, mx_tensor **out, bool ref) {
  mx_tensor *use[MX_MAX_IO], *res[MX_MAX_IO];
  int rc = MX_OK;
  pthread_once(&cast_once, cast_init);
  if (op == cast_op) { /* row_sparse <-> csr: through dense (MXNet has no such cast) */
    mx_tensor *d = NULL;
    if (!in[0]->stype || out[0])
      return mx_err(MX_EINVAL, "cast_storage: no kernel for this storage-type combination");
    rc = cast_to(in[0], MX_STYPE_DEFAULT, &d);
    if (!rc) rc = invoke(op, 1, &d, params, 1, out, ref);
    mx_tensor_release(d);
    return rc;
  }
  fallback_note(def, nin, in, nout, out);
  for (int i = 0; i < nin; i++) {
    use[i] = in[i];
    if (!rc && in[i]->stype) {
      mx_tensor *d = NULL;
      rc = cast_to(in[i], MX_STYPE_DEFAULT, &d);
      use[i] = d;
    }
  }
  for (int i = 0; i < nout; i++) res[i] = out[i] && out[i]->stype ? NULL : out[i];
  if (!rc) rc = invoke(op, nin, use, params, nout, res, ref);
  for (int i = 0; i < nout && !rc; i++) {
    if (!out[i] || !out[i]->stype) continue;
    mx_tensor *o = out[i];
    rc = cast_to(res[i], o->stype, &o);
  }
  for (int i = 0; i < nout; i++) {
    if (out[i] && out[i]->stype) mx_tensor_release(res[i]);
    else if (!rc) out[i] = res[i];
    else if (!out[i]) mx_tensor_release(res[i]);
  }
  for (int i = 0; i < nin; i++)
    if (use[i] != in[i]) mx_tensor_release(use[i]);
  return rc;
}

/* A call with a sparse input, or to an op with storage-type kernels for dense inputs:
 * runs the storage-type kernel that fits (registry.c mx_stype_choose), else falls back
 * to dense (sparse inputs) or returns STK_DENSE (none: the dense path runs). Storage-type
 * kernels take row-major inputs and never decline. */
static int invoke_stype(int op, const mx_op_def *def, int nin, mx_tensor *const *in,
                        const void *params, int nout, mx_tensor **out, bool ref, mx_desc *ind,
                        mx_desc *od, const mx_op_info *info, int dev_type, int dev_id,
                        int common, bool any_sparse) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  int ist[MX_STK_MAX_IN], ost[MX_STK_MAX_OUT];
  const mx_stype_kernel *e = NULL;
  int backend = -1, c = -1;
  if (nin <= MX_STK_MAX_IN && nout <= MX_STK_MAX_OUT) {
    for (int i = 0; i < nin; i++) ist[i] = in[i]->stype;
    for (int i = 0; i < nout; i++) ost[i] = out[i] ? out[i]->stype : -1;
    c = mx_stype_choose(def, ref, params, info, nin, ist, ind, nout, ost, od, &e, &backend);
  }
  if (c < 0) return any_sparse ? fallback(op, def, nin, in, params, nout, out, ref) : STK_DENSE;

  mx_tensor *use[MX_MAX_IO], *tmp[MX_MAX_IO], *res[MX_MAX_IO], *given[MX_MAX_IO];
  int ntmp = 0, rc = MX_OK;
  for (int i = 0; i < nin && !rc; i++) {
    use[i] = in[i];
    mx_tensor *t = NULL;
    if (common >= 0 && i < 32 && (def->promote >> i & 1u) && in[i]->dtype != common)
      rc = mx_tensor_to(in[i], dev_type, dev_id, common, &t);
    else if (in[i]->layout)
      rc = mx_tensor_plain(in[i], &t);
    if (t) use[i] = tmp[ntmp++] = t;
  }
  mx_session *se = mx_session_cur();
  int made = 0;
  for (int i = 0; i < nout && !rc; i++, made++) {
    given[i] = NULL;
    mx_tensor *o = out[i];
    if (o) {
      if (!same_shape(o->ndim, o->shape, od[i].ndim, od[i].shape))
        rc = mx_err(MX_EINVAL, "%s: out= has shape %s but the result has shape %s", def->name,
                    mx_shape_str(a, o->ndim, o->shape), mx_shape_str(b, od[i].ndim, od[i].shape));
      else if (o->dtype != od[i].dtype)
        rc = mx_err(MX_EINVAL, "%s: out= has dtype %s but the result has dtype %s", def->name,
                    mx_dtype_name(o->dtype), mx_dtype_name(od[i].dtype));
      else if (mx_dev(o) != dev_type || o->storage->dev_id != dev_id)
        rc = mx_err(MX_EINVAL, "%s: out= is on another device than the inputs", def->name);
      if (rc) break;
      bool alias = o->layout != NULL;
      for (int j = 0; j < nin && !alias; j++) {
        if (o->stype) alias = o == use[j];
        else if (mx_tensor_overlaps(o, use[j]))
          alias = !(mx_op_inplace(def, params, nin, i) == j && same_region(o, use[j]));
      }
      for (int j = 0; j < i && !alias; j++) alias = out[j] && (out[j] == o || mx_tensor_overlaps(o, out[j]));
      if (!alias) {
        res[i] = o;
        continue;
      }
      given[i] = o;
    }
    if (e->out[i] != MX_STYPE_DEFAULT)
      rc = mx_sparse_new_empty(se, e->out[i], od[i].ndim, od[i].shape, od[i].dtype, dev_type,
                               dev_id, &res[i]);
    else rc = mx_tensor_new_in(se, od[i].ndim, od[i].shape, od[i].dtype, dev_type, dev_id, &res[i]);
    if (rc) break;
  }
  if (!rc) {
    mx_kctx ctx;
    ctx.def = def;
    ctx.backend = backend;
    ctx.dev_type = dev_type;
    ctx.dev_id = dev_id;
    ctx.stream = NULL;
    ctx.session = se;
    ctx.rng_seed = ctx.rng_first = 0;
    ctx.decline = NULL;
    ctx.info = *info;
    rc = mx_engine_push(&ctx, e->k[backend].run, params, def->params_size, nin, use, nout, res);
    if (MX_UNLIKELY(rc != MX_OK) && rc != MX_EASYNC) mx_err_prefix(rc, def->name);
  }
  return finish_outputs(rc, nout, out, res, given, tmp, ntmp, made);
}

/* ---- invoke ------------------------------------------------------------------------ */

static int invoke(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                  mx_tensor **out, bool ref) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (op < 0 || op >= mx_num_ops) return mx_err(MX_EINVAL, "unknown op id %d", op);
  const mx_op_def *def = &mx_ops[op];
  if (nout < 0 || nout > MX_MAX_IO) return mx_err(MX_EINVAL, "%s: %d output slots", def->name, nout);
  mx_desc ind[MX_MAX_IO], od[MX_MAX_IO];
  mx_kctx ctx;
  int dev_type = MX_CPU, dev_id = 0, common = -1, sparse = 0;
  int rc = prepare(def, nin, in, params, nout, ind, od, &ctx.info, &dev_type, &dev_id, &common,
                   &sparse);
  if (rc) return rc;
  /* a sparse out= slot counts as a sparse operand: a dense kernel must never write it */
  for (int i = 0; i < nout; i++) sparse |= out[i] ? out[i]->stype : 0;
  if (MX_UNLIKELY(sparse != 0 || def->stk_dense)) {
    rc = invoke_stype(op, def, nin, in, params, nout, out, ref, ind, od, &ctx.info, dev_type,
                      dev_id, common, sparse != 0);
    if (rc != STK_DENSE) return rc;
    rc = MX_OK;
  }

  /* Inputs the kernel must not see as they are (another dtype than the common one, a
   * layout its backend does not take) are replaced by converted copies: `use` holds
   * what the kernel reads, `tmp` the copies to release. */
  mx_tensor *use[MX_MAX_IO], *tmp[MX_MAX_IO];
  int ntmp = 0;
  for (int i = 0; i < nin; i++) {
    use[i] = in[i];
    if (common >= 0 && i < 32 && (def->promote >> i & 1u) && in[i]->dtype != common) {
      mx_tensor *c;
      if ((rc = mx_tensor_to(in[i], dev_type, dev_id, common, &c))) {
        mx_err_prefix(rc, def->name);
        release_all(tmp, ntmp);
        return rc;
      }
      use[i] = tmp[ntmp++] = c;
      ind[i].dtype = common;
    }
  }
  const mx_kernel_entry *ke = NULL;
  int backend = mx_kernel_choose(def, dev_type, ref, -1, params, &ctx.info, nin, ind, nout, od, &ke);
  if (backend < 0) {
    release_all(tmp, ntmp);
    return backend;
  }
  /* Auxiliary inputs (the last naux: BatchNorm's moving statistics) are written in place
   * by the kernel: they must reach it as they are (no converted copy, whose writes would
   * be lost), and may share no element with another input (the kernel would read what it
   * writes). */
  int aux0 = nin - def->naux;
  for (int i = aux0; MX_UNLIKELY(def->naux > 0) && i < nin; i++) {
    const char *why = NULL;
    if (use[i] != in[i]) why = "has another dtype than the op computes in";
    else if (in[i]->layout && !(ke->layouts >> in[i]->layout->code & 1u))
      why = "is in a layout the kernel does not take";
    for (int j = 0; j < nin && !why; j++)
      if (j != i && mx_tensor_overlaps(in[i], in[j])) why = "shares memory with another input";
    if (why) {
      release_all(tmp, ntmp);
      return mx_err(MX_EINVAL, "%s: auxiliary input %d (updated in place) %s", def->name, i + 1,
                    why);
    }
  }
  mx_out_layout_fn relay_fn = NULL; /* set when the kernel keeps an input's layout */
  for (int i = 0; i < nin; i++) {
    if (MX_UNLIKELY(use[i]->layout != NULL) && (ke->layouts >> use[i]->layout->code & 1u)) {
      relay_fn = ke->out_layout;
      continue;
    }
    if (MX_UNLIKELY(use[i]->layout != NULL) && !(ke->layouts >> use[i]->layout->code & 1u) &&
        !(def->shape_only >> i & 1u)) {
      mx_tensor *c;
      if ((rc = mx_tensor_plain(use[i], &c))) {
        release_all(tmp, ntmp);
        return rc;
      }
      use[i] = tmp[ntmp++] = c;
      ind[i].layout = MX_LAYOUT_ROW_MAJOR;
    }
  }
  if (MX_UNLIKELY(ke->layouts & MX_LAYOUTS_CHOOSE_OUT)) relay_fn = ke->out_layout;

  /* Outputs: new tensors, or the out= slots checked against the inference; a slot that
   * overlaps an input is computed into a temporary and copied in afterwards, unless the
   * op declares that pair in-place safe and the two are the very same elements. */
  mx_tensor *res[MX_MAX_IO];
  mx_tensor *given[MX_MAX_IO]; /* res[i] is a temporary for out[i] when given[i] */
  mx_session *se = mx_session_cur(); /* one thread-local read: ctx and the allocations */
  for (int i = 0; i < nout; i++) {
    given[i] = NULL;
    if (out[i]) {
      mx_tensor *o = out[i];
      if (!same_shape(o->ndim, o->shape, od[i].ndim, od[i].shape))
        rc = mx_err(MX_EINVAL, "%s: out= has shape %s but the result has shape %s", def->name,
                    mx_shape_str(a, o->ndim, o->shape), mx_shape_str(b, od[i].ndim, od[i].shape));
      else if (o->dtype != od[i].dtype)
        rc = mx_err(MX_EINVAL, "%s: out= has dtype %s but the result has dtype %s", def->name,
                    mx_dtype_name(o->dtype), mx_dtype_name(od[i].dtype));
      else if (mx_dev(o) != dev_type || o->storage->dev_id != dev_id)
        rc = mx_err(MX_EINVAL, "%s: out= is on another device than the inputs", def->name);
      if (rc) {
        release_made(res, out, given, i);
        release_all(tmp, ntmp);
        return rc;
      }
      bool alias = o->layout != NULL;
      for (int j = 0; j < nin && !alias; j++) {
        if (!mx_tensor_overlaps(o, use[j])) continue;
        bool ok = mx_op_inplace(def, params, nin, i) == j && same_region(o, use[j]);
        alias = !ok;
      }
      for (int j = 0; j < i && !alias; j++) alias = out[j] && mx_tensor_overlaps(o, out[j]);
      if (MX_LIKELY(!alias)) {
        res[i] = o;
        continue;
      }
      given[i] = o;
    }
    res[i] = NULL;
    /* (a backend's layout allocates on the default device: on another CPU id the
     * output stays row-major, on the inputs' device) */
    rc = MX_UNLIKELY(relay_fn != NULL) && dev_id == 0
             ? relay_fn(def, params, &ctx.info, nin, use, i, &od[i], &res[i]) : MX_OK;
    if (!rc && !res[i])
      rc = mx_tensor_new_in(se, od[i].ndim, od[i].shape, od[i].dtype, dev_type, dev_id, &res[i]);
    if (rc) {
      mx_err_prefix(rc, def->name);
      release_made(res, out, given, i);
      release_all(tmp, ntmp);
      return rc;
    }
  }

  ctx.def = def;
  ctx.backend = backend;
  ctx.dev_type = dev_type;
  ctx.dev_id = dev_id;
  ctx.stream = NULL;
  ctx.session = se;
  ctx.rng_seed = ctx.rng_first = 0;
  ctx.decline = mx_kernel_decline; /* the engine's fallback when the kernel declines */
  if ((def->flags & MX_OPF_RNG) && ctx.info.rng_draws > 0) {
    uint64_t n = (uint64_t)ctx.info.rng_draws;
    ctx.rng_first = mx_random_reserve(n + (n & 1u), &ctx.rng_seed); /* pairs: Box-Muller */
  }
  for (int i = 0; i < nout; i++)
    if (out[i]) mx_storage_touch(out[i]->storage); /* (new results start at version 0) */
  if (MX_LIKELY(def->naux == 0)) {
    rc = mx_engine_push(&ctx, ke->run, params, def->params_size, nin, use, nout, res);
  } else {
    for (int i = 0; i < def->naux; i++) mx_storage_touch(use[aux0 + i]->storage);
    /* the auxiliary inputs go to the engine as writes too (after the outputs): later
     * readers wait for the update, and it waits for earlier readers. The kernel sees
     * nout + naux outputs and writes the auxiliaries through its inputs. */
    mx_tensor *wr[MX_MAX_IO * 2];
    for (int i = 0; i < nout; i++) wr[i] = res[i];
    for (int i = 0; i < def->naux; i++) wr[nout + i] = use[aux0 + i];
    rc = mx_engine_push(&ctx, ke->run, params, def->params_size, nin, use, nout + def->naux, wr);
  }
  /* a kernel that ran inline and failed: its message names the op (shared helpers such
   * as the GEMM do not know it); an earlier op's asynchronous error keeps its own name */
  if (MX_UNLIKELY(rc != MX_OK) && rc != MX_EASYNC) mx_err_prefix(rc, def->name);
  return finish_outputs(rc, nout, out, res, given, tmp, ntmp, nout);
}

int mx_op_invoke(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                 mx_tensor **out) {
  return invoke(op, nin, in, params, nout, out, false);
}

int mx_op_invoke_ref(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                     mx_tensor **out) {
  return invoke(op, nin, in, params, nout, out, true);
}

