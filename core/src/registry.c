/* registry.c — the op registry: finding ops (by luamx or MXNet name), their output counts,
 * the generic checks of their params, pure inference on descriptors, the kernel entries
 * each backend registers (the generated registration from the op table's declarations:
 * build/gen/mx_ops_gen.c for libmx, mx_cuda_gen.c for libmx_cuda), the choice of a
 * backend for a call, and the services a running kernel's context offers. */
#include "registry.h"

#include <stdlib.h>
#include <string.h>

int mx_op_count(void) { return mx_num_ops; }
const char *mx_op_name(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].name : NULL; }
uint64_t mx_op_table_hash(void) { return mx_ops_hash; }

int mx_op_find(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < mx_num_ops; i++)
    if (strcmp(mx_ops[i].name, name) == 0) return i;
  for (int i = 0; i < mx_num_ops; i++) /* MXNet's operator names */
    for (const char *const *n = mx_ops[i].mxnet_names; n && *n; n++)
      if (strcmp(*n, name) == 0) return i;
  return -1;
}
size_t mx_op_params_size(int op) {
  return op >= 0 && op < mx_num_ops ? mx_ops[op].params_size : 0;
}
int mx_op_num_inputs(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].nin : 0; }
int mx_op_num_outputs(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].nout : 0; }

int mx_op_inplace(const mx_op_def *def, const void *params, int nin, int k) {
  if (k < 0 || k >= 4) return -1;
  int j = def->inplace_fn ? (params ? def->inplace_fn(params, nin, k) : -1) : def->inplace[k];
  return j >= 0 && j < nin ? j : -1;
}

int mx_op_nout(const mx_op_def *def, const void *params) {
  if (def->nout >= 0) return def->nout;
  if (def->nout_fn) {
    int n = params ? def->nout_fn(params) : -1;
    return n < 1 || n > MX_MAX_IO ? -1 : n;
  }
  const mx_param_def *pd = &def->params[def->nout_param];
  int64_t n = params ? *(const int64_t *)((const char *)params + pd->offset) : 0;
  return n < 1 || n > MX_MAX_IO ? -1 : (int)n;
}

int mx_op_num_outputs_for(int op, const void *params) {
  if (op < 0 || op >= mx_num_ops) return -1;
  return mx_op_nout(&mx_ops[op], params);
}

/* ---- kernels ----------------------------------------------------------------------- */

static void entry_set(mx_kernel_entry *k, const mx_kernel_entry *e) {
  k->supports = e->supports;
  k->out_layout = e->out_layout;
  k->prepack = e->prepack;
  k->layouts = e->layouts | 1u;
  /* last, with release order: a dispatch reading it concurrently sees a complete entry */
  __atomic_store_n(&k->run, e->run, __ATOMIC_RELEASE);
}

int mx_stype_kernel_register(int op, int i, int backend, const mx_kernel_entry *e) {
  if (op < 0 || op >= mx_num_ops)
    return mx_err(MX_EINVAL, "stype_kernel_register: op %d unknown", op);
  if (i < 0 || i >= mx_ops[op].nstk)
    return mx_err(MX_EINVAL, "stype_kernel_register: %s has no storage-type entry %d",
                  mx_ops[op].name, i);
  if (backend < 0 || backend >= MX_NUM_BACKENDS || backend == MX_BACKEND_DNNL)
    return mx_err(MX_EINVAL, "stype_kernel_register: backend %d takes no sparse kernels", backend);
  if (!e || !e->run)
    return mx_err(MX_EINVAL, "stype_kernel_register: %s: no kernel function", mx_ops[op].name);
  entry_set(&mx_ops[op].stk[i].k[backend], e);
  return MX_OK;
}

int mx_kernel_register(int op, int backend, const mx_kernel_entry *e) {
  if (op < 0 || op >= mx_num_ops) return mx_err(MX_EINVAL, "kernel_register: op %d unknown", op);
  if (backend < 0 || backend >= MX_NUM_BACKENDS)
    return mx_err(MX_EINVAL, "kernel_register: backend %d unknown", backend);
  if (!e || !e->run)
    return mx_err(MX_EINVAL, "kernel_register: %s: no kernel function", mx_ops[op].name);
  mx_kernel_entry *k = &mx_ops[op].k[backend];
  entry_set(k, e);
  return MX_OK;
}

int mx_stype_choose(const mx_op_def *def, bool ref, const void *params, const mx_op_info *info,
                    int nin, const int *ist, const mx_desc *in, int nout, const int *ost,
                    const mx_desc *out, const mx_stype_kernel **stk, int *backend) {
  static const int8_t order[] = {MX_BACKEND_CPU, MX_BACKEND_REF};
  if (nin > MX_STK_MAX_IN || nout > MX_STK_MAX_OUT) return -1;
  for (int c = 0; c < def->nstk; c++) {
    const mx_stype_kernel *e = &def->stk[c];
    bool fits = !e->applies || e->applies(params, nin, in);
    for (int i = 0; i < nin && fits; i++) fits = e->in[i] == ist[i];
    for (int i = 0; i < nout && fits; i++) fits = ost[i] < 0 || e->out[i] == ost[i];
    if (!fits) continue;
    for (int b = ref ? 1 : 0; b < 2; b++) {
      const mx_kernel_entry *k = &e->k[order[b]];
      const char *why = NULL;
      if (k->run && (!k->supports || k->supports(def, params, info, nin, in, nout, out, &why))) {
        *stk = e;
        *backend = order[b];
        return c;
      }
    }
  }
  return -1;
}

int mx_op_stype_count(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].nstk : 0; }

static const mx_stype_kernel *stk_at(int op, int i) {
  return op >= 0 && op < mx_num_ops && i >= 0 && i < mx_ops[op].nstk ? &mx_ops[op].stk[i] : NULL;
}
uint32_t mx_op_stype_backends(int op, int i) {
  const mx_stype_kernel *e = stk_at(op, i);
  uint32_t m = 0;
  for (int b = 0; e && b < MX_NUM_BACKENDS; b++)
    if (e->k[b].run) m |= 1u << b;
  return m;
}
const char *mx_op_stype_name(int op, int i) {
  const mx_stype_kernel *e = stk_at(op, i);
  return e ? e->name : NULL;
}
int mx_op_stype_sig(int op, int i, int *ins, int *outs) {
  const mx_stype_kernel *e = stk_at(op, i);
  if (!e || !ins || !outs) return -1;
  int nin = mx_ops[op].nin;
  for (int k = 0; k < MX_STK_MAX_IN; k++) ins[k] = k < nin ? e->in[k] : -1;
  int nout = mx_ops[op].nout;
  for (int k = 0; k < MX_STK_MAX_OUT; k++) outs[k] = k < nout ? e->out[k] : -1;
  return nin;
}

uint32_t mx_op_backends(int op) {
  if (op < 0 || op >= mx_num_ops) return 0;
  uint32_t m = 0;
  for (int b = 0; b < MX_NUM_BACKENDS; b++)
    if (mx_ops[op].k[b].run) m |= 1u << b;
  return m;
}

const char *mx_backend_name(int backend) {
  static const char *const names[MX_NUM_BACKENDS] = {"ref", "cpu", "dnnl", "cuda"};
  return backend >= 0 && backend < MX_NUM_BACKENDS ? names[backend] : NULL;
}

bool mx_kernel_picks_layout(int op) {
  if (op < 0 || op >= mx_num_ops) return false;
  for (int b = 0; b < MX_NUM_BACKENDS; b++)
    if (mx_ops[op].k[b].run && mx_ops[op].k[b].out_layout) return true;
  return false;
}

int mx_kernel_none(const mx_op_def *def, int dev_type, const char *why) {
  if (dev_type == MX_GPU)
    return mx_err(MX_EDEVICE, "%s: no GPU kernel for this call%s%s (copy the inputs to the cpu)",
                  def->name, why ? ": " : "", why ? why : "");
  return mx_err(MX_EDEVICE, "%s: no cpu kernel for this call%s%s", def->name, why ? ": " : "",
                why ? why : "");
}

/* ---- kernel context services --------------------------------------------------------- */

static _Thread_local void *ws_buf;
static _Thread_local size_t ws_cap;

void *mx_kctx_workspace(const mx_kctx *ctx, size_t nbytes) {
  (void)ctx;
  if (nbytes <= ws_cap) return ws_buf;
  void *p = NULL;
  size_t cap = nbytes < 4096 ? 4096 : nbytes + nbytes / 4;
  if (posix_memalign(&p, MX_ALIGN, cap) != 0) return NULL;
  free(ws_buf);
  ws_buf = p;
  ws_cap = cap;
  return p;
}

int mx_kctx_threads(const mx_kctx *ctx) {
  (void)ctx;
  return mx_threads_available();
}

/* ---- params and inference -------------------------------------------------------------- */

int mx_op_check_params(const mx_op_def *def, const void *params) {
  for (int i = 0; i < def->nparams; i++) {
    const mx_param_def *pd = &def->params[i];
    if (pd->type == MX_PT_DTYPE) {
      int32_t d = *(const int32_t *)((const char *)params + pd->offset);
      if (d != -1 && !mx_dtype_valid(d))
        return mx_err(MX_EINVAL, "%s: param %s: unknown dtype code %d", def->name, pd->name, d);
    } else if (pd->type >= MX_PT_AXES && pd->type <= MX_PT_INTS) {
      /* shapes and axes: one entry per dim; other int lists (pad_width: two per dim)
       * up to the tuple's capacity, their inference checks them against the rank */
      const mx_tuple *t = (const mx_tuple *)((const char *)params + pd->offset);
      int cap = pd->type == MX_PT_INTS ? (int)(sizeof t->v / sizeof t->v[0]) : MX_MAX_DIM;
      if (t->n < -1 || t->n > cap || (t->n == -1 && !pd->optional))
        return mx_err(MX_EINVAL, "%s: param %s: list of length %d (at most %d)", def->name,
                      pd->name, t->n, cap);
    } else if (pd->type == MX_PT_FLOATS) {
      const mx_ftuple *t = (const mx_ftuple *)((const char *)params + pd->offset);
      int cap = (int)(sizeof t->v / sizeof t->v[0]);
      if (t->n < -1 || t->n > cap || (t->n == -1 && !pd->optional))
        return mx_err(MX_EINVAL, "%s: param %s: list of length %d (at most %d)", def->name,
                      pd->name, t->n, cap);
    } else if (pd->type == MX_PT_ENUM) {
      int32_t v = *(const int32_t *)((const char *)params + pd->offset);
      int n = 0;
      while (pd->values && pd->values[n]) n++;
      if (v < 0 || v >= n)
        return mx_err(MX_EINVAL, "%s: param %s: enum value %d out of range (0..%d)", def->name,
                      pd->name, v, n - 1);
    }
  }
  return MX_OK;
}

/* ---- inference on descriptors -------------------------------------------------------- */

int mx_op_infer(int op, const void *params, int nin, mx_desc *in, int nout, mx_desc *out) {
  if (op < 0 || op >= mx_num_ops) return mx_err(MX_EINVAL, "unknown op id %d", op);
  const mx_op_def *def = &mx_ops[op];
  if (!in && nin) return mx_err(MX_EINVAL, "%s: descriptors missing", def->name);
  if (def->nin >= 0 ? nin < def->nin_min || nin > def->nin : nin < 1 || nin > MX_MAX_IO)
    return mx_err(MX_EINVAL, "%s: %d input descriptors for an op of %d to %d inputs", def->name,
                  nin, def->nin_min, def->nin);
  if (def->params_size && !params) return mx_err(MX_EINVAL, "%s: params missing", def->name);
  int want = mx_op_nout(def, params);
  if (want != nout)
    return mx_err(MX_EINVAL, "%s: has %d output(s), %d descriptor(s) given", def->name, want, nout);
  int rc = mx_op_check_params(def, params);
  if (rc) return rc;
  /* float16 data of the norm ops: inferred as float32 (mx.nd computes it so), given back
   * as float16 */
  bool half = (def->flags & (MX_OPF_HALF_ALL | MX_OPF_HALF_OUT)) && nin > 0 && in[0].dtype == MX_F16;
  mx_desc hin[MX_MAX_IO];
  if (half) {
    if (nin > MX_MAX_IO) return mx_err(MX_EINVAL, "%s: too many inputs", def->name);
    for (int i = 0; i < nin; i++) {
      hin[i] = in[i];
      if (in[i].dtype != MX_F16) continue;
      if (i > 0 && (def->flags & MX_OPF_HALF_OUT))
        return mx_err(MX_EINVAL, "%s: float16 data takes float32 gamma, beta and moving "
                      "statistics (as MXNet's), input %d is float16", def->name, i + 1);
      hin[i].dtype = MX_F32;
    }
    in = hin;
  }
  bool unknown = false;
  for (int i = 0; i < nin; i++) {
    if (in[i].ndim < 0 || in[i].dtype < 0) unknown = true;
    for (int d = 0; d < in[i].ndim && d < MX_MAX_DIM; d++)
      if (in[i].shape[d] < 0) unknown = true;
    if (in[i].ndim > MX_MAX_DIM)
      return mx_err(MX_EINVAL, "%s: input %d has %d dims (at most %d)", def->name, i + 1,
                    in[i].ndim, MX_MAX_DIM);
    if (in[i].dtype >= 0 && !(def->dtype_mask & (1u << in[i].dtype)))
      return mx_err(MX_EINVAL, "%s: input %d has dtype %s, which this op does not support",
                    def->name, i + 1, mx_dtype_name(in[i].dtype));
  }
  for (int i = 0; i < nout; i++) {
    memset(&out[i], 0, sizeof out[i]);
    out[i].ndim = -1;
    out[i].dtype = -1;
  }
  /* an op whose inference cannot take unknown dims gives unknown outputs until its
   * inputs are known (sym.infer_shape's partial answer) */
  if (unknown && !(def->flags & MX_OPF_PARTIAL)) return MX_OK;
  mx_desc *inp[MX_MAX_IO];
  for (int i = 0; i < nin; i++) inp[i] = &in[i];
  mx_op_info info;
  memset(&info, 0, sizeof info);
  rc = def->infer(def, params, nin, inp, nout, out, &info);
  if (rc || !half) return rc;
  for (int k = 0; k < nout; k++)
    if (out[k].dtype == MX_F32 && (k == 0 || (def->flags & MX_OPF_HALF_ALL))) out[k].dtype = MX_F16;
  return MX_OK;
}
