/* runtime_predict.c — MXNet 1.9's C predict API (include/mxnet/c_predict_api.h) on the
 * inference runtime: a PredictorHandle is one context of a model; MXPredCreate* make the
 * model from the JSON text and the .params bytes, MXPredReshape and
 * MXPredCreateMultiThread make more contexts of the same model. MXNet's behaviour is
 * kept (sizes in elements, raw copies in the input's dtype, "<key>_output" for partial
 * outputs, step-wise forward); the differences are in docs/c-api.md. */
#include "mxnet/c_predict_api.h"
#include "runtime.h"

#include <stdlib.h>
#include <string.h>

typedef struct pred {
  mx_rt_ctx *c;
  uint32_t shape[MX_MAX_DIM];
  PredMonitorCallback cb;
  void *cb_user;
} pred;

typedef struct ndlist {
  int n;
  char **keys;
  float **data;
  int *ndim;
  int64_t (*shape)[MX_MAX_DIM];
  uint32_t shape_buf[MX_MAX_DIM];
} ndlist;

const char *MXGetLastError(void) { return mx_last_error(); }

static int fail(int rc) { return rc ? -1 : 0; }

/* The inputs as mx_rt_input: names borrowed, shapes into dims[]. */
static int inputs_of(uint32_t n, const char **keys, const uint32_t *indptr, const uint32_t *data,
                     mx_rt_input *in, int64_t (*dims)[MX_MAX_DIM]) {
  if (n > 64) return mx_err(MX_EINVAL, "MXPred: at most 64 input nodes, %u given", n);
  if (n && (!keys || !indptr || !data)) return mx_err(MX_EINVAL, "MXPred: NULL input list");
  for (uint32_t i = 0; i < n; i++) {
    if (indptr[i + 1] < indptr[i] || indptr[i + 1] - indptr[i] > MX_MAX_DIM)
      return mx_err(MX_EINVAL, "MXPred: input '%s': shape of %d dims (indptr %u..%u)",
                    keys[i] ? keys[i] : "?", (int)(indptr[i + 1] - indptr[i]), indptr[i],
                    indptr[i + 1]);
    in[i].name = keys[i];
    in[i].ndim = (int)(indptr[i + 1] - indptr[i]);
    for (int j = 0; j < in[i].ndim; j++) dims[i][j] = data[indptr[i] + (uint32_t)j];
    in[i].shape = dims[i];
    in[i].dtype = -1;
  }
  return MX_OK;
}

static int wrap(mx_rt_ctx *c, PredictorHandle *out) {
  pred *p = calloc(1, sizeof *p);
  if (!p) {
    mx_rt_ctx_free(c);
    return mx_err(MX_ENOMEM, "MXPred: out of memory");
  }
  p->c = c;
  *out = p;
  return MX_OK;
}

static int create(const char *json, const void *params, int param_size, int dev_type, int dev_id,
                  uint32_t nin, const char **keys, const uint32_t *indptr, const uint32_t *sdata,
                  uint32_t nout, const char **out_keys, uint32_t ndt, const char **dt_names,
                  const int *dts, int nthreads, PredictorHandle *out) {
  if (!out) return mx_err(MX_EINVAL, "MXPredCreate: NULL out");
  if (!json) return mx_err(MX_EINVAL, "MXPredCreate: NULL symbol JSON");
  if (param_size < 0 || (param_size > 0 && !params))
    return mx_err(MX_EINVAL, "MXPredCreate: param_size %d with %s", param_size,
                  params ? "bytes" : "no bytes");
  if (dev_id != 0 && dev_type == MX_CPU)
    return mx_err(MX_EINVAL, "MXPredCreate: cpu device id %d (0 only)", dev_id);
  mx_rt_input in[64];
  int64_t dims[64][MX_MAX_DIM];
  int rc = inputs_of(nin, keys, indptr, sdata, in, dims);
  for (uint32_t i = 0; !rc && i < ndt; i++) {
    if (!dt_names || !dts || !dt_names[i]) rc = mx_err(MX_EINVAL, "MXPredCreateEx: NULL dtype list");
    for (uint32_t k = 0; !rc && k < nin; k++)
      if (strcmp(in[k].name, dt_names[i]) == 0) in[k].dtype = dts[i];
  }
  char **names = NULL;
  if (!rc && nout) {
    if (nout > 256 || !out_keys) rc = mx_err(MX_EINVAL, "MXPredCreatePartialOut: %u output keys", nout);
    else if (!(names = calloc(nout, sizeof *names))) rc = mx_err(MX_ENOMEM, "MXPred: out of memory");
    for (uint32_t k = 0; !rc && k < nout; k++) {
      const char *key = out_keys[k] ? out_keys[k] : "";
      size_t n = strlen(key);
      const char *o = strstr(key, "_output");
      bool has = o && (o[7] == 0 || (o[7] >= '0' && o[7] <= '9'));
      if (!(names[k] = malloc(n + 8))) rc = mx_err(MX_ENOMEM, "MXPred: out of memory");
      else snprintf(names[k], n + 8, "%s%s", key, has ? "" : "_output");
    }
  }
  mx_rt_options opt;
  mx_rt_options_init(&opt);
  opt.dev_type = dev_type;
  opt.dev_id = dev_id;
  opt.noutputs = (int)nout;
  opt.outputs = (const char *const *)names;
  mx_rt_model *m = NULL;
  if (!rc) rc = mx_rt_model_from_memory(json, params, (size_t)param_size, (int)nin, in, &opt, &m);
  for (uint32_t k = 0; names && k < nout; k++) free(names[k]);
  free(names);
  int made = 0;
  for (; !rc && made < nthreads; made++) {
    mx_rt_ctx *c;
    if ((rc = mx_rt_ctx_new(m, &c)) || (rc = wrap(c, &out[made]))) break;
  }
  mx_rt_model_free(m); /* the contexts hold it */
  if (rc)
    for (int k = 0; k < made; k++) MXPredFree(out[k]);
  return rc;
}

int MXPredCreate(const char *symbol_json_str, const void *param_bytes, int param_size,
                 int dev_type, int dev_id, uint32_t num_input_nodes, const char **input_keys,
                 const uint32_t *input_shape_indptr, const uint32_t *input_shape_data,
                 PredictorHandle *out) {
  return fail(create(symbol_json_str, param_bytes, param_size, dev_type, dev_id, num_input_nodes,
                     input_keys, input_shape_indptr, input_shape_data, 0, NULL, 0, NULL, NULL, 1,
                     out));
}

int MXPredCreateEx(const char *symbol_json_str, const void *param_bytes, int param_size,
                   int dev_type, int dev_id, const uint32_t num_input_nodes,
                   const char **input_keys, const uint32_t *input_shape_indptr,
                   const uint32_t *input_shape_data, const uint32_t num_provided_arg_dtypes,
                   const char **provided_arg_dtype_names, const int *provided_arg_dtypes,
                   PredictorHandle *out) {
  return fail(create(symbol_json_str, param_bytes, param_size, dev_type, dev_id, num_input_nodes,
                     input_keys, input_shape_indptr, input_shape_data, 0, NULL,
                     num_provided_arg_dtypes, provided_arg_dtype_names, provided_arg_dtypes, 1,
                     out));
}

int MXPredCreatePartialOut(const char *symbol_json_str, const void *param_bytes, int param_size,
                           int dev_type, int dev_id, uint32_t num_input_nodes,
                           const char **input_keys, const uint32_t *input_shape_indptr,
                           const uint32_t *input_shape_data, uint32_t num_output_nodes,
                           const char **output_keys, PredictorHandle *out) {
  return fail(create(symbol_json_str, param_bytes, param_size, dev_type, dev_id, num_input_nodes,
                     input_keys, input_shape_indptr, input_shape_data, num_output_nodes,
                     output_keys, 0, NULL, NULL, 1, out));
}

int MXPredCreateMultiThread(const char *symbol_json_str, const void *param_bytes, int param_size,
                            int dev_type, int dev_id, uint32_t num_input_nodes,
                            const char **input_keys, const uint32_t *input_shape_indptr,
                            const uint32_t *input_shape_data, int num_threads,
                            PredictorHandle *out) {
  if (num_threads < 1 || num_threads > 4096)
    return fail(mx_err(MX_EINVAL, "MXPredCreateMultiThread: num_threads %d", num_threads));
  return fail(create(symbol_json_str, param_bytes, param_size, dev_type, dev_id, num_input_nodes,
                     input_keys, input_shape_indptr, input_shape_data, 0, NULL, 0, NULL, NULL,
                     num_threads, out));
}

static pred *P(PredictorHandle h) { return h; }

int MXPredReshape(uint32_t num_input_nodes, const char **input_keys,
                  const uint32_t *input_shape_indptr, const uint32_t *input_shape_data,
                  PredictorHandle handle, PredictorHandle *out) {
  if (!handle || !out) return fail(mx_err(MX_EINVAL, "MXPredReshape: NULL handle"));
  mx_rt_ctx *old = P(handle)->c;
  mx_rt_input in[64];
  int64_t dims[64][MX_MAX_DIM];
  int rc = inputs_of(num_input_nodes, input_keys, input_shape_indptr, input_shape_data, in, dims);
  if (rc) return fail(rc);
  /* every input at the old handle's shape unless given anew */
  int nall = mx_rt_num_inputs(old);
  mx_rt_input all[64];
  int64_t adims[64][MX_MAX_DIM];
  bool given[64] = {false};
  for (int k = 0; k < nall && k < 64; k++) {
    all[k].name = old->m->in_name[k];
    all[k].ndim = mx_rt_input_shape(old, k, adims[k], &all[k].dtype);
    all[k].shape = adims[k];
  }
  for (uint32_t i = 0; i < num_input_nodes; i++) {
    int k = mx_rt_input_index(old, in[i].name);
    if (k < 0) return fail(MX_EINVAL);
    all[k].ndim = in[i].ndim;
    all[k].shape = in[i].shape;
    given[k] = true;
  }
  mx_rt_ctx *c;
  if ((rc = mx_rt_ctx_new(old->m, &c))) return fail(rc);
  if ((rc = mx_rt_ctx_reshape(c, nall, all))) {
    mx_rt_ctx_free(c);
    return fail(rc);
  }
  for (int k = 0; k < nall; k++)
    if (!given[k]) memcpy(c->p.in_buf[k], mx_ptr(old->p.in[k]), mx_rt_input_bytes(c, k));
  return fail(wrap(c, out));
}

int MXPredGetOutputShape(PredictorHandle handle, uint32_t index, uint32_t **shape_data,
                         uint32_t *shape_ndim) {
  if (!handle || !shape_data || !shape_ndim) return fail(mx_err(MX_EINVAL, "MXPredGetOutputShape: NULL argument"));
  pred *p = P(handle);
  int64_t s[MX_MAX_DIM];
  int nd = mx_rt_output_shape(p->c, (int)index, s, NULL);
  if (nd < 0 || index > INT32_MAX) return fail(mx_err(MX_EINVAL, "MXPredGetOutputShape: index %u exceeds the %d outputs", index, mx_rt_num_outputs(p->c)));
  for (int j = 0; j < nd; j++) p->shape[j] = (uint32_t)s[j];
  *shape_data = p->shape;
  *shape_ndim = (uint32_t)nd;
  return 0;
}

int MXPredGetOutputType(PredictorHandle handle, uint32_t out_index, int *out_dtype) {
  if (!handle || !out_dtype) return fail(mx_err(MX_EINVAL, "MXPredGetOutputType: NULL argument"));
  int dt;
  if (out_index > INT32_MAX || mx_rt_output_shape(P(handle)->c, (int)out_index, NULL, &dt) < 0)
    return fail(mx_err(MX_EINVAL, "MXPredGetOutputType: index %u exceeds the %d outputs", out_index,
                       mx_rt_num_outputs(P(handle)->c)));
  *out_dtype = dt;
  return 0;
}

static int elems_check(const char *fn, const char *what, size_t bytes, int dtype, uint32_t size) {
  size_t n = bytes / mx_dtype_size(dtype);
  if (n == size) return MX_OK;
  return mx_err(MX_EINVAL, "%s: %s has %zu elements, size %u given", fn, what, n, size);
}

int MXPredSetInput(PredictorHandle handle, const char *key, const float *data, uint32_t size) {
  if (!handle || !key) return fail(mx_err(MX_EINVAL, "MXPredSetInput: NULL argument"));
  mx_rt_ctx *c = P(handle)->c;
  int k = mx_rt_input_index(c, key);
  if (k < 0) return fail(mx_err(MX_EINVAL, "MXPredSetInput: cannot find input key '%s'", key));
  int dt;
  mx_rt_input_shape(c, k, NULL, &dt);
  size_t bytes = mx_rt_input_bytes(c, k);
  int rc = elems_check("MXPredSetInput", key, bytes, dt, size);
  return fail(rc ? rc : mx_rt_set_input(c, k, data, bytes));
}

int MXPredForward(PredictorHandle handle) {
  if (!handle) return fail(mx_err(MX_EINVAL, "MXPredForward: NULL handle"));
  return fail(mx_rt_run(P(handle)->c));
}

int MXPredPartialForward(PredictorHandle handle, int step, int *step_left) {
  if (!handle || !step_left) return fail(mx_err(MX_EINVAL, "MXPredPartialForward: NULL argument"));
  mx_rt_ctx *c = P(handle)->c;
  if (step < 0) return fail(mx_err(MX_EINVAL, "MXPredPartialForward: step %d", step));
  int n = c->p.nops, rc = MX_OK;
  /* a graph of no operator (an input as the output) runs its copies as step 0 */
  if (step < n || (n == 0 && step == 0)) rc = n ? mx_rt_run_steps(c, step, 1) : mx_rt_run(c);
  *step_left = step < n ? n - step - 1 : 0;
  return fail(rc);
}

int MXPredGetOutput(PredictorHandle handle, uint32_t index, float *data, uint32_t size) {
  if (!handle) return fail(mx_err(MX_EINVAL, "MXPredGetOutput: NULL handle"));
  mx_rt_ctx *c = P(handle)->c;
  int dt;
  if (index > INT32_MAX || mx_rt_output_shape(c, (int)index, NULL, &dt) < 0)
    return fail(mx_err(MX_EINVAL, "MXPredGetOutput: output index %u out of range (%d outputs)", index,
                       mx_rt_num_outputs(c)));
  size_t bytes = mx_rt_output_bytes(c, (int)index);
  int rc = elems_check("MXPredGetOutput", c->m->out_name[index], bytes, dt, size);
  return fail(rc ? rc : mx_rt_get_output(c, (int)index, data, bytes));
}

int MXPredFree(PredictorHandle handle) {
  if (!handle) return 0;
  mx_rt_ctx_free(P(handle)->c);
  free(handle);
  return 0;
}

/* The monitor: each array as a tensor over the runtime's copy (no second copy). */
static void monitor_cb(const char *name, int ndim, const int64_t *shape, int dtype,
                       const void *data, void *user) {
  pred *p = user;
  mx_tensor *t;
  if (mx_tensor_from_data((void *)data, ndim, shape, dtype, NULL, NULL, &t) != MX_OK) return;
  p->cb(name, t, p->cb_user);
  mx_tensor_release(t);
}

int MXPredSetMonitorCallback(PredictorHandle handle, PredMonitorCallback callback,
                             void *callback_handle, bool monitor_all) {
  if (!handle) return fail(mx_err(MX_EINVAL, "MXPredSetMonitorCallback: NULL handle"));
  pred *p = P(handle);
  p->cb = callback;
  p->cb_user = callback_handle;
  p->c->monitor_inputs = monitor_all;
  return fail(mx_rt_set_monitor(p->c, callback ? monitor_cb : NULL, p));
}

/* ---- NDList ------------------------------------------------------------------------ */

int MXNDListFree(NDListHandle handle) {
  ndlist *l = handle;
  if (!l) return 0;
  for (int i = 0; i < l->n; i++) {
    if (l->keys) free(l->keys[i]);
    if (l->data) free(l->data[i]);
  }
  free(l->keys);
  free(l->data);
  free(l->ndim);
  free(l->shape);
  free(l);
  return 0;
}

/* A sparse array's values as dense float32 (MXNDListGet hands out dense data): its
 * stored rows (row_sparse) or entries (csr) at their places, zeros elsewhere. */
static void sparse_to_f32(const mx_tensor *t, float *dst, int64_t n) {
  memset(dst, 0, sizeof(float) * (size_t)n);
  int64_t cnt = mx_sparse_count(t);
  if (!cnt) return;
  const void *v = mx_sparse_values(t);
  if (t->stype == MX_STYPE_ROW_SPARSE) {
    int64_t row = mx_sparse_row_elems(t);
    const int64_t *ids = mx_sparse_index(t, 0);
    for (int64_t r = 0; r < cnt; r++)
      mx_convert(dst + ids[r] * row, MX_F32, (const char *)v + (size_t)(r * row) *
                 mx_dtype_size(t->dtype), t->dtype, row);
    return;
  }
  const int64_t *ptr = mx_sparse_index(t, 0), *col = mx_sparse_index(t, 1);
  for (int64_t r = 0; r < t->shape[0]; r++)
    for (int64_t j = ptr[r]; j < ptr[r + 1]; j++)
      dst[r * t->shape[1] + col[j]] = (float)mx_load_f64(v, t->dtype, j);
}

int MXNDListCreate(const char *nd_file_bytes, int nd_file_size, NDListHandle *out,
                   uint32_t *out_length) {
  if (!out || !out_length || !nd_file_bytes || nd_file_size < 0)
    return fail(mx_err(MX_EINVAL, "MXNDListCreate: NULL argument or negative size"));
  int n;
  mx_tensor **arr;
  char **names;
  int rc = mx_nd_load_bytes(nd_file_bytes, (size_t)nd_file_size, &n, &arr, &names);
  if (rc) return fail(mx_err_prefix(rc, "MXNDListCreate"));
  ndlist *l = calloc(1, sizeof *l);
  if (l) {
    l->n = n;
    l->keys = calloc((size_t)n + 1, sizeof *l->keys);
    l->data = calloc((size_t)n + 1, sizeof *l->data);
    l->ndim = calloc((size_t)n + 1, sizeof *l->ndim);
    l->shape = calloc((size_t)n + 1, sizeof *l->shape);
  }
  rc = l && l->keys && l->data && l->ndim && l->shape ? MX_OK : mx_err(MX_ENOMEM, "MXNDListCreate: out of memory");
  for (int i = 0; !rc && i < n; i++) {
    mx_tensor *t = arr[i];
    const char *key = names ? names[i] : "";
    l->keys[i] = malloc(strlen(key) + 1);
    int64_t size = mx_tensor_size(t); /* a sparse array's dense size */
    l->data[i] = malloc((size_t)(size ? size : 1) * sizeof(float));
    if (!l->keys[i] || !l->data[i]) {
      rc = mx_err(MX_ENOMEM, "MXNDListCreate: out of memory");
      break;
    }
    strcpy(l->keys[i], key);
    l->ndim[i] = t->ndim;
    for (int j = 0; j < t->ndim; j++) l->shape[i][j] = t->shape[j];
    if (t->stype) sparse_to_f32(t, l->data[i], size);
    else mx_convert(l->data[i], MX_F32, mx_ptr(t), t->dtype, t->size);
  }
  for (int i = 0; i < n; i++) {
    mx_tensor_release(arr[i]);
    if (names) mx_free(names[i]);
  }
  mx_free(arr);
  mx_free(names);
  if (rc) {
    MXNDListFree(l);
    return fail(rc);
  }
  *out = l;
  *out_length = (uint32_t)n;
  return 0;
}

int MXNDListGet(NDListHandle handle, uint32_t index, const char **out_key, const float **out_data,
                const uint32_t **out_shape, uint32_t *out_ndim) {
  ndlist *l = handle;
  if (!l || !out_key || !out_data || !out_shape || !out_ndim)
    return fail(mx_err(MX_EINVAL, "MXNDListGet: NULL argument"));
  if (index >= (uint32_t)l->n)
    return fail(mx_err(MX_EINVAL, "MXNDListGet: index %u out of range (%d arrays)", index, l->n));
  *out_key = l->keys[index];
  *out_data = l->data[index];
  for (int j = 0; j < l->ndim[index]; j++) l->shape_buf[j] = (uint32_t)l->shape[index][j];
  *out_shape = l->shape_buf;
  *out_ndim = (uint32_t)l->ndim[index];
  return 0;
}
