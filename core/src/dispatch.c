/* dispatch.c — mx_op_invoke: the one entry point every op goes through.
 *
 * Order: validate arity, inputs, dtypes and devices; infer output shapes/dtypes;
 * allocate (or check `out=` slots); run the kernel for the device. The engine
 * turns the last step into a push with the inputs as reads and the outputs as
 * writes; everything before it stays synchronous so shape errors surface at the
 * Lua line that caused them. */
#include "engine.h"

#include <string.h>

int mx_op_count(void) { return mx_num_ops; }
const char *mx_op_name(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].name : NULL; }
int mx_op_find(const char *name) {
  for (int i = 0; i < mx_num_ops; i++)
    if (strcmp(mx_ops[i].name, name) == 0) return i;
  return -1;
}
size_t mx_op_params_size(int op) {
  return op >= 0 && op < mx_num_ops ? mx_ops[op].params_size : 0;
}
int mx_op_num_inputs(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].nin : 0; }
int mx_op_num_outputs(int op) { return op >= 0 && op < mx_num_ops ? mx_ops[op].nout : 0; }

#define MAX_IO 64

/* An inline loop: memcmp's call costs more than comparing the 1-3 dims of a typical
 * out= tensor (this runs on every out= op). */
static inline bool same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
  if (na != nb) return false;
  for (int i = 0; i < na; i++)
    if (a[i] != b[i]) return false;
  return true;
}

static int invoke(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                  mx_tensor **out, bool ref) {
  char a[MX_SHAPE_BUF], b[MX_SHAPE_BUF];
  if (op < 0 || op >= mx_num_ops) return mx_err(MX_EINVAL, "unknown op id %d", op);
  const mx_op_def *def = &mx_ops[op];
  if (def->nin >= 0 ? nin != def->nin : nin < 1)
    return mx_err(MX_EINVAL, "%s: expects %s%d input tensor(s), got %d", def->name,
                  def->nin < 0 ? "at least " : "", def->nin < 0 ? 1 : def->nin, nin);
  if (nin > MAX_IO) return mx_err(MX_EINVAL, "%s: at most %d inputs, got %d", def->name, MAX_IO, nin);
  if (nout != def->nout)
    return mx_err(MX_EINVAL, "%s: has %d output(s), %d slot(s) given", def->name, def->nout, nout);
  if (def->params_size && !params) return mx_err(MX_EINVAL, "%s: params missing", def->name);

  int dev_type = MX_CPU, dev_id = 0;
  if (def->no_inputs_device && params) {
    dev_type = ((const int32_t *)params)[0];
    dev_id = ((const int32_t *)params)[1];
    int rc = mx_device_check(def->name, dev_type, dev_id);
    if (rc) return rc;
  }
  for (int i = 0; i < nin; i++) {
    if (!in[i]) return mx_err(MX_EINVAL, "%s: input %d is NULL", def->name, i + 1);
    if (!(def->dtype_mask & (1u << in[i]->dtype)))
      return mx_err(MX_EINVAL, "%s: input %d has dtype %s, which this op does not support",
                    def->name, i + 1, mx_dtype_name(in[i]->dtype));
    int dt = mx_dev(in[i]), di = in[i]->storage->dev_id;
    if (i == 0 && !def->no_inputs_device) { dev_type = dt; dev_id = di; }
    else if (dt != dev_type || di != dev_id)
      return mx_err(MX_EINVAL, "%s: inputs are on different devices (%s(%d) and %s(%d))",
                    def->name, dev_type == MX_CPU ? "cpu" : "gpu", dev_id,
                    dt == MX_CPU ? "cpu" : "gpu", di);
  }
  for (int i = 0; i < def->nparams; i++) { /* generic param checks */
    const mx_param_def *pd = &def->params[i];
    if (pd->type == MX_PT_DTYPE) {
      int32_t d = *(const int32_t *)((const char *)params + pd->offset);
      if (d != -1 && !mx_dtype_valid(d))
        return mx_err(MX_EINVAL, "%s: param %s: unknown dtype code %d", def->name, pd->name, d);
    } else if (pd->type >= MX_PT_AXES && pd->type <= MX_PT_INTS) {
      const mx_tuple *t = (const mx_tuple *)((const char *)params + pd->offset);
      if (t->n < -1 || t->n > MX_MAX_DIM || (t->n == -1 && !pd->optional))
        return mx_err(MX_EINVAL, "%s: param %s: list of length %d (at most %d)", def->name,
                      pd->name, t->n, MX_MAX_DIM);
    }
  }

  mx_kernel_fn k = dev_type == MX_GPU ? def->cuda : ref ? def->ref : def->cpu;
  if (!k)
    return mx_err(MX_EDEVICE, "%s: no kernel for %s", def->name,
                  dev_type == MX_GPU ? "the GPU (copy the inputs to the cpu)" : "the cpu");

  mx_out_desc od[MAX_IO];
  memset(od, 0, sizeof(mx_out_desc) * (size_t)nout);
  int rc = def->infer(def, params, nin, in, nout, od);
  if (rc) return rc;
  /* inference functions compute shapes from user params: re-check them here, once,
   * so no op can allocate a negative, overflowing or >8-d shape */
  for (int i = 0; i < nout; i++)
    if ((rc = mx_shape_check(def->name, od[i].ndim, od[i].shape, od[i].dtype))) return rc;

  mx_tensor *res[MAX_IO];
  for (int i = 0; i < nout; i++) {
    if (out[i]) {
      mx_tensor *o = out[i];
      if (!same_shape(o->ndim, o->shape, od[i].ndim, od[i].shape))
        return mx_err(MX_EINVAL, "%s: out= has shape %s but the result has shape %s", def->name,
                      mx_shape_str(a, o->ndim, o->shape), mx_shape_str(b, od[i].ndim, od[i].shape));
      if (o->dtype != od[i].dtype)
        return mx_err(MX_EINVAL, "%s: out= has dtype %s but the result has dtype %s", def->name,
                      mx_dtype_name(o->dtype), mx_dtype_name(od[i].dtype));
      if (mx_dev(o) != dev_type || o->storage->dev_id != dev_id)
        return mx_err(MX_EINVAL, "%s: out= is on another device than the inputs", def->name);
      res[i] = o;
    } else {
      rc = mx_tensor_new(od[i].ndim, od[i].shape, od[i].dtype, dev_type, dev_id, &res[i]);
      if (rc) {
        for (int j = 0; j < i; j++) if (!out[j]) mx_tensor_release(res[j]);
        return rc;
      }
    }
  }
  rc = mx_engine_push(def, k, params, def->params_size, nin, in, nout, res);
  if (rc) {
    for (int j = 0; j < nout; j++) if (!out[j]) mx_tensor_release(res[j]);
    return rc;
  }
  for (int i = 0; i < nout; i++) out[i] = res[i];
  return MX_OK;
}

int mx_op_invoke(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                 mx_tensor **out) {
  return invoke(op, nin, in, params, nout, out, false);
}

int mx_op_invoke_ref(int op, int nin, mx_tensor *const *in, const void *params, int nout,
                     mx_tensor **out) {
  return invoke(op, nin, in, params, nout, out, true);
}
