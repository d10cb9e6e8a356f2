/* runtime_onnx.c — runtime models from ONNX files: the importer (core/src/onnx/,
 * docs/onnx.md) turns the file into the graph layer's IR with its initializers as
 * values, and the model is made from that graph as from a symbol JSON's. */
#include "runtime.h"

#include <stdlib.h>

int mx_rt_model_load_onnx(const char *path, int ninputs, const mx_rt_input *inputs,
                          const mx_rt_options *opt, mx_rt_model **out) {
  if (!out || !path || ninputs < 0 || (ninputs && !inputs))
    return mx_err(MX_EINVAL, "mx_rt_model_load_onnx: NULL argument");
  *out = NULL;
  mx_onnx_input *in = calloc((size_t)ninputs + 1, sizeof *in);
  if (!in) return mx_err(MX_ENOMEM, "mx_rt: out of memory");
  for (int k = 0; k < ninputs; k++) {
    if (!inputs[k].name || inputs[k].ndim < 0 || inputs[k].ndim > MX_RT_MAX_DIM ||
        (inputs[k].ndim && !inputs[k].shape)) {
      free(in);
      return mx_err(MX_EINVAL, "mx_rt: input %d: a name and 0..%d dims are needed", k, MX_RT_MAX_DIM);
    }
    in[k].name = inputs[k].name;
    in[k].desc.ndim = inputs[k].ndim;
    for (int d = 0; d < inputs[k].ndim; d++) in[k].desc.shape[d] = inputs[k].shape[d];
    in[k].desc.dtype = inputs[k].dtype < 0 ? MX_F32 : inputs[k].dtype;
    in[k].desc.dev_type = MX_CPU;
  }
  mx_graph *g = NULL;
  int nout = 0;
  char **names = NULL;
  int rc = mx_onnx_import(path, ninputs, in, &g, &nout, &names);
  free(in);
  for (int k = 0; k < nout; k++) mx_free(names[k]);
  mx_free(names);
  if (rc) return mx_err_prefix(rc, "mx_rt");
  return rt_model_make(g, 0, NULL, NULL, ninputs, inputs, opt, out);
}
