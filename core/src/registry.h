/* registry.h — the op registry's internal side (registry.c): what dispatch, the graph
 * layer and the string-attribute parser ask of the op table beyond mx.h. Not installed.
 * The table itself (mx_ops[], struct mx_op_def) and kernel registration are in
 * internal.h, which kernels share. */
#ifndef MX_REGISTRY_H
#define MX_REGISTRY_H

#include "internal.h"

/* At most this many inputs or outputs per op call. */
#define MX_MAX_IO 64

/* The generic checks of a filled params struct (dtype codes, tuple lengths, enum
 * ranges), naming the op and the param. */
int mx_op_check_params(const mx_op_def *def, const void *params);

/* Whether some backend's kernel of op may choose its outputs' layout (its entry has an
 * out-layout function): the graph executor leaves such outputs to the op instead of
 * planning row-major buffers for them. */
bool mx_kernel_picks_layout(int op);

/* After the backend of ctx declined the call (kernels return MX_DECLINE; whoever runs
 * kernels calls this through ctx->decline: the engine, the inference runtime): the next
 * backend of the registry's order that supports it runs it, on copies of the inputs and
 * outputs in the layouts it takes (results converted back into the outputs' layouts).
 * dispatch.c. */
int mx_kernel_decline(const mx_kctx *ctx, const void *params, int nin, mx_tensor *const *in,
                      int nout, mx_tensor *const *out);

/* The storage-type entry (op table `stypes`) that runs a call whose inputs have storage
 * types ist and whose out= slots have ost (-1: a new output): the first whose input
 * storage types are ist, whose output storage types fit ost, that applies to params and
 * that a CPU backend supports (CPU, then REF; ref: REF only). Returns its index and sets
 * *stk and *backend; -1 when none fits (dispatch then falls back to dense). */
int mx_stype_choose(const mx_op_def *def, bool ref, const void *params, const mx_op_info *info,
                    int nin, const int *ist, const mx_desc *in, int nout, const int *ost,
                    const mx_desc *out, const mx_stype_kernel **stk, int *backend);

/* The error when no backend takes a call (why: the last refusal, or NULL). */
int mx_kernel_none(const mx_op_def *def, int dev_type, const char *why);

/* The backend that runs a call on dev_type, after `after` (-1: from the start) in the
 * device's order (CPU: DNNL, CPU, REF; GPU: CUDA), that is registered and supports it;
 * ref forces REF. Sets *ke; on none, an error naming the op and the refusal. Inline: it
 * is on every op's path. */
static inline int mx_kernel_choose(const mx_op_def *def, int dev_type, bool ref, int after,
                                   const void *params, const mx_op_info *info, int nin,
                                   const mx_desc *in, int nout, const mx_desc *out,
                                   const mx_kernel_entry **ke) {
  static const int8_t cpu_order[] = {MX_BACKEND_DNNL, MX_BACKEND_CPU, MX_BACKEND_REF};
  static const int8_t gpu_order[] = {MX_BACKEND_CUDA};
  const int8_t *order = dev_type == MX_GPU ? gpu_order : cpu_order;
  int n = dev_type == MX_GPU ? 1 : 3, i = ref && dev_type != MX_GPU ? 2 : 0;
  if (after >= 0) {
    while (i < n && order[i] != after) i++;
    i++;
  }
  const char *why = NULL;
  for (; i < n; i++) {
    const mx_kernel_entry *e = &def->k[order[i]];
    if (e->run && (!e->supports || e->supports(def, params, info, nin, in, nout, out, &why))) {
      *ke = e;
      return order[i];
    }
  }
  return mx_kernel_none(def, dev_type, why);
}

#endif
